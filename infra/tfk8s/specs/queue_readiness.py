"""Readiness of a training cluster that Kueue queues (pure): where it stands in its tenant's queue,
and the report tfk8s.specs.readiness.cluster_readiness gives of an unqueued cluster.

On a queueing platform a training cluster is one JobSet (tfk8s.specs.jobset). Kueue keeps it
suspended until its Workload is admitted, then unsuspends it; JobSet reports the rest. So the
report reads two things: `status`, the cluster's `TrainingCluster.status`
    {"jobset": {"spec": {"suspend": bool | None}, "status": <the JobSet's .status, camelCase> | None,
                "uid": str | None},
     "scratch": <its scratch claim's status>}   (only when the cluster has scratch)
and `queue`, its Workload's facts as tfk8s.stack_kinds.queue_status read them (tfk8s.specs.workloads.facts),
`{"unknown": why}` when they could not be read, or None when nothing was read (a preview).

States (`queue.state`), and the phase each has among today's:
  Queued    suspended, no quota reserved: the Workload's QuotaReserved=False message says why   Pending
  Admitted  quota reserved (or admitted), not every task ready yet                               Pending
  Running   admitted and every task ready or done                                                Running
  Succeeded JobSet's Completed condition (it has deleted the PS Job then: that is right)       Succeeded
  Failed    JobSet's Failed condition, with its reason and message                               Failed
  Preempted the Workload's Evicted condition, reason Preempted                                   Pending
  Evicted   Evicted for another reason: PodsReadyTimeout (waitForPodsReady), Deactivated, ...    Pending
`ready` keeps its meaning: the cluster runs, or is done.

Counts: JobSet's `status.replicatedJobsStatus` counts Jobs, not pods (J/api/jobset/v1alpha2/jobset_types.go:244-265,
`J` = the jobset@v0.11.1 module): a Job is `ready` when its ready and succeeded pods reach
min(parallelism, completions) (J/pkg/controllers/jobset_controller.go:423-431). Each role is ONE
Indexed Job of all its tasks (tfk8s.specs.jobset, `replicas: 1`), so its counts are all of its tasks
or none: `workers.ready` is every worker once all are ready or done, and 0 while one is not. The
role's raw Job counts are under its `jobs`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tfk8s.specs import readiness, workloads
from tfk8s.specs.cluster_spec import CHIEF, PS, WORKER

QUEUED, ADMITTED, RUNNING, SUCCEEDED, FAILED, PREEMPTED, EVICTED = (
    "Queued",
    "Admitted",
    "Running",
    "Succeeded",
    "Failed",
    "Preempted",
    "Evicted",
)
PHASES = {
    QUEUED: readiness.PENDING,
    ADMITTED: readiness.PENDING,
    PREEMPTED: readiness.PENDING,
    EVICTED: readiness.PENDING,
    RUNNING: readiness.RUNNING,
    SUCCEEDED: readiness.SUCCEEDED,
    FAILED: readiness.FAILED,
}
NO_WORKLOAD_READ = "waiting for admission (no Workload read)"
RESUMES = (
    "it resumes from its last checkpoint once Kueue admits it again (its JobSet keeps its uid, the run's, so the "
    "run keeps its run directory)"
)
JOB_COUNTS = ("ready", "active", "succeeded", "failed", "suspended")
Json = Mapping[str, Any]


def _get(obj: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def _jobset_condition(jobset_status: Any, kind: str) -> Json | None:
    """JobSet's Completed or Failed condition when True (J/api/jobset/v1alpha2/jobset_types.go:105-110)."""
    found = [c for c in _get(jobset_status, "conditions") or [] if _get(c, "type") == kind and _get(c, "status") == "True"]
    return found[0] if found else None


def role_jobs(jobset_status: Any, role: str) -> dict[str, int]:
    """The role's replicatedJobsStatus entry: how many of its Jobs are ready, active, succeeded, failed, suspended."""
    entry: Any = next((r for r in _get(jobset_status, "replicatedJobsStatus") or [] if _get(r, "name") == role), {})
    return {key: int(_get(entry, key) or 0) for key in JOB_COUNTS}


def role_tasks(jobs: Mapping[str, int], tasks: int) -> dict[str, int]:
    """A role's counts in tasks, as cluster_readiness reports them, from its one Job's: all or none."""

    def every(key: str) -> int:
        return tasks if jobs[key] else 0

    done = every("succeeded")
    return {"ready": 0 if done else every("ready"), "active": every("active"), "succeeded": done, "failed": every("failed")}


def _says(condition: Json | None) -> str:
    reason, message = _get(condition, "reason") or "", _get(condition, "message") or ""
    return ": ".join(part for part in (reason, message) if part)


def _usable(queue: Json | None, uid: str | None) -> tuple[Json | None, str | None]:
    """(facts to read, why there are none) from what the reader found."""
    if queue is None:
        return None, None
    if "unknown" in queue:
        return None, str(queue["unknown"])
    if uid and queue.get("jobsetUid") and queue["jobsetUid"] != uid:
        earlier = f"the Workload read ({queue.get('workload')}) is an earlier JobSet's of this name"
        return None, f"{earlier}: `pulumi up --refresh` again"
    return queue, None


def _position(facts: Json | None) -> str | None:
    found = _get(facts, "position")
    return f"{found[0]} of {found[1]}" if found else None


def _from_workload(facts: Json, all_ready: bool) -> tuple[str, str | None]:
    """(state, reason) from the Workload's conditions, the JobSet not finished."""
    wl = {"status": {"conditions": facts.get("conditions") or []}}
    evicted = workloads.condition(wl, workloads.EVICTED)
    if workloads.is_true(wl, workloads.EVICTED):
        why = _get(evicted, "reason")
        if why == workloads.BY_PREEMPTION:
            preempted = workloads.condition(wl, workloads.PREEMPTED)
            return PREEMPTED, f"{_says(preempted) or _says(evicted)}; {RESUMES}"
        # Deactivated, or DeactivatedDueTo<cause> (K/pkg/workload/workload.go:1370-1374,1604-1606,1791-1793).
        if str(why).startswith(workloads.DEACTIVATED) or facts.get("active") is False:
            return EVICTED, (
                f"deactivated ({_says(evicted)}): Kueue will not admit it again, after "
                f"{facts.get('requeues') or 'its'} requeues; replace the cluster (a new run) to queue it anew"
            )
        if why == workloads.BY_PODS_READY_TIMEOUT:
            again = f" at {facts['requeueAt']}" if facts.get("requeueAt") else ""
            return EVICTED, (
                f"its pods were not all ready within Kueue's waitForPodsReady timeout ({_says(evicted)}); Kueue "
                f"requeues it{again} (requeue {facts.get('requeues') or 1}) and {RESUMES}"
            )
        return EVICTED, f"{_says(evicted)}; {RESUMES}"
    if not workloads.is_true(wl, workloads.QUOTA_RESERVED):
        if facts.get("requeueAt") and facts.get("position") is None:
            return QUEUED, f"requeued after an eviction: back in the queue at {facts['requeueAt']}"
        reserved = workloads.condition(wl, workloads.QUOTA_RESERVED)
        return QUEUED, _get(reserved, "message") or "waiting for Kueue's scheduler to consider it"
    if all_ready:
        return RUNNING, None
    pods = workloads.condition(wl, workloads.PODS_READY)
    if _get(pods, "status") == "False" and _get(pods, "reason") == workloads.WAIT_FOR_RECOVERY:
        return ADMITTED, (
            f"running, but not every task is ready since {_get(pods, 'lastTransitionTime')}: after Kueue's "
            "waitForPodsReady recoveryTimeout it evicts the whole cluster (PodsReadyTimeout)"
        )
    if not workloads.is_true(wl, workloads.ADMITTED):
        return ADMITTED, f"quota reserved in ClusterQueue {facts.get('clusterQueue')}; waiting for its admission checks"
    return ADMITTED, "admitted: its tasks are starting"


def queued_cluster_readiness(
    *, ps_expected: int, workers_expected: int, chief_expected: bool, status: Json, queue: Json | None
) -> dict[str, Any]:
    """Phase, problems and queue state of one queued training cluster (the module says how)."""
    jobset = _get(status, "jobset") or {}
    js_status, uid = _get(jobset, "status"), _get(jobset, "uid")
    suspended = _get(jobset, "spec", "suspend") is True
    jobs = {role: role_jobs(js_status, role) for role in (PS, WORKER, CHIEF)}
    ps = role_tasks(jobs[PS], ps_expected)
    workers = role_tasks(jobs[WORKER], workers_expected)
    chief = role_tasks(jobs[CHIEF], 1)
    not_ready = _not_ready(ps, ps_expected, workers, workers_expected, chief if chief_expected else None)
    facts, unknown = _usable(queue, uid)
    state, reason = _state(js_status, facts, suspended, all_ready=not suspended and not not_ready)
    problems = _problems(state, reason, facts, not_ready, status)
    phase = PHASES[state] if state != RUNNING or not problems else readiness.PENDING
    report: dict[str, Any] = {
        "state": state,
        "reason": reason,
        "position": _position(facts) if state in (QUEUED, PREEMPTED, EVICTED) else None,
        "priority": _get(facts, "priority"),
        "priorityClass": _get(facts, "priorityClass"),
        "workload": _get(facts, "workload"),
    }
    if unknown is not None:
        report["unknown"] = unknown
    return {
        "phase": phase,
        "ready": not problems,
        "ps": {"available": ps["ready"], "expected": ps_expected, "jobs": jobs[PS]},
        "workers": {**workers, "expected": workers_expected, "jobs": jobs[WORKER]},
        **({"chief": {**chief, "jobs": jobs[CHIEF]}} if chief_expected else {}),
        "problems": problems,
        "queue": report,
    }


def _not_ready(
    ps: dict[str, int], ps_expected: int, workers: dict[str, int], workers_expected: int, chief: dict[str, int] | None
) -> list[str]:
    """Each role short of its tasks, ready or done (`chief`: None when the cluster has none)."""
    return [
        *([f"parameter servers: {ps['ready']}/{ps_expected} available"] if ps["ready"] + ps["succeeded"] < ps_expected else []),
        *(
            [f"workers: {workers['ready'] + workers['succeeded']}/{workers_expected} ready or done"]
            if workers["ready"] + workers["succeeded"] < workers_expected
            else []
        ),
        *(["chief: not ready"] if chief is not None and chief["ready"] + chief["succeeded"] < 1 else []),
    ]


def _state(js_status: Json, facts: Json | None, suspended: bool, *, all_ready: bool) -> tuple[str, str | None]:
    """The cluster's state and why: the JobSet's end first, then its Workload's word, then its own."""
    failed, completed = _jobset_condition(js_status, "Failed"), _jobset_condition(js_status, "Completed")
    if failed is not None:
        return FAILED, f"JobSet failed: {_says(failed)}" if _says(failed) else "JobSet failed"
    if completed is not None:
        return SUCCEEDED, None
    if facts is not None:
        return _from_workload(facts, all_ready)
    if suspended:
        return QUEUED, NO_WORKLOAD_READ
    return (RUNNING, None) if all_ready else (ADMITTED, "unsuspended: its tasks are starting")


def _problems(state: str, reason: str | None, facts: Json | None, not_ready: list[str], status: Json) -> list[str]:
    """What keeps the cluster from ready, as the readiness output says it."""
    if state == FAILED:
        return [f"training failed: {reason}"]
    if state in (QUEUED, PREEMPTED, EVICTED):
        where = f" ({_position(facts)} in the tenant's queue)" if _position(facts) else ""
        return [f"{state.lower()}{where}: {reason}"]  # "queued (2 of 3 in the tenant's queue): couldn't ..."
    if state == ADMITTED:
        return [f"admitted: {reason}", *not_ready]
    if state == RUNNING and "scratch" in status:  # a Lost scratch claim breaks running tasks
        return list(readiness.volumes_readiness({"scratch": status["scratch"]})["problems"])
    return []
