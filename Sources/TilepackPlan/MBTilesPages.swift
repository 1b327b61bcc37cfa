/// SQLite's b-tree pages of an MBTiles file as tilepack's writer makes it (flat schema, page size
/// 8192, rows inserted in the order of the `tile_index` keys: zoom, column, TMS row): the record
/// and cell formats of SQLite's file format document (§1.6, §2.1), and pages filled in insertion
/// order, as SQLite fills them on append. `Specs/plan.md` §3 says what is measured and what is modelled.
enum MBTilesPages {
    /// The bytes of a varint.
    static func varintLength(_ value: Int) -> Int {
        var n = 1, v = UInt64(value) >> 7
        while v > 0, n < 9 {
            n += 1
            v >>= 7
        }
        return n
    }

    /// The bytes of an integer in a record (0 and 1 take none: serial types 8 and 9).
    static func integerLength(_ value: Int) -> Int {
        switch value {
        case 0, 1: 0
        case ..<128: 1
        case ..<32768: 2
        case ..<8_388_608: 3
        case ..<2_147_483_648: 4
        default: 6
        }
    }

    /// A table leaf cell's bytes kept on the page and its overflow pages, for a record of `payload` bytes.
    static func tableCell(payload: Int, rowid: Int = 1 << 20, pageSize: Int = OutputSizeModel.pageSize) -> (local: Int, overflowPages: Int)
    {
        let usable = pageSize
        let maxLocal = usable - 35
        let minLocal = (usable - 12) * 32 / 255 - 23
        let head = varintLength(payload) + varintLength(rowid)
        guard payload > maxLocal else { return (head + payload, 0) }
        let k = minLocal + (payload - minLocal) % (usable - 4)
        let local = k <= maxLocal ? k : minLocal
        let overflow = (payload - local + usable - 5) / (usable - 4)
        return (head + local + 4, overflow)
    }

    /// The pages of the `tiles` table and of `tile_index` for these tiles, in bytes.
    static func bytes(of tiles: [PlannedTile], pageSize: Int) -> Int {
        // The tile_index order (zoom, column, TMS row) as one integer each: zoom 6 bits, x and the
        // TMS row 29 bits each (zoom 28 at most, as Core's).
        let order = tiles.indices.map { i -> UInt64 in
            let tile = tiles[i]
            return UInt64(tile.zoom) << 58 | UInt64(tile.x) << 29 | UInt64((1 << tile.zoom) - 1 - tile.y)
        }
        let permutation = order.indices.sorted { order[$0] < order[$1] }
        var layout = Layout(pageSize: pageSize)
        for position in permutation {
            let tile = tiles[position]
            layout.add(zoom: tile.zoom, x: tile.x, row: (1 << tile.zoom) - 1 - tile.y, length: tile.length)
        }
        return layout.bytes
    }

    /// The same for the tiles `taken` marks in levels sorted by (x, y) (offsets as the planner's):
    /// a column read from its south end is in TMS order already, so nothing is sorted.
    static func bytes(of levels: [AreaTileSizes.Level], offsets: [Int], taken: [Bool], pageSize: Int) -> Int {
        var layout = Layout(pageSize: pageSize)
        for (index, level) in levels.enumerated() {
            let last = (1 << level.zoom) - 1
            var start = 0
            while start < level.count {
                let x = level.keys[start] >> 32
                var end = start + 1
                while end < level.count, level.keys[end] >> 32 == x { end += 1 }
                for i in (start..<end).reversed() where taken[offsets[index] + i] {
                    layout.add(zoom: level.zoom, x: Int(x), row: last - Int(level.keys[i] & 0xFFFF_FFFF), length: level.lengths[i])
                }
                start = end
            }
        }
        return layout.bytes
    }

    /// The rows laid out in `tile_index` order, as the writer inserts them.
    struct Layout {
        let pageSize: Int
        var table: Packer, index: Packer
        var overflowPages = 0
        var rows = 0

        init(pageSize: Int) {
            self.pageSize = pageSize
            table = Packer(space: pageSize - 8)
            index = Packer(space: pageSize - 8)
        }

        mutating func add(zoom: Int, x: Int, row: Int, length: Int) {
            rows += 1
            let ints = integerLength(zoom) + integerLength(x) + integerLength(row)
            let blobType = 2 * length + 12
            let header = varintLength(4 + varintLength(blobType)) + 3 + varintLength(blobType)
            let cell = tableCell(payload: header + ints + length, rowid: rows, pageSize: pageSize)
            table.add(cell.local + 2)
            overflowPages += cell.overflowPages
            let key = 5 + ints + integerLength(rows)
            index.add(varintLength(key) + key + 2)
        }

        var bytes: Int {
            // Interior pages: a divider per leaf (a child pointer and a rowid; a whole key for the index).
            let interior =
                Packer.pages(items: table.pages - 1, size: 4 + 4 + 2, space: pageSize - 12)
                + Packer.pages(items: index.pages - 1, size: 4 + 16 + 2, space: pageSize - 12)
            // The table's and the index's root pages exist with no row.
            return (max(table.pages, 1) + max(index.pages, 1) + overflowPages + interior) * pageSize
        }
    }

    /// Cells laid into pages in order, a new page when the next does not fit.
    struct Packer {
        let space: Int
        var pages = 0
        var free = 0

        init(space: Int) { self.space = space }

        mutating func add(_ bytes: Int) {
            if pages == 0 || bytes > free {
                pages += 1
                free = space
            }
            free -= bytes
        }

        static func pages(items: Int, size: Int, space: Int) -> Int {
            items <= 0 ? 0 : (items * size + space - 1) / space
        }
    }
}
