import Foundation
import TilepackCore
import TilepackPlan
import TilepackStorage

/// What `tilepack plan` and `extract --budget` ask of an archive.
package struct PlanRequest: Sendable {
    package var area: PlanArea
    /// `nil`: the archive's lowest and deepest zooms.
    package var minZoom: Int?
    package var maxZoom: Int?
    package var budget: Int
    package var format: PlanOutputFormat
    package var focus: PlanFocus?

    package init(area: PlanArea, minZoom: Int? = nil, maxZoom: Int? = nil, budget: Int, format: PlanOutputFormat, focus: PlanFocus? = nil) {
        self.area = area
        self.minZoom = minZoom
        self.maxZoom = maxZoom
        self.budget = budget
        self.format = format
        self.focus = focus
    }
}

/// The budget planner over an archive: its tiles' sizes read from its index (never its tile data,
/// for MBTiles, PMTiles and bundles), then ``TilePlanner``.
package enum ArchivePlanning {
    package static func plan(source: String, request: PlanRequest) throws(OperationError) -> TilePlan {
        try plan(archive: try ArchiveLocation.open(source), request: request)
    }

    package static func plan(archive: any TileArchive, request: PlanRequest) throws(OperationError) -> TilePlan {
        let (sizes, metadataBytes) = try self.sizes(archive: archive, request: request)
        return TilePlanner.plan(sizes, budget: request.budget, format: request.format, focus: request.focus, metadataBytes: metadataBytes)
    }

    /// The sizes of the request's tiles, read from the archive's index, and its metadata's bytes.
    package static func sizes(archive: any TileArchive, request: PlanRequest) throws(OperationError) -> (AreaTileSizes, Int) {
        let metadata: TileMetadata
        let held: ClosedRange<Int>?
        do {
            metadata = try archive.metadata()
            // From a header or an index's ends: zoomLevels() walks every PMTiles directory.
            if let reader = archive as? any TileSizeReading {
                held = try reader.zoomRange()
            } else {
                let levels = try archive.zoomLevels()
                held = levels.first.map { $0.zoom...levels.last!.zoom }
            }
        } catch {
            throw OperationError.wrapping(error, path: archive.path)
        }
        guard let lowest = held?.lowerBound, let deepest = held?.upperBound else {
            throw OperationError(path: archive.path, fault: .badInput("the archive holds no tile"))
        }
        let zooms = (request.minZoom ?? lowest)...max(request.minZoom ?? lowest, request.maxZoom ?? deepest)
        guard request.budget > 0 else { throw OperationError(path: "", fault: .badInput("the budget must be above 0 bytes")) }
        do {
            let sizes = try AreaTileSizes.read(from: archive, area: request.area, zooms: zooms)
            return (sizes, (try? JSONSerialization.data(withJSONObject: metadata.entries))?.count ?? 1024)
        } catch let error as GeometryError {
            throw OperationError(path: "", fault: .badInput("\(error)"))
        } catch {
            throw OperationError.wrapping(error, path: archive.path)
        }
    }
}
