"""Kueue Workloads and JobSet statuses as the API returns them (camelCase), shaped after
kueue@v0.17.0 apis/kueue/v1beta2/workload_types.go and jobset@v0.11.1 api/jobset/v1alpha2/jobset_types.go,
with the messages Kueue writes (scheduler.go:856, preemption.go:177, workload_controller.go:975)."""

from __future__ import annotations

from typing import Any

NAMESPACE = "tfk8s-alice"
QUEUE = "experiments"
INSUFFICIENT = "couldn't assign flavors to pod set worker: insufficient unused quota for cpu in flavor cpu, 2 more needed"
PREEMPTION = (
    "Preempted to accommodate a workload (UID: 5f0e, JobUID: 77ab) due to Fair Sharing within the cohort; "
    "preemptor path: /tfk8s/tfk8s-bob; preemptee path: /tfk8s/tfk8s-alice"
)


def cond(kind: str, status: bool, reason: str, message: str = "", at: str = "2026-11-27T10:00:00Z") -> dict[str, Any]:
    return {"type": kind, "status": "True" if status else "False", "reason": reason, "message": message, "lastTransitionTime": at}


QUEUED = [cond("QuotaReserved", False, "Pending", INSUFFICIENT)]
RESERVED = [cond("QuotaReserved", True, "QuotaReserved", "Quota reserved in ClusterQueue tfk8s-alice")]
ADMITTED = [*RESERVED, cond("Admitted", True, "Admitted", "The workload is admitted")]
PODS_READY = [*ADMITTED, cond("PodsReady", True, "Started", "All pods reached readiness")]
RECOVERING = [*ADMITTED, cond("PodsReady", False, "WaitForRecovery", "At least one pod has failed", "2026-11-27T10:05:00Z")]
PREEMPTED = [
    cond("QuotaReserved", False, "Pending", PREEMPTION),
    cond("Evicted", True, "Preempted", PREEMPTION),
    cond("Preempted", True, "InCohortFairSharing", PREEMPTION),
    cond("Requeued", True, "Preempted", PREEMPTION),
]
TIMED_OUT = [
    cond("QuotaReserved", False, "Pending", "Exceeded the PodsReady timeout ns/x"),
    cond(
        "Evicted",
        True,
        "PodsReadyTimeout",
        "Exceeded the PodsReady timeout tfk8s-alice/jobset-dev-mnist-1a2b3",
        "2026-11-27T11:00:00Z",
    ),
    cond("Requeued", False, "PodsReadyTimeout", "Exceeded the PodsReady timeout"),
]
FINISHED = [*PODS_READY, cond("Finished", True, "Succeeded", "jobset completed successfully")]


def workload(
    jobset: str,
    *,
    uid: str | None = None,
    conditions: list[dict[str, Any]] | None = None,
    created: str = "2026-11-27T09:00:00Z",
    priority: int | None = None,
    queue: str = QUEUE,
    namespace: str = NAMESPACE,
    active: bool | None = None,
    requeue: dict[str, Any] | None = None,
    jobset_uid: str | None = None,
) -> dict[str, Any]:
    """A JobSet's Workload: named, owned and labelled as jobframework makes it (reconciler.go:1375-1404)."""
    owner_uid = jobset_uid or f"uid-of-{jobset}"
    spec: dict[str, Any] = {"queueName": queue, "podSets": []}
    if priority is not None:
        spec["priority"] = priority
        spec["priorityClassRef"] = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": f"p{priority}"}
    if active is not None:
        spec["active"] = active
    status: dict[str, Any] = {"conditions": list(conditions or [])}
    if any(c["type"] == "QuotaReserved" and c["status"] == "True" for c in status["conditions"]):
        status["admission"] = {"clusterQueue": namespace, "podSetAssignments": []}
    if requeue is not None:
        status["requeueState"] = requeue
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": f"jobset-{jobset}-1a2b3",
            "namespace": namespace,
            "uid": uid or f"wl-{jobset}",
            "creationTimestamp": created,
            "labels": {"kueue.x-k8s.io/job-uid": owner_uid},
            "ownerReferences": [
                {
                    "apiVersion": "jobset.x-k8s.io/v1alpha2",
                    "kind": "JobSet",
                    "name": jobset,
                    "uid": owner_uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": spec,
        "status": status,
    }


def rjob(name: str, **counts: int) -> dict[str, Any]:
    return {"name": name, **{k: counts.get(k, 0) for k in ("ready", "succeeded", "failed", "active", "suspended")}}


def jobset_status(*rjobs: dict[str, Any], conditions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"restarts": 0, "replicatedJobsStatus": list(rjobs), **({"conditions": conditions} if conditions else {})}


def cluster_status(
    js_status: dict[str, Any] | None, *, suspend: bool | None, uid: str = "uid-of-dev-mnist", **extra: Any
) -> dict[str, Any]:
    """TrainingCluster.status on a queueing platform, as the wiring gives it."""
    return {"jobset": {"spec": {"suspend": suspend}, "status": js_status, "uid": uid}, **extra}
