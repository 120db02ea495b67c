"""Readiness from live status: what is up, what is not and why, and one overall `ready`.

Pure functions over the status fields the Kubernetes provider returns (Deployment
`availableReplicas`, Job `ready`/`succeeded`/`failed`/conditions, PVC `phase`, Service
`nodePort`), never over the configuration: a cluster is ready because Kubernetes says so.
A platform stack reports its storage and per-user apps and volumes; an experiment its clusters,
and during an `up` each one's training progress as its tenant's TensorBoard gate summarises it
(read by tfk8s.stack_kinds.progress; `ready` says whether the clusters run, not how far they got).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

RUNNING, SUCCEEDED, FAILED, PENDING = "Running", "Succeeded", "Failed", "Pending"
# What a cluster's `progress` holds of the gate's summary of its latest run (tfk8s_train.run_status,
# docs/guide/status.md): the figures a user asks of a training, not its tasks' rows.
PROGRESS_FIELDS = (
    "step",
    "target_steps",
    "fraction",
    "steps_per_second",
    "eta_seconds",
    "state",
    "first_step_seconds",
    "last_checkpoint",
    "updated_at",
)
NOT_READ = {"unknown": "no progress was read for this cluster"}


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


def unknown_progress(clusters: Iterable[str], why: str) -> dict[str, dict[str, Any]]:
    """Every cluster's progress, when it cannot be read: why, and the fix."""
    return {cluster: {"unknown": why} for cluster in clusters}


def clusters_progress(clusters: Iterable[str], summary: Mapping[str, Any] | None, none_yet: str) -> dict[str, dict[str, Any]]:
    """Each cluster's progress from the gate's summary of its experiment (None: the experiment has
    nothing on the log volume yet): its PROGRESS_FIELDS, or `unknown` saying `none_yet`."""
    found = _get(summary, "clusters", {})
    found = found if isinstance(found, Mapping) else {}
    return {
        cluster: {key: _get(found[cluster], key) for key in PROGRESS_FIELDS}
        if isinstance(found.get(cluster), Mapping)
        else {"unknown": none_yet}
        for cluster in clusters
    }


def experiment_readiness(
    clusters: Mapping[str, Mapping[str, Any]],
    links: Mapping[str, str | None],
    progress: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """An experiment's report: its clusters, and where the user's Jupyter and TensorBoard answer.
    With `progress` (cluster -> its progress, or `unknown`), each cluster reports it as its `progress`;
    without (a preview), none does."""
    not_ready = [f"{cluster}: {p}" for cluster, result in sorted(clusters.items()) for p in result["problems"]]
    reports = {
        cluster: dict(result) if progress is None else {**result, "progress": dict(progress.get(cluster) or NOT_READ)}
        for cluster, result in clusters.items()
    }
    return {"ready": not not_ready, "notReady": not_ready, "clusters": reports, **dict(links)}
