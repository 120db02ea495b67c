"""The run policy of a training cluster's Indexed Jobs (workers, chief), per Kubernetes version (pure).

Retries: with Kubernetes >= 1.29 each task index gets `backoffLimitPerIndex` retries of its own,
and `maxFailedIndexes: 0` fails the Job as soon as one index has used them all: a worker that
fails for good ends the run (sync training could never finish without it), and the PS retire.
Older API servers drop those fields with only a warning, leaving the shared default
`backoffLimit: 6`; there the same total budget is set as a shared `backoffLimit` (per index x
tasks), and the caller warns that one crashing worker can use up the others' retries.

Failures that are not the task's own use none of its retries (a podFailurePolicy, from 1.26): a pod
the cluster took away (preempted, evicted, drained, its node lost: the DisruptionTarget condition),
and a task that exits with RESTART_EXIT_CODE, the in-graph chief whose coordinator lost a parameter
server (TensorFlow's ClusterCoordinator cannot go on without it, and a new start restores the
checkpoint). Any other failure of a task counts, so a worker's bug still ends the run.

Deadline and clean-up come from `run:` (schema_experiment.RunSettings), as TFJob's runPolicy offers them.

A Job's retries and failure policy are immutable: what changes them must replace the Job, so they
are part of the run id (tfk8s.specs.cluster_spec.run_id): a new run, continuing the interrupted one.
"""

from __future__ import annotations

from typing import Any

from tfk8s.settings.experiment import ClusterSettings
from tfk8s.specs.roles import TASK_CONTAINER

# Job backoffLimitPerIndex / maxFailedIndexes: beta (on by default) from 1.29; older API servers
# drop the fields with only a warning.
PER_INDEX_RETRIES_SINCE = (1, 29)
# Job podFailurePolicy: beta, on by default, from 1.26 (alpha and off in 1.25).
POD_FAILURE_POLICY_SINCE = (1, 26)
# EX_TEMPFAIL (sysexits.h): the task failed for a reason outside itself and a new start is the cure.
# tfk8s_train.in_graph.PS_LOST_EXIT is the same number; a script of one's own may exit with it too.
RESTART_EXIT_CODE = 75
# A queued cluster's JobSet (tfk8s.specs.jobset): each of its Jobs restarts its own tasks, the PS in
# place, a worker or the chief per index, and without spending a retry a pod the cluster took away
# or a chief that lost its PS; a Job that fails for good, a worker out of retries, fails the run.
# No restart of the whole JobSet: it would recreate every Job, the PS's variables and every
# worker's progress with them, to cure what one task's restart cures.
JOBSET_FAILURE_POLICY = {"maxRestarts": 0}


def job_fields(cluster: ClusterSettings, tasks: int, kubernetes_version: tuple[int, int]) -> dict[str, Any]:
    """Job spec fields for retries, deadline and TTL."""
    per_index = cluster.workers.backoff_limit_per_index
    fields: dict[str, Any]
    if kubernetes_version >= PER_INDEX_RETRIES_SINCE:
        fields = {"backoffLimitPerIndex": per_index, "maxFailedIndexes": 0}
    else:
        fields = {"backoffLimit": per_index * tasks}
    if kubernetes_version >= POD_FAILURE_POLICY_SINCE:
        fields["podFailurePolicy"] = pod_failure_policy()
    if cluster.run.active_deadline_seconds is not None:
        fields["activeDeadlineSeconds"] = cluster.run.active_deadline_seconds
    if cluster.run.ttl_seconds_after_finished is not None:
        fields["ttlSecondsAfterFinished"] = cluster.run.ttl_seconds_after_finished
    return fields


def pod_failure_policy() -> dict[str, Any]:
    """The failures a task's retries do not pay for (the module's docstring)."""
    return {
        "rules": [
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
            {
                "action": "Ignore",
                "onExitCodes": {"containerName": TASK_CONTAINER, "operator": "In", "values": [RESTART_EXIT_CODE]},
            },
        ]
    }


def immutable_fields(cluster: ClusterSettings, kubernetes_version: tuple[int, int]) -> dict[str, Any]:
    """What of a run's policy cannot change in place: its Jobs' retries and failure policy, as this
    Kubernetes version sets them (a platform moving to 1.26 or 1.29 changes them), and a queued
    cluster's JobSet failure policy."""
    fields = job_fields(cluster, 1, kubernetes_version)
    kept: dict[str, Any] = {
        key: fields[key] for key in ("backoffLimitPerIndex", "maxFailedIndexes", "podFailurePolicy") if key in fields
    }
    return {**kept, "jobSetFailurePolicy": JOBSET_FAILURE_POLICY}


def shared_retries_warning(cluster: ClusterSettings, tasks: int, kubernetes_version: tuple[int, int]) -> str | None:
    """What `preview` says when retries cannot be per worker."""
    if kubernetes_version >= PER_INDEX_RETRIES_SINCE:
        return None
    major, minor = kubernetes_version
    per_index = cluster.workers.backoff_limit_per_index
    return (
        f"cluster {cluster.name}: Kubernetes {major}.{minor} has no per-worker retries (backoffLimitPerIndex needs 1.29): "
        f"the {tasks} task(s) share backoffLimit {per_index * tasks} ({per_index} each on average), so one crashing "
        "worker can use up the others' retries"
    )
