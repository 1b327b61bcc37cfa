#!/usr/bin/env bash
# Fuzzes the server's HTTP/1 request-head parser (server/, TilepackRequestHead) for a bounded time
# on a corpus of real request heads.
#
#   tools/fuzz-request-head.sh [seconds]        (default 60; CI calls it as is)
#
# Builds server/'s fuzz-request-head with libFuzzer (swiftc -sanitize=fuzzer, coverage-guided, the
# parser and HTTP/1 syntax instrumented too) in its own scratch directory; if that toolchain
# feature is unavailable it falls back to the seeded random-mutation harness of the same target.
# Exits non-zero on a crash, a hang, an unbounded allocation or a broken invariant; a crashing
# input is left in $FUZZ_WORK (default server/.build-fuzz) as crash-*.
set -euo pipefail
cd "$(dirname "$0")/../server"
seconds="${1:-60}"
work="${FUZZ_WORK:-$PWD/.build-fuzz}"
corpus="$work/corpus"
mkdir -p "$work"
rm -rf "$corpus"

# lld: gold crashes (internal error in format_file_lineno) linking Swift 6.3 with libFuzzer.
fuzzer_flags=(-c release --product fuzz-request-head --scratch-path "$work/libfuzzer"
  -Xswiftc -sanitize=fuzzer -Xswiftc -DTILEPACK_LIBFUZZER -Xcc -DTILEPACK_FUZZING -Xswiftc -use-ld=lld)
if swift build "${fuzzer_flags[@]}" >"$work/build.log" 2>&1; then
  bin="$(swift build "${fuzzer_flags[@]}" --show-bin-path)/fuzz-request-head"
  TILEPACK_FUZZ_MAKE_CORPUS="$corpus" "$bin"
  echo "fuzz-request-head: libFuzzer, $seconds s, corpus of $(ls "$corpus" | wc -l) request heads"
  # -rss_limit_mb and -malloc_limit_mb catch unbounded allocation, -timeout a hang.
  "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=1024 -malloc_limit_mb=256 -max_len=70000 \
    -print_final_stats=1 -artifact_prefix="$work/" "$corpus"
else
  echo "fuzz-request-head: libFuzzer build failed (see $work/build.log); using the seeded mutation harness"
  plain_flags=(-c release --product fuzz-request-head --scratch-path "$work/plain")
  swift build "${plain_flags[@]}"
  bin="$(swift build "${plain_flags[@]}" --show-bin-path)/fuzz-request-head"
  "$bin" --seconds "$seconds" --seed "${FUZZ_SEED:-$RANDOM}"
fi
