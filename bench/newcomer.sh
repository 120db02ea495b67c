#!/usr/bin/env bash
# The newcomer's path, timed (docs/benchmarks.md#newcomer): a clone of this repository, then the
# README's real-node block as a newcomer types it (make up-real-node, make status WATCH=1, make
# down), then git status, which must be clean. Prints each command's seconds; make up-real-node
# prints its own stages (lab/demo_real_node.py: the cluster, the images, the stacks, the first step
# `tfk8s status` shows) and hack/tools.sh each tool's.
#
#   bench/newcomer.sh [--empty-caches] [CLONE_DIR]     (root: the real node; default CLONE_DIR: a temp dir)
#
# --empty-caches first removes what a new machine lacks, so the run is cold: tfk8s's tools, images
# and clusters (~/.cache/tfk8s, no cluster may be running), Go's module and build caches, pip's cache.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
empty=false
if [ "${1:-}" = --empty-caches ]; then empty=true; shift; fi
clone=${1:-$(mktemp -d -t tfk8s-newcomer.XXXXXX)/tfk8s}

if $empty; then
  if pgrep -x kwok >/dev/null || pgrep -x kubelet >/dev/null; then
    echo "newcomer.sh: a cluster is running (make down first): its files are in the cache to empty" >&2
    exit 2
  fi
  rm -rf "${TFK8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tfk8s}" "${XDG_CACHE_HOME:-$HOME/.cache}/pip"
  if command -v go >/dev/null; then go clean -modcache && go clean -cache; fi
fi

git clone -q "$repo" "$clone"
cd "$clone"
echo "[newcomer] $(git rev-parse --short HEAD) in $clone; caches emptied: $empty"
timed() {
  local start=$SECONDS rc=0
  "$@" || rc=$?
  echo "[newcomer] $* : exit $rc after $((SECONDS - start)) s"
  return $rc
}
begin=$SECONDS
timed make up-real-node
timed make status WATCH=1
timed make down
changed=$(git status --porcelain)
echo "[newcomer] git status: ${changed:-clean}; $((SECONDS - begin)) s in all"
[ -z "$changed" ]
