#!/usr/bin/env bash
# Lints the library's Swift sources for Linux-only APIs outside a Linux-only branch: nothing here
# compiles for Apple platforms, so this is the check that a Linux call did not slip into code a
# Mac or an iPhone compiles. Run by .ci/run.
#
# The library's sources are those of the targets the app products (`Tilepack`, `TilepackRemote`)
# reach, from `swift package dump-package`. A line is Linux-only when it names Glibc, Musl,
# FoundationNetworking, epoll, sendfile, the st_[amc]tim stat fields (Darwin's are st_[amc]timespec)
# or an OpaquePointer for a DIR stream (Darwin's DIR is a complete struct); comments do not count.
# It is allowed inside an `#if` branch Apple platforms never compile: one whose condition names
# os(Linux), canImport(Glibc), canImport(Musl) or canImport(FoundationNetworking) (not negated), or
# the `#else`/`#elseif` of a branch that names canImport(Darwin), os(macOS) or os(iOS).
#   tools/check-apple-portability.sh [FILE...]   (files given: lint those instead)
# Exits 1 naming each file, line and API.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -gt 0 ]; then
    printf '%s\n' "$@" > /tmp/check-apple-portability.$$
else
    swift package dump-package | python3 -c '
import json, os, sys
manifest = json.load(sys.stdin)
targets = {t["name"]: t for t in manifest["targets"]}
products = {p["name"]: p for p in manifest["products"]}
seen, stack = set(), list(products["Tilepack"]["targets"]) + list(products["TilepackRemote"]["targets"])
while stack:
    name = stack.pop()
    if name in seen or name not in targets:
        continue
    seen.add(name)
    for dep in targets[name]["dependencies"]:
        kind, value = next(iter(dep.items()))
        if kind in ("byName", "target"):
            stack.append(value[0])
for name in sorted(seen):
    target = targets[name]
    if target["type"] == "system":
        continue
    root = target.get("path") or f"Sources/{name}"
    for folder, _, files in sorted(os.walk(root)):
        for file in sorted(files):
            if file.endswith(".swift"):
                print(os.path.join(folder, file))
' > /tmp/check-apple-portability.$$
fi
trap 'rm -f /tmp/check-apple-portability.$$' EXIT
python3 - /tmp/check-apple-portability.$$ <<'EOF'
import re, sys

LINUX_ONLY = [
    (re.compile(r"\bGlibc\b"), "Glibc"),
    (re.compile(r"\bMusl\b"), "Musl"),
    (re.compile(r"\bFoundationNetworking\b"), "FoundationNetworking"),
    (re.compile(r"\bepoll_\w+|\bEPOLL\w+"), "epoll"),
    (re.compile(r"\bsendfile\b"), "sendfile"),
    (re.compile(r"\bst_[amc]tim\b"), "st_mtim/st_ctim/st_atim (Darwin: st_*timespec)"),
    (re.compile(r"(\bopendir\b|\breaddir\b|\bclosedir\b|\bDIR\b|DirectoryStream).*\bOpaquePointer\b|\bOpaquePointer\b.*(\bopendir\b|\bDIR\b)"),
     "an OpaquePointer DIR stream (Darwin: UnsafeMutablePointer<DIR>)"),
]
LINUX_BRANCH = re.compile(r"(?<![!\w])(os\(Linux\)|canImport\((Glibc|Musl|FoundationNetworking)\))")
APPLE_BRANCH = re.compile(r"(?<![!\w])(canImport\(Darwin\)|os\(macOS\)|os\(iOS\))")

def code_of(line, in_block):
    """The line without comments and string literals' contents; whether a block comment stays open."""
    out, i = [], 0
    while i < len(line):
        if in_block:
            end = line.find("*/", i)
            if end < 0:
                return "".join(out), True
            i, in_block = end + 2, False
        elif line.startswith("//", i):
            break
        elif line.startswith("/*", i):
            in_block, i = True, i + 2
        elif line[i] == '"':
            end = i + 1
            while end < len(line) and line[end] != '"':
                end += 2 if line[end] == "\\" else 1
            out.append('""')
            i = end + 1
        else:
            out.append(line[i])
            i += 1
    return "".join(out), in_block

failures = []
for path in open(sys.argv[1]).read().split():
    # One frame per open #if: (conditions of the branches so far, whether the current branch is Linux-only).
    frames, in_block = [], False
    for number, raw in enumerate(open(path, encoding="utf-8", errors="replace"), 1):
        code, in_block = code_of(raw.rstrip("\n"), in_block)
        directive = code.strip()
        if directive.startswith("#if "):
            condition = directive[4:]
            frames.append(([condition], bool(LINUX_BRANCH.search(condition))))
            continue
        if directive.startswith("#elseif ") or directive == "#else":
            if not frames:
                continue
            previous, _ = frames[-1]
            condition = directive[8:] if directive.startswith("#elseif ") else ""
            linux = bool(LINUX_BRANCH.search(condition)) or any(APPLE_BRANCH.search(c) for c in previous)
            frames[-1] = (previous + [condition], linux)
            continue
        if directive.startswith("#endif"):
            if frames:
                frames.pop()
            continue
        if any(linux for _, linux in frames):
            continue
        for pattern, name in LINUX_ONLY:
            if pattern.search(code):
                failures.append(f"{path}:{number}: {name} outside an os(Linux) branch: {raw.strip()}")
for failure in failures:
    print("check-apple-portability:", failure)
if failures:
    sys.exit(1)
print(f"check-apple-portability: no Linux-only API outside a Linux branch in {len(open(sys.argv[1]).read().split())} files")
EOF
