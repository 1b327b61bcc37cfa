#!/usr/bin/env bash
# Issue 45's app goal: opening a verified side-loaded pack, `tilepack render ARCHIVE --key` (each
# tile checked against the signed root on its first read, the sidecar checked at open) at most
# 1.2x `tilepack render ARCHIVE` without it, cold open (a new process each run: the archive and
# sidecar opened and checked every time; the files in the page cache, as an app's pack is after
# its first launch). The two run in turns, ROUNDS times (default 11); printed: the medians of wall
# and CPU (user + system) time and --key's over the plain render's as ratios. Release build
# (TILEPACK_BIN, else built here).
#   [PACKS="a.pmtiles b.tilepack"] [ROUNDS=11] [CENTER=-60,-10 ZOOM=3.5] tools/bench-render-key.sh
# Each pack needs PACK.tpsig and a key: KEY (default: the pack's PACK.pub, else bench-sign.sh's
# bench key). PACKS defaults to samples/sample.tilepack (341 tiles, signed here with a key made
# here) and bench-sign.sh's million-tile PMTiles when it is there.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${ROUNDS:-11}"
work="${BENCH_WORK:-/tmp/tilepack-bench}"
if [ -n "${TILEPACK_BIN:-}" ]; then tilepack="$TILEPACK_BIN"; else
    swift build -c release --product tilepack
    tilepack="$(swift build -c release --show-bin-path)/tilepack"
fi
run="$(mktemp -d /tmp/tilepack-bench-render.XXXXXX)"
trap 'rm -rf "$run"' EXIT
if [ -z "${PACKS:-}" ]; then
    cp samples/sample.tilepack "$run/sample.tilepack"
    "$tilepack" keygen bench/sample -o "$run/sample.tilepack" > /dev/null   # sample.tilepack.key / .pub
    "$tilepack" sign "$run/sample.tilepack" --private-key "$run/sample.tilepack.key" --release 1 > /dev/null
    PACKS="$run/sample.tilepack"
    [ -f "$work/sign/v1-1000000.pmtiles.tpsig" ] && PACKS="$PACKS $work/sign/v1-1000000.pmtiles"
fi
for pack in $PACKS; do
    key="${KEY:-}"
    [ -z "$key" ] && { [ -f "$pack.pub" ] && key="$pack.pub" || key="$work/sign/bench.pub"; }
    python3 - "$tilepack" "$pack" "$key" "$rounds" "$run" <<'PY'
import os, resource, statistics, subprocess, sys, time
tilepack, pack, key, rounds, run = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
view = ["--center", os.environ.get("CENTER", "-60,-10"), "--zoom", os.environ.get("ZOOM", "3.5"), "--size", "512x512", "--force"]
commands = {
    "key": [tilepack, "render", pack, *view, "-o", run + "/key.png", "--key", key],
    "plain": [tilepack, "render", pack, *view, "-o", run + "/plain.png"],
}
times = {name: [] for name in commands}
for name, command in commands.items():       # once each: the files into the page cache, and a check
    subprocess.run(command, check=True, capture_output=True)
for _ in range(rounds):
    for name, command in commands.items():   # in turns
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        times[name].append((wall, cpu))
med = {name: (statistics.median(w for w, _ in t), statistics.median(c for _, c in t)) for name, t in times.items()}
print("%s (%d rounds, medians): render --key wall %.3f s, cpu %.3f s; render wall %.3f s, cpu %.3f s; "
      "ratio --key/plain wall %.2fx, cpu %.2fx (goal <= 1.2x)"
      % (os.path.basename(pack), rounds, med["key"][0], med["key"][1], med["plain"][0], med["plain"][1],
         med["key"][0] / med["plain"][0], med["key"][1] / med["plain"][1]))
PY
done
