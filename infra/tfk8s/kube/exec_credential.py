"""A kubeconfig user's exec plugin, run as kubectl and the provider run it (client-go's credential
plugin contract): what EKS (`aws eks get-token`), GKE (`gke-gcloud-auth-plugin`), OIDC helpers and
the like give instead of a certificate or token in the file.

The plugin is the `exec.command` with `exec.args`, this process's environment plus `exec.env`, and
`KUBERNETES_EXEC_INFO` (an ExecCredential request: non-interactive, and the cluster when
`provideClusterInfo`); it prints an ExecCredential whose `status` holds a bearer token, or a client
certificate and key (PEM). A program run asks once: its requests take a few seconds.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tfk8s.errors import Tfk8sError

API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
TIMEOUT_SECONDS = 60
KEY = "users[].user.exec"


class ExecCredentialError(Tfk8sError):
    """The plugin could not give a credential; the message names the kubeconfig key, the plugin and why."""


@dataclass(frozen=True)
class Credential:
    token: str | None = None
    client_certificate: str | None = None
    """PEM, with `client_key`."""
    client_key: str | None = None


def run(spec: Mapping[str, Any], server: str, cluster: Mapping[str, Any]) -> Credential:
    """The credential `spec` (a kubeconfig user's `exec`) prints for the cluster at `server`."""
    api_version = spec.get("apiVersion")
    if api_version not in API_VERSIONS:
        raise ExecCredentialError(f"{KEY}.apiVersion {api_version!r}: tfk8s speaks {' and '.join(API_VERSIONS)}")
    command = str(spec.get("command") or "")
    found = shutil.which(command) if command else None
    if found is None:
        hint = f" ({spec['installHint'].strip()})" if spec.get("installHint") else ""
        raise ExecCredentialError(f"{KEY}.command {command!r}: not found on PATH{hint}")
    env = {**os.environ, **{e["name"]: e["value"] for e in spec.get("env") or []}}
    env["KUBERNETES_EXEC_INFO"] = json.dumps(_request(str(api_version), spec, server, cluster))
    try:
        done = subprocess.run(
            [found, *[str(a) for a in spec.get("args") or []]],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_SECONDS,
        )
    except subprocess.TimeoutExpired:
        raise ExecCredentialError(f"{KEY}.command {command!r}: no credential within {TIMEOUT_SECONDS} s") from None
    if done.returncode != 0:
        why = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "no message"
        raise ExecCredentialError(f"{KEY}.command {command!r} exited {done.returncode}: {why}")
    return _parsed(done.stdout, command, str(api_version))


def _request(api_version: str, spec: Mapping[str, Any], server: str, cluster: Mapping[str, Any]) -> dict[str, Any]:
    request: dict[str, Any] = {"apiVersion": api_version, "kind": "ExecCredential", "spec": {"interactive": False}}
    if spec.get("provideClusterInfo"):
        info: dict[str, Any] = {"server": server}
        if cluster.get("certificate-authority-data"):
            info["certificate-authority-data"] = cluster["certificate-authority-data"]
        if cluster.get("insecure-skip-tls-verify"):
            info["insecure-skip-tls-verify"] = True
        request["spec"]["cluster"] = info
    return request


def _parsed(stdout: str, command: str, api_version: str) -> Credential:
    try:
        answer = json.loads(stdout)
    except ValueError:
        raise ExecCredentialError(f"{KEY}.command {command!r} printed no ExecCredential JSON") from None
    if not isinstance(answer, dict) or answer.get("kind") != "ExecCredential" or answer.get("apiVersion") != api_version:
        raise ExecCredentialError(f"{KEY}.command {command!r} printed no ExecCredential of {api_version}")
    status = answer.get("status") or {}
    credential = Credential(status.get("token"), status.get("clientCertificateData"), status.get("clientKeyData"))
    if not credential.token and not (credential.client_certificate and credential.client_key):
        raise ExecCredentialError(
            f"{KEY}.command {command!r}: its ExecCredential has neither a token nor a client certificate and key"
        )
    return credential
