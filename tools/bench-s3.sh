#!/usr/bin/env bash
# Archives in object storage, side by side in one run (issue 33), against moto's S3 server on
# loopback (PyPI moto[server]; authentication not enforced, so that wrk and nginx can ask it
# directly), release builds:
#  1. tilepack serve of a bundle and a PMTiles in moto, random tiles, against wrk asking moto for
#     the same byte ranges directly (Range headers, the same connections): tilepack's overhead on
#     top of the store. Goals: >= 0.7x the requests per second, p99 <= 2x. Then a repeated tile
#     with the default cache: store requests counted (goal: none).
#  2. Upload of a large archive (SIZE_MB, default 1024): `tilepack upload` against `aws s3 cp`
#     (PyPI awscli) of the same file to the same endpoint, the two taking turns at going first,
#     ROUNDS rounds, medians; aws gets tilepack's 600 s for an answer (--cli-read-timeout: its 60 s
#     default retried, then failed, a CompleteMultipartUpload that moto took longer over, under
#     load). Goal: within 1.3x.
#  3. A remote extract of one city from that archive in moto, against the same extract over plain
#     HTTP (nginx, same file): requests and bytes, counted by nginx in front of both. Goal: <= 1.2x.
#   bash tools/bench-s3.sh         (SIZE_MB=256 DURATION=10 CONNECTIONS=8 ROUNDS=3 to change;
#                                   PARTS="upload extract" runs only those parts; BIG_PMTILES=FILE
#                                   reuses the large archive of an earlier run)
set -euo pipefail
cd "$(dirname "$0")/.."
size_mb="${SIZE_MB:-1024}"; duration="${DURATION:-10}"; connections="${CONNECTIONS:-8}"; rounds="${ROUNDS:-3}"
parts="${PARTS:-serve upload extract}"
wants() { [[ " $parts " == *" $1 "* ]]; }
command -v aws >/dev/null || python3 -m pip install -q awscli   # the peer of the upload
command -v wrk >/dev/null || apt-get install -y -q wrk >/dev/null   # Debian's wrk
for tool in nginx wrk python3 aws moto_server curl bc; do command -v "$tool" >/dev/null || { echo "bench-s3 needs $tool (moto[server], awscli: pip)"; exit 1; }; done
work="$(mktemp -d /tmp/bench-s3.XXXXXX)"; chmod 755 "$work"
echo "machine: $(nproc) cores; load before: $(uptime | sed 's/.*load average: //')"

if wants serve; then
  swift build -c release --package-path server --product tilepack-serve >/dev/null
  serve_bin="$(swift build -c release --package-path server --show-bin-path)"
fi
swift build -c release --product tilepack >/dev/null
bin="$(swift build -c release --show-bin-path)"

pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 300); do curl -s -o /dev/null "http://127.0.0.1:$1/" && return 0; sleep 0.1; done; echo "nothing on port $1"; exit 1; }

moto_port="$(free_port)"
moto_server -H 127.0.0.1 -p "$moto_port" > "$work/moto.log" 2>&1 &
pids+=($!)
wait_port "$moto_port"
export AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1
export AWS_ENDPOINT_URL="http://127.0.0.1:$moto_port"
aws s3 mb s3://tiles >/dev/null

source tools/bench-lib.sh
# --- 1. serve ------------------------------------------------------------------------------
if wants serve; then
make_bench_tree "$work/tree"   # 5461 tiles, zooms 0-6, as bench-serve.sh's
"$bin/tilepack" import "$work/tree" "$work/tiles.tilepack" --force --quiet >/dev/null
"$bin/tilepack" import "$work/tree" "$work/tiles.pmtiles" --force --quiet >/dev/null
aws s3 cp "$work/tiles.tilepack" s3://tiles/serve/tiles.tilepack >/dev/null
aws s3 cp "$work/tiles.pmtiles" s3://tiles/serve/tiles.pmtiles >/dev/null

# Each tile's path and its byte range in each archive (read from the files' own directories), in
# one shuffled order: wrk asks moto for exactly the ranges tilepack-serve asks it for.
python3 - "$work" <<'PY'
import random, struct, sys
from pmtiles.tile import deserialize_header, deserialize_directory, find_tile, zxy_to_tileid
work = sys.argv[1]
tiles = [(z, x, y) for z in range(7) for x in range(1 << z) for y in range(1 << z)]
random.Random(7).shuffle(tiles)
# Bundle (Specs/bundle-format.md §4, §6): keys, payload numbers, 24-byte payload records.
b = open(f"{work}/tiles.tilepack", "rb").read()
index_offset, index_length, data_offset = struct.unpack_from("<QQQ", b, 40)
count = struct.unpack_from("<Q", b, 72)[0]
keys = struct.unpack_from(f"<{count}Q", b, index_offset + 248)
numbers = struct.unpack_from(f"<{count}I", b, index_offset + 248 + 8 * count)
records = index_offset + ((248 + 12 * count + 7) // 8) * 8
by_key = dict(zip(keys, numbers))
def bundle_range(z, x, y):
    key = (4 ** z - 1) // 3 + x * (1 << z) + y
    offset, stored = struct.unpack_from("<QI", b, records + 24 * by_key[key])
    return data_offset + offset, stored
# PMTiles: root and leaf directories.
p = open(f"{work}/tiles.pmtiles", "rb").read()
h = deserialize_header(p[:127])
def directory(offset, length):
    return deserialize_directory(p[offset:offset + length])
root = directory(h["root_offset"], h["root_length"])
def pmtiles_range(z, x, y):
    tile_id = zxy_to_tileid(z, x, y)
    entries = root
    while True:
        entry = find_tile(entries, tile_id)
        if entry.run_length == 0:
            entries = directory(h["leaf_directory_offset"] + entry.offset, entry.length)
            continue
        return h["tile_data_offset"] + entry.offset, entry.length
for name, locate in (("tilepack", bundle_range), ("pmtiles", pmtiles_range)):
    with open(f"{work}/paths-{name}.txt", "w") as paths, open(f"{work}/ranges-{name}.txt", "w") as ranges:
        for z, x, y in tiles:
            start, length = locate(z, x, y)
            paths.write(f"/tiles_{name}/{z}/{x}/{y}.png\n")
            ranges.write(f"/tiles/serve/tiles.{name} bytes={start}-{start + length - 1}\n")
PY
cat > "$work/wrk.lua" <<'LUA'
local lines = {}
for line in io.lines(os.getenv("REQUESTS")) do lines[#lines + 1] = line end
local counter = 0
request = function()
  counter = counter + 1
  local line = lines[(counter * 7919) % #lines + 1]
  local path, range = line:match("^(%S+) (%S+)$")
  if range then return wrk.format("GET", path, { Range = range }) end
  return wrk.format("GET", line)
end
LUA
# The served names: tiles_tilepack and tiles_pmtiles (copies of the keys under those names).
# Readable without a signature, for wrk (moto refuses some unsigned reads of private objects).
aws s3 cp --acl public-read s3://tiles/serve/tiles.tilepack s3://tiles/serve/tiles_tilepack.tilepack >/dev/null
aws s3 cp --acl public-read s3://tiles/serve/tiles.pmtiles s3://tiles/serve/tiles_pmtiles.pmtiles >/dev/null
sed -i 's|/tiles/serve/tiles.tilepack |/tiles/serve/tiles_tilepack.tilepack |' "$work/ranges-tilepack.txt"
sed -i 's|/tiles/serve/tiles.pmtiles |/tiles/serve/tiles_pmtiles.pmtiles |' "$work/ranges-pmtiles.txt"

start_serve() {  # cache MiB -> sets serve_pid, serve_base
  : > "$work/serve.out"
  "$serve_bin/tilepack-serve" --port 0 --cache-size "$1" s3://tiles/serve/tiles_tilepack.tilepack s3://tiles/serve/tiles_pmtiles.pmtiles \
    > "$work/serve.out" 2> "$work/serve.err" &
  serve_pid=$!; pids+=("$serve_pid")
  for _ in $(seq 300); do [ -s "$work/serve.out" ] && break; sleep 0.1; done
  serve_base="$(sed -n 's/^serving //p' "$work/serve.out" | head -1)"; serve_base="${serve_base%/}"
  [ -n "$serve_base" ] || { echo "tilepack-serve did not start"; cat "$work/serve.err"; exit 1; }
}
# No cache: every tile is one range request to moto, as wrk's.
start_serve 0
first="$(head -1 "$work/ranges-pmtiles.txt")"
cmp <(curl -s -H "Range: ${first#* }" "$AWS_ENDPOINT_URL${first%% *}") <(curl -s "$serve_base$(head -1 "$work/paths-pmtiles.txt")") \
  || { echo "tilepack serve and the ranges differ"; exit 1; }

run() {  # requests-file base-url -> "requests/s p99-ms"
  REQUESTS="$1" wrk -t2 -c"$connections" -d"${duration}s" --latency -s "$work/wrk.lua" "$2" 2>&1 | wrk_figures "$2"
}
echo "1. serve: 5461 random tiles, $connections connections, ${duration} s per run, $rounds rounds; tilepack-serve --cache-size 0 (every tile a range request), $((2 * $(nproc))) event loops"
printf "%-6s %-9s %12s %9s %12s %9s %9s %8s\n" round archive "moto rps" "p99 ms" "serve rps" "p99 ms" "rps x" "p99 x"
declare -A ratios
for r in $(seq "$rounds"); do
  for name in tilepack pmtiles; do
    read -r d_rps d_p99 <<< "$(run "$work/ranges-$name.txt" "$AWS_ENDPOINT_URL")"
    read -r s_rps s_p99 <<< "$(run "$work/paths-$name.txt" "$serve_base")"
    rx="$(echo "$s_rps / $d_rps" | bc -l)"; px="$(echo "$s_p99 / $d_p99" | bc -l)"
    printf "%-6s %-9s %12.0f %9.2f %12.0f %9.2f %8.2fx %7.2fx\n" "$r" "$name" "$d_rps" "$d_p99" "$s_rps" "$s_p99" "$rx" "$px"
    ratios[${name}_rps]+="$rx "; ratios[${name}_p99]+="$px "
  done
done
for name in tilepack pmtiles; do
  printf "  %-9s median %.2fx moto's requests/s (goal >= 0.7x), p99 %.2fx (goal <= 2x)\n" "$name" \
    "$(echo ${ratios[${name}_rps]} | median)" "$(echo ${ratios[${name}_p99]} | median)"
done
kill "$serve_pid"; wait "$serve_pid" 2>/dev/null || true
# The default cache: a tile asked again costs the store nothing.
start_serve 64
store_requests() { curl -s "$serve_base/_/health" | python3 -c 'import json,sys; print(sum(a.get("storeRequests", 0) for a in json.load(sys.stdin)["archives"]))'; }
curl -sf -o /dev/null "$serve_base/tiles_pmtiles/6/33/20.png"; curl -sf -o /dev/null "$serve_base/tiles_tilepack/6/33/20.png"
before="$(store_requests)"
echo "/tiles_pmtiles/6/33/20.png" > "$work/one.txt"; echo "/tiles_tilepack/6/33/20.png" >> "$work/one.txt"
read -r c_rps c_p99 <<< "$(run "$work/one.txt" "$serve_base")"
after="$(store_requests)"
printf "  a repeated tile (--cache-size 64): %.0f requests/s, p99 %.2f ms, %d requests to the store (goal 0)\n" "$c_rps" "$c_p99" "$((after - before))"
kill "$serve_pid"; wait "$serve_pid" 2>/dev/null || true
fi

# --- 2. upload -----------------------------------------------------------------------------
# A PMTiles of about SIZE_MB: zooms 0-13 over western Europe, tiles of 1-5 KiB of noise behind
# a PNG signature (nothing decodes them), written with Python's pmtiles (or BIG_PMTILES, one an
# earlier run made: it takes minutes).
if [ -n "${BIG_PMTILES:-}" ]; then ln -s "$(realpath "$BIG_PMTILES")" "$work/big.pmtiles"; else
python3 - "$work/big.pmtiles" "$size_mb" <<'PY'
import math, os, random, sys
from pmtiles.tile import zxy_to_tileid, TileType, Compression
from pmtiles.writer import Writer
path, size_mb = sys.argv[1], int(sys.argv[2])
west, south, east, north = -5.0, 42.0, 15.0, 55.0
def tile_x(lon, z): return int((lon + 180) / 360 * (1 << z))
def tile_y(lat, z):
    r = math.radians(lat); return int((1 - math.log(math.tan(r) + 1 / math.cos(r)) / math.pi) / 2 * (1 << z))
ids = []
for z in range(14):
    for x in range(tile_x(west, z), tile_x(east, z) + 1):
        for y in range(tile_y(north, z), tile_y(south, z) + 1):
            ids.append(zxy_to_tileid(z, x, y))
ids.sort()
mean = size_mb * 1024 * 1024 // len(ids)
rng = random.Random(33)
noise = os.urandom(1 << 20)
with open(path, "wb") as f:
    w = Writer(f)
    for tile_id in ids:
        n = max(64, int(mean * rng.uniform(0.5, 1.5)))
        start = rng.randrange(0, len(noise) - n)
        w.write_tile(tile_id, b"\x89PNG\r\n\x1a\n" + noise[start:start + n - 8])
    w.finalize({"tile_type": TileType.PNG, "tile_compression": Compression.NONE, "min_lon_e7": int(west * 1e7),
                "min_lat_e7": int(south * 1e7), "max_lon_e7": int(east * 1e7), "max_lat_e7": int(north * 1e7),
                "center_zoom": 10, "center_lon_e7": int(2.35e7), "center_lat_e7": int(48.85e7)},
               {"name": "bench-s3", "format": "png"})
print(f"  {len(ids)} tiles")
PY
fi
bytes="$(stat -L -c %s "$work/big.pmtiles")"
seconds() { local s e; s="$(date +%s.%N)"; "$@" >/dev/null 2>"$work/timed.err" || { cat "$work/timed.err"; exit 1; }; e="$(date +%s.%N)"; echo "$e - $s" | bc -l; }
if wants upload; then
echo "2. upload of a $((bytes >> 20)) MiB PMTiles (SIZE_MB=$size_mb) to moto, $rounds rounds, the two taking turns at going first"
ratios_up=""
for r in $(seq "$rounds"); do
  upload_aws() { aws_s="$(seconds aws s3 cp --only-show-errors --cli-read-timeout 600 "$work/big.pmtiles" "s3://tiles/upload/aws-$r.pmtiles")"; }
  upload_tilepack() { tp_s="$(seconds "$bin/tilepack" upload "$work/big.pmtiles" "s3://tiles/upload/tilepack-$r.pmtiles" --force --quiet)"; }
  if [ $((r % 2)) -eq 1 ]; then upload_aws; upload_tilepack; first=aws; else upload_tilepack; upload_aws; first=tilepack; fi
  ratio="$(echo "$tp_s / $aws_s" | bc -l)"
  printf "  round %s (%s first): aws s3 cp %.2f s; tilepack upload %.2f s: %.2fx (load %s)\n" "$r" "$first" "$aws_s" "$tp_s" "$ratio" "$(cut -d' ' -f1-3 /proc/loadavg)"
  ratios_up+="$ratio "
  aws s3 rm "s3://tiles/upload/aws-$r.pmtiles" >/dev/null; aws s3 rm "s3://tiles/upload/tilepack-$r.pmtiles" >/dev/null
done
printf "  median: tilepack upload %.2fx aws s3 cp's time (goal <= 1.3x)\n" "$(echo $ratios_up | median)"
fi

# --- 3. remote extract ---------------------------------------------------------------------
if wants extract; then
# nginx serves the file over plain HTTP and, on another port, stands in front of moto; its log
# counts requests and body bytes of both the same way.
aws s3 cp "$work/big.pmtiles" s3://tiles/extract/big.pmtiles >/dev/null
plain_port="$(free_port)"; proxy_port="$(free_port)"
user_line=""; [ "$(id -u)" -eq 0 ] && user_line="user root;"
cat > "$work/nginx.conf" <<NGINX
$user_line
worker_processes 1;
daemon off;
pid $work/nginx.pid;
error_log $work/nginx-error.log;
events { worker_connections 256; }
http {
  log_format counted '\$server_port \$status \$body_bytes_sent';
  access_log $work/access.log counted;
  types { application/octet-stream pmtiles; }
  server { listen 127.0.0.1:$plain_port; root $work; }
  server {
    listen 127.0.0.1:$proxy_port;
    client_max_body_size 0;
    location / { proxy_pass http://127.0.0.1:$moto_port; proxy_set_header Host \$http_host; proxy_buffering off; }
  }
}
NGINX
nginx -c "$work/nginx.conf" -p "$work" &
pids+=($!)
wait_port "$plain_port"; wait_port "$proxy_port"
city="2.22,48.81,2.47,48.91"   # Paris
: > "$work/access.log"
AWS_ENDPOINT_URL="http://127.0.0.1:$proxy_port" "$bin/tilepack" extract s3://tiles/extract/big.pmtiles "$work/city-s3.pmtiles" --bbox "$city" --force --quiet
"$bin/tilepack" extract "http://127.0.0.1:$plain_port/big.pmtiles" "$work/city-http.pmtiles" --bbox "$city" --force --quiet
sleep 0.5
cmp "$work/city-s3.pmtiles" "$work/city-http.pmtiles" || { echo "the two extracts differ"; exit 1; }
count() { awk -v p="$1" '$1 == p {n++; b += $3} END {printf "%d %d", n, b}' "$work/access.log"; }
read -r s3_requests s3_bytes <<< "$(count "$proxy_port")"
read -r http_requests http_bytes <<< "$(count "$plain_port")"
echo "3. extract of Paris (--bbox $city) from the $((bytes >> 20)) MiB PMTiles, $(stat -c %s "$work/city-s3.pmtiles") bytes out"
printf "  s3:// %d requests, %d bytes; plain http %d requests, %d bytes: requests %.2fx, bytes %.2fx (goal <= 1.2x)\n" \
  "$s3_requests" "$s3_bytes" "$http_requests" "$http_bytes" "$(echo "$s3_requests / $http_requests" | bc -l)" "$(echo "$s3_bytes / $http_bytes" | bc -l)"
fi
echo "load after: $(uptime | sed 's/.*load average: //')"
rm -rf "$work"
