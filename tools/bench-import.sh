#!/usr/bin/env bash
# Issue 6's import/verify benchmark: builds the tilepack CLI and the benchmark (release), installs
# mb-util (PyPI mbutil 0.3.0) into a venv, and runs tools/Sources/bench-import.
# Trees and outputs go under $BENCH_WORK (default /tmp/tilepack-bench), never into the repository;
# generated trees are kept there and reused by the next run (delete the folder to regenerate).
#
#   tools/bench-import.sh [bench-import options: --small N --large N --rss N,N --runs N --cold ...]
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/bench-lib.sh
work="${BENCH_WORK:-/tmp/tilepack-bench}"
mkdir -p "$work"

# mb-util from PyPI, pinned, in its own venv.
venv="$work/venv"
if [ ! -x "$venv/bin/mb-util" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet "mbutil==0.3.0"
fi

# The CLI as a Linux release is shipped (bench-lib.sh; TILEPACK_BIN=path: that build).
tilepack="$(release_tilepack)"
swift build -c release --package-path tools --product bench-import
swift build -c release --package-path tools --product floor-read
tools_bin="$(swift build -c release --package-path tools --show-bin-path)"

exec "$tools_bin/bench-import" --work "$work" --tilepack "$tilepack" --mb-util "$venv/bin/mb-util" \
    --floor-read "$tools_bin/floor-read" "$@"
