#!/usr/bin/env bash
# Writes samples/sample-utm.tif: a 1,200 x 1,000 px synthetic aerial-like RGB image, 2 m pixels in
# UTM zone 33N (EPSG:32633, near Vienna), a JPEG-compressed Cloud-Optimized GeoTIFF of about
# 330 KB: README's worked example of `tilepack tile` and the tiler's tests cut it.
#   bash tools/make-sample-raster.sh
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 tools/make-sample-raster.py 1200 1000 "$work/sample.ppm"
gdal_translate -q -of COG -a_srs EPSG:32633 -a_ullr 600000 5342000 602400 5340000 \
  -co COMPRESS=JPEG -co QUALITY=80 "$work/sample.ppm" samples/sample-utm.tif
ls -l samples/sample-utm.tif
