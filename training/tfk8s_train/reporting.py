"""What a task tells the world: progress lines, TensorBoard scalars, a result file.

Progress lines have a fixed, greppable shape that ``tfk8s_train.runner`` and the launcher
(``task_progress``: the progress file, the metrics) parse, the first one after the task's first step::

    tfk8s-progress task=worker-0 step=120 loss=0.3120 accuracy=0.9219 examples_per_sec=5120.4 target=300 at=1764547200.125

``tfk8s-phase NAME at=T`` marks when TensorFlow is imported and when the cluster is formed (the
time-to-first-step benchmark's phases), ``tfk8s-placement ps-0=N ...`` how many variables each PS
holds. ``at`` is the trainer's own clock when it printed the line: the launcher reads the pipe when
it is scheduled, on a busy node a burst of lines at once, and a rate or a phase timed by the
reading would be the launcher's.
TensorBoard event files go to ``<log_dir>/tensorboard/<task>/`` so every task is a run.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tensorflow as tf

from tfk8s_train import atomic_file
from tfk8s_train.task_progress import PHASE_PREFIX, PLACEMENT_PREFIX, PROGRESS_PREFIX

ScalarWriter = Callable[[str, float, int], None]


def phase(name: str) -> None:
    """Mark a phase of the task's start (``tensorflow_imported``, ``cluster_ready``) for the launcher."""
    print(f"{PHASE_PREFIX}{name} at={time.time():.3f}", flush=True)


def placement_line(variable_devices: dict[str, str]) -> None:
    """How many variables each PS holds (device ``/job:ps/replica:0/task:1/...`` is ``ps-1``)."""
    counts: dict[str, int] = {}
    for device in variable_devices.values():
        job = re.search(r"/job:(\w+)", device)
        task = re.search(r"/task:(\d+)", device)
        if job and task:
            name = f"{job[1]}-{task[1]}"
            counts[name] = counts.get(name, 0) + 1
    if counts:
        print(PLACEMENT_PREFIX + " ".join(f"{name}={count}" for name, count in sorted(counts.items())), flush=True)


def tensorboard_dir(log_dir: str, task: str) -> Path:
    return Path(log_dir) / "tensorboard" / task


def checkpoint_dir(log_dir: str) -> Path:
    return Path(log_dir) / "checkpoints"


def v1_scalar_writer(logdir: Path) -> tuple[ScalarWriter, Callable[[], None]]:
    """For tf.compat.v1 graph code: a FileWriter fed with Summary protos (no graph ops)."""
    writer = tf.compat.v1.summary.FileWriter(str(logdir))

    def write(tag: str, value: float, step: int) -> None:
        summary = tf.compat.v1.Summary(value=[tf.compat.v1.Summary.Value(tag=tag, simple_value=value)])
        writer.add_summary(summary, step)

    return write, writer.close


def v2_scalar_writer(logdir: Path) -> tuple[ScalarWriter, Callable[[], None]]:
    """For eager code (in-graph client, notebook)."""
    writer = tf.summary.create_file_writer(str(logdir))

    def write(tag: str, value: float, step: int) -> None:
        with writer.as_default():
            tf.summary.scalar(tag, value, step=step)

    return write, writer.close


class Progress:
    """Rate-aware progress for one task: prints, and writes TensorBoard scalars."""

    def __init__(self, task: str, batch_size: int, write: ScalarWriter, target: int | None = None) -> None:
        self.task = task
        self.batch_size = batch_size
        self.write = write
        self.target = target
        self.local_steps = 0
        self.started = time.perf_counter()
        self._mark = (self.started, 0)

    def steps_done(self, count: int) -> None:
        self.local_steps += count

    def report(self, step: int, loss: float, accuracy: float) -> float:
        """Log one point; return examples/s of this task since the previous report."""
        now = time.perf_counter()
        then, steps_then = self._mark
        rate = (self.local_steps - steps_then) * self.batch_size / max(now - then, 1e-9)
        self._mark = (now, self.local_steps)
        self.write("loss", loss, step)
        self.write("accuracy", accuracy, step)
        self.write("examples_per_sec", rate, step)
        target = f" target={self.target}" if self.target is not None else ""
        fields = f"step={step} loss={loss:.4f} accuracy={accuracy:.4f} examples_per_sec={rate:.1f}{target} at={time.time():.3f}"
        print(f"{PROGRESS_PREFIX}task={self.task} {fields}", flush=True)
        return rate

    def overall_rate(self) -> float:
        return self.local_steps * self.batch_size / max(time.perf_counter() - self.started, 1e-9)


def run_result(
    *,
    task: str,
    mode: str,
    sync: bool,
    first_step: int,
    global_step: int,
    progress: Progress,
    variable_devices: dict[str, str],
    recoveries: list[Any],
) -> dict[str, Any]:
    """What every trainer reports when it finishes (the result file's schema; a chief adds `weights`)."""
    return {
        "task": task,
        "mode": mode,
        "sync": sync,
        "first_step": first_step,
        "global_step": global_step,
        "local_steps": progress.local_steps,
        "examples_per_sec": progress.overall_rate(),
        "variable_devices": variable_devices,
        "recoveries": recoveries,
        "finished_at": time.time(),
    }


def write_result(log_dir: str, task: str, result: dict[str, Any]) -> Path:
    """``<log_dir>/results/<task>.json``: what tests and humans read after a run."""
    path = atomic_file.write_text(Path(log_dir) / "results" / f"{task}.json", json.dumps(result, indent=2, sort_keys=True) + "\n")
    print(f"tfk8s-result task={task} {json.dumps(result, sort_keys=True)}", file=sys.stderr, flush=True)
    return path
