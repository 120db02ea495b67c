"""A queued cluster's readiness (tfk8s.specs.queue_readiness) and its place in its tenant's queue
(tfk8s.specs.workloads): every state from the JobSet's status and its Workload's conditions, in the
shape today's readiness has, and Kueue's order (priority, then time, then uid)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from kueue_objects import (
    ADMITTED,
    FINISHED,
    INSUFFICIENT,
    PODS_READY,
    PREEMPTED,
    QUEUED,
    RECOVERING,
    RESERVED,
    TIMED_OUT,
    cluster_status,
    cond,
    jobset_status,
    rjob,
    workload,
)
from tfk8s.specs import readiness, workloads
from tfk8s.specs.queue_readiness import NO_WORKLOAD_READ, queued_cluster_readiness

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
JOBSET = "dev-mnist"
# 1 PS and 2 workers, as the `dev` experiment's mnist.
SUSPENDED = jobset_status(rjob("ps", suspended=1), rjob("worker", suspended=1))
STARTING = jobset_status(rjob("ps", active=1), rjob("worker", active=1))
ALL_READY = jobset_status(rjob("ps", ready=1, active=1), rjob("worker", ready=1, active=1))
COMPLETED = jobset_status(
    rjob("worker", succeeded=1),  # the PS Job is gone: JobSet deleted it on success
    conditions=[cond("Completed", True, "AllJobsCompleted", "jobset completed successfully")],
)
FAILED = jobset_status(
    rjob("ps", active=1),
    rjob("worker", failed=1),
    conditions=[cond("Failed", True, "FailedJobs", "jobset failed due to one or more job failures")],
)


def facts(conditions: list[dict[str, Any]], **kw: Any) -> dict[str, Any]:
    """What the reader hands readiness for the JobSet's Workload, alone in its queue."""
    mine = workload(JOBSET, conditions=conditions, **kw)
    return workloads.facts(mine, [mine], NOW)


def report(js: dict[str, Any] | None, queue: dict[str, Any] | None, *, suspend: bool | None, chief: bool = False, **extra: Any):
    status = cluster_status(js, suspend=suspend, **extra)
    return queued_cluster_readiness(ps_expected=1, workers_expected=2, chief_expected=chief, status=status, queue=queue)


STATES = [
    # id, JobSet status, suspended, Workload conditions, state, phase, words in the reason
    ("queued-for-quota", SUSPENDED, True, QUEUED, "Queued", "Pending", [INSUFFICIENT]),
    ("quota-reserved-checks-pending", SUSPENDED, True, RESERVED, "Admitted", "Pending", ["waiting for its admission checks"]),
    ("admitted-starting", STARTING, False, ADMITTED, "Admitted", "Pending", ["admitted: its tasks are starting"]),
    ("running", ALL_READY, False, PODS_READY, "Running", "Running", []),
    ("succeeded", COMPLETED, False, FINISHED, "Succeeded", "Succeeded", []),
    ("failed", FAILED, False, PODS_READY, "Failed", "Failed", ["FailedJobs: jobset failed due to one or more job failures"]),
    (
        "preempted",
        SUSPENDED,
        True,
        PREEMPTED,
        "Preempted",
        "Pending",
        ["InCohortFairSharing", "resumes from its last checkpoint"],
    ),
    (
        "pods-ready-timeout",
        SUSPENDED,
        True,
        TIMED_OUT,
        "Evicted",
        "Pending",
        ["PodsReadyTimeout", "waitForPodsReady", "resumes from its last checkpoint"],
    ),
    (
        "recovering",
        jobset_status(rjob("ps", ready=1, active=1), rjob("worker", active=1)),
        False,
        RECOVERING,
        "Admitted",
        "Pending",
        ["since 2026-11-27T10:05:00Z", "evicts the whole cluster (PodsReadyTimeout)"],
    ),
]


@pytest.mark.parametrize(
    ("js", "suspend", "conditions", "state", "phase", "says"), [s[1:] for s in STATES], ids=[s[0] for s in STATES]
)
def test_each_state_from_the_jobset_and_its_workload(
    js: dict[str, Any], suspend: bool, conditions: list[dict[str, Any]], state: str, phase: str, says: list[str]
) -> None:
    found = report(js, facts(conditions), suspend=suspend)
    assert (found["queue"]["state"], found["phase"]) == (state, phase)
    assert found["ready"] is (state in ("Running", "Succeeded"))
    assert found["ready"] is (found["problems"] == [])
    for words in says:
        assert words in found["queue"]["reason"], found["queue"]["reason"]
        assert any(words in p for p in found["problems"]), found["problems"]
    # The shape of today's report: a reader of `readiness` sees the same keys, and the queue beside.
    today = readiness.cluster_readiness(ps_expected=1, workers_expected=2, chief_expected=False, status={})
    assert set(found) == set(today) | {"queue"}


def test_a_queued_cluster_says_why_and_where_it_waits() -> None:
    mine = workload(JOBSET, conditions=QUEUED, created="2026-11-27T09:30:00Z")
    ahead = workload("dev-cifar", conditions=QUEUED, created="2026-11-27T09:00:00Z")
    behind = workload("dev-big", conditions=QUEUED, created="2026-11-27T09:45:00Z")
    queue = workloads.by_jobset([mine, ahead, behind], [JOBSET], NOW)[JOBSET]
    found = report(SUSPENDED, queue, suspend=True)
    assert found["queue"]["position"] == "2 of 3"
    assert found["problems"] == [f"queued (2 of 3 in the tenant's queue): {INSUFFICIENT}"]
    assert (found["ps"]["available"], found["workers"]["ready"]) == (0, 0)


def test_succeeded_needs_no_parameter_server_left() -> None:
    found = report(COMPLETED, facts(FINISHED), suspend=False)
    assert found["ps"] == {
        "available": 0,
        "expected": 1,
        "jobs": {k: 0 for k in ("ready", "active", "succeeded", "failed", "suspended")},
    }
    assert found["workers"]["succeeded"] == 2 and found["problems"] == []


def test_counts_are_a_roles_whole_job_all_of_its_tasks_or_none() -> None:
    """JobSet counts Jobs; one Job holds all of a role's tasks."""
    one_worker_short = report(
        jobset_status(rjob("ps", ready=1, active=1), rjob("worker", active=1)), facts(ADMITTED), suspend=False
    )
    assert one_worker_short["ps"]["available"] == 1 and one_worker_short["workers"]["ready"] == 0
    assert "workers: 0/2 ready or done" in one_worker_short["problems"]
    assert "parameter servers: 0/1 available" not in one_worker_short["problems"]
    running = report(ALL_READY, facts(PODS_READY), suspend=False)
    assert running["workers"] == {
        "ready": 2,
        "active": 2,
        "succeeded": 0,
        "failed": 0,
        "expected": 2,
        "jobs": {"ready": 1, "active": 1, "succeeded": 0, "failed": 0, "suspended": 0},
    }


def test_a_chief_cluster_runs_only_with_its_chief_ready() -> None:
    without_chief = report(ALL_READY, facts(PODS_READY), suspend=False, chief=True)
    assert without_chief["queue"]["state"] == "Admitted" and "chief: not ready" in without_chief["problems"]
    js = jobset_status(rjob("ps", ready=1, active=1), rjob("worker", ready=1, active=1), rjob("chief", ready=1, active=1))
    assert report(js, facts(PODS_READY), suspend=False, chief=True)["queue"]["state"] == "Running"


def test_without_workload_facts_the_jobset_alone_decides() -> None:
    queued = report(SUSPENDED, None, suspend=True)
    assert queued["queue"]["state"] == "Queued" and queued["queue"]["reason"] == NO_WORKLOAD_READ
    assert queued["phase"] == "Pending" and queued["ready"] is False
    assert report(ALL_READY, None, suspend=False)["queue"]["state"] == "Running"
    assert report(STARTING, None, suspend=False)["queue"]["state"] == "Admitted"
    assert report(COMPLETED, None, suspend=False)["phase"] == "Succeeded"
    just_created = report(None, None, suspend=True)
    assert just_created["queue"]["state"] == "Queued" and just_created["workers"]["ready"] == 0


def test_an_unknown_read_is_reported_and_the_jobset_decides() -> None:
    found = report(SUSPENDED, {"unknown": "may not list, and the fix"}, suspend=True)
    assert found["queue"]["state"] == "Queued" and found["queue"]["reason"] == NO_WORKLOAD_READ
    assert found["queue"]["unknown"] == "may not list, and the fix"


def test_a_workload_of_an_earlier_jobset_of_the_same_name_is_not_taken_for_this_ones() -> None:
    stale = facts(PODS_READY, jobset_uid="uid-of-the-replaced-one")
    found = report(SUSPENDED, stale, suspend=True)
    assert found["queue"]["state"] == "Queued" and "earlier JobSet's" in found["queue"]["unknown"]


def test_a_lost_scratch_claim_keeps_a_running_cluster_pending() -> None:
    found = report(ALL_READY, facts(PODS_READY), suspend=False, scratch={"phase": "Lost"})
    assert found["queue"]["state"] == "Running" and found["phase"] == "Pending"
    assert found["problems"] == ["scratch volume is Lost, not Bound"]


def test_a_deactivated_workload_will_not_come_back_by_itself() -> None:
    deactivated = [cond("Evicted", True, "DeactivatedDueToRequeuingLimitExceeded", "exceeded the requeuing limit")]
    found = report(SUSPENDED, facts(deactivated, active=False, requeue={"count": 3}), suspend=True)
    assert found["queue"]["state"] == "Evicted" and "will not admit it again" in found["queue"]["reason"]
    assert found["queue"]["position"] is None  # an inactive Workload is in no queue


def test_a_workload_backing_off_after_an_eviction_is_not_in_line_yet() -> None:
    backoff = {"count": 1, "requeueAt": "2026-11-27T12:05:00Z"}
    found = report(SUSPENDED, facts(TIMED_OUT, requeue=backoff), suspend=True)
    assert found["queue"]["state"] == "Evicted" and found["queue"]["position"] is None
    assert "at 2026-11-27T12:05:00Z" in found["queue"]["reason"]
    after = report(SUSPENDED, facts(TIMED_OUT, requeue={"count": 1, "requeueAt": "2026-11-27T11:55:00Z"}), suspend=True)
    assert after["queue"]["position"] == "1 of 1"


# Kueue's order (kueue pkg/cache/queue/cluster_queue.go baseCompareFunc, pkg/workload/workload.go GetQueueOrderTimestamp).
def line(*wls: dict[str, Any]) -> list[str]:
    """The JobSets of `wls` in queue order, as queue_position places each."""
    placed = {w["metadata"]["ownerReferences"][0]["name"]: workloads.queue_position(wls, w, NOW) for w in wls}
    assert all(p is not None and p[1] == len(wls) for p in placed.values()), placed
    return sorted(placed, key=lambda name: placed[name][0])  # type: ignore[index]


def test_higher_priority_goes_first_whatever_its_age() -> None:
    assert line(
        workload("old-low", conditions=QUEUED, created="2026-11-27T08:00:00Z", priority=10),
        workload("new-high", conditions=QUEUED, created="2026-11-27T09:00:00Z", priority=1000),
        workload("no-class", conditions=QUEUED, created="2026-11-27T07:00:00Z"),  # priority 0
    ) == ["new-high", "old-low", "no-class"]


def test_equal_priorities_go_by_creation_time_then_uid() -> None:
    assert line(
        workload("b", conditions=QUEUED, created="2026-11-27T09:00:00Z", priority=5, uid="uid-2"),
        workload("a", conditions=QUEUED, created="2026-11-27T09:00:00Z", priority=5, uid="uid-1"),
        workload("first", conditions=QUEUED, created="2026-11-27T08:59:59Z", priority=5, uid="uid-9"),
    ) == ["first", "a", "b"]


def test_a_pods_ready_timeout_queues_again_from_its_eviction_time() -> None:
    """Evicted at 11:00 though created at 08:00: behind one created at 10:00."""
    assert line(
        workload("evicted", conditions=TIMED_OUT, created="2026-11-27T08:00:00Z"),
        workload("later", conditions=QUEUED, created="2026-11-27T10:00:00Z"),
    ) == ["later", "evicted"]


def test_only_pending_workloads_of_the_same_local_queue_and_namespace_count() -> None:
    mine = workload("mine", conditions=QUEUED, created="2026-11-27T09:00:00Z")
    others = [
        workload("admitted", conditions=ADMITTED, created="2026-11-27T08:00:00Z"),
        workload("finished", conditions=FINISHED, created="2026-11-27T08:00:00Z"),
        workload("inactive", conditions=QUEUED, created="2026-11-27T08:00:00Z", active=False),
        workload("other-queue", conditions=QUEUED, created="2026-11-27T08:00:00Z", queue="other"),
        workload("other-tenant", conditions=QUEUED, created="2026-11-27T08:00:00Z", namespace="tfk8s-bob"),
        workload("preempted-back-in-line", conditions=PREEMPTED, created="2026-11-27T08:30:00Z"),
    ]
    assert workloads.queue_position([mine, *others], mine, NOW) == (2, 2)
    assert workloads.queue_position([mine, *others], others[0], NOW) is None  # admitted: in no queue


def test_each_jobset_gets_its_own_workload_and_the_newest_when_replaced() -> None:
    old = workload(JOBSET, conditions=FINISHED, created="2026-11-27T08:00:00Z", uid="wl-old", jobset_uid="js-old")
    new = workload(JOBSET, conditions=QUEUED, created="2026-11-27T09:00:00Z", uid="wl-new", jobset_uid="js-new")
    other = workload("dev-cifar", conditions=ADMITTED)
    found = workloads.by_jobset([old, other, new], [JOBSET, "dev-cifar", "dev-absent"], NOW)
    assert found[JOBSET] is not None and found[JOBSET]["jobsetUid"] == "js-new"
    assert found[JOBSET]["position"] == (1, 1) and found[JOBSET]["queue"] == "experiments"
    assert found["dev-cifar"] is not None and found["dev-cifar"]["clusterQueue"] == "tfk8s-alice"
    assert found["dev-absent"] is None
