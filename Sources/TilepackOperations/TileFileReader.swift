import Foundation
import TilepackCore
import TilepackImaging
@_spi(TilepackInternal) import TilepackStorage

/// One tile read, checked and prepared for the sink by a worker.
struct ReadTile: Sendable {
    var format: TileFormat
    /// The file's bytes, or the decoded pixels when encoding raw bitmaps, made ready for the sink.
    var prepared: PreparedTile
    /// How many bytes that was before the sink's preparation.
    var byteCount: Int
    /// The side in pixels when the bytes are raw pixels.
    var rawSize: Int?
}

/// Reading and checking tile files, on worker threads.
enum TileFileReader {
    struct ReadFailure: Error { var reason: String }

    typealias Batch = ParallelBatch<TileFile, Result<ReadTile, ReadFailure>, Scratch>
    typealias Prepare = @Sendable (consuming TileBytes, UInt32?, SourceFile?) -> PreparedTile

    /// A worker's reusable read buffer, and whether its last file was large.
    struct Scratch {
        var buffer: [UInt8] = []
        var lastWasLarge = false
    }

    /// The scratches of an import's batches, kept from one batch to the next: a batch of 512
    /// small tiles would otherwise allocate and zero a new 256 KiB read buffer on every worker
    /// (a 50,000-tile import made 200 of them, 50 MB of zeroing).
    final class ScratchShelf: Sendable {
        private let shelf = Locked<[Scratch]>([])

        init() {}

        func take() -> Scratch { shelf.withLock { $0.popLast() } ?? Scratch() }
        func put(_ scratch: consuming Scratch) {
            let scratch = scratch
            shelf.withLock { $0.append(scratch) }
        }
    }

    /// Starts reading `files` on the threads of `pool`, each tile then made ready by `prepare`
    /// (given the file's CRC-32 where the check derives it, when `usesCRC`); the workers' read
    /// buffers come from `shelf` and go back to it.
    static func start(
        _ files: [TileFile], options: ImportOptions, usesCRC: Bool = false,
        prepare: @escaping Prepare, pool: WorkerPool, shelf: ScratchShelf = ScratchShelf()
    ) -> Batch {
        let batch = Batch(files)
        if !files.isEmpty {
            batch.start(
                on: pool, makeState: { shelf.take() },
                work: { scratch, file in
                    read(file, options: options, computingCRC: usesCRC, scratch: &scratch, prepare: prepare)
                }, done: { shelf.put($0) })
        }
        return batch
    }

    /// Files at least this long have their CRC-32 derived from their PNG chunks' when asked. A
    /// smaller tile is stored LZ4-compressed more often than not, and the CRC of its file is of
    /// no use then.
    static let crcFromChunksLength = 16 << 10

    /// Reads, checks and prepares one file. A small file's bytes are checked and handed to
    /// `prepare` where they lie in the worker's buffer (lent): a sink that compresses them makes
    /// no copy of the file's bytes.
    static func read(
        _ file: TileFile, options: ImportOptions, computingCRC: Bool = false,
        scratch: inout Scratch, prepare: Prepare
    ) -> Result<ReadTile, ReadFailure> {
        let read: FileReading.Bytes
        var identity: FileVersion?
        do throws(FileReading.Failure) {
            read = try FileReading.readLending(
                file.path, folderDescriptor: file.folder.descriptor, name: file.name, scratch: &scratch.buffer,
                expectLarge: scratch.lastWasLarge, identity: &identity)
        } catch {
            return .failure(ReadFailure(reason: error.description))
        }
        switch consume read {
        case .inScratch(let count):
            scratch.lastWasLarge = count >= FileReading.largeFileSize
            return scratch.buffer.withUnsafeBytes { buffer in
                checked(
                    UnsafeRawBufferPointer(rebasing: buffer[0..<count]), file: file, options: options,
                    computingCRC: computingCRC, identity: nil, prepare: prepare)
            }
        case .array(let bytes):
            scratch.lastWasLarge = bytes.count >= FileReading.largeFileSize
            return bytes.withUnsafeBytes { buffer in
                checked(
                    buffer, owned: bytes, file: file, options: options, computingCRC: computingCRC,
                    identity: identity, prepare: prepare)
            }
        }
    }

    /// The tile of `bytes` (the array `owned` when there is one), checked and prepared.
    private static func checked(
        _ bytes: UnsafeRawBufferPointer, owned: [UInt8]? = nil, file: TileFile, options: ImportOptions,
        computingCRC: Bool, identity: FileVersion?, prepare: Prepare
    ) -> Result<ReadTile, ReadFailure> {
        let deriveCRC = computingCRC && options.encode == nil && bytes.count >= crcFromChunksLength
        let format: TileFormat, crc: UInt32?
        do throws(TileIntegrity.Finding) {
            (format, crc) = deriveCRC ? try TileIntegrity.checkComputingCRC(bytes) : (try TileIntegrity.check(bytes), nil)
        } catch {
            return .failure(ReadFailure(reason: error.description))
        }
        guard let pixelFormat = options.encode else {
            let prepared = prepare(
                owned.map { .owned($0) } ?? .lent(bytes), crc,
                identity.map { SourceFile(path: file.path, identity: $0) })
            return .success(ReadTile(format: format, prepared: prepared, byteCount: bytes.count))
        }
        do {
            let bitmap = try ImageDecoder.decode(Data(bytes), pixelFormat: pixelFormat)
            guard bitmap.width == bitmap.height else {
                return .failure(ReadFailure(reason: "\(bitmap.width)x\(bitmap.height) pixels: a tile must be square"))
            }
            let count = bitmap.pixels.count
            return .success(
                ReadTile(format: format, prepared: prepare(.owned(bitmap.pixels), nil, nil), byteCount: count, rawSize: bitmap.width))
        } catch {
            return .failure(ReadFailure(reason: "cannot decode for --encode: \(error)"))
        }
    }
}
