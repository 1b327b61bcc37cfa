import Foundation
import TilepackChecksum
import TilepackCore
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
