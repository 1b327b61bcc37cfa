#!/usr/bin/env bash
# What storing a new MBTiles file's content identity costs (Specs/updates.md §1.1; `--index` on
# an .mbtiles output): `tilepack convert v2.mbtiles out.mbtiles` and `tilepack import TREE
# out.mbtiles` on bench-update's 50,000-tile set (its v2, and v2 exported as a tree), each with and
# without --index, taking turns: the medians of ROUNDS runs each, wall and CPU (user + system),
# and the ratios. Release build (TILEPACK_BIN, else built here); tools/bench-update.sh makes the
# set (under $BENCH_WORK, default /tmp/tilepack-bench).
#
#   [TILEPACK_BIN=...] [ROUNDS=5] tools/bench-identity.sh
set -euo pipefail
cd "$(dirname "$0")/.."
work="${BENCH_WORK:-/tmp/tilepack-bench}/update"
rounds="${ROUNDS:-5}"
[ -f "$work/v2-50000.mbtiles" ] || { echo "no $work/v2-50000.mbtiles: run tools/bench-update.sh first" >&2; exit 2; }
if [ -n "${TILEPACK_BIN:-}" ]; then
    tilepack="$TILEPACK_BIN"
else
    swift build -c release --product tilepack
    tilepack="$(swift build -c release --show-bin-path)/tilepack"
fi
cd "$work"
[ -d v2-tree ] || "$tilepack" export v2-50000.mbtiles v2-tree --quiet >/dev/null

# "wall cpu" of one run of "$@".
timed() {
    rm -f id-out.mbtiles
    /usr/bin/time -f "%e %U %S" -o id-time.txt "$@" >/dev/null 2>&1
    awk '{ printf "%.3f %.3f\n", $1, $2 + $3 }' id-time.txt
}
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

printf '%-8s %12s %12s %8s %12s %12s %8s\n' "" "wall --index" "wall" ratio "CPU --index" "CPU" ratio
for job in convert import; do
    if [ "$job" = convert ]; then args=(convert v2-50000.mbtiles id-out.mbtiles --force --quiet)
    else args=(import v2-tree id-out.mbtiles --force --quiet); fi
    : >id-with.txt; : >id-without.txt
    for _ in $(seq "$rounds"); do
        timed "$tilepack" "${args[@]}" --index >>id-with.txt
        timed "$tilepack" "${args[@]}" >>id-without.txt
    done
    # The identity is stored with --index only.
    "$tilepack" "${args[@]}" --index >/dev/null 2>&1
    "$tilepack" meta get id-out.mbtiles tilepack_content_identity >/dev/null 2>&1 || { echo "$job --index: no identity stored" >&2; exit 1; }
    ww=$(cut -d' ' -f1 id-with.txt | median); wo=$(cut -d' ' -f1 id-without.txt | median)
    cw=$(cut -d' ' -f2 id-with.txt | median); co=$(cut -d' ' -f2 id-without.txt | median)
    printf '%-8s %12.3f %12.3f %7.3fx %12.3f %12.3f %7.3fx\n' "$job" "$ww" "$wo" "$(echo "$ww / $wo" | bc -l)" \
        "$cw" "$co" "$(echo "$cw / $co" | bc -l)"
done
rm -f id-out.mbtiles id-time.txt id-with.txt id-without.txt
