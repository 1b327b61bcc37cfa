#!/usr/bin/env bash
# Issue 32's benchmark: `tilepack tile` against gdal2tiles (+ `tilepack import`) and rio-pmtiles,
# side by side in one run, release builds.
#
#   tools/bench-tile.sh [SIZE]      SIZE: the input's side in pixels (default 20000; 5000 is quick)
#   BENCH_TILE_RIO=0 tools/bench-tile.sh 20000     without rio pmtiles and the PMTiles leg
#
# The input: a SIZE x SIZE synthetic aerial-like RGB image in UTM zone 33N (so it must be
# reprojected), 1 m pixels, with a nodata border (zeros, -a_nodata 0), as a DEFLATE COG. Printed:
# the wall time of each contender and the ratio (and the CPU time: wall times swing on a shared
# machine); tilepack's peak RSS at SIZE/4 and at SIZE; then (tools/bench-tile-pixels.py) the sets
# of non-blank tiles of the deepest zoom, the PSNR of tilepack's deepest zoom over the pixels both
# draw opaque (median and lowest) against gdal2tiles' tiles, against gdal2tiles' own resampling on
# the tile's grid and against GDAL's -r average warp (that script says why three), and the PNG
# bytes of both. Work goes to $BENCH_WORK (default /tmp/tilepack-bench-tile); the input and the
# last run's trees (g2t, t-tree) are kept.
set -euo pipefail
cd "$(dirname "$0")/.."
size="${1:-20000}"
work="${BENCH_WORK:-/tmp/tilepack-bench-tile}"
mkdir -p "$work"

# What the contenders and the checks need: Debian's GDAL (gdal2tiles.py is python3-gdal's, which
# also reads the tiles for the comparison, with numpy), and a venv with rio-pmtiles (PyPI).
. tools/bench-deps.sh
apt_need libgdal-dev gdal-bin python3-gdal python3-numpy python3-venv time
venv="$work/venv"
pip_venv "$venv" rio rio-pmtiles

swift build -c release --product tilepack
swift build -c release --package-path tiler --product tilepack-tile
bin="$(swift build -c release --show-bin-path)"
tile="$(swift build -c release --package-path tiler --show-bin-path)/tilepack-tile"

# The inputs: SIZE and SIZE/4 squares, 1 m pixels, a border of 5 % nodata.
make_input() {
  local side=$1 out=$2
  [ -s "$out" ] && return
  python3 tools/make-sample-raster.py "$side" "$side" "$work/raw.ppm"
  python3 - "$work/raw.ppm" "$side" <<'PY'
import sys, numpy as np
path, side = sys.argv[1], int(sys.argv[2])
with open(path, "r+b") as f:
    header = f.readline() + f.readline() + f.readline()
    data = np.memmap(f, dtype=np.uint8, mode="r+", offset=len(header), shape=(side, side, 3))
    b = side // 20
    data[:b] = 0; data[-b:] = 0; data[:, :b] = 0; data[:, -b:] = 0
    # No pixel of the data is exactly the nodata value.
    inner = data[b:-b, b:-b]
    inner[inner.sum(axis=2) == 0] = [1, 1, 1]
    data.flush()
PY
  gdal_translate -q -of COG -a_srs EPSG:32633 -a_ullr 600000 $((5340000 + side)) $((600000 + side)) 5340000 -a_nodata 0 \
    -co COMPRESS=DEFLATE -co NUM_THREADS=2 "$work/raw.ppm" "$out"
  rm -f "$work/raw.ppm"
}
input="$work/input-$size.tif"
small="$work/input-$((size / 4)).tif"
make_input "$size" "$input"
make_input "$((size / 4))" "$small"

# The zooms gdal2tiles chooses for the input (its own output tells), used by every contender.
seconds() { python3 -c "import time; print(f'{time.time():.3f}')"; }
rm -rf "$work/g2t" "$work/ref.tilepack" "$work/t.tilepack" "$work/t-tree" "$work/r.pmtiles"
t0=$(seconds)
GDAL_PAM_ENABLED=NO /usr/bin/time -f "%U %S" -o "$work/cpu-g2t" gdal2tiles.py --xyz -r bilinear --processes 2 --webviewer none -q "$input" "$work/g2t"
/usr/bin/time -f "%U %S" -o "$work/cpu-import" "$bin/tilepack" import "$work/g2t" "$work/ref.tilepack" --quiet > /dev/null
t1=$(seconds)
zooms=$(ls "$work/g2t" | grep -E '^[0-9]+$' | sort -n)
zmin=$(echo "$zooms" | head -1); zmax=$(echo "$zooms" | tail -1)

t2=$(seconds)
/usr/bin/time -f "%M %U %S" -o "$work/rss-large" "$tile" "$input" "$work/t.tilepack" --zoom "$zmin-$zmax" --resampling bilinear > /dev/null 2>&1
t3=$(seconds)
/usr/bin/time -f "%M" -o "$work/rss-small" "$tile" "$small" "$work/t-small.tilepack" --force --resampling bilinear > /dev/null 2>&1
# The same tiles as a tree for the comparison (exported, not cut again).
"$bin/tilepack" export "$work/t.tilepack" "$work/t-tree" > /dev/null

t4=$(seconds)
t5=$t4; t6=$t4; t7=$t4
if [ "${BENCH_TILE_RIO:-1}" != 0 ]; then
  "$venv/bin/rio" pmtiles "$input" "$work/r.pmtiles" --zoom-levels "$zmin..$zmax" -j 2 -f PNG --resampling bilinear --tile-size 256 > /dev/null 2>&1 || echo "rio pmtiles failed"
  t5=$(seconds)
  t6=$(seconds)
  "$tile" "$input" "$work/t.pmtiles" --zoom "$zmin-$zmax" --resampling bilinear --force > /dev/null 2>&1
  t7=$(seconds)
fi

python3 - "$t0" "$t1" "$t2" "$t3" "$t4" "$t5" "$t6" "$t7" "$(cat "$work/rss-small")" "$(cat "$work/rss-large")" "$size" \
  "$(cat "$work/cpu-g2t" "$work/cpu-import")" <<'PY'
import sys
t = [float(v) for v in sys.argv[1:9]]
rss_small, (rss_large, user, system), size = int(sys.argv[9]), sys.argv[10].split(), int(sys.argv[11])
rss_large, ours_cpu = int(rss_large), float(user) + float(system)
g2t_cpu = sum(float(v) for v in sys.argv[12].split())
g2t, ours, rio, ours_pm = t[1] - t[0], t[3] - t[2], t[5] - t[4], t[7] - t[6]
print(f"into a bundle: tilepack tile {ours:.1f} s vs gdal2tiles + tilepack import {g2t:.1f} s: {g2t / ours:.2f}x faster (goal >= 4x)")
print(f"  CPU time (user + system): tilepack tile {ours_cpu:.1f} s vs gdal2tiles + tilepack import {g2t_cpu:.1f} s: {g2t_cpu / ours_cpu:.2f}x less")
if ours_pm > 0:
    print(f"into PMTiles: tilepack tile {ours_pm:.1f} s vs rio pmtiles {rio:.1f} s: {rio / ours_pm:.2f}x faster (goal >= 2x)")
else:
    print("into PMTiles: not run (BENCH_TILE_RIO=0)")
print(f"peak RSS: {rss_small / 1024:.0f} MiB at {size // 4} px, {rss_large / 1024:.0f} MiB at {size} px: {rss_large / rss_small:.2f}x (goal: under 1 GiB, flat)")
PY

# The pixels, read by GDAL (python3-gdal): tilepack's deepest zoom against gdal2tiles' tiles and
# against GDAL's warper on each tile's own grid (tools/bench-tile-pixels.py says why; it runs alone
# on the trees a run keeps in $work).
/usr/bin/python3 tools/bench-tile-pixels.py "$input" "$work/g2t" "$work/t-tree" "$zmax"
