"""`tfk8s status` as text (pure): a progress bar per cluster, its figures, then a line per task.

    dev/mnist  [############------------------]  40%  120/300  4.20 steps/s  ETA 43s  running
      run 6f1c2d  512 examples/s  loss 0.310  first step after 12s  checkpoint at step 100 (30s ago)
      worker-0   running    step 120     starts 1  updated 2s ago
      worker-1   running    step 118     starts 2  resumed at step 96 after 102 (6 lost, 31s out)  updated 3s ago

A figure not known yet is `-`; a target not known yet draws no bar (`[?]`) and no percentage.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

BAR_WIDTH = 30


def bar(fraction: float | None, width: int = BAR_WIDTH) -> str:
    if fraction is None:
        return "[" + "?".center(width) + "]"
    filled = min(width, max(0, int(fraction * width)))
    return "[" + "#" * filled + "-" * (width - filled) + "]"


def duration(seconds: float | None) -> str:
    """42s, 6m11s, 2h05m, 3d04h; `-` when unknown."""
    if seconds is None:
        return "-"
    whole = int(round(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    if whole < 86400:
        return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
    return f"{whole // 86400}d{whole % 86400 // 3600:02d}h"


def figure(value: float | None) -> str:
    """Three significant digits or so: 4.20, 51.2, 512; `-` when unknown."""
    if value is None:
        return "-"
    if abs(value) >= 100:
        return f"{value:.0f}"
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"


def state_text(cluster: Mapping[str, Any]) -> str:
    quiet = f" (no update for {duration(age(cluster.get('updated_at'), cluster))})" if cluster.get("stale") else ""
    return f"{cluster.get('state', 'unknown')}{quiet}"


def age(at: float | None, where: Mapping[str, Any]) -> float | None:
    now = where.get("now")
    return None if at is None or now is None else max(0.0, now - at)


def cluster_lines(experiment: str, name: str, cluster: Mapping[str, Any], now: float | None, tasks: bool = True) -> list[str]:
    step, target, fraction = cluster.get("step"), cluster.get("target_steps"), cluster.get("fraction")
    percent = "   -" if fraction is None else f"{fraction * 100:3.0f}%"
    steps = f"{'-' if step is None else step}/{'?' if target is None else target}"
    rate = f"{figure(cluster.get('steps_per_second'))} steps/s"
    clock = {"now": now, **cluster}
    head = f"{experiment}/{name}  {bar(fraction)} {percent}  {steps}  {rate}  ETA {duration(cluster.get('eta_seconds'))}"
    lines = [f"{head}  {state_text(clock)}"]
    detail = [f"run {cluster.get('run', '-')}", f"{figure(cluster.get('examples_per_second'))} examples/s"]
    detail.append(f"loss {'-' if cluster.get('loss') is None else format(cluster['loss'], '.3f')}")
    if cluster.get("first_step_seconds") is not None:
        detail.append(f"first step after {duration(cluster['first_step_seconds'])}")
    checkpoint = cluster.get("last_checkpoint")
    if checkpoint:
        detail.append(f"checkpoint at step {checkpoint['step']} ({duration(age(checkpoint.get('at'), clock))} ago)")
    if cluster.get("restarts"):
        detail.append(f"restarts {cluster['restarts']}")
    lines.append("  " + "  ".join(detail))
    for task in cluster.get("tasks", []) if tasks else []:
        lines.append("  " + task_line(task))
    return lines


def task_line(task: Mapping[str, Any]) -> str:
    step = "-" if task.get("step") is None else task["step"]
    parts = [f"{task['task']:<10} {task.get('state', 'unknown'):<9} step {step!s:<8}", f"starts {task.get('starts') or '-'}"]
    if task.get("exit_code") is not None:
        parts.append(f"exit code {task['exit_code']}")
    parts += resumed_text(task.get("resumed"))
    if task.get("age_seconds") is not None:
        parts.append(f"updated {duration(task['age_seconds'])} ago{' (stale)' if task.get('stale') else ''}")
    elif task.get("done_marker"):
        parts.append("done marker only")
    return "  ".join(parts)


def resumed_text(resumed: Mapping[str, Any] | None) -> list[str]:
    """`resumed at step 1905 after 1940 (35 lost, 31s out)`; `restarted after step 1940, not training yet`."""
    if not resumed:
        return []
    if resumed.get("at_step") is None:
        return [f"restarted after step {resumed['after_step']}, not training yet"]
    lost = "-" if resumed.get("steps_lost") is None else resumed["steps_lost"]
    out = duration(resumed.get("seconds"))
    return [f"resumed at step {resumed['at_step']} after {resumed['after_step']} ({lost} lost, {out} out)"]


def render(experiment: str, found: Mapping[str, Any] | None, tasks: bool = True) -> list[str]:
    """The whole screen: each cluster's lines, in name order, then what the gate skipped."""
    if not found or not found.get("clusters"):
        return [f"{experiment}: no run on the log volume yet (its tasks write progress once they start)"]
    lines = []
    for name, cluster in sorted(found["clusters"].items()):
        lines += cluster_lines(experiment, name, cluster, found.get("now"), tasks)
    lines += [f"note: {note}" for note in found.get("notes", [])]
    return lines
