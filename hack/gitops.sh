#!/usr/bin/env bash
# The GitOps pipeline command (docs/guide/gitops.md): what CI runs, and the tests run the same way.
#
#   hack/gitops.sh preview --base <sha> [--head <sha>] [--summary pr.md]   # a pull request
#   hack/gitops.sh preview-state --base <sha> --out DIR                    # a pull request, the team's job
#   hack/gitops.sh preview-kubeconfig [--duration 1h]                      # a pull request, the team's job
#   hack/gitops.sh preview --recorded-state DIR --base <sha> ...           # a pull request, its own job
#   hack/gitops.sh apply   --base <sha> [--head <sha>] [--only STACK]      # a merge
#   hack/gitops.sh drift   [--summary drift.md]                            # a schedule
#   hack/gitops.sh plan    --base <sha> [--json]                           # what would run
#   hack/gitops.sh operator-stack STACK --repo URL                         # in-cluster instead
#
# The team's state and secrets come from the caller's environment (CI: a GitHub environment's), never
# from this machine's defaults: PULUMI_BACKEND_URL (s3://bucket?endpoint=...&s3ForcePathStyle=true
# with AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY; file:// for one machine), PULUMI_CONFIG_PASSPHRASE
# (or _FILE, or TFK8S_SECRETS_PROVIDER such as awskms://...) and KUBECONFIG. The rest (PATH to the
# pinned toolchain, PULUMI_HOME) is what `make env` prints.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# The subcommand: the first word that is one (options such as --checkout DIR may come first).
command=
for word in "$@"; do
  case $word in plan | preview | preview-state | preview-kubeconfig | apply | drift | operator-stack) command=$word && break ;; esac
done
# A pull request's own job holds the preview identity's kubeconfig alone: no state, no passphrase.
for word in "$@"; do
  case $word in --recorded-state | --recorded-state=*) [ "$command" = preview ] && command=preview-recorded ;; esac
done
case $command in
  preview-recorded)
    [ -n "${KUBECONFIG:-}" ] || { echo "gitops: set KUBECONFIG (the preview identity's, tfk8s.specs.preview_identity)" >&2 && exit 2; }
    ;;
  preview-kubeconfig)
    [ -n "${KUBECONFIG:-}" ] || { echo "gitops: set KUBECONFIG (an identity that may mint the preview identity's token)" >&2 && exit 2; }
    ;;
  preview-state)
    [ -n "${PULUMI_BACKEND_URL:-}" ] || { echo "gitops: set PULUMI_BACKEND_URL (the team's state)" >&2 && exit 2; }
    ;;
  preview | apply | drift)
    missing=()
    [ -n "${PULUMI_BACKEND_URL:-}" ] || missing+=("PULUMI_BACKEND_URL (the team's state, e.g. s3://tfk8s-state?endpoint=https://s3.example.com&s3ForcePathStyle=true)")
    if [ -z "${PULUMI_CONFIG_PASSPHRASE:-}${PULUMI_CONFIG_PASSPHRASE_FILE:-}${TFK8S_SECRETS_PROVIDER:-}" ]; then
      missing+=("PULUMI_CONFIG_PASSPHRASE, PULUMI_CONFIG_PASSPHRASE_FILE or TFK8S_SECRETS_PROVIDER (the team's, not a per-machine one)")
    fi
    [ -n "${KUBECONFIG:-}" ] || missing+=("KUBECONFIG (the cluster the stacks deploy to)")
    if [ ${#missing[@]} -gt 0 ]; then
      printf 'gitops: set %s\n' "${missing[@]}" >&2
      exit 2
    fi
    ;;
  *) ;; # plan and operator-stack read git only; usage errors are the command's own
esac
eval "$("$root/hack/env.sh")"
# The entry point of the console script `tfk8s-gitops` (pyproject.toml), on this checkout's code:
# the virtualenv may be another checkout's (the tests' copies, a release's upgrade links one), whose
# bin/ holds that checkout's script or none, so through `python -m`, which calls the same `run`.
export PYTHONPATH="$root/infra${PYTHONPATH:+:$PYTHONPATH}"
exec "$root/.venv/bin/python" -m tfk8s_gitops "$@"
