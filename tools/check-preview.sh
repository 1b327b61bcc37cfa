#!/usr/bin/env bash
# The browser check of `tilepack serve`'s preview page (issue 16): headless Chromium opens the
# page of the sample archive, as a bundle and as MBTiles, at zooms 2 and 3, takes a screenshot, and
# tools/check-preview.py checks that every tile is drawn where it belongs (the sample tiles draw
# their own z/x/y). Run after `swift build` and `swift build --package-path server` (or `swift test`
# in both), from the repository root:
#   bash tools/check-preview.sh [OUTPUT_DIR]
# Without chromium it skips, except in CI (CI=true), where it fails.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-$(mktemp -d)}"
mkdir -p "$out"
browser="$(command -v chromium || command -v chromium-browser || true)"
if [ -z "$browser" ]; then
  if [ "${CI:-}" = "true" ]; then echo "FAIL: chromium is not installed (bash .ci/run --deps-only installs it)"; exit 1; fi
  echo "SKIP: chromium is not installed (apt-get install chromium)"; exit 0
fi
bin="$(swift build --show-bin-path)"
[ -x "$bin/tilepack" ] || swift build --product tilepack >/dev/null
# The server is a package of its own (server/).
serve_bin="$(swift build --package-path server --show-bin-path)"
[ -x "$serve_bin/tilepack-serve" ] || swift build --package-path server --product tilepack-serve >/dev/null

# The sample as MBTiles too (TMS rows in the file: the flip must happen in storage, once).
"$bin/tilepack" import samples/tiles "$out/sample-mbtiles.mbtiles" --force --quiet >/dev/null
# Where the page opens without a #zoom/lat/lon (issue 29 item 9): a city-sized archive without a
# center fills the window (within its zooms: 4), one with a center opens at the center's zoom.
for case in "sample-city||4" "sample-centered|-0.1,51.5,3|3"; do
  IFS='|' read -r name center zoom <<< "$case"
  cp "$out/sample-mbtiles.mbtiles" "$out/$name.mbtiles"
  sqlite3 "$out/$name.mbtiles" "DELETE FROM metadata WHERE name IN ('bounds','center','minzoom','maxzoom');
    INSERT INTO metadata VALUES ('bounds','-0.2,51.45,0.05,51.55'),('minzoom','0'),('maxzoom','4');"
  [ -n "$center" ] && sqlite3 "$out/$name.mbtiles" "INSERT INTO metadata VALUES ('center','$center');"
done
"$serve_bin/tilepack-serve" --port 0 samples/sample.tilepack "$out/sample-mbtiles.mbtiles" "$out/sample-city.mbtiles" \
  "$out/sample-centered.mbtiles" >"$out/serve.out" 2>"$out/serve.err" &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 100); do [ -s "$out/serve.out" ] && break; sleep 0.1; done
base="$(head -1 "$out/serve.out" | sed -n 's/^serving //p')"
[ -n "$base" ] || { echo "FAIL: tilepack-serve did not start"; cat "$out/serve.err"; exit 1; }

status=0
for archive in sample sample-mbtiles; do
  for zoom in 2 3; do
    shot="$out/$archive-z$zoom.png"
    rm -f "$shot"
    timeout 120 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --force-device-scale-factor=1 \
      --window-size=1024,1024 --virtual-time-budget=10000 --screenshot="$shot" "${base}${archive}/#$zoom/0/0" \
      >"$out/chromium.log" 2>&1 || true
    [ -s "$shot" ] || { echo "FAIL: no screenshot of $archive at zoom $zoom"; tail -5 "$out/chromium.log"; status=1; continue; }
    echo "== $archive, zoom $zoom ($shot)"
    python3 tools/check-preview.py "$shot" samples/tiles "$zoom" 1024 || status=1
  done
done
for case in "sample-city|4" "sample-centered|3"; do
  IFS='|' read -r name zoom <<< "$case"
  timeout 120 "$browser" --headless --no-sandbox --disable-gpu --window-size=1024,1024 --virtual-time-budget=10000 \
    --dump-dom "${base}${name}/" >"$out/$name.html" 2>"$out/chromium.log" || true
  zooms="$(grep -o "/$name/[0-9]*/" "$out/$name.html" | sort -u | tr '\n' ' ')"
  if [ "$zooms" = "/$name/$zoom/ " ]; then
    echo "== $name opens at zoom $zoom"
  else
    echo "FAIL: $name opened with tiles of ${zooms:-no zoom}, not only zoom $zoom"; status=1
  fi
done
[ $status -eq 0 ] && echo "preview check passed" || echo "preview check FAILED"
exit $status
