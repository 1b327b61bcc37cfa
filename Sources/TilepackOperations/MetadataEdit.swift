import Foundation
import TilepackCore
import TilepackStorage

/// What `tilepack meta set` or `meta delete` did.
package struct MetadataEditReport: Sendable, Codable {
    package var path: String
    /// `transaction` (MBTiles), `inPlace` (PMTiles) or `rewrite` (bundle, PMTiles); `nil` when
    /// nothing was to change (every key to delete already absent) and the file was not touched.
    package var method: MetadataEditMethod?
    /// Why the file was changed the way it was, for the methods whose reason is not plain: a
    /// PMTiles rewritten or written in place, every bundle rewritten.
    package var why: String?
    package var set: [String: String] = [:]
    package var deleted: [String] = []
    /// Keys asked to be deleted that the archive did not have (with ``AbsentDeletes/ignore``).
    package var alreadyAbsent: [String] = []
}

/// What a key to delete that the archive lacks is: an error (`meta delete KEY`: the user named
/// a key that is not there, likely a typo), or already done (`meta set --from FILE.json`: the
/// file is the metadata as it should be, and a `null` there says "absent").
package enum AbsentDeletes: Sendable {
    case refuse
    case ignore
}

/// Reads and changes an archive's metadata (`tilepack meta`), in every format: MBTiles in one
/// transaction; a PMTiles in place when the new metadata fits the room the file has (crash-safe:
/// staged past the end of the file first), a bundle and any other PMTiles by an atomic rewrite that copies the tile data without decoding it. Values are checked by
/// the rules `import` holds them to (Specs/mbtiles.md §4) before anything is written, and the
/// tiles, `agg_tiles_hash` and every checksum stay true (the tiles do not change; a bundle's
/// metadata CRC is written with the metadata).
///
/// Unlike the commands that write a new archive, `meta set` and `meta delete` change their input:
/// that is what they are for.
package enum MetadataEditor {
    /// Keys whose values tilepack computes from the tiles: not set by hand.
    static let computedKeys = [TileMetadata.Key.aggregateTilesHash, TileMetadata.Key.hashAlgorithm, ContentIdentity.metadataKey]

    /// The metadata of a local archive or one at a URL.
    package static func read(_ location: String) throws(OperationError) -> TileMetadata {
        let archive = try ArchiveLocation.open(location)
        do { return try archive.metadata() } catch { throw OperationError.wrapping(error, path: location) }
    }

    /// Sets the keys of `set` and removes those of `delete` in the archive at `path`.
    package static func edit(
        path: String, set: [String: String] = [:], delete: [String] = [], absentDeletes: AbsentDeletes = .refuse
    ) throws(OperationError) -> MetadataEditReport {
        if ArchiveLocation.isRemote(path) {
            throw OperationError(
                path: path, fault: .badInput("only a file on this machine can be edited (download it, edit it, upload it)"))
        }
        guard !set.isEmpty || !delete.isEmpty else { throw OperationError(path: path, fault: .badInput("no key to set or delete")) }
        for key in Array(set.keys) + delete {
            guard !key.isEmpty else { throw OperationError(path: path, fault: .badInput("a metadata key cannot be empty")) }
        }
        if let key = Set(set.keys).intersection(delete).first {
            throw OperationError(path: path, fault: .badInput("'\(key)' is both set and deleted"))
        }
        if let key = set.keys.sorted().first(where: computedKeys.contains) {
            throw OperationError(
                path: path,
                fault: .badInput(
                    "'\(key)' is computed from the tiles, not set by hand ("
                        + (key == ContentIdentity.metadataKey
                            ? "tilepack writes it into the MBTiles files it makes and patches)"
                            : "tilepack convert --agg-tiles-hash writes agg_tiles_hash and hash_algorithm)")
                ))
        }
        let archive = try ArchiveLocation.open(path)
        let before: TileMetadata
        do { before = try archive.metadata() } catch { throw OperationError.wrapping(error, path: path) }
        let absent = delete.filter { before[$0] == nil }
        if let key = absent.first, absentDeletes == .refuse {
            throw OperationError(path: path, fault: .badInput("has no metadata key '\(key)' to delete"))
        }
        let delete = delete.filter { before[$0] != nil }
        if set.isEmpty && delete.isEmpty {
            return MetadataEditReport(path: path, method: nil, alreadyAbsent: absent.sorted())
        }
        var after = before
        for key in delete { after[key] = nil }
        for (key, value) in set { after[key] = value }
        try validate(after, changed: Set(set.keys).union(delete), content: archive.content, path: path)
        let method: MetadataEditMethod
        do {
            method = try ArchiveMetadataEditor.edit(path: path, set: set, delete: delete)
        } catch {
            throw OperationError(path: path, fault: .archive(error))
        }
        return MetadataEditReport(
            path: path, method: method, why: why(method, path: path), set: set, deleted: delete.sorted(), alreadyAbsent: absent.sorted())
    }

    /// Why the writer (`ArchiveMetadataEditor`) changed the file as it did.
    static func why(_ method: MetadataEditMethod, path: String) -> String? {
        switch method {
        case .transaction: nil
        case .inPlace: "the new metadata fitted the room the old had"
        case .rewrite where (try? TileArchiveFormat.detect(path: path)) == .bundle:
            "a bundle's metadata lies between its header and its tile index, so every change is written into a copy of the file (index and tiles copied byte for byte) renamed over it"
        case .rewrite: "the new metadata did not fit the room the old had (directories and tiles copied byte for byte)"
        }
    }

    /// The rules `import` applies, to the keys that change: an error on any of them refuses the edit.
    static func validate(_ metadata: TileMetadata, changed: Set<String>, content: TileContent?, path: String) throws(OperationError) {
        var faults: [String] = []
        if changed.contains(TileMetadata.Key.format), let text = metadata[TileMetadata.Key.format] {
            if let format = TileFormat(metadataValue: text) {
                if case .encoded(let stored) = content, stored != format {
                    faults.append("metadata 'format' '\(text)' contradicts the tiles, which are \(stored)")
                }
            } else {
                faults.append("metadata 'format' is '\(text.prefix(40))', expected png, jpg, webp, gif, pbf or json")
            }
        }
        for issue in MBTilesMetadataValidator.validate(metadata) where issue.severity == .error {
            guard let key = issue.key, changed.contains(key) else { continue }
            faults.append(issue.message)
        }
        if !faults.isEmpty {
            throw OperationError(path: path, fault: .badInput("nothing changed: " + faults.joined(separator: "; ")))
        }
    }

    /// Key/value pairs from a JSON object (`meta set --from FILE.json`): strings as they are,
    /// other values as their JSON text (an object for `json`), `null` as a key to delete.
    package static func pairs(fromJSON data: Data, path: String) throws(OperationError) -> (set: [String: String], delete: [String]) {
        guard let object = (try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])) as? [String: Any] else {
            throw OperationError(path: path, fault: .badInput("not a JSON object of metadata keys and values"))
        }
        var set: [String: String] = [:]
        var delete: [String] = []
        for (key, value) in object {
            switch value {
            case is NSNull: delete.append(key)
            case let text as String: set[key] = text
            default:
                guard
                    let text = try? JSONSerialization.data(
                        withJSONObject: value, options: [.fragmentsAllowed, .sortedKeys, .withoutEscapingSlashes])
                else { throw OperationError(path: path, fault: .badInput("the value of '\(key)' cannot be written as text")) }
                set[key] = String(decoding: text, as: UTF8.self)
            }
        }
        return (set, delete.sorted())
    }
}
