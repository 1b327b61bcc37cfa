#!/usr/bin/env python3
"""Issue 15's PMTiles benchmark (run it with tools/bench-pmtiles.sh).

1. MBTiles -> PMTiles: `tilepack convert` against the PyPI `pmtiles-convert` on the same
   50,000-tile MBTiles file.
2. Extract of a region from a remote PMTiles on a loopback nginx: `tilepack extract URL out.pmtiles
   --bbox ...` against the PyPI `pmtiles` reader doing the same (each tile of the region looked up
   through `Reader.get` over HTTP range requests, the identical requests it repeats (header, root)
   memoised, the tiles written with the package's writer). Requests are counted in nginx's log.

Contenders alternate, each timed `--runs` times; medians are compared as ratios (reference time /
tilepack time: above 1 means tilepack is faster).

  bench.py --tilepack PATH --work DIR [--mbtiles FILE] [--runs 5] [--bbox W,S,E,N]
"""
import argparse
import math
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
import urllib.request


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("--tilepack", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--mbtiles")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--bbox", default="-30,20,40,60")
    p.add_argument("--reference-extract", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--url")
    p.add_argument("--out")
    return p.parse_args()


def synthetic_mbtiles(path, count, sample_tree):
    """`count` distinct tiles, zoom 0 down (the first tiles of the pyramid), each a sample PNG with
    eight bytes of its own after IEND (so no two are equal), about 1.8 KB as the sample tiles."""
    samples = []
    for root, _, files in os.walk(sample_tree):
        for name in sorted(files):
            if name.endswith(".png"):
                with open(os.path.join(root, name), "rb") as f:
                    samples.append(f.read())
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE metadata (name text, value text);
        CREATE TABLE tiles (zoom_level integer, tile_column integer, tile_row integer, tile_data blob);
        CREATE UNIQUE INDEX tile_index on tiles (zoom_level, tile_column, tile_row);
    """)
    rows, z = [], 0
    while len(rows) < count:
        side = 1 << z
        for x in range(side):
            for y in range(side):
                if len(rows) == count:
                    break
                data = samples[len(rows) % len(samples)] + len(rows).to_bytes(8, "little")
                rows.append((z, x, side - 1 - y, data))
        z += 1
    db.executemany("INSERT INTO tiles VALUES (?,?,?,?)", rows)
    meta = {"name": "bench", "format": "png", "minzoom": "0", "maxzoom": str(rows[-1][0]),
            "bounds": "-180,-85.0511,180,85.0511", "center": "0,0,2", "type": "baselayer"}
    db.executemany("INSERT INTO metadata VALUES (?,?)", meta.items())
    db.commit()
    db.close()


def tiles_in_bbox(bbox, zooms):
    w, s, e, n = bbox
    def tx(lon, z): return min((1 << z) - 1, max(0, int((lon + 180) / 360 * (1 << z))))
    def ty(lat, z):
        lat = max(-85.05112878, min(85.05112878, lat))
        r = math.radians(lat)
        return min((1 << z) - 1, max(0, int((1 - math.log(math.tan(r) + 1 / math.cos(r)) / math.pi) / 2 * (1 << z))))
    for z in zooms:
        for x in range(tx(w, z), tx(e, z) + 1):
            for y in range(ty(n, z), ty(s, z) + 1):
                yield z, x, y


def reference_extract(url, out, bbox):
    """The PyPI pmtiles reader over HTTP range requests: the region's tiles, written with its writer."""
    from pmtiles.reader import Reader
    from pmtiles.writer import Writer
    from pmtiles.tile import zxy_to_tileid, Compression, TileType

    memo = {}
    def get_bytes(offset, length):
        key = (offset, length)
        if key not in memo:
            req = urllib.request.Request(url, headers={"Range": f"bytes={offset}-{offset + length - 1}"})
            with urllib.request.urlopen(req) as r:
                memo[key] = r.read()
        return memo[key]

    reader = Reader(get_bytes)
    header = reader.header()
    found = []
    for z, x, y in tiles_in_bbox(bbox, range(header["min_zoom"], header["max_zoom"] + 1)):
        data = reader.get(z, x, y)
        if data:
            found.append((zxy_to_tileid(z, x, y), data))
    found.sort()
    with open(out, "wb") as f:
        writer = Writer(f)
        for tile_id, data in found:
            writer.write_tile(tile_id, data)
        writer.finalize({"tile_type": header["tile_type"], "tile_compression": header["tile_compression"],
                         "min_zoom": header["min_zoom"], "max_zoom": header["max_zoom"],
                         "min_lon_e7": int(bbox[0] * 1e7), "min_lat_e7": int(bbox[1] * 1e7),
                         "max_lon_e7": int(bbox[2] * 1e7), "max_lat_e7": int(bbox[3] * 1e7),
                         "center_zoom": header["min_zoom"], "center_lon_e7": 0, "center_lat_e7": 0}, {"name": "extract"})
    print(len(found))


class Nginx:
    def __init__(self, work, root):
        import socket
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()
        self.dir = os.path.join(work, "nginx")
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        self.log = os.path.join(self.dir, "access.log")
        conf = os.path.join(self.dir, "nginx.conf")
        d = self.dir
        with open(conf, "w") as f:
            f.write(f"""daemon off; master_process off; worker_processes 1; pid {d}/nginx.pid; error_log {d}/error.log;
events {{ worker_connections 256; }}
http {{ access_log {self.log}; client_body_temp_path {d}/b; proxy_temp_path {d}/p; fastcgi_temp_path {d}/f;
uwsgi_temp_path {d}/u; scgi_temp_path {d}/s; server {{ listen 127.0.0.1:{self.port}; root {root}; }} }}""")
        self.process = subprocess.Popen(["/usr/sbin/nginx", "-p", d, "-c", conf, "-e", d + "/error.log"])
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise SystemExit("nginx did not start")

    def requests(self):
        with open(self.log) as f:
            return sum(1 for _ in f)

    def stop(self):
        self.process.kill()
        self.process.wait()


def timed(command):
    start = time.perf_counter()
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return time.perf_counter() - start, out


def compare(name, contenders, runs, before=None, after=None):
    """Alternates the contenders `runs` times; returns their median times (and request counts)."""
    times = {label: [] for label, _ in contenders}
    requests = {}
    for _ in range(runs):
        for label, command in contenders:
            if before:
                before(label)
            seconds, _ = timed(command)
            times[label].append(seconds)
            if after:
                requests[label] = after(label)
    return {label: statistics.median(t) for label, t in times.items()}, requests


def main():
    args = parse()
    bbox = [float(v) for v in args.bbox.split(",")]
    if args.reference_extract:
        reference_extract(args.url, args.out, bbox)
        return
    os.makedirs(args.work, exist_ok=True)
    print(f"bench-pmtiles: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start")
    mbtiles = args.mbtiles
    if not mbtiles:
        mbtiles = os.path.join(args.work, "bench-50000.mbtiles")
        if not os.path.exists(mbtiles):
            sample = os.path.join(os.path.dirname(__file__), "..", "..", "samples", "tiles")
            synthetic_mbtiles(mbtiles, 50_000, sample)
    count = sqlite3.connect(mbtiles).execute("SELECT COUNT(*) FROM tiles").fetchone()[0]
    print(f"source: {mbtiles}, {count} tiles, {os.path.getsize(mbtiles)} bytes")

    # 1. MBTiles -> PMTiles.
    out_tp = os.path.join(args.work, "tilepack.pmtiles")
    out_py = os.path.join(args.work, "reference.pmtiles")
    def clean(label):
        for p in (out_tp, out_py):
            if os.path.exists(p):
                os.remove(p)
    medians, _ = compare("convert", [
        ("tilepack convert", [args.tilepack, "convert", mbtiles, out_tp, "--force", "--quiet"]),
        ("pmtiles-convert", ["pmtiles-convert", mbtiles, out_py]),
    ], args.runs, before=clean)
    # Keep one output of each for the next part.
    clean(None)
    subprocess.run([args.tilepack, "convert", mbtiles, out_tp, "--force", "--quiet"], check=True, capture_output=True)
    subprocess.run(["pmtiles-convert", mbtiles, out_py], check=True, capture_output=True)
    ratio = medians["pmtiles-convert"] / medians["tilepack convert"]
    print(f"MBTiles -> PMTiles, {count} tiles: tilepack {medians['tilepack convert'] * 1000:.0f} ms, "
          f"pmtiles-convert {medians['pmtiles-convert'] * 1000:.0f} ms: {ratio:.2f}x faster (goal >= 3x); "
          f"sizes {os.path.getsize(out_tp)} vs {os.path.getsize(out_py)} bytes")

    # 2. Extract from a remote PMTiles (the reference's file, served by nginx).
    served = os.path.join(args.work, "www")
    os.makedirs(served, exist_ok=True)
    shutil.copyfile(out_py, os.path.join(served, "bench.pmtiles"))
    nginx = Nginx(args.work, served)
    try:
        url = f"http://127.0.0.1:{nginx.port}/bench.pmtiles"
        extract_tp = os.path.join(args.work, "extract-tilepack.pmtiles")
        extract_py = os.path.join(args.work, "extract-reference.pmtiles")
        marks = {}
        def mark(label):
            marks[label] = nginx.requests()
            for p in (extract_tp, extract_py):
                if os.path.exists(p):
                    os.remove(p)
        def count_requests(label):
            return nginx.requests() - marks[label]
        medians, requests = compare("extract", [
            ("tilepack extract", [args.tilepack, "extract", url, extract_tp, f"--bbox={args.bbox}", "--force", "--quiet"]),
            ("pmtiles reader", [sys.executable, __file__, "--reference-extract", "--tilepack", args.tilepack, "--work", args.work,
                                "--url", url, "--out", extract_py, f"--bbox={args.bbox}"]),
        ], args.runs, before=mark, after=count_requests)
        subprocess.run([args.tilepack, "extract", url, extract_tp, f"--bbox={args.bbox}", "--force", "--quiet"], check=True, capture_output=True)
        tiles = int(subprocess.run([sys.executable, __file__, "--reference-extract", "--tilepack", args.tilepack, "--work", args.work,
                                    "--url", url, "--out", extract_py, f"--bbox={args.bbox}"], check=True, capture_output=True, text=True).stdout)
        ratio = medians["pmtiles reader"] / medians["tilepack extract"]
        print(f"extract {args.bbox} ({tiles} tiles) from a remote PMTiles on loopback nginx: tilepack {medians['tilepack extract'] * 1000:.0f} ms "
              f"in {requests['tilepack extract']} requests, pmtiles reader {medians['pmtiles reader'] * 1000:.0f} ms in "
              f"{requests['pmtiles reader']} requests: {ratio:.2f}x faster (goal >= 3x), "
              f"{requests['tilepack extract'] / max(1, requests['pmtiles reader']):.3f}x the requests (goal <= 1)")
        # The same tiles either way.
        dump = lambda p: subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "reference.py"), "dump", p],
                                        check=True, capture_output=True, text=True).stdout
        import json
        same = json.loads(dump(extract_tp))["tiles"] == json.loads(dump(extract_py))["tiles"]
        print(f"the two extracts hold the same tiles: {same}")
    finally:
        nginx.stop()
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
