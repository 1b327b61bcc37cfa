import Synchronization

/// Buffers of ``size`` bytes kept for the reads of one file, so that reading a tile with `pread`
/// allocates nothing: four slots, each taken and given back with one atomic operation, so that
/// threads reading at once (a server's event loops) each find one; past them, or for a read
/// longer than ``size``, a buffer is allocated for the read and freed after it. A slot's buffer
/// is allocated on its first use and freed with the pool.
///
/// A `malloc` and `free` of a tile's few kilobytes, with the generic temporary allocation around
/// them, were a tenth of a random lookup's time beside a bare `pread` (bench-pmtiles-read).
final class ReadBuffers: Sendable {
    /// The bytes of a pooled buffer: a tile longer than this is read into one of its own.
    static let size = 64 << 10
    private let slot0 = Atomic<UInt>(0)
    private let slot1 = Atomic<UInt>(0)
    private let slot2 = Atomic<UInt>(0)
    private let slot3 = Atomic<UInt>(0)
    private static let slots = 4

    init() {}

    deinit {
        for index in 0..<Self.slots {
            let bits = exchange(index, 0)
            if bits != 0 { UnsafeMutableRawPointer(bitPattern: bits)?.deallocate() }
        }
    }

    /// A buffer of at least `length` bytes, to give back with ``give(_:length:)``.
    func take(_ length: Int) -> UnsafeMutableRawPointer {
        guard length <= Self.size else { return .allocate(byteCount: length, alignment: 16) }
        for index in 0..<Self.slots {
            let bits = exchange(index, 0)
            if let buffer = UnsafeMutableRawPointer(bitPattern: bits) { return buffer }
        }
        return .allocate(byteCount: Self.size, alignment: 16)
    }

    /// Gives back a buffer ``take(_:)`` returned for `length` bytes: kept in a free slot, or freed.
    func give(_ buffer: UnsafeMutableRawPointer, length: Int) {
        if length <= Self.size {
            let bits = UInt(bitPattern: buffer)
            for index in 0..<Self.slots where compareExchange(index, bits) { return }
        }
        buffer.deallocate()
    }

    private func exchange(_ index: Int, _ value: UInt) -> UInt {
        switch index {
        case 0: slot0.exchange(value, ordering: .acquiringAndReleasing)
        case 1: slot1.exchange(value, ordering: .acquiringAndReleasing)
        case 2: slot2.exchange(value, ordering: .acquiringAndReleasing)
        default: slot3.exchange(value, ordering: .acquiringAndReleasing)
        }
    }

    /// Stores `value` in slot `index` if it is empty.
    private func compareExchange(_ index: Int, _ value: UInt) -> Bool {
        switch index {
        case 0: slot0.compareExchange(expected: 0, desired: value, ordering: .acquiringAndReleasing).exchanged
        case 1: slot1.compareExchange(expected: 0, desired: value, ordering: .acquiringAndReleasing).exchanged
        case 2: slot2.compareExchange(expected: 0, desired: value, ordering: .acquiringAndReleasing).exchanged
        default: slot3.compareExchange(expected: 0, desired: value, ordering: .acquiringAndReleasing).exchanged
        }
    }
}
