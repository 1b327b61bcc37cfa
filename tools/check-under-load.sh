#!/usr/bin/env bash
# Runs the test suites that carry deadlines (HTTP, Remote, Prefetch, TileLayer, and the server's)
# several times with the machine loaded by stress-ng beside them, and the whole `swift test` as
# many times as asked, and prints how many runs of each passed and how long each took. A test's
# verdict must not depend on how busy the machine is: every run must pass.
#
#   bash tools/check-under-load.sh [--runs N] [--full-runs M] [--cpu K]
#       N runs of the deadline suites (default 5), M of the whole suite (default 2), and
#       stress-ng --cpu K beside them (default 4: a load of about 6 on a 2-core machine)
#
# Not part of CI (it takes most of an hour); run it after changing a test that waits on a clock.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=5 full=2 cpu=4
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --full-runs) full="$2"; shift 2 ;;
    --cpu) cpu="$2"; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "check-under-load.sh: unknown argument '$1' (see --help)" >&2; exit 64 ;;
  esac
done
command -v stress-ng >/dev/null || { echo "installing stress-ng"; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq stress-ng >/dev/null; }

swift build --build-tests
swift build --package-path server --build-tests
log="$(mktemp -d)"
stress-ng --cpu "$cpu" --timeout 3h --quiet &
stress=$!
trap 'kill $stress 2>/dev/null || true; wait $stress 2>/dev/null || true' EXIT
sleep 5

suites='TilepackHTTPTests|TilepackRemoteTests|TilepackPrefetchTests|TileLayerTests'
failed=0
run() { # NAME LOGFILE COMMAND...
  local name="$1" file="$2"; shift 2
  local start status=0
  start=$(date +%s)
  "$@" > "$file" 2>&1 || status=$?
  local load; load=$(cut -d' ' -f1 /proc/loadavg)
  if [ $status -eq 0 ]; then echo "$name: passed in $(( $(date +%s) - start )) s (load $load)"
  else echo "$name: FAILED in $(( $(date +%s) - start )) s (load $load), log $file"; grep -E '✘|error:' "$file" | head -20; failed=$((failed + 1)); fi
}
for i in $(seq 1 "$runs"); do
  run "deadline suites, run $i of $runs" "$log/suites-$i.log" swift test --skip-build --filter "$suites"
  run "server suites, run $i of $runs" "$log/server-$i.log" swift test --skip-build --package-path server
done
for i in $(seq 1 "$full"); do
  run "swift test, run $i of $full" "$log/full-$i.log" swift test --skip-build
done
echo "under stress-ng --cpu $cpu: $failed failed run(s); logs in $log"
[ $failed -eq 0 ]
