#!/usr/bin/env python3
"""Writes the hand-built test PNGs in this folder (run once; tests only read the .png files).

Each image is 13 x 11 pixels (not a multiple of 8, so every Adam7 pass is partial) of a pattern
that ImagingTestPatterns.swift computes independently, in every PNG colour type and bit depth,
with tRNS variants and Adam7 interlacing. Rows use all five filter types in turn.
Standard library only (zlib, struct)."""
import struct, zlib, os

W, H = 13, 11
OUT = os.path.dirname(os.path.abspath(__file__))

def R(x, y): return (x * 19 + y * 7) & 255
def G(x, y): return (x * 5 + y * 31 + 40) & 255
def B(x, y): return (x * y * 3 + 11) & 255
def A(x, y): return (0, 255, (x * 23 + y * 41) & 255)[(x + y) % 3]
def grey(x, y, depth): return ((x + y * W) * 7) % (1 << depth)
def index(x, y, depth): return (x + 3 * y) % min(1 << depth, 200)
def palette(i): return ((i * 37) & 255, (i * 91) & 255, (i * 53) & 255)
def palette_alpha(i): return (0, 128, 255, 64)[i % 4]
def wide(v, x):  # a 16-bit sample that rounds to the 8-bit v
    return max(0, min(65535, v * 257 + (100 if x & 1 else -100)))

def chunk(kind, data):
    c = kind + data
    return struct.pack(">I", len(data)) + c + struct.pack(">I", zlib.crc32(c) & 0xFFFFFFFF)

def pack_row(samples, depth):
    if depth == 16: return b"".join(struct.pack(">H", s) for s in samples)
    if depth == 8: return bytes(samples)
    out, acc, n = bytearray(), 0, 0
    for s in samples:
        acc = (acc << depth) | s; n += depth
        if n == 8: out.append(acc); acc, n = 0, 0
    if n: out.append(acc << (8 - n))
    return bytes(out)

def paeth(a, b, c):
    p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else (b if pb <= pc else c)

def filter_rows(rows, bpp):
    out, prev = bytearray(), None
    for n, row in enumerate(rows):
        ft = n % 5
        up = prev if prev is not None else bytes(len(row))
        f = bytearray()
        for i, v in enumerate(row):
            a = row[i - bpp] if i >= bpp else 0
            b = up[i]; c = up[i - bpp] if i >= bpp else 0
            pred = (0, a, b, (a + b) // 2, paeth(a, b, c))[ft]
            f.append((v - pred) & 255)
        out.append(ft); out += f; prev = row
    return bytes(out)

ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]

def write(name, color_type, depth, pixel, interlace=False, plte=None, trns=None):
    channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[color_type]
    bpp = max(1, channels * depth // 8)
    passes = ADAM7 if interlace else [(0, 0, 1, 1)]
    raw = b""
    for (x0, y0, dx, dy) in passes:
        xs, ys = range(x0, W, dx), range(y0, H, dy)
        if not xs or not ys: continue
        rows = [pack_row([s for x in xs for s in pixel(x, y)], depth) for y in ys]
        raw += filter_rows(rows, bpp)
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", W, H, depth, color_type, 0, 0, 1 if interlace else 0))
    if plte: png += chunk(b"PLTE", plte)
    if trns: png += chunk(b"tRNS", trns)
    png += chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")
    open(os.path.join(OUT, name), "wb").write(png)

for d in (1, 2, 4, 8):
    write(f"grey{d}.png", 0, d, lambda x, y, d=d: [grey(x, y, d)])
write("grey16.png", 0, 16, lambda x, y: [wide(G(x, y), x)])
write("grey8-trns.png", 0, 8, lambda x, y: [grey(x, y, 8)], trns=struct.pack(">H", grey(2, 3, 8)))
write("ga8.png", 4, 8, lambda x, y: [G(x, y), A(x, y)])
write("ga16.png", 4, 16, lambda x, y: [wide(G(x, y), x), wide(A(x, y), x)])
write("rgb8.png", 2, 8, lambda x, y: [R(x, y), G(x, y), B(x, y)])
write("rgb16.png", 2, 16, lambda x, y: [wide(R(x, y), x), wide(G(x, y), x), wide(B(x, y), x)])
write("rgb8-trns.png", 2, 8, lambda x, y: [R(x, y), G(x, y), B(x, y)], trns=struct.pack(">HHH", R(4, 5), G(4, 5), B(4, 5)))
write("rgba8.png", 6, 8, lambda x, y: [R(x, y), G(x, y), B(x, y), A(x, y)])
write("rgba16.png", 6, 16, lambda x, y: [wide(R(x, y), x), wide(G(x, y), x), wide(B(x, y), x), wide(A(x, y), x)])
for d in (1, 2, 4, 8):
    n = min(1 << d, 200)
    write(f"pal{d}.png", 3, d, lambda x, y, d=d: [index(x, y, d)], plte=b"".join(bytes(palette(i)) for i in range(n)))
write("pal8-trns.png", 3, 8, lambda x, y: [index(x, y, 8)], plte=b"".join(bytes(palette(i)) for i in range(200)),
      trns=bytes(palette_alpha(i) for i in range(150)))
write("rgba8-adam7.png", 6, 8, lambda x, y: [R(x, y), G(x, y), B(x, y), A(x, y)], interlace=True)
write("pal4-adam7.png", 3, 4, lambda x, y: [index(x, y, 4)], interlace=True, plte=b"".join(bytes(palette(i)) for i in range(16)))
write("grey1-adam7.png", 0, 1, lambda x, y: [grey(x, y, 1)], interlace=True)
write("rgba16-adam7.png", 6, 16, lambda x, y: [wide(R(x, y), x), wide(G(x, y), x), wide(B(x, y), x), wide(A(x, y), x)], interlace=True)
