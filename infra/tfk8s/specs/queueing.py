"""The Kueue objects a queueing platform declares (kueue.x-k8s.io/v1beta2), as plain dicts (pure).

One ClusterQueue per tenant, every one in the platform's cohort, each admitting its tenant's
namespace alone; one LocalQueue in each tenant's namespace, which its experiments' JobSets name
(tfk8s.specs.jobset.Queueing); the ResourceFlavors the queues' quotas are counted in; and the
WorkloadPriorityClasses experiments may ask for. Field names and meanings: lab/kueue/facts-from-source.md §5.

Not wired into any stack yet (issue 38, step 1 of lab/kueue/README.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tfk8s.schema.platform import Quota
from tfk8s.specs import quota as namespace_quota

API_VERSION = "kueue.x-k8s.io/v1beta2"
GPU_RESOURCE = namespace_quota.GPU_RESOURCE
# Every pod's CPU and memory are counted in the flavor `cpu`, which selects no node (kwok's CPU nodes
# have no label that tells them apart). GPUs are counted in `gpu`, whose node label Kueue adds to
# the nodeSelector of the pods that request one: the GPU nodes' label (hack/kwok/nodes.yaml).
CPU_FLAVOR = "cpu"
GPU_FLAVOR = "gpu"
GPU_NODE_LABELS = {"accelerator": "nvidia"}
# What each tenant's LocalQueue is called, in its own namespace: the JobSets' queue-name label.
LOCAL_QUEUE_NAME = "experiments"
# A tenant's urgent run preempts its own lower-priority runs, and a tenant takes back what another
# borrowed from it, whatever the borrower's priority: its nominal quota is its own (issue 38).
PREEMPTION = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}
# Kueue's default, written out: a run that does not fit does not hold back a smaller one behind it.
QUEUEING_STRATEGY = "BestEffortFIFO"
# The label the API server gives every namespace: selects the tenant's own namespace, and no other.
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"

Json = dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class TenantQueue:
    """What one tenant's queues are made of."""

    tenant: str  # the tenant's user name
    namespace: str  # its namespace (the platform's prefix and the name)
    quota: Quota  # its effective quota (TenantSettings.effective_quota): the namespace's ResourceQuota too
    weight: str = "1"  # its fair-sharing weight: its share of what the cohort's queues lend, against the others'


def resource_flavors() -> list[Json]:
    return [
        {"apiVersion": API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": CPU_FLAVOR}, "spec": {}},
        {
            "apiVersion": API_VERSION,
            "kind": "ResourceFlavor",
            "metadata": {"name": GPU_FLAVOR},
            "spec": {"nodeLabels": dict(GPU_NODE_LABELS)},
        },
    ]


def cluster_queue_name(queue: TenantQueue) -> str:
    """Named like the tenant's namespace: cluster-scoped, so unique per platform, and says whose."""
    return queue.namespace


def _quota(name: str, nominal: str) -> Json:
    # borrowingLimit 0: a queue never admits past its tenant's quota, which the namespace's
    # ResourceQuota enforces anyway: it would refuse the pods of a JobSet admitted by borrowing,
    # and the JobSet would wait for waitForPodsReady to evict it. So while nominal quotas are the
    # tenants' own quotas, nobody borrows, and the cohort, fair sharing and reclaiming are inert;
    # they start to matter once nominal quotas are shares of the cluster's capacity.
    return {"name": name, "nominalQuota": nominal, "borrowingLimit": "0"}


def resource_groups(quota: Quota) -> list[Json]:
    """The tenant's quota, as the ResourceQuota's `requests.*` (tfk8s.specs.quota.hard) says it.

    CPU and memory in one group, GPUs in their own, so a CPU-only pod is counted in `cpu` alone
    and never gets the GPU nodes' selector. Kueue wants each flavor's resources named as, and in
    the order of, its group's coveredResources.
    """
    hard = namespace_quota.hard(quota)
    return [
        {
            "coveredResources": ["cpu", "memory"],
            "flavors": [
                {
                    "name": CPU_FLAVOR,
                    "resources": [_quota("cpu", hard["requests.cpu"]), _quota("memory", hard["requests.memory"])],
                }
            ],
        },
        {
            "coveredResources": [GPU_RESOURCE],
            "flavors": [{"name": GPU_FLAVOR, "resources": [_quota(GPU_RESOURCE, hard[f"requests.{GPU_RESOURCE}"])]}],
        },
    ]


def cluster_queue(queue: TenantQueue, cohort: str) -> Json:
    return {
        "apiVersion": API_VERSION,
        "kind": "ClusterQueue",
        "metadata": {"name": cluster_queue_name(queue)},
        "spec": {
            "cohortName": cohort,
            "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: queue.namespace}},
            "queueingStrategy": QUEUEING_STRATEGY,
            "resourceGroups": resource_groups(queue.quota),
            "preemption": dict(PREEMPTION),
            "fairSharing": {"weight": queue.weight},
        },
    }


def local_queue(queue: TenantQueue) -> Json:
    return {
        "apiVersion": API_VERSION,
        "kind": "LocalQueue",
        "metadata": {"name": LOCAL_QUEUE_NAME, "namespace": queue.namespace},
        "spec": {"clusterQueue": cluster_queue_name(queue)},
    }


def workload_priority_classes(classes: Sequence[tuple[str, int]]) -> list[Json]:
    """One WorkloadPriorityClass per (name, value): a JobSet labelled with the name is queued,
    and may preempt, at that value (higher first). Names must be unique."""
    names = [name for name, _ in classes]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"workload priority classes named twice: {', '.join(duplicates)}")
    return [
        {"apiVersion": API_VERSION, "kind": "WorkloadPriorityClass", "metadata": {"name": name}, "value": value}
        for name, value in classes
    ]


def platform_objects(queues: Sequence[TenantQueue], cohort: str, priorities: Sequence[tuple[str, int]] = ()) -> list[Json]:
    """Everything a queueing platform declares, flavors first (the queues name them)."""
    return [
        *resource_flavors(),
        *workload_priority_classes(priorities),
        *(cluster_queue(q, cohort) for q in queues),
        *(local_queue(q) for q in queues),
    ]
