#!/usr/bin/env bash
# kill -9 trials: tilepack is killed at random moments during import, import --append, convert
# and export (5 trials each, 20 in all), and what it leaves must be usable at once:
#   import / convert: the destination is absent, or a complete archive that `verify --quick`
#     passes; no temporary file survives the next run;
#   append: the archive reads at once (read-only commands included) and holds either the old
#     tiles or the old and the new ones, never a mix;
#   export: every tile file present is complete (byte-identical to a finished export).
#
#   tools/kill-trials.sh [path/to/tilepack]     (default: the debug build, built if missing)
# Exits non-zero at the first trial that leaves something unusable. Takes about 30-60 s.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-}"
if [ -z "$bin" ]; then
  swift build --product tilepack >/dev/null
  bin="$(swift build --show-bin-path)/tilepack"
fi
work="$(mktemp -d "${TMPDIR:-/tmp}/tilepack-kill.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# A tree of 8,000 tiles: the sample's PNGs hard-linked at zoom 10 (and a second tree elsewhere).
python3 - "$work" <<'PY'
import os, sys, glob
work = sys.argv[1]
tiles = sorted(glob.glob("samples/tiles/*/*/*.png"))
for name, x0 in (("tree", 0), ("tree2", 500)):
    for i in range(8000 if name == "tree" else 4000):
        x, y = x0 + i // 100, i % 100
        folder = f"{work}/{name}/10/{x}"
        os.makedirs(folder, exist_ok=True)
        os.link(tiles[i % len(tiles)], f"{folder}/{y}.png")
PY

fail() { echo "kill-trials: FAILED: $*" >&2; exit 1; }
# Sleeps a random 0-50% of $1 milliseconds (an operation's measured duration): the kill lands inside it.
pause() { local ms=$(( RANDOM % ($1 / 2 + 1) )); sleep "$((ms / 1000)).$(printf '%03d' $((ms % 1000)))"; }
# Runs a command and prints how long it took, in milliseconds.
timed() { local s; s=$(date +%s%N); "$@" >/dev/null; echo $(( ($(date +%s%N) - s) / 1000000 )); }
interrupted=0
# Waits (at most 5 s) until a file matching the glob $1 exists: the command has started writing.
started() { for _ in $(seq 1000); do compgen -G "$1" >/dev/null && return 0; sleep 0.005; done; return 0; }
count() { "$bin" info --json "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["tiles"])'; }
leftovers() { find "$1" -maxdepth 1 -name '.*.tmp-*' | wc -l; }

t_import=$(timed "$bin" import -q "$work/tree" "$work/base.mbtiles")
base_tiles=$(count "$work/base.mbtiles")
cp "$work/base.mbtiles" "$work/append.mbtiles"
t_append=$(timed "$bin" import -q --append "$work/tree2" "$work/append.mbtiles")
t_convert=$(timed "$bin" convert -q "$work/base.mbtiles" "$work/base-done.tilepack")
t_export=$(timed "$bin" export -q "$work/base.mbtiles" "$work/export-done")
trials=0

# One trial of a command that writes a new archive at $3 (what: $1, measured duration: $2 ms):
# killed while it writes, it leaves no archive or one that verifies; the next run, to completion,
# leaves no temporary file. The command is the rest of the arguments (without --force).
write_trial() {
  local what=$1 duration=$2 dest=$3; shift 3
  rm -f "$dest"
  "$bin" "$@" >/dev/null 2>&1 & pid=$!
  started "$(dirname "$dest")/.$(basename "$dest").tmp-*"; pause "$duration"; kill -9 $pid 2>/dev/null || true; wait $pid 2>/dev/null || true
  if [ -e "$dest" ]; then
    "$bin" verify --quick "$dest" >/dev/null || fail "$what trial $i: the archive left does not verify"
  else
    interrupted=$((interrupted + 1))
  fi
  "$bin" "$@" --force >/dev/null
  [ "$(leftovers "$(dirname "$dest")")" = 0 ] || fail "$what trial $i: temporary files survive the next run: $(ls -a "$(dirname "$dest")")"
  trials=$((trials + 1))
}

for i in 1 2 3 4 5; do
  write_trial import "$t_import" "$work/out.mbtiles" import -q "$work/tree" "$work/out.mbtiles"

  # append
  cp "$work/base.mbtiles" "$work/append.mbtiles"
  "$bin" import -q --append "$work/tree2" "$work/append.mbtiles" >/dev/null 2>&1 & pid=$!
  started "$work/append.mbtiles-journal"; pause "$t_append"; kill -9 $pid 2>/dev/null || true; wait $pid 2>/dev/null || true
  [ -e "$work/append.mbtiles-journal" ] && interrupted=$((interrupted + 1))
  n=$(count "$work/append.mbtiles") || fail "append trial $i: info cannot read the archive"
  [ "$n" = "$base_tiles" ] || [ "$n" = "$((base_tiles + 4000))" ] || fail "append trial $i: $n tiles, neither old nor old + new"
  "$bin" verify --quick "$work/append.mbtiles" >/dev/null || fail "append trial $i: the archive does not verify"
  trials=$((trials + 1))

  write_trial convert "$t_convert" "$work/out.tilepack" convert -q "$work/base.mbtiles" "$work/out.tilepack"

  # export
  rm -rf "$work/export"
  "$bin" export -q "$work/base.mbtiles" "$work/export" >/dev/null 2>&1 & pid=$!
  started "$work/export/10/*"; pause "$t_export"; kill -9 $pid 2>/dev/null || true; wait $pid 2>/dev/null || true
  [ -e "$work/export/metadata.json" ] || interrupted=$((interrupted + 1))
  if [ -d "$work/export" ]; then
    # Files in both trees must be identical ("Only in" lines are files not written yet).
    differ=$(diff -rq "$work/export" "$work/export-done" | grep -v '^Only in ' || true)
    [ -z "$differ" ] || fail "export trial $i: files are not complete: $differ"
    "$bin" export -q --force "$work/base.mbtiles" "$work/export" >/dev/null
    [ "$(find "$work/export" -name '.*.tmp-*' | wc -l)" = 0 ] || fail "export trial $i: temporary files survive the next run"
  fi
  trials=$((trials + 1))
done
echo "kill-trials: $trials kill -9 trials (import, append, convert, export; $interrupted of them caught the command before it finished) all left usable results"
