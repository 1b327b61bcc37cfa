"""An independent reader of MapLibre Native offline databases, written from maplibre-native's
offline_schema.sql and offline_database.cpp (not from tilepack's writer): the witness of
tilepack's `export --maplibre-offline` tests.

    python3 tools/maplibre/read_offline.py PACK.db  ->  JSON: the region, style, TileJSON, tiles

It checks what MapLibre Native checks or relies on, and exits 1 naming the first fault:
user_version 6 (anything else is deleted and recreated); the five tables with their columns;
each region's definition JSON (style_url, bounds [s, w, n, e], min_zoom, pixel_ratio); the style
resource (kind 1) under the region's style_url; for each source of the style, its TileJSON
resource (kind 2) when it has a url, and its tiles template; every tile of the region keyed by a
template the style reaches. Tiles are reported as "z/x/y" -> sha256 of the data (inflated with
zlib when `compressed` is 1, as util::decompress does).
"""
import hashlib
import json
import sqlite3
import sys
import zlib

SCHEMA = {
    "resources": ["id", "url", "kind", "expires", "modified", "etag", "data", "compressed", "accessed", "must_revalidate"],
    "tiles": ["id", "url_template", "pixel_ratio", "z", "x", "y", "expires", "modified", "etag", "data", "compressed",
              "accessed", "must_revalidate"],
    "regions": ["id", "definition", "description"],
    "region_resources": ["region_id", "resource_id"],
    "region_tiles": ["region_id", "tile_id"],
}


def fail(message):
    print(message, file=sys.stderr)
    sys.exit(1)


def body(data, compressed):
    return zlib.decompress(data) if compressed else data


def main():
    db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version != 6:
        fail(f"user_version is {version}, MapLibre Native wants 6 (it deletes any other)")
    for table, columns in SCHEMA.items():
        found = [row[1] for row in db.execute(f"PRAGMA table_info({table})")]
        if found != columns:
            fail(f"table {table} has columns {found}, expected {columns}")
    regions = db.execute("SELECT id, definition, description FROM regions").fetchall()
    if len(regions) != 1:
        fail(f"{len(regions)} regions")
    region_id, definition, description = regions[0]
    definition = json.loads(definition)
    for key in ("style_url", "bounds", "min_zoom", "pixel_ratio"):
        if key not in definition:
            fail(f"the region definition has no {key}")
    south, west, north, east = definition["bounds"]
    if not (-90 <= south <= north <= 90 and -180 <= west <= east <= 180):
        fail(f"bounds {definition['bounds']} are not [south, west, north, east]")
    resources = {url: (kind, body(data, compressed)) for url, kind, data, compressed in db.execute(
        "SELECT url, kind, data, compressed FROM resources JOIN region_resources ON resource_id = id WHERE region_id = ?",
        (region_id,))}
    if definition["style_url"] not in resources or resources[definition["style_url"]][0] != 1:
        fail("the style is not stored under the region's style_url as kind 1")
    style = json.loads(resources[definition["style_url"]][1])
    templates = {}
    tilejsons = {}
    for name, source in style.get("sources", {}).items():
        if "url" in source:
            if source["url"] not in resources or resources[source["url"]][0] != 2:
                fail(f"source {name}'s TileJSON {source['url']} is not stored as kind 2")
            tilejson = json.loads(resources[source["url"]][1])
            tilejsons[name] = tilejson
            templates[tilejson["tiles"][0]] = name
        elif "tiles" in source:
            templates[source["tiles"][0]] = name
    tiles = {}
    for template, ratio, z, x, y, data, compressed in db.execute(
        "SELECT url_template, pixel_ratio, z, x, y, data, compressed FROM tiles JOIN region_tiles ON tile_id = id WHERE region_id = ?",
        (region_id,)):
        if template not in templates:
            fail(f"tile {z}/{x}/{y} is keyed by {template}, which no source of the style uses")
        if ratio != definition["pixel_ratio"]:
            fail(f"tile {z}/{x}/{y} has pixel ratio {ratio}, the region {definition['pixel_ratio']}")
        tiles[f"{z}/{x}/{y}"] = hashlib.sha256(body(data, compressed)).hexdigest()
    json.dump({"definition": definition, "style": style, "tilejsons": tilejsons, "templates": sorted(templates),
               "description": description.decode() if description else None, "tiles": tiles}, sys.stdout)


main()
