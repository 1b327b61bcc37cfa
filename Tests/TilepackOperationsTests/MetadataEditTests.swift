import Foundation
import Testing
import TilepackCore
import TilepackOperations
@_spi(TilepackInternal) import TilepackStorage
import TilepackTestSupport
@_spi(TilepackInternal) import TilepackCompression

/// `tilepack meta` (issue 31): metadata changed in place or by a rewrite, in every format, with
/// the tiles, agg_tiles_hash and every checksum kept true.
@Suite struct MetadataEditTests {
    /// world_cities (with martin's agg_tiles_hash) as an archive of each format, and its tiles.
    static func archive(_ ext: String, in dir: TemporaryDirectory) throws -> String {
        let fixture = TestSupport.fixture("martin/world_cities.mbtiles")
        let path = dir.file("w.\(ext)")
        if ext == "mbtiles" {
            try FileManager.default.copyItem(atPath: fixture, toPath: path)
            try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: path)
        } else {
            _ = try ArchiveConverter.run(source: fixture, destination: path, options: ConvertOptions())
        }
        return path
    }

    static func tiles(_ path: String) throws -> [TileCoordinate: [UInt8]] {
        var tiles: [TileCoordinate: [UInt8]] = [:]
        try ArchiveLocation.open(path).forEachTile { tile, bytes in tiles[tile] = Array(bytes) }
        return tiles
    }

    /// Every tile byte for byte, a clean verify (container, CRCs, agg_tiles_hash), and the keys not
    /// edited as they were.
    static func expectIntact(_ path: String, tiles: [TileCoordinate: [UInt8]], before: TileMetadata, edited: Set<String>) throws {
        #expect(try Self.tiles(path) == tiles)
        let report = ArchiveVerifier.run(path: path)
        #expect(report.errorCount == 0 && report.tiles == 196, "\(report.findings)")
        let after = try MetadataEditor.read(path)
        for key in before.keys where !edited.contains(key) {
            MetadataMappingTests.expectSameValue(after[key], before[key], "\(path): \(key)")
        }
    }

    @Test(arguments: ["mbtiles", "pmtiles", "tilepack"])
    func setAndDeleteKeepTilesHashAndChecksums(_ ext: String) throws {
        let dir = try TemporaryDirectory()
        let path = try Self.archive(ext, in: dir)
        let tiles = try Self.tiles(path)
        let before = try MetadataEditor.read(path)
        #expect(before[TileMetadata.Key.aggregateTilesHash] == "84792BF4EE9AEDDC5B1A60E707011FEE")

        // A value that fits where the metadata was: PMTiles writes it there (through a staged copy
        // past the end, cut off afterwards: the file's length is what it was); a bundle, whose
        // metadata lies between header and index, is always written again.
        let sameLength = ext == "pmtiles" ? "W" : String(repeating: "N", count: before.name!.count)
        let lengthBefore = try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int
        var report = try MetadataEditor.edit(path: path, set: ["name": sameLength])
        #expect(report.method == (ext == "mbtiles" ? .transaction : ext == "pmtiles" ? .inPlace : .rewrite))
        if ext == "pmtiles" { #expect(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int == lengthBefore) }
        #expect(try MetadataEditor.read(path).name == sameLength)
        try Self.expectIntact(path, tiles: tiles, before: before, edited: ["name"])

        // Several keys, one long: it no longer fits, so bundle and PMTiles are written again.
        let long = String(repeating: "a long description ", count: 400)
        report = try MetadataEditor.edit(path: path, set: ["description": long, "attribution": "© someone", "name": "World"])
        #expect(report.method == (ext == "mbtiles" ? .transaction : .rewrite))
        var after = try MetadataEditor.read(path)
        #expect(after.description == long && after.attribution == "© someone" && after.name == "World")
        try Self.expectIntact(path, tiles: tiles, before: before, edited: ["name", "description", "attribution"])

        // Deleting.
        report = try MetadataEditor.edit(path: path, delete: ["description", "attribution"])
        after = try MetadataEditor.read(path)
        #expect(after.description == nil && after.attribution == nil && after.name == "World")
        try Self.expectIntact(path, tiles: tiles, before: before, edited: ["name", "description", "attribution"])
        // No temporary file is left beside it.
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted() == ["w.\(ext)"])
    }

    /// Values `import` would refuse are refused, naming key and value, and the file is untouched.
    @Test(arguments: ["mbtiles", "pmtiles", "tilepack"])
    func badValuesChangeNothing(_ ext: String) throws {
        let dir = try TemporaryDirectory()
        let path = try Self.archive(ext, in: dir)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        let cases: [(set: [String: String], delete: [String], says: String)] = [
            (["bounds": "1,2,3"], [], "metadata 'bounds' is '1,2,3'"),
            (["bounds": "0,10,5,-10"], [], "metadata 'bounds' is '0,10,5,-10'"),
            (["center": "500,0,2"], [], "metadata 'center' is '500,0,2'"),
            (["minzoom": "x"], [], "metadata 'minzoom' is 'x'"),
            (["minzoom": "9"], [], "metadata 'minzoom' 9 is greater than 'maxzoom' 6"),
            (["type": "raster"], [], "metadata 'type' is 'raster'"),
            (["format": "jpg"], [], "contradicts the tiles, which are pbf"),
            (["format": "tiff"], [], "metadata 'format' is 'tiff'"),
            (["json": "{"], [], "metadata 'json' is not valid JSON"),
            (["json": #"{"vector_layers":[{"fields":{}}]}"#], [], "has no 'id'"),
            ([:], ["name"], "metadata 'name' is required and missing"),
            ([:], ["nosuchkey"], "has no metadata key 'nosuchkey'"),
            (["agg_tiles_hash": "00"], [], "'agg_tiles_hash' is computed from the tiles"),
            (["hash_algorithm": "fnv1a"], [], "'hash_algorithm' is computed from the tiles"),
            (["": "x"], [], "a metadata key cannot be empty"),
        ]
        for entry in cases {
            #expect(throws: OperationError.self, "\(entry)") { try MetadataEditor.edit(path: path, set: entry.set, delete: entry.delete) }
            do {
                _ = try MetadataEditor.edit(path: path, set: entry.set, delete: entry.delete)
            } catch {
                #expect(error.description.contains(entry.says), "\(error)")
                #expect(error.description.hasPrefix(path), "\(error)")
            }
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == bytes, "\(entry)")
        }
    }

    /// PMTiles JSON members that are numbers or arrays keep their type when other keys change.
    @Test func pmtilesJSONKeepsItsTypes() throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("t.pmtiles")
        try FileManager.default.copyItem(atPath: TestSupport.fixture("pmtiles/test_fixture_1.pmtiles"), toPath: path)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: path)
        let before = try PMTilesArchive(path: path)
        let raw = try Self.rawJSON(before)
        _ = try MetadataEditor.edit(path: path, set: ["attribution": "someone"])
        var expected = raw
        expected["attribution"] = "someone"
        #expect(NSDictionary(dictionary: try Self.rawJSON(PMTilesArchive(path: path))) == NSDictionary(dictionary: expected))
        #expect(ArchiveVerifier.run(path: path).errorCount == 0)
    }

    static func rawJSON(_ archive: PMTilesArchive) throws -> [String: Any] {
        let header = archive.header
        let bytes = try archive.source.withBytes(offset: Int(header.metadataOffset), length: Int(header.metadataLength)) {
            try Gzip.decompress($0, limit: 1 << 24).get()
        }
        return try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
    }

    @Test func fromJSONTakesStringsOtherValuesAndNull() throws {
        let data = Data(#"{"name":"n","minzoom":3,"json":{"vector_layers":[]},"description":null}"#.utf8)
        let (set, delete) = try MetadataEditor.pairs(fromJSON: data, path: "x.json")
        #expect(set == ["name": "n", "minzoom": "3", "json": #"{"vector_layers":[]}"#])
        #expect(delete == ["description"])
        #expect(throws: OperationError.self) { try MetadataEditor.pairs(fromJSON: Data("[1]".utf8), path: "x.json") }
    }
}
