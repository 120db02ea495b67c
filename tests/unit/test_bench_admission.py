"""bench/admission.py's arithmetic (bench/admission_times.py): each cluster's points from watch
events, the admission that follows freed capacity, percentiles and the tables."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from admission_times import (  # noqa: E402
    ClusterTimes,
    admission_points,
    admission_table,
    cluster_times,
    next_admitted,
    percentile,
    solo_points,
    solo_table,
    submission_table,
)

START = 1_000.0


def pod(cluster: str, name: str, phase: str = "Pending", *, deleting: bool = False) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "labels": {"app.kubernetes.io/instance": cluster}}
    if deleting:
        metadata["deletionTimestamp"] = "1970-01-01T00:16:40Z"
    return {"metadata": metadata, "status": {"phase": phase}}


def workload(jobset: str, *conditions: str) -> dict[str, Any]:
    return {
        "metadata": {"name": f"jobset-{jobset}-abcde", "ownerReferences": [{"kind": "JobSet", "name": jobset}]},
        "status": {"conditions": [{"type": c, "status": "True"} for c in conditions]},
    }


def jobset(name: str, *conditions: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"app.kubernetes.io/instance": name}},
        "status": {"conditions": [{"type": c, "status": "True"} for c in conditions]},
    }


def test_a_clusters_points_come_from_the_first_event_that_shows_each() -> None:
    objects = [
        (START + 1.0, "ADDED", jobset("a-train")),
        (START + 1.5, "MODIFIED", jobset("a-train")),
        (START + 8.5, "MODIFIED", jobset("a-train", "Completed")),
    ]
    workloads = [
        (START + 1.2, "ADDED", workload("a-train")),
        (START + 1.4, "MODIFIED", workload("a-train", "QuotaReserved", "Admitted")),
        (START + 1.6, "MODIFIED", workload("a-train", "QuotaReserved", "Admitted")),
        (START + 9.0, "MODIFIED", workload("a-train", "Finished")),
    ]
    pods = [
        (START + 2.0, "ADDED", pod("a-train", "ps-0")),
        (START + 2.1, "ADDED", pod("a-train", "worker-0")),
        (START + 2.3, "ADDED", pod("a-train", "worker-1")),
        (START + 2.5, "MODIFIED", pod("a-train", "worker-0", "Running")),
        (START + 2.4, "MODIFIED", pod("a-train", "ps-0", "Running")),  # events are ordered by arrival
        (START + 2.9, "MODIFIED", pod("a-train", "worker-1", "Running")),
        (START + 3.5, "MODIFIED", pod("a-train", "worker-1", "Running")),
    ]
    times = cluster_times(objects, workloads, pods, per_cluster=3)
    assert times == {
        "a-train": ClusterTimes(
            created=START + 1.0,
            completed=START + 8.5,
            workload=START + 1.2,
            admitted=START + 1.4,
            finished=START + 9.0,
            pods_created=START + 2.3,
            running=START + 2.9,
        )
    }


def test_pods_count_as_running_only_once_the_cluster_has_all_of_them_and_not_while_deleted() -> None:
    pods = [
        (START + 1.0, "ADDED", pod("a-train", "ps-0", "Running")),
        (START + 1.1, "ADDED", pod("a-train", "worker-0", "Running")),
        (START + 1.2, "MODIFIED", pod("a-train", "worker-1", "Running", deleting=True)),
        (START + 1.3, "DELETED", pod("a-train", "worker-1", "Running")),
    ]
    times = cluster_times([], [], pods, per_cluster=3)["a-train"]
    assert (times.pods_created, times.running) == (START + 1.2, None)


def test_a_plain_platforms_cluster_is_created_with_its_first_deployment_or_job_and_has_no_workload() -> None:
    deployment = {"metadata": {"name": "a-train-ps-0", "labels": {"app.kubernetes.io/instance": "a-train"}}}
    job = {"metadata": {"name": "a-train-worker", "labels": {"app.kubernetes.io/instance": "a-train"}}}
    times = cluster_times([(START + 0.7, "ADDED", job), (START + 0.6, "ADDED", deployment)], [], [], per_cluster=3)
    assert times["a-train"] == ClusterTimes(created=START + 0.6)


def test_the_points_of_a_start_are_seconds_since_the_command() -> None:
    times = ClusterTimes(
        created=START + 1.0, workload=START + 1.1, admitted=START + 1.5, pods_created=START + 2.0, running=START + 2.5
    )
    assert solo_points(START, START + 1.8, times) == pytest.approx(
        {"returned": 1.8, "created": 1.0, "workload": 1.1, "admitted": 1.5, "pods_created": 2.0, "running": 2.5}
    )
    plain = solo_points(START, START + 3.0, ClusterTimes(created=START + 1.0, running=START + 2.0))
    assert (plain["workload"], plain["admitted"]) == (None, None)


def test_an_admission_is_timed_from_the_freed_capacity_to_the_next_clusters_pods_running() -> None:
    previous = ClusterTimes(completed=START + 0.3, finished=START + 0.4)
    following = ClusterTimes(admitted=START + 0.6, pods_created=START + 0.9, running=START + 1.3)
    assert admission_points(START, previous, following) == pytest.approx(
        {"previous_completed": 0.3, "previous_finished": 0.4, "admitted": 0.6, "pods_created": 0.9, "running": 1.3}
    )


def test_the_next_admitted_is_the_first_admitted_after_the_capacity_was_freed_and_not_yet_counted() -> None:
    times = {
        "fill": ClusterTimes(admitted=START - 50),
        "q1-000": ClusterTimes(admitted=START - 10),  # admitted before: already counted
        "q1-001": ClusterTimes(admitted=START + 0.8),
        "q1-002": ClusterTimes(admitted=START + 0.5),
        "q1-003": ClusterTimes(),
    }
    assert next_admitted(times, START, done={"fill", "q1-000"}) == "q1-002"
    assert next_admitted(times, START, done={"fill", "q1-000", "q1-002"}) == "q1-001"
    assert next_admitted({"q1-003": ClusterTimes()}, START, done=set()) is None


@pytest.mark.parametrize(
    ("q", "expected"),
    [(50, 5.0), (95, 10.0), (100, 10.0), (10, 1.0), (0, 1.0)],
    ids=["p50", "p95 of 10 is the largest", "max", "p10", "p0 is the smallest"],
)
def test_percentiles_are_nearest_rank_values_that_were_measured(q: float, expected: float) -> None:
    assert percentile([float(v) for v in range(10, 0, -1)], q) == expected


def test_a_percentile_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError, match="no values"):
        percentile([], 50)


def test_the_no_wait_table_puts_the_platforms_side_by_side_with_ratios_of_their_medians() -> None:
    queueing = [
        {"returned": r, "created": 1.0, "workload": 1.1, "admitted": 1.2, "pods_created": 1.5, "running": run}
        for r, run in ((1.0, 2.0), (2.0, 3.0), (3.0, 4.0))
    ]
    plain = [
        {"returned": r, "created": 1.0, "workload": None, "admitted": None, "pods_created": 1.2, "running": 1.5}
        for r in (2.0, 2.0, 9.0)
    ]
    table = solo_table({"queueing": queueing, "plain": plain}).splitlines()
    assert "| `pulumi up` returned | 2.00 | 2.00 | 1.00 |" in table
    assert "| Workload admitted | 1.20 | - |  |" in table
    assert "| **all pods Running** | 3.00 | 1.50 | 2.00 |" in table


def test_the_admission_table_has_p50_p95_and_max_per_n() -> None:
    def admission(n: int, running: float) -> dict[str, Any]:
        return {
            "queued": n,
            "points": {
                "previous_completed": 0.1,
                "previous_finished": 0.2,
                "admitted": 0.5,
                "pods_created": 0.7,
                "running": running,
            },
        }

    table = admission_table([admission(1, 1.0), *(admission(10, float(r)) for r in range(1, 11))]).splitlines()
    assert "| 1 | 1 | **next cluster's pods Running** | 1.00 | 1.00 | 1.00 |" in table
    assert "| 10 | 10 | **next cluster's pods Running** | 5.00 | 10.00 | 10.00 |" in table
    assert "| 10 | 10 | next Workload admitted | 0.50 | 0.50 | 0.50 |" in table


def test_the_submission_table_groups_by_how_many_wait_ahead_against_an_empty_queue() -> None:
    submissions = [
        {"ahead": 0, "seconds": 2.0},
        *({"ahead": a, "seconds": 3.0} for a in range(1, 10)),
        {"ahead": 99, "seconds": 4.0},
    ]
    table = submission_table(submissions, solo=2.0).splitlines()
    assert "| 0 | 1 | 2.00 | 2.00 | 1.00 |" in table
    assert "| 1-9 | 9 | 3.00 | 3.00 | 1.50 |" in table
    assert "| 50-99 | 1 | 4.00 | 4.00 | 2.00 |" in table
    assert not any(row.startswith("| 10-49") for row in table)
