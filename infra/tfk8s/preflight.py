"""Before anything is declared: is there a Kubernetes cluster to talk to?

Without this, a stopped or missing cluster surfaces as the provider's "failed to read resource
state due to unreachable cluster" with advice to set PULUMI_K8S_DELETE_UNREACHABLE, which would
drop the stack's resources from its state: the wrong fix for "the cluster is not started".

The check mirrors how the default Kubernetes provider finds its cluster: the `kubernetes:kubeconfig`
config if set (then we trust it), else `KUBECONFIG` (a list of files) or `~/.kube/config`, else
in-cluster credentials (as a GitOps runner pod has). It only opens a TCP connection to the
current context's API server; authentication stays the provider's business.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pulumi
import yaml

CONNECT_TIMEOUT_SECONDS = 3.0
FIX = 'start the local cluster (`make cluster`) or point KUBECONFIG at your cluster, then `eval "$(make env)"` again'


class ClusterUnreachable(pulumi.RunError):
    """No cluster to deploy to; the message names the kubeconfig and the fix."""


def kubeconfig_files(environ: Mapping[str, str]) -> list[Path]:
    listed = environ.get("KUBECONFIG")
    if listed:
        return [Path(p) for p in listed.split(os.pathsep) if p]
    return [Path(environ.get("HOME", str(Path.home()))) / ".kube" / "config"]


def api_server(documents: list[dict[str, Any]]) -> str | None:
    """The server URL of the current context, merged across kubeconfig files as kubectl does (first wins)."""
    current = next((d.get("current-context") for d in documents if d.get("current-context")), None)
    # Later entries overwrite earlier ones in a dict, so walk from the last file's last entry back.
    backwards = list(reversed(documents))
    contexts = {c["name"]: c.get("context", {}) for d in backwards for c in reversed(d.get("contexts") or [])}
    clusters = {c["name"]: c.get("cluster", {}) for d in backwards for c in reversed(d.get("clusters") or [])}
    cluster = clusters.get(contexts.get(current or "", {}).get("cluster", ""), {})
    return cluster.get("server")


def check_cluster(environ: Mapping[str, str], kubeconfig_in_config: bool) -> None:
    """Raise ClusterUnreachable with the fix, or return when there is a cluster worth asking."""
    if kubeconfig_in_config:
        return
    files = kubeconfig_files(environ)
    present = [f for f in files if f.is_file()]
    if not present:
        if environ.get("KUBERNETES_SERVICE_HOST"):
            return  # in-cluster credentials, as the provider uses them
        shown = os.pathsep.join(str(f) for f in files)
        raise ClusterUnreachable(f"no Kubernetes cluster: the kubeconfig {shown} does not exist; {FIX}")
    documents = [yaml.safe_load(f.read_text()) or {} for f in present]
    server = api_server(documents)
    if not server:
        raise ClusterUnreachable(f"no current context with a cluster server in {present[0]}; {FIX}")
    url = urlsplit(server)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((url.hostname or "", port), timeout=CONNECT_TIMEOUT_SECONDS).close()
    except OSError as error:
        raise ClusterUnreachable(
            f"the Kubernetes API server {server} (from {present[0]}) does not answer ({error}); {FIX}"
        ) from None
