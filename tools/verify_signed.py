#!/usr/bin/env python3
"""An independent verifier of tilepack's signed archives, written from Specs/signing.md alone.

    verify_signed.py --vectors Specs/signing-vectors.json
        recomputes every value of the spec's test vectors and checks the signed note;
    verify_signed.py ARCHIVE.mbtiles --key NAME.pub [--sidecar FILE] [--min-release N]
        checks an MBTiles archive (read with the standard library's sqlite3) against its
        ARCHIVE.tpsig: the key's signature, the stored hashes, every tile, the identity.
        Prints one JSON object; exit 0 when verified, 1 when refused (the reason on stderr).

Needs PyPI's `cryptography` for Ed25519 (python3 -m pip install cryptography); everything else is
the standard library. Shares no code with tilepack.
"""
import base64
import hashlib
import json
import sqlite3
import struct
import sys

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey


class Refused(Exception):
    pass


def sha256(data):
    return hashlib.sha256(data).digest()


# §1 keys ---------------------------------------------------------------------------------------

def key_id(name, public_key):
    return sha256(name.encode() + b"\n" + b"\x01" + public_key)[:4]


def parse_key(line, private=False):
    line = line.strip()
    if private:
        if not line.startswith("PRIVATE+KEY+"):
            raise Refused("not a private key line")
        line = line[len("PRIVATE+KEY+"):]
    name, hexid, b64 = line.split("+", 2)
    raw = base64.b64decode(b64, validate=True)
    if base64.b64encode(raw).decode() != b64 or len(raw) != 33 or raw[0] != 1:
        raise Refused("key is not canonical base64 of 0x01 and 32 bytes")
    key = raw[1:]
    public = Ed25519PrivateKey.from_private_bytes(key).public_key().public_bytes_raw() if private else key
    if key_id(name, public).hex() != hexid:
        raise Refused("key id does not match the name and key")
    return name, public, key


# §2-3 tiles, leaves, nodes, MTH ------------------------------------------------------------------

def tile_id(z, x, y):
    """PMTiles' tile id: the tiles of the lower zooms, then the Hilbert curve index (xy2d)."""
    base = (4 ** z - 1) // 3
    n = 1 << z
    d = 0
    s = n // 2
    while s > 0:
        rx = 1 if x & s else 0
        ry = 1 if y & s else 0
        d += s * s * ((3 * rx) ^ ry)
        if ry == 0:
            if rx == 1:
                x, y = n - 1 - x, n - 1 - y
            x, y = y, x
        s //= 2
    return base + d


def tile_hash(z, x, y, data):
    return sha256(struct.pack("<BII", z, x, y) + data)


def leaf_hash(t):
    return sha256(b"\x00" + t)


def node_hash(left, right):
    return sha256(b"\x01" + left + right)


def largest_power_below(n):
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def mth(leaves):
    if not leaves:
        return sha256(b"")
    if len(leaves) == 1:
        return leaves[0]
    k = largest_power_below(len(leaves))
    return node_hash(mth(leaves[:k]), mth(leaves[k:]))


def tree_levels(leaves):
    """Every level of §5's sidecar, level 0 first: node j of level l is MTH(D[j*2^l : min((j+1)*2^l, n)]),
    which is node(2j, 2j+1) of the level below, or its node 2j alone when 2j+1 is past its end."""
    levels = [list(leaves)]
    while len(levels[-1]) > 1:
        below = levels[-1]
        levels.append([node_hash(below[j], below[j + 1]) if j + 1 < len(below) else below[j] for j in range(0, len(below), 2)])
    return levels


def node_level(count):
    """The level of the node over `count` leaves: ceil(log2(count))."""
    return (count - 1).bit_length() if count > 1 else 0


# §4 the signed root ------------------------------------------------------------------------------

def open_note(note, name, public_key, min_release=0):
    text = note.decode("utf-8")
    split = text.rfind("\n\n")
    if split < 0:
        raise Refused("the note has no empty line")
    body = text[:split + 1]
    wanted = key_id(name, public_key)
    for line in text[split + 2:].split("\n")[:-1]:
        if not line.startswith("\u2014 "):
            raise Refused("a signature line without its em dash")
        signer, b64 = line[2:].split(" ")
        raw = base64.b64decode(b64)
        if signer != name or raw[:4] != wanted:
            continue
        try:
            Ed25519PublicKey.from_public_bytes(public_key).verify(raw[4:], body.encode())
        except InvalidSignature:
            raise Refused("bad signature by %s" % name)
        break
    else:
        raise Refused("not signed by %s+%s" % (name, wanted.hex()))
    lines = body.split("\n")[:-1]
    if len(lines) != 7 or lines[3] != "tree tilepack-v1":
        raise Refused("the body is not the seven lines of tree tilepack-v1")
    root = {
        "origin": lines[0], "tree_size": int(lines[1]), "root": base64.b64decode(lines[2]),
        "identity": lines[4][len("identity "):], "release": int(lines[5][len("release "):]), "time": lines[6][len("time "):],
    }
    if not lines[4].startswith("identity ") or not lines[5].startswith("release ") or not lines[6].startswith("time "):
        raise Refused("the body's lines 5-7 are not identity, release, time")
    if root["release"] < min_release:
        raise Refused("release %d is older than %d" % (root["release"], min_release))
    return root


# §5 the sidecar ----------------------------------------------------------------------------------

def parse_sidecar(data):
    if data[:8] == b"TPSIG001":
        raise Refused("a TPSIG001 sidecar (the first layout): re-sign the archive")
    if len(data) < 32 or data[:8] != b"TPSIG002":
        raise Refused("not a TPSIG002 sidecar")
    c, flags, n, reserved = struct.unpack_from("<IIQQ", data, 8)
    if flags or reserved or not 1 <= c <= 4096:
        raise Refused("bad sidecar header")
    at = 32 + (c + 7) // 8 * 8
    fences_count = (n + 255) // 256
    levels_count = [(n + (1 << level) - 1) >> level for level in range(node_level(n) + 1)]
    need = at + 8 * fences_count + 8 * n + 32 * sum(levels_count)
    if len(data) != need:
        raise Refused("the sidecar is %d bytes, its tree of %d leaves needs %d (truncated)" % (len(data), n, need))
    note = data[32:32 + c]
    fences = list(struct.unpack_from("<%dQ" % fences_count, data, at))
    at += 8 * fences_count
    ids = list(struct.unpack_from("<%dQ" % n, data, at))
    at += 8 * n
    stored = []
    for count in levels_count:
        stored.append([data[at + 32 * i:at + 32 * i + 32] for i in range(count)])
        at += 32 * count
    return note, n, fences, ids, stored


def check_sidecar(data, name, public_key, min_release=0):
    note, n, fences, ids, stored = parse_sidecar(data)
    root = open_note(note, name, public_key, min_release)
    if root["tree_size"] != n:
        raise Refused("tree sizes differ")
    if tree_levels(stored[0]) != stored or mth(stored[0]) != root["root"]:
        raise Refused("the stored hashes do not give the signed root")
    if any(a >= b for a, b in zip(ids, ids[1:])) or fences != ids[::256]:
        raise Refused("the locator is damaged")
    return root, ids, stored[0]


# §6 proofs ---------------------------------------------------------------------------------------

def decode_proof(data):
    if data[:8] != b"TPPROOF1":
        raise Refused("not a proof")
    n, k = struct.unpack_from("<QI", data, 8)
    at = 20
    indices = list(struct.unpack_from("<%dQ" % k, data, at))
    at += 8 * k
    (m,) = struct.unpack_from("<I", data, at)
    at += 4
    if len(data) != at + 32 * m:
        raise Refused("the proof is truncated or padded")
    return n, indices, [data[at + 32 * i:at + 32 * i + 32] for i in range(m)]


def proof_root(n, indices, leaves, hashes):
    hashes = list(hashes)
    position = [0]

    def compute(a, b, chosen):
        if not chosen:
            if position[0] >= len(hashes):
                raise Refused("the proof has too few hashes")
            position[0] += 1
            return hashes[position[0] - 1]
        if b - a == 1:
            return leaves[chosen[0]]
        k = largest_power_below(b - a)
        return node_hash(compute(a, a + k, [i for i in chosen if indices[i] < a + k]),
                         compute(a + k, b, [i for i in chosen if indices[i] >= a + k]))

    root = compute(0, n, list(range(len(indices))))
    if position[0] != len(hashes):
        raise Refused("the proof has hashes left over")
    return root


def proof_from_levels(n, indices, stored):
    """§5: each hash of §6's proof, D[a:b], read as node (ceil(log2(b-a)), a >> level) of the sidecar."""
    out = []

    def walk(a, b, chosen):
        if not chosen:
            level = node_level(b - a)
            out.append(stored[level][a >> level])
        elif b - a > 1:
            k = largest_power_below(b - a)
            walk(a, a + k, [i for i in chosen if i < a + k])
            walk(a + k, b, [i for i in chosen if i >= a + k])

    walk(0, n, sorted(indices))
    return out


def minimal_proof_size(n, indices):
    """The number of hashes in §6's proof (the minimal multi-leaf proof) of `indices`."""
    count = [0]
    chosen_set = sorted(indices)

    def walk(a, b, chosen):
        if not chosen:
            count[0] += 1
        elif b - a > 1:
            k = largest_power_below(b - a)
            walk(a, a + k, [i for i in chosen if i < a + k])
            walk(a + k, b, [i for i in chosen if i >= a + k])

    walk(0, n, chosen_set)
    return count[0]


# Identity (Specs/updates.md §1) ------------------------------------------------------------------

DERIVED = {"agg_tiles_hash", "hash_algorithm", "agg_tiles_hash_before_apply", "agg_tiles_hash_after_apply",
           "tilepack_content_identity"}


def metadata_hash(metadata):
    h = hashlib.sha256()
    for key in sorted((k for k in metadata if k not in DERIVED), key=lambda k: k.encode()):
        kb, vb = key.encode(), metadata[key].encode()
        h.update(struct.pack("<I", len(kb)) + kb + struct.pack("<I", len(vb)) + vb)
    return int.from_bytes(h.digest()[:16], "little")


def identity_text(count, tiles_sum, metadata):
    return "tpid1:%d:%032x:%032x" % (count, tiles_sum % (1 << 128), metadata)


# The checks --------------------------------------------------------------------------------------

def check_vectors(path):
    v = json.load(open(path))
    key = v["key"]
    name, public, seed = parse_key(key["private_line"], private=True)
    assert seed.hex() == key["seed"] and public.hex() == key["public_key"] and key_id(name, public).hex() == key["key_id"]
    assert parse_key(key["public_line"])[1] == public and key["public_line"] == "%s+%s+%s\n" % (
        name, key["key_id"], base64.b64encode(b"\x01" + public).decode())
    leaves, total = [], 0
    previous = -1
    for t in v["tiles"]:
        data = bytes.fromhex(t["bytes"])
        assert tile_id(t["z"], t["x"], t["y"]) == t["tile_id"] > previous
        previous = t["tile_id"]
        th = tile_hash(t["z"], t["x"], t["y"], data)
        assert th.hex() == t["tile_hash"] and leaf_hash(th).hex() == t["leaf"]
        total += int.from_bytes(th[:16], "little")
        leaves.append(leaf_hash(th))
    assert identity_text(len(leaves), total, metadata_hash(v["metadata"])) == v["identity"]
    assert [mth(leaves[:k]).hex() for k in range(len(leaves) + 1)] == v["roots"]
    assert node_hash(leaves[0], leaves[1]).hex() == v["node"]["hash"]
    for p in v["proofs"]:
        n, indices, hashes = decode_proof(bytes.fromhex(p["encoded"]))
        assert indices == p["indices"] and n == len(leaves) and len(hashes) == minimal_proof_size(n, indices)
        assert proof_root(n, indices, [leaves[i] for i in indices], hashes) == mth(leaves)
        try:
            proof_root(n, indices, [leaves[i] for i in indices], hashes[:-1])
            raise AssertionError("a truncated proof verified")
        except Refused:
            pass
    root = open_note(v["signed_root"]["note"].encode(), name, public)
    assert root["root"] == mth(leaves) and root["tree_size"] == len(leaves) and root["identity"] == v["identity"]
    assert root["release"] == v["signed_root"]["release"] and root["origin"] == v["signed_root"]["origin"]
    signed, ids, stored = check_sidecar(bytes.fromhex(v["sidecar"]), name, public)
    assert signed == root and ids == [t["tile_id"] for t in v["tiles"]] and stored == leaves
    levels = parse_sidecar(bytes.fromhex(v["sidecar"]))[4]
    for level, nodes in enumerate(levels):
        width = 1 << level
        assert nodes == [mth(leaves[j * width:(j + 1) * width]) for j in range(len(nodes))]
    for p in v["proofs"]:
        assert proof_from_levels(len(leaves), p["indices"], levels) == decode_proof(bytes.fromhex(p["encoded"]))[2]
    return {"vectors": path, "tiles": len(leaves), "root": base64.b64encode(mth(leaves)).decode(), "agree": True}


# §7.1 an extract's .tpsig ---------------------------------------------------------------------------

def check_extract_sidecar(data, name, public_key, min_release=0):
    """The extract form: the source's signed root, the extract's tile ids and leaves, and the proof
    that those leaves are leaves of the signed tree. Returns the root, the ids and the leaves."""
    if len(data) < 32 or data[:8] != b"TPSIGX01":
        raise Refused("not a TPSIGX01 sidecar")
    c, flags, k, reserved = struct.unpack_from("<IIQQ", data, 8)
    if flags or reserved or not 1 <= c <= 4096 or k < 1:
        raise Refused("bad extract sidecar header")
    at = 32 + (c + 7) // 8 * 8
    if any(data[32 + c:at]) or len(data) < at + 40 * k:
        raise Refused("the extract sidecar is truncated or its padding is not zero")
    root = open_note(data[32:32 + c], name, public_key, min_release)
    ids = list(struct.unpack_from("<%dQ" % k, data, at))
    at += 8 * k
    leaves = [data[at + 32 * i:at + 32 * i + 32] for i in range(k)]
    at += 32 * k
    n, indices, hashes = decode_proof(data[at:])
    if n != root["tree_size"] or len(indices) != k or any(a >= b for a, b in zip(indices, indices[1:])) \
            or any(a >= b for a, b in zip(ids, ids[1:])) or (indices and indices[-1] >= n):
        raise Refused("the proof is not of the extract's tiles in the signed tree")
    if proof_root(n, indices, leaves, hashes) != root["root"]:
        raise Refused("the extract's leaves and proof do not give the signed root")
    return root, ids, leaves, len(hashes)


def read_mbtiles(archive):
    db = sqlite3.connect("file:%s?mode=ro" % archive, uri=True)
    db.text_factory = bytes
    metadata = {k.decode(): v.decode() for k, v in db.execute("SELECT name, value FROM metadata")}
    mine = []
    total = 0
    for z, column, row, data in db.execute("SELECT zoom_level, tile_column, tile_row, tile_data FROM tiles"):
        y = (1 << z) - 1 - row
        th = tile_hash(z, column, y, bytes(data))
        total += int.from_bytes(th[:16], "little")
        mine.append((tile_id(z, column, y), leaf_hash(th), "%d/%d/%d" % (z, column, y)))
    mine.sort()
    return metadata, mine, total


def compare_tiles(mine, ids, stored):
    if [m[0] for m in mine] != ids:
        raise Refused("the archive's tiles are not the signed coordinates")
    bad = [m[2] for m, s in zip(mine, stored) if m[1] != s]
    if bad:
        raise Refused("tiles differ from the signed ones: " + ", ".join(bad[:20]))


def check_mbtiles(archive, key_path, sidecar_path, min_release):
    name, public, _ = parse_key(open(key_path).read())
    data = open(sidecar_path, "rb").read()
    if data[:8] == b"TPSIGX01":
        root, ids, leaves, proof_hashes = check_extract_sidecar(data, name, public, min_release)
        _, mine, _ = read_mbtiles(archive)
        compare_tiles(mine, ids, leaves)
        return {"archive": archive, "origin": root["origin"], "release": root["release"], "tiles": len(mine),
                "root": base64.b64encode(root["root"]).decode(), "extract": True, "proof_hashes": proof_hashes,
                "tree_size": root["tree_size"]}
    root, ids, stored = check_sidecar(data, name, public, min_release)
    metadata, mine, total = read_mbtiles(archive)
    compare_tiles(mine, ids, stored)
    if mth([m[1] for m in mine]) != root["root"]:
        raise Refused("the tiles do not give the signed root")
    identity = identity_text(len(mine), total, metadata_hash(metadata))
    if identity != root["identity"]:
        raise Refused("identity %s, signed %s" % (identity, root["identity"]))
    return {"archive": archive, "origin": root["origin"], "release": root["release"], "tiles": len(mine),
            "root": base64.b64encode(root["root"]).decode(), "identity": identity, "time": root["time"]}


def main(argv):
    try:
        if argv[:1] == ["--vectors"]:
            result = check_vectors(argv[1])
        elif argv[:1] == ["--minimal-proof"]:
            # --minimal-proof SOURCE.tpsig EXTRACT.mbtiles: the hashes of the minimal multi-leaf proof
            # of the extract's tiles in the source's signed tree (the benchmark's floor).
            _, n, _, ids, _ = parse_sidecar(open(argv[1], "rb").read())
            _, mine, _ = read_mbtiles(argv[2])
            position = {tid: i for i, tid in enumerate(ids)}
            indices = sorted(position[m[0]] for m in mine)
            result = {"tree_size": n, "leaves": len(indices), "hashes": minimal_proof_size(n, indices)}
        else:
            archive = argv[0]
            options = dict(zip(argv[1::2], argv[2::2]))
            result = check_mbtiles(archive, options["--key"], options.get("--sidecar", archive + ".tpsig"),
                                   int(options.get("--min-release", "0")))
    except (Refused, AssertionError, ValueError, KeyError, struct.error) as error:
        print("refused: %s" % (error or type(error).__name__), file=sys.stderr)
        return 1
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
