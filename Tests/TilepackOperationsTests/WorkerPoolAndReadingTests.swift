import Foundation
import Testing
import TilepackCore
import TilepackTestSupport

@testable import TilepackOperations

@Suite struct WorkerPoolTests {
    @Test func everyQueuedJobRunsBeforeThePoolEnds() {
        let count = Locked(0)
        let threads = Locked(Set<String>())
        WorkerPool.with(threads: 3) { pool in
            #expect(pool.size == 3)
            for _ in 0..<1000 {
                pool.submit {
                    count.withLock { $0 += 1 }
                    let name = Thread.current.name ?? "?"
                    threads.withLock { _ = $0.insert(name) }
                }
            }
        }
        #expect(count.withLock { $0 } == 1000)
        #expect(threads.withLock { $0.count } <= 3)
    }

    /// A job that has run is released even while later jobs wait (it may hold a batch of tiles).
    @Test func aJobIsReleasedOnceItHasRun() {
        final class Payload: Sendable {}
        let running = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        weak var watched: Payload?
        WorkerPool.with(threads: 1) { pool in
            do {
                let payload = Payload()
                watched = payload
                pool.submit { _ = payload }
            }
            pool.submit {
                running.signal()
                release.wait()
            }
            pool.submit {}
            running.wait()
            // The first job has run; the third still waits behind the second.
            #expect(watched == nil)
            release.signal()
        }
    }

    @Test func aBatchComputesEveryOutputInItsPlace() {
        let inputs = Array(0..<5000)
        WorkerPool.with(threads: 2) { pool in
            let batch = ParallelBatch<Int, Int, Int>(inputs)
            batch.start(on: pool, makeState: { 0 }) { calls, input in
                calls += 1
                return input * input
            }
            batch.wait()
            #expect((0..<5000).allSatisfy { batch[$0] == $0 * $0 })
        }
    }
}

@Suite struct FileReadingTests {
    @Test func smallLargeAndEmptyFilesReadWhole() throws {
        let dir = try TemporaryDirectory()
        var scratch: [UInt8] = []
        for size in [0, 1, 1000, (256 << 10) - 1, 256 << 10, (256 << 10) + 1, 3 << 20] {
            let bytes = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 9) }
            let path = dir.file("f\(size)")
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            #expect(try FileReading.read(path, scratch: &scratch) == bytes, "\(size) bytes")
            // Measured first (the hint that the last file was large): the same bytes.
            #expect(try FileReading.read(path, scratch: &scratch, expectLarge: true) == bytes, "\(size) bytes, expecting a large file")
        }
        // Too large is too large either way.
        let huge = dir.file("huge")
        #expect(FileManager.default.createFile(atPath: huge, contents: nil))
        #expect(truncate(huge, off_t(FileReading.maximumTileFileSize + 1)) == 0)
        for expectLarge in [false, true] {
            #expect(throws: FileReading.Failure.self) { try FileReading.read(huge, scratch: &scratch, expectLarge: expectLarge) }
        }
    }

    @Test func aFIFOInPlaceOfATileDoesNotHang() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("0.png")
        #expect(mkfifo(path, 0o600) == 0)
        var scratch: [UInt8] = []
        // Opened without blocking, a FIFO with no writer is named for what it is (not "empty"),
        // whatever the last file was.
        for expectLarge in [false, true] {
            do {
                _ = try FileReading.read(path, scratch: &scratch, expectLarge: expectLarge)
                Issue.record("a FIFO was read as a tile")
            } catch {
                #expect(error.description == "a FIFO (named pipe), not a regular file")
            }
        }
    }

    @Test func aFolderOrAMissingFileIsAnError() throws {
        let dir = try TemporaryDirectory()
        var scratch: [UInt8] = []
        for expectLarge in [false, true] {
            #expect(throws: FileReading.Failure.self) { try FileReading.read(dir.path, scratch: &scratch, expectLarge: expectLarge) }
            #expect(throws: FileReading.Failure.self) {
                try FileReading.read(dir.file("missing"), scratch: &scratch, expectLarge: expectLarge)
            }
        }
    }
}
