#!/usr/bin/env bash
# Issue 45's remote goal: a verified remote extract (`extract URL OUT --key`, Specs/signing.md
# §7.1) against the unverified one, from nginx on loopback (a plain static server: single and
# multiple byte ranges), counted in nginx's access log: the requests and bytes of the archive and
# of its .tpsig; the sidecar's bytes split into its locator (header, signed root, fences, tile ids)
# and its hashes; and the hashes against the minimal multi-leaf proof of the same leaves, computed
# by the independent verifier (tools/verify_signed.py --minimal-proof). The verified extract runs
# twice: against nginx as it is (several ranges a request: a batch of ranges is one request), and
# against the same files under /one/, where nginx has `max_ranges 1` (one range a request, as S3:
# tilepack then joins ranges up to 32 KiB apart). Figures, not timings: the counts do not drift
# with load.
#   ARCHIVE=path.pmtiles KEY=publisher.pub [AREAS="W,S,E,N ..."] tools/bench-verified-extract.sh
# ARCHIVE defaults to bench-sign.sh's million-tile PMTiles (signed with its bench key) under
# $BENCH_WORK (default /tmp/tilepack-bench); TILEPACK_BIN a release build, else built here.
set -euo pipefail
cd "$(dirname "$0")/.."
work="${BENCH_WORK:-/tmp/tilepack-bench}"
archive="${ARCHIVE:-$work/sign/v1-1000000.pmtiles}"
key="${KEY:-$work/sign/bench.pub}"
areas="${AREAS:-16.18,48.11,16.58,48.32 15.5,47.5,17.5,48.8}"
if [ -n "${TILEPACK_BIN:-}" ]; then tilepack="$TILEPACK_BIN"; else
    swift build -c release --product tilepack
    tilepack="$(swift build -c release --show-bin-path)/tilepack"
fi
[ -f "$archive.tpsig" ] || { echo "no $archive.tpsig: sign it first (tools/bench-sign.sh does)" >&2; exit 1; }
run="$(mktemp -d /tmp/tilepack-bench-vx.XXXXXX)"
trap 'kill "$(cat "$run/nginx.pid" 2>/dev/null)" 2>/dev/null || true; rm -rf "$run"' EXIT
mkdir -p "$run/www" "$run/logs"
ln -s "$(readlink -f "$archive")" "$run/www/world.pmtiles"
ln -s "$(readlink -f "$archive.tpsig")" "$run/www/world.pmtiles.tpsig"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat > "$run/nginx.conf" <<EOF
worker_processes 1; daemon on; pid $run/nginx.pid; error_log $run/logs/error.log;
events { worker_connections 64; }
http {
  log_format ranges '\$uri|\$http_range|\$status|\$body_bytes_sent';
  access_log $run/logs/access.log ranges;
  client_body_temp_path $run; proxy_temp_path $run; fastcgi_temp_path $run; uwsgi_temp_path $run; scgi_temp_path $run;
  server { listen 127.0.0.1:$port; root $run/www; disable_symlinks off; etag on;
    location /one/ { alias $run/www/; max_ranges 1; } }
}
EOF
nginx -c "$run/nginx.conf" -p "$run"
for area in $areas; do
    : > "$run/logs/access.log.plain"
    for mode in plain verified single; do
        : > "$run/logs/access.log"
        kill -USR1 "$(cat "$run/nginx.pid")"
        rm -f "$run/out-$mode.mbtiles" "$run/out-$mode.mbtiles.tpsig"
        extra=(); [ "$mode" != plain ] && extra=(--key "$key")
        prefix=""; [ "$mode" = single ] && prefix="/one"
        "$tilepack" extract "http://127.0.0.1:$port$prefix/world.pmtiles" "$run/out-$mode.mbtiles" --bbox "$area" -q "${extra[@]}" > /dev/null
        sleep 0.2   # nginx writes its log line after the response
        cp "$run/logs/access.log" "$run/logs/$mode.log"
    done
    minimal=$(python3 tools/verify_signed.py --minimal-proof "$archive.tpsig" "$run/out-verified.mbtiles")
    python3 - "$run/logs/plain.log" "$run/logs/verified.log" "$archive.tpsig" "$minimal" "$area" "$run/logs/single.log" <<'PY'
import json, struct, sys
plain, verified, sidecar, minimal, area, single = sys.argv[1:7]
minimal = json.loads(minimal)
with open(sidecar, "rb") as f:
    head = f.read(32)
c, _, n, _ = struct.unpack_from("<IIQQ", head, 8)
ids_start = 32 + (c + 7) // 8 * 8 + 8 * ((n + 255) // 256)
hashes_start = ids_start + 8 * n
def load(path):
    rows = []
    for line in open(path):
        uri, rng, status, sent = line.rstrip("\n").split("|")
        spans = []
        if rng.startswith("bytes="):
            for part in rng[6:].split(","):
                a, b = part.strip().split("-")
                spans.append((int(a), int(b) + 1))
        rows.append((uri, spans, int(sent), status))
    return rows
def overlap(spans, lo, hi):
    return sum(max(0, min(b, hi) - max(a, lo)) for a, b in spans)
p, v = load(plain), load(verified)
archive_p = [r for r in p if not r[0].endswith(".tpsig")]
archive_v = [r for r in v if not r[0].endswith(".tpsig")]
side = [r for r in v if r[0].endswith(".tpsig")]
side_bytes = sum(r[2] for r in side)
locator = sum(overlap(r[1], 0, hashes_start) for r in side)
hashes = sum(overlap(r[1], hashes_start, 1 << 62) for r in side)
floor = 32 * minimal["hashes"]
print("area %s: %d tiles of a tree of %d" % (area, minimal["leaves"], n))
print("  requests: verified %d (archive %d + sidecar %d), unverified %d; allowed %d (+2 + one per zoom, 11 zooms)"
      % (len(v), len(archive_v), len(side), len(p), len(p) + 2 + 11))
print("  archive bytes: verified %d, unverified %d (ratio %.3f)" % (sum(r[2] for r in archive_v), sum(r[2] for r in archive_p),
      sum(r[2] for r in archive_v) / max(1, sum(r[2] for r in archive_p))))
print("  sidecar bytes %d: locator %d (header, root, fences, tile ids), hashes %d" % (side_bytes, locator, hashes))
print("  proof: %d hashes = %d bytes (the minimal multi-leaf proof, tools/verify_signed.py); hashes read / minimal = %.2fx (goal <= 1.2x); all sidecar bytes / minimal = %.2fx"
      % (minimal["hashes"], floor, hashes / floor, side_bytes / floor))
s = load(single)
side_s = [r for r in s if r[0].endswith(".tpsig")]
archive_s = [r for r in s if not r[0].endswith(".tpsig")]
hashes_s = sum(overlap(r[1], hashes_start, 1 << 62) for r in side_s)
print("  one range a request (nginx max_ranges 1, as S3): requests %d (archive %d + sidecar %d), allowed %d; hash bytes %d = %.2fx the minimal proof; sidecar bytes %d"
      % (len(s), len(archive_s), len(side_s), len(p) + 2 + 11, hashes_s, hashes_s / floor, sum(r[2] for r in side_s)))
whole = [r for r in side_s if r[3] == "200"]
print("    of which %d answered with the whole file (the multi-range probe, refused): %d bytes sent before it was cut off"
      % (len(whole), sum(r[2] for r in whole)))
PY
done
