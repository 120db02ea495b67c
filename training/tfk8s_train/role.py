"""This process's place in the TensorFlow cluster, parsed once and passed explicitly.

Sources, first match wins:
1. the classic flags of the seed era (``--ps_hosts --worker_hosts --job_name --task_index``);
2. ``TF_CONFIG`` (always set by ``tfk8s_train.launch``; may also name a ``chief``);
3. neither: a single local process (no cluster), never a KeyError.
A worker without an explicit index takes ``JOB_COMPLETION_INDEX`` (Kubernetes Indexed Job).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

JOBS = ("chief", "ps", "worker")


class RoleError(ValueError):
    """The cluster description is unusable; the message names the flag or variable."""


@dataclass(frozen=True, kw_only=True)
class ClusterRole:
    """Cluster layout plus this task's job and index. ``job_name == "local"`` means no cluster."""

    cluster: Mapping[str, tuple[str, ...]]
    job_name: str
    task_index: int

    @property
    def is_local(self) -> bool:
        return self.job_name == "local"

    @property
    def has_chief(self) -> bool:
        return bool(self.cluster.get("chief"))

    @property
    def num_ps(self) -> int:
        return len(self.cluster.get("ps", ()))

    @property
    def num_workers(self) -> int:
        return len(self.cluster.get("worker", ()))

    @property
    def is_chief(self) -> bool:
        """The task that checkpoints, evaluates and exports: chief, else worker 0, else local."""
        if self.is_local or self.job_name == "chief":
            return True
        return self.job_name == "worker" and self.task_index == 0 and not self.has_chief

    @property
    def task(self) -> str:
        return f"{self.job_name}-{self.task_index}"

    def cluster_dict(self) -> dict[str, list[str]]:
        return {job: list(hosts) for job, hosts in self.cluster.items() if hosts}


LOCAL = ClusterRole(cluster=MappingProxyType({}), job_name="local", task_index=0)


def _hosts(raw: str | None) -> tuple[str, ...]:
    return tuple(h.strip() for h in (raw or "").split(",") if h.strip())


def _make(
    cluster: dict[str, tuple[str, ...]], job: str, index: int | None, source: str, environ: Mapping[str, str]
) -> ClusterRole:
    if job not in JOBS:
        raise RoleError(f"{source}: job {job!r} is not one of {', '.join(JOBS)}")
    if index is None:
        raw = environ.get("JOB_COMPLETION_INDEX")
        if job != "worker" or raw is None:
            raise RoleError(f"{source}: no task index for job {job!r} (and no JOB_COMPLETION_INDEX)")
        try:
            index = int(raw)
        except ValueError:
            raise RoleError(f"JOB_COMPLETION_INDEX={raw!r} is not an integer") from None
    for name, hosts in cluster.items():
        if any(":" not in h for h in hosts):
            raise RoleError(f"{source}: {name} hosts must be host:port, got {','.join(hosts)}")
    if not cluster.get(job):
        raise RoleError(f"{source}: job {job!r} has no hosts in the cluster spec")
    if not 0 <= index < len(cluster[job]):
        raise RoleError(f"{source}: task index {index} out of range for {len(cluster[job])} {job} task(s)")
    return ClusterRole(cluster=MappingProxyType(dict(cluster)), job_name=job, task_index=index)


def from_flags(
    *, ps_hosts: str | None, worker_hosts: str | None, job_name: str | None, task_index: int | None, environ: Mapping[str, str]
) -> ClusterRole:
    if not job_name:
        raise RoleError("--job_name is required with --ps_hosts/--worker_hosts")
    cluster = {"ps": _hosts(ps_hosts), "worker": _hosts(worker_hosts)}
    # The classic flags cannot name a chief; the launcher's TF_CONFIG can, so take it from there.
    tf_config = environ.get("TF_CONFIG", "").strip()
    if tf_config:
        cluster["chief"] = _chief_hosts(tf_config)
    return _make({k: v for k, v in cluster.items() if v}, job_name, task_index, "flags", environ)


def _chief_hosts(raw: str) -> tuple[str, ...]:
    try:
        chief = (json.loads(raw).get("cluster") or {}).get("chief") or ()
    except (json.JSONDecodeError, AttributeError):
        return ()
    return tuple(chief) if isinstance(chief, list) else ()


def from_tf_config(raw: str, environ: Mapping[str, str]) -> ClusterRole:
    try:
        config = json.loads(raw)
    except json.JSONDecodeError as err:
        raise RoleError(f"TF_CONFIG is not valid JSON ({err})") from err
    if not isinstance(config, dict):
        raise RoleError("TF_CONFIG must be a JSON object with 'cluster' and 'task'")
    cluster_raw = config.get("cluster") or {}
    task = config.get("task") or {}
    if not isinstance(cluster_raw, dict) or not isinstance(task, dict):
        raise RoleError("TF_CONFIG 'cluster' and 'task' must be JSON objects")
    if not cluster_raw:
        return LOCAL
    unknown = set(cluster_raw) - set(JOBS)
    if unknown:
        raise RoleError(f"TF_CONFIG cluster has unsupported job(s) {sorted(unknown)}")
    cluster = {job: tuple(hosts) for job, hosts in cluster_raw.items() if hosts}
    index = task.get("index")
    if index is not None and not isinstance(index, int):
        raise RoleError(f"TF_CONFIG task index {index!r} is not an integer")
    return _make(cluster, str(task.get("type", "")), index, "TF_CONFIG", environ)


def parse_role(
    *,
    ps_hosts: str | None = None,
    worker_hosts: str | None = None,
    job_name: str | None = None,
    task_index: int | None = None,
    environ: Mapping[str, str],
) -> ClusterRole:
    """Resolve the role from flags, else TF_CONFIG, else a local single-process role."""
    if ps_hosts or worker_hosts or job_name:
        return from_flags(ps_hosts=ps_hosts, worker_hosts=worker_hosts, job_name=job_name, task_index=task_index, environ=environ)
    raw = environ.get("TF_CONFIG", "").strip()
    return from_tf_config(raw, environ) if raw else LOCAL
