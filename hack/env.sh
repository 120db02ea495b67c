#!/usr/bin/env bash
# Prints the environment for plain `pulumi` commands on this checkout and the local cluster:
#
#   eval "$(make env)"      # or: eval "$(hack/env.sh)"
#   pulumi stack select dev && pulumi preview
#
# - PATH: the toolchain hack/tools.sh builds (pulumi, our pulumi-language-python, kubectl, kwokctl),
#   then this checkout's virtualenv (the `tfk8s` command: status, logs, doctor)
# - PULUMI_HOME: its plugin cache, where the locally built Kubernetes provider is registered
# - PULUMI_BACKEND_URL: a local file backend in .state/ of this checkout (unless already set)
# - the passphrase: kept if PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE is already
#   set (a team's shared passphrase); otherwise a file generated once, beside the state it opens
#   (.state/passphrase: a cache can be emptied, the key to the state's secrets must not go with it;
#   one kept in the cache by earlier versions is carried over; docs/guide/usage.md "Secrets and the
#   passphrase")
# - PULUMI_PARALLEL_DIFF: the engine diffs resources in parallel
# - GOGC, GOMEMLIMIT: Go's collector runs less often in pulumi and its plugins (unless already set)
# - PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER: a stack file without a salt reuses its state's
# - Pulumi's automatic logs: off in this PULUMI_HOME unless TFK8S_PULUMI_LOGS=1 (below)
# - KUBECONFIG: the local kwok cluster's own kubeconfig (unless already set)
#
# `hack/env.sh --tenant alice` is alice's environment for her experiments, which holds nothing of
# the platform team's or of another tenant (docs/security.md "Security model"): her own state
# (.state/tenants/alice/backend), her own passphrase (.state/tenants/alice/passphrase) and her own
# kubeconfig (the client certificate `hack/cluster.sh user-kubeconfig alice` mints). Unlike the
# team's environment, it keeps none of those already set: in a shell that ran `eval "$(make env)"`
# first they are the team's (state, passphrase, cluster-admin kubeconfig), so they are replaced,
# and the replaced ones are named on stderr. `make env` in that shell later brings the team's back.
set -euo pipefail

tenant=""
if [ "${1:-}" = --tenant ]; then
  tenant=${2:-}
  case $tenant in *[!a-z0-9-]* | "") echo "env.sh: --tenant $tenant: not a tenant user name (a-z, 0-9, -)" >&2; exit 2 ;; esac
elif [ $# -gt 0 ]; then
  echo "usage: hack/env.sh [--tenant USER]" >&2
  exit 2
fi

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${TFK8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tfk8s}

quote() { printf '%q' "$1"; }
emit() { printf 'export %s=%s\n' "$1" "$(quote "$2")"; }

state=$root/.state/backend passphrase=$root/.state/passphrase kubeconfig=$cache/kwok/${TFK8S_CLUSTER_NAME:-tfk8s}.kubeconfig
# Where versions before 0.4 generated it: in the cache, which `rm -rf ~/.cache` takes away.
cached_passphrase=$cache/passphrase
if [ -n "$tenant" ]; then
  state=$root/.state/tenants/$tenant/backend passphrase=$root/.state/tenants/$tenant/passphrase
  cached_passphrase=$cache/passphrases/$tenant
  kubeconfig=$cache/kwok/${TFK8S_CLUSTER_NAME:-tfk8s}.user-$tenant.kubeconfig
fi
mkdir -p "$state"
emit PATH "$cache/bin:$root/.venv/bin:$PATH"
# Who the shell acts as. A tenant's environment replaces the team's (state, passphrase, kubeconfig)
# and remembers where the team's were (TFK8S_TEAM_<name>: the backend URL, the passphrase file and
# the kubeconfig, paths only, never a passphrase), so that `make env` afterwards goes back to them
# instead of keeping the tenant's as its own.
personal="PULUMI_BACKEND_URL PULUMI_CONFIG_PASSPHRASE_FILE KUBECONFIG"
if [ -n "$tenant" ]; then
  replaced=()
  for name in $personal PULUMI_CONFIG_PASSPHRASE; do
    if [ -n "${!name:-}" ]; then replaced+=("$name"); fi
  done
  if [ -z "${TFK8S_TENANT:-}" ]; then  # from the team's environment: remember it
    for name in $personal; do if [ -n "${!name:-}" ]; then emit "TFK8S_TEAM_$name" "${!name}"; fi; done
  fi
  emit TFK8S_TENANT "$tenant"
  if [ -n "${PULUMI_CONFIG_PASSPHRASE:-}" ]; then
    echo "env.sh: the team's PULUMI_CONFIG_PASSPHRASE is not kept for $tenant, nor brought back by make env: keep it in a file (PULUMI_CONFIG_PASSPHRASE_FILE)" >&2
  fi
  unset $personal PULUMI_CONFIG_PASSPHRASE
  echo "unset PULUMI_CONFIG_PASSPHRASE"
  if [ ${#replaced[@]} -gt 0 ]; then
    echo "env.sh: --tenant $tenant: replaced ${replaced[*]} (${TFK8S_TENANT:-the team}'s) with $tenant's own" >&2
  fi
elif [ -n "${TFK8S_TENANT:-}" ]; then  # back from a tenant's environment to the team's it replaced
  unset PULUMI_CONFIG_PASSPHRASE
  for name in $personal; do
    saved=TFK8S_TEAM_$name
    if [ -n "${!saved:-}" ]; then export "$name=${!saved}"; else unset "$name"; echo "unset $name"; fi
    echo "unset $saved"
  done
  [ -z "${PULUMI_CONFIG_PASSPHRASE_FILE:-}" ] || emit PULUMI_CONFIG_PASSPHRASE_FILE "$PULUMI_CONFIG_PASSPHRASE_FILE"
  echo "unset TFK8S_TENANT"
  echo "env.sh: back to the team's environment from ${TFK8S_TENANT}'s" >&2
fi
pulumi_home=$cache/pulumi-home
emit PULUMI_HOME "$pulumi_home"
# Pulumi writes an automatic log of every command under $PULUMI_HOME/logs, and has no switch to
# turn it off (pulumi/pulumi#23731 made it unconditional; #22416 asks for an opt-out): every
# verbose engine line is formatted with the resources' properties, compressed and encrypted.
# For the dev experiment that is 1.3 MB and 0.19 s of a 1.14 s no-change `up`
# (docs/benchmarks.md "Fixed cost"). Where that directory cannot be made, Pulumi runs without the logs as designed
# ("automatic logging unavailable"), so a file stands in its place. TFK8S_PULUMI_LOGS=1 before
# `make env` gives Pulumi its directory back; logs written before are moved aside, never deleted.
logs=$pulumi_home/logs
mkdir -p "$pulumi_home"
if [ "${TFK8S_PULUMI_LOGS:-0}" = 1 ]; then
  if [ -f "$logs" ]; then rm -f "$logs"; fi
elif [ ! -f "$logs" ]; then
  if [ -d "$logs" ]; then
    kept=$pulumi_home/logs-kept-$(date +%Y%m%dT%H%M%S)-$$
    if mv -T "$logs" "$kept" 2>/dev/null; then
      echo "env.sh: Pulumi's automatic logs are off (TFK8S_PULUMI_LOGS=1 turns them on); the earlier ones are in $kept" >&2
    fi
  fi
  # Atomically, and never into a directory a concurrent command may have made meanwhile (-T).
  printf '%s\n' "Not a directory on purpose: Pulumi writes no automatic logs here (hack/env.sh; TFK8S_PULUMI_LOGS=1 turns them on)." >"$logs.$$"
  mv -fT "$logs.$$" "$logs" 2>/dev/null || rm -f "$logs.$$"
fi
emit PULUMI_BACKEND_URL "${PULUMI_BACKEND_URL:-file://$state}"
emit PULUMI_SKIP_UPDATE_CHECK true
# Nothing can be downloaded from get.pulumi.com here: fail fast instead of retrying.
emit PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION true
# The engine diffs a program's resources in parallel instead of one after the other: a no-change
# `up` of a 3-cluster experiment 1.81 -> 1.71 s, of the dev experiment 1.40 -> 1.38 s
# (docs/benchmarks.md "Fixed cost"). Pulumi's own switch; set it to false to go back.
emit PULUMI_PARALLEL_DIFF "${PULUMI_PARALLEL_DIFF:-true}"
# The CLI and the Kubernetes provider are Go programs that allocate much in a short run (the whole
# state, the cluster's OpenAPI schema), and Go's collector, at its default (GOGC=100: collect
# whenever the heap doubled), ran many times per command. GOGC=1000 lets the heap grow to 11x what
# is live before collecting; GOMEMLIMIT caps that growth (a soft limit: the collector runs more
# often near it). The plugins the CLI starts inherit both. Dev experiment, side by side: CPU per
# no-change `up`, the CLI 0.43 -> 0.37 s and the provider 0.165 -> 0.12 s; no-change `up` 0.776 ->
# 0.717 s, `preview` 0.732 -> 0.690 s (medians of 6-11); the largest process's peak memory
# 119 -> 137 MiB (docs/benchmarks.md "Fixed cost"). Every Go program run from this shell gets them too
# (kubectl, kwokctl): export your own values before `make env` to keep them.
emit GOGC "${GOGC:-1000}"
emit GOMEMLIMIT "${GOMEMLIMIT:-1GiB}"
# A stack file without `encryptionsalt` (the repository's demo stacks carry none) takes the salt
# recorded in the stack's state, instead of a new one that could not decrypt that state's secrets.
emit PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER true
if [ -z "${PULUMI_CONFIG_PASSPHRASE:-}" ] && [ -z "${PULUMI_CONFIG_PASSPHRASE_FILE:-}" ]; then
  if [ ! -s "$passphrase" ]; then
    mkdir -p "$(dirname "$passphrase")"
    # Written aside and moved in without replacing: of two shells that generate it at once (the
    # tests' parallel workers), the first one's stays and both use it. A passphrase the cache kept
    # is copied, not moved: another checkout's state may need it too.
    if [ -s "$cached_passphrase" ]; then
      (umask 077 && cp "$cached_passphrase" "$passphrase.$$")
    else
      (umask 077 && head -c 32 /dev/urandom | base64 | tr -d '\n=' >"$passphrase.$$")
    fi
    mv -n "$passphrase.$$" "$passphrase" || true
    rm -f "$passphrase.$$"
  fi
  emit PULUMI_CONFIG_PASSPHRASE_FILE "$passphrase"
fi
emit KUBECONFIG "${KUBECONFIG:-$kubeconfig}"
