import Foundation
import TilepackCore

/// `K/N`: the K-th of N parts of a build, K counted from 0 (as Kubernetes' `JOB_COMPLETION_INDEX`
/// and AWS Batch's `AWS_BATCH_JOB_ARRAY_INDEX` count).
package struct ShardSpec: Sendable, Hashable, Codable, CustomStringConvertible {
    package var index: Int
    package var count: Int

    package init?(index: Int, count: Int) {
        guard count >= 1, count <= 1_000_000, (0..<count).contains(index) else { return nil }
        self.index = index
        self.count = count
    }

    /// Parses `K/N`.
    package init?(_ text: String) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let k = Int(parts[0]), let n = Int(parts[1]) else { return nil }
        self.init(index: k, count: n)
    }

    package var description: String { "\(index)/\(count)" }
}

/// The partition of a tile tree into shards: the tree's column folders (`z/x` for a zxy tree,
/// `z/y` for zyx) in (zoom, number) order, cut into N contiguous blocks of about equal file
/// counts. Every job computes the same partition from the folder listings alone, so N jobs
/// import disjoint parts that together are the whole tree, with no coordination.
package enum TreeShards {
    /// Folders of one column: zoom, folder number, files in it.
    struct Column {
        var zoom: Int
        var number: Int
        var files: Int
    }

    static func columns(root: String) -> [Column] {
        var columns: [Column] = []
        for (zoomName, _) in FolderListing.entries(root) ?? [] {
            guard let zoom = Int(zoomName), zoomName.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { continue }
            let zoomPath = root + "/" + zoomName
            for (name, _) in FolderListing.entries(zoomPath) ?? [] {
                guard let number = Int(name), name.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { continue }
                let files = FolderListing.entries(zoomPath + "/" + name)?.count ?? 0
                columns.append(Column(zoom: zoom, number: number, files: files))
            }
        }
        // Folders named 7 and 007 are one column: sum them.
        columns.sort { ($0.zoom, $0.number) < ($1.zoom, $1.number) }
        var merged: [Column] = []
        for column in columns {
            if let last = merged.last, last.zoom == column.zoom, last.number == column.number {
                merged[merged.count - 1].files += column.files
            } else {
                merged.append(column)
            }
        }
        return merged
    }

    /// The (zoom, folder number) pairs of `shard`: a column goes to the shard in whose share of
    /// the files its middle file falls.
    package static func selection(root: String, shard: ShardSpec) -> Set<ColumnKey> {
        let columns = columns(root: root)
        // Each column weighs its files plus one, so that empty folders are shared out too.
        let total = columns.reduce(0) { $0 + $1.files + 1 }
        var selected = Set<ColumnKey>()
        var before = 0
        for column in columns {
            let weight = column.files + 1
            let middle = 2 * before + weight  // twice the middle, to stay in integers
            let owner = min(shard.count - 1, middle * shard.count / (2 * max(total, 1)))
            if owner == shard.index { selected.insert(ColumnKey(zoom: column.zoom, number: column.number)) }
            before += weight
        }
        return selected
    }

    package struct ColumnKey: Hashable, Sendable {
        package var zoom: Int
        package var number: Int
    }
}
