import Foundation
import Testing
import TilepackTestSupport

/// `tilepack meta` as a user runs it.
@Suite struct MetaCommandTests {
    @Test func listGetSetDelete() async throws {
        let dir = try TemporaryDirectory()
        let path = dir.file("w.pmtiles")
        let converted = try await Binary.run(["convert", TestSupport.fixture("martin/world_cities.mbtiles"), path, "--quiet"])
        #expect(converted.status == 0, "\(converted.stderr)")
        var run = try await Binary.run(["meta", path])
        #expect(run.status == 0 && run.stdout.contains("name\tMajor cities from Natural Earth data\n"), "\(run.stdout)")
        run = try await Binary.run(["meta", "set", path, "name", "Cities", "attribution", "Natural Earth"])
        #expect(
            run.status == 0 && run.stdout.contains("set attribution, name in \(path) by writing the file again"),
            "\(run.stdout) \(run.stderr)")
        run = try await Binary.run(["meta", "get", path, "attribution"])
        #expect(run.status == 0 && run.stdout == "Natural Earth\n")
        try Data(#"{"description": "From a file", "version": 3, "attribution": null}"#.utf8).write(
            to: URL(fileURLWithPath: dir.file("m.json")))
        run = try await Binary.run(["meta", "set", path, "--from", dir.file("m.json"), "--json"])
        #expect(run.status == 0 && run.stdout.contains(#""method""#), "\(run.stdout) \(run.stderr)")
        run = try await Binary.run(["meta", "--json", path])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: String])
        #expect(
            object["description"] == "From a file" && object["version"] == "3" && object["attribution"] == nil && object["name"] == "Cities"
        )
        run = try await Binary.run(["meta", "delete", path, "description"])
        #expect(run.status == 0)
        run = try await Binary.run(["meta", "get", path, "description"])
        #expect(run.status == 1 && run.stderr.contains("has no metadata key 'description'"))
        // Refused, naming the key and value; exit 1 and the file unchanged.
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        run = try await Binary.run(["meta", "set", path, "minzoom", "-3"])
        #expect(run.status == 1 && run.stderr.contains("metadata 'minzoom' is '-3'"), "\(run.stderr)")
        run = try await Binary.run(["meta", "set", path, "name"])
        #expect(run.status != 0 && run.stderr.contains("'name' has no value"), "\(run.stderr)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == bytes)
    }
}
