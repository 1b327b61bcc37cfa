#!/usr/bin/env python3
# The pixel checks of tools/bench-tile.sh (issue 32), read by GDAL (Debian's python3-gdal and
# numpy): tilepack's deepest zoom against gdal2tiles' and against references made by GDAL's warper
# on the tile's own grid. Run by bench-tile.sh; runnable alone on the trees a run keeps:
#
#   python3 tools/bench-tile-pixels.py INPUT.tif GDAL2TILES-TREE TILEPACK-TREE ZOOM
#
# gdal2tiles (3.6) warps the whole source by nearest neighbour into a virtual raster at the
# source's resolution, reads for each tile the window of that raster rounded to whole source
# pixels (geo_query), resized by nearest neighbour to 2x the tile (-r bilinear), and halves it by
# GDAL's bilinear warp (scale_query_to_tile): its tiles are shifted by up to half a source pixel
# and stretched by up to one. So the goal (median 40 dB, lowest 33) is printed against
# three references, over the tiles both tilers drew and the pixels both draw opaque:
#   1. gdal2tiles' tiles, as the issue words it;
#   2. gdal2tiles' own resampling on the tile's grid: the tile's bounds warped by nearest neighbour
#      to 2x the tile, halved by GDAL's bilinear warp as scale_query_to_tile does: gdal2tiles'
#      pipeline without the rounding to whole source pixels (the fair reading of the goal);
#   3. GDAL's -r average warp of the tile (each pixel the area-weighted mean of the source pixels
#      under it), a reference neither tiler's pipeline is, with gdal2tiles' own score beside.
# And, to show where the difference to gdal2tiles comes from: the warp (GDAL bilinear, one pass)
# of exactly the rounded window gdal2tiles reads, against gdal2tiles.
import os
import sys

import numpy as np
from osgeo import gdal, osr

gdal.UseExceptions()
source, ref, ours, z = gdal.Open(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
E = 20037508.342789244
res = 2 * E / (256 * 2**z)


def tiles(root):
    out = {}
    for x in os.listdir(os.path.join(root, str(z))):
        for f in os.listdir(os.path.join(root, str(z), x)):
            out[(int(x), int(f.split(".")[0]))] = os.path.join(root, str(z), x, f)
    return out


def rgba(path):
    a = gdal.Open(path).ReadAsArray().astype(np.float64)
    return np.concatenate([a, np.full((1,) + a.shape[1:], 255.0)]) if a.shape[0] == 3 else a


def size(root):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(root) for f in fs if f.endswith(".png"))


def psnr(x, y):
    both = (x[3] == 255) & (y[3] == 255)
    if both.sum() == 0:
        return None
    mse = ((np.round(x[:3]) - np.round(y[:3])) ** 2)[:, both].mean()
    return 99.0 if mse == 0 else 10 * np.log10(255**2 / mse)


def warp(bounds, alg, side=256):
    d = gdal.Warp("", source, format="MEM", dstSRS="EPSG:3857", outputBounds=bounds, width=side, height=side,
                  resampleAlg=alg, dstAlpha=True)
    return d


def gdal2tiles_resampling(bounds):
    # scale_query_to_tile for -r bilinear: the 2x query given a unit-free geotransform, warped to
    # the tile by GDAL's bilinear kernel (ReprojectImage), alpha band included.
    warped = warp(bounds, "near", 512)
    query = gdal.GetDriverByName("MEM").Create("", 512, 512, warped.RasterCount)
    query.WriteRaster(0, 0, 512, 512, warped.ReadRaster())
    query.SetGeoTransform((0.0, 0.5, 0.0, 0.0, 0.0, 0.5))
    tile = gdal.GetDriverByName("MEM").Create("", 256, 256, query.RasterCount)
    tile.SetGeoTransform((0.0, 1.0, 0.0, 0.0, 0.0, 1.0))
    gdal.ReprojectImage(query, tile, None, None, gdal.GRA_Bilinear)
    return tile.ReadAsArray().astype(np.float64)


def figures(values):
    values = sorted(v for v in values if v is not None)
    return f"median {values[len(values) // 2]:.1f} dB, lowest {values[0]:.1f} dB ({len(values)} tiles)"


a, b = tiles(ref), tiles(ours)
ra = {k for k, p in a.items() if rgba(p)[3].max() > 0}
rb = set(b)
common = sorted(ra & rb)
print(f"deepest zoom {z}: {len(ra)} non-blank tiles from gdal2tiles, {len(rb)} from tilepack, {len(common)} in both, "
      f"{len(ra - rb)} only in gdal2tiles', {len(rb - ra)} only in tilepack's")

mercator = osr.SpatialReference()
mercator.ImportFromEPSG(3857)
vrt = gdal.AutoCreateWarpedVRT(source, None, mercator.ExportToWkt())
gt = vrt.GetGeoTransform()
# Against gdal2tiles' tiles: every tile in both. Against the warps (a few tenths of a second of
# CPU a tile): up to 400 of them, spread evenly over the zoom.
direct = [psnr(rgba(b[k]), rgba(a[k])) for k in common]
rows = []
for x, y in common[:: -(-len(common) // 400)]:
    ulx, uly, lrx, lry = -E + x * 256 * res, E - y * 256 * res, -E + (x + 1) * 256 * res, E - (y + 1) * 256 * res
    bounds = (ulx, lry, lrx, uly)
    g, t = rgba(a[(x, y)]), rgba(b[(x, y)])
    average = warp(bounds, "average").ReadAsArray().astype(np.float64)
    # gdal2tiles' geo_query: the window of its warped VRT it reads for this tile.
    rx, ry = int((ulx - gt[0]) / gt[1] + 0.001), int((uly - gt[3]) / gt[5] + 0.001)
    rxsize, rysize = max(1, int((lrx - ulx) / gt[1] + 0.5)), max(1, int((lry - uly) / gt[5] + 0.5))
    window = (gt[0] + rx * gt[1], gt[3] + (ry + rysize) * gt[5], gt[0] + (rx + rxsize) * gt[1], gt[3] + ry * gt[5])
    rows.append((psnr(t, gdal2tiles_resampling(bounds)), psnr(t, average), psnr(g, average),
                 psnr(warp(window, "bilinear").ReadAsArray().astype(np.float64), g)))
columns = [direct] + list(zip(*rows))
print("PSNR of tilepack's deepest zoom (goal: median >= 40 dB, lowest >= 33 dB), over the pixels both draw opaque:")
print(f"  1. against gdal2tiles' tiles (the issue's wording): {figures(columns[0])}")
print(f"  2. against gdal2tiles' resampling on the tile's own grid (nearest warp to 2x, GDAL bilinear to 1x;"
      f" gdal2tiles without its rounding to whole source pixels): {figures(columns[1])}")
print(f"  3. against GDAL's -r average warp of the tile: {figures(columns[2])}; gdal2tiles' tiles: {figures(columns[3])}")
print(f"  the warp of the rounded window gdal2tiles reads, against gdal2tiles (where 1 differs): {figures(columns[4])}")
ga, gb = size(ref), size(ours)
print(f"PNG bytes: tilepack {gb:,} vs gdal2tiles {ga:,}: {gb / ga:.2f}x (goal <= 1.1x)")
