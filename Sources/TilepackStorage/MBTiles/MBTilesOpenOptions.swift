import Foundation

/// How to open an MBTiles file for reading.
public struct MBTilesOpenOptions: Hashable, Sendable {
    /// The caller promises the file cannot change while it is open (an app bundle, a read-only
    /// volume): SQLite then takes no locks and never looks for a journal (`immutable=1`).
    /// Leave `false` for a file another process might write; it is still opened read-only.
    public var immutable: Bool
    /// How many idle read connections the archive keeps for reuse. More concurrent readers than
    /// this still work; the extra connections are closed when they are returned.
    public var maximumIdleConnections: Int
    /// Seconds one step of a query may run before it is stopped with an error, so that a
    /// hostile file (a `tiles` view over an endless recursive query) cannot hang the reader.
    /// Legitimate steps are far shorter; `nil` turns the limit off.
    public var stepTimeLimit: Double?
    /// Bytes of the file SQLite may memory-map (`PRAGMA mmap_size`), so page reads need no
    /// `read(2)`. `nil` = the default: 1 GiB for an immutable file, 0 (off) otherwise, because
    /// a mapped file that another process truncates would crash the reader (SIGBUS).
    public var memoryMapSize: Int?
    /// SQLite virtual-machine instructions one query may run, all its steps together, before it
    /// is stopped with an error: a `tiles` view that yields rows without end is stopped too.
    /// `nil` = the default, 10^9 + 64 per byte of the file (a legitimate query runs far fewer:
    /// a few instructions per byte). Applies only with a `stepTimeLimit`.
    public var workLimit: Int?
    /// Whether a pooled connection keeps its read transaction from one read to the next, until
    /// ``MBTilesArchive/endReadTransactions()`` (`false`: each read is a transaction of its own).
    /// A read transaction of a file that may be written costs SQLite's lock and change checks
    /// (a look for a journal and for a WAL, an `fstat`, a `pread` of the change counter, a lock
    /// and an unlock): kept, they are paid once a period, not once a tile. Another process still
    /// reads the file (the lock is a shared one), and a writer waits for the next call of
    /// ``MBTilesArchive/endReadTransactions()``; reads see its change from then on. No effect on
    /// an `immutable` file, which takes no locks.
    public var keepsReadTransactions: Bool
    /// Up to how many tiles the archive holds the rowid of each tile in memory (16 bytes a tile,
    /// read once at opening from the coordinate index), so that a tile is read by its rowid, one
    /// B-tree walk instead of two (`0`, the default: none). Only for a flat `tiles` table with a
    /// unique coordinate index; a file with more tiles is read by coordinates. Answers are the
    /// same either way: a read by rowid that does not find the tile there (the file was changed
    /// in place) looks it up by coordinates.
    public var rowidIndexLimit = 0

    public init(
        immutable: Bool = false, maximumIdleConnections: Int = max(4, ProcessInfo.processInfo.activeProcessorCount),
        stepTimeLimit: Double? = 60, memoryMapSize: Int? = nil, workLimit: Int? = nil, keepsReadTransactions: Bool = false
    ) {
        self.immutable = immutable
        self.maximumIdleConnections = max(1, maximumIdleConnections)
        self.stepTimeLimit = stepTimeLimit
        self.memoryMapSize = memoryMapSize
        self.workLimit = workLimit
        self.keepsReadTransactions = keepsReadTransactions
    }

    /// The default work limit for a file of `fileSize` bytes.
    static func defaultWorkLimit(fileSize: Int) -> Int {
        let (scaled, overflow) = fileSize.multipliedReportingOverflow(by: 64)
        return overflow ? .max : 1_000_000_000 &+ scaled
    }

    /// The `mmap_size` these options give.
    var effectiveMemoryMapSize: Int { max(0, memoryMapSize ?? (immutable ? 1 << 30 : 0)) }
}
