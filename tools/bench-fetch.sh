#!/usr/bin/env bash
# Issue 17's prefetch benchmark: tiles per second that `tilepack fetch` downloads from a local
# nginx, over each HTTP transport of the command (tilepack's own sockets, the default on Linux,
# with its default pipelining of 4 requests per connection and without; libcurl's multi
# interface), next to download-tiles (PyPI) fetching the same tiles, to
# the server's own ceiling measured with wrk on the same URLs (wrk's way: one request at a time
# per connection; and, for comparison, wrk pipelining 4 per connection as tilepack does), and to
# tilepack's HTTP floors (the same GETs through TilepackHTTP's client alone over each transport,
# URLSession, the library's default, included: tools/Sources/bench-fetch-floor; the command does
# not link URLSession on Linux), in one run. Contenders alternate; medians of --runs runs;
# every figure is printed as tilepack's ratio to it. A tilepack figure is the whole command's
# wall clock (process start, store creation, final metadata and sync included); the CPU time
# per tile (user + system, of the whole command) is printed beside it.
#
# tilepack is the release build with the Swift runtime linked in (--static-swift-stdlib, its own
# build folder .build-static), as tools/install.sh installs it.
#
#   tools/bench-fetch.sh [--zoom 0-6] [--runs 3] [--concurrency 8] [--port 18717]
#
# The tile tree (the world at the zooms asked, each tile a hard link to a 256 px PNG of
# samples/tiles) and every output go under $BENCH_WORK (default /tmp/tilepack-bench-fetch),
# never into the repository. Needs nginx (nginx-light), wrk and download-tiles on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
work="${BENCH_WORK:-/tmp/tilepack-bench-fetch}"
zoom="0-6"
runs=3
concurrency=8
port=18717
while [ $# -gt 0 ]; do
    case "$1" in
        --zoom) zoom="$2"; shift 2 ;;
        --runs) runs="$2"; shift 2 ;;
        --concurrency) concurrency="$2"; shift 2 ;;
        --port) port="$2"; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 64 ;;
    esac
done
for tool in nginx wrk download-tiles; do
    command -v "$tool" >/dev/null || { echo "bench-fetch: $tool is not installed" >&2; exit 69; }
done
mkdir -p "$work"
min="${zoom%-*}"; max="${zoom#*-}"

# The tile tree and the list of its URLs (what every contender fetches).
tree="$work/tree-$zoom"
if [ ! -f "$tree/.complete" ]; then
    rm -rf "$tree"
    python3 - "$root/samples/tiles" "$tree" "$min" "$max" <<'EOF'
import os, sys
src, dst, lo, hi = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
samples = sorted(os.path.join(d, f) for d, _, fs in os.walk(src) for f in fs if f.endswith(".png"))
i = 0
for z in range(lo, hi + 1):
    for x in range(1 << z):
        os.makedirs(f"{dst}/{z}/{x}", exist_ok=True)
        for y in range(1 << z):
            os.link(samples[i % len(samples)], f"{dst}/{z}/{x}/{y}.png")
            i += 1
open(f"{dst}/.complete", "w").close()
EOF
fi
tiles=$(find "$tree" -name '*.png' | wc -l)
base="http://127.0.0.1:$port"
find "$tree" -name '*.png' | sed "s|^$tree||" | sort > "$work/paths.txt"

# nginx: static files, keep-alive, no logs, one worker per core.
conf="$work/nginx.conf"
cat > "$conf" <<EOF
worker_processes auto;
pid $work/nginx.pid;
error_log $work/nginx-error.log;
daemon on;
events { worker_connections 1024; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    keepalive_timeout 60;
    types { image/png png; }
    server {
        listen 127.0.0.1:$port;
        root $tree;
    }
}
EOF
nginx -c "$conf" -p "$work"
trap 'kill "$(cat "$work/nginx.pid")" 2>/dev/null || true' EXIT
sleep 0.3
curl -sf -o /dev/null "$base/0/0/0.png" || { echo "bench-fetch: nginx does not answer on $base" >&2; exit 1; }

# tilepack (release, static Swift runtime, as installed) and the HTTP floor.
static=(-c release --static-swift-stdlib --scratch-path .build-static)
swift build "${static[@]}" --product tilepack >/dev/null
tilepack="$(swift build "${static[@]}" --show-bin-path)/tilepack"
swift build -c release --package-path tools --product bench-fetch-floor >/dev/null
floor="$(swift build -c release --package-path tools --show-bin-path)/bench-fetch-floor"
sessions=$(nproc)

cat > "$work/urls.lua" <<EOF
local paths = {}
for line in io.lines("$work/paths.txt") do paths[#paths + 1] = line end
local i = math.random(#paths)
request = function()
    i = i % #paths + 1
    return wrk.format("GET", paths[i])
end
EOF
# wrk pipelining: each request() sends 4 requests at once on its connection (wrk counts answers).
cat > "$work/urls-pipelined.lua" <<EOF
local paths = {}
for line in io.lines("$work/paths.txt") do paths[#paths + 1] = line end
local i = math.random(#paths)
request = function()
    local batch = ""
    for k = 1, 4 do
        i = i % #paths + 1
        batch = batch .. wrk.format("GET", paths[i])
    end
    return batch
end
EOF

now() { date +%s.%N; }
median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

contenders="wrk wrk-pipelined floor-sockets floor-sockets-pipelined floor-curl floor-urlsession tilepack-sockets tilepack-sockets-serial tilepack-curl download-tiles"
for name in $contenders; do : > "$work/$name.rates"; : > "$work/$name.cpu"; done
echo "bench-fetch: $tiles tiles (world, zooms $zoom) from nginx on $base; $runs runs, alternating; $(nproc) cores; load: $(uptime | sed 's/.*load average: //')"

# tilepack fetch over one transport (sockets-serial: sockets without pipelining): tiles/s, wall
# clock of the whole command; its CPU time per tile (µs, user + system) goes to tilepack-<name>.cpu.
fetch() {
    rm -f "$work/tilepack-$1.mbtiles"
    local start end got
    local options=(--transport "$1")
    [ "$1" = sockets-serial ] && options=(--transport sockets --pipeline 1)
    start=$(now)
    /usr/bin/time -f "%U %S" -o "$work/tilepack-$1.time" "$tilepack" fetch "$base/{z}/{x}/{y}.png" "$work/tilepack-$1.mbtiles" \
        --bbox=-180,-85.0511,180,85.0511 --zoom "$zoom" --concurrency "$concurrency" "${options[@]}" --quiet > "$work/tilepack-$1.out"
    end=$(now)
    got=$(grep -o '^success: [0-9]*' "$work/tilepack-$1.out" | grep -o '[0-9]*$')
    [ "$got" = "$tiles" ] || { echo "bench-fetch: tilepack ($1) fetched $got of $tiles tiles: $(cat "$work/tilepack-$1.out")" >&2; exit 1; }
    awk -v n="$tiles" '{ printf "%.1f\n", ($1 + $2) * 1e6 / n }' "$work/tilepack-$1.time" >> "$work/tilepack-$1.cpu"
    echo "$tiles $start $end" | awk '{ printf "%.1f\n", $1 / ($3 - $2) }'
}

for run in $(seq 1 "$runs"); do
    # The server's ceiling on the same URLs: wrk, 2 threads, as many connections as tilepack uses.
    wrk -t2 -c"$concurrency" -d4s -s "$work/urls.lua" "$base" | awk '/Requests\/sec/ { print $2 }' >> "$work/wrk.rates"
    fetch sockets >> "$work/tilepack-sockets.rates"
    "$floor" "$base" "$work/paths.txt" "$concurrency" sockets 4 >> "$work/floor-sockets-pipelined.rates"
    wrk -t2 -c"$concurrency" -d2s -s "$work/urls-pipelined.lua" "$base" | awk '/Requests\/sec/ { print $2 }' >> "$work/wrk-pipelined.rates"
    fetch sockets-serial >> "$work/tilepack-sockets-serial.rates"
    "$floor" "$base" "$work/paths.txt" "$concurrency" sockets >> "$work/floor-sockets.rates"
    "$floor" "$base" "$work/paths.txt" "$concurrency" curl >> "$work/floor-curl.rates"
    fetch curl >> "$work/tilepack-curl.rates"
    "$floor" "$base" "$work/paths.txt" "$concurrency" "$sessions" >> "$work/floor-urlsession.rates"

    rm -f "$work/download-tiles.mbtiles"
    start=$(now)
    download-tiles "$work/download-tiles.mbtiles" --zoom-levels "$zoom" --bbox=-180,-85.0511,180,85.0511 \
        --tiles-url "$base/{z}/{x}/{y}.png" > "$work/download-tiles.out" 2>&1
    end=$(now)
    got=$(sqlite3 "$work/download-tiles.mbtiles" "SELECT count(*) FROM tiles")
    [ "$got" = "$tiles" ] || echo "bench-fetch: download-tiles stored $got of $tiles tiles" >&2
    echo "$got $start $end" | awk '{ printf "%.1f\n", $1 / ($3 - $2) }' >> "$work/download-tiles.rates"
    line="  run $run:"
    for name in $contenders; do line="$line $name $(tail -1 "$work/$name.rates")"; done
    echo "$line (tiles/s; wrk: requests/s)"
done

declare -A med
for name in $contenders; do med[$name]=$(median < "$work/$name.rates"); done
"$tilepack" verify "$work/tilepack-sockets.mbtiles" | tail -1
ratio() { echo "$1 $2" | awk '{ printf "%.2fx", $1 / $2 }'; }
ts=${med[tilepack-sockets]}; tc=${med[tilepack-curl]}
printf '\n%-50s %10s %11s %18s %16s\n' "median of $runs runs" "tiles/s" "CPU µs/tile" "tilepack sockets ÷" "tilepack curl ÷"
row() {
    local cpu=""
    [ -s "$work/$3.cpu" ] && cpu=$(median < "$work/$3.cpu")
    printf '%-50s %10.0f %11s %18s %16s\n' "$1" "$2" "$cpu" "$(ratio "$ts" "$2")" "$(ratio "$tc" "$2")"
}
row "tilepack fetch --transport sockets (default)" "$ts" tilepack-sockets
row "tilepack fetch --transport sockets --pipeline 1" "${med[tilepack-sockets-serial]}" tilepack-sockets-serial
row "tilepack fetch --transport curl" "$tc" tilepack-curl
row "download-tiles 0.4.1" "${med[download-tiles]}" download-tiles
row "nginx ceiling (wrk -t2 -c$concurrency, same URLs)" "${med[wrk]}" wrk
row "  the same, wrk pipelining 4 per connection" "${med[wrk-pipelined]}" wrk-pipelined
row "HTTP floor: TilepackHTTP over sockets, pipelining 4" "${med[floor-sockets-pipelined]}" floor-sockets-pipelined
row "HTTP floor: TilepackHTTP over tilepack's sockets" "${med[floor-sockets]}" floor-sockets
row "HTTP floor: TilepackHTTP over curl" "${med[floor-curl]}" floor-curl
row "HTTP floor: TilepackHTTP over $sessions URLSessions" "${med[floor-urlsession]}" floor-urlsession
echo "load after: $(uptime | sed 's/.*load average: //')"
