#!/usr/bin/env bash
# What `make up` and the real node build on a fresh machine, by one revision's hack/tools.sh: the
# toolchain module (one module for the CLI, the provider, etcd, the control plane and the node's
# tools, since it landed) against the modules of their own before it. A cold CI's case: its run is
# CPU-bound (docs/tests.md).
#
#   bench/toolchain_module.sh REV        (a commit of this repository)
#   farm-bench -n 1 --warmup 0 --timeout 3600 --vs 'bench/toolchain_module.sh BEFORE' -- bench/toolchain_module.sh AFTER
#
# Each run: REV's hack/ in a new directory, `hack/tools.sh main` then `hack/tools.sh node` with a
# new empty tool cache and Go build cache (removed afterwards), a PATH without any tfk8s tool (so
# nothing is found already built), and the machine's Go module downloads (warm: compiling is what
# is measured, not the proxy). The CPU-seconds of each tool's build are in the tools' log lines.
set -euo pipefail
rev=${1:?usage: $0 REV}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

work=$(mktemp -d -t tfk8s-toolchain-bench.XXXXXX)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
git -C "$repo" archive "$rev" hack | tar -x -C "$work"
export TFK8S_CACHE=$work/cache GOCACHE=$work/go-build
export PATH=$(dirname "$(command -v go)"):/usr/local/bin:/usr/bin:/bin
"$work/hack/tools.sh" main
"$work/hack/tools.sh" node
