#!/usr/bin/env bash
# Checks what an app and a first-time user pay for, from the package manifest:
# - what an app RESOLVES: SwiftPM resolves (and checks out) every package the manifest names,
#   whatever the app links, so the main manifest depends on swift-argument-parser alone and the
#   resolved graph holds nothing else (the server's Hummingbird and SwiftNIO are server/'s, the
#   tools' are tools/');
# - the `Tilepack` library product depends on no Swift package at all (no swift-nio, no second
#   TLS stack: HTTP is URLSession, MD5 is CryptoKit or the system's libcrypto);
# - the `tilepack` command depends on swift-argument-parser only, so README's first command
#   compiles nothing else (the server, `tilepack-serve`, is a package of its own: server/).
# - the `Tilepack` module (what `import Tilepack` links) reaches, on every platform, neither the
#   command library (TilepackOperations, TilepackRender, the command) nor remote archives and
#   their S3 client (TilepackRemote) nor the libcurl transport: it re-exports TilepackUpdate;
# - on Apple platforms (iOS, macOS) the app products (`Tilepack`, `TilepackRemote`) reach no
#   system library but what every SDK has, SQLite and zlib, and no package: each of the others
#   (liblz4, libdeflate, libpng, libturbojpeg, libwebp, pixman, libcrypto, libcurl) is a dependency
#   with a Linux condition, and the code beside it takes the framework or portable branch.
# Exits 1 naming what crept in. Run by .ci/run.
#   tools/check-lean-library.sh [MANIFEST.json]   (a `swift package dump-package` output to check
#   instead of this package's: how the check is shown to fail on a planted dependency)
set -euo pipefail
cd "$(dirname "$0")/.."
allowed_package=swift-argument-parser
if [ $# -gt 0 ]; then
    apple_check_only="$1"
else
    apple_check_only=""
fi
[ -n "$apple_check_only" ] || swift package show-dependencies --format json | python3 -c '
import json, sys
allowed = sys.argv[1]
def walk(node, path):
    for dependency in node.get("dependencies", []):
        yield dependency["identity"], path + [dependency["identity"]]
        yield from walk(dependency, path + [dependency["identity"]])
resolved = {}
for identity, path in walk(json.load(sys.stdin), ["tilepack"]):
    resolved.setdefault(identity, " -> ".join(path))
extra = {identity: path for identity, path in resolved.items() if identity != allowed}
for identity, path in sorted(extra.items()):
    print(f"check-lean-library: an app depending on tilepack resolves the package {identity} ({path}): only {allowed} may be resolved")
if extra:
    sys.exit(1)
print("check-lean-library: an app resolves through tilepack:", ", ".join(sorted(resolved)) or "no package")
' "$allowed_package"
[ -n "$apple_check_only" ] || swift package dump-package | python3 -c '
import json, sys
manifest = json.load(sys.stdin)
allowed_package = sys.argv[1]
targets = {t["name"]: t for t in manifest["targets"]}
products = {p["name"]: p for p in manifest["products"]}

def closure(names):
    """The external products reached from these targets, with the path that reaches each."""
    seen, external, stack = set(), {}, [(n, n) for n in names]
    while stack:
        name, path = stack.pop()
        if name in seen or name not in targets:
            continue
        seen.add(name)
        for dep in targets[name]["dependencies"]:
            kind, value = next(iter(dep.items()))
            if kind == "product":
                external.setdefault(f"{value[1]}/{value[0]}", f"{path} -> {value[0]}")
            else:
                stack.append((value[0], f"{path} -> {value[0]}"))
    return external

failures = []
for dependency in manifest["dependencies"]:
    kind, value = next(iter(dependency.items()))
    identity = value[0]["identity"]
    if identity != allowed_package:
        failures.append(f"the main manifest depends on the package {identity}: only {allowed_package} belongs there (the server\x27s are server/Package.swift\x27s)")
library = closure(products["Tilepack"]["targets"])
for name, path in sorted(library.items()):
    failures.append(f"the Tilepack library depends on the package product {name} ({path})")
allowed = {"swift-argument-parser/ArgumentParser"}
command = closure(["tilepack"])
for name, path in sorted(command.items()):
    if name not in allowed:
        failures.append(f"the tilepack command depends on {name} ({path})")
for failure in failures:
    print("check-lean-library:", failure)
if failures:
    sys.exit(1)
print(f"check-lean-library: Tilepack library: no package dependency; tilepack command: {sorted(command) or 'none'}")
' "$allowed_package"

# The Apple platforms' closure, conditions honoured: a dependency with platform names counts only
# on those platforms.
{ if [ -n "$apple_check_only" ]; then cat "$apple_check_only"; else swift package dump-package; fi; } | python3 -c '
import json, sys
manifest = json.load(sys.stdin)
targets = {t["name"]: t for t in manifest["targets"]}
products = {p["name"]: p for p in manifest["products"]}
allowed_libraries = {"sqlite3", "zlib"}  # pkg-config names of what every Apple SDK ships

def reached(roots, platform):
    """Every target and package product the roots reach when built for `platform`, with a path to each."""
    paths, stack = {}, [(name, name) for name in roots]
    while stack:
        name, path = stack.pop()
        if name in paths:
            continue
        paths[name] = path
        if name not in targets:
            continue
        for dep in targets[name]["dependencies"]:
            kind, value = next(iter(dep.items()))
            condition = value[-1] if isinstance(value[-1], dict) else None
            platforms = (condition or {}).get("platformNames") or []
            if platforms and platform not in platforms:
                continue
            if kind == "product":
                paths.setdefault(f"package product {value[1]}/{value[0]}", f"{path} -> {value[0]}")
            else:
                stack.append((value[0], f"{path} -> {value[0]}"))
    return paths

failures, summary = [], {}
# What `import Tilepack` links: its module reaches the update module (TilepackUpdate), never the
# command library, remote archives or their S3 client (an app that reads remote archives adds the
# TilepackRemote product).
forbidden = {"TilepackOperations", "TilepackRemote", "TilepackRender", "TilepackCurl", "tilepack"}
for platform in ("linux", "ios", "macos"):
    paths = reached(["Tilepack"], platform)
    for name in sorted(forbidden & set(paths)):
        failures.append(f"on {platform} the Tilepack module depends on {name} ({paths[name]}): an app links no command library, remote archive or S3 client")
    if "TilepackUpdate" not in paths:
        failures.append(f"on {platform} the Tilepack module does not reach TilepackUpdate, which it re-exports")
for product in ("Tilepack", "TilepackRemote"):
    for platform in ("ios", "macos"):
        paths = reached(products[product]["targets"], platform)
        libraries = []
        for name, path in sorted(paths.items()):
            if name.startswith("package product "):
                failures.append(f"on {platform} the {product} product depends on the {name} ({path}): an app gets only the SDK")
                continue
            target = targets.get(name)
            if target is None or target["type"] != "system":
                continue
            library = target.get("pkgConfig") or name
            libraries.append(library)
            if library not in allowed_libraries:
                failures.append(f"on {platform} the {product} product links the system library {library} ({path}), which no Apple SDK ships: give it a Linux condition")
        summary[(product, platform)] = sorted(set(libraries))
for failure in failures:
    print("check-lean-library:", failure)
if failures:
    sys.exit(1)
print("check-lean-library: the Tilepack module reaches no", ", ".join(sorted(forbidden)))
print("check-lean-library: on iOS and macOS the app products link only", ", ".join(sorted({l for ls in summary.values() for l in ls})), "and no package")
'
