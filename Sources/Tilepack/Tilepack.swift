// `import Tilepack`: everything an app uses to read bundled tiles and show them in a tile layer.
//
// - TilepackCore: tile coordinates, XYZ/TMS, Web Mercator, boxes and covers, formats, metadata,
//   the `TileArchive` read API.
// - TilepackStorage: MBTiles and .tilepack bundles, `openTileArchive(path:)`, the writers.
// - TilepackImaging: PNG/JPEG/WebP decoding into a caller's buffer, PNG encoding, resampling.
// - TileLayer: the map SDK's custom raster tile layer (NMAMapTileLayer, MKTileOverlay semantics).
// - TilepackAdapter: any archive served to a tile layer as a raw-bitmap data source.
// - TilepackPrefetch: offline prefetch of a box or a route corridor from a tile server.
// - TilepackPlan: the budget planner: the deepest zooms of an area that fit the space an app has
//   (`TilePlan`, `PlanFocus`; the prefetcher plans and fetches within a budget).
// - TilepackURLSession: URLSession, the HTTP transport of every client made without one.
// - TilepackUpdate: updates: diff, patch (`PatchRequest` applies one in the background), the
//   patch formats. Its request and status types are those a sync (`SyncRequest`, in the
//   `TilepackRemote` product, which an app that reads remote archives adds) shares.
//
// Not the command-line operations (TilepackOperations), nor remote archives and S3
// (TilepackRemote): tools/check-lean-library.sh checks that this module's dependencies reach neither.
@_exported import TileLayer
@_exported import TilepackAdapter
@_exported import TilepackCore
@_exported import TilepackImaging
@_exported import TilepackPlan
@_exported import TilepackPrefetch
@_exported import TilepackStorage
@_exported import TilepackURLSession
@_exported import TilepackUpdate
