"""The TensorFlow cluster layout of one training cluster: task names, hosts, and the run id.

Pure functions of settings. The same layout feeds the Kubernetes Services (so every host in the
spec resolves to exactly one task) and the pod environment read by `tfk8s_train.launch`, which
alone turns it into each task's TF_CONFIG and classic flags (pods run it; tests exercise it on
this spec).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from tfk8s.settings.experiment import ClusterSettings

PS, WORKER, CHIEF = "ps", "worker", "chief"
DATA_DIR, LOG_DIR = "/data", "/log"
# A cluster's own scratch volume (ClusterSettings.scratch), in workers and chief.
SCRATCH_DIR = "/scratch"


@dataclass(frozen=True, kw_only=True)
class Names:
    """Kubernetes names that carry DNS identity; everything else is auto-named by Pulumi."""

    cluster: str

    def ps_service(self, index: int) -> str:
        return self.task_service(PS, index)

    def task_service(self, role: str, index: int) -> str:
        """The Service of one task: every PS's, and on a queueing platform every task's
        (tfk8s.specs.jobset.task_services)."""
        return f"{self.cluster}-{role}-{index}"

    def scratch_claim(self) -> str:
        return f"{self.cluster}-scratch"

    def layout(self) -> str:
        """The Layout that publishes this cluster to the user's Jupyter (tfk8s.specs.layout_document)."""
        return f"{self.cluster}-layout"

    def indexed(self, role: str) -> str:
        """Name of the Indexed Job of `role` and of its headless Service: one name, because pod i's
        DNS name `<job>-<i>.<service>` only resolves when the Service is the pods' subdomain."""
        return f"{self.cluster}-{role}"


def qualified_name(experiment: str, cluster: str) -> str:
    """What names a cluster's Services and Jobs: unique in the user's namespace across experiments.

    A cluster named like its experiment keeps its own name, so the seed's `imagenet` experiment
    with its one cluster `imagenet` has the seed's Service names (`imagenet-ps-0`). Two experiments
    whose names would collide are refused by the ownership check (tfk8s.specs.ownership).
    """
    return cluster if cluster == experiment else f"{experiment}-{cluster}"


def has_chief_job(cluster: ClusterSettings) -> bool:
    return cluster.replication == "in-graph" and cluster.in_graph_client == "chief"


def cluster_spec(
    cluster: ClusterSettings,
    port: int,
    notebook_host: str | None = None,
    *,
    experiment: str | None = None,
    queued: bool = False,
) -> dict[str, list[str]]:
    """The `cluster` part of TF_CONFIG.

    `<c>` is `<experiment>-<cluster>` inside an experiment.
    PS tasks sit behind one Service each (`<c>-ps-<i>`); worker (and chief) pods of an Indexed
    Job get the hostname `<job>-<index>` under the headless Service named like the Job, so
    `<c>-worker-<i>.<c>-worker` resolves to task i alone.
    `queued` (a platform that queues in Kueue): the cluster is one JobSet, whose Job controller
    names its pods itself, so every task sits behind a Service of its own, `<c>-<role>-<i>`
    (tfk8s.specs.jobset.task_services); a PS's keeps today's name.
    """
    names = Names(cluster=qualified_name(experiment, cluster.name) if experiment else cluster.name)

    def host(role: str, index: int) -> str:
        if queued:
            return f"{names.task_service(role, index)}:{port}"
        return f"{names.indexed(role)}-{index}.{names.indexed(role)}:{port}"

    spec = {
        PS: [f"{names.ps_service(i)}:{port}" for i in range(cluster.ps.count)],
        WORKER: [host(WORKER, i) for i in range(cluster.workers.count)],
    }
    if has_chief_job(cluster):
        spec[CHIEF] = [host(CHIEF, 0)]
    elif cluster.replication == "in-graph" and notebook_host is not None:
        spec[CHIEF] = [notebook_host]
    return spec


def run_id(cluster: ClusterSettings, spec: dict[str, list[str]], image: str, code_digest: str, job_policy: dict[str, Any]) -> str:
    """Identifies one training run: changes whenever anything the tasks' pods run with changes.

    Anything that replaces the worker Job must be a new run: done markers of the old run would
    otherwise retire the new run's parameter servers at once (the spec carries the experiment).
    Deterministic, so a no-op `pulumi up` changes nothing. The settings count as the stack file
    says them, without their defaults: a setting a newer tfk8s adds, left at its default, is no
    new run of every experiment running when the platform team upgrades. `job_policy` is what of the
    Jobs the API server will not change in place (tfk8s.specs.run_policy.immutable_fields): a change
    of it replaces the Jobs, so it is a new run too.
    """
    material = {"cluster": _as_written(cluster), "spec": spec, "image": image, "code": code_digest, "jobs": job_policy}
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:12]


def lineage(cluster: ClusterSettings, user_code_digest: str) -> str:
    """What a run trains as its user decides it: the cluster's settings as the stack file says them
    and the user's own code, not what tfk8s decides (its trainer, the platform's default image, the
    host names). Runs of one lineage are one training: a new run whose Job an upgrade of tfk8s
    replaced continues the interrupted one from its checkpoint (tfk8s_train.run_lineage). A change
    of the user's (other settings, a bumped `run.number`, other code) is a new lineage, from step 0."""
    material = {"cluster": _as_written(cluster, exclude_run=RUN_NOT_TRAINING), "code": user_code_digest}
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:12]


# Run settings that say how Kubernetes handles the run's pods, not what it trains: a change of one
# changes the Jobs' pod templates, so it is a new run, of the same lineage (it continues from the
# newest checkpoint).
RUN_NOT_TRAINING = frozenset({"node_lost_seconds"})


def _as_written(cluster: ClusterSettings, exclude_run: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The cluster's settings without their defaults, without the priority (a run that waits, or
    preempts, at another priority is the same run) and without the run settings `exclude_run`."""
    settings = cluster.model_dump(mode="json", exclude_defaults=True, exclude={"run": {"priority", *exclude_run}})
    if settings.get("run") == {}:
        del settings["run"]
    return settings
