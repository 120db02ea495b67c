"""A queueing platform for the e2e tests (issue 38): a local cluster of its own with Kueue and JobSet
(`tfk8s-e2e-queue`, hack/cluster.sh start --queueing), and a project copy of its own whose
platform-dev has `queueing.enabled`, for tenants alice and bob. The conftest's session fixtures
`queue_kube` and `queue_cli` start them once, for every module that asks.

The capacity is small and GPU-bound on purpose: the cohort holds 8 GPUs (the two simulated GPU
nodes' 4 each, hack/kwok/nodes.yaml) and 4 CPUs, and each tenant may borrow all 8 GPUs, so what
waits, what is admitted and whom Kueue preempts is decided by the queue, never by a tenant's quota.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from drivers import Cli, Kube, per_worker

import queue_stacks

# TFK8S_E2E_QUEUE_CLUSTER names it otherwise, to run two sessions side by side (as TFK8S_E2E_CLUSTER does).
CLUSTER = per_worker(os.environ.get("TFK8S_E2E_QUEUE_CLUSTER") or "tfk8s-e2e-queue")
PLATFORM = queue_stacks.PLATFORM
TENANTS = {"alice": "tenant-alice", "bob": "tenant-bob"}
NAMESPACES = {"alice": "tfk8s-alice", "bob": "tfk8s-bob"}
COHORT = "tfk8s"  # platform.queueing.cohort's default
LOCAL_QUEUE = "experiments"  # tfk8s.specs.queueing.LOCAL_QUEUE_NAME
CAPACITY = {"cpu": "4", "memory": "16Gi", "gpus": 8}
PRIORITY_CLASSES = {"urgent": 1000}
# Each tenant may borrow the whole cohort's GPUs (the default quota's 4 would cap them first).
TENANT_QUOTA = {"gpus": 8}
# One training cluster `train` per experiment: 1 PS and 2 workers of 2 GPUs each (4 GPUs; 0.75 CPU).
GPU_CLUSTER = {
    "tfk8s:clusters[0].name": "train",
    "tfk8s:clusters[0].ps.cpu": "250m",
    "tfk8s:clusters[0].ps.memory": "512Mi",
    "tfk8s:clusters[0].workers.count": "2",
    "tfk8s:clusters[0].workers.cpu": "250m",
    "tfk8s:clusters[0].workers.memory": "512Mi",
    "tfk8s:clusters[0].workers.gpus": "2",
}
GPU_CLUSTER_PODS = 3
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"


def project(work: Path, kubeconfig: Path) -> Cli:
    """The plain CLI on a project copy of its own, with its own state and passphrase, at `kubeconfig`
    (lab/queue_stacks.py)."""
    work, env = queue_stacks.own_project(work, kubeconfig)
    return Cli(work, env=env)


def queueing_platform(cli: Cli, volumes: Path) -> None:
    """platform-dev with queueing on, the capacity and priority classes above, its volumes under `volumes`."""
    cli("stack", "init", PLATFORM)
    queue_stacks.configure_platform(cli.cwd, volumes, {"capacity": CAPACITY, "priorityClasses": PRIORITY_CLASSES})


def queueing_tenant(cli: Cli, stack: str) -> None:
    cli("stack", "init", stack)
    queue_stacks.configure_tenant_quota(cli.cwd, stack, TENANT_QUOTA)


def condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    found = [c for c in (obj or {}).get("status", {}).get("conditions", []) if c["type"] == kind]
    return found[0] if found else {}


def apply(kube: Kube, obj: dict[str, Any]) -> None:
    subprocess.run(
        [kube.binary, "--kubeconfig", str(kube.kubeconfig), "apply", "--server-side", "-f", "-"],
        input=json.dumps(obj),
        check=True,
        capture_output=True,
        text=True,
    )


def pods_of(kube: Kube, namespace: str, jobset: str) -> list[dict[str, Any]]:
    """The JobSet's pods that are not being deleted."""
    return [
        p
        for p in kube.get("pods", namespace)
        if p["metadata"].get("labels", {}).get(JOBSET_NAME) == jobset and not p["metadata"].get("deletionTimestamp")
    ]


def workload_of(kube: Kube, namespace: str, jobset: str) -> dict[str, Any] | None:
    owned = [
        w
        for w in kube.get("workloads.kueue.x-k8s.io", namespace)
        if any(ref.get("name") == jobset for ref in w["metadata"].get("ownerReferences", []))
    ]
    return owned[0] if owned else None
