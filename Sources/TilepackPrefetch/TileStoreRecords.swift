import Foundation
import TilepackCore

// The rows of the prefetch store (MBTilesTileStore) as values: a tile's bookkeeping, a region,
// and what an eviction or purge removed.

/// What became of one tile the last time it was fetched.
package enum TileFetchOutcome: Int, Hashable, Sendable, Codable, CustomStringConvertible {
    /// The tile's bytes are in `tiles`.
    case stored = 1
    /// The source has no tile there (HTTP 404 or 204): recorded, never stored.
    case absent = 2
    /// Every attempt failed (network faults, server errors, or a body that is not a valid tile).
    case failed = 3

    package var description: String {
        switch self {
        case .stored: "stored"
        case .absent: "absent"
        case .failed: "failed"
        }
    }
}

/// The bookkeeping row of one tile (table `tilepack_tile_state`).
package struct TileStateRecord: Hashable, Sendable {
    package var tile: TileCoordinate
    package var outcome: TileFetchOutcome
    /// The last HTTP status seen, 0 when none (a connection fault).
    package var httpStatus: Int
    /// Requests made for the tile so far, over all runs.
    package var attempts: Int
    /// The stored body's size (0 unless stored).
    package var bytes: Int
    /// The validators of the stored body, for conditional refresh.
    package var etag: String?
    package var lastModified: String?
    /// Why the tile failed (nil otherwise).
    package var message: String?
    /// Seconds since 1970 of the last fetch or revalidation, and of the last use (fetch,
    /// revalidation or ``MBTilesTileStore/touch(_:attempts:at:)``): eviction removes the least recently used first.
    package var fetchedAt: Double
    package var lastUsed: Double

    package init(
        tile: TileCoordinate, outcome: TileFetchOutcome, httpStatus: Int = 0, attempts: Int = 1, bytes: Int = 0,
        etag: String? = nil, lastModified: String? = nil, message: String? = nil,
        fetchedAt: Double = Date().timeIntervalSince1970, lastUsed: Double? = nil
    ) {
        self.tile = tile
        self.outcome = outcome
        self.httpStatus = httpStatus
        self.attempts = attempts
        self.bytes = bytes
        self.etag = etag
        self.lastModified = lastModified
        self.message = message
        self.fetchedAt = fetchedAt
        self.lastUsed = lastUsed ?? fetchedAt
    }
}

/// A region recorded in the store (table `tilepack_regions`): what was asked for, opaque to the
/// store (the prefetcher's JSON), and whether its tiles are kept out of eviction and purges.
package struct TileRegionRecord: Hashable, Sendable {
    package var id: Int
    /// A canonical description of the request: the same request finds the same region (resume).
    package var key: String
    /// The request, as its owner encoded it.
    package var request: String
    /// Kept regions pin their tiles: eviction and ``MBTilesTileStore/purge(isPinned:)`` leave them.
    package var kept: Bool
    /// The last status written by the owner (e.g. `in-progress`, `success`).
    package var status: String
    package var createdAt: Double
    package var updatedAt: Double
}

/// What an eviction or purge removed.
public struct TileStorePurge: Hashable, Sendable, Codable {
    /// Tiles removed from `tiles`.
    public var tiles: Int
    /// Their bytes.
    public var bytes: Int
    /// Bookkeeping rows of absent or failed tiles removed.
    public var records: Int

    public init(tiles: Int = 0, bytes: Int = 0, records: Int = 0) {
        self.tiles = tiles
        self.bytes = bytes
        self.records = records
    }
}
