#!/usr/bin/env bash
# What the tests' background lane builds on a fresh machine (lab/suite.py), by one revision's
# hack/tools.sh: TOOLS in the order given, from an empty build cache. A cold CI builds them beside
# the tests, under `nice`, so their CPU-seconds are what a change to how they build saves there.
#
#   bench/test_tools.sh REV TOOL...      (a commit of this repository; names hack/tools.sh knows)
#   farm-bench -n 1 --warmup 0 --timeout 3600 --vs 'bench/test_tools.sh BEFORE kueue prometheus' \
#     -- bench/test_tools.sh AFTER kueue prometheus
#
# Each run: REV's hack/ in a new directory, a new empty tool cache and Go build cache (removed
# afterwards), a PATH without any tfk8s tool, and the machine's Go module downloads (warm:
# compiling is what is measured, not the proxy). Each tool's CPU-seconds are in its log line.
set -euo pipefail
rev=${1:?usage: $0 REV TOOL...}
shift
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

work=$(mktemp -d -t tfk8s-test-tools-bench.XXXXXX)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
git -C "$repo" archive "$rev" hack | tar -x -C "$work"
export TFK8S_CACHE=$work/cache GOCACHE=$work/go-build
export PATH=$(dirname "$(command -v go)"):/usr/local/bin:/usr/bin:/bin
for tool in "$@"; do
  "$work/hack/tools.sh" "$tool"
done
