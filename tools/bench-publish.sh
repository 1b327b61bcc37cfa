#!/usr/bin/env bash
# Publish, then sync from s3:// (issue 44's "from publisher to app in one piece"): two versions of
# a tile tree (bench-lib.sh's tree to zoom ZOOM, default 7: 21,845 tiles; v2 re-renders the tiles
# of one region, the west-north eighth of each zoom's columns and rows (1/64 of the tiles, as
# make-versions re-renders one region), or with CHANGE=scattered every 50th tile in file order,
# deletes zoom ZOOM's column 0 and adds 256 tiles one zoom deeper) published into moto's
# S3 server on loopback (PyPI moto[server]) the two ways a publisher does it:
#   - `tilepack import TREE s3://bench/import/v2.EXT --index` (built, uploaded, its index after it);
#   - `tilepack import TREE v2.EXT --index` then `tilepack upload v2.EXT s3://bench/upload/v2.EXT`
#     (the archive, then its index beside it);
# then `tilepack sync mine.EXT s3://...` from a copy of v1, first time, no workaround, through
# nginx in front of moto, which counts every byte it sends ($bytes_sent: status lines, headers,
# the index, directories, gaps). Each figure beside its floor in the same run: the changed and
# added tiles' bytes (`tilepack diff`'s tileBytes) plus the index's, as a ratio. Goal: <= 1.15x.
# The synced copy is checked to hold v2's identity. `units` and `unit bytes` are the sync plan's
# (its transfer units, and the bytes they span with their gaps: Specs/updates.md §8.1). `floor`:
# the changed tiles and the index plus one answer's status line and headers (measured: the index
# answer's bytes less the index) for each unit, as a ratio of the same denominator: what any
# transport pays for those units where the server answers one range a request (S3). The units
# are joined only across gaps shorter than a request's headers, so fewer units would cost more.
#   bash tools/bench-publish.sh    (ZOOM=N; CHANGE=region|scattered; TILEPACK_BIN=path: a release build)
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/bench-lib.sh
zoom="${ZOOM:-7}"; change="${CHANGE:-region}"
for tool in nginx python3 moto_server curl bc; do command -v "$tool" >/dev/null || { echo "bench-publish needs $tool (moto[server]: pip)"; exit 1; }; done
tilepack="$(release_tilepack)"
work="$(mktemp -d /tmp/bench-publish.XXXXXX)"; chmod 755 "$work"
echo "machine: $(nproc) cores; load before: $(uptime | sed 's/.*load average: //')"
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 300); do curl -s -o /dev/null "http://127.0.0.1:$1/" && return 0; sleep 0.1; done; echo "nothing on port $1"; exit 1; }

# The two versions as tile trees.
make_bench_tree "$work/v1" "$zoom"
cp -r "$work/v1" "$work/v2"
python3 - "$work/v2" "$zoom" "$change" <<'PY'
import os, shutil, struct, sys, zlib
root, zoom, change = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def chunk(text):
    body = b"tEXt" + text
    return struct.pack(">I", len(body) - 4) + body + struct.pack(">I", zlib.crc32(body) & 0xffffffff)
n = 0
for z in range(zoom + 1):
    for x in range(1 << z):
        for y in range(1 << z):
            n += 1
            edge = max(1, (1 << z) // 8)
            if (n % 50 == 0) if change == "scattered" else (x < edge and y < edge and z >= 3):   # re-rendered: other bytes
                path = f"{root}/{z}/{x}/{y}.png"
                src = open(path, "rb").read()
                open(path, "wb").write(src[:-12] + chunk(f"v2 {z}/{x}/{y} ".encode() * 20) + src[-12:])
shutil.rmtree(f"{root}/{zoom}/0")   # a column deleted
for x in range(16):                 # a deeper zoom over a small area
    for y in range(16):
        os.makedirs(f"{root}/{zoom + 1}/{x}", exist_ok=True)
        shutil.copy(f"{root}/{zoom}/{x // 2 + 1}/{y // 2}.png", f"{root}/{zoom + 1}/{x}/{y}.png")
        with open(f"{root}/{zoom + 1}/{x}/{y}.png", "r+b") as f:
            data = f.read(); f.seek(0); f.write(data[:-12] + chunk(f"deeper {x}/{y}".encode()) + data[-12:])
PY

moto_port="$(free_port)"; proxy_port="$(free_port)"
moto_server -H 127.0.0.1 -p "$moto_port" > "$work/moto.log" 2>&1 &
pids+=($!)
wait_port "$moto_port"
export AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench AWS_REGION=us-east-1
export AWS_ENDPOINT_URL="http://127.0.0.1:$moto_port"
curl -s -X PUT "$AWS_ENDPOINT_URL/bench" >/dev/null
user_line=""; [ "$(id -u)" -eq 0 ] && user_line="user root;"
cat > "$work/nginx.conf" <<NGINX
$user_line
worker_processes 1;
daemon off;
pid $work/nginx.pid;
error_log $work/nginx-error.log;
events { worker_connections 64; }
http {
  log_format counted '\$bytes_sent \$status \$request';
  access_log $work/access.log counted;
  server {
    listen 127.0.0.1:$proxy_port;
    client_max_body_size 0;
    location / { proxy_pass http://127.0.0.1:$moto_port; proxy_set_header Host \$http_host; proxy_buffering off; }
  }
}
NGINX
nginx -c "$work/nginx.conf" -p "$work" &
pids+=($!)
wait_port "$proxy_port"

cd "$work"
printf '%-9s %-8s %8s %10s %12s %8s %9s %6s %10s %8s %s\n' format publish tiles wire "tiles+index" ratio requests units "unit bytes" floor "identity"
for ext in tilepack pmtiles; do
    "$tilepack" import v1 "v1.$ext" --quiet >/dev/null
    "$tilepack" import v2 "v2.$ext" --index --quiet >/dev/null
    "$tilepack" import v2 "s3://bench/import/v2.$ext" --index --quiet >/dev/null
    "$tilepack" upload "v2.$ext" "s3://bench/upload/v2.$ext" >/dev/null
    tilebytes=$("$tilepack" diff "v1.$ext" "v2.$ext" "p-$ext.tppatch" --force --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["tileBytes"])')
    indexbytes=$(stat -c %s "v2.$ext.tpindex")
    want=$("$tilepack" info "v2.$ext" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["identity"])')
    for way in import upload; do
        cp "v1.$ext" "mine.$ext"; rm -f "mine.$ext.tpsync"
        : > access.log
        json=$(AWS_ENDPOINT_URL="http://127.0.0.1:$proxy_port" "$tilepack" sync "mine.$ext" "s3://bench/$way/v2.$ext" --json)
        sleep 0.3
        mode=$(echo "$json" | python3 -c 'import json,sys; print(json.load(sys.stdin)["mode"])')
        fetched=$(echo "$json" | python3 -c 'import json,sys; print(json.load(sys.stdin)["tilesFetched"])')
        units=$(echo "$json" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("planUnits", "-"))')
        unitbytes=$(echo "$json" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("planBytes", "-"))')
        wire=$(awk '{s += $1} END {print s}' access.log)
        requests=$(wc -l < access.log)
        # One answer's status line and headers: the index's answer less the index.
        header=$(awk -v n="$indexbytes" '/tpindex/ {print $1 - n; exit}' access.log)
        got=$("$tilepack" info "mine.$ext" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["identity"])')
        same="differs"; [ "${got%:*}" = "${want%:*}" ] && same="v2's tiles"
        denominator=$((tilebytes + indexbytes))
        # The floor: the changed tiles and the index, plus one answer's headers for each unit.
        floor=$(echo "($denominator + $units * $header) / $denominator" | bc -l)
        printf '%-9s %-8s %8s %10s %12s %7.3fx %9s %6s %10s %7.3fx %s (%s sync)\n' "$ext" "$way" "$fetched" "$wire" "$denominator" \
            "$(echo "$wire / $denominator" | bc -l)" "$requests" "$units" "$unitbytes" "$floor" "$same" "$mode"
    done
done
echo "changes: $change; goal: wire <= 1.15x the changed tiles' bytes plus the index; load after: $(uptime | sed 's/.*load average: //')"
