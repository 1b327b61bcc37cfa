import Foundation
import TilepackCore

/// Copying the payloads into the data section at ``BundleWriter/finish()``, in their new order:
/// from the spool (by the kernel for long runs, else gathered and copied through memory), from
/// the files they were read from, or from the copy source (a patch's base).
extension BundleWriter {
    /// Copies the payloads to `out` in the order `order`, payload `order[i]` at `offset(i)`: a
    /// run from the copy source (``copyBaseRun(from:of:order:to:offset:state:)``), a payload from
    /// its source file, or a run from the spool (``copySpoolRun(from:order:to:offset:state:)``).
    ///
    /// Payloads that follow each other both in the spool and in `order` form runs (the spool pads
    /// them as the data section does). A run of ``kernelCopyBytes`` or more is copied by the
    /// kernel from the spool to the file (`sendfile(2)` on Linux: no copy through this process);
    /// shorter runs are gathered into chunks of about ``copyChunkBytes`` and copied through
    /// memory: within a chunk the spool ranges are read in spool order, neighbours less than
    /// ``copyGapBytes`` apart in one `pread`, then written out in the new order.
    func copyPayloads(in order: [Int], to out: BufferedOutput, offset: (Int) -> Int) throws(TileArchiveError) {
        var state = PayloadCopyState(kernelCopies: copiesInKernel)
        let copiesFromBase = order.contains(where: { payloads[$0].copied >= 0 })
        if copiesFromBase { try copySource?.checkUnchanged() }
        var position = 0
        while position < order.count {
            let payload = payloads[order[position]]
            if payload.copied >= 0, let copySource {
                position = try copyBaseRun(from: position, of: copySource, order: order, to: out, offset: offset, state: &state)
            } else if payload.source >= 0 {
                try copyGathered(order: order, to: out, offset: offset, state: &state)
                try out.write(zeros: offset(position) - out.position)
                try copyFromSource(payload, to: out, staging: &state.staging, kernelCopies: &state.kernelCopies)
                state.sinceFlush += Int(payload.storedLength)
                position += 1
            } else {
                position = try copySpoolRun(from: position, order: order, to: out, offset: offset, state: &state)
            }
            if state.sinceFlush >= Self.copyChunkBytes {
                // Let the disk take what is written while the next payloads are copied.
                file.flushInBackground()
                state.sinceFlush = 0
            }
        }
        try copyGathered(order: order, to: out, offset: offset, state: &state)
        if copiesFromBase { try copySource?.checkUnchanged() }
    }

    /// What ``copyPayloads(in:to:offset:)`` carries from one run to the next.
    struct PayloadCopyState {
        var staging: [UInt8] = []
        var gap: [UInt8] = []
        /// Positions gathered to copy through memory: always a range, since anything else copied
        /// first copies what is gathered.
        var gathered = 0..<0
        var gatheredBytes = 0
        /// Bytes copied since the disk was last asked to take what is written.
        var sinceFlush = 0
        /// Whether the kernel copies runs (until it cannot between these files).
        var kernelCopies: Bool

        mutating func gather(_ positions: Range<Int>, bytes: Int) {
            assert(gathered.isEmpty || gathered.upperBound == positions.lowerBound)
            gathered = (gathered.isEmpty ? positions.lowerBound : gathered.lowerBound)..<positions.upperBound
            gatheredBytes += bytes
        }
    }

    /// Copies the gathered spool payloads through memory, if any.
    private func copyGathered(
        order: [Int], to out: BufferedOutput, offset: (Int) -> Int, state: inout PayloadCopyState
    ) throws(TileArchiveError) {
        guard !state.gathered.isEmpty else { return }
        try copyThroughMemory(state.gathered, order: order, staging: &state.staging, gap: &state.gap, to: out, offset: offset)
        state.sinceFlush += state.gatheredBytes
        state.gathered = 0..<0
        state.gatheredBytes = 0
    }

    /// Copies the run starting at `position`: payloads back to back in the copy source, in this
    /// order (their padding, zero in that file too, copied with them). Returns the position after it.
    private func copyBaseRun(
        from position: Int, of copySource: CopySource, order: [Int], to out: BufferedOutput, offset: (Int) -> Int,
        state: inout PayloadCopyState
    ) throws(TileArchiveError) -> Int {
        try copyGathered(order: order, to: out, offset: offset, state: &state)
        let start = payloads[order[position]].copied
        var runEnd = start + Int(payloads[order[position]].storedLength)
        var end = position + 1
        while end < order.count, payloads[order[end]].copied == BundleFormat.aligned(runEnd) {
            runEnd = payloads[order[end]].copied + Int(payloads[order[end]].storedLength)
            end += 1
        }
        try out.write(zeros: offset(position) - out.position)
        try copyRange(
            of: copySource, at: start, length: runEnd - start, to: out, staging: &state.staging, kernelCopies: &state.kernelCopies)
        state.sinceFlush += runEnd - start
        return end
    }

    /// Copies, or gathers to copy through memory, the run starting at `position`: payloads back to
    /// back in the spool, in this order. Returns the position after it.
    private func copySpoolRun(
        from position: Int, order: [Int], to out: BufferedOutput, offset: (Int) -> Int, state: inout PayloadCopyState
    ) throws(TileArchiveError) -> Int {
        let start = payloads[order[position]].spoolOffset
        var runEnd = start + Int(payloads[order[position]].storedLength)
        var end = position + 1
        while end < order.count, payloads[order[end]].source < 0, payloads[order[end]].spoolOffset == BundleFormat.aligned(runEnd) {
            runEnd = payloads[order[end]].spoolOffset + Int(payloads[order[end]].storedLength)
            end += 1
        }
        let runLength = runEnd - start
        if state.kernelCopies && runLength >= Self.kernelCopyBytes {
            try copyGathered(order: order, to: out, offset: offset, state: &state)
            try out.write(zeros: offset(position) - out.position)
            // With the zeros after it, unless it ends the data section (the spool has them too).
            let copied = end < order.count ? BundleFormat.aligned(runEnd) - start : runLength
            state.kernelCopies = try out.copy(from: spool, at: start, length: copied, what: "the spool")
            if state.kernelCopies {
                state.sinceFlush += copied
                return end
            }
            // The kernel cannot copy between these files: through memory from now on.
        }
        state.gather(position..<end, bytes: runLength)
        if state.gatheredBytes >= Self.copyChunkBytes { try copyGathered(order: order, to: out, offset: offset, state: &state) }
        return end
    }

    /// Appends `length` bytes of `source` from `offset`: by the kernel when it can, else through
    /// `staging` in chunks of ``copyChunkBytes``.
    private func copyRange(
        of source: CopySource, at offset: Int, length: Int, to out: BufferedOutput, staging: inout [UInt8], kernelCopies: inout Bool
    ) throws(TileArchiveError) {
        if kernelCopies {
            kernelCopies = try out.copy(from: source.fd, at: offset, length: length, what: source.path)
            if kernelCopies { return }
        }
        if staging.count < min(length, Self.copyChunkBytes) { staging = Self.unfilled(min(length, Self.copyChunkBytes)) }
        var done = 0
        while done < length {
            let n = min(length - done, staging.count)
            try staging.withUnsafeMutableBytes { buffer in
                Result { () throws(TileArchiveError) in
                    let chunk = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<n])
                    try source.read(into: chunk, at: offset + done)
                    try out.write(UnsafeRawBufferPointer(chunk))
                }
            }.get()
            done += n
        }
    }

    /// Appends a payload from its source file, checked to be the version read before and after
    /// the copy; by the kernel when it can, else through `staging`.
    private func copyFromSource(
        _ payload: PayloadEntry, to out: BufferedOutput, staging: inout [UInt8],
        kernelCopies: inout Bool
    ) throws(TileArchiveError) {
        let source = sources[Int(payload.source)]
        let length = Int(payload.storedLength)
        let fd = try source.openUnchanged()
        defer { close(fd) }
        if kernelCopies {
            kernelCopies = try out.copy(from: fd, at: 0, length: length, what: source.path)
        }
        if !kernelCopies {
            if staging.count < length { staging = Self.unfilled(length) }
            try staging.withUnsafeMutableBytes { buffer in
                Result { () throws(TileArchiveError) in
                    try MappedBytes.readFully(
                        fd, into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<length]), at: 0, path: source.path)
                    try out.write(UnsafeRawBufferPointer(rebasing: buffer[0..<length]))
                }
            }.get()
        }
        try source.checkUnchanged(fd)
    }

    /// Copies the spooled payloads at `positions` of `order` through `staging`, which is laid out
    /// as that stretch of the data section: each payload is read from the spool straight to its
    /// place there, with the zero padding that follows it in the spool as in the data section
    /// (the spool is read in its own order, payloads close to each other in it in one `preadv`,
    /// the bytes between them into `gap`), then the stretch is written in one call.
    private func copyThroughMemory(
        _ positions: Range<Int>, order: [Int], staging: inout [UInt8], gap: inout [UInt8],
        to out: BufferedOutput, offset: (Int) -> Int
    ) throws(TileArchiveError) {
        guard let first = positions.first else { return }
        let last = positions.upperBound - 1
        let start = offset(first)
        let length = offset(last) + Int(payloads[order[last]].storedLength) - start
        try out.write(zeros: start - out.position)
        if staging.count < length { staging = Self.unfilled(max(length, staging.count + staging.count / 2)) }
        if gap.count < Self.copyGapBytes { gap = Self.unfilled(Self.copyGapBytes) }
        // Spool order: payloads are spooled in the order of their (old) numbers.
        var bySpool = positions.map { (payload: order[$0], position: $0) }
        bySpool.sort { $0.payload < $1.payload }
        try staging.withUnsafeMutableBytes { buffer in
            gap.withUnsafeMutableBytes { gapBuffer in
                Result { () throws(TileArchiveError) in
                    var vectors: [iovec] = []
                    vectors.reserveCapacity(64)
                    var readFrom = -1  // spool offset where `vectors` start, -1 when there are none
                    var readEnd = 0  // and where they end
                    var gapBytes = 0  // read and not used: at most another chunk's worth
                    func read() throws(TileArchiveError) {
                        guard readFrom >= 0 else { return }
                        try transferSpool(&vectors, at: readFrom, length: readEnd - readFrom, writing: false)
                        vectors.removeAll(keepingCapacity: true)
                        readFrom = -1
                    }
                    for (number, position) in bySpool {
                        let payload = payloads[number]
                        // With its padding, but for the stretch's last payload (the next byte is not ours).
                        let span = position == last ? Int(payload.storedLength) : BundleFormat.aligned(Int(payload.storedLength))
                        guard span > 0 else { continue }
                        if readFrom >= 0 {
                            let skip = payload.spoolOffset - readEnd
                            if skip < 0 || skip > Self.copyGapBytes || gapBytes + skip > Self.copyChunkBytes
                                || vectors.count + 2 > Self.vectorsPerCall
                            {
                                try read()
                            } else if skip > 0 {
                                vectors.append(iovec(iov_base: gapBuffer.baseAddress, iov_len: skip))
                                gapBytes += skip
                            }
                        }
                        if readFrom < 0 { readFrom = payload.spoolOffset }
                        vectors.append(iovec(iov_base: buffer.baseAddress! + (offset(position) - start), iov_len: span))
                        readEnd = payload.spoolOffset + span
                    }
                    try read()
                    try out.write(UnsafeRawBufferPointer(rebasing: buffer[0..<length]))
                }
            }
        }.get()
    }

    /// Stored bytes copied per chunk through memory at ``finish()``.
    static let copyChunkBytes = 2 << 20
    /// Spool bytes between two payloads of a chunk that are read rather than seeked over.
    static let copyGapBytes = 64 << 10
    /// Runs of spooled payloads this long or longer are copied by the kernel (where it can):
    /// below this, a system call per run costs more than copying through a buffer.
    static let kernelCopyBytes = 32 << 10
    #if os(Linux)
    static let kernelCopyAvailable = true
    #else
    static let kernelCopyAvailable = false
    #endif
}
