# Shared by the benchmarks (bench-serve.sh, bench-s3.sh, bench-fetch.sh, bench-import.sh,
# bench-update.sh): source it, from the repository's root.

# The tilepack a benchmark times, its path printed: $TILEPACK_BIN when set (a release build made
# elsewhere), else the CLI as a Linux release is shipped, built here: the Swift runtime and
# Foundation linked in (--static-swift-stdlib, README's Install, tools/install.sh), in its own build
# folder (.build-static), so the everyday .build is not rebuilt (the first build takes minutes).
# Its process starts in about half the time of the everyday build's (11 ms of CPU against 21 ms
# for `--version`), which a command of a few milliseconds notices. Build output goes to stderr.
release_tilepack() {
  if [ -n "${TILEPACK_BIN:-}" ]; then
    echo "$TILEPACK_BIN"
    return
  fi
  local static=(-c release --static-swift-stdlib --scratch-path .build-static)
  swift build "${static[@]}" --product tilepack >&2
  echo "$(swift build "${static[@]}" --show-bin-path)/tilepack"
}

# The tile tree of bench-serve.sh and bench-s3.sh in the folder $1: zooms 0 to $2 (6 when not
# given: 5461 tiles; 8: 87,381 tiles, 190 MB), from the sample tiles (zooms past 4 reuse zoom 4's
# images, with a different trailing comment chunk each so that no two tiles share bytes).
make_bench_tree() {
  python3 - "$1" "${2:-6}" <<'PY'
import os, struct, sys, zlib
root = sys.argv[1]
for z in range(int(sys.argv[2]) + 1):
    source_zoom = min(z, 4)
    for x in range(1 << z):
        for y in range(1 << z):
            src = open(f"samples/tiles/{source_zoom}/{x % (1 << source_zoom)}/{y % (1 << source_zoom)}.png", "rb").read()
            text = b"tEXt" + f"tile\0{z}/{x}/{y}".encode()
            chunk = struct.pack(">I", len(text) - 4) + text + struct.pack(">I", zlib.crc32(text) & 0xffffffff)
            os.makedirs(f"{root}/{z}/{x}", exist_ok=True)
            open(f"{root}/{z}/{x}/{y}.png", "wb").write(src[:-12] + chunk + src[-12:])
PY
}

# wrk's output (with --latency) on standard input -> "requests/s p99-ms"; its error lines (non-2xx
# answers, socket errors) go to standard error after the label $1.
wrk_figures() {
  local out rps p99 errors
  out="$(cat)"
  rps="$(echo "$out" | awk '/Requests\/sec/ {print $2}')"
  p99="$(echo "$out" | awk '$1 == "99%" {v=$2; if (v ~ /us$/) {sub(/us/,"",v); v=v/1000} else if (v ~ /ms$/) {sub(/ms/,"",v)} else if (v ~ /s$/) {sub(/s/,"",v); v=v*1000}; print v}')"
  errors="$(echo "$out" | awk '/Non-2xx|Socket errors/ {print}' | tr '\n' ' ')"
  [ -n "$errors" ] && echo "  $1: $errors" >&2
  echo "$rps $p99"
}

# The median of the numbers on standard input (blank-separated or one a line).
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
