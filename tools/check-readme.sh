#!/usr/bin/env bash
# README's examples, run (issue 42): every ```sh block of README.md is run, in order, in one fresh
# temporary folder that holds a copy of samples/ (so `samples/...` resolves and nothing in the
# repository is changed), with the debug build's `tilepack` first on PATH. Where a block is a
# transcript (`$ command` lines, each followed by the output it prints), each command's stdout and
# stderr must be the lines README shows, after masking durations, content identities' hashes, the
# work folder's path and a served port (tools/readme_examples.py says exactly what, and the markers:
# `<!-- readme-check: skip: REASON -->`, `setup: COMMANDS`, `serve: DIR at 127.0.0.1:8080`,
# `needs: gdal` on the line before a block); a difference is printed as a unified diff naming
# README's lines, and the script exits 1. `swift run tilepack` and `swift build` in a block work as
# from the repository's root (the second builds there: the tiler's example builds its release). Skipped blocks are printed with their reasons. nginx (a serve marker) listens on
# 127.0.0.1 only and is stopped at the end of its block, or by the trap below.
#   bash tools/check-readme.sh [README]    (default README.md; CI runs it after the tiler's tests)
# CHECK_README_TIMEOUT (seconds, default 300) bounds each command, or each plain block.
set -euo pipefail
cd "$(dirname "$0")/.."
readme="${1:-README.md}"
[ -f "$readme" ] || { echo "check-readme: no $readme" >&2; exit 2; }

# The debug build (after `swift test`, as in CI, this builds nothing).
swift build --product tilepack >/dev/null || { echo "check-readme: swift build --product tilepack failed" >&2; exit 1; }
tilepack="$(swift build --show-bin-path)/tilepack"
[ -x "$tilepack" ] || { echo "check-readme: $tilepack was not built" >&2; exit 1; }
if grep -q 'readme-check: serve:' "$readme" && [ ! -x /usr/sbin/nginx ]; then
  echo "check-readme: a block needs nginx (/usr/sbin/nginx; CI installs nginx-light)" >&2; exit 1
fi

tmp="$(mktemp -d)"
cleanup() {
  # nginx is the Python script's child and stopped by it; this covers a Python killed mid-block.
  if [ -f "$tmp/state/nginx/nginx.pid" ]; then kill "$(cat "$tmp/state/nginx/nginx.pid")" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
mkdir -p "$tmp/work" "$tmp/bin" "$tmp/state"
tar --exclude=.build -cf - samples | tar -C "$tmp/work" -xf -    # a copy: blocks may change what they are given
ln -s "$tilepack" "$tmp/bin/tilepack"
# README's `swift run tilepack ...` and `swift build ...` lines, as a reader runs them from the
# repository's root: the first is the tilepack above, the second a real build in the repository.
cat > "$tmp/bin/swift" <<SHIM
#!/usr/bin/env bash
case "\${1:-}" in
  run) [ "\${2:-}" = tilepack ] && { shift 2; exec tilepack "\$@"; } ;;
  build) shift; cd "$PWD" && exec "$(command -v swift)" build "\$@" ;;
esac
echo "check-readme: README's blocks may use 'swift run tilepack' and 'swift build', not: swift \$*" >&2
exit 2
SHIM
chmod +x "$tmp/bin/swift"

echo "check-readme: running $readme's sh blocks in $tmp/work with $tilepack"
PATH="$tmp/bin:$PATH" python3 tools/readme_examples.py "$readme" "$tmp/work" --state "$tmp/state" \
  --timeout "${CHECK_README_TIMEOUT:-300}"
