#!/usr/bin/env bash
# Fails when a source, test, script, manifest or CI step names a folder outside the repository
# (the `shared` folder beside the clone that a user who clones tilepack does not have). Test data
# lives in Tests/Fixtures; TILEPACK_FIXTURES may name another folder of the same layout at run time.
#   bash tools/check-self-contained.sh
set -euo pipefail
cd "$(dirname "$0")/.."
outside='\.\./shared|shared/(fixtures|seeds)'
found=$(grep -rnE "$outside" Sources Tests tools .ci server tiler samples Package.swift \
    --exclude-dir='.build*' --exclude-dir=Fixtures --exclude=check-self-contained.sh 2>/dev/null || true)
if [ -n "$found" ]; then
    echo "FAIL: these name a folder outside the repository (a clone has nothing beside it):"
    echo "$found"
    exit 1
fi
echo "check-self-contained: nothing in Sources, Tests, tools, .ci, server, tiler or samples reads outside the repository"
