import Foundation
import Testing
import TilepackCore
import TilepackRemote
import TilepackStorage
import TilepackTestSupport
import TilepackUpdate

/// The sync plan / transfer / apply split (issue 44, Specs/updates.md §8.1): a transport that
/// delivers the plan's units out of order, one of them twice, one with a wrong byte, and dies
/// between units; the sync started again asks for no unit that arrived, fetches the wrong one
/// again, and the result is v2 tile for tile. An app's downloader saves units as files, delivered
/// across process restarts; a missing one is named.
@Suite struct SyncTransferTests {
    /// Delivers units from the published bytes: in reverse order, the first one twice, the second
    /// with its first byte flipped (once), and throws after `dieAfter` deliveries.
    final class HostileTransport: SyncTransport, @unchecked Sendable {
        let object: Data
        let asked = Locked<[Int]>([])
        let dieAfter: Locked<Int?>
        let corrupted = Locked<Int?>(nil)
        init(object: Data, dieAfter: Int?) {
            self.object = object
            self.dieAfter = Locked(dieAfter)
        }
        struct Died: Error {}

        func transfer(_ units: [TransferUnit], of plan: SyncPlan, deliver: (TransferUnit, Data) throws -> Void) throws {
            asked.withLock { $0 += units.map(\.id) }
            var delivered = 0
            for (n, unit) in units.reversed().enumerated() {
                if let limit = dieAfter.withLock({ $0 }), delivered >= limit { throw Died() }
                var data = object.subdata(in: unit.range)
                let corrupt =
                    n == 1
                    && corrupted.withLock { first -> Bool in
                        guard first == nil else { return false }
                        first = unit.id
                        return true
                    }
                if corrupt { data[data.startIndex] ^= 0xFF }
                try deliver(unit, data)
                if n == 0 { try deliver(unit, data) }  // a duplicate
                delivered += 1
            }
        }
    }

    @Test(arguments: ["v2.pmtiles", "v2.tilepack"])
    func unitsOutOfOrderDuplicatedCorruptedAndAKillBetweenThemEndAtTheNewVersionFetchingNoUnitTwice(_ name: String) throws {
        let setup = try SyncTests.Setup()
        let path = name.hasSuffix(".pmtiles") ? setup.v2.pmtiles : setup.v2.bundle
        let local = name.hasSuffix(".pmtiles") ? setup.v1.pmtiles : setup.v1.bundle
        let publisher = try SyncTests.Publisher(files: [
            name: SyncTests.fileBytes(path)!, name + ".tpindex": SyncTests.fileBytes(path + ".tpindex")!,
        ])
        defer { publisher.server.stop() }
        let before = SyncTests.fileBytes(local)
        let transport = HostileTransport(object: SyncTests.fileBytes(path)!, dieAfter: 3)
        #expect(throws: OperationError.self) {
            try ArchiveSync.run(local: local, url: publisher.url(name), options: SyncTests.noRetry(), transport: transport)
        }
        #expect(SyncTests.fileBytes(local) == before)
        let first = transport.asked.withLock { $0 }
        #expect(first.count > 6, "the plan has \(first.count) units")
        let arrived = Set(first.reversed().prefix(3))
        // Started again (a new process: the journal is all it has).
        transport.dieAfter.withLock { $0 = nil }
        transport.asked.withLock { $0 = [] }
        let report = try ArchiveSync.run(local: local, url: publisher.url(name), options: SyncTests.noRetry(), transport: transport)
        let second = transport.asked.withLock { $0 }
        let corrupted = try #require(transport.corrupted.withLock { $0 })
        #expect(arrived.contains(corrupted))
        // No unit that arrived is asked again but the corrupted one, asked once more.
        #expect(second.filter { arrived.contains($0) } == [corrupted], "asked again: \(second)")
        #expect(Set(second).count == second.count)
        #expect(Set(first).union(second).count == first.count)
        #expect(report.notes.contains { $0.contains("unit \(corrupted) (") && $0.contains("fetched again") }, "\(report.notes)")
        #expect(report.planUnits >= first.count)  // (a unit in the first 16 KiB was staged with them)
        #expect(try SyncTests.identity(local) == SyncTests.identity(path))
        #expect(!FileManager.default.fileExists(atPath: local + ".tpsync"))
    }

    /// An app: the plan made without fetching a tile, kept as JSON, its units saved as files by its
    /// own downloader (one missing: named), then applied.
    @Test func anAppsDownloaderSavesUnitsAsFilesAndAMissingOneIsNamed() throws {
        let setup = try SyncTests.Setup()
        let (publisher, local) = (try SyncTests.publisher(setup), setup.v1.pmtiles)
        defer { publisher.server.stop() }
        let url = publisher.url("v2.pmtiles")
        let plan = try ArchiveSync.plan(local: local, url: url, options: SyncTests.noRetry())
        #expect(plan.units.count > 2)
        #expect(Double(plan.fetchBytes) <= 1.15 * Double(plan.changedBytes))
        let kept = try SyncPlan.decode(plan.encoded(), name: "plan.json")
        let folder = try TemporaryDirectory("sync-units")
        let delivered = DeliveredUnits(folder: folder.path)
        let object = SyncTests.fileBytes(setup.v2.pmtiles)!
        let missing = kept.units.last!
        for unit in kept.units.dropLast() { try object.subdata(in: unit.range).write(to: URL(fileURLWithPath: delivered.path(of: unit))) }
        let servedBefore = publisher.served.withLock { $0.count }
        do {
            _ = try ArchiveSync.run(local: local, url: url, options: SyncTests.noRetry(), transport: delivered)
            Issue.record("a missing unit was not named")
        } catch {
            #expect("\(error)".contains("unit \(missing.id) (\(missing.rangeHeader)) was not delivered"), "\(error)")
        }
        try object.subdata(in: missing.range).write(to: URL(fileURLWithPath: delivered.path(of: missing)))
        let report = try ArchiveSync.run(local: local, url: url, options: SyncTests.noRetry(), transport: delivered)
        #expect(report.planUnits == kept.units.count)
        #expect(try SyncTests.identity(local) == SyncTests.identity(setup.v2.pmtiles))
        // No tile came over HTTP: only the first request of each apply (its first 16 KiB, which pin the object).
        let served = publisher.served.withLock { Array($0.dropFirst(servedBefore)) }
        #expect(served.allSatisfy { $0.lowerBound == 0 }, "\(served)")
    }
}
