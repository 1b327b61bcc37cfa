import Foundation
internal import TilepackChecksum
internal import TilepackCompression

/// PNG files written by tilepack itself where libdeflate is linked (Linux): each row filtered
/// with the filter libpng's heuristic would pick (the least sum of absolute filtered bytes), the
/// rows compressed as one zlib stream by libdeflate (``ZlibStream``), and the chunks libpng's
/// simplified writer writes (IHDR, sRGB, IDAT, IEND). On map tiles it takes a seventh of libpng's
/// time, whose zlib at level 6 with `Z_FILTERED` was most of the tiler's encoding, for about
/// 5 % more bytes (tools/bench-tile.sh).
enum PNGWriter {
    /// libdeflate's level: 2 (1 is 5 % larger again for half the time; 3 to 9 gain under 0.3 %).
    static let level = 2

    /// The largest image data (filtered rows) written this way, 256 MiB; larger images go to
    /// libpng, which streams.
    static let maximumFilteredBytes = 256 << 20

    /// `height` rows of `width` pixels of `channels` bytes (3: RGB, 4: RGBA), `stride` bytes
    /// apart, as a PNG file; nil when this writer is not available or the image too large.
    static func encode(_ pixels: UnsafeRawBufferPointer, width: Int, height: Int, channels: Int, stride: Int) -> Data? {
        precondition(channels == 3 || channels == 4, "PNGWriter writes RGB or RGBA")
        let rowBytes = width * channels
        let filteredCount = height * (rowBytes + 1)
        guard ZlibStream.isAvailable, width > 0, height > 0, filteredCount <= maximumFilteredBytes,
            stride >= rowBytes, pixels.count >= (height - 1) * stride + rowBytes
        else { return nil }
        var filtered = [UInt8](repeating: 0, count: filteredCount)
        filtered.withUnsafeMutableBufferPointer { out in
            filterRows(
                pixels.baseAddress!.assumingMemoryBound(to: UInt8.self), into: out.baseAddress!, rowBytes: rowBytes, height: height,
                stride: stride, bytesPerPixel: channels)
        }
        guard
            let stream = filtered.withUnsafeBytes({
                ZlibStream.compress($0, level: level, capacity: ZlibStream.bound(filteredCount))
            })
        else { return nil }

        var file = Data(capacity: stream.count + 72)
        file.append(contentsOf: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
        var header = [UInt8]()
        header.reserveCapacity(13)
        appendBigEndian(UInt32(width), to: &header)
        appendBigEndian(UInt32(height), to: &header)
        // Bit depth 8; colour type 2 (RGB) or 6 (RGBA); deflate; adaptive filtering; no interlace.
        header += [8, channels == 4 ? 6 : 2, 0, 0, 0]
        appendChunk("IHDR", header, to: &file)
        appendChunk("sRGB", [0], to: &file)  // perceptual intent, as libpng's simplified writer
        appendChunk("IDAT", stream, to: &file)
        appendChunk("IEND", [], to: &file)
        return file
    }

    /// PNG's five filters (none, sub, up, average, Paeth) tried on each row, the one with the
    /// least sum of absolute values (as signed bytes) written after its filter-type byte.
    static func filterRows(
        _ pixels: UnsafePointer<UInt8>, into out: UnsafeMutablePointer<UInt8>, rowBytes: Int, height: Int, stride: Int,
        bytesPerPixel bpp: Int
    ) {
        let zero = UnsafeMutablePointer<UInt8>.allocate(capacity: rowBytes)
        zero.initialize(repeating: 0, count: rowBytes)
        let candidates = UnsafeMutablePointer<UInt8>.allocate(capacity: 5 * rowBytes)
        defer {
            zero.deallocate()
            candidates.deallocate()
        }
        @inline(__always) func magnitude(_ v: UInt8) -> Int { abs(Int(Int8(bitPattern: v))) }
        for y in 0..<height {
            let row = pixels + y * stride
            let above = y == 0 ? UnsafePointer(zero) : pixels + (y - 1) * stride
            let sub = candidates + rowBytes, up = candidates + 2 * rowBytes
            let average = candidates + 3 * rowBytes, paeth = candidates + 4 * rowBytes
            var sums = (0, 0, 0, 0, 0)
            @inline(__always) func filter(_ i: Int, _ a: UInt8, _ c: UInt8) {
                let x = row[i], b = above[i]
                let pa = abs(Int(b) - Int(c)), pb = abs(Int(a) - Int(c)), pc = abs(Int(a) + Int(b) - 2 * Int(c))
                let predictor = pa <= pb && pa <= pc ? a : pb <= pc ? b : c
                let vs = x &- a, vu = x &- b, va = x &- UInt8((Int(a) + Int(b)) >> 1), vp = x &- predictor
                candidates[i] = x
                sub[i] = vs
                up[i] = vu
                average[i] = va
                paeth[i] = vp
                sums.0 &+= magnitude(x)
                sums.1 &+= magnitude(vs)
                sums.2 &+= magnitude(vu)
                sums.3 &+= magnitude(va)
                sums.4 &+= magnitude(vp)
            }
            // The first pixel has no left neighbour (a and c are zero), the others do.
            for i in 0..<min(bpp, rowBytes) { filter(i, 0, 0) }
            var i = bpp
            while i < rowBytes {
                filter(i, row[i - bpp], above[i - bpp])
                i += 1
            }
            var best = 0
            var least = sums.0
            if sums.1 < least { (best, least) = (1, sums.1) }
            if sums.2 < least { (best, least) = (2, sums.2) }
            if sums.3 < least { (best, least) = (3, sums.3) }
            if sums.4 < least { (best, least) = (4, sums.4) }
            let target = out + y * (rowBytes + 1)
            target[0] = UInt8(best)
            (target + 1).update(from: candidates + best * rowBytes, count: rowBytes)
        }
    }

    private static func appendBigEndian(_ value: UInt32, to bytes: inout [UInt8]) {
        bytes += [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
    }

    private static func appendChunk(_ type: String, _ body: [UInt8], to file: inout Data) {
        var length = [UInt8]()
        appendBigEndian(UInt32(body.count), to: &length)
        file.append(contentsOf: length)
        let typed = Array(type.utf8) + body
        file.append(contentsOf: typed)
        var crc = [UInt8]()
        appendBigEndian(typed.withUnsafeBytes { CRC32.checksum($0) }, to: &crc)
        file.append(contentsOf: crc)
    }
}
