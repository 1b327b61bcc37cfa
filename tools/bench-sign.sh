#!/usr/bin/env bash
# Issue 45's signing goal: `tilepack sign` of a large archive (make-versions' map-like PNG tiles,
# TILES of them, default 1,000,000, see SEED below) within 1.3x of its floor, tools/Sources/floor-sign: every tile
# read the same way (TilepackStorage's forEachTile) and SHA-256'd with libcrypto, nothing else.
# Both run in turns, ROUNDS times (default 5), on the same file; printed: the medians of wall and
# CPU (user + system) time, and sign's over the floor's as ratios. Release builds (TILEPACK_BIN
# and FLOOR_SIGN_BIN, else built here); the set is made once under $BENCH_WORK (default
# /tmp/tilepack-bench) and converted to each FORMATS (default "mbtiles tilepack pmtiles").
#
#   [TILES=1000000] [SEED=50000] [ROUNDS=5] [FORMATS="mbtiles pmtiles"] tools/bench-sign.sh
set -euo pipefail
cd "$(dirname "$0")/.."
tiles="${TILES:-1000000}"
rounds="${ROUNDS:-5}"
formats="${FORMATS:-mbtiles tilepack pmtiles}"
work="${BENCH_WORK:-/tmp/tilepack-bench}/sign"
mkdir -p "$work"
if [ -n "${TILEPACK_BIN:-}" ]; then tilepack="$TILEPACK_BIN"; else
    swift build -c release --product tilepack
    tilepack="$(swift build -c release --show-bin-path)/tilepack"
fi
if [ -n "${FLOOR_SIGN_BIN:-}" ]; then floor="$FLOOR_SIGN_BIN"; else
    swift build -c release --package-path tools --product floor-sign
    floor="$(swift build -c release --package-path tools --show-bin-path)/floor-sign"
fi
# make-versions encodes every tile (a million PNGs: most of an hour on a loaded 2-core machine),
# so it makes SEED tiles (default 50,000) and the set repeats their bytes over the first TILES
# tiles of the same pyramid (zooms filled in order), each row a tile of its own: what signing
# reads and hashes is the same bytes per tile as make-versions' own set would hold.
seed="${SEED:-50000}"
if [ ! -f "$work/v1-$tiles.mbtiles" ]; then
    if [ ! -f "$work/v1-$seed.mbtiles" ]; then
        swift build -c release --package-path tools --product make-versions
        "$(swift build -c release --package-path tools --show-bin-path)/make-versions" "$work/set" --tiles "$seed"
        mv "$work/set/v1.mbtiles" "$work/v1-$seed.mbtiles" && rm -rf "$work/set"
    fi
    python3 - "$work/v1-$seed.mbtiles" "$work/v1-$tiles.mbtiles" "$tiles" <<'PY'
import sqlite3, sys
source, out, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
src = sqlite3.connect(source)
blobs = [row[0] for row in src.execute("SELECT tile_data FROM tiles ORDER BY zoom_level, tile_column, tile_row")]
db = sqlite3.connect(out + ".part")
db.executescript("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; CREATE TABLE metadata (name TEXT, value TEXT);"
                 "CREATE TABLE tiles (zoom_level INTEGER, tile_column INTEGER, tile_row INTEGER, tile_data BLOB);")
db.executemany("INSERT INTO metadata VALUES (?, ?)", [(k, v) for k, v in src.execute("SELECT name, value FROM metadata")])
def rows():
    n = 0
    z = 0
    while n < count:
        side = 1 << z
        for x in range(side):
            for y in range(side):
                if n == count:
                    return
                yield (z, x, y, blobs[n % len(blobs)])
                n += 1
        z += 1
db.executemany("INSERT INTO tiles VALUES (?, ?, ?, ?)", rows())
db.execute("CREATE UNIQUE INDEX tile_index ON tiles (zoom_level, tile_column, tile_row)")
db.commit()
db.close()
import os
os.rename(out + ".part", out)
PY
fi
cd "$work"
[ -f bench.key ] || "$tilepack" keygen bench.example/sign -o bench >/dev/null

# "wall cpu" of one run of "$@".
timed() {
    /usr/bin/time -f "%e %U %S" -o sign-time.txt "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; exit 1; }
    awk '{ printf "%.3f %.3f\n", $1, $2 + $3 }' sign-time.txt
}
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

printf '%-9s %9s %10s %10s %8s %10s %10s %8s\n' format tiles "wall sign" "wall floor" ratio "CPU sign" "CPU floor" ratio
for format in $formats; do
    archive="v1-$tiles.$format"
    [ -f "$archive" ] || "$tilepack" convert "v1-$tiles.mbtiles" "$archive" --quiet >/dev/null
    # Once unmeasured, so both find the file in the page cache, then checked.
    "$floor" "$archive" >/dev/null
    "$tilepack" sign "$archive" --private-key bench.key --release 1 >/dev/null
    "$tilepack" verify "$archive" --key bench.pub --quick >/dev/null || { echo "$archive: the signature does not verify" >&2; exit 1; }
    : >sign-with.txt; : >sign-floor.txt
    for _ in $(seq "$rounds"); do
        timed "$tilepack" sign "$archive" --private-key bench.key --release 1 >>sign-with.txt
        timed "$floor" "$archive" >>sign-floor.txt
    done
    ws=$(cut -d' ' -f1 sign-with.txt | median); wf=$(cut -d' ' -f1 sign-floor.txt | median)
    cs=$(cut -d' ' -f2 sign-with.txt | median); cf=$(cut -d' ' -f2 sign-floor.txt | median)
    printf '%-9s %9s %10.3f %10.3f %7.3fx %10.3f %10.3f %7.3fx\n' "$format" "$tiles" "$ws" "$wf" "$(echo "$ws / $wf" | bc -l)" \
        "$cs" "$cf" "$(echo "$cs / $cf" | bc -l)"
done
rm -f sign-time.txt sign-with.txt sign-floor.txt
