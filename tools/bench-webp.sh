#!/usr/bin/env bash
# Issue 32's re-encoding benchmark: `tilepack convert IN OUT --format webp --quality 80` against
# `cwebp -q 80` (Debian's webp) run on every tile of the exported tree by GNU parallel on every
# core, release builds. The input is tools/bench-import.sh's large photo-like PNG tree (3,000
# tiles of about 92 KiB, made by bench-import --prepare-only into $BENCH_WORK, default
# /tmp/tilepack-bench, and reused) imported into MBTiles. Printed: both wall times and the ratio,
# both CPU times (user + system, cwebp's with GNU parallel's: wall times swing on a shared
# machine, where the two legs run minutes apart) and their ratio, the archive's bytes after
# against before, and the PSNR of the WebP tiles against the PNG ones (median and lowest, every
# tile, decoded by Pillow), for tilepack's tiles and cwebp's.
#
#   tools/bench-webp.sh [TILES]     TILES: the large tree's size (default 3000)
#   BENCH_WEBP_TREE=DIR tools/bench-webp.sh      another PNG tree instead (e.g. samples/tiles)
set -euo pipefail
cd "$(dirname "$0")/.."
count="${1:-3000}"
work="${BENCH_WORK:-/tmp/tilepack-bench}"
mkdir -p "$work"

. tools/bench-deps.sh
apt_need webp parallel python3-venv time
venv="$work/venv-webp"
pip_venv "$venv" python pillow numpy

swift build -c release --product tilepack
bin="$(swift build -c release --show-bin-path)"
tree="${BENCH_WEBP_TREE:-$work/trees/large-$count}"
if [ ! -d "$tree" ]; then
  swift build -c release --package-path tools --product bench-import
  swift build -c release --package-path tools --product floor-read
  tools_bin="$(swift build -c release --package-path tools --show-bin-path)"
  "$tools_bin/bench-import" --work "$work" --tilepack "$bin/tilepack" --mb-util /bin/true --floor-read "$tools_bin/floor-read" \
    --small 1 --rss 1,1 --jpeg 1 --large "$count" --prepare-only > /dev/null
fi

out="$work/webp"
rm -rf "$out"
mkdir -p "$out"
"$bin/tilepack" import "$tree" "$out/in.mbtiles" --quiet > /dev/null
"$bin/tilepack" export "$out/in.mbtiles" "$out/png" > /dev/null

seconds() { python3 -c "import time; print(f'{time.time():.3f}')"; }
t0=$(seconds)
/usr/bin/time -f "%U %S" -o "$out/cpu-tilepack" "$bin/tilepack" convert "$out/in.mbtiles" "$out/out.mbtiles" --format webp --quality 80 > "$out/convert.txt"
t1=$(seconds)
mkdir -p "$out/cwebp"
(cd "$out/png" && find . -name '*.png' -printf '%P\n') > "$out/list"
t2=$(seconds)
/usr/bin/time -f "%U %S" -o "$out/cpu-cwebp" parallel -j "$(nproc)" --will-cite "mkdir -p '$out/cwebp/{//}' && cwebp -quiet -q 80 '$out/png/{}' -o '$out/cwebp/{.}.webp'" < "$out/list"
t3=$(seconds)
"$bin/tilepack" export "$out/out.mbtiles" "$out/webp" > /dev/null

"$venv/bin/python" - "$out" "$t0" "$t1" "$t2" "$t3" <<'PY'
import os, sys, numpy as np
from PIL import Image
out = sys.argv[1]
t = [float(v) for v in sys.argv[2:6]]
ours, theirs = t[1] - t[0], t[3] - t[2]
cpu = lambda name: sum(float(v) for v in open(os.path.join(out, name)).read().split())
ours_cpu, theirs_cpu = cpu("cpu-tilepack"), cpu("cpu-cwebp")
def psnrs(folder):
    values = []
    for d, _, files in os.walk(os.path.join(out, "png")):
        for f in files:
            if not f.endswith(".png"): continue
            rel = os.path.relpath(os.path.join(d, f), os.path.join(out, "png"))[:-4] + ".webp"
            a = np.asarray(Image.open(os.path.join(d, f)).convert("RGB")).astype(np.float64)
            b = np.asarray(Image.open(os.path.join(out, folder, rel)).convert("RGB")).astype(np.float64)
            mse = ((a - b) ** 2).mean()
            values.append(99.0 if mse == 0 else 10 * np.log10(255**2 / mse))
    return sorted(values)
size = lambda p: os.path.getsize(os.path.join(out, p))
tree = lambda p: sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(os.path.join(out, p)) for f in fs)
a, b = psnrs("webp"), psnrs("cwebp")
print(f"{len(a)} tiles; tilepack convert --format webp --quality 80 {ours:.1f} s vs cwebp -q 80 under GNU parallel -j {os.cpu_count()} {theirs:.1f} s: {theirs / ours:.2f}x faster (goal >= 1.5x)")
print(f"  CPU time (user + system): tilepack {ours_cpu:.1f} s vs cwebp and parallel {theirs_cpu:.1f} s: {theirs_cpu / ours_cpu:.2f}x less")
print(f"archive: {size('out.mbtiles'):,} bytes vs {size('in.mbtiles'):,} before: {size('out.mbtiles') / size('in.mbtiles'):.2f}x (goal <= 0.5x); cwebp's tiles {tree('cwebp'):,} vs tilepack's {tree('webp'):,} bytes: {tree('webp') / tree('cwebp'):.2f}x")
print(f"PSNR against the PNG tiles: tilepack median {a[len(a) // 2]:.1f} dB, lowest {a[0]:.1f} (goal: median >= 35); cwebp median {b[len(b) // 2]:.1f}, lowest {b[0]:.1f}")
PY
