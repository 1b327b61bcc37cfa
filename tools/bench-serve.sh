#!/usr/bin/env bash
# tilepack serve against nginx on the same tiles (issues 16 and 47), with wrk: random tiles of
# zooms 0-8 (87,381 tiles, 190 MB: three times the server's 64 MiB tile cache), 32 connections,
# release builds, in one run, from a bundle, an MBTiles file and a PMTiles. Contenders alternate
# round by round; each figure is printed with nginx's of the same round as a ratio, then the medians.
#   bash tools/bench-serve.sh            (ROUNDS=3 DURATION=10 CONNECTIONS=32 MAXZOOM=8 to change;
#                                         TILEPACK_BIN and SERVE_BIN: release builds made elsewhere;
#                                         BEFORE_BIN: another tilepack-serve, a contender "before"
#                                         serving the MBTiles file, to compare two builds in one run)
# Needs nginx (Debian nginx-light) and wrk. Goals: each archive >= 1.0x nginx's requests/s, p99
# latency <= 1.2x nginx's (issue 47: MBTiles was at 0.80x), memory flat under load.
# Last run (ROUNDS=3, BEFORE_BIN = the build before MBTiles reads by rowid, load 2-25): MBTiles
# 0.99x nginx's requests/s (median of the rounds' ratios; before: 0.94x), p99 0.68x nginx's,
# CPU 21.0 us a request against nginx's 16.7 (1.25x; before: 23.0, 1.38x). Not yet 1.0x.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${ROUNDS:-3}"; duration="${DURATION:-10}"; connections="${CONNECTIONS:-32}"; maxzoom="${MAXZOOM:-8}"
for tool in nginx wrk python3; do command -v "$tool" >/dev/null || { echo "bench-serve needs $tool"; exit 1; }; done
work="$(mktemp -d /tmp/bench-serve.XXXXXX)"; chmod 755 "$work"
echo "machine: $(nproc) cores; load before: $(uptime | sed 's/.*load average: //')"

# SERVE_BIN: a tilepack-serve built elsewhere (another commit's, to compare two builds).
if [ -n "${SERVE_BIN:-}" ]; then
  serve="$SERVE_BIN"
else
  swift build -c release --package-path server --product tilepack-serve >/dev/null
  serve="$(swift build -c release --package-path server --show-bin-path)/tilepack-serve"
fi

source tools/bench-lib.sh
# Only makes the archives (TILEPACK_BIN: a release build made elsewhere).
bin="$(dirname "$(release_tilepack)")"
make_bench_tree "$work/tree" "$maxzoom"
"$bin/tilepack" import "$work/tree" "$work/tiles.tilepack" --force --quiet >/dev/null
"$bin/tilepack" import "$work/tree" "$work/tiles_mb.mbtiles" --force --quiet >/dev/null
"$bin/tilepack" import "$work/tree" "$work/tiles_pm.pmtiles" --force --quiet >/dev/null
"$bin/tilepack" export "$work/tiles.tilepack" "$work/static" >/dev/null
chmod -R a+rX "$work"
(cd "$work/tree" && find . -name '*.png' | sed 's/^\.//') | python3 -c 'import random,sys; l=sys.stdin.read().split(); random.Random(7).shuffle(l); print("\n".join(l))' > "$work/paths.txt"
echo "servers: nginx with worker_processes auto ($(nproc) workers: more do not help it), tilepack-serve with its default $((2 * $(nproc))) event loops (--threads)"
echo "tiles: $(wc -l < "$work/paths.txt"), $(du -sh "$work/static" | cut -f1) as files, bundle $(du -h "$work/tiles.tilepack" | cut -f1), MBTiles $(du -h "$work/tiles_mb.mbtiles" | cut -f1), PMTiles $(du -h "$work/tiles_pm.pmtiles" | cut -f1)"

cat > "$work/random.lua" <<'LUA'
local paths = {}
for line in io.lines(os.getenv("TILE_PATHS")) do paths[#paths + 1] = line end
local prefix = os.getenv("TILE_PREFIX") or ""
local counter = 0
request = function()
  counter = counter + 1
  return wrk.format("GET", prefix .. paths[(counter * 7919) % #paths + 1])
end
LUA

port=$((20000 + RANDOM % 20000))
user_line=""; [ "$(id -u)" -eq 0 ] && user_line="user root;"
cat > "$work/nginx.conf" <<NGINX
$user_line
worker_processes auto;
daemon off;
pid $work/nginx.pid;
error_log $work/nginx-error.log;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_requests 10000000;
  types { image/png png; }
  server { listen 127.0.0.1:$port; root $work/static; }
}
NGINX
nginx -c "$work/nginx.conf" -p "$work" &
nginx_pid=$!
"$serve" --port 0 "$work/tiles.tilepack" "$work/tiles_mb.mbtiles" "$work/tiles_pm.pmtiles" > "$work/serve.out" 2> "$work/serve.err" &
serve_pid=$!
before_pid=""
contenders="bundle mbtiles pmtiles"
if [ -n "${BEFORE_BIN:-}" ]; then
  "$BEFORE_BIN" --port 0 "$work/tiles_mb.mbtiles" > "$work/before.out" 2> "$work/before.err" &
  before_pid=$!
  contenders="bundle mbtiles before pmtiles"
fi
trap 'kill $nginx_pid $serve_pid $before_pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do [ -s "$work/serve.out" ] && break; sleep 0.1; done
serve_base="$(sed -n 's/^serving //p' "$work/serve.out" | head -1)"
serve_base="${serve_base%/}"
before_base=""
if [ -n "$before_pid" ]; then
  for _ in $(seq 100); do [ -s "$work/before.out" ] && break; sleep 0.1; done
  before_base="$(sed -n 's/^serving //p' "$work/before.out" | head -1)"
  before_base="${before_base%/}"
fi
sleep 0.5
curl -sf -o /dev/null "http://127.0.0.1:$port/0/0/0.png" || { echo "nginx did not start"; cat "$work/nginx-error.log"; exit 1; }
curl -sf -o /dev/null "$serve_base/tiles/0/0/0.png" || { echo "tilepack-serve did not start"; cat "$work/serve.err"; exit 1; }
for name in tiles tiles_mb tiles_pm; do
  cmp <(curl -s "http://127.0.0.1:$port/6/33/20.png") <(curl -s "$serve_base/$name/6/33/20.png") || { echo "nginx and tilepack serve ($name) differ"; exit 1; }
done
[ -z "$before_base" ] || cmp <(curl -s "http://127.0.0.1:$port/6/33/20.png") <(curl -s "$before_base/tiles_mb/6/33/20.png") || { echo "nginx and BEFORE_BIN differ"; exit 1; }
rss() { awk '/VmRSS/ {print $2}' "/proc/$serve_pid/status"; }

# CPU time (user + system, clock ticks) of the given processes.
ticks() { local t=0 p; for p in "$@"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done; echo "$t"; }
hz="$(getconf CLK_TCK)"

run() {  # name url-prefix base-url pid... -> "requests/s p99-ms cpu-us-per-request"
  local out before after requests
  before="$(ticks "${@:4}")"
  out="$(TILE_PATHS="$work/paths.txt" TILE_PREFIX="$2" wrk -t2 -c"$connections" -d"${duration}s" --latency -s "$work/random.lua" "$3" 2>&1)"
  after="$(ticks "${@:4}")"
  requests="$(echo "$out" | awk '/requests in/ {print $1}')"
  echo "$(echo "$out" | wrk_figures "$1") $(echo "($after - $before) * 1000000 / $hz / $requests" | bc -l)"
}

echo "tilepack-serve memory before load: $(rss) KiB"
declare -A all
nginx_workers="$(pgrep -P "$nginx_pid" | tr '\n' ' ')"
printf "%-6s %-8s %12s %9s %10s %8s %12s %8s\n" round server "requests/s" "p99 ms" "vs nginx" "p99 x" "CPU us/req" "CPU x"
for r in $(seq "$rounds"); do
  read -r n_rps n_p99 n_cpu <<< "$(run nginx "" "http://127.0.0.1:$port" $nginx_workers)"
  printf "%-6s %-8s %12.0f %9.2f %10s %8s %12.1f %8s\n" "$r" nginx "$n_rps" "$n_p99" "1.00x" "1.00x" "$n_cpu" "1.00x"
  all[nginx]+="$n_rps,$n_p99 "
  all[nginx_cpu]+="$n_cpu "
  for contender in $contenders; do
    # The archives hold the same tiles: the bundle is served as "tiles", the MBTiles file as
    # "tiles_mb", the PMTiles as "tiles_pm"; "before" is BEFORE_BIN's server of the MBTiles file.
    prefix="/tiles"; [ "$contender" = mbtiles ] && prefix="/tiles_mb"; [ "$contender" = pmtiles ] && prefix="/tiles_pm"
    base="$serve_base"; pid="$serve_pid"
    if [ "$contender" = before ]; then prefix="/tiles_mb"; base="$before_base"; pid="$before_pid"; fi
    read -r rps p99 cpu <<< "$(run "$contender" "$prefix" "$base" "$pid")"
    printf "%-6s %-8s %12.0f %9.2f %9.2fx %7.2fx %12.1f %7.2fx\n" "$r" "$contender" "$rps" "$p99" "$(echo "$rps / $n_rps" | bc -l)" \
      "$(echo "$p99 / $n_p99" | bc -l)" "$cpu" "$(echo "$cpu / $n_cpu" | bc -l)"
    all[$contender]+="$rps,$p99 "
    all[${contender}_cpu]+="$cpu "
    all[${contender}_ratio]+="$(echo "$rps / $n_rps" | bc -l) "
  done
  echo "  tilepack-serve memory after round $r: $(rss) KiB"
done
echo "medians over $rounds rounds ($duration s each, $connections connections, wrk -t2):"
n_rps="$(for v in ${all[nginx]}; do echo "${v%,*}"; done | median)"; n_p99="$(for v in ${all[nginx]}; do echo "${v#*,}"; done | median)"
printf "  %-8s %10.0f requests/s   p99 %7.2f ms\n" nginx "$n_rps" "$n_p99"
for contender in $contenders; do
  rps="$(for v in ${all[$contender]}; do echo "${v%,*}"; done | median)"; p99="$(for v in ${all[$contender]}; do echo "${v#*,}"; done | median)"
  printf "  %-8s %10.0f requests/s   p99 %7.2f ms   %.2fx nginx's requests/s, %.2fx its p99\n" "$contender" "$rps" "$p99" \
    "$(echo "$rps / $n_rps" | bc -l)" "$(echo "$p99 / $n_p99" | bc -l)"
  printf "  %-8s %10.2fx nginx's requests/s: the median of the rounds' ratios (each round's contenders run back to back)\n" \
    "$contender" "$(echo ${all[${contender}_ratio]} | tr ' ' '\n' | median)"
  cpu="$(echo ${all[${contender}_cpu]} | tr ' ' '\n' | median)"; n_cpu="$(echo ${all[nginx_cpu]} | tr ' ' '\n' | median)"
  printf "  %-8s %10.1f CPU us per request (server process), %.2fx nginx's %.1f\n" "$contender" "$cpu" "$(echo "$cpu / $n_cpu" | bc -l)" "$n_cpu"
done
echo "tilepack-serve memory at the end: $(rss) KiB (peak $(awk '/VmHWM/ {print $2}' "/proc/$serve_pid/status") KiB)"
echo "load after: $(uptime | sed 's/.*load average: //')"
