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
# Exits 1 naming what crept in. Run by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."
allowed_package=swift-argument-parser
swift package show-dependencies --format json | python3 -c '
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
swift package dump-package | python3 -c '
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
