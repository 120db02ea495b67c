"""bench/first_step.py's arithmetic (bench/first_step_phases.py): which task's time ends each phase
of a start, and the table of both sides."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from first_step_phases import (  # noqa: E402
    PHASES,
    PodSeen,
    TaskTimes,
    api_time,
    durations,
    gating,
    phase_ends,
    table,
    task_of,
    task_table,
    task_times,
)

START = 1_000.0


def pod(role: str, index: int, *, created: str = "", scheduled: str = "", started: str = "") -> dict[str, Any]:
    metadata: dict[str, Any] = {"labels": {"tfk8s.io/role": role}, "annotations": {}}
    if role == "ps":
        metadata["labels"]["tfk8s.io/index"] = str(index)
    else:
        metadata["annotations"]["batch.kubernetes.io/job-completion-index"] = str(index)
    if created:
        metadata["creationTimestamp"] = created
    status: dict[str, Any] = {}
    if scheduled:
        status["conditions"] = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": scheduled}]
    if started:
        status["containerStatuses"] = [{"state": {"running": {"startedAt": started}}}]
    return {"metadata": metadata, "status": status}


def times(task: str, base: float, *, first_step: float | None = None) -> TaskTimes:
    """A task whose points come one second apart from `base` seconds after START."""
    at = START + base
    stepping = not task.startswith("ps")
    return TaskTimes(
        task=task,
        pod_created=at,
        scheduled=at + 1,
        started=at + 2,
        tensorflow_imported=at + 3,
        cluster_ready=at + 4 if stepping else None,
        first_step=START + first_step if first_step is not None else None,
    )


@pytest.mark.parametrize(
    ("role", "index", "task"),
    [("ps", 1, "ps-1"), ("worker", 2, "worker-2"), ("chief", 0, "chief-0")],
    ids=["a PS by its index label", "a worker by its Job completion index", "a chief"],
)
def test_a_pod_is_named_after_the_task_it_runs(role: str, index: int, task: str) -> None:
    assert task_of(pod(role, index)) == task


def test_api_times_are_epoch_seconds_of_utc() -> None:
    assert api_time("1970-01-01T00:16:40Z") == START
    assert api_time(None) is None


def test_watch_times_and_the_progress_file_win_over_the_api_servers_whole_seconds() -> None:
    seen = PodSeen(pod("worker", 0, created="1970-01-01T00:16:40Z", scheduled="1970-01-01T00:16:41Z"), 1000.4, 1000.9)
    progress = {"worker-0": {"started_at": 1002.5, "first_step_at": 1009.0, "phases": {"tensorflow_imported_at": 1005.0}}}
    (task,) = task_times([seen], progress).values()
    assert (task.pod_created, task.scheduled, task.started, task.tensorflow_imported, task.first_step) == (
        1000.4,
        1000.9,
        1002.5,
        1005.0,
        1009.0,
    )
    assert task.cluster_ready is None


def test_without_a_watch_event_or_progress_the_pods_own_timestamps_are_used() -> None:
    seen = PodSeen(pod("ps", 0, created="1970-01-01T00:16:40Z", scheduled="1970-01-01T00:16:41Z", started="1970-01-01T00:16:43Z"))
    (task,) = task_times([seen], {}).values()
    assert (task.task, task.pod_created, task.scheduled, task.started) == ("ps-0", 1000.0, 1001.0, 1003.0)


def test_a_task_restarted_in_a_new_pod_keeps_its_first_pods_creation() -> None:
    first, second = PodSeen(pod("worker", 1), 1001.0, 1002.0), PodSeen(pod("worker", 1), 1030.0, 1031.0)
    (task,) = task_times([second, first], {}).values()
    assert (task.pod_created, task.scheduled) == (1001.0, 1002.0)


def test_asynchronous_training_waits_for_the_ps_and_the_worker_that_stepped_first_only() -> None:
    tasks = {t.task: t for t in [times("ps-0", 0), times("worker-0", 1, first_step=9), times("worker-1", 5, first_step=12)]}
    assert sorted(t.task for t in gating(tasks, sync=False)) == ["ps-0", "worker-0"]
    assert sorted(t.task for t in gating(tasks, sync=True)) == ["ps-0", "worker-0", "worker-1"]


def test_each_phase_ends_when_its_last_gating_task_is_through() -> None:
    tasks = {t.task: t for t in [times("ps-0", 0.5), times("worker-0", 0.2, first_step=9), times("worker-1", 3, first_step=12)]}
    ends = phase_ends(START, START + 0.1, tasks, sync=False)
    assert ends == {
        "engine": pytest.approx(0.1),
        "API objects": pytest.approx(0.5),  # ps-0; worker-1 (3.0) does not gate asynchronous training
        "scheduling": pytest.approx(1.5),
        "image and container start": pytest.approx(2.5),
        "TensorFlow import": pytest.approx(3.5),
        "cluster formation": pytest.approx(4.2),  # worker-0: a PS never reports it
        "first step": pytest.approx(9.0),
    }
    synchronous = phase_ends(START, START + 0.1, tasks, sync=True)
    assert synchronous["API objects"] == pytest.approx(3.0)
    assert synchronous["cluster formation"] == pytest.approx(7.0)
    assert synchronous["first step"] == pytest.approx(9.0)  # the earliest first step still


def test_a_phase_never_ends_before_the_one_before_it_and_an_unseen_one_is_skipped() -> None:
    ps = TaskTimes(task="ps-0", pod_created=START + 1, scheduled=START + 2, started=START + 3, tensorflow_imported=None)
    worker = TaskTimes(
        task="worker-0",
        pod_created=START + 0.5,
        scheduled=START + 0.8,  # before ps-0's creation: the phase took 0 s
        started=START + 3,
        tensorflow_imported=START + 6,
        cluster_ready=START + 7,
        first_step=START + 8,
    )
    ends = phase_ends(START, START + 0.2, {"ps-0": ps, "worker-0": worker}, sync=False)
    assert ends["scheduling"] == pytest.approx(2.0)
    assert ends["TensorFlow import"] is None  # ps-0's never came
    spent = durations(ends)
    assert spent["TensorFlow import"] is None
    assert spent["cluster formation"] == pytest.approx(4.0)  # from the last phase seen (3.0)
    assert sum(v for v in spent.values() if v is not None) == pytest.approx(8.0)


def test_the_table_has_a_row_per_phase_medians_and_ratios_pulumi_over_kubectl() -> None:
    def run(scale: float) -> dict[str, float | None]:
        return {phase: scale * (i + 1) for i, (phase, _) in enumerate(PHASES)}

    text = table(
        {"pulumi": [run(2.0), run(2.2), run(100.0)], "kubectl": [run(1.0), run(1.0), run(1.0)]},
        {"pulumi": [3.0, 4.0, 5.0], "kubectl": [0.5, 0.4, None]},
    )
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in text.splitlines()[2:]]
    assert [r[0] for r in rows[: len(PHASES)]] == [p for p, _ in PHASES]
    assert rows[0][2:7] == ["2.20", "2.20", "1.00", "1.00", "2.20"]  # engine: medians, and their ratio
    assert rows[-2][3:7] == ["**15.40**", "", "**7.00**", "**2.20**"]  # to the first step: 7 x 2.2 s, 7 x 1 s
    assert rows[-1][3:6] == ["4.00", "", "0.45"]  # when the commands returned, a start that never did left out


def test_the_task_table_shows_each_tasks_points_since_its_start_a_row_per_side() -> None:
    ps, worker = times("ps-0", 0.5), times("worker-0", 0.2, first_step=9)
    later = TaskTimes(task="ps-0", pod_created=START + 100.0)  # a start 100 s later whose ps-0 got no further
    text = task_table({"pulumi": [(START, {"ps-0": ps, "worker-0": worker}), (START + 100, {"ps-0": later})], "kubectl": []})
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in text.splitlines()[2:]]
    assert rows[0] == ["ps-0", "pulumi", "0.25", "1.50", "2.50", "3.50", "-", "-"]
    assert rows[1] == ["ps-0", "kubectl", "-", "-", "-", "-", "-", "-"]
    assert rows[2] == ["worker-0", "pulumi", "0.20", "1.20", "2.20", "3.20", "4.20", "9.00"]
