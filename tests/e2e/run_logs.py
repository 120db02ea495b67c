"""A run's files on the log volume, read from this machine: its tasks' logs (each pod of a task
appends to `<run>/logs/<task>.log`) and its checkpoint state. What the real node's tests wait on:
a run's own progress, never a timer."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from checkpoints import latest_checkpoint_step

START = re.compile(r"tfk8s: (\S+) starts at global step (\d+)(?: \(restored: ([^)]*)\))?;")
PROGRESS = re.compile(r"tfk8s-progress task=\S+ step=(\d+) ")
RECREATED = re.compile(r"session recreated at global step (\d+) \(had seen (\d+); chief restores ([^)]*)\)")


def task_log(run: Path, task: str) -> str:
    log = run / "logs" / f"{task}.log"
    return log.read_text(errors="replace") if log.exists() else ""


def checkpoint_of(path: str) -> int:
    """The step of a checkpoint path (`.../model.ckpt-<step>`); 0 for `None`, no checkpoint."""
    return int(path.rsplit("-", 1)[1]) if path != "None" else 0


def checkpoint_step(run: Path) -> int:
    """The newest checkpoint's global step in the run's directory (-1: none yet)."""
    return latest_checkpoint_step(run / "checkpoints")


@dataclass(frozen=True)
class TaskRun:
    """One start of a task's trainer, as its log tells it."""

    started_at: int  # the global step it started at
    restored: int | None  # a chief's: the checkpoint's step it restored (0: none, a new run)
    steps: list[int]  # the global steps of its progress lines (every --log-every of its own steps)


def task_runs(run: Path, task: str) -> list[TaskRun]:
    """Each start of `task`'s trainer, in order."""
    runs: list[TaskRun] = []
    for line in task_log(run, task).splitlines():
        if (start := START.match(line)) and start[1] == task:
            runs.append(TaskRun(int(start[2]), checkpoint_of(start[3]) if start[3] else None, []))
        elif runs and (progress := PROGRESS.match(line)):
            runs[-1].steps.append(int(progress[1]))
    return runs


def last_step(run: Path, task: str) -> int:
    """The global step of `task`'s last progress line (-1: none yet): a fraction of a second old."""
    runs = task_runs(run, task)
    return runs[-1].steps[-1] if runs and runs[-1].steps else -1


def sessions_recreated(run: Path, chief: str) -> list[tuple[int, int, int]]:
    """(step resumed at, step seen before, checkpoint step restored) of each time a between-graph
    chief recreated its session after its PS came back."""
    found = RECREATED.findall(task_log(run, chief))
    return [(int(resumed), int(seen), checkpoint_of(restored)) for resumed, seen, restored in found]
