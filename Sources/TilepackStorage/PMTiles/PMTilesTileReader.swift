import Foundation
import TilepackCore

/// Reads the tiles of a pass in the order they are handed to it. A source read by copy (a local
/// file, ``ByteSource/coalescedReadLength`` above 0) is read in groups: tiles are held until they
/// add up to that many bytes (or one tile, when it alone is more), then the group's ranges are
/// sorted and merged into windows across gaps of at most ``largestGap`` bytes (their sum at most the
/// group's budget, so the memory held stays under twice it), each window is read with one call,
/// and the tiles are handed out, in the order they came, as slices of the windows. The tiles of a
/// zoom in (x, y) order lie in a few long stretches of a file in tile-id order, so a pass makes a
/// call per stretch rather than per tile. Other sources read each tile when it comes.
///
/// A pass in (zoom, x, y) order holds more (``stripFactor`` times the source's length) and is
/// flushed where a strip of columns starts: a column of a file in tile-id order is spread over the
/// whole zoom, one stretch per tile, while an aligned strip of 2^k columns lies in stretches of
/// 4^k tiles (bench-pmtiles-read).
final class TileReader {
    private let source: any ByteSource
    private let base: Int
    /// The bytes of tiles held at most before they are read (0: each tile read when it comes).
    let budget: Int
    /// How many times the source's ``ByteSource/coalescedReadLength`` a pass in (zoom, x, y) order
    /// holds: 8 MiB at the default 1 MiB, so that a zoom of 256 columns of 3 KB tiles is read in
    /// strips of 8 columns (stretches of 64 tiles).
    static let stripFactor = 8
    /// Merging two ranges across a gap copies the gap once; a call costs more than 32 KiB copied.
    static let largestGap = 32 << 10

    private var pending: [(tile: TileCoordinate, offset: Int, length: Int)] = []
    private var pendingBytes = 0
    private var ranges: [Range<Int>] = []
    private var windows: [(start: Int, end: Int, at: Int)] = []
    private var buffer = UnsafeMutableRawBufferPointer(start: nil, count: 0)

    /// Reads tiles of the tile data section that starts at `base` in `source`, holding at most
    /// `holding` times the source's ``ByteSource/coalescedReadLength`` bytes of them.
    init(source: any ByteSource, base: Int, holding: Int = 1) {
        self.source = source
        self.base = base
        budget = max(0, source.coalescedReadLength) * max(1, holding)
    }

    deinit { buffer.deallocate() }

    /// Takes the tile whose bytes are `length` at `offset` in the tile data section; `body` is called
    /// for it now or at a later ``add(_:offset:length:_:)`` or ``flush(_:)``.
    func add(_ tile: TileCoordinate, offset: UInt64, length: Int, _ body: (TileCoordinate, UnsafeRawBufferPointer) throws -> Void) throws {
        guard budget > 0 else {
            try source.withBytes(offset: base + Int(offset), length: length) { try body(tile, $0) }
            return
        }
        if !pending.isEmpty, length > budget - pendingBytes { try flush(body) }
        pending.append((tile, base + Int(offset), length))
        pendingBytes += length
    }

    /// Reads the tiles held and calls `body` for each, in the order they came.
    func flush(_ body: (TileCoordinate, UnsafeRawBufferPointer) throws -> Void) throws {
        guard !pending.isEmpty else { return }
        defer {
            pending.removeAll(keepingCapacity: true)
            pendingBytes = 0
        }
        ranges.removeAll(keepingCapacity: true)
        for item in pending { ranges.append(item.offset..<(item.offset + item.length)) }
        ranges.sort { $0.lowerBound < $1.lowerBound }
        windows.removeAll(keepingCapacity: true)
        var total = 0, gaps = 0
        for range in ranges {
            if let last = windows.last {
                let gap = range.lowerBound - last.end
                if gap <= 0 || (gap <= Self.largestGap && gaps + gap <= budget) {
                    let end = max(last.end, range.upperBound)
                    total += end - last.end
                    gaps += max(gap, 0)
                    windows[windows.count - 1].end = end
                    continue
                }
            }
            windows.append((range.lowerBound, range.upperBound, total))
            total += range.count
        }
        if buffer.count < total {
            buffer.deallocate()
            buffer = .allocate(byteCount: total, alignment: 16)
        }
        for window in windows where window.end > window.start {
            try source.read(
                offset: window.start,
                into: UnsafeMutableRawBufferPointer(rebasing: buffer[window.at..<(window.at + window.end - window.start)]))
        }
        for item in pending {
            // The last window starting at or before the tile holds it.
            var low = 0, high = windows.count
            while high - low > 1 {
                let middle = (low + high) / 2
                if windows[middle].start <= item.offset { low = middle } else { high = middle }
            }
            let at = windows[low].at + item.offset - windows[low].start
            try body(item.tile, UnsafeRawBufferPointer(rebasing: buffer[at..<(at + item.length)]))
        }
    }
}
