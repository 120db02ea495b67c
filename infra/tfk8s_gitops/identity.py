"""Who a stack acts as on the cluster when GitOps runs it.

The platforms and tenants the team file declares (`repo.TEAM_FILE`, read from the base of a change:
tfk8s_gitops.plan) are the platform team's: they create cluster-scoped objects and run with the
pipeline's own credentials. Every other stack (an experiment, or a file whose kind its own
preview will refuse) acts as a service account of its own, `system:serviceaccount:tfk8s-gitops:
tfk8s-<stack>`: impersonated by the CLI pipeline (`hack/gitops.sh`), the workspace pod's account
under the operator. That account has rights only where a tenant lists it among its identities
(`tfk8s:tenant.identities.users`), so the API server itself refuses a merged stack file that names
another user's namespace: the experiment's contract read and access check are asked as the stack,
not as the pipeline.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tfk8s.errors import MissingPrerequisite
from tfk8s.kube.client import IMPERSONATION_KEYS
from tfk8s.settings.tenant import GITOPS_NAMESPACE, PREVIEW_ACCOUNT, SERVICE_ACCOUNT_PREFIX


class ImpersonationError(MissingPrerequisite):
    """The pipeline cannot act as a stack's identity; the message names what to change."""


def service_account(stack: str) -> str:
    return f"tfk8s-{stack}"


def identity(stack: str, namespace: str = GITOPS_NAMESPACE) -> str:
    """The user name the API server gives the stack: what its tenant must list."""
    return f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{service_account(stack)}"


def impersonating_kubeconfig(env: Mapping[str, str], stack: str, directory: Path) -> Path:
    """A kubeconfig for `stack`: the pipeline's current context, flattened by kubectl (so relative
    certificate paths survive the move), whose user impersonates the stack's identity. Written
    0600 in `directory` (the run's scratch workspace, removed with it). Refused, before any
    Pulumi command, when the pipeline's user already impersonates someone or may not impersonate
    this account."""
    config = _flattened(env)
    users = config.get("users") or []
    if len(users) != 1:
        raise ImpersonationError("KUBECONFIG: its current context names no user: set current-context")
    user = users[0].setdefault("user", {})
    already = [key for key in IMPERSONATION_KEYS if user.get(key)]  # a user that impersonates cannot again
    if already:
        raise ImpersonationError(
            f"KUBECONFIG: the pipeline's user already impersonates ({', '.join(already)}), and GitOps impersonates each "
            "experiment's own identity: give the pipeline credentials of its own"
        )
    account = service_account(stack)
    allowed = _kubectl(env, "auth", "can-i", "impersonate", f"serviceaccounts/{account}", "--namespace", GITOPS_NAMESPACE)
    if allowed.stdout.strip() != "yes":
        why = allowed.stderr.strip() or "no"
        raise ImpersonationError(
            f"KUBECONFIG: the pipeline's identity may not impersonate {identity(stack)}, the identity stack {stack} "
            f"runs as ({why}): grant it the `impersonate` verb on serviceaccounts in namespace {GITOPS_NAMESPACE}"
        )
    user["as"] = identity(stack)
    path = directory / f"kubeconfig.{stack}.json"
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as out:
        json.dump(config, out)
    return path


def preview_kubeconfig(env: Mapping[str, str], duration: str) -> dict[str, Any]:
    """A kubeconfig of the pull requests' preview identity (`platform.gitops.previewIdentity`): the
    caller's cluster and a token of the preview account minted now for `duration`. The caller needs
    `create` on that account's `serviceaccounts/token` alone (docs/guide/gitops.md)."""
    return minted_kubeconfig(env, PREVIEW_ACCOUNT, GITOPS_NAMESPACE, duration)


def minted_kubeconfig(env: Mapping[str, str], account: str, namespace: str, duration: str) -> dict[str, Any]:
    """A kubeconfig of the service account `namespace`/`account`: the caller's cluster (its server
    and CA, flattened) and a token of the account minted now for `duration`, nothing of the
    caller's own credentials."""
    clusters = _flattened(env).get("clusters") or []
    if len(clusters) != 1:
        raise ImpersonationError("KUBECONFIG: its current context names no cluster: set current-context")
    minted = _kubectl(env, "create", "token", account, "--namespace", namespace, "--duration", duration)
    if minted.returncode != 0:
        raise ImpersonationError(
            f"KUBECONFIG: cannot mint a token of {SERVICE_ACCOUNT_PREFIX}{namespace}:{account} "
            f"({minted.stderr.strip()}): create the account, and grant this identity `create` on its serviceaccounts/token"
        )
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{**clusters[0], "name": account}],
        "users": [{"name": account, "user": {"token": minted.stdout.strip()}}],
        "contexts": [{"name": account, "context": {"cluster": account, "user": account}}],
        "current-context": account,
    }


def _flattened(env: Mapping[str, str]) -> dict[str, Any]:
    """The caller's current context, flattened by kubectl (so relative certificate paths survive the move)."""
    flattened = _kubectl(env, "config", "view", "--flatten", "--minify", "--output", "json")
    if flattened.returncode != 0:
        raise ImpersonationError(f"KUBECONFIG: kubectl cannot read the pipeline's kubeconfig: {flattened.stderr.strip()}")
    config: dict[str, Any] = json.loads(flattened.stdout)
    return config


def _kubectl(env: Mapping[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["kubectl", *args], env=dict(env), capture_output=True, text=True, timeout=60)
