import Testing
import TilepackCore

@Suite struct TileCoordinateTests {
    @Test func acceptsTheCornersOfEveryZoom() throws {
        for z in 0...TileCoordinate.maximumZoom {
            let last = (1 << z) - 1
            let tile = try TileCoordinate(zoom: z, x: last, y: last)
            #expect(tile.x == last && tile.y == last)
        }
    }

    @Test func rejectsImpossibleTiles() {
        #expect(throws: TileCoordinateError.zoomOutOfRange(31)) { try TileCoordinate(zoom: 31, x: 0, y: 0) }
        #expect(throws: TileCoordinateError.zoomOutOfRange(-1)) { try TileCoordinate(zoom: -1, x: 0, y: 0) }
        #expect(throws: TileCoordinateError.columnOutOfRange(1, zoom: 0)) { try TileCoordinate(zoom: 0, x: 1, y: 0) }
        #expect(throws: TileCoordinateError.rowOutOfRange(64, zoom: 6)) { try TileCoordinate(zoom: 6, x: 10, y: 64) }
        #expect(throws: TileCoordinateError.columnOutOfRange(-1, zoom: 3)) { try TileCoordinate(zoom: 3, x: -1, y: 0) }
        #expect(TileCoordinate(validatingZoom: 2, x: 4, y: 0) == nil)
    }

    /// The MBTiles spec's example: XYZ 11/327/791 is stored as TMS row 1256.
    @Test func flipsRowsLikeTheMBTilesSpec() throws {
        let tile = try TileCoordinate(zoom: 11, x: 327, y: 791)
        #expect(tile.row(in: .tms) == 1256)
        #expect(tile.row(in: .xyz) == 791)
        #expect(try TileCoordinate(zoom: 11, x: 327, row: 1256, scheme: .tms) == tile)
    }

    @Test func flipIsItsOwnInverse() throws {
        for z in [0, 1, 5, 17, 30] {
            let size = 1 << z
            for y in Set([0, size / 3, size / 2, size - 1]) {
                let tms = TileScheme.tms.flipIfTMS(row: y, zoom: z)
                #expect(tms >= 0 && tms < size)
                #expect(TileScheme.tms.flipIfTMS(row: tms, zoom: z) == y)
            }
        }
    }
}
