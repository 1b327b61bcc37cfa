import Foundation
import Testing
import TilepackCore
import TilepackTestSupport

@testable import TilepackStorage

/// The one door for writing (`openTileSink`): every format staged beside its destination and put
/// in place by the sink alone; a sink dropped or cancelled before that leaves nothing.
@Suite struct TileSinkTests {
    /// The outputs of every format the door writes, by name.
    static let names = ["out.mbtiles", "out.tilepack", "out.pmtiles", "out"]
    static let metadata = TileMetadata(["name": "door", "format": "png"])
    static let tiles = [TileCoordinate(uncheckedZoom: 0, x: 0, y: 0), TileCoordinate(uncheckedZoom: 1, x: 1, y: 0)]

    /// A sink for `name` in `dir` with two tiles added.
    static func filledSink(_ dir: TemporaryDirectory, _ name: String, overwrite: Bool = false) throws -> TileSink {
        let path = dir.file(name)
        let sink = try openTileSink(
            path: path, format: TileSinkFormat(destinationPath: path), metadata: metadata, options: TileSinkOptions(overwrite: overwrite))
        try sink.begin(content: .encoded(.png))
        for (i, tile) in tiles.enumerated() {
            try (HostilePMTiles.pngBytes + [UInt8(i)]).withUnsafeBytes { try sink.add(tile, bytes: $0) }
        }
        return sink
    }

    /// The names in `dir` other than `keep`.
    static func others(_ dir: TemporaryDirectory, than keep: Set<String> = []) -> [String] {
        directoryEntries(dir).filter { !keep.contains($0) }
    }

    @Test(arguments: names)
    func aSinkDroppedOrCancelledBeforeItCommitsLeavesNothing(name: String) throws {
        let dir = try TemporaryDirectory("sink-drop")
        do {
            let sink = try Self.filledSink(dir, name)
            // Staged beside the destination, nothing at it.
            let staged = Self.others(dir)
            #expect(staged.count == 1 && staged[0].hasPrefix(".\(name).tmp-"), "\(staged)")
            _ = sink
        }
        #expect(Self.others(dir).isEmpty, "dropped: \(Self.others(dir))")
        try Self.filledSink(dir, name).cancel()
        #expect(Self.others(dir).isEmpty, "cancelled: \(Self.others(dir))")
        // Completed (whole, flushed) but not committed: still nothing once dropped.
        do {
            let sink = try Self.filledSink(dir, name)
            try sink.complete(metadata: Self.metadata)
            #expect(!FileManager.default.fileExists(atPath: dir.file(name)))
            if name != "out" {
                let written = try openTileArchive(path: sink.stagedPath)
                #expect(try written.tileCount() == 2)
            }
        }
        #expect(Self.others(dir).isEmpty, "completed, dropped: \(Self.others(dir))")
    }

    /// Over an existing destination (`overwrite`), a sink dropped after completing leaves the old
    /// output byte for byte; one that commits replaces it, and nothing else is left beside it.
    @Test(arguments: names)
    func anOldOutputStaysUntilTheSinkCommits(name: String) throws {
        let dir = try TemporaryDirectory("sink-replace")
        let path = dir.file(name)
        try Self.filledSink(dir, name).finish(metadata: TileMetadata(["name": "old", "format": "png"]))
        let old = try Self.snapshot(path)
        do {
            let sink = try Self.filledSink(dir, name, overwrite: true)
            try sink.complete(metadata: Self.metadata)
            #expect(try Self.snapshot(path) == old)
        }
        #expect(try Self.snapshot(path) == old)
        #expect(Self.others(dir, than: [name]).isEmpty, "\(Self.others(dir))")
        try Self.filledSink(dir, name, overwrite: true).finish(metadata: Self.metadata)
        #expect(try Self.snapshot(path) != old)
        #expect(Self.others(dir, than: [name]).isEmpty, "\(Self.others(dir))")
        if name == "out" {
            let json = try #require(FileManager.default.contents(atPath: path + "/metadata.json"))
            #expect(String(decoding: json, as: UTF8.self).contains("\"door\""))
            #expect(FileManager.default.contents(atPath: path + "/1/1/0.png") == Data(HostilePMTiles.pngBytes + [1]))
        } else {
            let archive = try openTileArchive(path: path)
            #expect(try archive.metadata().name == "door")
            #expect(try archive.tileData(at: Self.tiles[1]) == Data(HostilePMTiles.pngBytes + [1]))
        }
    }

    /// A file's bytes, or a folder's files and their bytes.
    static func snapshot(_ path: String) throws -> [String: Data] {
        guard let files = FileManager.default.subpaths(atPath: path), !files.isEmpty else {
            return ["": try Data(contentsOf: URL(fileURLWithPath: path))]
        }
        return Dictionary(
            uniqueKeysWithValues: files.compactMap { file in FileManager.default.contents(atPath: path + "/" + file).map { (file, $0) } })
    }

    /// What the door refuses, before anything is written: a taken destination, an append to a
    /// file written in one pass, raw pixels where only encoded images go, a name of no format.
    @Test func refusalsNameTheDestinationAndLeaveNothing() throws {
        let dir = try TemporaryDirectory("sink-refusals")
        for name in Self.names {
            let path = dir.file(name)
            try Self.filledSink(dir, name).finish(metadata: Self.metadata)
            #expect(throws: TileArchiveError(path: path, fault: .alreadyExists)) { try Self.filledSink(dir, name) }
            if name != "out.mbtiles" {
                let error = #expect(throws: TileArchiveError.self) {
                    try openTileSink(path: path, format: TileSinkFormat(destinationPath: path), options: TileSinkOptions(append: true))
                }
                #expect(error?.path == path && "\(error!)".contains("cannot be appended to: it is written in one pass"), "\(error!)")
            }
        }
        for name in ["raw.pmtiles", "raw"] {
            let path = dir.file(name)
            let sink = try openTileSink(path: path, format: TileSinkFormat(destinationPath: path))
            let layout = RawBitmapLayout(pixelFormat: .rgba8888, width: 256, height: 256)
            let error = #expect(throws: TileArchiveError.self) { try sink.begin(content: .rawBitmap(layout)) }
            #expect(error?.path == path && "\(error!)".contains("pixels cannot be stored in"), "\(error!)")
        }
        let error = #expect(throws: TileArchiveError.self) { try TileArchiveFormat(destinationPath: dir.file("x.zip")) }
        #expect("\(error!)".contains("use .mbtiles (MBTiles), .tilepack (tilepack bundle) or .pmtiles (PMTiles)"), "\(error!)")
        #expect(TileSinkFormat(destinationPath: "a/B.PMTiles") == .archive(.pmtiles) && TileSinkFormat(destinationPath: "a/b") == .tree)
        #expect(Self.others(dir, than: Set(Self.names)).isEmpty, "\(Self.others(dir))")
    }

    /// An input that changed while it was read: the sink refuses to complete, naming the input
    /// and saying nothing was written; no output and no staging file are left.
    @Test func anInputChangedDuringTheReadLeavesNoOutput() throws {
        let dir = try TemporaryDirectory("sink-inputs")
        let source = dir.file("in.pmtiles")
        try Self.filledSink(dir, "in.pmtiles").finish(metadata: Self.metadata)
        let input = ReplacedArchive(base: try openTileArchive(path: source))
        for name in Self.names.dropLast() {
            let path = dir.file(name)
            let sink = try openTileSink(
                path: path, format: TileSinkFormat(destinationPath: path), metadata: Self.metadata,
                options: TileSinkOptions(inputs: [input]))
            try sink.begin(content: .encoded(.png))
            let error = #expect(throws: TileArchiveError.self) { try sink.finish(metadata: Self.metadata) }
            #expect(error?.path == source && "\(error!)".contains("nothing was written to \(path)"), "\(String(describing: error))")
        }
        #expect(Self.others(dir, than: ["in.pmtiles"]).isEmpty, "\(Self.others(dir))")
    }
}

/// An archive whose source was replaced while it was read.
private struct ReplacedArchive: TileArchive {
    let base: any TileArchive
    var path: String { base.path }
    var content: TileContent? { base.content }
    func metadata() throws -> TileMetadata { try base.metadata() }
    func containsTile(at tile: TileCoordinate) throws -> Bool { try base.containsTile(at: tile) }
    func withTileBytes<R>(at tile: TileCoordinate, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R? {
        try base.withTileBytes(at: tile, body)
    }
    func readTile(at tile: TileCoordinate, into buffer: UnsafeMutableRawBufferPointer) throws -> Int? {
        try base.readTile(at: tile, into: buffer)
    }
    func zoomLevels() throws -> [ZoomLevelSummary] { try base.zoomLevels() }
    func forEachTile(_ body: (TileCoordinate, UnsafeRawBufferPointer) throws -> Void) throws { try base.forEachTile(body) }
    func confirmUnchanged() throws { throw TileArchiveError(path: path, fault: .corrupt("replaced while it was read")) }
}
