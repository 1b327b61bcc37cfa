import Foundation
import Testing
import TilepackHTTP

/// The line a transport keeps for each host (``HostLine``): first come first served, at most one
/// running exchange per connection, a hundred per connection once the host multiplexes, and each
/// place given back once.
@Suite struct HostLineTests {
    final class Item {
        let name: String
        init(_ name: String) { self.name = name }
    }

    /// A line of named items, step by step (`#expect` cannot hold a mutating call).
    struct Line {
        var line: HostLine<Item>
        var items: [String: Item] = [:]
        init(connections: Int) { line = HostLine(connections: connections) }

        mutating func admit(_ name: String, _ host: String = "a") -> Bool {
            let item = Item(name)
            items[name] = item
            return line.admit(item, host: host)
        }
        /// What runs now that `name` ended.
        mutating func finished(_ name: String, _ host: String = "a") -> [String] {
            line.finished(items[name]!, host: host).map(\.name)
        }
        mutating func multiplexes(_ host: String = "a") -> [String] { line.multiplexes(host: host).map(\.name) }
    }

    @Test func hostsAreSchemeHostAndPort() {
        #expect(HostLine<Item>.host(of: URL(string: "https://Tiles.Example.com/a/b?c")!) == "https://tiles.example.com:443")
        #expect(HostLine<Item>.host(of: URL(string: "http://127.0.0.1:8080/x")!) == "http://127.0.0.1:8080")
        #expect(HostLine<Item>.host(of: URL(string: "http://example.com/x")!) == "http://example.com:80")
    }

    @Test func beyondTheConnectionsItemsWaitAndRunInTheOrderTheyCame() {
        var line = Line(connections: 2)
        let admitted = (0..<6).map { line.admit("\($0)") }
        #expect(admitted == [true, true, false, false, false, false])
        // Another host has places of its own.
        let other = line.admit("other", "b")
        #expect(other)
        #expect(line.line.waiting(for: "a") == 4)
        var handed = line.finished("1") + line.finished("0")
        #expect(handed == ["2", "3"])
        // One that comes now waits behind those already waiting.
        let late = line.admit("late")
        #expect(!late)
        handed = line.finished("2") + line.finished("3") + line.finished("4")
        #expect(handed == ["4", "5", "late"])
        handed = line.finished("5") + line.finished("late")
        #expect(handed.isEmpty)
        // Every place free again: the next runs at once.
        let again = line.admit("again")
        #expect(again)
        let onB = line.finished("other", "b")
        #expect(onB.isEmpty)
    }

    /// A transport may tell an end twice (a cancel racing a hand-on), or tell the end of an item
    /// that never ran: a place is given back once, and only by the item that held it.
    @Test func aPlaceIsGivenBackOnceAndOnlyByItsHolder() {
        var line = Line(connections: 1)
        let admitted = ["running", "next", "after"].map { line.admit($0) }
        #expect(admitted == [true, false, false])
        let byWaiting = line.finished("after")
        #expect(byWaiting.isEmpty, "an item that never ran gives nothing back")
        let first = line.finished("running")
        #expect(first == ["next"])
        let again = line.finished("running")
        #expect(again.isEmpty, "told twice, the place is given back once")
        let last = line.finished("next")
        #expect(last == ["after"])
    }

    @Test func aRemovedItemNeverRuns() {
        var line = HostLine<Item>(connections: 1)
        let (running, cancelled, next) = (Item("running"), Item("cancelled"), Item("next"))
        let admitted = [running, cancelled, next].map { line.admit($0, host: "a") }
        #expect(admitted == [true, false, false])
        let removed = [line.remove(cancelled, host: "a"), line.remove(cancelled, host: "a"), line.remove(running, host: "a")]
        #expect(removed == [true, false, false], "removed once; a running item is not in the line")
        let handed = line.finished(running, host: "a").map(\.name)
        #expect(handed == ["next"])
    }

    @Test func aHostThatMultiplexesTakesAHundredPerConnection() {
        var line = Line(connections: 2)
        let admitted = (0..<250).filter { line.admit("\($0)") }
        #expect(admitted == [0, 1])
        let now = line.multiplexes()
        #expect(now == (2..<200).map { "\($0)" })
        let again = line.multiplexes()
        #expect(again.isEmpty)
        #expect(line.line.waiting(for: "a") == 50)
        let next = line.finished("0")
        #expect(next == ["200"])
    }

    @Test func drainingEmptiesEveryLine() {
        var line = Line(connections: 1)
        for name in ["a0", "a1", "a2"] { _ = line.admit(name, "a") }
        for name in ["b0", "b1"] { _ = line.admit(name, "b") }
        let drained = line.line.drain().map(\.name).sorted()
        #expect(drained == ["a1", "a2", "b1"])
        #expect(line.line.waiting(for: "a") == 0 && line.line.waiting(for: "b") == 0)
        let handed = line.finished("a0")
        #expect(handed.isEmpty)
    }

    /// The handed-on part of a long line is dropped as it goes, the order kept.
    @Test func aLongLineKeepsItsOrder() {
        var line = Line(connections: 1)
        for i in 0..<1000 { _ = line.admit("\(i)") }
        var order: [String] = []
        for i in 0..<1000 { order += line.finished("\(i)") }
        #expect(order == (1..<1000).map { "\($0)" })
    }
}
