import Testing

@testable import TilepackCore

/// Core's one type for tile URL templates, and Core's one tile size rule.
@Suite struct TileURLTemplateTests {
    @Test func placeholdersAreExpandedInOnePass() {
        let template = TileURLTemplate("https://{s}.tiles.example/{z}/{x}/{y}@{scale}x.png?x={x}&keep={other}&{")
        #expect(template.missing == nil && template.usesSubdomains)
        #expect(
            template.expand(z: 5, x: 3, y: 2, scale: 2, subdomains: ["a", "b", "c"])
                == "https://c.tiles.example/5/3/2@2x.png?x=3&keep={other}&{")
        #expect(
            template.expand(z: 0, x: 0, y: 0, scale: 1.5, subdomains: ["a"]) == "https://a.tiles.example/0/0/0@1.5x.png?x=0&keep={other}&{")
        // No subdomains given: {s} is kept as written.
        #expect(TileURLTemplate("https://{s}.h/{z}/{x}/{y}").expand(z: 1, x: 1, y: 1) == "https://{s}.h/1/1/1")
    }

    @Test func minusYIsTheTMSRowInEitherScheme() throws {
        // Issue 29 item 8: Leaflet, QGIS and OpenLayers write TMS rows as {-y}.
        let tms = try TileURLTemplate(validating: "https://h/{z}/{x}/{-y}.png")
        #expect(tms.expand(z: 3, x: 1, y: 1) == "https://h/3/1/6.png")
        #expect(tms.expand(z: 3, x: 1, y: 1, scheme: .tms) == "https://h/3/1/6.png")
        #expect(tms.expand(z: 0, x: 0, y: 0) == "https://h/0/0/0.png")
        // {y} follows the scheme (MKTileOverlay's geometryFlipped).
        let xyz = TileURLTemplate("https://h/{z}/{x}/{y}")
        #expect(xyz.expand(z: 3, x: 1, y: 1) == "https://h/3/1/1" && xyz.expand(z: 3, x: 1, y: 1, scheme: .tms) == "https://h/3/1/6")
        #expect(TileURLTemplate.recognises("tiles/{z}/{x}/{-y}.png"))
    }

    @Test func aTemplateThatCannotNameEveryTileSaysWhatItLacks() {
        #expect(TileURLTemplate("https://h/{x}/{y}").missing == "{z}")
        #expect(TileURLTemplate("https://h/{z}/{y}").missing == "{x}")
        #expect(TileURLTemplate("https://h/{z}/{x}/{Y}").missing == "{y} or {-y}")
        #expect(!TileURLTemplate.recognises("samples/sample.tilepack"))
        #expect(throws: TileURLTemplateError(template: "https://h/{z}/{x}", missing: "{y} or {-y}")) {
            try TileURLTemplate(validating: "https://h/{z}/{x}")
        }
        #expect(TileURLTemplate("https://h/{z}/{x}").fault == "the URL template https://h/{z}/{x} has no {y} or {-y}")
    }

    @Test func urlsOfFilesAndServers() {
        #expect(TileURLTemplate("/srv/tiles/{z}/{x}/{y}.png").url(z: 3, x: 1, y: 2)?.path == "/srv/tiles/3/1/2.png")
        #expect(TileURLTemplate("https://h/{z}/{x}/{y}").url(z: 1, x: 0, y: 1)?.absoluteString == "https://h/1/0/1")
    }

    @Test func oneTileSizeRule() {
        #expect(TileSize.default == 256)
        for size in [16, 32, 64, 128, 256, 512, 1024, 2048, 4096] { #expect(TileSize.isValid(size), "\(size)") }
        // The answers the six rules disagreed on: 8 (the adapter and Mercator took it), 300
        // (prefetch and the bundle took it), 1 and 8192 (Mercator took them).
        for size in [0, -256, 1, 8, 100, 255, 300, 8192, 1 << 16] {
            #expect(!TileSize.isValid(size), "\(size)")
            #expect(TileSize.invalidReason(size) == "tile size \(size) is not a power of two in 16...4096")
        }
    }
}
