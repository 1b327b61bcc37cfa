# Sourced by the benchmarks that need system and PyPI packages (bench-tile.sh, bench-webp.sh).

# apt_need PACKAGE...: installs those of the Debian packages that are not installed yet.
apt_need() {
  local need=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need+=("$p")
  done
  if [ ${#need[@]} -gt 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"; fi
}

# pip_venv DIR PROGRAM PACKAGE...: a venv in DIR with the PyPI packages, unless DIR/bin/PROGRAM exists.
pip_venv() {
  local dir=$1 program=$2
  shift 2
  if [ ! -x "$dir/bin/$program" ]; then
    python3 -m venv "$dir"
    "$dir/bin/pip" install --quiet "$@"
  fi
}
