#!/usr/bin/env bash
# kill -9 trials: tilepack is killed at random moments during import, import --append, convert,
# export (5 trials each), patch (5 trials per format: MBTiles in place, bundle, PMTiles),
# fetch --refresh (5 trials) and sync (3 trials per format: bundle, PMTiles; 46 in all), and what
# it leaves must be usable at once:
#   import / convert: the destination is absent, or a complete archive that `verify --quick`
#     passes; no temporary file survives the next run;
#   append: the archive reads at once (read-only commands included) and holds either the old
#     tiles or the old and the new ones, never a mix;
#   export: every tile file present is complete (byte-identical to a finished export);
#   patch: BASE is the old version or the new one (its content identity is one of the two, and
#     `verify --quick` passes); a bundle or PMTiles is then byte-identical to that version; no
#     temporary file survives the next run;
#   fetch --refresh: the prefetch store's tiles are the old version whole or the new one whole,
#     and the next refresh ends at the new one;
#   sync: LOCAL is the old version or the new one byte for byte, and the next sync resumes from
#     what was staged (it reports the staged bytes it used) and ends at the new one with no
#     staging or temporary file left.
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
# Another image over 1,000 of the first tree's tiles: a new version's changed tiles.
for i in range(1000):
    x, y = 30 + i // 100, i % 100
    folder = f"{work}/tree3/10/{x}"
    os.makedirs(folder, exist_ok=True)
    os.link(tiles[(i + 7) % len(tiles)], f"{folder}/{y}.png")
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
# Two versions for patch: v2 = v1 with 1,000 tiles changed, 4,000 added and 100 deleted.
cp "$work/base.mbtiles" "$work/v2.mbtiles"
"$bin" import -q --append "$work/tree3" "$work/v2.mbtiles" >/dev/null
"$bin" import -q --append "$work/tree2" "$work/v2.mbtiles" >/dev/null
python3 - "$work/v2.mbtiles" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
view = db.execute("SELECT type FROM sqlite_master WHERE name = 'tiles'").fetchone()[0] == "view"
db.execute(f"DELETE FROM {'map' if view else 'tiles'} WHERE zoom_level = 10 AND tile_column = 70")
db.execute("INSERT OR REPLACE INTO metadata (name, value) VALUES ('version', '2')")
db.commit()
PY
for ext in tilepack pmtiles; do
  "$bin" convert -q "$work/base.mbtiles" "$work/v1.$ext" >/dev/null
  "$bin" convert -q "$work/v2.mbtiles" "$work/v2.$ext" >/dev/null
done
identity() { "$bin" info --json "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["identity"])'; }
id_old=$(identity "$work/base.mbtiles")
id_new=$(identity "$work/v2.mbtiles")
[ "$id_old" != "$id_new" ] || fail "patch setup: v1 and v2 have the same identity"
"$bin" diff "$work/base.mbtiles" "$work/v2.mbtiles" "$work/p.tppatch" >/dev/null
declare -A t_patch
for ext in mbtiles tilepack pmtiles; do
  if [ "$ext" = mbtiles ]; then cp "$work/base.mbtiles" "$work/pb.$ext"; else cp "$work/v1.$ext" "$work/pb.$ext"; fi
  t_patch[$ext]=$(timed "$bin" patch "$work/pb.$ext" "$work/p.tppatch")
  [ "$(identity "$work/pb.$ext")" = "$id_new" ] || fail "patch setup: patching the $ext base does not give v2"
done
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

  # patch, in each format: BASE stays the old version or becomes the new one, nothing between.
  for ext in mbtiles tilepack pmtiles; do
    if [ "$ext" = mbtiles ]; then cp "$work/base.mbtiles" "$work/pb.$ext"; else cp "$work/v1.$ext" "$work/pb.$ext"; fi
    "$bin" patch "$work/pb.$ext" "$work/p.tppatch" >/dev/null 2>&1 & pid=$!
    pause "${t_patch[$ext]}"; kill -9 $pid 2>/dev/null || true; wait $pid 2>/dev/null || true
    found=$(identity "$work/pb.$ext") || fail "patch ($ext) trial $i: info cannot read the base"
    if [ "$found" = "$id_old" ]; then
      interrupted=$((interrupted + 1))
      if [ "$ext" != mbtiles ]; then cmp -s "$work/pb.$ext" "$work/v1.$ext" || fail "patch ($ext) trial $i: old identity but not the old file"; fi
    elif [ "$found" = "$id_new" ]; then
      if [ "$ext" != mbtiles ]; then cmp -s "$work/pb.$ext" "$work/v2.$ext" || fail "patch ($ext) trial $i: new identity but not the new file"; fi
    else
      fail "patch ($ext) trial $i: the base is neither version: $found"
    fi
    "$bin" verify --quick "$work/pb.$ext" >/dev/null || fail "patch ($ext) trial $i: the base does not verify"
    # Whatever was left, patching again (or finding the base already patched) ends at v2 with no temporary file.
    if [ "$found" = "$id_old" ]; then "$bin" patch "$work/pb.$ext" "$work/p.tppatch" >/dev/null; fi
    [ "$(identity "$work/pb.$ext")" = "$id_new" ] || fail "patch ($ext) trial $i: patching again does not give v2"
    [ "$(leftovers "$work")" = 0 ] || fail "patch ($ext) trial $i: temporary files survive the next run: $(ls -a "$work")"
    trials=$((trials + 1))
  done
done
# fetch --refresh: a store of 400 tiles from a local server's version 1, refreshed to version 2
# (200 tiles changed) and killed at random: its tiles are version 1 whole or version 2 whole
# (the tiles' part of the content identity), and the next refresh ends at version 2.
python3 - "$work" <<'PY'
import os, shutil, sys
work = sys.argv[1]
for version in (1, 2):
    for x in range(25, 45):
        for y in range(20):
            source = f"{work}/tree3/10/{x}/{y}.png" if version == 2 and 30 <= x < 40 else f"{work}/tree/10/{x}/{y}.png"
            folder = f"{work}/srv/{version}/10/{x}"
            os.makedirs(folder, exist_ok=True)
            # Copies, dated by version: the server's Last-Modified must say version 2 is newer.
            shutil.copyfile(source, f"{folder}/{y}.png")
            os.utime(f"{folder}/{y}.png", (1e9 * version, 1e9 * version))
PY
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 -m http.server "$port" --bind 127.0.0.1 --directory "$work/srv" >/dev/null 2>&1 & server=$!
trap 'kill $server 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port/1/10/25/0.png" && break; sleep 0.05; done
# The box of columns 25-44, rows 0-19 at zoom 10 (inset from the tiles' edges).
box=$(python3 -c 'import math
def lon(x): return x / 1024 * 360 - 180
def lat(y): return math.degrees(math.atan(math.sinh(math.pi * (1 - 2 * y / 1024))))
print(f"{lon(25.01)},{lat(19.99)},{lon(44.99)},{lat(0.01)}")')
fetch() { "$bin" fetch "http://127.0.0.1:$port/$1/{z}/{x}/{y}.png" "$work/store.mbtiles" --bbox "$box" --zoom 10 --quiet "${@:2}"; }
tiles_id() { identity "$1" | cut -d: -f1-3; }
rm -f "$work/store.mbtiles"
fetch 2 >/dev/null || fail "refresh setup: fetching version 2 failed"
id_v2=$(tiles_id "$work/store.mbtiles")
rm -f "$work/store.mbtiles"
fetch 1 >/dev/null || fail "refresh setup: fetching version 1 failed"
id_v1=$(tiles_id "$work/store.mbtiles")
[ "$id_v1" != "$id_v2" ] || fail "refresh setup: the two versions' stores are not two versions"
cp "$work/store.mbtiles" "$work/store-v1.mbtiles"
t_refresh=$(timed fetch 2 --refresh)
for i in 1 2 3 4 5; do
  cp "$work/store-v1.mbtiles" "$work/store.mbtiles"
  fetch 2 --refresh >/dev/null 2>&1 & pid=$!
  pause "$t_refresh"; kill -9 $pid 2>/dev/null || true; wait $pid 2>/dev/null || true
  found=$(tiles_id "$work/store.mbtiles") || fail "refresh trial $i: info cannot read the store"
  if [ "$found" = "$id_v1" ]; then interrupted=$((interrupted + 1)); elif [ "$found" != "$id_v2" ]; then
    fail "refresh trial $i: the store's tiles are neither version: $found"
  fi
  "$bin" verify --quick "$work/store.mbtiles" >/dev/null || fail "refresh trial $i: the store does not verify"
  fetch 2 --refresh >/dev/null || fail "refresh trial $i: the next refresh failed"
  [ "$(tiles_id "$work/store.mbtiles")" = "$id_v2" ] || fail "refresh trial $i: the next refresh does not end at version 2"
  trials=$((trials + 1))
done
# sync (3 trials per format): LOCAL, a copy of v1, synced from nginx on loopback serving v2 with
# its tile hash index, killed at random: LOCAL is v1 or v2 byte for byte, and the next sync
# resumes from what was staged and ends at v2 with no staging or temporary file left.
if [ -x /usr/sbin/nginx ]; then
  ng="$work/nginx"; mkdir -p "$ng" "$work/www"
  ngport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  cat > "$ng/nginx.conf" <<CONF
daemon on; master_process off; worker_processes 1; pid $ng/nginx.pid; error_log $ng/error.log;
events { worker_connections 64; }
http {
    access_log off;
    client_body_temp_path $ng/b; proxy_temp_path $ng/p; fastcgi_temp_path $ng/f; uwsgi_temp_path $ng/u; scgi_temp_path $ng/s;
    server { listen 127.0.0.1:$ngport; root $work/www; }
}
CONF
  /usr/sbin/nginx -p "$ng" -c "$ng/nginx.conf" -e "$ng/error.log"
  trap 'kill $server 2>/dev/null; kill "$(cat "$work/nginx/nginx.pid")" 2>/dev/null; rm -rf "$work"' EXIT
  sync_resumed=0
  for ext in tilepack pmtiles; do
    cp "$work/v2.$ext" "$work/www/v2.$ext"
    "$bin" index "$work/www/v2.$ext" >/dev/null
    url="http://127.0.0.1:$ngport/v2.$ext"
    cp "$work/v1.$ext" "$work/sync.$ext"
    t_sync=$(timed "$bin" sync "$work/sync.$ext" "$url")
    cmp -s "$work/sync.$ext" "$work/v2.$ext" || fail "sync setup: the synced $ext is not v2 byte for byte"
    for i in 1 2 3; do
      cp "$work/v1.$ext" "$work/sync.$ext"
      "$bin" sync "$work/sync.$ext" "$url" >/dev/null 2>&1 & pid=$!
      pause "$t_sync"; kill -9 $pid 2>/dev/null || true; wait $pid 2>/dev/null || true
      if cmp -s "$work/sync.$ext" "$work/v1.$ext"; then
        interrupted=$((interrupted + 1))
      else
        cmp -s "$work/sync.$ext" "$work/v2.$ext" || fail "sync ($ext) trial $i: LOCAL is neither v1 nor v2 byte for byte"
      fi
      staged=$( [ -e "$work/sync.$ext.tpsync" ] && stat -c %s "$work/sync.$ext.tpsync" || echo 0)
      resumed=$("$bin" sync "$work/sync.$ext" "$url" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["resumedBytes"])') \
        || fail "sync ($ext) trial $i: the next sync failed"
      # A staging file holding more than its header and the first request's 16 KiB is resumed from.
      if [ "$staged" -gt 17000 ] && [ "$resumed" = 0 ]; then fail "sync ($ext) trial $i: the next sync did not resume from $staged staged bytes"; fi
      [ "$resumed" = 0 ] || sync_resumed=$((sync_resumed + 1))
      cmp -s "$work/sync.$ext" "$work/v2.$ext" || fail "sync ($ext) trial $i: the next sync does not end at v2"
      left=$(find "$work" -maxdepth 1 \( -name 'sync.*.tpsync' -o -name '.sync.*' \) | wc -l)
      [ "$left" = 0 ] || fail "sync ($ext) trial $i: files survive the next sync: $(ls -a "$work")"
      trials=$((trials + 1))
    done
  done
  echo "kill-trials: sync: $sync_resumed of 6 next syncs resumed from what the killed one had staged"
else
  echo "kill-trials: nginx not installed (/usr/sbin/nginx): the sync trials are skipped"
fi
echo "kill-trials: $trials kill -9 trials (import, append, convert, export, patch in 3 formats, fetch --refresh, sync in 2 formats; $interrupted of them caught the command before it finished) all left usable results"
