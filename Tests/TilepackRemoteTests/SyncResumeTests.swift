import Foundation
import Testing
import TilepackCore
import TilepackRemote
import TilepackStorage
import TilepackTestSupport

/// Issue 44 item 2: a resume is bound to what was fetched (the object's ETag and length and its
/// tile index's identity), never to its URL: the same object through another host or port
/// resumes; an object no ETag pins resumes by its index; one with neither is not resumed, said so.
@Suite struct SyncResumeTests {
    /// The connection drops after `after` tile ranges (requests for a single range past byte 0).
    static func dropping(after: Int, _ publisher: SyncTests.Publisher, etag: Bool = true) {
        let answered = Locked(0)
        publisher.fault.withLock {
            $0 = { request, range, data in
                // Without an ETag: every answer as the default one, less its ETag.
                func reply() -> LoopbackHTTPServer.Reply? {
                    guard !etag else { return nil }
                    guard let range else { return .respond(status: 200, headers: [:], body: data) }
                    publisher.served.withLock { $0.append(range) }
                    return .respond(
                        status: 206, headers: ["Content-Range": "bytes \(range.lowerBound)-\(range.upperBound - 1)/\(data.count)"],
                        body: data.subdata(in: range))
                }
                guard let range, range.lowerBound > 0, after >= 0 else { return reply() }
                return answered.withLock { n in
                    n += 1
                    return n > after ? .close : reply()
                }
            }
        }
    }

    static func tileRanges(_ publisher: SyncTests.Publisher) -> [Range<Int>] {
        publisher.served.withLock { $0 }.filter { $0.lowerBound > 0 }
    }

    @Test(arguments: [true, false])
    func theSameObjectThroughAnotherHostResumesWithoutFetchingAByteTwice(_ etag: Bool) throws {
        let (setup, first, before) = try SyncTests.published()
        defer { first.server.stop() }
        Self.dropping(after: 5, first, etag: etag)
        #expect(throws: OperationError.self) {
            try ArchiveSync.run(local: setup.v1.pmtiles, url: first.url("v2.pmtiles"), options: SyncTests.noRetry())
        }
        #expect(SyncTests.fileBytes(setup.v1.pmtiles) == before)
        let fetched = Self.tileRanges(first)
        #expect(fetched.count == 5)
        // The same files on another port (a CDN host change, a new presigned URL).
        let second = try SyncTests.publisher(setup)
        defer { second.server.stop() }
        Self.dropping(after: -1, second, etag: etag)
        let report = try ArchiveSync.run(local: setup.v1.pmtiles, url: second.url("v2.pmtiles"), options: SyncTests.noRetry())
        #expect(report.resumedBytes > 0, "\(report.notes)")
        #expect(try SyncTests.identity(setup.v1.pmtiles) == SyncTests.identity(setup.v2.pmtiles))
        // Without an ETag the bytes read before the index binds the resume (the PMTiles
        // directories, the first range) are not trusted from the earlier sync; no tile is fetched twice.
        let again = Self.tileRanges(second).dropFirst(etag ? 0 : 1)
        let twice = again.filter { range in fetched.contains { $0.overlaps(range) } }
        #expect(twice.isEmpty, "fetched again: \(twice)")
    }

    /// No ETag and no index: nothing binds the staged bytes to the object, so they are not used.
    @Test func withNeitherETagNorIndexAResumeIsRefusedWithTheReason() throws {
        let setup = try SyncTests.Setup(indexed: false)
        let publisher = try SyncTests.Publisher(files: ["v2.pmtiles": SyncTests.fileBytes(setup.v2.pmtiles)!])
        defer { publisher.server.stop() }
        var options = SyncTests.noRetry()
        options.maximumRequestBytes = 64 << 10
        Self.dropping(after: 2, publisher, etag: false)
        #expect(throws: OperationError.self) {
            try ArchiveSync.run(local: setup.v1.pmtiles, url: publisher.url("v2.pmtiles"), options: options)
        }
        #expect(FileManager.default.fileExists(atPath: setup.v1.pmtiles + ".tpsync"))
        Self.dropping(after: -1, publisher, etag: false)
        let report = try ArchiveSync.run(local: setup.v1.pmtiles, url: publisher.url("v2.pmtiles"), options: options)
        #expect(report.resumedBytes == 0)
        #expect(report.notes.contains { $0.contains("sends no ETag and has no tile index, so a resume cannot be bound to the object") })
        #expect(try SyncTests.identity(setup.v1.pmtiles) == SyncTests.identity(setup.v2.pmtiles))
    }

    /// Issue 44 item 3: a request killed in flight keeps what arrived, in 64 KiB pieces: the
    /// rerun fetches again at most 64 KiB of the bytes the killed request received.
    @Test func aKilledRequestKeepsTheBytesThatArrived() throws {
        let setup = try SyncTests.Setup(indexed: false)
        let publisher = try SyncTests.Publisher(files: ["v2.pmtiles": SyncTests.fileBytes(setup.v2.pmtiles)!])
        defer { publisher.server.stop() }
        let arrived = 1_000_000
        let cut = Locked<Range<Int>?>(nil)
        // The first range request past the first 16 KiB: its answer breaks off after `arrived` bytes.
        publisher.fault.withLock {
            $0 = { _, range, data in
                guard let range, range.lowerBound > 0, range.count > arrived else { return nil }
                let first = cut.withLock { value -> Bool in
                    defer { value = value ?? range }
                    return value == nil
                }
                guard first else { return nil }
                return .truncated(
                    status: 206,
                    headers: ["ETag": publisher.etag.withLock { $0 }, "Content-Range": "bytes \(range.lowerBound)-\(range.upperBound - 1)/\(data.count)"],
                    body: data.subdata(in: range), sent: arrived)
            }
        }
        #expect(throws: OperationError.self) {
            try ArchiveSync.run(local: setup.v1.pmtiles, url: publisher.url("v2.pmtiles"), options: SyncTests.noRetry())
        }
        let killed = try #require(cut.withLock { $0 })
        publisher.served.withLock { $0 = [] }
        let report = try ArchiveSync.run(local: setup.v1.pmtiles, url: publisher.url("v2.pmtiles"), options: SyncTests.noRetry())
        #expect(try SyncTests.identity(setup.v1.pmtiles) == SyncTests.identity(setup.v2.pmtiles))
        // What the second sync fetched of the bytes that had arrived.
        let received = killed.lowerBound..<(killed.lowerBound + arrived)
        let again = Self.tileRanges(publisher).reduce(0) { sum, range in sum + (range.clamped(to: received).count) }
        #expect(again <= 64 << 10, "fetched again: \(again) bytes of the \(arrived) that arrived")
        #expect(report.resumedBytes >= arrived - (64 << 10))
    }
}
