#!/usr/bin/env bash
# Fuzzes the TilepackImaging decoders for a bounded time (CI): tools/fuzz-decode.sh [seconds, default 60]
# Seeds: the imaging test resources (every PNG type) and real JPEG/WebP/PNG/MVT tiles read from
# Tests/Fixtures with the sqlite3 CLI. Builds fuzz-decode
# with libFuzzer (-sanitize=fuzzer, linked by lld: gold fails on it) in its own scratch directory; if that build fails, runs the same
# target's seeded random-mutation loop instead. Exit status non-zero on a crash or timeout.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
seconds="${1:-60}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus" "$work/artifacts"
cp "$root"/Tests/TilepackImagingTests/Resources/*.png "$work/corpus/"
fixtures="${TILEPACK_FIXTURES:-$root/Tests/Fixtures}"
for archive in martin/geography-class-jpg.mbtiles martin/webp.mbtiles node-mbtiles/plain_1.mbtiles \
               martin/world_cities.mbtiles martin/uncompressed_mvt.mbtiles; do
    name="$(basename "$archive" .mbtiles)"
    sqlite3 -readonly "$fixtures/$archive" \
        "select writefile('$work/corpus/$name-' || zoom_level || '-' || tile_column || '-' || tile_row, tile_data) from tiles limit 3" >/dev/null
done

if swift build -c release --package-path "$root/tools" --scratch-path "$root/tools/.build-fuzz" --product fuzz-decode \
    -Xswiftc -sanitize=fuzzer -Xswiftc -use-ld=lld -Xcc -DTILEPACK_FUZZING; then
    echo "fuzz-decode: libFuzzer, ${seconds}s"
    status=0
    "$root/tools/.build-fuzz/release/fuzz-decode" "$work/corpus" -max_total_time="$seconds" -timeout=10 \
        -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 -artifact_prefix="$root/tools/fuzz-decode-" || status=$?
    exit $status
else
    echo "fuzz-decode: libFuzzer build failed; running the seeded mutation harness for ${seconds}s"
    swift build -c release --package-path "$root/tools" --product fuzz-decode
    (cd "$work/artifacts" && timeout $((seconds + 60)) "$root/tools/.build/release/fuzz-decode" --seconds "$seconds" "$work/corpus")
fi
