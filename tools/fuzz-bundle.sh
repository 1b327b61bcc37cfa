#!/usr/bin/env bash
# Fuzzes the .tilepack bundle reader for a bounded time on a corpus of valid bundles it generates.
#
#   tools/fuzz-bundle.sh [seconds]        (default 60; CI calls it as is)
#
# Builds tools/fuzz-bundle with libFuzzer (swiftc -sanitize=fuzzer, coverage-guided, the library
# instrumented too) in its own scratch directory; if that toolchain feature is unavailable it falls
# back to the seeded random-mutation harness of the same target. Exits non-zero on any crash; a
# crashing input is left in $FUZZ_WORK (default tools/.build-fuzz) as crash-*.
set -euo pipefail
cd "$(dirname "$0")"
seconds="${1:-60}"
work="${FUZZ_WORK:-$PWD/.build-fuzz}"
corpus="$work/corpus"
mkdir -p "$work"
rm -rf "$corpus"

fuzzer_flags=(-c release --product fuzz-bundle --scratch-path "$work/libfuzzer"
  -Xswiftc -sanitize=fuzzer -Xswiftc -DTILEPACK_LIBFUZZER)
if swift build "${fuzzer_flags[@]}" >"$work/build.log" 2>&1; then
  bin="$(swift build "${fuzzer_flags[@]}" --show-bin-path)/fuzz-bundle"
  TILEPACK_FUZZ_MAKE_CORPUS="$corpus" "$bin"
  echo "fuzz-bundle: libFuzzer, $seconds s, corpus of $(ls "$corpus" | wc -l) valid bundles"
  # -rss_limit_mb and -malloc_limit_mb catch unbounded allocation, -timeout a hang.
  "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=1024 -malloc_limit_mb=256 \
    -print_final_stats=1 -artifact_prefix="$work/" "$corpus"
else
  echo "fuzz-bundle: libFuzzer build failed (see $work/build.log); using the seeded mutation harness"
  plain_flags=(-c release --product fuzz-bundle --scratch-path "$work/plain")
  swift build "${plain_flags[@]}"
  bin="$(swift build "${plain_flags[@]}" --show-bin-path)/fuzz-bundle"
  "$bin" --make-corpus "$corpus"
  "$bin" --seconds "$seconds" --seed "${FUZZ_SEED:-$RANDOM}" --corpus "$corpus"
fi
