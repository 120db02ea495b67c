"""The platform's share of queueing (issue 38): the Kueue objects every tenant's queue names.

The Cohort holding the training capacity, the ResourceFlavors quotas are counted in and the
WorkloadPriorityClasses experiments may ask for, from tfk8s.specs.queueing. All cluster-scoped and
shared, so the platform's; nothing of it grows with the number of tenants. Declared only when
`platform.queueing.enabled`, after tfk8s.checks.queueing found Kueue served.

A tenant's ClusterQueue and LocalQueue (TenantQueues) are its own stack's, as its `Tenant`
registration is: one tenant's objects, cluster-scoped or not, and gone with the tenant.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pulumi

from tfk8s.errors import ConfigError
from tfk8s.kube import objects as kube
from tfk8s.kube.api_paths import CLUSTER_QUEUE, COHORT, LOCAL_QUEUE, RESOURCE_FLAVOR, WORKLOAD_PRIORITY_CLASS
from tfk8s.settings.platform import Quota
from tfk8s.settings.queueing import QueueingSettings
from tfk8s.specs import queueing as spec
from tfk8s.specs.ownership import Claimed, Owner

PART_OF = "tfk8s"


def fixed_objects(queueing: QueueingSettings, key: str) -> list[Claimed]:
    """What QueueingPlatform creates under fixed names; `key` is where `queueing` sits in the stack file."""
    if not queueing.enabled:
        return []
    return [
        *(Claimed(kind=RESOURCE_FLAVOR, name=f["metadata"]["name"], key=f"{key}.enabled") for f in spec.resource_flavors()),
        Claimed(kind=COHORT, name=queueing.cohort, key=f"{key}.cohort"),
        *(Claimed(kind=WORKLOAD_PRIORITY_CLASS, name=name, key=f"{key}.priorityClasses") for name in queueing.priority_classes),
    ]


def _metadata(obj: dict[str, Any], owner: Owner) -> dict[str, Any]:
    labels = {"app.kubernetes.io/part-of": PART_OF, "app.kubernetes.io/managed-by": "pulumi"} | owner.labels()
    return {**obj["metadata"], "labels": labels, "annotations": owner.annotations()}


def _declare(
    resource_name: str, document: dict[str, Any], owner: Owner, opts: pulumi.ResourceOptions, namespace: Any = None
) -> kube.CustomObject:
    """The Kueue object `document` of tfk8s.specs.queueing, marked as `owner`'s, in `namespace` if
    given; its top-level fields besides metadata and spec as they are (a WorkloadPriorityClass's `value`)."""
    metadata = _metadata(document, owner) | ({"namespace": namespace} if namespace is not None else {})
    fields = {k: v for k, v in document.items() if k not in ("apiVersion", "kind", "metadata", "spec")}
    return kube.CustomObject(
        resource_name,
        api_version=document["apiVersion"],
        kind=document["kind"],
        metadata=metadata,
        spec=document.get("spec"),
        fields=fields or None,
        opts=opts,
    )


@dataclass(frozen=True, kw_only=True)
class QueueingPlatformArgs:
    queueing: QueueingSettings  # enabled, with a capacity (tfk8s.settings.queueing.QueueingSettings)
    owner: Owner


class QueueingPlatform(pulumi.ComponentResource):
    """The Cohort, ResourceFlavors and WorkloadPriorityClasses of a queueing platform."""

    cohort_name: pulumi.Output[str]

    def __init__(self, name: str, args: QueueingPlatformArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        queueing = args.queueing
        if not queueing.enabled or queueing.capacity is None:  # before anything is declared
            raise ConfigError(
                [
                    "QueueingPlatformArgs.queueing: a queueing platform needs enabled=True and a capacity (the cpu and "
                    "memory its tenants share): set both, or declare no QueueingPlatform"
                ]
            )
        super().__init__("tfk8s:index:QueueingPlatform", name, None, opts)
        owner = args.owner
        child = pulumi.ResourceOptions(parent=self)

        self.flavors = [_declare(f"{name}-flavor-{f['metadata']['name']}", f, owner, child) for f in spec.resource_flavors()]
        # Its groups name the flavors.
        cohort = spec.cohort(queueing.cohort, queueing.capacity)
        self.cohort = _declare(
            f"{name}-cohort", cohort, owner, pulumi.ResourceOptions(parent=self, depends_on=list(self.flavors))
        )
        self.priority_classes = [
            _declare(f"{name}-priority-{c['metadata']['name']}", c, owner, child)
            for c in spec.workload_priority_classes(sorted(queueing.priority_classes.items()))
        ]
        self.cohort_name = self.cohort.name
        self.register_outputs({"cohort_name": self.cohort_name})


def tenant_queue(
    tenant: str, namespace: str, quota: Quota, weight: str, apps: Mapping[str, Decimal] | None = None
) -> spec.TenantQueue:
    return spec.TenantQueue(tenant=tenant, namespace=namespace, quota=quota, weight=weight, apps=dict(apps or {}))


def tenant_fixed_objects(queueing: QueueingSettings, queue: spec.TenantQueue, key: str) -> list[Claimed]:
    """What TenantQueues creates under fixed names; `key` names the tenant (`tfk8s:tenant.name`)."""
    if not queueing.enabled:
        return []
    return [
        Claimed(kind=CLUSTER_QUEUE, name=spec.cluster_queue_name(queue), key=key),
        Claimed(kind=LOCAL_QUEUE, name=spec.LOCAL_QUEUE_NAME, namespace=queue.namespace, key=key),
    ]


@dataclass(frozen=True, kw_only=True)
class TenantQueuesArgs:
    queue: spec.TenantQueue
    cohort: str  # the platform's (PlatformFacts.queueing.cohort)
    namespace: pulumi.Input[str]  # the tenant's namespace, as its component outputs it: the LocalQueue waits for it
    owner: Owner


class TenantQueues(pulumi.ComponentResource):
    """One tenant's ClusterQueue in the platform's cohort, and the LocalQueue its experiments name."""

    local_queue_name: pulumi.Output[str]

    def __init__(self, name: str, args: TenantQueuesArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("tfk8s:index:TenantQueues", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.cluster_queue = _declare(f"{name}-cluster-queue", spec.cluster_queue(args.queue, args.cohort), args.owner, child)
        self.local_queue = _declare(
            f"{name}-local-queue",
            spec.local_queue(args.queue),
            args.owner,
            pulumi.ResourceOptions(parent=self, depends_on=[self.cluster_queue]),  # it names the queue
            namespace=args.namespace,
        )
        self.local_queue_name = self.local_queue.name
        self.register_outputs({"local_queue_name": self.local_queue_name})
