import TilepackChecksum
import TilepackCore
import TilepackStorage

/// A cheap structural check of a tile's bytes: far less work than decoding, but enough to catch
/// the damage that import meets (wrong magic, truncation, a PNG chunk whose CRC fails, a JPEG
/// without its end marker). Full decoding is `verify`'s job.
package enum TileIntegrity {
    /// What the check found.
    package enum Finding: Error, Hashable, Sendable, CustomStringConvertible {
        case empty
        case unknownFormat
        case damaged(TileFormat, String)

        package var description: String {
            switch self {
            case .empty: "empty file"
            case .unknownFormat: "bytes of no known tile format"
            case .damaged(let format, let reason): "damaged \(format): \(reason)"
            }
        }
    }

    /// Returns the tile's format when its structure is sound, or throws what is wrong.
    package static func check(_ bytes: UnsafeRawBufferPointer) throws(Finding) -> TileFormat {
        var crc: WholeFileCRC?
        return try check(bytes, crc: &crc)
    }

    /// ``check(_:)``, and for a PNG also the CRC-32 of the whole file, derived from the chunk CRCs
    /// the check computes anyway (``CRC32/combine(_:_:using:)``), so a writer that stores the file's CRC needs no
    /// pass of its own over the bytes; `nil` for other formats.
    package static func checkComputingCRC(_ bytes: UnsafeRawBufferPointer) throws(Finding) -> (format: TileFormat, crc: UInt32?) {
        var crc: WholeFileCRC? = WholeFileCRC()
        let format = try check(bytes, crc: &crc)
        return (format, format == .png ? crc?.value : nil)
    }

    /// The CRC-32 of a whole file built from its pieces in order: bytes, or ranges whose CRC is known.
    struct WholeFileCRC {
        private(set) var value: UInt32 = 0
        /// The last combination operator made, and the length it is for (PNG's data chunks are
        /// mostly of one length, and making an operator costs more than applying it).
        private var operatorLength = -1
        private var combineOperator: UInt32 = 0

        mutating func add(_ bytes: UnsafeRawBufferPointer) {
            guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
            value = CRC32.checksum(UnsafeRawBufferPointer(start: base, count: bytes.count), continuing: value)
        }

        /// Appends `length` bytes whose own CRC-32 is `crc`.
        mutating func add(crc: UInt32, length: Int) {
            if length != operatorLength {
                combineOperator = CRC32.combineOperator(length: length)
                operatorLength = length
            }
            value = CRC32.combine(value, crc, using: combineOperator)
        }
    }

    private static func check(_ bytes: UnsafeRawBufferPointer, crc: inout WholeFileCRC?) throws(Finding) -> TileFormat {
        guard !bytes.isEmpty else { throw .empty }
        guard let format = TileFormat.sniff(bytes) else { throw .unknownFormat }
        switch format {
        case .png: try checkPNG(bytes, crc: &crc)
        case .jpeg: try checkJPEG(bytes)
        case .webp: try checkWebP(bytes)
        case .gif:
            // The trailer byte 0x3B ends every GIF.
            guard bytes[bytes.count - 1] == 0x3B else { throw .damaged(.gif, "no trailer byte (truncated)") }
        case .pbf:
            // gzip: a 10-byte header, deflate data and an 8-byte trailer (CRC-32 and size).
            if TileFormat.isGzip(bytes) {
                guard bytes.count >= 18, bytes[2] == 8 else { throw .damaged(.pbf, "gzip stream too short or not deflate") }
            }
        case .json:
            break
        }
        return format
    }

    /// Walks every chunk: lengths inside the file, each chunk's CRC-32, IHDR first, IDAT present, IEND last.
    /// With `crc`, also builds the CRC-32 of the whole file from the chunks'.
    static func checkPNG(_ bytes: UnsafeRawBufferPointer, crc: inout WholeFileCRC?) throws(Finding) {
        var offset = 8
        var covered = 0  // bytes of the file `crc` covers
        var chunkIndex = 0
        var sawIDAT = false
        while true {
            guard offset + 12 <= bytes.count else { throw .damaged(.png, "truncated before IEND (at byte \(offset))") }
            let length = Int(readUInt32BE(bytes, offset))
            guard length <= bytes.count - offset - 12 else {
                throw .damaged(.png, "chunk at byte \(offset) declares \(length) bytes, past the end of the file")
            }
            let type = readUInt32BE(bytes, offset + 4)
            let declared = readUInt32BE(bytes, offset + 8 + length)
            let computed = CRC32.checksum(UnsafeRawBufferPointer(rebasing: bytes[(offset + 4)..<(offset + 8 + length)]))
            guard declared == computed else {
                throw .damaged(
                    .png, "CRC of chunk \(fourCC(type)) at byte \(offset) fails (declared \(hex(declared)), computed \(hex(computed)))")
            }
            if crc != nil {
                // Up to this chunk's type (the signature or the last CRC, and the length), then its type and data.
                crc?.add(UnsafeRawBufferPointer(rebasing: bytes[covered..<(offset + 4)]))
                crc?.add(crc: computed, length: length + 4)
                covered = offset + 8 + length
            }
            if chunkIndex == 0, type != 0x4948_4452 || length != 13 { throw .damaged(.png, "first chunk is not IHDR") }
            if type == 0x4944_4154 { sawIDAT = true }
            offset += 12 + length
            chunkIndex += 1
            if type == 0x4945_4E44 {
                guard sawIDAT else { throw .damaged(.png, "no IDAT chunk") }
                crc?.add(UnsafeRawBufferPointer(rebasing: bytes[covered...]))
                return
            }
        }
    }

    /// Start of image, then an end-of-image marker at the end (trailing zero padding allowed).
    static func checkJPEG(_ bytes: UnsafeRawBufferPointer) throws(Finding) {
        var end = bytes.count
        while end > 2, bytes[end - 1] == 0 { end -= 1 }
        guard end >= 4, bytes[end - 2] == 0xFF, bytes[end - 1] == 0xD9 else {
            throw .damaged(.jpeg, "no end-of-image marker (truncated)")
        }
    }

    /// The RIFF size must account for the whole file (plus one pad byte at most).
    static func checkWebP(_ bytes: UnsafeRawBufferPointer) throws(Finding) {
        let riffSize = Int(UInt32(bytes[4]) | UInt32(bytes[5]) << 8 | UInt32(bytes[6]) << 16 | UInt32(bytes[7]) << 24)
        guard riffSize + 8 == bytes.count || riffSize + 9 == bytes.count else {
            throw .damaged(.webp, "RIFF size says \(riffSize + 8) bytes, the file has \(bytes.count)")
        }
    }

    private static func readUInt32BE(_ bytes: UnsafeRawBufferPointer, _ offset: Int) -> UInt32 {
        UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 8 | UInt32(bytes[offset + 3])
    }

    private static func fourCC(_ value: UInt32) -> String {
        let scalars = [24, 16, 8, 0].map { UInt8((value >> UInt32($0)) & 0xFF) }
        return scalars.allSatisfy { $0 >= 0x20 && $0 < 0x7F } ? String(decoding: scalars, as: UTF8.self) : hex(value)
    }

    private static func hex(_ value: UInt32) -> String {
        let digits = String(value, radix: 16, uppercase: true)
        return String(repeating: "0", count: 8 - digits.count) + digits
    }
}
