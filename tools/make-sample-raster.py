#!/usr/bin/env python3
"""Writes a synthetic photo-like RGB raster as a binary PPM: smooth terrain-like colours, fields,
roads and noise, so that tiles of it compress like aerial imagery. Used by tools/make-sample-raster.sh
(samples/sample-utm.tif) and tools/bench-tile.sh (the 5,000 to 20,000 px inputs).

    make-sample-raster.py WIDTH HEIGHT OUT.ppm
"""
import math
import sys

import numpy as np

width, height, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
rng = np.random.default_rng(32)
with open(out, "wb") as f:
    f.write(b"P6\n%d %d\n255\n" % (width, height))
    xs = np.arange(width, dtype=np.float32) / width
    # Octaves of smooth waves, each twice the frequency and half the amplitude of the last (terrain-like).
    waves = [(rng.uniform(-1.5, 1.5) * 2**k, rng.uniform(-1.5, 1.5) * 2**k, rng.uniform(0, 6.3), 0.6**k) for k in range(1, 8)]
    for row0 in range(0, height, 256):
        rows = min(256, height - row0)
        ys = (np.arange(row0, row0 + rows, dtype=np.float32) / height)[:, None]
        field = np.zeros((rows, width), dtype=np.float32)
        for fx, fy, phase, amp in waves:
            field += amp * np.sin(2 * math.pi * (fx * xs[None, :] + fy * ys) + phase)
        field = (field - field.min()) / max(1e-6, field.max() - field.min())
        # Fields: a checkerboard of parcels with their own tint.
        parcel = ((np.floor(xs[None, :] * 60) + np.floor(ys * 60)) % 5).astype(np.float32)
        r = 60 + 120 * field + 12 * parcel
        g = 80 + 110 * field + 8 * (4 - parcel)
        b = 50 + 70 * (1 - field)
        # Roads: thin straight lines.
        road = (np.abs(((xs[None, :] * 17 + ys * 3) % 1) - 0.5) < 0.004) | (np.abs(((ys * 13 + xs[None, :] * 2) % 1) - 0.5) < 0.003)
        noise = rng.normal(0, 6, size=(rows, width, 3)).astype(np.float32)
        rgb = np.stack([r, g, b], axis=-1) + noise
        rgb[road] = [200, 200, 190]
        f.write(np.clip(rgb, 0, 255).astype(np.uint8).tobytes())
