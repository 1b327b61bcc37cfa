#!/usr/bin/env python3
"""The PyPI `pmtiles` package (the PMTiles reference implementation in Python) as a witness for
tilepack's PMTiles tests: it reads an archive tilepack wrote, or writes one for tilepack to read.

  reference.py dump ARCHIVE.pmtiles        one JSON object: header, metadata, and every tile as
                                           "z/x/y": [length, crc32] (XYZ rows)
  reference.py write SOURCE.mbtiles OUT    OUT.pmtiles written by pmtiles.convert.mbtiles_to_pmtiles
  reference.py version                     the pmtiles package version
"""
import json
import sys
import zlib


def dump(path):
    from pmtiles.reader import Reader, MmapSource, all_tiles

    with open(path, "rb") as f:
        source = MmapSource(f)
        reader = Reader(source)
        header = reader.header()
        metadata = reader.metadata()
        tiles = {}
        for (z, x, y), data in all_tiles(source):
            key = f"{z}/{x}/{y}"
            if key in tiles:
                raise SystemExit(f"tile {key} listed twice")
            tiles[key] = [len(data), zlib.crc32(data)]
    header = {k: (v.value if hasattr(v, "value") else v) for k, v in header.items()}
    json.dump({"header": header, "metadata": metadata, "tiles": tiles}, sys.stdout, sort_keys=True)


def write(source, out):
    from pmtiles.convert import mbtiles_to_pmtiles

    mbtiles_to_pmtiles(source, out, None)


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "version":
        from importlib.metadata import version

        print(version("pmtiles"))
    elif len(sys.argv) == 3 and sys.argv[1] == "dump":
        dump(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "write":
        write(sys.argv[2], sys.argv[3])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
