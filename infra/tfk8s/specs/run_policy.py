"""The run policy of a training cluster's Indexed Jobs (workers, chief), per Kubernetes version (pure).

Retries: with Kubernetes >= 1.29 each task index gets `backoffLimitPerIndex` retries of its own,
and `maxFailedIndexes: 0` fails the Job as soon as one index has used them all: a worker that
fails for good ends the run (sync training could never finish without it), and the PS retire.
Older API servers drop those fields with only a warning, leaving the shared default
`backoffLimit: 6`; there the same total budget is set as a shared `backoffLimit` (per index x
tasks), and the caller warns that one crashing worker can use up the others' retries.

Deadline and clean-up come from `run:` (schema_experiment.RunSettings), as TFJob's runPolicy offers them.
"""

from __future__ import annotations

from typing import Any

from tfk8s.schema.experiment import ClusterSettings

# Job backoffLimitPerIndex / maxFailedIndexes: beta (on by default) from 1.29; older API servers
# drop the fields with only a warning.
PER_INDEX_RETRIES_SINCE = (1, 29)


def job_fields(cluster: ClusterSettings, tasks: int, kubernetes_version: tuple[int, int]) -> dict[str, Any]:
    """Job spec fields for retries, deadline and TTL."""
    per_index = cluster.workers.backoff_limit_per_index
    fields: dict[str, Any]
    if kubernetes_version >= PER_INDEX_RETRIES_SINCE:
        fields = {"backoffLimitPerIndex": per_index, "maxFailedIndexes": 0}
    else:
        fields = {"backoffLimit": per_index * tasks}
    if cluster.run.active_deadline_seconds is not None:
        fields["activeDeadlineSeconds"] = cluster.run.active_deadline_seconds
    if cluster.run.ttl_seconds_after_finished is not None:
        fields["ttlSecondsAfterFinished"] = cluster.run.ttl_seconds_after_finished
    return fields


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
