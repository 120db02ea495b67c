"""A training cluster's workloads on a platform that queues in Kueue: one JobSet and a Service per task.

TrainingCluster declares these instead of its PS Deployments, worker (and chief) Jobs and the
PS's RBAC when its platform has `queueing.enabled` (the shape, and why: tfk8s.specs.jobset,
lab/kueue/README.md). Kueue admits the JobSet as one Workload, so its PS, workers and chief start
together or not at all; everything around them (the NetworkPolicy, the code and trainer
ConfigMaps, the scratch claim, the Layout) is the same.

`pulumi up` does not wait for the JobSet (awaits.QUEUED_NO_AWAIT): a queued cluster may wait for
hours. Its Services are created at once, queued or not: they are the cluster spec's names, and
cost nothing until their pods exist.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi

from tfk8s.kube import awaits
from tfk8s.kube import objects as kube
from tfk8s.settings.contract import PlatformFacts
from tfk8s.specs import jobset, pods
from tfk8s.specs.labels import RUN
from tfk8s.specs.queueing import LOCAL_QUEUE_NAME

# (labels, name, annotations) -> the object's metadata, in the cluster's namespace and with its owner's marks.
Meta = Callable[..., dict[str, Any]]
# (component, **extra labels) -> the cluster's labels.
Labels = Callable[..., dict[str, str]]


@dataclass(frozen=True, kw_only=True)
class QueuedWorkloads:
    services: list[kube.Service]
    jobset: kube.JobSet

    @property
    def run_uid(self) -> pulumi.Output[str]:
        """The run's uid: its JobSet's, which every pod reads from its label (tfk8s.specs.jobset)."""
        return self.jobset.uid

    @property
    def status(self) -> pulumi.Output[dict[str, Any]]:
        """What readiness reads (tfk8s.specs.queue_readiness): suspended or not, the JobSet's status, its uid."""
        return pulumi.Output.all(self.jobset.spec, self.jobset.status, self.jobset.uid).apply(
            lambda found: {
                "spec": {"suspend": (found[0] or {}).get("suspend")},
                "status": found[1],
                "uid": found[2],
            }
        )


def declare(
    name: str,
    *,
    jobset_name: str,
    cluster_pods: pods.ClusterPods,
    run_id: str,
    platform: PlatformFacts,
    owner_labels: dict[str, str],
    meta: Meta,
    cluster_labels: Labels,
    after: Sequence[pulumi.Resource],
    parent: pulumi.Resource,
) -> QueuedWorkloads:
    """The cluster's task Services and its JobSet, children of `parent`. `after`: what the pods must
    start behind (the NetworkPolicy fencing their gRPC in, a scratch claim)."""
    cluster = cluster_pods.cluster
    services = [
        _task_service(f"{name}-{task.role}-{task.index}", task, run_id, platform, meta, cluster_labels, parent)
        for task in jobset.task_services(jobset_name, cluster, run_id)
    ]
    document = jobset.jobset(
        name=jobset_name,
        cluster_pods=cluster_pods,
        run_id=run_id,
        queueing=jobset.Queueing(local_queue=LOCAL_QUEUE_NAME, priority_class=cluster.run.priority),
        owner_labels=owner_labels,
        kubernetes_version=platform.version,
    )
    declared = kube.JobSet(
        name,
        metadata=meta(name=jobset_name, labels=document["metadata"]["labels"], annotations=awaits.QUEUED_NO_AWAIT),
        spec=document["spec"],
        opts=pulumi.ResourceOptions(
            parent=parent,
            # JobSet's webhook refuses any change to its replicated Jobs (lab/kueue/README.md), and
            # every change of them is a new run id (tfk8s.specs.cluster_spec.run_id): a new run is a
            # new JobSet, under the same name, so the old one goes first. Keyed on the run label, not
            # on `spec`: what Kueue and JobSet write into a live spec (suspend, defaults) must never
            # replace a running or preempted cluster, which would start its run over; a new priority
            # label is changed in place.
            replace_on_changes=[f'metadata.labels["{RUN}"]'],
            delete_before_replace=True,
            depends_on=list(after),
        ),
    )
    return QueuedWorkloads(services=services, jobset=declared)


def _task_service(
    name: str,
    task: jobset.TaskService,
    run_id: str,
    platform: PlatformFacts,
    meta: Meta,
    cluster_labels: Labels,
    parent: pulumi.Resource,
) -> kube.Service:
    """One task's stable DNS name. publishNotReadyAddresses: a task resolves its peers as soon as
    their pods exist, instead of crashing on NXDOMAIN while they start (kubeflow/trainer#1458)."""
    return kube.Service(
        name,
        metadata=meta(
            name=task.name,
            labels=cluster_labels("tensorflow", role=task.role, index=task.index, run=run_id),
            annotations=awaits.SERVICE_NO_AWAIT,
        ),
        spec={
            "selector": task.selector,
            "publishNotReadyAddresses": True,
            "ports": [{"name": "grpc", "port": platform.ports.tensorflow, "targetPort": "grpc"}],
        },
        opts=pulumi.ResourceOptions(parent=parent),
    )
