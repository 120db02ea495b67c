"""A log volume as the tasks' launchers leave it (docs/guide/status.md, the launcher's contract): runs
at `<root>/<experiment>/<cluster>/run-<uid>/`, progress at `.tfk8s/progress/<task>.json`, logs at
`logs/<task>.log` and their rotated `.log.1`, `.log.2`; fabricated, field by field."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

NOW = 1_700_000_000.0


def run_dir(root: Path, experiment: str, cluster: str, run: str) -> Path:
    path = root / experiment / cluster / f"run-{run}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def record(task: str, **fields: Any) -> dict[str, Any]:
    """A progress record of `task` as the contract spells it: a running task at step 0 unless `fields` say otherwise."""
    job, _, index = task.rpartition("-")
    base: dict[str, Any] = {
        "schema": 1,
        "task": task,
        "job": job,
        "index": int(index),
        "run": "r1",
        "pod": f"dev-mnist-{task}",
        "state": "running",
        "exit_code": None,
        "starts": 1,
        "started_at": NOW - 100,
        "updated_at": NOW - 2,
        "first_step_at": None,
        "step": None,
        "target_steps": None,
        "steps_per_second": None,
        "examples_per_second": None,
        "loss": None,
        "source": "trainer",
        "last_checkpoint": None,
        "memory_bytes": 123456789,
        "phases": {"child_started_at": NOW - 99, "tensorflow_imported_at": None, "cluster_ready_at": None},
    }
    return {**base, **fields}


def write_progress(root: Path, run: str, task: str, *, experiment: str = "dev", cluster: str = "mnist", **fields: Any) -> Path:
    directory = run_dir(root, experiment, cluster, run) / ".tfk8s" / "progress"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{task}.json"
    path.write_text(json.dumps(record(task, run=run, **fields)))
    return path


def write_raw(root: Path, run: str, name: str, text: str, *, experiment: str = "dev", cluster: str = "mnist") -> Path:
    """Any file among a run's progress files."""
    directory = run_dir(root, experiment, cluster, run) / ".tfk8s" / "progress"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(text)
    return path


def write_log(root: Path, run: str, name: str, lines: list[str], *, experiment: str = "dev", cluster: str = "mnist") -> Path:
    directory = run_dir(root, experiment, cluster, run) / "logs"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


def age(path: Path, mtime: float) -> None:
    os.utime(path, (mtime, mtime))


def settle(root: Path, run: str, at: float, *, experiment: str = "dev", cluster: str = "mnist") -> None:
    """The run's directories last changed `at` (made now, they would look newer than any fabricated time)."""
    path = run_dir(root, experiment, cluster, run)
    for directory in (path, path / ".tfk8s" / "progress"):
        if directory.is_dir():
            age(directory, at)
