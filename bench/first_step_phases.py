"""The phases of one start of a training cluster, from its timestamps, and the table of both sides
(bench/first_step.py). Pure: what was seen goes in, seconds come out.

A start's timeline, every time in epoch seconds of this one machine:
- `start`: the command (`pulumi up`, `kubectl apply`) started;
- `first_object`: the first of the experiment's objects appeared (a watch event's arrival);
- per task (`ps-0`, `worker-1`; TaskTimes): its pod created and bound to a node (watch events,
  else the pod's creationTimestamp and PodScheduled condition, which have 1 s resolution), its
  launcher started (the progress file's `started_at`, else the container's `startedAt`),
  TensorFlow imported, its cluster formed, its first step (the progress file's `phases` and
  `first_step_at`, which the launcher takes from the trainer's lines, each timed by when the trainer printed it).

The cluster's first step is the earliest first step of the tasks that step (the workers; a chief
that drives in-graph training). A phase ends when the last task that gates that first step is
through it: the PS and any chief always; of the workers, the one that stepped first when training
is asynchronous (nothing waits for the others: worker 0, the chief of between-graph training,
initializes the variables, the others wait for it), and every worker when it is synchronous (the
first update aggregates a gradient of each). Cluster formation is reported by the tasks that step
(a PS serves and never reports it). A phase cannot end before the one before it: a phase whose
tasks were through it earlier (they overlap) counts as 0 s.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

# (phase, what ends it), in order.
PHASES = [
    ("engine", "the experiment's first object exists"),
    ("API objects", "the gating PS and worker pods exist"),
    ("scheduling", "they are bound to the node"),
    ("image and container start", "their launchers run"),
    ("TensorFlow import", "their trainers imported TensorFlow"),
    ("cluster formation", "the stepping task's session is up"),
    ("first step", "the first training step"),
]
STEPPING_JOBS = ("worker", "chief")


@dataclass(frozen=True, kw_only=True)
class TaskTimes:
    """When one task reached each point of its start (epoch seconds; None: not seen)."""

    task: str
    pod_created: float | None = None
    scheduled: float | None = None
    started: float | None = None
    tensorflow_imported: float | None = None
    cluster_ready: float | None = None
    first_step: float | None = None

    @property
    def job(self) -> str:
        return self.task.rpartition("-")[0]


@dataclass(frozen=True)
class PodSeen:
    """A pod as a watch last saw it, and when the watch first saw it and first saw it bound."""

    pod: dict[str, Any]
    added_at: float | None = None
    bound_at: float | None = None


def api_time(stamp: str | None) -> float | None:
    """An API server's RFC 3339 time (`2026-01-02T03:04:05Z`, 1 s resolution) as epoch seconds."""
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() if stamp else None


def task_of(pod: Mapping[str, Any]) -> str:
    """`ps-0`, `worker-1`: the task a pod runs (its role label; a Job pod's completion index)."""
    metadata = pod["metadata"]
    labels, annotations = metadata.get("labels") or {}, metadata.get("annotations") or {}
    role = labels.get("tfk8s.io/role", "")
    index = labels.get("tfk8s.io/index") or annotations.get("batch.kubernetes.io/job-completion-index") or "0"
    return f"{role}-{index}"


def _condition_time(pod: Mapping[str, Any], kind: str) -> float | None:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind and condition.get("status") == "True":
            return api_time(condition.get("lastTransitionTime"))
    return None


def _container_started(pod: Mapping[str, Any]) -> float | None:
    found = [
        api_time(status["state"]["running"].get("startedAt"))
        for status in (pod.get("status") or {}).get("containerStatuses") or []
        if "running" in (status.get("state") or {})
    ]
    return min((f for f in found if f is not None), default=None)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _created(seen: PodSeen) -> float:
    return seen.added_at or api_time(seen.pod["metadata"].get("creationTimestamp")) or float("inf")


def task_times(pods: Iterable[PodSeen], progress: Mapping[str, Mapping[str, Any]]) -> dict[str, TaskTimes]:
    """Each task's times from its pods (the first one, if the task was restarted in a new pod) and
    its progress file (`progress[task]`, the launcher's JSON)."""
    first_pods: dict[str, PodSeen] = {}
    for seen in pods:
        task = task_of(seen.pod)
        if task not in first_pods or _created(seen) < _created(first_pods[task]):
            first_pods[task] = seen
    result = {}
    for task in sorted(set(first_pods) | set(progress)):
        found = first_pods.get(task) or PodSeen({"metadata": {}})
        pod = found.pod
        doc = progress.get(task) or {}
        phases = doc.get("phases") or {}
        result[task] = TaskTimes(
            task=task,
            pod_created=found.added_at or api_time(pod["metadata"].get("creationTimestamp")),
            scheduled=found.bound_at or _condition_time(pod, "PodScheduled"),
            started=_number(doc.get("started_at")) or _container_started(pod),
            tensorflow_imported=_number(phases.get("tensorflow_imported_at")),
            cluster_ready=_number(phases.get("cluster_ready_at")),
            first_step=_number(doc.get("first_step_at")),
        )
    return result


def first_stepper(tasks: Mapping[str, TaskTimes]) -> TaskTimes | None:
    """The task that made the cluster's first step: the earliest first step of those that step."""
    stepped = [t for t in tasks.values() if t.job in STEPPING_JOBS and t.first_step is not None]
    return min(stepped, key=lambda t: (t.first_step, t.task)) if stepped else None


def gating(tasks: Mapping[str, TaskTimes], sync: bool) -> list[TaskTimes]:
    """The tasks the cluster's first step waits for (see the module's docstring)."""
    first = first_stepper(tasks)
    return [
        t
        for t in tasks.values()
        if t.job != "worker" or sync or (first is not None and t.task == first.task) or (first is None and t.task == "worker-0")
    ]


def _latest(values: Iterable[float | None]) -> float | None:
    found = list(values)
    return None if not found or any(v is None for v in found) else max(v for v in found if v is not None)


def phase_ends(start: float, first_object: float | None, tasks: Mapping[str, TaskTimes], sync: bool) -> dict[str, float | None]:
    """Seconds from `start` at which each phase ended (None: not seen), never before the phase
    before it."""
    gate = gating(tasks, sync)
    stepping = [t for t in gate if t.job in STEPPING_JOBS]
    first = first_stepper(tasks)
    absolute = {
        "engine": first_object,
        "API objects": _latest(t.pod_created for t in gate),
        "scheduling": _latest(t.scheduled for t in gate),
        "image and container start": _latest(t.started for t in gate),
        "TensorFlow import": _latest(t.tensorflow_imported for t in gate),
        "cluster formation": _latest(t.cluster_ready for t in stepping) if stepping else None,
        "first step": first.first_step if first else None,
    }
    ends: dict[str, float | None] = {}
    floor = 0.0
    for phase, _ in PHASES:
        at = absolute[phase]
        if at is None:
            ends[phase] = None
            continue
        floor = max(floor, at - start)
        ends[phase] = floor
    return ends


def durations(ends: Mapping[str, float | None]) -> dict[str, float | None]:
    """Each phase's seconds: from the end of the last phase seen before it to its own end."""
    result: dict[str, float | None] = {}
    previous = 0.0
    for phase, _ in PHASES:
        at = ends.get(phase)
        result[phase] = None if at is None else at - previous
        previous = previous if at is None else at
    return result


def median(values: Iterable[float | None]) -> float | None:
    found = [v for v in values if v is not None]
    return statistics.median(found) if found else None


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _ratio(ours: float | None, theirs: float | None) -> str:
    return "-" if ours is None or theirs is None or theirs < 0.05 else f"{ours / theirs:.2f}"


def table(runs: Mapping[str, list[dict[str, float | None]]], returned: Mapping[str, list[float | None]]) -> str:
    """The markdown table of both sides: `runs[side]` is each start's `phase_ends`, `returned[side]`
    when each start's command returned (seconds from its start); sides `pulumi` and `kubectl`.
    Medians per column: a phase's median and the median of its end are each over the runs, so the
    phases need not add up to the total."""
    ours, theirs = runs["pulumi"], runs["kubectl"]
    lines = [
        "| phase | until | pulumi up: phase (s) | since `pulumi up` (s) | kubectl apply: phase (s) "
        "| since `kubectl apply` (s) | ratio pulumi/kubectl (phase) |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for phase, until in PHASES:
        ours_phase = median(durations(r)[phase] for r in ours)
        theirs_phase = median(durations(r)[phase] for r in theirs)
        ours_end, theirs_end = median(r[phase] for r in ours), median(r[phase] for r in theirs)
        lines.append(
            f"| {phase} | {until} | {_cell(ours_phase)} | {_cell(ours_end)} | {_cell(theirs_phase)} "
            f"| {_cell(theirs_end)} | {_ratio(ours_phase, theirs_phase)} |"
        )
    ours_total, theirs_total = median(r["first step"] for r in ours), median(r["first step"] for r in theirs)
    lines.append(
        f"| **to the first step** | | | **{_cell(ours_total)}** | | **{_cell(theirs_total)}** "
        f"| **{_ratio(ours_total, theirs_total)}** |"
    )
    ours_back, theirs_back = median(returned["pulumi"]), median(returned["kubectl"])
    lines.append(f"| (the command returned) | | | {_cell(ours_back)} | | {_cell(theirs_back)} | |")
    return "\n".join(lines)


# A task's points in the per-task table: (TaskTimes field, column).
TASK_POINTS = [
    ("pod_created", "pod exists"),
    ("scheduled", "bound"),
    ("started", "launcher runs"),
    ("tensorflow_imported", "TensorFlow imported"),
    ("cluster_ready", "cluster formed"),
    ("first_step", "first step"),
]


def task_table(runs: Mapping[str, Sequence[tuple[float, Mapping[str, TaskTimes]]]]) -> str:
    """Where the time goes per task: the median seconds from each start (`runs[side]`: its start
    and its tasks' times) to each point of each task, a row per task and side."""
    lines = [
        "| task | side | " + " | ".join(f"{column} (s)" for _, column in TASK_POINTS) + " |",
        "|---|---|" + "---:|" * len(TASK_POINTS),
    ]
    names = sorted({name for starts in runs.values() for _, tasks in starts for name in tasks})
    for name in names:
        for side, starts in runs.items():
            cells = [_cell(median(_since(start, tasks.get(name), field) for start, tasks in starts)) for field, _ in TASK_POINTS]
            lines.append(f"| {name} | {side} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _since(start: float, task: TaskTimes | None, field: str) -> float | None:
    at = getattr(task, field) if task is not None else None
    return None if at is None else at - start
