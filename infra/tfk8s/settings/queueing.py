"""The schema of a platform's queueing (`platform.queueing`): Kueue's capacity, cohort and priority
classes (docs/concepts/queueing.md). Nothing here touches Pulumi."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from tfk8s.settings.types import (
    Bytes,
    DnsName,
    Model,
    NonNegative,
    Quantity,
)


class QueueCapacity(Model):
    """The training nodes' allocatable resources, all together: what Kueue may admit at once."""

    cpu: Quantity = Field(description='CPU cores of the training nodes together, e.g. "64" or "500m"')
    memory: Bytes = Field(description="memory of the training nodes together, e.g. 256Gi")
    gpus: NonNegative = 0
    """`nvidia.com/gpu` of the training nodes together (0: none)."""


# Kueue's WorkloadPriorityClass value is an int32; a higher value is admitted first and may preempt.
PriorityValue = Annotated[int, Field(ge=-(2**31), le=2**31 - 1)]


class QueueingSettings(Model):
    """Queue experiments in Kueue instead of refusing what does not fit the free capacity
    (issue 38; lab/kueue/README.md). Off by default: the cluster then keeps today's behaviour,
    where an experiment within its tenant's quota is created and its pods wait for the scheduler.
    On, the cluster must serve Kueue's kueue.x-k8s.io/v1beta2 and JobSet's jobset.x-k8s.io/v1alpha2
    (locally: `hack/cluster.sh start --queueing`), which preview checks."""

    enabled: bool = False
    """Declare the platform's Cohort, ResourceFlavors and WorkloadPriorityClasses, and each tenant's
    ClusterQueue and LocalQueue."""
    capacity: QueueCapacity | None = None
    """The cohort's own quota: the training capacity every tenant's queue borrows from, up to the
    tenant's quota. Required when `enabled`."""
    cohort: DnsName = "tfk8s"
    """The name of the Kueue Cohort every tenant's ClusterQueue joins (cluster-scoped: one per platform)."""
    controller: str = "system:serviceaccount:kueue-system:kueue-controller-manager"
    """The user name Kueue's controller acts as (its upstream manifests' account by default): it
    alone may resume a suspended JobSet in a tenant namespace, when it admits the workload; a
    tenant's own resume would start her run beside the queue."""
    priority_classes: dict[DnsName, PriorityValue] = Field(default_factory=dict)
    """WorkloadPriorityClasses experiments may ask for, name -> value, e.g. {urgent: 1000, batch: 10}:
    a higher value is admitted first and preempts a lower one of the same tenant, or what another
    tenant borrowed beyond its fair share."""

    @model_validator(mode="after")
    def _capacity_when_enabled(self) -> QueueingSettings:
        if self.enabled and self.capacity is None:
            raise ValueError(
                "enabled is true but capacity is not set: give the training nodes' cpu, memory and gpus "
                '(capacity: {cpu: "64", memory: 256Gi, gpus: 8}), the quota every tenant\'s queue borrows from'
            )
        return self
