#!/usr/bin/env bash
# Issue 30's update benchmark: two versions of a 50,000-tile set (tools/Sources/make-versions:
# v2 re-renders 2% of the tiles in one region, deletes 0.5% in another, adds a deeper zoom over a
# small area), in each format (MBTiles, bundle, PMTiles):
#   - patch size: `tilepack diff` (tilepack's patch file; and martin's MBTiles layout) against the
#     smallest of xdelta3 -9 -S djw, bsdiff and zstd -19 --long=27 --patch-from between the two
#     archive files (Debian packages, installed here), and against the changed tiles' bytes;
#   - apply time: `tilepack patch` (MBTiles in place, bundle/PMTiles rewritten) against
#     `tilepack convert v2.X out.X`, run in turn, medians of 7 rounds (ROUNDS=N), and each one's peak RSS
#     (/usr/bin/time -v's maximum resident set size) beside the archive's size; with each, its
#     floor on this machine: for MBTiles the sqlite3 shell making the same changes, for a bundle
#     or PMTiles v2's file copied by the kernel, fsynced and renamed over the base.
#   - sync: `tilepack sync` from nginx on loopback, with and without multi-range answers (below).
# Release builds; everything under $BENCH_WORK (default /tmp/tilepack-bench/update).
#
#   tools/bench-update.sh [--tiles N] [--apply-only | --sync-only | --scale [--changed M]]
#                         (--apply-only: the apply times alone; --sync-only: the sync counts alone;
#                          --scale: issue 44's apply at 100,000 and 1,000,000 tiles, below
#                          (tools/bench-update-scale.sh); TILEPACK_BIN=path: use that release build
#                          of tilepack)
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/bench-lib.sh

# The floor of an in-place MBTiles patch: the sqlite3 shell applying martin's patch layout ($1)
# in one transaction, checking nothing; written to $2.
mbtiles_floor_sql() {
    cat > "$2" <<SQL
PRAGMA synchronous = FULL;
ATTACH '$1' AS p;
BEGIN IMMEDIATE;
DELETE FROM tiles WHERE rowid IN (SELECT t.rowid FROM tiles t JOIN p.tiles d ON t.zoom_level = d.zoom_level
    AND t.tile_column = d.tile_column AND t.tile_row = d.tile_row WHERE d.tile_data IS NULL);
INSERT OR REPLACE INTO tiles SELECT zoom_level, tile_column, tile_row, tile_data FROM p.tiles WHERE tile_data IS NOT NULL;
COMMIT;
SQL
}
work="${BENCH_WORK:-/tmp/tilepack-bench}/update"
tiles=50000
apply_only=0
sync_only=""
while [ $# -gt 0 ]; do
    case "$1" in
        --tiles) tiles="$2"; shift 2 ;;
        --apply-only) apply_only=1; shift ;;
        --sync-only) sync_only=1; shift ;;
        --scale) scale=1; shift ;;
        --changed) changed="$2"; shift 2 ;;
        *) echo "usage: $0 [--tiles N] [--apply-only | --sync-only | --scale [--changed M]]" >&2; exit 2 ;;
    esac
done
mkdir -p "$work"

need=()
command -v xdelta3 >/dev/null || need+=(xdelta3)
command -v bsdiff >/dev/null || need+=(bsdiff)
command -v zstd >/dev/null || need+=(zstd)
command -v sqlite3 >/dev/null || need+=(sqlite3)
if [ ${#need[@]} -gt 0 ]; then
    sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
    $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi

# TILEPACK_BIN: a release tilepack already built; else the static release build (bench-lib.sh).
tilepack="$(release_tilepack)"
if [ -n "${scale:-}" ]; then
    source tools/bench-update-scale.sh
    scale_bench "${changed:-10000}"
    exit 0
fi

if [ ! -f "$work/v2-$tiles.mbtiles" ]; then
    swift build -c release --package-path tools --product make-versions
    make_versions="$(swift build -c release --package-path tools --show-bin-path)/make-versions"
    "$make_versions" "$work/gen" --tiles "$tiles"
    mv "$work/gen/v1.mbtiles" "$work/v1-$tiles.mbtiles"
    mv "$work/gen/v2.mbtiles" "$work/v2-$tiles.mbtiles"
fi
cd "$work"
for v in v1 v2; do
    cp "$v-$tiles.mbtiles" "$v.mbtiles"
    for ext in tilepack pmtiles; do "$tilepack" convert "$v.mbtiles" "$v.$ext" --force --quiet >/dev/null; done
done

size() { stat -c %s "$1"; }
# The median wall-clock seconds of each command given as a SETUP COMMAND pair (strings, eval'd),
# over $rounds rounds in each of which they run in turn, each after its setup (untimed): the
# contenders alternate, so that what this shared machine does meanwhile falls on all of them
# alike. Prints the medians in the order given.
rounds="${ROUNDS:-7}"
medians() {
    local setups=() commands=() times=() i r t0 t1
    while [ $# -gt 0 ]; do setups+=("$1"); commands+=("$2"); shift 2; done
    for ((r = 0; r < rounds; r++)); do
        for ((i = 0; i < ${#commands[@]}; i++)); do
            eval "${setups[$i]}"
            t0=$(date +%s.%N); eval "${commands[$i]}" >/dev/null 2>&1; t1=$(date +%s.%N)
            times[i * rounds + r]=$(echo "$t1 - $t0" | bc -l)
        done
    done
    for ((i = 0; i < ${#commands[@]}; i++)); do
        printf '%s\n' "${times[@]:i * rounds:rounds}" | sort -g | awk -v k=$(((rounds + 1) / 2)) 'NR == k'
    done | tr '\n' ' '
}
tp=$(printf '%q' "$tilepack")

if [ -z "$sync_only" ]; then
printf '%s\n' "tiles: $tiles; $( "$tilepack" diff v1.mbtiles v2.mbtiles p-counts.tppatch --force --json | python3 -c 'import json,sys; r=json.load(sys.stdin); print("added %d, changed %d, deleted %d; changed+added tile bytes %d" % (r["added"], r["changed"], r["deleted"], r["tileBytes"]))')"
[ "$apply_only" = 1 ] || printf '\n%-9s %10s %10s %10s %10s %10s %12s %s\n' format archive tilepack xdelta3 bsdiff zstd "vs smallest" "mbtiles patch vs 1.2x tiles+64KiB"
for ext in mbtiles tilepack pmtiles; do
    if [ "$apply_only" = 1 ]; then "$tilepack" diff "v1.$ext" "v2.$ext" "p-$ext.tppatch" --force >/dev/null; continue; fi
    json=$("$tilepack" diff "v1.$ext" "v2.$ext" "p-$ext.tppatch" --force --json)
    ours=$(size "p-$ext.tppatch")
    tilebytes=$(echo "$json" | python3 -c 'import json,sys; print(json.load(sys.stdin)["tileBytes"])')
    xdelta3 -f -9 -S djw -e -s "v1.$ext" "v2.$ext" "x-$ext.vcdiff"
    bsdiff "v1.$ext" "v2.$ext" "b-$ext.bsdiff"
    zstd -q -f -19 --long=27 --patch-from="v1.$ext" "v2.$ext" -o "z-$ext.zst"
    x=$(size "x-$ext.vcdiff"); b=$(size "b-$ext.bsdiff"); z=$(size "z-$ext.zst")
    smallest=$(printf '%s\n' "$x" "$b" "$z" | sort -n | head -1)
    extra=""
    if [ "$ext" = mbtiles ]; then
        "$tilepack" diff v1.mbtiles v2.mbtiles p-martin.mbtiles --force >/dev/null
        m=$(size p-martin.mbtiles)
        extra="$m bytes = $(echo "scale=3; $m / (1.2 * $tilebytes + 65536)" | bc -l)x"
    fi
    printf '%-9s %10s %10s %10s %10s %10s %11.3fx %s\n' "$ext" "$(size "v2.$ext")" "$ours" "$x" "$b" "$z" \
        "$(echo "$ours / $smallest" | bc -l)" "$extra"
done

# Peak resident set size in MiB of "$@" (after the setup command $1).
peak() {
    local setup="$1"; shift
    eval "$setup"
    /usr/bin/time -f %M -o "$work/rss.txt" "$@" >/dev/null 2>&1
    echo "scale=1; $(tail -1 "$work/rss.txt") / 1024" | bc -l
}
mib() { echo "scale=1; $(size "$1") / 1048576" | bc -l; }

printf '\n%-9s %12s %12s %8s %14s %14s %12s %s\n' format "patch (s)" "convert (s)" ratio "patch RSS MiB" "conv. RSS MiB" "archive MiB" ""
row() { # format patch convert RSS RSS archive note
    printf '%-9s %12.3f %12.3f %7.3fx %14s %14s %12s %s\n' "$1" "$2" "$3" "$(echo "$2 / $3" | bc -l)" "$4" "$5" "$6" "$7"
}
# Each row's patch, `convert v2.X out.X` and floor alternate, medians of $rounds runs (ROUNDS=N).
convert_setup() { echo "rm -f out.$1"; }
convert_command() { echo "$tp convert v2.$1 out.$1 --force --quiet"; }
# MBTiles twice: a base that stores its identity (any base tilepack wrote or patched; here v1
# given an empty patch, v1 to v1), whose check reads only the changed tiles, and a fresh base
# (v1 as make-versions writes it, as another tool would: no identity), whose identity is computed
# from every tile first. The copy made for each run is synced before it (untimed): the patch
# fsyncs the file it changes, which would otherwise write back the whole fresh copy, where a base
# that has lain on the disk has only the patch's pages to write. Beside the first, the floor of
# an in-place apply: the sqlite3 shell making the same changes from martin's patch layout in one
# transaction (synchronous=FULL, as tilepack commits), checking nothing: no identity before or
# after, no metadata, no tile type.
"$tilepack" diff v1.mbtiles v1.mbtiles noop.tppatch --force >/dev/null
cp v1.mbtiles v1-stamped.mbtiles && "$tilepack" patch v1-stamped.mbtiles noop.tppatch >/dev/null
"$tilepack" diff v1.mbtiles v2.mbtiles p-martin.mbtiles --force >/dev/null
mbtiles_floor_sql p-martin.mbtiles floor.sql
stamped="cp v1-stamped.mbtiles base.mbtiles && sync base.mbtiles"
read -r p c f <<<"$(medians "$stamped" "$tp patch base.mbtiles p-mbtiles.tppatch" \
    "$(convert_setup mbtiles)" "$(convert_command mbtiles)" "$stamped" "sqlite3 base.mbtiles < floor.sql")"
pr=$(peak "$stamped" "$tilepack" patch base.mbtiles p-mbtiles.tppatch)
cr=$(peak "rm -f out.mbtiles" "$tilepack" convert v2.mbtiles out.mbtiles --force --quiet)
row mbtiles "$p" "$c" "$pr" "$cr" "$(mib v1.mbtiles)" "(in place, base stores its identity)"
row mbtiles "$f" "$c" "" "" "$(mib v1.mbtiles)" \
    "(floor: sqlite3 shell, the same writes, nothing checked; tilepack $(printf '%.2f' "$(echo "$p / $f" | bc -l)")x this)"
for ext in mbtiles tilepack pmtiles; do
    setup="cp v1.$ext base.$ext"
    [ "$ext" = mbtiles ] && setup="$setup && sync base.$ext"
    read -r p c <<<"$(medians "$setup" "$tp patch base.$ext p-$ext.tppatch" "$(convert_setup "$ext")" "$(convert_command "$ext")")"
    cmp -s "base.$ext" "v2.$ext" && same="(byte-identical to v2)" || same=""
    [ "$ext" = mbtiles ] && same="(in place, identity computed from every tile)"
    pr=$(peak "cp v1.$ext base.$ext" "$tilepack" patch "base.$ext" "p-$ext.tppatch")
    cr=$(peak "rm -f out.$ext" "$tilepack" convert "v2.$ext" "out.$ext" --force --quiet)
    row "$ext" "$p" "$c" "$pr" "$cr" "$(mib "v1.$ext")" "$same"
done
# Bundle and PMTiles bases with their tile hash index beside them (`tilepack index`, as a
# publisher writes it for sync; copied after the base, so not older than it): checked by the
# index's identity, the changed tiles alone hashed; the index says the base is canonical
# (Specs/updates.md §7.5), so its kept payloads are copied unchecked. Each copy is synced before
# the patch (untimed), as the MBTiles base is: a base that has lain on the disk has no dirty
# pages for the kernel to write back while the patch runs. Beside it, the floor of any apply that
# writes the result beside the base and renames it over it (so that a kill leaves the base
# whole): v2's file copied by the kernel (cp: copy_file_range), fsynced, and renamed over a
# synced copy of v1, whose blocks the file system then frees. Nothing read, checked or laid out:
# what this disk and file system take for the file alone.
for ext in tilepack pmtiles; do
    rm -f "v1.$ext.tpindex" && "$tilepack" index "v1.$ext" >/dev/null
    setup="cp v1.$ext base.$ext && cp v1.$ext.tpindex base.$ext.tpindex && sync base.$ext base.$ext.tpindex"
    read -r p c f <<<"$(medians "$setup" "$tp patch base.$ext p-$ext.tppatch" "$(convert_setup "$ext")" "$(convert_command "$ext")" \
        "cp v1.$ext base.$ext && sync base.$ext" "cp v2.$ext .floor.$ext && sync .floor.$ext && mv .floor.$ext base.$ext")"
    eval "$setup" && "$tilepack" patch "base.$ext" "p-$ext.tppatch" >/dev/null
    cmp -s "base.$ext" "v2.$ext" && same="(byte-identical to v2; base with its tile index)" || same="(base with its tile index)"
    pr=$(peak "$setup" "$tilepack" patch "base.$ext" "p-$ext.tppatch")
    cr=$(peak "rm -f out.$ext" "$tilepack" convert "v2.$ext" "out.$ext" --force --quiet)
    row "$ext" "$p" "$c" "$pr" "$cr" "$(mib "v1.$ext")" "$same"
    row "$ext" "$f" "$c" "" "" "$(mib "v1.$ext")" \
        "(floor: v2 copied by the kernel, fsynced, renamed over the base; tilepack $(printf '%.2f' "$(echo "$p / $f" | bc -l)")x this)"
    rm -f "base.$ext.tpindex"
done
# The floor of a bundle or PMTiles patch without the base's index, which must compute the base's
# identity from every tile: `tilepack info`, which reads every tile (a bundle's decoded) and
# computes that identity (SHA-256 of each), besides its statistics. The patch is timed again here,
# its base synced first as above.
printf '\n%-9s %12s %12s %8s %s\n' format "patch (s)" "info (s)" ratio "(base without its tile index: against reading and hashing every tile)"
for ext in tilepack pmtiles; do
    read -r p f <<<"$(medians "cp v1.$ext base.$ext && sync base.$ext" "$tp patch base.$ext p-$ext.tppatch" true "$tp info v1.$ext")"
    printf '%-9s %12.3f %12.3f %7.3fx\n' "$ext" "$p" "$f" "$(echo "$p / $f" | bc -l)"
done
fi
[ "$apply_only" = 1 ] && exit 0

# Sync from nginx on loopback: v1 local, v2 published with its tile hash index (tilepack index);
# bytes on the wire are nginx's $bytes_sent for every request of the sync (status lines, headers,
# multipart boundaries, the index, directories, gaps: everything), against the added and changed
# tiles' bytes plus the index; requests against one per 64 changed tiles. Twice: nginx as it is
# (multi-range answers) and with max_ranges 1 (one range a request, as S3 and most CDNs).
printf '\n%-9s %-12s %10s %14s %8s %9s %10s %8s\n' format server wire "tiles+index" ratio requests "changed/64" ratio
www="$work/www"; ng="$work/nginx"
rm -rf "$www" "$ng"; mkdir -p "$www" "$ng"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat > "$ng/nginx.conf" <<CONF
daemon on; master_process off; worker_processes 1; pid $ng/nginx.pid; error_log $ng/error.log;
events { worker_connections 64; }
http {
    log_format wire '\$bytes_sent \$status \$request';
    access_log $ng/access.log wire;
    client_body_temp_path $ng/b; proxy_temp_path $ng/p; fastcgi_temp_path $ng/f; uwsgi_temp_path $ng/u; scgi_temp_path $ng/s;
    server { listen 127.0.0.1:$port; root $www; location /onerange/ { alias $www/; max_ranges 1; } }
}
CONF
/usr/sbin/nginx -p "$ng" -c "$ng/nginx.conf" -e "$ng/error.log"
trap 'kill "$(cat "$ng/nginx.pid")" 2>/dev/null || true' EXIT
for ext in tilepack pmtiles; do
    cp "v2.$ext" "$www/v2.$ext"
    "$tilepack" index "$www/v2.$ext" >/dev/null
    indexbytes=$(size "$www/v2.$ext.tpindex")
    for server in nginx max_ranges_1; do
        path="v2.$ext"; [ "$server" = max_ranges_1 ] && path="onerange/v2.$ext"
        cp "v1.$ext" "mine.$ext"; rm -f "mine.$ext.tpsync"
        : > "$ng/access.log"
        json=$("$tilepack" sync "mine.$ext" "http://127.0.0.1:$port/$path" --json)
        sleep 0.2
        wire=$(awk '{s += $1} END {print s}' "$ng/access.log")
        fetched=$(echo "$json" | python3 -c 'import json,sys; print(json.load(sys.stdin)["tilesFetched"])')
        requests=$(wc -l < "$ng/access.log")
        tilebytes=$("$tilepack" diff "v1.$ext" "v2.$ext" p-sync.tppatch --force --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["tileBytes"])')
        denominator=$((tilebytes + indexbytes))
        printf '%-9s %-12s %10s %14s %7.3fx %9s %10.1f %7.3fx\n' "$ext" "$server" "$wire" "$denominator" \
            "$(echo "$wire / $denominator" | bc -l)" "$requests" "$(echo "$fetched / 64" | bc -l)" "$(echo "$requests / ($fetched / 64)" | bc -l)"
    done
done
