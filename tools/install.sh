#!/usr/bin/env bash
# Builds the release `tilepack` command and the programs it runs (`tilepack-serve`, and
# `tilepack-tile` where GDAL is installed), the Swift runtime and Foundation linked in so they run
# without the toolchain, strips them, installs them on the PATH, and says which Debian runtime
# packages a machine without the toolchain needs to run them.
#
#   bash tools/install.sh                  installs into /usr/local/bin (root or sudo)
#   bash tools/install.sh --prefix ~/.local    installs into ~/.local/bin
set -euo pipefail
cd "$(dirname "$0")/.."

prefix=/usr/local
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix="$2"; shift 2 ;;
    --prefix=*) prefix="${1#--prefix=}"; shift ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown argument '$1' (see --help)" >&2; exit 64 ;;
  esac
done

bash .ci/run --deps-only

# The executables that make the command: `tilepack`, the server `tilepack-serve` that `tilepack
# serve` runs, from its own package (server/), and the raster tiler `tilepack-tile` that `tilepack
# tile` runs (tiler/, the one program that links GDAL: built when GDAL's library is installed),
# each as PRODUCT:PACKAGE-FOLDER.
products=(tilepack)
builds=(tilepack:.)
[ -f server/Package.swift ] && products+=(tilepack-serve) && builds+=(tilepack-serve:server)
skipped=""
if [ -f tiler/Package.swift ]; then
  if pkg-config --exists gdal 2>/dev/null; then
    products+=(tilepack-tile) && builds+=(tilepack-tile:tiler)
  else
    skipped="tilepack-tile (tilepack tile): GDAL's library is not installed; apt-get install libgdal-dev, then run this again"
    echo "skipping $skipped"
  fi
fi

declare -A bins
for build in "${builds[@]}"; do
  product="${build%%:*}" package="${build#*:}"
  echo "building $product (release, static Swift runtime) ..."
  flags=(-c release --static-swift-stdlib --package-path "$package" --scratch-path "$package/.build-static")
  swift build "${flags[@]}" --product "$product"
  bins[$product]="$(swift build "${flags[@]}" --show-bin-path)"
done

SUDO=""
mkdir -p "$prefix/bin" 2>/dev/null || true
[ -w "$prefix/bin" ] || SUDO="sudo"
for product in "${products[@]}"; do
  $SUDO install -m 0755 -s "${bins[$product]}/$product" "$prefix/bin/$product"
  size=$(stat -c %s "$prefix/bin/$product")
  echo "installed $prefix/bin/$product ($((size / 1024 / 1024)) MiB stripped)"
done

# The shared libraries the binaries name (their own dependencies come with apt), and the Debian
# packages that hold them.
libs=$(for product in "${products[@]}"; do
  needed=$(readelf -d "$prefix/bin/$product" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  for name in $needed; do ldd "$prefix/bin/$product" | awk -v n="$name" '$1 == n && $3 ~ /^\// {print $3}'; done
done | sort -u)
runtime=$(for lib in $libs; do dpkg -S "$lib" 2>/dev/null || dpkg -S "$(readlink -f "$lib")" 2>/dev/null; done \
  | cut -d: -f1 | sort -u | grep -v -E '^(libc6|libgcc-s1|libstdc\+\+6)$' | tr '\n' ' ')
echo
echo "shared libraries it names:"
for lib in $libs; do echo "  $lib"; done
echo
echo "on a Debian 12 machine without the Swift toolchain, first run:"
echo "  apt-get install $runtime"
[ -n "$skipped" ] && { echo; echo "not installed: $skipped"; }
case ":$PATH:" in
  *":$prefix/bin:"*) ;;
  *) echo; echo "note: $prefix/bin is not on your PATH" ;;
esac
