"""Readiness from live status: what is up, what is not and why, and one overall `ready`.

Pure functions over the status fields the Kubernetes provider returns (Deployment
`availableReplicas`, Job `ready`/`succeeded`/`failed`/conditions, PVC `phase`, Service
`nodePort`), never over the configuration: a cluster is ready because Kubernetes says so.
A platform stack reports its storage and per-user apps and volumes; an experiment its clusters.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

RUNNING, SUCCEEDED, FAILED, PENDING = "Running", "Succeeded", "Failed", "Pending"


def _get(obj: Mapping[str, Any] | None, key: str, default: Any = None) -> Any:
    """A field of live status as the API spells it (camelCase JSON, tfk8s.kube.objects), absent or null alike."""
    value = (obj or {}).get(key)
    return default if value is None else value


def _failure(status: Any) -> Any:
    """The Job's Failed=True condition, if any (its reason says why: BackoffLimitExceeded,
    FailedIndexes, DeadlineExceeded, ...)."""
    return next((c for c in _get(status, "conditions", []) if _get(c, "type") == "Failed" and _get(c, "status") == "True"), None)


def _job_failed(status: Any) -> bool:
    return _failure(status) is not None


def _why(job: str, status: Any) -> str:
    condition = _failure(status)
    reason, message = _get(condition, "reason", ""), _get(condition, "message", "")
    return f"{job} Job failed: {reason}" + (f" ({message})" if message else "") if reason else f"{job} Job failed"


def job_counts(status: Any) -> dict[str, int]:
    return {key: int(_get(status, key, 0)) for key in ("ready", "active", "succeeded", "failed")}


def cluster_readiness(
    *, ps_expected: int, workers_expected: int, chief_expected: bool, status: Mapping[str, Any]
) -> dict[str, Any]:
    """Phase and problems of one training cluster from its `TrainingCluster.status`."""
    problems: list[str] = []
    ps_available = [int(_get(s, "availableReplicas", 0)) for s in status.get("ps") or []]
    workers, chief = job_counts(status.get("workers")), job_counts(status.get("chief"))
    tasks_done = workers["succeeded"] == workers_expected and (not chief_expected or chief["succeeded"] == 1)
    failed = _job_failed(status.get("workers")) or (chief_expected and _job_failed(status.get("chief")))

    if failed:
        phase = FAILED
        problems.append(
            f"training failed: {workers['failed']} worker pod(s) failed"
            + (f", chief failed {chief['failed']}x" if chief["failed"] else "")
        )
        problems += [
            _why(job, status.get(job)) for job in ("workers", "chief") if status.get(job) and _job_failed(status.get(job))
        ]
    elif tasks_done:
        phase = SUCCEEDED  # parameter servers have retired themselves: zero available is right
    else:
        ps_up = sum(1 for a in ps_available if a >= 1)
        if ps_up < ps_expected:
            problems.append(f"parameter servers: {ps_up}/{ps_expected} available")
        running = workers["ready"] + workers["succeeded"]
        if running < workers_expected:
            problems.append(f"workers: {running}/{workers_expected} ready or done")
        if workers["failed"]:
            problems.append(f"workers: {workers['failed']} pod(s) failed (retried per index)")
        if chief_expected and chief["ready"] + chief["succeeded"] < 1:
            problems.append("chief: not ready")
        if "scratch" in status:  # the cluster has a scratch volume; a Lost one breaks running tasks
            problems += volumes_readiness({"scratch": status["scratch"]})["problems"]
        phase = RUNNING if not problems else PENDING
        if workers["failed"] and running < workers_expected:
            phase = PENDING

    return {
        "phase": phase,
        "ready": not problems,
        "ps": {"available": sum(ps_available), "expected": ps_expected},
        "workers": {**workers, "expected": workers_expected},
        **({"chief": chief} if chief_expected else {}),
        "problems": problems,
    }


def _node_port(service_spec: Any) -> int | None:
    """The Service's first NodePort. The engine hands every number back as a JSON float (31406.0)."""
    ports = _get(service_spec, "ports", [])
    port = _get(ports[0], "nodePort") if ports else None
    return None if port is None else int(port)


def app_url(*, service_spec: Any, address: str | None) -> str | None:
    """Where a user-facing app answers: its Service's NodePort on the User Node (None until both are known)."""
    node_port = _node_port(service_spec)
    return f"http://{address}:{node_port}/" if address and node_port else None


def app_readiness(*, deployment_status: Any, service_spec: Any, address: str | None) -> dict[str, Any]:
    """A user-facing app (Jupyter, TensorBoard): available replicas and its User Node URL."""
    available = int(_get(deployment_status, "availableReplicas", 0))
    problems = []
    if available < 1:
        problems.append("not available")
    if _node_port(service_spec) is None:
        problems.append("no NodePort assigned")
    if not address:
        problems.append("User Node address unknown (set tfk8s:platform.userNode.address)")
    url = app_url(service_spec=service_spec, address=address)
    return {"ready": not problems, "available": available, "url": url, "problems": problems}


def node_readiness(name: str, address: str | None) -> dict[str, Any]:
    """The User Node: patched, and an address users can reach its NodePorts on."""
    problems = [] if address else [f"no address for node {name!r} (set tfk8s:platform.userNode.address)"]
    return {"name": name, "address": address, "problems": problems}


def platform_readiness(storage: Mapping[str, Any], node: Mapping[str, Any]) -> dict[str, Any]:
    """The platform's own report: storage and the User Node."""
    not_ready = [f"storage: {p}" for p in storage.get("problems", [])] + [f"userNode: {p}" for p in node.get("problems", [])]
    return {"ready": not not_ready, "notReady": not_ready, "storage": dict(storage), "userNode": dict(node)}


def tenant_readiness(parts: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """A tenant's report: its volumes, Jupyter and TensorBoard."""
    not_ready = [f"{part}: {p}" for part in ("volumes", "jupyter", "tensorboard") for p in parts[part]["problems"]]
    return {"ready": not not_ready, "notReady": not_ready, **{k: dict(v) for k, v in parts.items()}}


def volumes_readiness(phases: Mapping[str, Any]) -> dict[str, Any]:
    """The user's shared claims: each must be Bound."""
    found = {purpose: _get(status, "phase", "Unknown") for purpose, status in phases.items()}
    problems = [f"{purpose} volume is {phase}, not Bound" for purpose, phase in sorted(found.items()) if phase != "Bound"]
    return {"ready": not problems, "phases": found, "problems": problems}


def experiment_readiness(clusters: Mapping[str, Mapping[str, Any]], links: Mapping[str, str | None]) -> dict[str, Any]:
    """An experiment's report: its clusters, and where the user's Jupyter and TensorBoard answer."""
    not_ready = [f"{cluster}: {p}" for cluster, result in sorted(clusters.items()) for p in result["problems"]]
    return {"ready": not not_ready, "notReady": not_ready, "clusters": dict(clusters), **dict(links)}
