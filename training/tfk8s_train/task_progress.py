"""How far a task has got, learnt from what it already writes, kept as `<run>/.tfk8s/progress/<task>.json`.

Two sources, never a change to the user's code:
* the built-in trainer's lines (`tfk8s_train.reporting`): `tfk8s-progress ... step=N target=T loss=L
  examples_per_sec=R at=T`, `tfk8s-phase NAME at=T` (TensorFlow imported, cluster formed) and
  `tfk8s-placement ps-0=N ...` (variables per PS), each timed by its `at` (when the trainer
  printed it) if it has one, else by its reading;
* for any other script, the TensorBoard event files under the run's directory (`event_files`): the
  largest step, the event's own wall time, and a scalar tagged `loss` if there is one. The target
  comes from the command line the launcher started (`--train_steps=N` and its kin) or from
  TFK8S_TARGET_STEPS.
The file's shape is the contract its readers (the tenant's TensorBoard gate, `tfk8s status`) rely
on: docs/guide/monitoring.md. A restarted task reads the file it left: the run's first step and
the count of starts carry over.

Runs on Python 3.6 and newer, like launch.py (`make lint` checks it with vermin).
"""

import json
import os
import re
import threading
import time
from collections import deque
from typing import Any, Deque, Dict, Optional, Sequence, Tuple

try:
    from tfk8s_train import atomic_file
    from tfk8s_train.event_files import EventDirectory
except ImportError:  # beside launch.py as plain files
    import atomic_file  # type: ignore[no-redef]
    from event_files import EventDirectory  # type: ignore[no-redef]

SCHEMA = 1
# The lines a trainer prints for its launcher (tfk8s_train.reporting writes them with these).
PROGRESS_PREFIX = "tfk8s-progress "
PHASE_PREFIX = "tfk8s-phase "
PLACEMENT_PREFIX = "tfk8s-placement "
# The flags a training script's step target goes by (seed-era mnist_replica.py: --train_steps).
TARGET_FLAGS = ("--train_steps", "--steps", "--max_steps", "--num_steps", "--training_steps", "--train-steps")
RATE_WINDOW_SECONDS = 30.0
CHECKPOINT_INDEX = re.compile(r"-(\d+)\.index$")
LOSS_TAGS = ("loss", "train/loss", "training/loss", "Loss")


def progress_dir(run_dir: str) -> str:
    return os.path.join(run_dir, ".tfk8s", "progress")


def target_from_command(cmd: Sequence[str], environ: Dict[str, str]) -> Optional[int]:
    """The step target: TFK8S_TARGET_STEPS, or a `--train_steps=N` (or `--train_steps N`) the command has."""
    raw = environ.get("TFK8S_TARGET_STEPS", "").strip()
    if raw.isdigit():
        return int(raw)
    for position, arg in enumerate(cmd):
        name, _, value = arg.partition("=")
        if name in TARGET_FLAGS:
            if not value and position + 1 < len(cmd):
                value = cmd[position + 1]
            if value.isdigit():
                return int(value)
    return None


def _fields(line: str, prefix: str) -> Dict[str, str]:
    return dict(part.split("=", 1) for part in line[len(prefix) :].split() if "=" in part)


def _number(text: Optional[str]) -> Optional[float]:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def _printed_at(fields: Dict[str, str], read_at: float) -> float:
    """When the trainer printed a line (its `at=`, the pod's own clock), never later than its
    reading; the reading's time for a line without one."""
    printed = _number(fields.get("at"))
    return min(printed, read_at) if printed is not None else read_at


def read_progress(path: str) -> Dict[str, Any]:
    try:
        with open(path) as handle:
            value = json.load(handle)
        return value if isinstance(value, dict) else {}
    except (OSError, ValueError):
        return {}


def memory_bytes(pid: Optional[int]) -> Optional[int]:
    """The resident memory of a process (Linux /proc), or None."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


class Resume:
    """What this start of a task cost the run: the step its previous start had reached, the step
    this one trains from (a chief's restored checkpoint, or where a worker joins), and the seconds
    in between. The previous start's figures are its progress file's last write, so the steps lost
    may be short, and the seconds long, by up to a write interval (5 s)."""

    def __init__(self, after_step: int, out_since: float, source: str) -> None:
        self.after_step, self.out_since, self.source = after_step, out_since, source
        self.at_step: Optional[int] = None
        self.training_at: Optional[float] = None

    def observe(self, step: int, at: float, source: str) -> None:
        """A step this start saw; the first counts. A task whose previous start reported through the
        trainer's lines waits for its own first line: the run's event files, read before it, may be
        another task's."""
        if self.at_step is None and (source == "trainer" or self.source != "trainer"):
            self.at_step, self.training_at = step, at

    @classmethod
    def after(cls, earlier: Dict[str, Any]) -> "Optional[Resume]":
        """None when the previous start never trained a step (nothing to resume)."""
        # The step of its last report, not its highest: the global step goes back when a chief
        # restores a checkpoint, and the other tasks then train on from there.
        step, updated = earlier.get("last_step"), earlier.get("updated_at")
        step = step if isinstance(step, int) else earlier.get("step")  # a file of an older tfk8s
        if not isinstance(step, int) or isinstance(step, bool) or not isinstance(updated, (int, float)):
            return None
        return cls(step, float(updated), str(earlier.get("source")))

    def as_dict(self) -> Dict[str, Any]:
        lost = None if self.at_step is None else max(0, self.after_step - self.at_step)
        seconds = None if self.training_at is None else max(0.0, self.training_at - self.out_since)
        return {"after_step": self.after_step, "at_step": self.at_step, "steps_lost": lost, "seconds": seconds}


class Tracker:
    """One task's progress; fed by the output pump's thread, read by the writer and the metrics."""

    def __init__(
        self, *, task: str, run: str, run_dir: str, target: Optional[int], read_events: bool, clock: Any = time.time
    ) -> None:
        self.task, self.run, self.run_dir, self.clock = task, run, run_dir, clock
        self.job, _, index = task.rpartition("-")
        self.index = int(index)
        self.path = os.path.join(progress_dir(run_dir), task + ".json")
        earlier = read_progress(self.path)
        self.lock = threading.Lock()
        self.started_at = clock()
        self.starts = int(earlier.get("starts") or 0) + 1
        self.first_step_at: Optional[float] = earlier.get("first_step_at")
        # Who set first_step_at: the run's event files hold every task's events, so a trainer's own
        # line outranks them (another worker may step while this one still forms its cluster).
        self.first_step_source: Optional[str] = "earlier start" if self.first_step_at is not None else None
        self.step: Optional[int] = earlier.get("step")
        self.last_step: Optional[int] = earlier.get("last_step")
        self.target = target
        self.loss: Optional[float] = None
        self.examples_per_second: Optional[float] = None
        self.source = "none"
        self.state = "starting"
        self.exit_code: Optional[int] = None
        self.phases: Dict[str, float] = {}
        self.placement: Dict[str, int] = {}
        self.checkpoint: Optional[Dict[str, Any]] = earlier.get("last_checkpoint")
        self.resume = Resume.after(earlier) if self.starts > 1 else None
        self.samples: Deque[Tuple[float, int]] = deque()
        self.events = EventDirectory(run_dir) if read_events else None
        self.pid: Optional[int] = None
        self.retired = False

    # -- fed by the launcher -------------------------------------------------------------------
    def child_started(self, pid: int) -> None:
        with self.lock:
            self.pid, self.state = pid, "running"
            self.phases["child_started_at"] = self.clock()

    def child_ended(self, state: str, exit_code: Optional[int]) -> None:
        with self.lock:
            self.state, self.exit_code, self.pid = state, exit_code, None
            self.retired = state == "retired"

    def on_line(self, line: str) -> None:
        """A line of the child's output: the trainer's reports; anything else is ignored."""
        read_at = self.clock()
        if line.startswith(PROGRESS_PREFIX):
            fields = _fields(line, PROGRESS_PREFIX)
            now = _printed_at(fields, read_at)
            step = _number(fields.get("step"))
            with self.lock:
                if self.source == "events":  # the rate so far was the run's, read from every task's events
                    self.samples.clear()
                self.source = "trainer"
                target = _number(fields.get("target"))
                self.target = int(target) if target is not None else self.target
                self.loss = _number(fields.get("loss"))
                self.examples_per_second = _number(fields.get("examples_per_sec"))
                if step is not None:
                    self._observe(int(step), now, "trainer")
        elif line.startswith(PHASE_PREFIX):
            name = line[len(PHASE_PREFIX) :].split()
            if name and "=" not in name[0]:
                with self.lock:
                    self.phases.setdefault(name[0] + "_at", _printed_at(_fields(line, PHASE_PREFIX), read_at))
        elif line.startswith(PLACEMENT_PREFIX):
            placed = {name: _number(count) for name, count in _fields(line, PLACEMENT_PREFIX).items()}
            with self.lock:
                self.placement = {name: int(count) for name, count in placed.items() if count is not None}

    def poll(self) -> None:
        """What only the disk tells: new events (scripts without trainer lines), the newest checkpoint."""
        if self.events is not None and self.source != "trainer":
            for event in self.events.read_new():
                with self.lock:
                    if event.step > 0 or event.scalars:
                        self.source = "events"
                    loss = next((event.scalars[tag] for tag in LOSS_TAGS if tag in event.scalars), None)
                    self.loss = loss if loss is not None else self.loss
                    if event.scalars and event.step > 0:
                        self._observe(event.step, event.wall_time or self.clock(), "events")
        if self.job != "ps":
            found = self._newest_checkpoint()
            if found is not None:
                with self.lock:
                    self.checkpoint = found

    def _observe(self, step: int, at: float, source: str) -> None:
        if at >= self.started_at:  # a step of this start: the run's older event files are read first
            self.last_step = step
            if self.resume is not None:
                self.resume.observe(step, at, source)
        if step > 0 and (self.first_step_at is None or (self.first_step_source, source) == ("events", "trainer")):
            self.first_step_at, self.first_step_source = at, source
        if self.step is None or step >= self.step:
            self.step = step
            self.samples.append((at, step))
        while len(self.samples) > 2 and self.samples[-1][0] - self.samples[0][0] > RATE_WINDOW_SECONDS:
            self.samples.popleft()

    def _newest_checkpoint(self) -> Optional[Dict[str, Any]]:
        newest: Optional[Tuple[float, int]] = None
        for directory, _dirs, names in os.walk(self.run_dir):
            for name in names:
                match = CHECKPOINT_INDEX.search(name)
                if match:
                    try:
                        mtime = os.stat(os.path.join(directory, name)).st_mtime
                    except OSError:
                        continue
                    if newest is None or (mtime, int(match.group(1))) > newest:
                        newest = (mtime, int(match.group(1)))
        return {"step": newest[1], "at": newest[0]} if newest else None

    # -- read by the writer and the metrics -----------------------------------------------------
    def steps_per_second(self) -> Optional[float]:
        if len(self.samples) < 2:
            return None
        (t0, s0), (t1, s1) = self.samples[0], self.samples[-1]
        return (s1 - s0) / (t1 - t0) if t1 - t0 >= 0.5 else None

    def snapshot(self) -> Dict[str, Any]:
        with self.lock:
            return {
                "schema": SCHEMA,
                "task": self.task,
                "job": self.job,
                "index": self.index,
                "run": self.run,
                "pod": os.environ.get("HOSTNAME") or "",
                "state": self.state,
                "exit_code": self.exit_code,
                "starts": self.starts,
                "started_at": self.started_at,
                "updated_at": self.clock(),
                "first_step_at": self.first_step_at,
                "step": self.step,
                "last_step": self.last_step,
                "target_steps": self.target,
                "steps_per_second": self.steps_per_second(),
                "examples_per_second": self.examples_per_second,
                "loss": self.loss,
                "source": self.source,
                "last_checkpoint": self.checkpoint,
                "last_resume": self.resume.as_dict() if self.resume is not None else None,
                "memory_bytes": memory_bytes(self.pid),
                "phases": dict(self.phases),
                "placement": dict(self.placement),
            }

    def write(self) -> Dict[str, Any]:
        """Replace the progress file atomically (readers never see half of it); the snapshot written."""
        snapshot = self.snapshot()
        atomic_file.write_text(self.path, json.dumps(snapshot, sort_keys=True))
        return snapshot
