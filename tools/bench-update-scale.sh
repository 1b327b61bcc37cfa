# Issue 44's apply goals, sourced by tools/bench-update.sh --scale [--changed M] (M: 10,000 unless
# given). Apply that grows with the change, not with the archive:
#   - v1 of 100,000 and of 1,000,000 tiles, and a v2 of each that re-renders M tiles spread evenly
#     over it (make-versions --changed M: every 10th and every 100th tile), nothing else changed;
#   - MBTiles patched in place (`tilepack patch BASE P`, the base storing its identity as any base
#     tilepack wrote or patched does) against its floor, the sqlite3 shell's bare apply of the same
#     changes: `ATTACH` martin's patch layout, and in one transaction (synchronous=FULL, as
#     tilepack commits) `INSERT OR REPLACE` its rows (and `DELETE` its NULL rows: none here),
#     checking nothing (no identity, no metadata); goal 1.5x at 1,000,000 tiles; and the in-place
#     apply at 1,000,000 tiles against the same at 100,000: goal 1.5x;
#   - a bundle and a PMTiles with their tile hash index (`tilepack index`) patched (rewritten beside
#     the base and renamed over it) against the copy floor: v2's file copied by the kernel
#     (`cp`: copy_file_range, every byte read and written), fsynced and renamed over a synced copy
#     of v1; goal 1.3x at 1,000,000 tiles;
#   - peak RSS of each apply at both sizes, and its growth per archive tile between them.
# Each base file is made once per run: the MBTiles bases are put back between rounds by the reverse
# change (tilepack's reverse patch for tilepack's base, the sqlite3 shell's reverse apply for the
# floor's: each file only ever touched by its own contender), untimed; a bundle or PMTiles base is
# copied from v1 and synced (untimed). Contenders alternate within each round; medians of $ROUNDS
# rounds (5 unless set) of wall time and of CPU time (user + sys of the process and its children,
# from wait4's rusage, microseconds), and the median peak RSS. Files under $BENCH_WORK/update/scale
# (the generated pairs are kept and reused: 1,000,000 tiles take minutes to make and convert).

scale_bench() {
    local changed="$1" sw="$work/scale" n ext
    local rounds="${ROUNDS:-5}"
    mkdir -p "$sw"
    cat > "$sw/run.py" <<'PY'
# run.py LABEL OUT COMMAND...: runs COMMAND, appends "LABEL wall cpu maxrss_kib" to OUT.
import os, sys, time
label, out, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
# posix_spawn, not fork: a forked child's peak RSS would count this Python's pages.
devnull = os.open(os.devnull, os.O_WRONLY)
t0 = time.monotonic()
pid = os.posix_spawnp(argv[0], argv, os.environ, file_actions=[(os.POSIX_SPAWN_DUP2, devnull, 1)])
_, status, ru = os.wait4(pid, 0)
wall = time.monotonic() - t0
if status != 0:
    sys.exit(f"{label}: {' '.join(argv)} failed ({status})")
with open(out, "a") as f:
    f.write(f"{label} {wall:.6f} {ru.ru_utime + ru.ru_stime:.6f} {ru.ru_maxrss}\n")
PY
    local sizes=(100000 1000000)
    for n in "${sizes[@]}"; do
        if [ ! -f "$sw/v2-$n-c$changed.mbtiles" ]; then
            swift build -c release --package-path tools --product make-versions >&2
            "$(swift build -c release --package-path tools --show-bin-path)/make-versions" "$sw/gen" --tiles "$n" --changed "$changed"
            mv "$sw/gen/v1.mbtiles" "$sw/v1-$n-c$changed.mbtiles"
            mv "$sw/gen/v2.mbtiles" "$sw/v2-$n-c$changed.mbtiles"
        fi
    done
    cd "$sw"
    for n in "${sizes[@]}"; do
        local v1="v1-$n-c$changed" v2="v2-$n-c$changed"
        # v1 -> v2 changes exactly $changed tiles (make-versions --changed), nothing added or deleted.
        "$tilepack" diff "$v1.mbtiles" "$v2.mbtiles" "p-$n.tppatch" --force --json | python3 -c '
import json, sys
r = json.load(sys.stdin)
if (r["changed"], r["added"], r["deleted"]) != (int(sys.argv[1]), 0, 0):
    sys.exit("v1 -> v2 is not %s changed tiles: %s" % (sys.argv[1], r))' "$changed"
        [ -f "r-$n.tppatch" ] || "$tilepack" diff "$v2.mbtiles" "$v1.mbtiles" "r-$n.tppatch" --force >/dev/null
        [ -f "m-$n.mbtiles" ] || "$tilepack" diff "$v1.mbtiles" "$v2.mbtiles" "m-$n.mbtiles" --force >/dev/null
        [ -f "mr-$n.mbtiles" ] || "$tilepack" diff "$v2.mbtiles" "$v1.mbtiles" "mr-$n.mbtiles" --force >/dev/null
        for p in m mr; do mbtiles_floor_sql "$p-$n.mbtiles" "$p-$n.sql"; done
        # tilepack's base: v1 given an empty patch (it then stores its identity); the floor's: v1.
        cp "$v1.mbtiles" "A-$n.mbtiles" && cp "$v1.mbtiles" "F-$n.mbtiles"
        "$tilepack" diff "$v1.mbtiles" "$v1.mbtiles" noop.tppatch --force >/dev/null
        "$tilepack" patch "A-$n.mbtiles" noop.tppatch >/dev/null
        for ext in tilepack pmtiles; do
            [ -f "$v1.$ext" ] || "$tilepack" convert "$v1.mbtiles" "$v1.$ext" --quiet >/dev/null
            [ -f "$v2.$ext" ] || "$tilepack" convert "$v2.mbtiles" "$v2.$ext" --quiet >/dev/null
            [ -f "$v1.$ext.tpindex" ] || "$tilepack" index "$v1.$ext" >/dev/null
            [ -f "p-$n.$ext.tppatch" ] || "$tilepack" diff "$v1.$ext" "$v2.$ext" "p-$n.$ext.tppatch" --force >/dev/null
        done
        sync "A-$n.mbtiles" "F-$n.mbtiles"
    done
    local t="$sw/times.txt"
    : > "$t"
    for ((r = 0; r < rounds; r++)); do
        for n in "${sizes[@]}"; do
            python3 run.py "mbtiles-$n" "$t" "$tilepack" patch "A-$n.mbtiles" "p-$n.tppatch"
            if [ "$r" = 0 ]; then scale_same_tiles "A-$n.mbtiles" "v2-$n-c$changed.mbtiles"; fi
            "$tilepack" patch "A-$n.mbtiles" "r-$n.tppatch" >/dev/null
            python3 run.py "mbtiles-floor-$n" "$t" sqlite3 "F-$n.mbtiles" ".read m-$n.sql"
            sqlite3 "F-$n.mbtiles" ".read mr-$n.sql"
            for ext in tilepack pmtiles; do
                local v1="v1-$n-c$changed" v2="v2-$n-c$changed"
                cp "$v1.$ext" "base.$ext" && cp "$v1.$ext.tpindex" "base.$ext.tpindex" && sync "base.$ext" "base.$ext.tpindex"
                python3 run.py "$ext-$n" "$t" "$tilepack" patch "base.$ext" "p-$n.$ext.tppatch"
                if [ "$r" = 0 ] && ! cmp -s "base.$ext" "$v2.$ext"; then echo "base.$ext patched is not $v2.$ext" >&2; exit 1; fi
                cp "$v1.$ext" "base.$ext" && sync "base.$ext"
                python3 run.py "$ext-floor-$n" "$t" bash -c "cp $v2.$ext .floor.$ext && sync .floor.$ext && mv .floor.$ext base.$ext"
            done
        done
    done
    scale_report "$t" "$changed" "$rounds"
}

# Fails unless the two MBTiles files hold the same tiles (`tilepack diff`: nothing added, changed or deleted).
scale_same_tiles() {
    "$tilepack" diff "$1" "$2" same.tppatch --force --json | python3 -c '
import json, sys
r = json.load(sys.stdin)
if r["added"] or r["changed"] or r["deleted"]:
    sys.exit("%s patched is not %s tile for tile: %s" % (sys.argv[1], sys.argv[2], r))' "$1" "$2"
}

# The table: medians per label, each apply beside its floor, and the goals.
scale_report() {
    uptime
    python3 - "$@" <<'PY'
import statistics, sys
path, changed, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
runs = {}
for line in open(path):
    label, wall, cpu, rss = line.split()
    runs.setdefault(label, []).append((float(wall), float(cpu), int(rss)))
med = {k: tuple(statistics.median(x[i] for x in v) for i in range(3)) for k, v in runs.items()}
print(f"{changed} tiles changed, spread over the archive; medians of {rounds} rounds, contenders alternating")
print(f"{'apply':<22} {'wall s':>8} {'CPU s':>8} {'floor wall':>10} {'floor CPU':>10} {'wall x':>8} {'CPU x':>8} {'goal':>5} {'RSS MiB':>8}")
goals = {"mbtiles": 1.5, "tilepack": 1.3, "pmtiles": 1.3}
for fmt in ("mbtiles", "tilepack", "pmtiles"):
    for n in (100000, 1000000):
        a, f = med[f"{fmt}-{n}"], med[f"{fmt}-floor-{n}"]
        goal = f"{goals[fmt]}x" if n == 1000000 else ""
        print(f"{fmt + ' ' + format(n, ','):<22} {a[0]:8.3f} {a[1]:8.3f} {f[0]:10.3f} {f[1]:10.3f} {a[0]/f[0]:7.3f}x {a[1]/f[1]:7.3f}x {goal:>5} {a[2]/1024:8.1f}")
print()
print("1,000,000 against 100,000 tiles (goal for MBTiles in place: 1.5x) and peak RSS growth per archive tile:")
for fmt in ("mbtiles", "mbtiles-floor", "tilepack", "pmtiles"):
    big, small = med[f"{fmt}-1000000"], med[f"{fmt}-100000"]
    slope = (big[2] - small[2]) * 1024 / 900000
    print(f"  {fmt:<14} wall {big[0]/small[0]:6.3f}x  CPU {big[1]/small[1]:6.3f}x  RSS {small[2]/1024:.1f} -> {big[2]/1024:.1f} MiB: {slope:.1f} bytes per tile")
PY
}
