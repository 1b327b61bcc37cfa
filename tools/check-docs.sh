#!/usr/bin/env bash
# The library's documentation, checked: builds the DocC catalog of `import Tilepack`
# (Sources/Tilepack/Tilepack.docc) with the toolchain's own `docc` over the symbol graphs of the
# debug build, failing on any docc warning; checks that each article's Swift code is, line for
# line, the compiled sample in Tests/TilepackUmbrellaTests/DocSamples; runs those samples.
#   bash tools/check-docs.sh [--no-tests]    (--no-tests: skip running the samples)
# The archive is left in .build/docs/Tilepack.doccarchive; to browse the catalog:
#   docc preview Sources/Tilepack/Tilepack.docc --additional-symbol-graph-dir .build/docs/symbol-graphs
# Builds in debug, incrementally: after `swift test` (as in CI) it compiles nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

catalog=Sources/Tilepack/Tilepack.docc
samples=Tests/TilepackUmbrellaTests/DocSamples
out=.build/docs
failed=0

# 1. Each article has one Swift code block, and it is its sample's code between the markers.
for article in "$catalog"/Articles/*.md; do
  name=$(basename "$article" .md)
  sample="$samples/$name.swift"
  if [ ! -f "$sample" ]; then
    echo "check-docs: $article has no compiled sample $sample" >&2; failed=1; continue
  fi
  blocks=$(grep -c '^```swift$' "$article" || true)
  if [ "$blocks" != 1 ]; then
    echo "check-docs: $article has $blocks Swift code blocks; it must have one, the code of $sample" >&2; failed=1; continue
  fi
  if ! diff -u --label "$sample (between // docs:begin and // docs:end)" --label "$article (its swift block)" \
      <(sed -n '/^\/\/ docs:begin$/,/^\/\/ docs:end$/p' "$sample" | sed '1d;$d') \
      <(sed -n '/^```swift$/,/^```$/p' "$article" | sed '1d;$d'); then
    echo "check-docs: the code in $article differs from $sample" >&2; failed=1
  fi
done
for sample in "$samples"/*.swift; do
  name=$(basename "$sample" .swift)
  if grep -q '^// docs:begin$' "$sample" && [ ! -f "$catalog/Articles/$name.md" ]; then
    echo "check-docs: $sample is marked as an article's code but $catalog/Articles/$name.md does not exist" >&2; failed=1
  fi
done
[ "$failed" = 0 ] || exit 1

# 2. The debug build (the samples compile with it) and the symbol graph of the `Tilepack` module,
# with the symbols of the modules it re-exports (`@_exported import`).
swift build --build-tests
bin=.build/debug  # SwiftPM's link to the debug build's folder
swift_bin=$(dirname "$(readlink -f "$(command -v swift)")")
# (whole modules, and the modules of the declarations re-exported one by one: `import class M.T`)
reexported=$(sed -n 's/^@_exported import \(\(class\|struct\|enum\) \)\{0,1\}\([A-Za-z]*\).*$/\3/p' Sources/Tilepack/Tilepack.swift | sort -u | paste -sd, -)
rm -rf "$out" && mkdir -p "$out/symbol-graphs"
# The C modules' module maps, for the Swift modules that import them.
cflags=()
for map in Sources/CTilepack*/module.modulemap Sources/CTilepack*/include/module.modulemap; do
  [ -f "$map" ] && cflags+=(-Xcc "-fmodule-map-file=$PWD/$map" -Xcc "-I$PWD/$(dirname "$map")")
done
# The system libraries' headers, as Package.swift names them for pkg-config.
for pc in $(sed -n 's/.*systemLibrary("[A-Za-z0-9]*", pkgConfig: "\([^"]*\)".*/\1/p' Package.swift); do
  for flag in $(pkg-config --cflags-only-I "$pc"); do cflags+=(-Xcc "$flag"); done
done
"$swift_bin/swift-symbolgraph-extract" -module-name Tilepack -target "$(swift -print-target-info | sed -n 's/.*"triple": "\(.*\)".*/\1/p' | head -1)" \
  -I "$bin/Modules" "${cflags[@]}" -minimum-access-level public -skip-inherited-docs \
  -experimental-allowed-reexported-modules="$reexported" -output-dir "$out/symbol-graphs"

# 3. The catalog, with every docc warning (an unresolved link, a missing topic) an error.
"$swift_bin/docc" convert "$catalog" --additional-symbol-graph-dir "$out/symbol-graphs" \
  --output-path "$out/Tilepack.doccarchive" --fallback-display-name Tilepack --fallback-bundle-identifier org.tilepack.Tilepack \
  --warnings-as-errors 2>&1 | tee "$out/docc.log"
if grep -qiE 'warning:|error:' "$out/docc.log"; then
  echo "check-docs: docc reported problems (above)" >&2; exit 1
fi
echo "check-docs: $out/Tilepack.doccarchive built without warnings"

# 4. The articles' code, run against samples/sample.tilepack and a loopback tile server.
[ "${1:-}" = "--no-tests" ] || swift test --skip-build --filter DocSampleTests
