import Foundation
import Testing
import TilepackHTTP

/// The line a transport keeps for each host (``HostLine``): first come first served, at most one
/// running exchange per connection, a hundred per connection once the host multiplexes.
@Suite struct HostLineTests {
    final class Item {
        let name: String
        init(_ name: String) { self.name = name }
    }

    /// A line and what it did, step by step (`#expect` cannot hold a mutating call).
    struct Line {
        var line: HostLine<Item>
        init(connections: Int) { line = HostLine(connections: connections) }
        mutating func admit(_ name: String, _ host: String = "a") -> Bool { line.admit(Item(name), host: host) }
        mutating func finished(_ host: String = "a") -> [String] { line.finished(host: host).map(\.name) }
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
        var handed: [String] = []
        for _ in 0..<2 { handed += line.finished() }
        #expect(handed == ["2", "3"])
        // One that comes now waits behind those already waiting.
        let late = line.admit("late")
        #expect(!late)
        handed = []
        for _ in 0..<5 { handed += line.finished() }
        #expect(handed == ["4", "5", "late"])
        // Every place free again: the next runs at once.
        let again = line.admit("again")
        #expect(again)
        let onB = line.finished("b")
        #expect(onB.isEmpty)
    }

    @Test func aRemovedItemNeverRuns() {
        var line = HostLine<Item>(connections: 1)
        let (running, cancelled, next) = (Item("running"), Item("cancelled"), Item("next"))
        let admitted = [running, cancelled, next].map { line.admit($0, host: "a") }
        #expect(admitted == [true, false, false])
        let removed = [line.remove(cancelled, host: "a"), line.remove(cancelled, host: "a"), line.remove(running, host: "a")]
        #expect(removed == [true, false, false], "removed once; a running item is not in the line")
        let handed = line.finished(host: "a").map(\.name)
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
        let next = line.finished()
        #expect(next == ["200"])
    }

    @Test func drainingEmptiesEveryLine() {
        var line = HostLine<Item>(connections: 1)
        for name in ["a0", "a1", "a2"] { _ = line.admit(Item(name), host: "a") }
        for name in ["b0", "b1"] { _ = line.admit(Item(name), host: "b") }
        let drained = line.drain().map(\.name).sorted()
        #expect(drained == ["a1", "a2", "b1"])
        #expect(line.waiting(for: "a") == 0 && line.waiting(for: "b") == 0)
        let handed = line.finished(host: "a")
        #expect(handed.isEmpty)
    }

    /// The handed-on part of a long line is dropped as it goes, the order kept.
    @Test func aLongLineKeepsItsOrder() {
        var line = Line(connections: 1)
        for i in 0..<1000 { _ = line.admit("\(i)") }
        var order: [String] = []
        for _ in 0..<1000 { order += line.finished() }
        #expect(order == (1..<1000).map { "\($0)" })
    }
}
