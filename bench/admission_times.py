"""bench/admission.py's arithmetic: when each training cluster reached each point of its start, from
watch events, and the tables. Pure: what was seen goes in, seconds come out.

Events are `(at, type, object)` as bench/kube_watch.py records them, `at` in epoch seconds of this
machine when the event arrived here (the API server's own timestamps have 1 s resolution). A
cluster is known by `<experiment>-<cluster>`: its JobSet's name on a queueing platform, the
`app.kubernetes.io/instance` label of its objects and pods on either, the JobSet owning its Workload.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Event = tuple[float, str, dict[str, Any]]
INSTANCE = "app.kubernetes.io/instance"

# The points of a start on a queueing platform, in order (label, ClusterTimes field); a plain
# platform's have no Workload.
SOLO_POINTS = [
    ("`pulumi up` returned", "returned"),
    ("first object (JobSet; Deployment or Job)", "created"),
    ("Workload created", "workload"),
    ("Workload admitted", "admitted"),
    ("all pods created", "pods_created"),
    ("**all pods Running**", "running"),
]
# The points after capacity is freed (the running cluster's last worker reported Succeeded).
ADMISSION_POINTS = [
    ("running cluster's JobSet Completed", "previous_completed"),
    ("running cluster's Workload Finished", "previous_finished"),
    ("next Workload admitted", "admitted"),
    ("next cluster's pods created", "pods_created"),
    ("**next cluster's pods Running**", "running"),
]


@dataclass(frozen=True, kw_only=True)
class ClusterTimes:
    """When one training cluster reached each point (epoch seconds; None: not seen)."""

    created: float | None = None  # its first object: the JobSet, else its first Deployment or Job
    completed: float | None = None  # its JobSet's Completed condition True
    workload: float | None = None
    admitted: float | None = None  # its Workload's Admitted condition True
    finished: float | None = None  # its Workload's Finished condition True (its quota released)
    pods_created: float | None = None  # the last of its `pods` pods appeared
    running: float | None = None  # the last of its `pods` pods was Running


def condition_true(obj: Mapping[str, Any], kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in obj.get("status", {}).get("conditions") or [])


def owner_jobset(workload: Mapping[str, Any]) -> str | None:
    return next((r["name"] for r in workload["metadata"].get("ownerReferences", []) if r.get("kind") == "JobSet"), None)


def instance(obj: Mapping[str, Any]) -> str | None:
    return (obj["metadata"].get("labels") or {}).get(INSTANCE)


def _first(found: dict[str, float], key: str | None, at: float) -> None:
    if key is not None and key not in found:
        found[key] = at


def cluster_times(
    objects: Iterable[Event], workloads: Iterable[Event], pods: Iterable[Event], per_cluster: int
) -> dict[str, ClusterTimes]:
    """Each cluster's points, from the events of its objects (JobSets, or Deployments and Jobs),
    Workloads and pods. A cluster's pods count as created and Running once `per_cluster` distinct
    pods have been; a pod being deleted is not Running."""
    created: dict[str, float] = {}
    completed: dict[str, float] = {}
    for at, kind, obj in sorted(objects, key=lambda e: e[0]):
        if kind == "ADDED":
            _first(created, instance(obj) or obj["metadata"]["name"], at)
        if kind != "DELETED" and condition_true(obj, "Completed"):
            _first(completed, instance(obj) or obj["metadata"]["name"], at)
    workload: dict[str, float] = {}
    admitted: dict[str, float] = {}
    finished: dict[str, float] = {}
    for at, kind, obj in sorted(workloads, key=lambda e: e[0]):
        if kind == "DELETED":
            continue
        owner = owner_jobset(obj)
        _first(workload, owner, at)
        if condition_true(obj, "Admitted"):
            _first(admitted, owner, at)
        if condition_true(obj, "Finished"):
            _first(finished, owner, at)
    seen: dict[str, dict[str, float]] = {}
    running: dict[str, dict[str, float]] = {}
    for at, kind, pod in sorted(pods, key=lambda e: e[0]):
        key, name = instance(pod), pod["metadata"]["name"]
        if key is None or kind == "DELETED":
            continue
        seen.setdefault(key, {}).setdefault(name, at)
        if pod.get("status", {}).get("phase") == "Running" and not pod["metadata"].get("deletionTimestamp"):
            running.setdefault(key, {}).setdefault(name, at)

    def last(times: dict[str, float] | None) -> float | None:
        values = sorted((times or {}).values())
        return values[per_cluster - 1] if len(values) >= per_cluster else None

    keys = {*created, *workload, *seen}
    return {
        key: ClusterTimes(
            created=created.get(key),
            completed=completed.get(key),
            workload=workload.get(key),
            admitted=admitted.get(key),
            finished=finished.get(key),
            pods_created=last(seen.get(key)),
            running=last(running.get(key)),
        )
        for key in keys
    }


def since(start: float, at: float | None) -> float | None:
    return None if at is None else at - start


def solo_points(start: float, returned: float | None, times: ClusterTimes) -> dict[str, float | None]:
    """Seconds from the `pulumi up`'s start to each point of one start (SOLO_POINTS)."""
    return {
        "returned": since(start, returned),
        "created": since(start, times.created),
        "workload": since(start, times.workload),
        "admitted": since(start, times.admitted),
        "pods_created": since(start, times.pods_created),
        "running": since(start, times.running),
    }


def admission_points(freed: float, previous: ClusterTimes, following: ClusterTimes) -> dict[str, float | None]:
    """Seconds from the capacity freed (the running cluster's last worker reported done) to each
    point of the next cluster's admission (ADMISSION_POINTS)."""
    return {
        "previous_completed": since(freed, previous.completed),
        "previous_finished": since(freed, previous.finished),
        "admitted": since(freed, following.admitted),
        "pods_created": since(freed, following.pods_created),
        "running": since(freed, following.running),
    }


def next_admitted(times: Mapping[str, ClusterTimes], after: float, done: Iterable[str]) -> str | None:
    """The cluster admitted first after `after`, of those not `done`."""
    skip = set(done)
    candidates = [(t.admitted, k) for k, t in times.items() if k not in skip and t.admitted is not None and t.admitted >= after]
    return min(candidates)[1] if candidates else None


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank percentile (`q` in 0-100): a value that was measured, never interpolated."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def median(values: Iterable[float | None]) -> float | None:
    found = [v for v in values if v is not None]
    return statistics.median(found) if found else None


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b and b > 0.005 else None


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def solo_table(runs: Mapping[str, Sequence[Mapping[str, float | None]]]) -> str:
    """Medians of each point since `pulumi up`, the queueing and the plain platform side by side."""
    lines = [
        "| point | queueing: since `pulumi up` (s) | plain: since `pulumi up` (s) | ratio queueing/plain |",
        "|---|---:|---:|---:|",
    ]
    for label, key in SOLO_POINTS:
        queued, plain = (median(run[key] for run in runs[side]) for side in ("queueing", "plain"))
        shown = _cell(ratio(queued, plain)) if key in ("returned", "running", "pods_created", "created") else ""
        lines.append(f"| {label} | {_cell(queued)} | {_cell(plain)} | {shown} |")
    return "\n".join(lines)


def admission_table(admissions: Sequence[Mapping[str, Any]]) -> str:
    """p50, p95 and max of each point after the capacity is freed, per N queued ahead."""
    lines = [
        "| queued (N) | admissions | point | p50 (s) | p95 (s) | max (s) |",
        "|---:|---:|---|---:|---:|---:|",
    ]
    for n in sorted({a["queued"] for a in admissions}):
        mine = [a for a in admissions if a["queued"] == n]
        for label, key in ADMISSION_POINTS:
            values = [a["points"][key] for a in mine if a["points"][key] is not None]
            cells = [_cell(percentile(values, q)) for q in (50, 95, 100)] if values else ["-"] * 3
            lines.append(f"| {n} | {len(mine)} | {label} | {' | '.join(cells)} |")
    return "\n".join(lines)


def submission_table(submissions: Sequence[Mapping[str, Any]], solo: float | None) -> str:
    """The wall time of `pulumi up` of a queued experiment by how many waited ahead of it, against
    the same experiment's on an empty queue (`solo`)."""
    lines = [
        "| experiments waiting ahead | submissions | `pulumi up` p50 (s) | max (s) | ratio p50 to an empty queue's |",
        "|---|---:|---:|---:|---:|",
    ]
    for low, high in ((0, 0), (1, 9), (10, 49), (50, 99), (100, 10**6)):
        values = [s["seconds"] for s in submissions if low <= s["ahead"] <= high]
        if values:
            p50 = percentile(values, 50)
            shown = f"{low}" if low == high else (f"{low}-{high}" if high < 10**6 else f"{low}+")
            lines.append(f"| {shown} | {len(values)} | {p50:.2f} | {max(values):.2f} | {_cell(ratio(p50, solo))} |")
    return "\n".join(lines)
