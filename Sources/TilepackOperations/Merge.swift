import Foundation
import TilepackCore
import TilepackStorage

/// What ``ArchiveMerger`` does with a tile that more than one input holds with different bytes
/// (identical duplicates are always stored once).
package enum DuplicateRule: String, Sendable, Codable, CaseIterable {
    /// Stop with an error naming the tile and the inputs.
    case error
    /// Keep the tile of the first input (in the order given) that holds it.
    case first
    /// Keep the tile of the last input that holds it.
    case last
}

/// Options of ``ArchiveMerger``.
package struct MergeOptions: Sendable {
    /// How the output is written (`--force`, `--agg-tiles-hash`, `--keep-mixed-compression`, `--index`).
    package var writing = ArchiveWriteOptions()
    package var onDuplicate: DuplicateRule = .error
    /// The most tiles written (`--max-tiles`, default 500,000,000): inputs holding more in all (a
    /// PMTiles run of billions of tiles) are refused before anything is written.
    package var maximumTiles = TileCountLimit.defaultMaximum
    package init() {}
}

/// What a merge did.
package struct MergeReport: Sendable, Codable {
    package var inputs: [String]
    package var destination: String
    package var tiles = 0
    /// Tiles held by more than one input (identical, or resolved by the rule).
    package var duplicates = 0
    package var seconds = 0.0
    /// Metadata values the output's format cannot hold, each mapped or dropped (see ``MetadataMapping``).
    package var warnings: [String] = []
}

/// Merges archives of one tile content (the shards of a build, or any disjoint archives) into one.
///
/// Metadata: the first input's, except `bounds`, `center`, `minzoom` and `maxzoom`, which are
/// kept when every input agrees on them and otherwise derived again from the merged tiles (so the
/// merge of shards carries what one import of the whole tree carries: the union of the zoom
/// ranges and the extent of all the tiles), and `agg_tiles_hash`, which the MBTiles writer
/// computes again when an input carried one (or when asked). The bundle of merged shards is byte-identical to the bundle of one import.
package enum ArchiveMerger {
    static let derivedKeys = [TileMetadata.Key.bounds, TileMetadata.Key.center, TileMetadata.Key.minZoom, TileMetadata.Key.maxZoom]

    package static func run(
        inputs: [String], destination: String, options: MergeOptions = MergeOptions(),
        progress: ProgressHandler? = nil
    ) throws(OperationError) -> MergeReport {
        let start = DispatchTime.now().uptimeNanoseconds
        guard !inputs.isEmpty else { throw OperationError(path: destination, fault: .badInput("no archives to merge")) }
        var archives: [any TileArchive] = []
        try OutputIsInput.refuse(output: destination, inputs: inputs)
        for input in inputs {
            archives.append(try ArchiveLocation.open(input))
        }
        let format = try ArchiveOutput.format(of: destination)
        // One content for all: the first input's, and every other must match it.
        let contents = archives.compactMap(\.content)
        if let first = contents.first, let other = contents.first(where: { $0 != first }) {
            throw OperationError(
                path: destination,
                fault: .badInput("the inputs hold different tiles (\(first) and \(other)): merge archives of one tile type"))
        }
        let (metadata, carriesHash, fitNotes) = try mergedMetadata(
            archives, inputs: inputs, destination: destination, format: format, options: options)
        // Every tile of every input is written on its own (a PMTiles input's runs too).
        var total = 0
        for (index, archive) in archives.enumerated() {
            do { total += try archive.tileCount() } catch { throw OperationError.wrapping(error, path: inputs[index]) }
        }
        try TileCountLimit.check(
            total, limit: options.maximumTiles, source: inputs.joined(separator: ", "), writing: "merge into \(destination)")
        let sink = try ArchiveOutput.open(
            destination, format: format, metadata: metadata,
            options: options.writing.sinkOptions(carriesHash: carriesHash, inputs: archives))
        var report = MergeReport(inputs: inputs, destination: destination)
        report.warnings = fitNotes
        var lastReport = start
        do {
            if let content = contents.first { try sink.begin(content: content) }
            for (index, archive) in archives.enumerated() {
                try archive.forEachTile { tile, bytes in
                    let keep = try keeps(
                        tile, bytes, of: index, archives: archives, inputs: inputs, onDuplicate: options.onDuplicate,
                        destination: destination)
                    if !keep {
                        report.duplicates += 1
                        return
                    }
                    try sink.add(tile, bytes: bytes)
                    report.tiles += 1
                    let now = DispatchTime.now().uptimeNanoseconds
                    if let progress, now - lastReport > 200_000_000 {
                        lastReport = now
                        progress(OperationProgress(done: report.tiles, total: nil, bytes: 0, elapsed: Double(now - start) / 1e9))
                    }
                }
            }
            try sink.finish(metadata: metadata)
        } catch {
            throw OperationError.wrapping(error, path: destination)
        }
        report.seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        return report
    }

    /// The first input's metadata, without the derived keys the inputs disagree on and without
    /// `agg_tiles_hash`, named after the output when unnamed, fitted to its format; whether the
    /// output carries a hash (asked, or an input carries one); the fitting's notes.
    private static func mergedMetadata(
        _ archives: [any TileArchive], inputs: [String], destination: String, format: TileArchiveFormat, options: MergeOptions
    ) throws(OperationError) -> (TileMetadata, Bool, [String]) {
        var metadata: TileMetadata
        var carriesHash = options.writing.aggregateTilesHash
        do {
            let all = try archives.map { try $0.metadata() }
            metadata = all[0]
            if all.contains(where: { $0[TileMetadata.Key.aggregateTilesHash] != nil }) { carriesHash = true }
            for key in derivedKeys where Set(all.map { $0[key] }).count > 1 {
                metadata[key] = nil
            }
            metadata[TileMetadata.Key.aggregateTilesHash] = nil
        } catch {
            throw OperationError.wrapping(error, path: inputs[0])
        }
        if metadata.name?.isEmpty ?? true { metadata.name = ArchiveLocation.baseName(destination) }
        let fitted = MetadataMapping.fitted(metadata, for: format)
        return (fitted.metadata, carriesHash, fitted.notes)
    }

    /// Whether input `index` writes `tile`: a tile held by another input too is written by the
    /// first holder when the bytes are identical, else as `onDuplicate` says (or refused).
    private static func keeps(
        _ tile: TileCoordinate, _ bytes: UnsafeRawBufferPointer, of index: Int, archives: [any TileArchive], inputs: [String],
        onDuplicate: DuplicateRule, destination: String
    ) throws -> Bool {
        for (other, peer) in archives.enumerated() where other != index {
            let same: Bool? = try peer.withTileBytes(at: tile) { $0.elementsEqual(bytes) }
            guard let same else { continue }
            if other < index && same { return false }
            if !same {
                switch onDuplicate {
                case .error:
                    throw OperationError(
                        path: destination,
                        fault: .conflict(
                            "tile \(tile) differs between \(inputs[min(index, other)]) and \(inputs[max(index, other)]) (use --on-duplicate first or last)"
                        ))
                case .first where other < index, .last where other > index:
                    return false
                default: break
                }
            }
        }
        return true
    }
}
