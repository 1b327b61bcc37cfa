#!/usr/bin/env bash
# Fuzzes tilepack's portable LZ4 block codec (the one Apple platforms use) against liblz4 for a
# bounded time: both decoders on the same mutated blocks must agree byte for byte, and each must
# read back the other's blocks (tools/Sources/fuzz-lz4).
#
#   tools/fuzz-lz4.sh [seconds]        (default 60; CI calls it as is)
#
# libFuzzer (swiftc -sanitize=fuzzer, the library instrumented too) in its own scratch directory;
# if that toolchain feature is unavailable, the seeded random-mutation harness of the same target.
# Exits non-zero on any disagreement or crash; the input is left in $FUZZ_WORK (default
# tools/.build-fuzz-lz4) as crash-*.
set -euo pipefail
cd "$(dirname "$0")"
seconds="${1:-60}"
work="${FUZZ_WORK:-$PWD/.build-fuzz-lz4}"
corpus="$work/corpus"
mkdir -p "$work"
rm -rf "$corpus"
seeds=(../Tests/TilepackImagingTests/Resources/*.png ../samples/tiles/2/1/1.png)

# lld: gold crashes (internal error in format_file_lineno) linking Swift 6.3 with libFuzzer.
fuzzer_flags=(-c release --product fuzz-lz4 --scratch-path "$work/libfuzzer"
  -Xswiftc -sanitize=fuzzer -Xcc -DTILEPACK_FUZZING -Xswiftc -use-ld=lld)
if swift build "${fuzzer_flags[@]}" >"$work/build.log" 2>&1; then
  bin="$(swift build "${fuzzer_flags[@]}" --show-bin-path)/fuzz-lz4"
  TILEPACK_FUZZ_MAKE_CORPUS="$corpus" "$bin" "${seeds[@]}"
  echo "fuzz-lz4: libFuzzer, $seconds s, corpus of $(ls "$corpus" | wc -l) liblz4 blocks"
  "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=1024 -max_len=70000 \
    -print_final_stats=1 -artifact_prefix="$work/" "$corpus"
else
  echo "fuzz-lz4: libFuzzer build failed (see $work/build.log); using the seeded mutation harness"
  plain_flags=(-c release --product fuzz-lz4 --scratch-path "$work/plain")
  swift build "${plain_flags[@]}"
  bin="$(swift build "${plain_flags[@]}" --show-bin-path)/fuzz-lz4"
  TILEPACK_FUZZ_MAKE_CORPUS="$corpus" "$bin" "${seeds[@]}"
  "$bin" --seconds "$seconds" --seed "${FUZZ_SEED:-$RANDOM}" "$corpus"
fi
