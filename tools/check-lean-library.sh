#!/usr/bin/env bash
# Checks what an app and a first-time user pay for, from the package manifest:
# - the `Tilepack` library product depends on no Swift package at all (no swift-nio, no second
#   TLS stack: HTTP is URLSession, MD5 is CryptoKit or the system's libcrypto);
# - the `tilepack` command depends on swift-argument-parser only, so README's first command
#   compiles nothing else (the server, `tilepack-serve`, is a product of its own).
# Exits 1 naming what crept in. Run by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."
swift package dump-package | python3 -c '
import json, sys
manifest = json.load(sys.stdin)
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
'
