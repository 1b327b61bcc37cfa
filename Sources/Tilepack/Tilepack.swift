// `import Tilepack`: everything an app uses to read bundled tiles and show them in a tile layer.
//
// - TilepackCore: tile coordinates, XYZ/TMS, Web Mercator, boxes and covers, formats, metadata,
//   the `TileArchive` read API.
// - TilepackStorage: MBTiles and .tilepack bundles, `openTileArchive(path:)`, the writers.
// - TilepackImaging: PNG/JPEG/WebP decoding into a caller's buffer, PNG encoding, resampling.
// - TileLayer: the map SDK's custom raster tile layer (NMAMapTileLayer, MKTileOverlay semantics).
// - TilepackAdapter: any archive served to a tile layer as a raw-bitmap data source.
// - TilepackPrefetch: offline prefetch of a box or a route corridor from a tile server.
// - TilepackURLSession: URLSession, the HTTP transport of every client made without one.
// - TilepackOperations: only what applies a patch in the background (`PatchRequest`), not the
//   command-line operations. Its request, status and error types are Core's, which a sync
//   (`SyncRequest`, in the `TilepackRemote` product) shares.
@_exported import TileLayer
@_exported import TilepackAdapter
@_exported import TilepackCore
@_exported import TilepackImaging
@_exported import TilepackPrefetch
@_exported import TilepackStorage
@_exported import TilepackURLSession

@_exported import struct TilepackOperations.PatchReport
@_exported import class TilepackOperations.PatchRequest
