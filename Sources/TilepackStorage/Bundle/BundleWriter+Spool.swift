import Foundation
import TilepackCore

/// The spool: an unlinked file beside the destination where each new payload waits, laid out as
/// in the data section, until ``BundleWriter/finish()`` copies it into place; and the comparison
/// of a payload with one already kept (spooled, in a source file or in the copy source), which
/// decides whether two tiles share it.
extension BundleWriter {
    /// Appends a payload to the spool, laid out as the data section lays payloads out: each at a
    /// multiple of 8, followed by zeros up to the next. Payloads that follow each other in the
    /// spool and in the bundle are then one run of bytes, copied as they are by ``finish()``.
    /// Small payloads go through the spool's buffer; one of ``directSpoolBytes`` or more is written
    /// from its own array.
    func appendPayload(_ prepared: PreparedPayload) throws(TileArchiveError) -> PayloadEntry {
        let length = prepared.stored.count
        if let source = prepared.source, copiesFromSources {
            sources.append(source)
            return PayloadEntry(
                spoolOffset: -1, source: Int32(sources.count - 1), storedLength: UInt32(length),
                rawLength: UInt32(prepared.rawLength), crc: prepared.crc, codec: prepared.codec)
        }
        let entry = PayloadEntry(
            spoolOffset: spoolLength, storedLength: UInt32(length), rawLength: UInt32(prepared.rawLength),
            crc: prepared.crc, codec: prepared.codec)
        let padding = BundleFormat.aligned(length) - length
        if length >= Self.directSpoolBytes {
            // What the buffer holds, the payload and its padding: one system call.
            try spoolBuffer.withUnsafeBytes { buffered in
                prepared.stored.withUnsafeBytes { bytes in
                    Self.zeroPadding.withUnsafeBytes { zeros in
                        Result { () throws(TileArchiveError) in
                            try writeSpool([buffered, bytes, UnsafeRawBufferPointer(rebasing: zeros[0..<padding])])
                        }
                    }
                }
            }.get()
            spoolBuffer.removeAll(keepingCapacity: true)
        } else {
            if spoolBuffer.count + length + padding > Self.spoolBufferCapacity { try flushSpool() }
            // From a borrowed buffer: `append(contentsOf:)` of the array would retain and release
            // it, an object last touched by the worker thread that made it.
            prepared.stored.withUnsafeBytes { spoolBuffer.append(contentsOf: $0) }
            if padding > 0 { spoolBuffer.append(contentsOf: repeatElement(0, count: padding)) }
        }
        spoolLength += length + padding
        return entry
    }

    private static let zeroPadding = [UInt8](repeating: 0, count: BundleFormat.alignment)

    /// Payloads this long or longer skip the spool's buffer.
    static let directSpoolBytes = 64 << 10

    func flushSpool() throws(TileArchiveError) {
        guard !spoolBuffer.isEmpty else { return }
        try spoolBuffer.withUnsafeBytes { bytes in Result { () throws(TileArchiveError) in try writeSpool([bytes]) } }.get()
        spoolBuffer.removeAll(keepingCapacity: true)
    }

    /// Writes `pieces`, one after the other, at the end of the spool file (one `pwritev` if the
    /// kernel takes it all).
    private func writeSpool(_ pieces: [UnsafeRawBufferPointer]) throws(TileArchiveError) {
        var vectors = pieces.filter { !$0.isEmpty }.map {
            iovec(iov_base: UnsafeMutableRawPointer(mutating: $0.baseAddress), iov_len: $0.count)
        }
        let total = pieces.reduce(0) { $0 + $1.count }
        try transferSpool(&vectors, at: spoolFlushed, length: total, writing: true)
        spoolFlushed += total
    }

    /// Vectors per `preadv` (Linux's IOV_MAX).
    static let vectorsPerCall = 1024

    /// Writes `vectors` to the spool at `offset` (`pwritev`), or reads them from it (`preadv`):
    /// `length` bytes in all, however many calls the kernel takes (`vectors` is changed).
    func transferSpool(_ vectors: inout [iovec], at offset: Int, length: Int, writing: Bool) throws(TileArchiveError) {
        var done = 0
        var first = 0  // the first vector not transferred whole
        while done < length {
            let n = vectors.withUnsafeBufferPointer { v in
                writing
                    ? pwritev(spool, v.baseAddress! + first, Int32(v.count - first), off_t(offset + done))
                    : preadv(spool, v.baseAddress! + first, Int32(v.count - first), off_t(offset + done))
            }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { throw ioError(writing ? "write spool" : "read spool") }
            done += n
            // Skip what was transferred: whole vectors, then part of the next.
            var left = n
            while first < vectors.count, left >= vectors[first].iov_len {
                left -= vectors[first].iov_len
                first += 1
            }
            if left > 0 {
                vectors[first].iov_base = vectors[first].iov_base.map { $0 + left }
                vectors[first].iov_len -= left
            }
        }
    }

    /// A buffer of `count` bytes that a read fills before any is used: not zeroed first (zeroing
    /// the staging buffers of ``copyPayloads(in:to:offset:)`` was 2% of a 50,000-tile import's
    /// writer thread, mostly first-touch page faults it spends on pages the read touches anyway).
    static func unfilled(_ count: Int) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: count) { _, initialized in initialized = count }
    }

    /// Whether payload `number` stores exactly the bytes `prepared` would.
    func payload(_ number: Int, equals prepared: PreparedPayload) throws(TileArchiveError) -> Bool {
        let payload = payloads[number]
        let length = prepared.stored.count
        guard Int(payload.rawLength) == prepared.rawLength, Int(payload.storedLength) == length,
            payload.codec == prepared.codec
        else { return false }
        guard length > 0 else { return true }
        let spooled: UnsafeRawPointer
        if payload.copied >= 0, let copySource {
            ensure(&compareBuffer, capacity: length)
            try copySource.read(into: UnsafeMutableRawBufferPointer(rebasing: compareBuffer[0..<length]), at: payload.copied)
            return prepared.stored.withUnsafeBytes { memcmp(compareBuffer.baseAddress!, $0.baseAddress!, length) == 0 }
        }
        if payload.source >= 0 {
            let source = sources[Int(payload.source)]
            let fd = try source.openUnchanged()
            defer { close(fd) }
            ensure(&compareBuffer, capacity: length)
            try MappedBytes.readFully(
                fd, into: UnsafeMutableRawBufferPointer(rebasing: compareBuffer[0..<length]), at: 0, path: source.path)
            try source.checkUnchanged(fd)
            return prepared.stored.withUnsafeBytes { memcmp(compareBuffer.baseAddress!, $0.baseAddress!, length) == 0 }
        }
        if payload.spoolOffset >= spoolFlushed {
            // Still in the buffer.
            let start = payload.spoolOffset - spoolFlushed
            return spoolBuffer.withUnsafeBytes { buffer in
                prepared.stored.withUnsafeBytes { memcmp(buffer.baseAddress! + start, $0.baseAddress!, length) == 0 }
            }
        }
        ensure(&compareBuffer, capacity: length)
        var done = 0
        while done < length {
            let n = pread(spool, compareBuffer.baseAddress?.advanced(by: done), length - done, off_t(payload.spoolOffset + done))
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { throw ioError("read spool") }
            done += n
        }
        spooled = UnsafeRawPointer(compareBuffer.baseAddress!)
        return prepared.stored.withUnsafeBytes { memcmp(spooled, $0.baseAddress!, length) == 0 }
    }

    private func ensure(_ buffer: inout UnsafeMutableRawBufferPointer, capacity: Int) {
        guard buffer.count < capacity else { return }
        buffer.deallocate()
        buffer = .allocate(byteCount: max(capacity, buffer.count * 2), alignment: 16)
    }
}
