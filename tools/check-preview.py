#!/usr/bin/env python3
"""Compares a screenshot of tilepack serve's preview page with the sample tiles.

The page was opened at `#ZOOM/0/0` in a square window whose side is a whole number of 256 px
tiles, so Leaflet places tile (ZOOM, x, y) at a known pixel offset. Each tile's block of the
screenshot must equal the sample tile (which draws its own z/x/y), and match it better than any
other tile of the view: a shifted, flipped or missing tile fails. Pixels under Leaflet's controls
are left out. Only the standard library: the PNG decoder below reads 8-bit RGB/RGBA, non-interlaced.

usage: check-preview.py SCREENSHOT.png TILES_DIR ZOOM WINDOW_SIDE
"""
import struct
import sys
import zlib


def read_png(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path}: not a PNG")
    pos, idat, header = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat.append(chunk)
        elif kind == b"IEND":
            break
    width, height, depth, color, _, _, interlace = header
    channels = {2: 3, 6: 4}.get(color)
    if depth != 8 or channels is None or interlace != 0:
        raise ValueError(f"{path}: only 8-bit RGB/RGBA non-interlaced PNGs are read here")
    raw = zlib.decompress(b"".join(idat))
    stride = width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            corner = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 255
            elif kind == 2:
                line[i] = (line[i] + up) & 255
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 255
        rows.append(bytes(line))
        previous = line
    # As RGB rows (alpha dropped: the tiles are opaque).
    return width, height, [bytes(b for i, b in enumerate(row) if channels == 3 or i % 4 != 3) for row in rows]


def main():
    shot_path, tiles, zoom, side = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    width, height, shot = read_png(shot_path)
    if (width, height) != (side, side):
        sys.exit(f"FAIL: the screenshot is {width}x{height}, expected {side}x{side}")
    count = side // 256
    first = (1 << zoom) // 2 - count // 2  # the view is centred on 0,0
    # Leaflet's controls: zoom buttons (top left), the info box (bottom left), attribution (bottom right).
    covered = [(0, 0, 60, 90), (0, side - 120, 260, side), (side - 120, side - 30, side, side)]

    def visible(px, py):
        return not any(x0 <= px < x1 and y0 <= py < y1 for x0, y0, x1, y1 in covered)

    step = 2  # every other pixel in each direction: enough to see a label, four times faster
    samples = [(px, py) for py in range(0, 256, step) for px in range(0, 256, step)]

    def difference(block_x, block_y, tile):
        total = n = 0
        for px, py in samples:
            sx, sy = block_x * 256 + px, block_y * 256 + py
            if not visible(sx, sy):
                continue
            a = shot[sy][sx * 3:sx * 3 + 3]
            b = tile[py][px * 3:px * 3 + 3]
            total += abs(a[0] - b[0]) + abs(a[1] - b[1]) + abs(a[2] - b[2])
            n += 3
        return total / max(n, 1)

    expected = {}
    for by in range(count):
        for bx in range(count):
            path = f"{tiles}/{zoom}/{first + bx}/{first + by}.png"
            w, h, rows = read_png(path)
            if (w, h) != (256, 256):
                sys.exit(f"FAIL: {path} is {w}x{h}, not 256x256")
            expected[(bx, by)] = rows
    failures = 0
    for (bx, by), tile in expected.items():
        own = difference(bx, by, tile)
        others = min(difference(bx, by, other) for key, other in expected.items() if key != (bx, by))
        name = f"{zoom}/{first + bx}/{first + by}"
        ok = own < 6.0 and own * 4 < others
        print(f"{'ok  ' if ok else 'FAIL'} tile {name} at ({bx * 256},{by * 256}): mean difference {own:.2f} (nearest other tile {others:.2f})")
        failures += 0 if ok else 1
    if failures:
        sys.exit(f"FAIL: {failures} of {len(expected)} tiles are not where they belong")
    print(f"all {len(expected)} tiles of zoom {zoom} are where they belong")


if __name__ == "__main__":
    main()
