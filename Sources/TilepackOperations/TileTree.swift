import Foundation
import Synchronization
import TilepackCore
import TilepackStorage

/// How a directory tree of tiles names its folders and files.
package enum TileTreeLayout: String, Sendable, CaseIterable, Codable {
    /// `z/x/y.ext`: the slippy-map, gdal2tiles and mbutil default.
    case zxy
    /// `z/y/x.ext`: rows as folders (mbutil's `zyx`, some ArcGIS caches).
    case zyx
}

/// One tile file found in a tree.
package struct TileFile: Hashable, Sendable {
    /// The tile, XYZ (already flipped when the tree counts rows from the south).
    package var tile: TileCoordinate
    /// The folder that holds the file (one object shared by the folder's files: a copy of a
    /// `TileFile` retains one reference), and the file's name in it. The file's path is made from
    /// them only when it is asked for (an error, a report), not once per tile of the walk.
    var folder: TreeFolder
    var name: String

    /// The file's path.
    package var path: String { folder.path + "/" + name }

    package static func == (a: TileFile, b: TileFile) -> Bool { a.tile == b.tile && a.path == b.path }
    package func hash(into hasher: inout Hasher) {
        hasher.combine(tile)
        hasher.combine(path)
    }
}

/// A folder of tile files: its path, and the folder kept open (read-only, as a directory) while
/// files in it are waiting to be read, so that a reader opens each file relative to it and the
/// kernel looks up one name instead of the whole path. Closed when the last ``TileFile`` that
/// names it is gone.
final class TreeFolder: Sendable {
    let path: String
    /// The open folder, or -1 when it could not be opened or ``limit`` folders were open already
    /// (its files are then opened by path).
    let descriptor: Int32

    /// At most this many are open at once in the process, so a tree of many tiny folders cannot
    /// use up the descriptors that reading the files needs.
    static let limit = 64
    private static let openCount = Atomic<Int>(0)

    init(_ path: String) {
        self.path = path
        guard Self.openCount.add(1, ordering: .relaxed).newValue <= Self.limit else {
            Self.openCount.subtract(1, ordering: .relaxed)
            descriptor = -1
            return
        }
        let fd = FileSystem.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if fd < 0 { Self.openCount.subtract(1, ordering: .relaxed) }
        descriptor = fd
    }

    deinit {
        guard descriptor >= 0 else { return }
        close(descriptor)
        Self.openCount.subtract(1, ordering: .relaxed)
    }
}

/// A file or folder in a tree that was not imported, and why.
package struct SkippedFile: Hashable, Sendable, Codable, CustomStringConvertible {
    package var path: String
    package var reason: String

    package init(path: String, reason: String) {
        self.path = path
        self.reason = reason
    }

    package var description: String { "\(path): \(reason)" }
}

/// Walks a tile tree `root/z/x/y.ext` (or `z/y/x.ext`) lazily, yielding tile files and reporting
/// everything else.
///
/// Folders are visited in numeric order and the tiles of one folder sorted by coordinate, so a
/// `zxy` tree comes out in (zoom, x, row) order whatever its row scheme, rows counted as
/// ``rowOrder`` says.
///
/// Memory stays proportional to one folder's listing, not to the tree. The walk never leaves the
/// tree's three levels, so a symbolic-link loop cannot make it recurse; a link to a folder already
/// visited (same device and inode) is reported as a loop and not entered twice, a link whose
/// target lies outside the tree is not followed, a dangling or unreadable entry is reported as
/// unreadable, and a FIFO, device or socket is reported for what it is (never opened). Numbers
/// are numbers: folders and files whose names are the same number with leading zeros (`7` and
/// `007`) are one folder, one tile; of two files for one tile the shorter path is imported and the
/// other reported with both paths.
package struct TileTreeWalker: Sequence, Sendable {
    package enum Entry: Sendable {
        case tile(TileFile)
        case skipped(SkippedFile)
        /// A tile outside the zoom or box filter: not imported, on purpose.
        case filtered(TileFile)
    }

    package var root: String
    package var layout: TileTreeLayout
    package var scheme: TileScheme
    package var minZoom: Int?
    package var maxZoom: Int?
    package var bounds: GeoBoundingBox?
    /// How the tiles of one folder are ordered: by XYZ row (the default), or by TMS row, the
    /// order MBTiles' `agg_tiles_hash` reads them in (so a writer can hash while it writes).
    package var rowOrder: TileScheme = .xyz
    /// Which column folders (`z/x` for zxy, `z/y` for zyx) to walk, by zoom and folder number;
    /// `nil` for all (see ``TreeShards``). Folders left out are neither imported nor reported.
    package var columns: Set<TreeShards.ColumnKey>?

    /// Files at the root that describe the tree rather than hold tiles; read by ``TreeEvidence``.
    package static let descriptionFiles: Set<String> = ["tilemapresource.xml", "metadata.json"]

    package init(
        root: String, layout: TileTreeLayout = .zxy, scheme: TileScheme = .xyz,
        minZoom: Int? = nil, maxZoom: Int? = nil, bounds: GeoBoundingBox? = nil
    ) {
        self.root = root
        self.layout = layout
        self.scheme = scheme
        self.minZoom = minZoom
        self.maxZoom = maxZoom
        self.bounds = bounds
    }

    package func makeIterator() -> Iterator { Iterator(self) }

    package struct Iterator: IteratorProtocol {
        private let walker: TileTreeWalker
        private var pending: [Entry?] = []
        private var pendingIndex = 0
        // The folders still to list, deepest last; each with its level and parsed numbers. One
        // entry may stand for several folders whose names are the same number (`7` and `007`).
        private var stack: [(paths: [String], level: Int, numbers: [Int])] = []
        private var visited: Set<FileIdentity> = []
        /// The tree's root with every link resolved, and with a trailing slash: a link whose
        /// target is not below it leaves the tree and is not followed.
        private let rootReal: String?

        init(_ walker: TileTreeWalker) {
            self.walker = walker
            stack = [([walker.root], 0, [])]
            rootReal = Self.resolved(walker.root).map { $0.hasSuffix("/") ? $0 : $0 + "/" }
        }

        package mutating func next() -> Entry? {
            while true {
                if pendingIndex < pending.count {
                    defer { pendingIndex += 1 }
                    // Moved out, not copied (a copy would retain what the entry holds).
                    return pending[pendingIndex].take()
                }
                pending.removeAll(keepingCapacity: true)
                pendingIndex = 0
                guard let folder = stack.popLast() else { return nil }
                list(folder)
            }
        }

        /// A file of a folder being listed: its name and its folder.
        private typealias Candidate = (name: String, folder: TreeFolder)

        private mutating func list(_ group: (paths: [String], level: Int, numbers: [Int])) {
            // number -> folder names with that number, over every folder of the group.
            var folders: [Int: [String]] = [:]
            var files: [Candidate] = []
            for path in group.paths {
                listOne(path, level: group.level, folders: &folders, files: &files)
            }
            if group.level < 2 {
                // Push in descending order so the smallest number is listed first; folders named
                // by the same number (zero-padded) are listed together, as one.
                for number in folders.keys.sorted(by: >)
                where group.level == 0 || walker.columns?.contains(TreeShards.ColumnKey(zoom: group.numbers[0], number: number)) ?? true {
                    let paths = (folders[number] ?? []).sorted { ($0.utf8.count, $0) < ($1.utf8.count, $1) }
                    stack.append((paths, group.level + 1, group.numbers + [number]))
                }
                return
            }
            var (tiles, accepted, order) = tileFiles(files, zoom: group.numbers[0], folderNumber: group.numbers[1])
            Self.sort(&order, tiles: tiles)
            // The tile and the entry in `pending` of the last file taken.
            var previous: (tile: TileCoordinate, entry: Int)?
            for (_, index) in order {
                guard let file = tiles[index].take() else { continue }
                if let previous, previous.tile == file.tile {
                    let previousPath: String
                    switch pending[previous.entry] {
                    case .tile(let kept)?, .filtered(let kept)?: previousPath = kept.path
                    default: previousPath = ""
                    }
                    pending.append(
                        .skipped(
                            SkippedFile(
                                path: file.path,
                                reason:
                                    "names the same tile \(file.tile) as \(previousPath) (zero-padded numbers): only that one is imported"))
                    )
                    continue
                }
                previous = (file.tile, pending.count)
                pending.append(accepted[index] ? .tile(file) : .filtered(file))
            }
        }

        /// The tiles of a deepest folder's files, whether the walker's filters accept each, and
        /// each one's sort key (its number along the folder in the row order asked for) with its
        /// index; files that name no tile are reported skipped. Every tile of the folder has the
        /// same zoom and folder number (x for zxy, the row for zyx).
        private mutating func tileFiles(
            _ files: [Candidate], zoom z: Int, folderNumber: Int
        ) -> (tiles: [TileFile?], accepted: [Bool], order: [(key: Int, index: Int)]) {
            let rowOrder = walker.rowOrder
            var tiles: [TileFile?] = []
            var accepted: [Bool] = []
            tiles.reserveCapacity(files.count)
            accepted.reserveCapacity(files.count)
            // (key, index in `tiles`): sorted as plain integers, without copying a `TileFile`
            // (and retaining its folder) in every comparison.
            var order: [(key: Int, index: Int)] = []
            order.reserveCapacity(files.count)
            for (name, folder) in files {
                let utf8 = name.utf8
                guard let dot = utf8.lastIndex(of: UInt8(ascii: ".")), dot != utf8.startIndex else {
                    pending.append(
                        .skipped(
                            SkippedFile(path: folder.path + "/" + name, reason: name.hasPrefix(".") ? "hidden file" : "no file extension")))
                    continue
                }
                guard let number = Self.number(utf8[..<dot]) else {
                    pending.append(.skipped(SkippedFile(path: folder.path + "/" + name, reason: "file name is not a number")))
                    continue
                }
                let (x, row) = walker.layout == .zxy ? (folderNumber, number) : (number, folderNumber)
                let tile: TileCoordinate
                do {
                    tile = try TileCoordinate(zoom: z, x: x, row: row, scheme: walker.scheme)
                } catch {
                    pending.append(.skipped(SkippedFile(path: folder.path + "/" + name, reason: "out of range: \(error)")))
                    continue
                }
                let key = walker.layout == .zxy ? tile.row(in: rowOrder) : tile.x
                order.append((key, tiles.count))
                tiles.append(TileFile(tile: tile, folder: folder, name: name))
                accepted.append(walker.accepts(tile))
            }
            return (tiles, accepted, order)
        }

        /// Sorts by key; of two names for one tile (equal keys) the shortest path first
        /// (`7/65/45.png` before `007/65/045.png`), which is the one imported. A total order, so
        /// the result does not depend on the listing's order.
        private static func sort(_ order: inout [(key: Int, index: Int)], tiles: [TileFile?]) {
            order.sort { $0.key != $1.key ? $0.key < $1.key : $0.index < $1.index }
            var start = 0
            while start < order.count {
                var end = start + 1
                while end < order.count, order[end].key == order[start].key { end += 1 }
                if end - start > 1 {
                    order[start..<end].sort { a, b in
                        let pathA = tiles[a.index]?.path ?? "", pathB = tiles[b.index]?.path ?? ""
                        return (pathA.utf8.count, pathA) < (pathB.utf8.count, pathB)
                    }
                }
                start = end
            }
        }

        /// Lists one folder into `folders` (subfolders by number) and `files`, reporting the rest.
        private mutating func listOne(_ folderPath: String, level: Int, folders: inout [Int: [String]], files: inout [Candidate]) {
            let names: [(name: String, kind: FolderListing.Kind)]
            if let listed = FolderListing.entries(folderPath) {
                names = listed
            } else {
                // Let Foundation describe why the folder cannot be listed.
                do {
                    names = try FileManager.default.contentsOfDirectory(atPath: folderPath).map { ($0, .other) }
                } catch {
                    pending.append(.skipped(SkippedFile(path: folderPath, reason: "unreadable folder: \(Self.reason(error))")))
                    return
                }
            }
            var fileNames: [String] = []
            for (name, kind) in names {
                if level == 0 && TileTreeWalker.descriptionFiles.contains(name) { continue }
                // A regular file (the listing says so) needs no stat(2): one path lookup less per tile.
                if kind == .regularFile {
                    guard level == 2 else {
                        pending.append(.skipped(SkippedFile(path: folderPath + "/" + name, reason: "stray file outside z/x/y")))
                        continue
                    }
                    fileNames.append(name)
                    continue
                }
                let path = folderPath + "/" + name
                // A symbolic link is followed only when it stays inside the tree.
                if let linkInfo = FileSystem.lstat(path), (linkInfo.st_mode & S_IFMT) == S_IFLNK,
                    let rootReal, let target = Self.resolved(path), !(target + "/").hasPrefix(rootReal)
                {
                    pending.append(.skipped(SkippedFile(path: path, reason: "symbolic link to \(target), outside the tree: not followed")))
                    continue
                }
                guard let info = FileIdentity.lookup(path) else {
                    pending.append(.skipped(SkippedFile(path: path, reason: "unreadable: dangling link or no permission")))
                    continue
                }
                if info.isDirectory {
                    guard level < 2 else {
                        pending.append(.skipped(SkippedFile(path: path, reason: "unexpected folder at the tile level")))
                        continue
                    }
                    guard let number = Self.number(name.utf8[...]) else {
                        pending.append(.skipped(SkippedFile(path: path, reason: "folder name is not a number")))
                        continue
                    }
                    guard visited.insert(info).inserted else {
                        pending.append(.skipped(SkippedFile(path: path, reason: "symbolic link loop: folder already visited")))
                        continue
                    }
                    folders[number, default: []].append(path)
                } else if !info.isRegularFile {
                    pending.append(.skipped(SkippedFile(path: path, reason: "\(RegularFile.describe(mode: info.mode)), not a tile file")))
                } else {
                    guard level == 2 else {
                        pending.append(.skipped(SkippedFile(path: path, reason: "stray file outside z/x/y")))
                        continue
                    }
                    fileNames.append(name)
                }
            }
            guard !fileNames.isEmpty else { return }
            let folder = TreeFolder(folderPath)
            for name in fileNames { files.append((name, folder)) }
        }

        /// `path` with every symbolic link resolved, or `nil` when it cannot be (dangling).
        static func resolved(_ path: String) -> String? {
            FileSystem.realpath(path)
        }

        /// A decimal number without sign or padding tricks beyond leading zeros; at most 10 digits.
        static func number(_ digits: Substring.UTF8View) -> Int? {
            guard !digits.isEmpty, digits.count <= 10 else { return nil }
            var value = 0
            for digit in digits {
                guard digit >= 0x30, digit <= 0x39 else { return nil }
                value = value * 10 + Int(digit - 0x30)
            }
            return value
        }

        static func reason(_ error: Error) -> String {
            (error as NSError).localizedDescription
        }
    }

    /// Whether a tile passes the zoom and box filters.
    package func accepts(_ tile: TileCoordinate) -> Bool {
        if let minZoom, tile.zoom < minZoom { return false }
        if let maxZoom, tile.zoom > maxZoom { return false }
        if let bounds, (try? bounds.intersects(tile)) != true { return false }
        return true
    }
}

/// A folder's entries with the file type the listing gives (`d_type`), without a stat(2) per entry.
enum FolderListing {
    enum Kind: Equatable {
        /// A regular file, not a link.
        case regularFile
        /// A folder, a link, another type, or unknown (the file system does not say): stat it.
        case other
    }

    /// The entries of `path` other than `.` and `..`, or `nil` when the folder cannot be opened.
    static func entries(_ path: String) -> [(name: String, kind: Kind)]? {
        // Bytes kept: a name that is not UTF-8 keeps its bytes (see PathBytes).
        FileSystem.entries(path)?.map { ($0.name, $0.isRegularFile ? .regularFile : .other) }
    }
}

/// A file's device and inode, to recognise a folder reached twice through links.
struct FileIdentity: Hashable {
    var device: UInt64
    var inode: UInt64
    var mode: mode_t

    var isDirectory: Bool { (mode & S_IFMT) == S_IFDIR }
    var isRegularFile: Bool { (mode & S_IFMT) == S_IFREG }

    /// `stat(2)` following links; `nil` when the entry cannot be stat'ed (dangling link, no access).
    static func lookup(_ path: String) -> FileIdentity? {
        guard let info = FileSystem.stat(path) else { return nil }
        return FileIdentity(device: UInt64(truncatingIfNeeded: info.st_dev), inode: UInt64(info.st_ino), mode: info.st_mode)
    }
}
