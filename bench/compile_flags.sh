#!/usr/bin/env bash
# The compiler settings hack/tools.sh builds every tool with, against the ones before them, on one
# tool built from an empty Go build cache (a cold CI's case: its run is CPU-bound, docs/tests.md).
#
#   bench/compile_flags.sh today|before|off [MODULE@VERSION PACKAGE...]   (default: kwok's two commands)
#   farm-bench -n 3 --warmup 0 --timeout 1500 --vs 'bench/compile_flags.sh before' -- bench/compile_flags.sh today
#
# today:  GOGC=400 GOMEMLIMIT=3GiB and -gcflags=all=-dwarf=false (hack/tools.sh, since 4bdd033);
# before: Go's default collector, DWARF compiled and then stripped at link.
# off:    today's, with the collector off until a heap nears GOMEMLIMIT (GOGC=off): tried against
#         today on 2026-11-30, no better (docs/benchmarks.md).
# Both: -trimpath, -ldflags "-s -w", no cgo; the module downloads are the machine's (warm), the
# build cache is a new empty one per run, removed afterwards.
set -euo pipefail
which=${1:?today or before}
shift
module=${1:-sigs.k8s.io/kwok@v0.8.0}
[ $# -gt 0 ] && shift
packages=("$@")
[ ${#packages[@]} -gt 0 ] || packages=(sigs.k8s.io/kwok/cmd/kwok sigs.k8s.io/kwok/cmd/kwokctl)

work=$(mktemp -d -t tfk8s-compile-flags.XXXXXX)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
export GOFLAGS=-mod=mod GOSUMDB=off CGO_ENABLED=0 GOCACHE=$work/cache
cd "$work"
printf 'module tfk8s.local/bench\n\ngo 1.25\n' >go.mod
go get "$module" 2>/dev/null
case $which in
  today) GOGC=400 GOMEMLIMIT=3GiB go build -trimpath -gcflags=all=-dwarf=false -ldflags "-s -w" -o "$work/bin/" "${packages[@]}" ;;
  off) GOGC=off GOMEMLIMIT=3GiB go build -trimpath -gcflags=all=-dwarf=false -ldflags "-s -w" -o "$work/bin/" "${packages[@]}" ;;
  before) go build -trimpath -ldflags "-s -w" -o "$work/bin/" "${packages[@]}" ;;
  *) echo "usage: $0 today|before|off [MODULE@VERSION PACKAGE...]" >&2; exit 2 ;;
esac
