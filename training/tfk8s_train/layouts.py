"""The notebook's side of in-graph replication across stacks: find a cluster an experiment published.

The platform deploys the user's Jupyter once; experiments come later. Each experiment creates one
Layout (the platform's own kind; its API path is ``TFK8S_LAYOUT_API`` in the Jupyter pod) per
training cluster, whose spec is the cluster's spec, current run (its Job's uid), training mode and directories relative
to the user's volumes. From inside Jupyter this module lists them with the pod's service account
(which may read Layouts in the user's namespace and nothing else), picks the notebook-driven one
the user means, and returns the environment ``master_client.ipynb`` reads: the same variables a
local runner writes.
"""

from __future__ import annotations

import json
import os
import re
import ssl
import urllib.parse
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tfk8s_train.kube_retire import SA_DIR, api_server, read_text
from tfk8s_train.launch import run_log_dir


class NoLayout(LookupError):
    """No (or no single) notebook-driven cluster to drive; the message lists what there is and the fix."""


class BadLayout(ValueError):
    """A Layout this notebook will not act on: anyone who may write Layouts in the namespace could
    otherwise point the notebook's graph at servers elsewhere, or its files outside the volumes."""


# What tfk8s.layout_document writes, and nothing else.
LAYOUT_KEYS: dict[str, type | tuple[type, ...]] = {
    "experiment": str,
    "cluster": str,
    "spec": dict,
    "runId": str,
    "runUid": str,
    "replication": str,
    "training": str,
    "inGraphClient": (str, type(None)),
    "dataSubPath": str,
    "logSubPath": str,
}
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def _host_here(address: str) -> bool:
    """`address` is host:port of a Service of this namespace (`svc`) or an Indexed Job's pod
    (`<job>-<i>.<job>`): never another namespace's (`svc.ns`), an FQDN or an IP address."""
    host, _, port = address.rpartition(":")
    if not port.isdigit() or not 0 < int(port) < 65536:
        return False
    labels = host.split(".")
    if not all(_LABEL.fullmatch(label) for label in labels):
        return False
    if len(labels) == 1:
        return not host.isdigit()
    return len(labels) == 2 and re.fullmatch(re.escape(labels[1]) + r"-\d+", labels[0]) is not None


# A Kubernetes object uid (a UUID): letters, digits and dashes.
_RUN_UID = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,63}")


def _relative(path: str) -> bool:
    return not path.startswith("/") and ".." not in path.split("/") and "\x00" not in path


def validate(layout: Mapping[str, Any]) -> dict[str, Any]:
    """The layout if it is one tfk8s wrote for this namespace; else BadLayout naming what is wrong."""
    name = f"{layout.get('experiment')}/{layout.get('cluster')}"
    problems = [f"unknown key {k!r}" for k in sorted(set(layout) - set(LAYOUT_KEYS))]
    problems += [
        f"{k} is missing or not {getattr(t, '__name__', 'a string or null')}"
        for k, t in LAYOUT_KEYS.items()
        if k != "runUid" and not isinstance(layout.get(k), t)
    ]
    for k in ("dataSubPath", "logSubPath"):
        if isinstance(layout.get(k), str) and not _relative(layout[k]):
            problems.append(f"{k} {layout[k]!r} leaves the volume (absolute or '..')")
    # The run's directory is `run-<runUid>` under the log volume: a Job's uid, never a path.
    run_uid = layout.get("runUid")
    if run_uid is not None and not (isinstance(run_uid, str) and _RUN_UID.fullmatch(run_uid)):
        problems.append(f"runUid {run_uid!r} is not a Kubernetes uid (a run directory's name, never a path)")
    spec = layout.get("spec")
    for job, addresses in (spec if isinstance(spec, dict) else {}).items():
        if not isinstance(addresses, list) or not all(isinstance(a, str) and _host_here(a) for a in addresses):
            problems.append(f"spec.{job} {addresses!r} names a host outside this namespace (or not host:port)")
    if problems:
        raise BadLayout(f"the layout of {name} is not one tfk8s wrote; not using it: " + "; ".join(problems))
    return dict(layout)


def list_layouts(environ: Mapping[str, str], sa_dir: Path | None = None) -> list[dict[str, Any]]:
    """Every layout published in this pod's namespace."""
    api = environ.get("TFK8S_KUBE_API") or api_server(environ)
    if not api:
        raise NoLayout("not in a Kubernetes pod (no KUBERNETES_SERVICE_HOST): export TFK8S_CLUSTER_SPEC etc. instead")
    kind_api = environ.get("TFK8S_LAYOUT_API")
    if not kind_api:
        raise NoLayout("TFK8S_LAYOUT_API is not set: this Jupyter was not deployed by a tfk8s platform stack")
    sa_dir = sa_dir or Path(environ.get("TFK8S_SA_DIR") or SA_DIR)
    namespace = environ.get("TFK8S_NAMESPACE") or read_text(sa_dir / "namespace") or "default"
    url = f"{api.rstrip('/')}{kind_api}/namespaces/{urllib.parse.quote(namespace)}/layouts"
    token = (sa_dir / "token").read_text().strip()
    ca = sa_dir / "ca.crt"
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}", "Accept": "application/json"})
    context = ssl.create_default_context(cafile=str(ca) if ca.exists() else None) if url.startswith("https:") else None
    with urllib.request.urlopen(request, timeout=10.0, context=context) as response:
        items = json.loads(response.read().decode()).get("items") or []
    return [dict(item["spec"]) for item in items if isinstance(item.get("spec"), dict)]  # vetted when chosen


def choose(layouts: list[dict[str, Any]], experiment: str | None = None, cluster: str | None = None) -> dict[str, Any]:
    """The one notebook-driven layout matching `experiment`/`cluster` (either may be omitted)."""
    driven = [lay for lay in layouts if lay.get("inGraphClient") == "notebook"]
    matching = [
        lay
        for lay in driven
        if (experiment is None or lay["experiment"] == experiment) and (cluster is None or lay["cluster"] == cluster)
    ]
    if len(matching) == 1:
        return validate(matching[0])
    names = sorted(f"{lay['experiment']}/{lay['cluster']}" for lay in driven) or ["none"]
    problem = "several match" if matching else "none matches"
    raise NoLayout(
        f"notebook-driven clusters here: {', '.join(names)}; {problem}. Set TFK8S_EXPERIMENT and TFK8S_CLUSTER "
        "(os.environ in the notebook) to pick one, or `pulumi up` an experiment with replication: in-graph, "
        "inGraphClient: notebook"
    )


def notebook_env(layout: Mapping[str, Any], environ: Mapping[str, str]) -> dict[str, str]:
    """What master_client.ipynb reads, with directories under this pod's mounts of the user's volumes.

    The log directory is the current run's own (``run-<uid>`` of the Job whose servers wait for
    this notebook, see launch.py), where the notebook's done marker retires them."""
    data_root, log_root = environ.get("TFK8S_DATA_ROOT", "/data"), environ.get("TFK8S_LOG_ROOT", "/logs")
    run_uid = layout.get("runUid")
    if not run_uid:
        raise NoLayout(
            f"the layout of {layout.get('experiment')}/{layout.get('cluster')} names no run (runUid): "
            "an older tfk8s published it; `pulumi up` that experiment again"
        )
    return {
        "TFK8S_CLUSTER_SPEC": json.dumps(layout["spec"], sort_keys=True),
        "TFK8S_RUN_UID": str(run_uid),
        "TFK8S_TRAINING": str(layout["training"]),
        "TFK8S_DATA_DIR": os.path.join(data_root, layout.get("dataSubPath") or ""),
        "TFK8S_LOG_DIR": run_log_dir(os.path.join(log_root, layout["logSubPath"]), str(run_uid)),
    }


def from_cluster(environ: Mapping[str, str], sa_dir: Path | None = None) -> dict[str, str]:
    layout = choose(list_layouts(environ, sa_dir), environ.get("TFK8S_EXPERIMENT"), environ.get("TFK8S_CLUSTER"))
    return notebook_env(layout, environ)
