#!/usr/bin/env bash
# The prefetch benchmark (issues 17 and 28): tiles per second that `tilepack fetch` downloads from
# nginx on loopback, a realistic tile server, over https with HTTP/2 (TLS with a self-signed
# certificate this script makes; every transfer multiplexed on one connection) and over plain
# http/1.1 (kept-alive connections), each next to
#   - the floor: curl-fetch-floor (tools/Sources/curl-fetch-floor), a small C program doing the
#     least a download needs on the same transport (libcurl's multi interface, the same
#     connections, HTTP/2 multiplexing, bodies written to memory): goal 0.8x or more;
#   - TilepackHTTP's client alone over the same libcurl transport (bench-fetch-floor curl), which
#     tells the HTTP layer's cost from the fetch loop's;
#   - download-tiles (PyPI), a command that does the same job: goal 10x or more. It fetches one
#     tile at a time on a new connection each, so it runs on plain http only (on loopback https
#     its handshakes took 6 minutes for 341 tiles) and over --peer-zoom (default 0-5, 1,365
#     tiles; its wall clock includes Python's start, several seconds on a loaded machine).
# Contenders alternate; medians of --runs runs; every figure is printed as tilepack's ratio to it.
# A tilepack figure is the whole command's wall clock (process start, store creation, final
# metadata and sync included), with the CPU time per tile (user + system) beside it; a floor's is
# its transfer loop's.
#
# tilepack is the release build with the Swift runtime linked in (--static-swift-stdlib, its own
# build folder .build-static), as tools/install.sh installs it.
#
#   tools/bench-fetch.sh [--zoom 0-7] [--peer-zoom 0-5] [--runs 3] [--concurrency 8] [--port 18717] [--no-http-floor]
#   (TILEPACK_BIN=path: time that release build of tilepack instead of building one)
#
# --no-http-floor leaves out TilepackHTTP's client alone (it needs a release build of the library
# in tools/.build besides tilepack's own).
#
# https uses --port + 1. The certificate is trusted only by the processes measured: each runs in a
# mount namespace of its own (unshare -m, so as root) where the system's CA bundle is replaced by
# one with the certificate added; download-tiles (Python) is pointed at that bundle.
# The tile tree (the world at the zooms asked, each tile a hard link to a 256 px PNG of
# samples/tiles), the certificate and every output go under $BENCH_WORK (default
# /tmp/tilepack-bench-fetch), never into the repository. Installs what is missing: nginx with
# http_v2 (Debian's nginx), openssl, download-tiles 0.4.1.
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/bench-lib.sh
root="$PWD"
work="${BENCH_WORK:-/tmp/tilepack-bench-fetch}"
zoom="0-7"
peer_zoom="0-5"
runs=3
http_floor=1
concurrency=8
port=18717
while [ $# -gt 0 ]; do
    case "$1" in
        --zoom) zoom="$2"; shift 2 ;;
        --peer-zoom) peer_zoom="$2"; shift 2 ;;
        --no-http-floor) http_floor=0; shift ;;
        --runs) runs="$2"; shift 2 ;;
        --concurrency) concurrency="$2"; shift 2 ;;
        --port) port="$2"; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 64 ;;
    esac
done
[ "$(id -u)" -eq 0 ] || { echo "bench-fetch: run as root (unshare -m trusts the test certificate for the measured processes only)" >&2; exit 77; }

# What the benchmark needs. Debian's nginx packages (nginx-light included since 1.22) have
# http_v2; one without it is replaced by nginx-full.
install() { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null; }
command -v nginx >/dev/null || { apt-get update -qq; install nginx-light; }
nginx -V 2>&1 | grep -q -- --with-http_v2_module || { apt-get update -qq; install nginx-full; }
command -v openssl >/dev/null || install openssl
command -v download-tiles >/dev/null || python3 -m pip install --quiet 'download-tiles==0.4.1'
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
find "$tree" -name '*.png' | sed "s|^$tree||" | sort > "$work/paths.txt"

# A self-signed certificate for 127.0.0.1 (P-256, as most tile CDNs serve), and the system's CA
# bundle with it added: what the measured processes see as /etc/ssl/certs/ca-certificates.crt.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=127.0.0.1 \
    -addext subjectAltName=IP:127.0.0.1 -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null
cat /etc/ssl/certs/ca-certificates.crt "$work/cert.pem" > "$work/ca-bundle.crt"
trusted() {
    # shellcheck disable=SC2016
    unshare -m sh -c 'mount --bind "$0" /etc/ssl/certs/ca-certificates.crt && exec "$@"' "$work/ca-bundle.crt" "$@"
}

# nginx: static files, keep-alive, no logs, one worker per core; http/1.1 on $port, https with
# HTTP/2 on $port + 1.
tls_port=$((port + 1))
cat > "$work/nginx.conf" <<EOF
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
        listen 127.0.0.1:$tls_port ssl http2;
        ssl_certificate $work/cert.pem;
        ssl_certificate_key $work/key.pem;
        http2_max_concurrent_streams 128;
        root $tree;
    }
}
EOF
nginx -c "$work/nginx.conf" -p "$work"
trap 'kill "$(cat "$work/nginx.pid")" 2>/dev/null || true' EXIT
sleep 0.3
for base in "http://127.0.0.1:$port" "https://127.0.0.1:$tls_port"; do
    version=$(trusted curl -sf -o /dev/null -w '%{http_version}' "$base/0/0/0.png") \
        || { echo "bench-fetch: nginx does not answer on $base" >&2; cat "$work/nginx-error.log" >&2; exit 1; }
    echo "bench-fetch: $base answers over HTTP/$version"
done

# tilepack (release, static Swift runtime, as installed; TILEPACK_BIN=path: that build) and the floors.
tilepack="$(release_tilepack)"
if [ "$http_floor" = 1 ]; then swift build -c release --package-path tools --product bench-fetch-floor >/dev/null; fi
swift build -c release --package-path tools --product curl-fetch-floor >/dev/null
bin="$(swift build -c release --package-path tools --show-bin-path)"

now() { date +%s.%N; }
median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

schemes="https http"
contenders="tilepack floor-c floor-http download-tiles"
[ "$http_floor" = 1 ] || contenders="tilepack floor-c download-tiles"
for scheme in $schemes; do for name in $contenders; do : > "$work/$name-$scheme.rates"; : > "$work/$name-$scheme.cpu"; done; done
echo "bench-fetch: $tiles tiles (world, zooms $zoom) from nginx, $concurrency requests in flight; $runs runs, alternating; $(nproc) cores; load: $(uptime | sed 's/.*load average: //')"

# tilepack fetch from base $2 (scheme $1): tiles/s, wall clock of the whole command; its CPU time
# per tile (µs, user + system) goes to tilepack-<scheme>.cpu.
fetch() {
    local out="$work/tilepack-$1"
    rm -f "$out.mbtiles"
    local start end got
    start=$(now)
    trusted /usr/bin/time -f "%U %S" -o "$out.time" "$tilepack" fetch "$2/{z}/{x}/{y}.png" "$out.mbtiles" \
        --bbox=-180,-85.0511,180,85.0511 --zoom "$zoom" --concurrency "$concurrency" --quiet > "$out.out"
    end=$(now)
    got=$(grep -o '^success: [0-9]*' "$out.out" | grep -o '[0-9]*$')
    [ "$got" = "$tiles" ] || { echo "bench-fetch: tilepack ($1) fetched $got of $tiles tiles: $(cat "$out.out")" >&2; exit 1; }
    awk -v n="$tiles" '{ printf "%.1f\n", ($1 + $2) * 1e6 / n }' "$out.time" >> "$work/tilepack-$1.cpu"
    echo "$tiles $start $end" | awk '{ printf "%.1f\n", $1 / ($3 - $2) }'
}

# download-tiles from base $2 (scheme $1) over --peer-zoom: tiles/s, wall clock of the whole command.
peer_tiles=$(python3 -c "import sys; lo, hi = map(int, sys.argv[1].split('-')); print(sum(4 ** z for z in range(lo, hi + 1)))" "$peer_zoom")
peer() {
    local out="$work/download-tiles-$1"
    rm -f "$out.mbtiles"
    local start end got
    start=$(now)
    SSL_CERT_FILE="$work/ca-bundle.crt" REQUESTS_CA_BUNDLE="$work/ca-bundle.crt" download-tiles "$out.mbtiles" \
        --zoom-levels "$peer_zoom" --bbox=-180,-85.0511,180,85.0511 --tiles-url "$2/{z}/{x}/{y}.png" > "$out.out" 2>&1
    end=$(now)
    got=$(sqlite3 "$out.mbtiles" "SELECT count(*) FROM tiles")
    [ "$got" = "$peer_tiles" ] || echo "bench-fetch: download-tiles ($1) stored $got of $peer_tiles tiles" >&2
    echo "$got $start $end" | awk '{ printf "%.1f\n", $1 / ($3 - $2) }'
}

for run in $(seq 1 "$runs"); do
    for scheme in $schemes; do
        base="http://127.0.0.1:$port"; [ "$scheme" = https ] && base="https://127.0.0.1:$tls_port"
        fetch "$scheme" "$base" >> "$work/tilepack-$scheme.rates"
        trusted "$bin/curl-fetch-floor" "$base" "$work/paths.txt" "$concurrency" "$concurrency" 2>/dev/null >> "$work/floor-c-$scheme.rates"
        if [ "$http_floor" = 1 ]; then
            trusted "$bin/bench-fetch-floor" "$base" "$work/paths.txt" "$concurrency" curl >> "$work/floor-http-$scheme.rates"
        fi
        if [ "$scheme" = http ]; then peer "$scheme" "$base" >> "$work/download-tiles-$scheme.rates"; fi
        line="  run $run, $scheme:"
        for name in $contenders; do if [ -s "$work/$name-$scheme.rates" ]; then line="$line $name $(tail -1 "$work/$name-$scheme.rates")"; fi; done
        echo "$line (tiles/s)"
    done
done

"$tilepack" verify "$work/tilepack-https.mbtiles" | tail -1
ratio() { echo "$1 $2" | awk '{ printf "%.2fx", $1 / $2 }'; }
for scheme in $schemes; do
    declare -A med
    for name in $contenders; do if [ -s "$work/$name-$scheme.rates" ]; then med[$name]=$(median < "$work/$name-$scheme.rates"); fi; done
    label="https, HTTP/2"; [ "$scheme" = http ] && label="http/1.1"
    printf '\n%-58s %10s %11s %12s\n' "$label: median of $runs runs" "tiles/s" "CPU µs/tile" "tilepack ÷"
    row() {
        local cpu=""
        if [ -s "$work/$3-$scheme.cpu" ]; then cpu=$(median < "$work/$3-$scheme.cpu"); fi
        printf '%-58s %10.0f %11s %12s\n' "$1" "$2" "$cpu" "$(ratio "${med[tilepack]}" "$2")"
    }
    row "tilepack fetch (libcurl, $concurrency in flight)" "${med[tilepack]}" tilepack
    row "floor: curl-fetch-floor (C, libcurl multi; goal >= 0.80x)" "${med[floor-c]}" floor-c
    if [ -n "${med[floor-http]:-}" ]; then row "TilepackHTTP's client alone over libcurl" "${med[floor-http]}" floor-http; fi
    if [ -n "${med[download-tiles]:-}" ]; then row "download-tiles 0.4.1, zooms $peer_zoom (goal >= 10x)" "${med[download-tiles]}" download-tiles; fi
    unset med
done
echo "load after: $(uptime | sed 's/.*load average: //')"
