"""Kueue's Workloads as a queued cluster's readiness reads them (pure): which one is a JobSet's,
whether it waits in its queue, and where.

Kueue v0.17.0 makes one Workload per JobSet (`K` = the kueue@v0.17.0 module): named
`jobset-<name>-<hash>`, controlled by the JobSet (an ownerReference with `controller: true`) and
labelled `kueue.x-k8s.io/job-uid: <the JobSet's uid>` (K/pkg/controller/jobframework/reconciler.go:1375-1404,
K/pkg/controller/constants/constants.go:34). Its `spec.queueName` is the LocalQueue and its
`spec.priority` the WorkloadPriorityClass's value (K/apis/kueue/v1beta2/workload_types.go:44,57).

Facts are what tfk8s.specs.queue_readiness reads: a Workload's conditions, its place in its queue,
its priority and queue, and the uid of the JobSet it belongs to (so a Workload of an earlier
JobSet of the same name is never taken for the current one's).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

API_VERSION = "kueue.x-k8s.io/v1beta2"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
JOBSET_GROUP = "jobset.x-k8s.io"
# A Workload without `spec.priority` is at Kueue's static default (K/pkg/util/priority/priority.go:36-40,
# K/pkg/constants/constants.go:38).
DEFAULT_PRIORITY = 0
# Condition types and the reasons readiness tells apart (K/apis/kueue/v1beta2/workload_types.go:931-1080).
QUOTA_RESERVED, ADMITTED, FINISHED, PODS_READY = "QuotaReserved", "Admitted", "Finished", "PodsReady"
EVICTED, PREEMPTED, REQUEUED = "Evicted", "Preempted", "Requeued"
BY_PREEMPTION, BY_PODS_READY_TIMEOUT, BY_ADMISSION_CHECK, DEACTIVATED = (
    "Preempted",
    "PodsReadyTimeout",
    "AdmissionCheck",
    "Deactivated",
)
WAIT_FOR_RECOVERY = "WaitForRecovery"

Json = Mapping[str, Any]


def _get(obj: Json | None, *keys: str) -> Any:
    for key in keys:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def condition(workload: Json | None, kind: str) -> Json | None:
    """The Workload's condition of type `kind`, if it has one."""
    return next((c for c in _get(workload, "status", "conditions") or [] if _get(c, "type") == kind), None)


def is_true(workload: Json | None, kind: str) -> bool:
    return _get(condition(workload, kind), "status") == "True"


def _time(value: Any) -> datetime:
    """An API timestamp (RFC 3339, `...Z`); the epoch when absent, so it sorts first and never raises."""
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return datetime.fromtimestamp(0, UTC)


def priority(workload: Json) -> int:
    """What Kueue orders by: `spec.priority`, or the default. (The `kueue.x-k8s.io/priority-boost`
    annotation adds to it only behind the PriorityBoost gate, alpha and off in v0.17.0:
    K/pkg/util/priority/priority.go:42-60, K/pkg/features/kube_features.go:534-536.)"""
    value = _get(workload, "spec", "priority")
    return DEFAULT_PRIORITY if value is None else int(value)


def order_timestamp(workload: Json) -> datetime:
    """Kueue's queue-order timestamp (K/pkg/workload/workload.go:1256-1275): the time of a
    PodsReadyTimeout eviction (the default `waitForPodsReady.requeuingStrategy.timestamp: Eviction`,
    K/cmd/kueue/main.go:612-618) or of an AdmissionCheck eviction, else the creation time. (Its third
    case, InCohortReclaimWhileBorrowing, applies only with PrioritySortingWithinCohort off; it is on
    by default: K/pkg/features/kube_features.go:379-381.)"""
    evicted = condition(workload, EVICTED)
    if _get(evicted, "status") == "True" and _get(evicted, "reason") in (BY_PODS_READY_TIMEOUT, BY_ADMISSION_CHECK):
        return _time(_get(evicted, "lastTransitionTime"))
    return _time(_get(workload, "metadata", "creationTimestamp"))


def _sort_key(workload: Json) -> tuple[int, datetime, str]:
    # K/pkg/cache/queue/cluster_queue.go:745-775 (baseCompareFunc): higher priority first, then the
    # earlier timestamp, then the smaller uid.
    return (-priority(workload), order_timestamp(workload), str(_get(workload, "metadata", "uid") or ""))


def backing_off(workload: Json, now: datetime) -> bool:
    """Evicted and waiting out its requeue backoff (`status.requeueState.requeueAt` ahead): Kueue puts
    it back in the queue only then (K/pkg/controller/core/workload_controller.go:371-377,1113-1141)."""
    at = _get(workload, "status", "requeueState", "requeueAt")
    return at is not None and _time(at) > now


def pending(workload: Json, now: datetime) -> bool:
    """In its queue, waiting for quota: active, not finished, no quota reserved (Kueue's IsAdmissible,
    K/pkg/workload/workload.go:1316-1319), and not backing off."""
    return (
        _get(workload, "spec", "active") is not False
        and not is_true(workload, FINISHED)
        and not is_true(workload, QUOTA_RESERVED)
        and not backing_off(workload, now)
    )


def queue_position(workloads: Iterable[Json], mine: Json, now: datetime | None = None) -> tuple[int, int] | None:
    """Where `mine` stands among the pending Workloads of its LocalQueue (`spec.queueName`) in its
    namespace, in Kueue's order: `(k, n)`, 1-based, or None when `mine` is not pending.

    The order is the one Kueue's visibility API reports as `positionInLocalQueue` (its ClusterQueue's
    pending Workloads, heap and inadmissible alike, sorted by one comparison:
    K/pkg/visibility/storage/pending_workloads_cq.go:77-90, K/pkg/cache/queue/cluster_queue.go:602-606,692-704):
    higher priority first, then the earlier queue-order timestamp, then the uid. StrictFIFO admits in
    exactly this order; BestEffortFIFO, the default, lets a later Workload that fits pass one that
    does not. It leaves out what tfk8s's platforms do not turn on: admission fair sharing (usage-based
    order between LocalQueues), a changed requeuing timestamp, and the scheduler's hold on the head it
    is preempting for.

    This is the order within the tenant's own queue only (each tenant's ClusterQueue has one
    LocalQueue, so it is its ClusterQueue's order too). Which tenant's head is admitted next, when
    several wait in the cohort, fair sharing decides, by each tenant's weighted share: `1 of 3` is
    first in line at home, not first on the platform.
    """
    now = now or datetime.now(UTC)
    if not pending(mine, now):
        return None
    namespace, queue, uid = (_get(mine, "metadata", "namespace"), _get(mine, "spec", "queueName"), _get(mine, "metadata", "uid"))
    others = [
        w
        for w in workloads
        if _get(w, "metadata", "uid") != uid
        and _get(w, "metadata", "namespace") == namespace
        and _get(w, "spec", "queueName") == queue
        and pending(w, now)
    ]
    line = sorted([*others, mine], key=_sort_key)
    return next(i for i, w in enumerate(line) if w is mine) + 1, len(line)


def jobset_of(workload: Json) -> tuple[str | None, str | None]:
    """(name, uid) of the JobSet controlling `workload`, from its controller ownerReference (and the
    job-uid label when the reference has no uid); (None, None) for another kind's Workload."""
    for ref in _get(workload, "metadata", "ownerReferences") or []:
        if _get(ref, "kind") == "JobSet" and str(_get(ref, "apiVersion") or "").startswith(f"{JOBSET_GROUP}/"):
            if _get(ref, "controller") is False:
                continue
            uid = _get(ref, "uid") or _get(workload, "metadata", "labels", JOB_UID_LABEL)
            return _get(ref, "name"), uid
    return None, None


def facts(workload: Json, workloads: Sequence[Json], now: datetime | None = None) -> dict[str, Any]:
    """What readiness needs of one JobSet's Workload (tfk8s.specs.queue_readiness)."""
    _, uid = jobset_of(workload)
    return {
        "workload": _get(workload, "metadata", "name"),
        "jobsetUid": uid,
        "conditions": [dict(c) for c in _get(workload, "status", "conditions") or []],
        "position": queue_position(workloads, workload, now),
        "priority": priority(workload),
        "priorityClass": _get(workload, "spec", "priorityClassRef", "name"),
        "queue": _get(workload, "spec", "queueName"),
        "clusterQueue": _get(workload, "status", "admission", "clusterQueue"),
        "requeueAt": _get(workload, "status", "requeueState", "requeueAt"),
        "requeues": _get(workload, "status", "requeueState", "count"),
        "active": _get(workload, "spec", "active") is not False,
    }


def by_jobset(workloads: Sequence[Json], jobsets: Iterable[str], now: datetime | None = None) -> dict[str, dict[str, Any] | None]:
    """Each JobSet's Workload facts, by JobSet name (None: it has no Workload). When several
    Workloads name one JobSet (a replaced JobSet's, not yet collected), the newest not being deleted."""
    now = now or datetime.now(UTC)
    found: dict[str, dict[str, Any] | None] = {}
    for name in jobsets:
        own = [w for w in workloads if jobset_of(w)[0] == name]
        live = [w for w in own if not _get(w, "metadata", "deletionTimestamp")] or own
        newest = max(live, key=lambda w: _time(_get(w, "metadata", "creationTimestamp")), default=None)
        found[name] = None if newest is None else facts(newest, workloads, now)
    return found
