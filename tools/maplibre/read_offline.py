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

Glyphs and sprites, as offline_download.cpp asks for them: for the style's `glyphs` template, each
font stack of a symbol layer with a `text-field` (its `text-font`, the literal stacks of an
expression, or "Open Sans Regular,Arial Unicode MS Regular"), every 256-glyph range but the CJK
ideograph and Hangul ones when `include_ideographs` is false, the stack percent-encoded as
util::percentEncode does; for each sprite, `<base>[@2x].json` (kind 6) and `.png` (kind 5), the
suffix before a query. Each stored one must hold what its kind says (a glyph PBF starting with its
fontstack field, a JSON object, a PNG); reported as "glyphs" / "sprites": url -> sha256, and the
glyph URLs not stored as "missing_glyphs".
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
    glyphs, sprites, missing = assets(style, definition, resources)
    json.dump({"definition": definition, "style": style, "tilejsons": tilejsons, "templates": sorted(templates),
               "description": description.decode() if description else None, "tiles": tiles,
               "glyphs": glyphs, "sprites": sprites, "missing_glyphs": missing}, sys.stdout)


# The style specification's expression operators that can begin a text-font value.
OPERATORS = {"literal", "array", "at", "case", "coalesce", "concat", "config", "downcase", "feature-state", "format",
             "geometry-type", "get", "global-state", "has", "id", "in", "index-of", "interpolate", "let", "match",
             "properties", "slice", "step", "string", "to-string", "upcase", "var", "zoom"}


def font_stacks(value):
    """A text-font value's font stacks: an array of names, else the ["literal", [names]] of an expression."""
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value) and value[0] not in OPERATORS:
        return {",".join(value)}

    def literals(node):
        if isinstance(node, list) and len(node) == 2 and node[0] == "literal" and isinstance(node[1], list):
            return {",".join(node[1])}
        return set().union(*(literals(child) for child in node[1:])) if isinstance(node, list) else set()
    return literals(value)


def percent_encode(text):
    unreserved = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~")
    return "".join(chr(b) if b in unreserved else "%%%02X" % b for b in text.encode())


def assets(style, definition, resources):
    glyphs, sprites, missing = {}, {}, []
    if "glyphs" in style:
        stacks = set()
        for layer in style.get("layers", []):
            layout = layer.get("layout", {})
            if layer.get("type") == "symbol" and "text-field" in layout:
                stacks |= font_stacks(layout["text-font"]) if "text-font" in layout else {
                    "Open Sans Regular,Arial Unicode MS Regular"}
        for stack in stacks:
            for i in range(256):
                first = i * 256
                ideographs = (first <= 0x9FFF and first + 255 >= 0x4E00) or (first <= 0xD7AF and first + 255 >= 0xAC00)
                if ideographs and not definition.get("include_ideographs", False):
                    continue
                url = style["glyphs"].replace("{fontstack}", percent_encode(stack)).replace("{range}", f"{first}-{first + 255}")
                if url not in resources:
                    missing.append(url)
                    continue
                kind, data = resources[url]
                if kind != 4 or (data and data[0] != 0x0A):
                    fail(f"glyphs {url} are kind {kind} or not a glyph PBF")
                glyphs[url] = hashlib.sha256(data).hexdigest()
    bases = [style["sprite"]] if isinstance(style.get("sprite"), str) else [s["url"] for s in style.get("sprite", [])]
    scale = "@2x" if definition["pixel_ratio"] > 1 else ""
    for base in bases:
        path, _, query = base.partition("?")
        for suffix, kind in ((".json", 6), (".png", 5)):
            url = path + scale + suffix + ("?" + query if query else "")
            if url not in resources or resources[url][0] != kind:
                fail(f"sprite {url} is not stored as kind {kind}")
            data = resources[url][1]
            if kind == 6 and not isinstance(json.loads(data), dict) or kind == 5 and not data.startswith(b"\x89PNG\r\n\x1a\n"):
                fail(f"sprite {url} does not hold what its kind says")
            sprites[url] = hashlib.sha256(data).hexdigest()
    return glyphs, sprites, missing


main()
