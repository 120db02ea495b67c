"""One training cluster as one JobSet (jobset.x-k8s.io/v1alpha2), for a platform that queues (pure).

Kueue admits a JobSet as one Workload: its PS, workers and chief start together or not at all,
and are suspended and resumed together (lab/kueue/facts-from-source.md §4). Kueue cannot gang a
Deployment with a Job, so here the PS become an Indexed Job too (roles.JOBSET_PS_ROLE). The pods
are the same as today's (tfk8s.specs.pods builds them); what changes:
  * the run uid is the JobSet's uid, a label JobSet puts on every pod: stable across Kueue's
    suspend/resume (a preempted run resumes in its own run directory) and known to every task
    at once, so the PS no longer watch the worker Job for it;
  * the PS retire when the JobSet completes (its success policy targets the workers, or the
    chief): JobSet deletes every still-active Job, so no scale-to-zero and no RBAC;
  * every task gets a Service of tfk8s's own (`task_services`), selecting it by JobSet's labels.

TrainingCluster declares it on a platform that queues (tfk8s.components.queued_cluster).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tfk8s.specs import cluster_spec as cs
from tfk8s.specs import pods, run_policy
from tfk8s.specs.labels import RUN, labels
from tfk8s.specs.roles import CHIEF_ROLE, JOBSET_PS_ROLE, WORKER_ROLE, Role

API_VERSION = "jobset.x-k8s.io/v1alpha2"
KIND = "JobSet"
# Kueue's labels on a job it manages (kueue pkg/controller/constants/constants.go): without the
# queue name Kueue leaves the JobSet alone (manageJobsWithoutQueueName is off by default).
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
# What JobSet and the Job controller label every pod with (jobset api/jobset/v1alpha2/jobset_types.go,
# k8s.io/api batch/v1 types.go; the completion index label is on by default since Kubernetes 1.28).
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
JOBSET_UID_LABEL = "jobset.sigs.k8s.io/jobset-uid"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
COMPLETION_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"

# JobSet's webhook refuses a JobSet whose longest pod name, `<jobset>-<rjob>-<jobIndex>-<podIndex>`
# plus the Job controller's random `-xxxxx`, is no DNS-1035 label (jobset pkg/webhooks/jobset_webhook.go).
MAX_NAME_LENGTH = 63
RANDOM_SUFFIX = "-abcde"
# A PS container that crashes is restarted in place (OnFailure), and each restart counts against
# its Job's backoffLimit. Once spent, the PS Job fails, and with it the whole JobSet: a run would
# end over PS restarts a Deployment (today's PS) absorbs forever. So, as good as forever (the
# largest int32, Kubernetes' own default for a Job with per-index retries); the run ends by its
# workers, or by `run.activeDeadlineSeconds`.
PS_BACKOFF_LIMIT = 2**31 - 1

Json = dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class Queueing:
    """Where a JobSet waits: its tenant's LocalQueue, at a WorkloadPriorityClass or at the default."""

    local_queue: str
    priority_class: str | None = None

    def labels(self) -> dict[str, str]:
        found = {QUEUE_NAME_LABEL: self.local_queue}
        if self.priority_class is not None:
            found[PRIORITY_CLASS_LABEL] = self.priority_class
        return found


def roles_of(cluster: cs.ClusterSettings) -> list[Role]:
    """The roles of `cluster`'s replicated Jobs, in the order they are declared."""
    return [JOBSET_PS_ROLE, WORKER_ROLE, *([CHIEF_ROLE] if cs.has_chief_job(cluster) else [])]


def run_uid_of_jobset() -> Json:
    """TFK8S_RUN_UID for every pod of a JobSet: its uid, from the label JobSet sets."""
    return {"name": "TFK8S_RUN_UID", "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{JOBSET_UID_LABEL}']"}}}


def pod_labels(cluster_pods: pods.ClusterPods, role: Role, run_id: str, owner_labels: dict[str, str]) -> dict[str, str]:
    """Today's labels of a role's pods, without `tfk8s.io/index`: one template serves every index
    of an Indexed Job, and JobSet's pods carry their index as COMPLETION_INDEX_LABEL."""
    cp = cluster_pods
    own = labels(cp.tenant, "tensorflow", experiment=cp.experiment, cluster=cp.cluster.name, role=role.name, run=run_id)
    return {**own, **owner_labels}


def as_served(template: Json) -> Json:
    """`template` as the API server keeps it: without the empty `args` it drops (omitempty), which a
    refresh would otherwise show as a change of the JobSet's spec at every `pulumi up --refresh`.
    Here, not in tfk8s.specs.pods: a Deployment's or Job's template without them would be a change
    of every running experiment's template once, and a Job's template is immutable (a replacement,
    a new run), for a diff that does no harm there (their re-apply changes nothing)."""
    spec = template["spec"]
    for group in ("containers", "initContainers"):
        if group in spec:
            spec[group] = [{k: v for k, v in c.items() if not (k == "args" and v == [])} for c in spec[group]]
    return template


def _replicated_job(
    role: Role, cluster_pods: pods.ClusterPods, run_id: str, owner_labels: dict[str, str], kubernetes_version: tuple[int, int]
) -> Json:
    cluster = cluster_pods.cluster
    tasks = role.count(cluster)
    template = as_served(
        pods.pod_template(
            role,
            cluster_pods,
            labels=pod_labels(cluster_pods, role, run_id, owner_labels),
            # Many tasks read their index from JOB_COMPLETION_INDEX (one template for all); one task is task 0.
            index=0 if role.one_task else None,
            run_uid=run_uid_of_jobset(),
        )
    )
    if role.retirement == "jobset":
        retries: Json = {"backoffLimit": PS_BACKOFF_LIMIT}
    else:
        # Per-index retries, deadline: as today's Jobs (run_policy). The TTL is the JobSet's: a child
        # Job deleted under a running JobSet would be re-created by it.
        retries = run_policy.job_fields(cluster, tasks, kubernetes_version)
        retries.pop("ttlSecondsAfterFinished", None)
    return {
        "name": role.name,
        # One Job per role: the tasks are its indexes, as today (replicas would multiply the Jobs).
        "replicas": 1,
        "template": {
            "spec": {
                "completionMode": "Indexed",
                "completions": tasks,
                "parallelism": tasks,
                **retries,
                "template": template,
            }
        },
    }


def jobset(
    *,
    name: str,
    cluster_pods: pods.ClusterPods,
    run_id: str,
    queueing: Queueing,
    owner_labels: dict[str, str],
    kubernetes_version: tuple[int, int],
) -> Json:
    """The JobSet of one training cluster: apiVersion, kind, metadata (name, labels) and spec.

    The caller adds the namespace and annotations. No `spec.suspend`: Kueue's webhook sets it when
    the JobSet is created and Kueue flips it on admission and eviction; a desired state holding it
    would fight Kueue on every `pulumi up` (server-side apply leaves a field the applier never sets
    to its owner: lab/kueue/README.md "Server-side apply keeps Kueue's spec.suspend").
    """
    cluster = cluster_pods.cluster
    target = CHIEF_ROLE if cs.has_chief_job(cluster) else WORKER_ROLE
    own = labels(cluster_pods.tenant, "tensorflow", experiment=cluster_pods.experiment, cluster=cluster.name, run=run_id)
    spec: Json = {
        "replicatedJobs": [_replicated_job(r, cluster_pods, run_id, owner_labels, kubernetes_version) for r in roles_of(cluster)],
        # Done when the run's driver is: the workers, or the chief that drives them. JobSet then
        # deletes the PS Job (the PS's retirement) and Kueue releases the quota.
        "successPolicy": {"operator": "All", "targetReplicatedJobs": [target.name]},
        # Each Job restarts its own tasks; one that fails for good fails the run (run_policy).
        "failurePolicy": dict(run_policy.JOBSET_FAILURE_POLICY),
        # tfk8s's own Services name the tasks (task_services): JobSet's headless Service would be
        # one more name per cluster, and its subdomain would override nothing we use.
        "network": {"enableDNSHostnames": False},
    }
    if cluster.run.ttl_seconds_after_finished is not None:
        spec["ttlSecondsAfterFinished"] = cluster.run.ttl_seconds_after_finished
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": name, "labels": {**own, **owner_labels, **queueing.labels()}},
        "spec": spec,
    }


@dataclass(frozen=True, kw_only=True)
class TaskService:
    """The Service that names one task, and the labels that select that task's pod alone."""

    role: str
    index: int
    name: str
    selector: dict[str, str]

    def host(self, port: int) -> str:
        return f"{self.name}:{port}"


def task_services(jobset_name: str, cluster: cs.ClusterSettings, run_id: str) -> list[TaskService]:
    """One Service per task, `<jobset>-<role>-<index>`: a PS's is today's name (`Names.ps_service`).

    A worker's or chief's cannot keep today's `<c>-worker-<i>.<c>-worker`: that is a pod's own
    hostname under its subdomain, and the Job controller names every Indexed Job pod
    `<job>-<index>`, where JobSet names the Job `<jobset>-<rjob>-0`. The selector holds the run
    id, as today's PS Services do: a task of an earlier run that is still stopping is no endpoint.
    """
    found = []
    for role in roles_of(cluster):
        for index in range(role.count(cluster)):
            selector = {
                JOBSET_NAME_LABEL: jobset_name,
                REPLICATED_JOB_LABEL: role.name,
                COMPLETION_INDEX_LABEL: str(index),
                RUN: run_id,
            }
            found.append(TaskService(role=role.name, index=index, name=f"{jobset_name}-{role.name}-{index}", selector=selector))
    return found


def longest_name(jobset_name: str, cluster: cs.ClusterSettings) -> str:
    """The longest pod or Service name of `cluster`'s JobSet, as JobSet's webhook and the API server
    check them (a placeholder for the pods' random suffix). tfk8s's own limit on `<experiment>-<cluster>`
    (tfk8s.settings.types.MAX_NAME_LENGTH) keeps it within MAX_NAME_LENGTH for any cluster whose spec fits
    (tests/unit/test_queued_cluster.py), so no check of its own refuses it."""
    pods = [f"{jobset_name}-{r.name}-0-{r.count(cluster) - 1}{RANDOM_SUFFIX}" for r in roles_of(cluster)]
    return max(pods + [s.name for s in task_services(jobset_name, cluster, run_id="")], key=len)
