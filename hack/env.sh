#!/usr/bin/env bash
# Prints the environment for plain `pulumi` commands on this checkout and the local cluster:
#
#   eval "$(make env)"      # or: eval "$(hack/env.sh)"
#   pulumi stack select dev && pulumi preview
#
# - PATH: the toolchain hack/tools.sh builds (pulumi, our pulumi-language-python, kubectl, kwokctl)
# - PULUMI_HOME: its plugin cache, where the locally built Kubernetes provider is registered
# - PULUMI_BACKEND_URL: a local file backend in .state/ of this checkout (unless already set)
# - the passphrase: kept if PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE is already
#   set (a team's shared passphrase); otherwise a file generated once per machine (see README,
#   "Secrets and the passphrase")
# - PULUMI_PARALLEL_DIFF: the engine diffs resources in parallel
# - PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER: a stack file without a salt reuses its state's
# - KUBECONFIG: the local kwok cluster's own kubeconfig (unless already set)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${TFK8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tfk8s}

quote() { printf '%q' "$1"; }
emit() { printf 'export %s=%s\n' "$1" "$(quote "$2")"; }

mkdir -p "$root/.state/backend"
emit PATH "$cache/bin:$PATH"
emit PULUMI_HOME "$cache/pulumi-home"
emit PULUMI_BACKEND_URL "${PULUMI_BACKEND_URL:-file://$root/.state/backend}"
emit PULUMI_SKIP_UPDATE_CHECK true
# Nothing can be downloaded from get.pulumi.com here: fail fast instead of retrying.
emit PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION true
# The engine diffs a program's resources in parallel instead of one after the other: a no-change
# `up` of a 3-cluster experiment 1.81 -> 1.71 s, of the dev experiment 1.40 -> 1.38 s (README
# "Fixed cost"). Pulumi's own switch; set it to false to go back.
emit PULUMI_PARALLEL_DIFF "${PULUMI_PARALLEL_DIFF:-true}"
# A stack file without `encryptionsalt` (the repository's demo stacks carry none) takes the salt
# recorded in the stack's state, instead of a new one that could not decrypt that state's secrets.
emit PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER true
if [ -z "${PULUMI_CONFIG_PASSPHRASE:-}" ] && [ -z "${PULUMI_CONFIG_PASSPHRASE_FILE:-}" ]; then
  passphrase=$cache/passphrase
  if [ ! -s "$passphrase" ]; then
    mkdir -p "$cache"
    (umask 077 && head -c 32 /dev/urandom | base64 | tr -d '\n=' >"$passphrase")
  fi
  emit PULUMI_CONFIG_PASSPHRASE_FILE "$passphrase"
fi
emit KUBECONFIG "${KUBECONFIG:-$cache/kwok/${TFK8S_CLUSTER_NAME:-tfk8s}.kubeconfig}"
