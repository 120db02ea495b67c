"""What a fault injected on the real node cost a run, as its e2e tests measure it (issue 56).

A test makes a `Fault` when it deletes a pod or kills a container, waits on the run's own progress,
then calls `record`: the mode, the fault, the step the run resumed from, the steps lost, the seconds
to train again, and the phases of the task that started again, read from that task's progress file
on the log volume (tfk8s_train.task_progress: its launcher's start, the child's start, TensorFlow
imported, the cluster formed, each a wall-clock time of this machine, where the real node runs).
With RECORD_ENV set, each record is appended to that file as a JSON line: bench/recovery.py runs
the fault tests that way and takes the medians.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RECORD_ENV = "TFK8S_RECOVERY_RECORD"


@dataclass(frozen=True)
class Fault:
    """A task of a run lost mid-run, and when."""

    what: str
    at_step: int  # the client's global step then (the chief's, or the in-graph chief's)
    at: float  # time.monotonic(), for the test's own waits
    wall: float  # time.time(), to set beside the times of the tasks' progress files

    @classmethod
    def now(cls, what: str, at_step: int) -> Fault:
        return cls(what, at_step, time.monotonic(), time.time())

    def since(self) -> float:
        return time.monotonic() - self.at


def progress(run: Path, task: str) -> dict[str, Any]:
    """`task`'s progress file in the run's directory ({} until its launcher writes one)."""
    try:
        return json.loads((run / ".tfk8s" / "progress" / f"{task}.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def started_again(run: Path, task: str, fault: Fault, *, phase: str | None) -> dict[str, Any] | None:
    """`task`'s progress file once a start after the fault has reached `phase` (a `tfk8s-phase` name:
    `tensorflow_imported`, `cluster_ready`; None: once it started): the file is rewritten every 5 s."""
    found = progress(run, task)
    if found.get("started_at", 0) > fault.wall and (phase is None or f"{phase}_at" in found.get("phases", {})):
        return found
    return None


def phases(start: dict[str, Any], fault: Fault) -> dict[str, float | None]:
    """Seconds of each phase of a task's start after the fault, from its progress file: its
    launcher started (the new pod, or the same pod's container, running), its trainer started,
    TensorFlow imported, the cluster formed (a PS has no such phase: it serves)."""
    marks = start.get("phases", {})

    def between(earlier: float | None, later: float | None) -> float | None:
        return round(later - earlier, 2) if earlier is not None and later is not None else None

    return {
        "pod_back": between(fault.wall, start.get("started_at")),
        "trainer_started": between(start.get("started_at"), marks.get("child_started_at")),
        "tensorflow_import": between(marks.get("child_started_at"), marks.get("tensorflow_imported_at")),
        "cluster_formed": between(marks.get("tensorflow_imported_at"), marks.get("cluster_ready_at")),
    }


def record(
    mode: str,
    fault: Fault,
    *,
    task: str,
    start: dict[str, Any],
    resumed_from: int,
    steps_lost: int,
    training_again: float,
) -> None:
    """Appends what the fault cost to RECORD_ENV's file, when set. `task` is the task that started
    again (`start` its progress file); `training_again` the seconds from the fault until the run
    trained past the step it had reached (for a worker that joins, until it trained a step)."""
    path = os.environ.get(RECORD_ENV)
    if not path:
        return
    line = {
        "mode": mode,
        "fault": fault.what,
        "task": task,
        "at_step": fault.at_step,
        "resumed_from": resumed_from,
        "steps_lost": steps_lost,
        "training_again": round(training_again, 2),
        "phases": phases(start, fault),
    }
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(line, sort_keys=True) + "\n")
