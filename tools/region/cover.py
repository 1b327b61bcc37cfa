"""The tiles that share area with a GeoJSON region, computed independently of tilepack: the
witness of tilepack's RegionCover tests (Tests/TilepackCoreTests/RegionCoverTests.swift).

    python3 tools/region/cover.py AREA.geojson MINZOOM MAXZOOM  ->  {"z": [[x, y], ...], ...}

Tile bounds come from mercantile, areas from shapely (GEOS), in longitude/latitude, where a
GeoJSON edge is straight. A tile is in the cover when its intersection with the region has an
area above zero. The region is taken as it is written (longitudes past 180 allowed) and tested in
three copies, shifted by -360, 0 and +360 degrees, so a region across the antimeridian covers
tiles on both sides. Needs `python3 -m pip install mercantile==1.2.1 shapely==2.2.0`.
"""
import json
import sys

import mercantile
from shapely.affinity import translate
from shapely.geometry import box, shape
from shapely.ops import unary_union
from shapely.prepared import prep


def geometries(document):
    kind = document["type"]
    if kind == "FeatureCollection":
        for feature in document["features"]:
            yield from geometries(feature)
    elif kind == "Feature":
        yield from geometries(document["geometry"])
    elif kind == "GeometryCollection":
        for geometry in document["geometries"]:
            yield from geometries(geometry)
    else:
        yield shape(document)


def main():
    path, low, high = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    with open(path) as f:
        region = unary_union(list(geometries(json.load(f))))
    world = box(-180, -85.0511287798066, 180, 85.0511287798066)
    result = {}
    for zoom in range(low, high + 1):
        tiles = set()
        for shift in (-360, 0, 360):
            piece = translate(region, xoff=shift).intersection(world)
            if piece.is_empty or piece.area == 0:
                continue
            prepared = prep(piece)
            west, south, east, north = piece.bounds
            for tile in mercantile.tiles(west, south, east, north, zooms=zoom):
                b = mercantile.bounds(tile)
                cell = box(b.west, b.south, b.east, b.north)
                if not prepared.intersects(cell):
                    continue
                if prepared.contains(cell) or piece.intersection(cell).area > 0:
                    tiles.add((tile.x, tile.y))
        result[str(zoom)] = sorted(tiles)
    json.dump(result, sys.stdout)


main()
