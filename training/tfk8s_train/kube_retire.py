"""Scale a Deployment to zero from inside its own pod (standard library only).

Used by ``launch.py`` so that a retired PS is not restarted by its Deployment: once the
done-marker barrier is met, the PS launcher PATCHes ``/apis/apps/v1/namespaces/<ns>/deployments/
<name>/scale`` to ``{"spec": {"replicas": 0}}`` with the pod's service-account token over TLS
(the cluster CA from the service-account directory).
"""

from __future__ import annotations

import json
import ssl
import sys
import urllib.parse
import urllib.request
from collections.abc import Mapping
from pathlib import Path

SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


def _log(message: str) -> None:
    print(f"tfk8s-launch: {message}", file=sys.stderr, flush=True)


def scale_deployment(
    api_server: str,
    namespace: str,
    name: str,
    *,
    token: str,
    ca_file: str | None = None,
    replicas: int = 0,
    timeout: float = 10.0,
) -> int:
    """PATCH the Deployment's scale subresource; return the HTTP status (raises on errors)."""
    quote = urllib.parse.quote
    url = f"{api_server.rstrip('/')}/apis/apps/v1/namespaces/{quote(namespace)}/deployments/{quote(name)}/scale"
    request = urllib.request.Request(
        url,
        data=json.dumps({"spec": {"replicas": replicas}}).encode(),
        method="PATCH",
        headers={
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/merge-patch+json",
            "Accept": "application/json",
        },
    )
    context = ssl.create_default_context(cafile=ca_file) if url.startswith("https:") else None
    with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
        return int(response.status)


def retire_deployment(deployment: str, namespace: str | None, environ: Mapping[str, str], sa_dir: Path | None = None) -> bool:
    """Scale this pod's own Deployment to 0 so it is not restarted; log, never raise, on failure.

    Needs RBAC: ``patch`` on ``deployments/scale`` for the pod's service account. The API server
    is ``https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT`` unless ``TFK8S_KUBE_API``
    names another (e.g. a ``kubectl proxy`` sidecar); ``TFK8S_SA_DIR`` moves the token directory.
    """
    api = environ.get("TFK8S_KUBE_API") or _api_server(environ)
    if not api:  # not in a pod
        return False
    sa_dir = sa_dir or Path(environ.get("TFK8S_SA_DIR") or SA_DIR)
    namespace = namespace or _read(sa_dir / "namespace") or "default"
    try:
        token = (sa_dir / "token").read_text().strip()
        ca = sa_dir / "ca.crt"
        status = scale_deployment(api, namespace, deployment, token=token, ca_file=str(ca) if ca.exists() else None)
    except Exception as err:  # best effort: whatever went wrong, the barrier still stops the PS
        _log(f"could not scale deployment {namespace}/{deployment} to 0: {err}")
        return False
    _log(f"scaled deployment {namespace}/{deployment} to 0 (HTTP {status})")
    return True


def _api_server(environ: Mapping[str, str]) -> str | None:
    host, port = environ.get("KUBERNETES_SERVICE_HOST"), environ.get("KUBERNETES_SERVICE_PORT", "443")
    if not host:
        return None
    return f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except OSError:
        return None
