import Foundation
import Testing
import TilepackCore
import TilepackOperations
import TilepackStorage
import TilepackTestSupport

@testable import TilepackPrefetch

/// The built `tilepack` command (`swift test` builds it beside the tests: its absence is a failure).
func tilepackBinary() throws -> URL {
    try #require(TestSupport.tilepackBinary, "the tilepack binary is built beside the tests (swift build --build-tests)")
}

/// Runs the command, waiting at most `timeout` seconds.
func runTilepack(_ binary: URL, _ arguments: [String], timeout: Double = 60) async throws -> CommandOutput {
    try await TestSupport.run(binary, arguments, timeout: timeout)
}

@Suite("tilepack fetch")
struct FetchCommandTests {
    @Test("kill -9 mid-fetch, then the same command resumes: nothing stored is asked for again, the archive verifies")
    func killAndResume() async throws {
        let binary = try tilepackBinary()
        let server = try TileServer()
        server.delay.withLock { $0 = .milliseconds(4) }
        let directory = try TemporaryDirectory()
        let path = directory.file("kill.mbtiles")
        let box = GeoBoundingBox(west: 5, south: 45, east: 15, north: 55)
        let zooms = 0...11
        let arguments = [
            "fetch", server.template, path, "--bbox", "\(box.west),\(box.south),\(box.east),\(box.north)",
            "--zoom", "\(zooms.lowerBound)-\(zooms.upperBound)", "--concurrency", "4", "--quiet",
        ]
        let cover = try PrefetchRequest.boundingBox(box, zooms: zooms).cover()
        try #require(cover.count > 3000)

        // Kill once 2000 tiles were asked for (about 2 s at 4 ms a tile, 4 at a time; a batch
        // commits every second or 32 MiB),
        // watching on a thread of its own so that a busy cooperative pool cannot make it late.
        let killed = try await onThread {
            let process = Process()
            process.executableURL = binary
            process.arguments = arguments
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            let deadline = Date().addingTimeInterval(30)
            while server.server.requestCount < 2000 && process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            return process.terminationReason == .uncaughtSignal
        }
        #expect(killed)
        let requestedBefore = server.server.requestCount
        try #require(requestedBefore < cover.count, "the fetch ended before it was killed")

        // What survived the kill (opening read-write rolls back a hot journal).
        let store = try MBTilesTileStore(path: path)
        let stored = Set(try cover.filter { try store.containsTile($0) })
        try store.close()
        #expect(!stored.isEmpty)

        let result = try await runTilepack(binary, arguments + ["--json"])
        #expect(result.status == 0, "\(result.stderr)")
        let report = try JSONDecoder().decode(PrefetchReport.self, from: Data(result.stdout.utf8))
        #expect(report.status == .success && report.alreadyPresent == stored.count && report.downloaded == cover.count - stored.count)
        let again = server.server.requests.dropFirst(requestedBefore).compactMap { TileServer.tile(path: $0.path) }
        #expect(Set(again).isDisjoint(with: stored))
        #expect(again.count == cover.count - stored.count)
        let verify = ArchiveVerifier.run(path: path)
        #expect(verify.errorCount == 0 && verify.tiles == cover.count)
    }

    @Test("Ctrl-C (SIGINT) stops cleanly: exit 130, a valid archive, and the same command completes it")
    func interrupt() async throws {
        let binary = try tilepackBinary()
        let server = try TileServer()
        server.delay.withLock { $0 = .milliseconds(10) }
        let directory = try TemporaryDirectory()
        let path = directory.file("int.mbtiles")
        let arguments = ["fetch", server.template, path, "--bbox", "5,45,15,55", "--zoom", "0-9", "--concurrency", "2"]
        let (status, text) = try await onThread {
            let process = Process()
            process.executableURL = binary
            process.arguments = arguments
            let output = Pipe()
            process.standardOutput = output
            process.standardError = FileHandle.nullDevice
            try process.run()
            let deadline = Date().addingTimeInterval(30)
            while server.server.requestCount < 100 && process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
            kill(process.processIdentifier, SIGINT)
            let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            return (process.terminationStatus, text)
        }
        #expect(status == 130 && text.hasPrefix("cancelled:"), "\(text)")
        // Cancelled cleanly: the batch in flight was committed; the file verifies as it is.
        let verify = ArchiveVerifier.run(path: path)
        #expect(verify.errorCount == 0 && verify.tiles >= 50, "\(verify.findings)")
        server.delay.withLock { $0 = nil }
        let resumed = try await runTilepack(binary, arguments + ["--quiet"])
        #expect(resumed.status == 0 && resumed.stdout.contains("\(verify.tiles) already present"), "\(resumed.stdout)")
    }

    @Test(
        "the default transport and --transport curl fetch the same tiles on Linux (urlsession elsewhere); --transport sockets and --pipeline say they were removed"
    )
    func transports() async throws {
        let binary = try tilepackBinary()
        let server = try TileServer()
        let directory = try TemporaryDirectory()
        let request = PrefetchRequest.boundingBox(berlin, zooms: 6...10)
        let cover = try request.cover()
        for transport in TestTransport.available {
            let path = directory.file("\(transport).mbtiles")
            let before = server.server.requestCount
            #if os(Linux)
            // The default (libcurl) for one, named for the other.
            let chosen = transport == .curl ? ["--transport", "curl"] : []
            #else
            let chosen = ["--transport", "urlsession"]
            #endif
            let result = try await runTilepack(
                binary,
                [
                    "fetch", server.template, path, "--bbox", "13.3,52.45,13.5,52.56", "--zoom", "6-10",
                    "--quiet",
                ] + chosen)
            #expect(result.status == 0, "\(result.stderr)")
            #expect(server.server.requestCount - before == cover.count)
            let store = try MBTilesTileStore(path: path)
            #expect(try cover.allSatisfy { try store.tileData($0) == TestTiles.tile($0) })
            try store.close()
        }
        #if os(Linux)
        // The removed sockets transport and its pipelining: refused before any request, saying so.
        let requests = server.server.requestCount
        for removed in [["--transport", "sockets"], ["--pipeline", "2"], ["--pipeline", "2", "--transport", "curl"]] {
            let path = directory.file("removed.mbtiles")
            let result = try await runTilepack(
                binary, ["fetch", server.template, path, "--bbox", "13.3,52.45,13.5,52.56", "--zoom", "6"] + removed)
            #expect(
                result.status == 64 && result.stderr.contains("removed") && result.stderr.contains("libcurl is the transport"),
                "\(removed): \(result.stderr)")
            #expect(!FileManager.default.fileExists(atPath: path))
        }
        #expect(server.server.requestCount == requests)
        // The command does not link URLSession on Linux; asking for it names the transport it has.
        let urlSession = try await runTilepack(
            binary,
            [
                "fetch", server.template, directory.file("u.mbtiles"), "--bbox", "13.3,52.45,13.5,52.56",
                "--zoom", "6", "--transport", "urlsession",
            ])
        #expect(
            urlSession.status == 64 && urlSession.stderr.contains("'curl'") && !urlSession.stderr.contains("sockets"),
            "\(urlSession.stderr)")
        #endif
    }

    @Test(
        "the command reads remote archives over its own transport (libcurl, loaded at that first use) and loads neither libcurl nor FoundationNetworking at start"
    )
    func remoteArchivesOverTheCommandsTransport() async throws {
        let binary = try tilepackBinary()
        #if os(Linux)
        // What the loader maps at start (LD_TRACE_LOADED_OBJECTS, as ldd asks it; nothing runs).
        let loaded = try await TestSupport.run(binary, [], environment: ["LD_TRACE_LOADED_OBJECTS": "1"])
        #expect(loaded.status == 0 && loaded.stdout.contains("libc.so"), "\(loaded.stdout)")
        for library in ["libcurl", "libFoundationNetworking", "libgnutls"] {
            #expect(!loaded.stdout.contains(library), "\(library) is loaded at every start: \(loaded.stdout)")
        }
        #endif
        let name = "stamen_toner_raster_CC-BY+ODbL_z3.pmtiles"
        let server = try LoopbackHTTPServer(files: TestSupport.fixturesRoot.appendingPathComponent("pmtiles"))
        defer { server.stop() }
        let local = try await runTilepack(binary, ["info", TestSupport.fixture("pmtiles/\(name)")])
        let remote = try await runTilepack(binary, ["info", "\(server.baseURL)/\(name)"])
        #expect(local.status == 0 && remote.status == 0, "\(remote.stderr)")
        // The same description; only the first line, the location, differs.
        #expect(Array(remote.stdout.split(separator: "\n").dropFirst()) == Array(local.stdout.split(separator: "\n").dropFirst()))
        #expect(!server.requests.isEmpty && server.requests.allSatisfy { $0.header("user-agent")?.hasPrefix("tilepack/") == true })
        #if os(Linux)
        // https goes to libcurl, loaded at this first use: the error is curl's own words.
        let refusing = try RefusingPort()
        let tls = try await runTilepack(binary, ["info", "https://127.0.0.1:\(refusing.port)/\(name)"], timeout: 30)
        #expect(
            tls.status != 0 && tls.stderr.contains("https://127.0.0.1:\(refusing.port)/")
                && tls.stderr.contains("Couldn't connect to server"), "\(tls.stderr)")
        #endif
    }

    @Test("--estimate --json prints tiles and bytes and creates no file; a refused request exits 2")
    func estimateAndRefusal() async throws {
        let binary = try tilepackBinary()
        let server = try TileServer()
        let directory = try TemporaryDirectory()
        let path = directory.file("e.mbtiles")
        let result = try await runTilepack(
            binary, ["fetch", server.template, path, "--bbox", "13.3,52.45,13.5,52.56", "--zoom", "8-11", "--estimate", "--json"])
        #expect(result.status == 0, "\(result.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        #expect(object["tiles"] as? Int == (try PrefetchRequest.boundingBox(berlin, zooms: 8...11).cover().count))
        #expect((object["bytes"] as? Int ?? 0) > 0 && object["success"] as? Bool == true)
        #expect(!FileManager.default.fileExists(atPath: path))

        let sampled = server.server.requestCount
        let osm = try await runTilepack(
            binary,
            ["fetch", "https://{s}.tile.openstreetmap.org/{z}/{x}/{y}.png", path, "--bbox", "13.3,52.45,13.5,52.56", "--zoom", "8-9"])
        #expect(
            osm.status == 1 && osm.stderr.hasPrefix("Error: https://{s}.tile.openstreetmap.org/{z}/{x}/{y}.png: ")
                && osm.stderr.contains("operation-not-allowed"), "\(osm)")
        // A refused fetch leaves nothing behind (it left an empty 72 KB store).
        #expect(!FileManager.default.fileExists(atPath: path) && !FileManager.default.fileExists(atPath: path + "-journal"))
        let small = try await runTilepack(
            binary, ["fetch", server.template, path, "--route", directory.file("none.gpx"), "--radius", "100", "--zoom", "8-9"])
        #expect(small.status != 0)
        let gpx = directory.file("r.gpx")
        try Data("<gpx><trk><trkseg><trkpt lat=\"52.5\" lon=\"13.4\"/><trkpt lat=\"52.4\" lon=\"13.1\"/></trkseg></trk></gpx>".utf8)
            .write(to: URL(fileURLWithPath: gpx))
        let tooNarrow = try await runTilepack(binary, ["fetch", server.template, path, "--route", gpx, "--radius", "100", "--zoom", "8-9"])
        #expect(
            tooNarrow.status == 1 && tooNarrow.stderr.hasPrefix("Error: ") && tooNarrow.stderr.contains("invalid-parameters"),
            "\(tooNarrow)")
        #expect(!FileManager.default.fileExists(atPath: path))
        #expect(server.server.requestCount == sampled)  // refused before any request
        let route = try await runTilepack(
            binary, ["fetch", server.template, path, "--route", gpx, "--radius", "600", "--zoom", "8-10", "--quiet"])
        #expect(route.status == 0 && route.stdout.hasPrefix("success:"), "\(route.stderr)")
        // A store being resumed is the user's: a refusal leaves it as it was.
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        let refusedAgain = try await runTilepack(
            binary,
            ["fetch", "https://{s}.tile.openstreetmap.org/{z}/{x}/{y}.png", path, "--bbox", "13.3,52.45,13.5,52.56", "--zoom", "8-9"])
        #expect(refusedAgain.status == 1 && refusedAgain.stderr.contains("operation-not-allowed"), "\(refusedAgain)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
    }

    @Test(
        "a box whose every tile is absent (latitude and longitude swapped) fails the fetch and the estimate; a box across the antimeridian is said once"
    )
    func everyTileAbsentAndAntimeridian() async throws {
        let binary = try tilepackBinary()
        let empty = try LoopbackHTTPServer { _ in .status(404, "no such tile") }
        defer { empty.stop() }
        let directory = try TemporaryDirectory()
        let path = directory.file("s.mbtiles")
        let template = empty.baseURL + "/{z}/{x}/{y}.png"
        // Berlin as lat,lon: 52.45,13.3,52.56,13.5.
        let estimate = try await runTilepack(
            binary, ["fetch", template, path, "--bbox", "52.45,13.3,52.56,13.5", "--zoom", "8-10", "--estimate"])
        #expect(
            estimate.status == 1 && estimate.stderr.contains("absent from \(template)") && estimate.stderr.contains("swapped"),
            "\(estimate.status) \(estimate.stdout) \(estimate.stderr)")
        let fetch = try await runTilepack(
            binary, ["fetch", template, path, "--bbox", "52.45,13.3,52.56,13.5", "--zoom", "8-10", "--quiet"])
        #expect(
            fetch.status == 1 && fetch.stderr.contains("every one of the") && fetch.stderr.contains("swapped"),
            "\(fetch.status) \(fetch.stdout) \(fetch.stderr)")

        let server = try TileServer()
        let note = "the box crosses the antimeridian (west 170 > east -170)"
        let across = try await runTilepack(
            binary, ["fetch", server.template, path, "--bbox", "170,-10,-170,10", "--zoom", "3", "--estimate"])
        #expect(across.status == 0 && across.stderr.components(separatedBy: note).count == 2, "\(across.stderr)")
        let fetched = try await runTilepack(
            binary, ["fetch", server.template, directory.file("a.mbtiles"), "--bbox", "170,-10,-170,10", "--zoom", "3", "--quiet"])
        #expect(fetched.status == 0 && fetched.stderr.components(separatedBy: note).count == 2, "\(fetched.stderr)")
    }
}

@Suite("Route files")
struct RouteFileTests {
    @Test("GeoJSON LineString, Feature, FeatureCollection, MultiLineString; GPX tracks and routes")
    func formats() throws {
        let line = #"{"type":"LineString","coordinates":[[13.4,52.5],[13.1,52.4,34.0]]}"#
        let expected = [GeoCoordinate(latitude: 52.5, longitude: 13.4), GeoCoordinate(latitude: 52.4, longitude: 13.1)]
        #expect(try RouteFile.parse(Data(line.utf8)) == expected)
        #expect(try RouteFile.parse(Data(#"{"type":"Feature","properties":{},"geometry":\#(line)}"#.utf8)) == expected)
        #expect(
            try RouteFile.parse(
                Data(
                    #"{"type":"FeatureCollection","features":[{"type":"Feature","geometry":{"type":"Point","coordinates":[0,0]}},{"type":"Feature","geometry":\#(line)}]}"#
                        .utf8)) == expected)
        #expect(try RouteFile.parse(Data(#"{"type":"MultiLineString","coordinates":[[[13.4,52.5]],[[13.1,52.4]]]}"#.utf8)) == expected)
        let track =
            #"<?xml version="1.0"?><gpx xmlns="http://www.topografix.com/GPX/1/1"><rte><rtept lat="1" lon="2"/></rte><trk><trkseg><trkpt lat="52.5" lon="13.4"><ele>30</ele></trkpt><trkpt lat="52.4" lon="13.1"/></trkseg></trk></gpx>"#
        #expect(try RouteFile.parse(Data(track.utf8)) == expected)
        #expect(
            try RouteFile.parse(Data(#"<gpx><rte><rtept lat="52.5" lon="13.4"/><rtept lat="52.4" lon="13.1"/></rte></gpx>"#.utf8))
                == expected)
    }

    @Test("bad route files get an error naming the fault")
    func bad() {
        let cases: [(String, String)] = [
            ("", "neither GeoJSON nor GPX"),
            ("{", "not JSON"),
            (#"{"type":"LineString","coordinates":[[13.4]]}"#, "not [longitude, latitude]"),
            (#"{"type":"LineString","coordinates":[[200,52]]}"#, "is not a latitude,longitude"),
            (#"{"type":"Point","coordinates":[1,2]}"#, "no points"),
            (#"{"type":"Nonsense"}"#, "not a GeoJSON object"),
            (#"<gpx><trk><trkseg><trkpt lat="x" lon="1"/></trkseg></trk></gpx>"#, "without numeric lat and lon"),
            ("<gpx><trk>", "not well-formed XML"),
        ]
        for (text, reason) in cases {
            #expect(throws: RouteFileError.self) { try RouteFile.parse(Data(text.utf8), path: "r") }
            do {
                _ = try RouteFile.parse(Data(text.utf8), path: "r")
            } catch {
                #expect(error.description.contains(reason), "\(text): \(error)")
            }
        }
        #expect(throws: RouteFileError(path: "/nonexistent/route.gpx", reason: "no such file")) {
            try RouteFile.read(path: "/nonexistent/route.gpx")
        }
    }
}
