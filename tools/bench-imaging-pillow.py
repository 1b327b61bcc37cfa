"""Pillow's side of bench-imaging's resampling figures (run by bench-imaging, not by hand).

Usage: python3 bench-imaging-pillow.py TILE256.rgba TILE512.rgba ROUNDS
Reads two raw RGBA tiles (256 and 512 px, straight alpha), times ROUNDS resizes of each kind with
Image.BILINEAR (Pillow premultiplies RGBA itself), and prints microseconds per tile as JSON:
{"up": ..., "down": ..., "overzoom": ...}.
"""
import json
import sys
import time

from PIL import Image

small = Image.frombytes("RGBA", (256, 256), open(sys.argv[1], "rb").read())
big = Image.frombytes("RGBA", (512, 512), open(sys.argv[2], "rb").read())
rounds = int(sys.argv[3])


def per_tile(work):
    start = time.perf_counter()
    for _ in range(rounds):
        work()
    return (time.perf_counter() - start) / rounds * 1e6


# Overzoom two levels: descendant (1, 2) of the 4 x 4 grid is the 64 px square at (64, 128).
print(json.dumps({
    "up": per_tile(lambda: small.resize((512, 512), Image.BILINEAR)),
    "down": per_tile(lambda: big.resize((256, 256), Image.BILINEAR)),
    "overzoom": per_tile(lambda: small.resize((256, 256), Image.BILINEAR, box=(64, 128, 128, 192))),
}))
