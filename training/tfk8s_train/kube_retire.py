"""Scale a Deployment to zero, and read a Job's state, from inside a pod (standard library, Python >= 3.6).

Used by ``launch.py`` so that a retired PS is not restarted by its Deployment: once the
done-marker barrier is met, the PS launcher PATCHes ``/apis/apps/v1/namespaces/<ns>/deployments/
<name>/scale`` to ``{"spec": {"replicas": 0}}`` with the pod's service-account token over TLS
(the cluster CA from the service-account directory). ``job_state`` GETs the run's Job so a PS
can retire when its workers failed for good (``job_watch.py`` follows it through a watch, and
polls with ``job_state`` where it may not), and ``run_job_uid`` so a PS learns which run it
serves (RBAC: ``get`` on that one Job).
"""

import json
import ssl
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Mapping, NamedTuple, Optional

SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


def _log(message: str) -> None:
    print(f"tfk8s-launch: {message}", file=sys.stderr, flush=True)


def scale_deployment(
    api_server: str,
    namespace: str,
    name: str,
    *,
    token: str,
    ca_file: Optional[str] = None,
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


def retire_deployment(
    deployment: str, namespace: Optional[str], environ: Mapping[str, str], sa_dir: Optional[Path] = None
) -> bool:
    """Scale this pod's own Deployment to 0 so it is not restarted; log, never raise, on failure.

    Needs RBAC: ``patch`` on ``deployments/scale`` for the pod's service account. The API server
    is ``https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT`` unless ``TFK8S_KUBE_API``
    names another (e.g. a ``kubectl proxy`` sidecar); ``TFK8S_SA_DIR`` moves the token directory.
    """
    api = environ.get("TFK8S_KUBE_API") or api_server(environ)
    if not api:  # not in a pod
        return False
    sa_dir = sa_dir or Path(environ.get("TFK8S_SA_DIR") or SA_DIR)
    namespace = namespace or read_text(sa_dir / "namespace") or "default"
    try:
        token = (sa_dir / "token").read_text().strip()
        ca = sa_dir / "ca.crt"
        status = scale_deployment(api, namespace, deployment, token=token, ca_file=str(ca) if ca.exists() else None)
    except Exception as err:  # best effort: whatever went wrong, the barrier still stops the PS
        _log(f"could not scale deployment {namespace}/{deployment} to 0: {err}")
        return False
    _log(f"scaled deployment {namespace}/{deployment} to 0 (HTTP {status})")
    return True


# A Job's labels: the run it belongs to (tfk8s.labels.RUN), which a PS matches before taking its uid.
RUN_LABEL = "tfk8s.io/run"
GONE = "Gone"
RUNNING = "Running"


class Api(NamedTuple):
    """Where this pod reaches the API server, in which namespace, with which service account."""

    url: str
    namespace: str
    sa_dir: Path


def api_of(namespace: Optional[str], environ: Mapping[str, str], sa_dir: Optional[Path] = None) -> Optional[Api]:
    """The API as ``retire_deployment`` documents it, or None outside a pod."""
    api = environ.get("TFK8S_KUBE_API") or api_server(environ)
    if not api:
        return None
    sa_dir = sa_dir or Path(environ.get("TFK8S_SA_DIR") or SA_DIR)
    return Api(api.rstrip("/"), namespace or read_text(sa_dir / "namespace") or "default", sa_dir)


def open_get(api: Api, path: str, timeout: float) -> Any:
    """GET ``path`` (with its query) with the service account's token (read at each call: it rotates);
    the open response, to read or iterate. Raises urllib's errors (HTTPError: its ``code``)."""
    url = api.url + path
    token = (api.sa_dir / "token").read_text().strip()
    ca = api.sa_dir / "ca.crt"
    request = urllib.request.Request(url, headers={"Authorization": "Bearer " + token, "Accept": "application/json"})
    context = ssl.create_default_context(cafile=str(ca) if ca.exists() else None) if url.startswith("https:") else None
    return urllib.request.urlopen(request, timeout=timeout, context=context)


def jobs_path(api: Api, job: Optional[str] = None) -> str:
    """The namespace's Jobs, or Job ``job``."""
    path = f"/apis/batch/v1/namespaces/{urllib.parse.quote(api.namespace)}/jobs"
    return path + "/" + urllib.parse.quote(job) if job else path


def _read_job(job: str, namespace: Optional[str], environ: Mapping[str, str], sa_dir: Optional[Path]) -> object:
    """The Job's object (a dict), GONE on HTTP 404, or None (no API, or an error, logged)."""
    api = api_of(namespace, environ, sa_dir)
    if api is None:
        return None
    try:
        with open_get(api, jobs_path(api, job), timeout=5.0) as response:
            return json.loads(response.read().decode())
    except urllib.error.HTTPError as err:
        if err.code == 404:
            return GONE
        _log(f"could not read job {api.namespace}/{job}: HTTP {err.code}")
        return None
    except Exception as err:  # best effort: the done barrier still works without it
        _log(f"could not read job {api.namespace}/{job}: {err}")
        return None


def state_of(body: Mapping[str, Any], uid: Optional[str]) -> str:
    """A Job object's state for the run of ``uid``: "Failed" | "Complete" (its conditions), "Running",
    or "Gone" (a Job of another uid: a later run's)."""
    if uid is not None and (body.get("metadata") or {}).get("uid") != uid:
        return GONE
    for condition in (body.get("status") or {}).get("conditions") or []:
        if condition.get("type") in ("Failed", "Complete") and condition.get("status") == "True":
            return str(condition["type"])
    return RUNNING


def job_state(
    job: str, namespace: Optional[str], environ: Mapping[str, str], sa_dir: Optional[Path] = None, uid: Optional[str] = None
) -> Optional[str]:
    """ "Failed" | "Complete" (its conditions), "Running", "Gone" (HTTP 404, or a Job of another uid
    than ``uid``: a later run's), or None (no API, or an error)."""
    body = _read_job(job, namespace, environ, sa_dir)
    if not isinstance(body, dict):
        return body if body == GONE else None
    return state_of(body, uid)


def run_job_uid(
    job: str, run: str, namespace: Optional[str], environ: Mapping[str, str], sa_dir: Optional[Path] = None
) -> Optional[str]:
    """The uid of Job ``job`` if it is run ``run``'s: labelled ``tfk8s.io/run=<run>`` and not being
    deleted. None while there is no such Job: not created yet, or still an earlier run's (RBAC:
    ``get`` on that one Job)."""
    body = _read_job(job, namespace, environ, sa_dir)
    if not isinstance(body, dict):
        return None
    metadata = body.get("metadata") or {}
    if (metadata.get("labels") or {}).get(RUN_LABEL) != run or metadata.get("deletionTimestamp"):
        return None
    uid = metadata.get("uid")
    return str(uid) if uid else None


def api_server(environ: Mapping[str, str]) -> Optional[str]:
    host, port = environ.get("KUBERNETES_SERVICE_HOST"), environ.get("KUBERNETES_SERVICE_PORT", "443")
    if not host:
        return None
    return f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"


def read_text(path: Path) -> Optional[str]:
    try:
        return path.read_text().strip() or None
    except OSError:
        return None
