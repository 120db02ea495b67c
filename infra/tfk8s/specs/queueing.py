"""The Kueue objects a queueing platform declares (kueue.x-k8s.io/v1beta2), as plain dicts (pure).

A Cohort holding the platform's training capacity as its own nominal quota; one ClusterQueue per
tenant in that cohort, each admitting its tenant's namespace alone, with no nominal quota of its
own and a borrowing limit of its tenant's quota (so an experiment within its tenant's quota but
beyond the free capacity waits, and waiting tenants share by fair-sharing weight); one LocalQueue
in each tenant's namespace, which its experiments' JobSets name
(tfk8s.specs.jobset.Queueing); the ResourceFlavors the queues' quotas are counted in; and the
WorkloadPriorityClasses experiments may ask for. Field names and meanings: lab/kueue/facts-from-source.md §5.

Declared by tfk8s.components.queueing: the platform's Cohort, flavors and priority classes, each
tenant's queues (issue 38, step 1 of lab/kueue/README.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from tfk8s.settings.platform import Quota
from tfk8s.settings.queueing import QueueCapacity
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
# A tenant's urgent run preempts its own lower-priority runs; and, with Kueue's fair sharing on, a
# waiting tenant preempts runs of one holding more than its weighted share of the cohort (every
# admission is borrowed: reclaimWithinCohort other than Never is what allows preemption across queues).
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
    # What its own Jupyter and TensorBoard take of its quota (tfk8s.specs.quota.apps_requests), which
    # its experiments can never have: `cpu` and `memory` in cores and bytes.
    apps: Mapping[str, Decimal] = field(default_factory=dict)


def cohort(name: str, capacity: QueueCapacity) -> Json:
    """The platform's cohort: its nominal quota is the training capacity, lent to every tenant's queue.

    A v1beta2 Cohort's own resourceGroups add to its members' nominal quotas (cohort_types.go), and
    every member's is 0, so the cohort's is all Kueue admits at once: what the training nodes hold.
    """
    return {
        "apiVersion": API_VERSION,
        "kind": "Cohort",
        "metadata": {"name": name},
        "spec": {
            "resourceGroups": _groups(
                {"cpu": capacity.cpu, "memory": capacity.memory, GPU_RESOURCE: str(capacity.gpus)},
                lambda _resource, amount: {"nominalQuota": amount},
            )
        },
    }


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


def _groups(amounts: dict[str, str], limits: Callable[[str, str], Json]) -> list[Json]:
    """CPU and memory in one group (flavor `cpu`), GPUs in their own (flavor `gpu`), so a CPU-only
    pod is counted in `cpu` alone and never gets the GPU nodes' selector. Kueue wants each flavor's
    resources named as, and in the order of, its group's coveredResources."""

    def flavor(name: str, resources: list[str]) -> Json:
        return {"name": name, "resources": [{"name": r, **limits(r, amounts[r])} for r in resources]}

    return [
        {"coveredResources": ["cpu", "memory"], "flavors": [flavor(CPU_FLAVOR, ["cpu", "memory"])]},
        {"coveredResources": [GPU_RESOURCE], "flavors": [flavor(GPU_FLAVOR, [GPU_RESOURCE])]},
    ]


def kube_quantity(resource: str, value: Decimal) -> str:
    """`value` (cores, bytes, a count) as a Kubernetes quantity: whole millicores, whole bytes."""
    if resource == "cpu":
        return f"{int(value * 1000)}m"
    return str(int(value))


def resource_groups(quota: Quota, apps: Mapping[str, Decimal] | None = None) -> list[Json]:
    """No nominal quota of the queue's own, and a borrowing limit of the tenant's quota, as the
    ResourceQuota's `requests.*` (tfk8s.specs.quota.hard) says it, less what its own Jupyter and
    TensorBoard take of it (`apps`): the ResourceQuota counts them too, so a cluster admitted into
    that share would have pods the quota refuses, and would hold its capacity, podless, until
    waitForPodsReady evicted it.

    So the queue admits what the cohort's capacity has free, never past the tenant's quota (which
    the namespace's ResourceQuota enforces anyway: it would refuse the pods of a JobSet admitted
    past it, and the JobSet would wait for waitForPodsReady to evict it). Nothing is the tenant's
    alone: every admission is borrowed, so fair sharing orders the waiting tenants by weight, and
    preemption takes back what a tenant holds beyond its fair share.
    """
    hard = namespace_quota.hard(quota)
    amounts = {r: hard[f"requests.{r}"] for r in ("cpu", "memory", GPU_RESOURCE)}
    for resource, taken in (apps or {}).items():
        amounts[resource] = kube_quantity(resource, max(namespace_quota.amount(amounts[resource]) - taken, Decimal(0)))
    return _groups(amounts, lambda _resource, amount: {"nominalQuota": "0", "borrowingLimit": amount})


def cluster_queue(queue: TenantQueue, cohort: str) -> Json:
    return {
        "apiVersion": API_VERSION,
        "kind": "ClusterQueue",
        "metadata": {"name": cluster_queue_name(queue)},
        "spec": {
            "cohortName": cohort,
            "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: queue.namespace}},
            "queueingStrategy": QUEUEING_STRATEGY,
            "resourceGroups": resource_groups(queue.quota, queue.apps),
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


def platform_objects(
    queues: Sequence[TenantQueue], cohort_name: str, capacity: QueueCapacity, priorities: Sequence[tuple[str, int]] = ()
) -> list[Json]:
    """Everything a queueing platform and its tenants declare, flavors and the cohort first (the queues name them)."""
    return [
        *resource_flavors(),
        cohort(cohort_name, capacity),
        *workload_priority_classes(priorities),
        *(cluster_queue(q, cohort_name) for q in queues),
        *(local_queue(q) for q in queues),
    ]
