#!/usr/bin/env bash
# Issue 15's PMTiles benchmark: MBTiles -> PMTiles vs PyPI pmtiles-convert, and an extract from a
# remote PMTiles on loopback nginx vs the PyPI pmtiles reader (time and requests, as ratios).
# Builds the tilepack CLI (release); outputs go under $BENCH_WORK (default /tmp/tilepack-bench-pmtiles).
#
#   tools/bench-pmtiles.sh [--runs N] [--bbox W,S,E,N] [--mbtiles FILE]
set -euo pipefail
cd "$(dirname "$0")/.."
work="${BENCH_WORK:-/tmp/tilepack-bench-pmtiles}"
swift build -c release --product tilepack
bin="$(swift build -c release --show-bin-path)"
exec python3 tools/pmtiles/bench.py --tilepack "$bin/tilepack" --work "$work" "$@"
