"""Where each training cluster of a tenant is, from what its tasks' launchers write to the log
volume (pure: a LogTree in, a JSON-ready dict out). The TensorBoard gate serves it as
`GET /tfk8s/status` (tfk8s_train.gate_routes); `tfk8s status` draws it (docs/guide/status.md).

A cluster's runs are `<root>/<experiment>/<cluster>/run-<uid>/`; its latest is the one with the
newest activity: the newest `updated_at` of its progress files, or the run directory's (or its
progress directory's) modification time, whichever is later. Of that run, each task's progress file
`.tfk8s/progress/<task>.json` gives a row, and the cluster's figures are read across them:

  * step: the highest `step` of any task (workers share the global step); target: the highest known;
  * rates and loss: those of the task with the freshest `updated_at` among those with a step;
  * ETA: (target - step) / steps per second, when all three are known (0 once succeeded);
  * state: `succeeded` once the chief succeeded (without a chief: every worker seen; or every task
    succeeded or retired), else `failed` if any task's latest launch failed, else `running`,
    `starting`, or `unknown` with no progress yet;
  * stale: running, but no task wrote for STALE_SECONDS (its pod may be gone without a last word);
  * per task, what its latest restart cost (`resumed`): the step it had reached, the step it trains
    from again, the steps lost and the seconds out.

A task with no progress file but a done marker (`.tfk8s/done/<task>`) counts as succeeded. Whatever
cannot be read (a missing, partial, oversized or garbled file, an unexpected name, a link) is
skipped and named in `notes`; a field of the wrong type reads as unknown. Nothing raises.

Standard library only: the gate runs in the TensorBoard image's Python.
"""

from __future__ import annotations

import json
import math
from typing import Any

from tfk8s_train.log_tree import NAME, RUN_PREFIX, TASK, Absent, LogTree

SCHEMA = 1
PROGRESS, DONE = (".tfk8s", "progress"), (".tfk8s", "done")
MAX_PROGRESS_BYTES = 64 * 1024
STALE_SECONDS = 60.0
# Runs of a cluster whose progress files are read to find its latest (see latest_runs).
READ_RUNS = 4
FINISHED = frozenset({"succeeded", "failed"})
TASK_STATES = frozenset({"starting", "running", "succeeded", "failed", "retired"})


def number(value: Any) -> float | None:
    """A finite number (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return value


def integer(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def children(tree: LogTree, parts: tuple[str, ...], notes: list[str]) -> list[tuple[str, float]]:
    """(name, mtime) of the directories in `parts` whose names are names; others are noted."""
    try:
        entries = tree.entries(*parts)
    except (Absent, OSError):
        return []
    found = []
    for entry in entries:
        if not entry.is_dir or entry.name.startswith(".") or entry.name == "lost+found":
            continue
        if NAME.fullmatch(entry.name):
            found.append((entry.name, entry.mtime))
        else:
            notes.append(f"{'/'.join((*parts, entry.name))}: skipped, not a name tfk8s gives")
    return sorted(found)


def read_progress(tree: LogTree, run: tuple[str, ...], notes: list[str]) -> dict[str, dict[str, Any]]:
    """Each task's progress record of the run, by task name."""
    try:
        entries = tree.entries(*run, *PROGRESS)
    except (Absent, OSError):
        return {}
    found = {}
    where = "/".join((*run, *PROGRESS))
    for entry in sorted(entries, key=lambda e: e.name):
        if entry.name.startswith("."):
            continue  # a launcher's temporary file, renamed into place when whole
        task = entry.name.removesuffix(".json")
        if entry.is_dir or not entry.name.endswith(".json") or not TASK.fullmatch(task):
            notes.append(f"{where}/{entry.name}: skipped, not a task's progress file (<job>-<index>.json)")
            continue
        try:
            record = json.loads(tree.read(*run, *PROGRESS, entry.name, limit=MAX_PROGRESS_BYTES))
        except Absent:
            continue  # replaced or removed meanwhile
        except (OSError, ValueError) as error:
            notes.append(f"{where}/{entry.name}: skipped, unreadable ({error})")
            continue
        if not isinstance(record, dict):
            notes.append(f"{where}/{entry.name}: skipped, not a JSON object")
            continue
        found[task] = record
    return found


def done_markers(tree: LogTree, run: tuple[str, ...]) -> set[str]:
    try:
        return {e.name for e in tree.entries(*run, *DONE) if not e.is_dir and TASK.fullmatch(e.name)}
    except (Absent, OSError):
        return set()


def task_row(task: str, record: dict[str, Any], now: float) -> dict[str, Any]:
    job, _, index = task.rpartition("-")
    state = record.get("state") if record.get("state") in TASK_STATES else "unknown"
    updated = number(record.get("updated_at"))
    age = None if updated is None else max(0.0, now - updated)
    return {
        "task": task,
        "job": job,
        "index": int(index),
        "state": state,
        "step": integer(record.get("step")),
        "starts": integer(record.get("starts")),
        "exit_code": integer(record.get("exit_code")),
        "updated_at": updated,
        "age_seconds": age,
        "stale": state in ("starting", "running") and (age is None or age > STALE_SECONDS),
        "pod": record.get("pod") if isinstance(record.get("pod"), str) else None,
        "resumed": resumed(record.get("last_resume")),
    }


def resumed(value: Any) -> dict[str, Any] | None:
    """What the task's latest start cost (task_progress.Resume): the step its previous start had
    reached, the step it trains from, the steps lost and the seconds out; None if it never resumed."""
    if not isinstance(value, dict) or integer(value.get("after_step")) is None:
        return None
    return {
        "after_step": value["after_step"],
        "at_step": integer(value.get("at_step")),
        "steps_lost": integer(value.get("steps_lost")),
        "seconds": number(value.get("seconds")),
    }


def cluster_state(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "unknown"
    states = {r["state"] for r in rows}
    deciders = [r for r in rows if r["job"] == "chief"] or [r for r in rows if r["job"] == "worker"]
    if (deciders and all(r["state"] == "succeeded" for r in deciders)) or states <= {"succeeded", "retired"}:
        return "succeeded"
    for state in ("failed", "running", "starting"):
        if state in states:
            return state
    return "unknown"


def last_checkpoint(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    found = [c for c in (r.get("last_checkpoint") for r in records) if isinstance(c, dict) and integer(c.get("step")) is not None]
    best = max(found, key=lambda c: c["step"], default=None)
    return None if best is None else {"step": best["step"], "at": number(best.get("at"))}


def summary(run: str, runs: list[str], records: dict[str, dict[str, Any]], done: set[str], now: float) -> dict[str, Any]:
    """One cluster's latest run, summarised (see the module's docstring)."""
    rows = [task_row(task, record, now) for task, record in sorted(records.items())]
    rows += [{**task_row(task, {"state": "succeeded"}, now), "done_marker": True} for task in sorted(done - set(records))]
    rows.sort(key=lambda r: ({"chief": 0, "worker": 1, "ps": 2}.get(r["job"], 3), r["index"]))
    values = list(records.values())
    steps = [s for s in (integer(r.get("step")) for r in values) if s is not None]
    targets = [t for t in (integer(r.get("target_steps")) for r in values) if t is not None and t > 0]
    stepping = [r for r in values if integer(r.get("step")) is not None and number(r.get("updated_at")) is not None]
    freshest = max(stepping, key=lambda r: r["updated_at"], default={})
    step, target = max(steps, default=None), max(targets, default=None)
    rate = number(freshest.get("steps_per_second"))
    state = cluster_state(rows)
    eta = None
    if state == "succeeded":
        eta = 0.0
    elif step is not None and target is not None and rate is not None and rate > 0:
        eta = max(0.0, (target - step) / rate)
    first = [f for f in (number(r.get("first_step_at")) for r in values) if f is not None]
    starts = [s for s in (number(r.get("started_at")) for r in values) if s is not None]
    first_step_at = min(first, default=None)
    since_start = None if first_step_at is None or not starts else first_step_at - min(starts)
    updated = [u for u in (r["updated_at"] for r in rows) if u is not None]
    active = [r for r in rows if r["state"] in ("starting", "running")]
    return {
        "run": run,
        "runs": runs,
        "state": state,
        "finished": state in FINISHED,
        "stale": bool(active) and all(r["stale"] for r in active),
        "step": step,
        "target_steps": target,
        "fraction": None if step is None or target is None else min(1.0, step / target),
        "steps_per_second": rate,
        "examples_per_second": number(freshest.get("examples_per_second")),
        "loss": number(freshest.get("loss")),
        "eta_seconds": eta,
        "first_step_at": first_step_at,
        "first_step_seconds": since_start if since_start is not None and since_start >= 0 else None,
        "last_checkpoint": last_checkpoint(values),
        "restarts": sum(max(0, (r["starts"] or 1) - 1) for r in rows),
        "updated_at": max(updated, default=None),
        "tasks": rows,
    }


def latest_runs(tree: LogTree, experiment: str, cluster: str, notes: list[str]) -> list[tuple[str, dict[str, Any], float]]:
    """The cluster's runs as (uid, progress records, activity), the newest activity first. Only the
    READ_RUNS newest by their directories' times have their progress read (a progress file replaced
    touches its directory): a volume of many old runs costs a directory's times each, not its files."""
    dated = []
    for name, mtime in children(tree, (experiment, cluster), notes):
        uid = name.removeprefix(RUN_PREFIX)
        if not name.startswith(RUN_PREFIX) or not NAME.fullmatch(uid):
            continue  # TensorBoard's own runs and other files beside the launcher's
        try:
            mtime = max(mtime, tree.mtime(experiment, cluster, name, *PROGRESS))
        except (Absent, OSError):
            pass
        dated.append((uid, name, mtime))
    dated.sort(key=lambda r: (-r[2], r[0]))
    found = []
    for i, (uid, name, mtime) in enumerate(dated):
        records = read_progress(tree, (experiment, cluster, name), notes) if i < READ_RUNS else {}
        updated = [u for u in (number(r.get("updated_at")) for r in records.values()) if u is not None]
        found.append((uid, records, max([mtime, *updated])))
    return sorted(found, key=lambda r: (-r[2], r[0]))


def summarise(tree: LogTree, now: float, experiment: str | None = None) -> dict[str, Any]:
    """Every experiment's clusters (or `experiment`'s alone), each by its latest run; `notes` names
    what was skipped. An experiment with no directory is absent from `experiments`."""
    notes: list[str] = []
    names = [experiment] if experiment is not None else [name for name, _ in children(tree, (), notes)]
    experiments: dict[str, Any] = {}
    for name in names:
        try:
            tree.entries(name)
        except (Absent, OSError):
            continue
        clusters = {}
        for cluster, _ in children(tree, (name,), notes):
            runs = latest_runs(tree, name, cluster, notes)
            if runs:
                uid, records, _ = runs[0]
                done = done_markers(tree, (name, cluster, RUN_PREFIX + uid))
                clusters[cluster] = summary(uid, [r[0] for r in runs], records, done, now)
        experiments[name] = {"clusters": clusters}
    return {"schema": SCHEMA, "now": now, "experiments": experiments, "notes": notes}
