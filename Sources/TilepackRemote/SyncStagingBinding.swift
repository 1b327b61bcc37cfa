import Foundation
import TilepackChecksum
import TilepackCore
import TilepackHTTP
import TilepackStorage

extension StagedByteSource.State {
    /// The bytes of the records this sync appended itself.
    var ownBytes: Int { ranges.filter { $0.at >= runStart }.reduce(0) { $0 + $1.range.count } }
}

/// The binding record of a staging file (Specs/updates.md §8 item 5): what ties its records to the
/// version's tile index, written once the index is known.
extension StagedByteSource {
    /// Appends the record that binds the staged bytes to the index identity `key`.
    func appendBinding(_ key: String) throws(TileArchiveError) {
        let bytes = Array(key.utf8)
        let crc = bytes.withUnsafeBytes { CRC32.checksum($0) }
        let record =
            Self.le64(Int(truncatingIfNeeded: Self.bindingMark)) + Self.le32(bytes.count) + Self.le32(Int(crc)) + bytes
        let at = state.withLock { $0.end }
        try Self.write(descriptor, record, at: at, path: path)
        state.withLock {
            $0.end = at + record.count
            $0.bound = key
        }
        _ = fsync(descriptor)
    }

    /// Drops every earlier sync's record: the file is its header, the binding to `key`, then the
    /// records this sync staged, copied again.
    func restart(binding key: String) throws(TileArchiveError) {
        let (own, headerLength) = state.withLock { state in (state.ranges.filter { $0.at >= state.runStart }, state.headerLength) }
        let kept = own.map { ($0.range, Self.pread(descriptor, offset: $0.at, length: $0.range.count)) }
        _ = ftruncate(descriptor, off_t(headerLength))
        state.withLock { state in
            state = State(end: headerLength, headerLength: headerLength)
            state.runStart = headerLength
        }
        try appendBinding(key)
        for (range, bytes) in kept { try append(range, Data(bytes)) }
        _ = fsync(descriptor)
    }
}

/// The bytes of a one-range request kept as they arrive (Specs/updates.md §8 item 5): a request
/// killed in flight (the connection dropped, the process killed) loses at most the last 64 KiB it
/// received, not the whole range.
extension StagedByteSource {
    /// Bytes of a request in flight are staged in pieces of this many.
    static let arrivalPiece = 64 << 10

    /// An observer of the body of the request for `range`: each whole 64 KiB piece that arrives
    /// in a 206 answer of exactly that range (and of the object pinned) is appended to the file.
    func arrivals(_ range: Range<Int>) -> HTTPBodyObserver {
        let pending = Locked<(start: Int, bytes: [UInt8], usable: Bool)>((range.lowerBound, [], false))
        let count = self.count, etag = self.etag
        return HTTPBodyObserver { [weak self] status, fields, offset, bytes in
            guard let self else { return }
            let pieces: [(Range<Int>, [UInt8])] = pending.withLock { state in
                if offset == 0 {
                    // A new answer (or a retry's): usable when it is the range asked, of the object pinned.
                    let answered = fields.value(named: "content-range").flatMap(HTTPByteSource.parseContentRange)
                    state = (
                        range.lowerBound, [],
                        status == 206 && answered?.range == range && answered?.size == count
                            && (etag == nil || fields.value(named: "etag") == etag)
                    )
                }
                guard state.usable else { return [] }
                state.bytes += bytes
                var out: [(Range<Int>, [UInt8])] = []
                while state.bytes.count >= Self.arrivalPiece {
                    out.append((state.start..<(state.start + Self.arrivalPiece), Array(state.bytes.prefix(Self.arrivalPiece))))
                    state.bytes.removeFirst(Self.arrivalPiece)
                    state.start += Self.arrivalPiece
                }
                return out
            }
            for (piece, data) in pieces { try? self.append(piece, Data(data)) }
            if !pieces.isEmpty { _ = fsync(self.descriptor) }
        }
    }

    /// Appends the parts of `range` (whose bytes are `data`) not staged yet: what arrived while
    /// the request was in flight is not written twice.
    func appendMissing(_ range: Range<Int>, _ data: Data) throws(TileArchiveError) {
        for piece in missing([range], gap: 0) {
            let start = piece.lowerBound - range.lowerBound
            try append(piece, data.subdata(in: start..<(start + piece.count)))
        }
    }
}
