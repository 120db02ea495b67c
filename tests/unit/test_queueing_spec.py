"""The Kueue objects of a queueing platform (tfk8s.specs.queueing): a queue per tenant, its quota."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from mocked_program import stack_config
from tfk8s.errors import ConfigError
from tfk8s.settings.platform import PlatformStack, Quota
from tfk8s.settings.queueing import QueueCapacity
from tfk8s.settings.stack_file import validate
from tfk8s.settings.tenant import QuotaOverrides, TenantSettings, TenantStack
from tfk8s.specs import jobset, queueing
from tfk8s.specs import quota as namespace_quota

ROOT = Path(__file__).resolve().parents[2]
DEFAULTS = Quota()
ALICE = queueing.TenantQueue(
    tenant="alice",
    namespace="tfk8s-alice",
    quota=TenantSettings(name="alice", quota=QuotaOverrides(cpu="48", gpus=8)).effective_quota(DEFAULTS),
    weight="2",
)
BOB = queueing.TenantQueue(tenant="bob", namespace="tfk8s-bob", quota=DEFAULTS)
CAPACITY = QueueCapacity(cpu="64", memory="256Gi", gpus=8)


def limits(obj: dict[str, Any]) -> dict[str, tuple[str, dict[str, str]]]:
    """resource -> (flavor, its quotas but the name), over every group."""
    return {
        r["name"]: (f["name"], {k: v for k, v in r.items() if k != "name"})
        for group in obj["spec"]["resourceGroups"]
        for f in group["flavors"]
        for r in f["resources"]
    }


@pytest.mark.parametrize("tenant", [ALICE, BOB], ids=["own-quota", "platform-default"])
def test_a_tenants_queue_owns_nothing_and_borrows_up_to_its_namespace_quota(tenant: queueing.TenantQueue) -> None:
    """Within its quota but beyond the free capacity, an experiment waits; past its quota, never admitted
    (the namespace's ResourceQuota would refuse its pods anyway)."""
    hard = namespace_quota.hard(tenant.quota)
    assert limits(queueing.cluster_queue(tenant, "tfk8s")) == {
        "cpu": ("cpu", {"nominalQuota": "0", "borrowingLimit": hard["requests.cpu"]}),
        "memory": ("cpu", {"nominalQuota": "0", "borrowingLimit": hard["requests.memory"]}),
        "nvidia.com/gpu": ("gpu", {"nominalQuota": "0", "borrowingLimit": hard["requests.nvidia.com/gpu"]}),
    }
    assert hard["requests.cpu"] == str(tenant.quota.cpu) and hard["requests.nvidia.com/gpu"] == str(tenant.quota.gpus)


def test_the_cohort_holds_the_training_capacity_and_nothing_else_does() -> None:
    """Members' nominal quotas add to the cohort's own (Kueue cohort_types.go): all are 0, so the
    cohort's is everything Kueue admits at once."""
    objects = queueing.platform_objects([ALICE, BOB], "tfk8s", CAPACITY)
    (cohort,) = [o for o in objects if o["kind"] == "Cohort"]
    assert cohort["metadata"]["name"] == "tfk8s"
    assert limits(cohort) == {
        "cpu": ("cpu", {"nominalQuota": "64"}),
        "memory": ("cpu", {"nominalQuota": "256Gi"}),
        "nvidia.com/gpu": ("gpu", {"nominalQuota": "8"}),
    }
    for queue in (o for o in objects if o["kind"] == "ClusterQueue"):
        assert {q["nominalQuota"] for _, q in limits(queue).values()} == {"0"}


def test_every_flavor_names_its_groups_resources_in_order_and_exists() -> None:
    """Kueue refuses a ClusterQueue whose flavor's resources are not its group's coveredResources, in order."""
    declared = {f["metadata"]["name"] for f in queueing.resource_flavors()}
    covered: list[str] = []
    groups = [queueing.cluster_queue(ALICE, "tfk8s"), queueing.cohort("tfk8s", CAPACITY)]
    for group in (g for obj in groups for g in obj["spec"]["resourceGroups"]):
        covered += group["coveredResources"]
        for flavor in group["flavors"]:
            assert flavor["name"] in declared
            assert [r["name"] for r in flavor["resources"]] == group["coveredResources"]
    assert len(covered) == 2 * len(set(covered))  # a resource in two groups of one object is refused too


def test_the_gpu_flavor_selects_exactly_the_nodes_with_gpus() -> None:
    (gpu,) = [f for f in queueing.resource_flavors() if f["metadata"]["name"] == queueing.GPU_FLAVOR]
    wanted = gpu["spec"]["nodeLabels"].items()
    nodes = yaml.safe_load((ROOT / "hack" / "kwok" / "nodes.yaml").read_text())["items"]
    with_gpus = {n["metadata"]["name"] for n in nodes if "nvidia.com/gpu" in n["status"]["capacity"]}
    selected = {n["metadata"]["name"] for n in nodes if wanted <= n["metadata"]["labels"].items()}
    assert with_gpus and selected == with_gpus


def test_each_tenant_has_its_own_queue_in_one_cohort_fed_by_its_namespace_alone() -> None:
    objects = queueing.platform_objects([ALICE, BOB], "tfk8s", CAPACITY, [("urgent", 1000)])
    queues = [o for o in objects if o["kind"] == "ClusterQueue"]
    local = [o for o in objects if o["kind"] == "LocalQueue"]
    assert {q["spec"]["cohortName"] for q in queues} == {"tfk8s"}
    assert len({q["metadata"]["name"] for q in queues}) == 2
    for tenant in (ALICE, BOB):
        selects_it = {"kubernetes.io/metadata.name": tenant.namespace}
        (mine,) = [q for q in queues if q["spec"]["namespaceSelector"]["matchLabels"] == selects_it]
        (its_local,) = [q for q in local if q["metadata"]["namespace"] == tenant.namespace]
        assert its_local["spec"]["clusterQueue"] == mine["metadata"]["name"]
        assert mine["spec"]["preemption"] == {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}
        assert mine["spec"]["fairSharing"] == {"weight": tenant.weight}
    # Flavors before the queues that name them.
    kinds = [o["kind"] for o in objects]
    assert kinds.index("ResourceFlavor") < kinds.index("Cohort") < kinds.index("ClusterQueue") < kinds.index("LocalQueue")


def test_a_jobset_queued_at_a_priority_names_the_local_queue_and_class_the_platform_declares() -> None:
    (urgent,) = queueing.workload_priority_classes([("urgent", 1000)])
    assert (urgent["kind"], urgent["metadata"]["name"], urgent["value"]) == ("WorkloadPriorityClass", "urgent", 1000)
    local = queueing.local_queue(ALICE)
    queued = jobset.Queueing(local_queue=local["metadata"]["name"], priority_class=urgent["metadata"]["name"]).labels()
    assert queued == {"kueue.x-k8s.io/queue-name": "experiments", "kueue.x-k8s.io/priority-class": "urgent"}


def test_a_priority_class_named_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="named twice: urgent"):
        queueing.workload_priority_classes([("urgent", 1000), ("batch", 10), ("urgent", 5)])


QUEUEING_ERRORS = [
    (
        "platform-dev",
        lambda raw: raw["platform"].update(queueing={"enabled": True}),
        r"tfk8s:platform\.queueing: .*enabled is true but capacity is not set: give the training nodes' cpu, memory and gpus",
    ),
    (
        "platform-dev",
        lambda raw: raw["platform"].update(queueing={"enabled": True, "capacity": {"cpu": "64", "memory": "256"}}),
        r"tfk8s:platform\.queueing\.capacity\.memory: ",
    ),
    (
        "platform-dev",
        lambda raw: raw["platform"].update(queueing={"priorityClasses": {"Urgent!": 1000}}),
        r"tfk8s:platform\.queueing\.priorityClasses",
    ),
    (
        "tenant-alice",
        lambda raw: raw["tenant"].update(queueing={"weight": "0"}),
        r"tfk8s:tenant\.queueing\.weight: must be greater than zero",
    ),
]


@pytest.mark.parametrize(
    ("stack", "mutate", "message"), QUEUEING_ERRORS, ids=["no-capacity", "memory-bare", "class-name", "weight-zero"]
)
def test_bad_queueing_config_is_refused_with_the_key_named(stack: str, mutate: Any, message: str) -> None:
    raw = copy.deepcopy(stack_config(stack))
    mutate(raw)
    with pytest.raises(ConfigError, match=message):
        validate(raw)


def test_queueing_is_off_unless_asked_and_each_tenant_weighs_one() -> None:
    platform = validate(copy.deepcopy(stack_config("platform-dev")))
    tenant = validate(copy.deepcopy(stack_config("tenant-alice")))
    assert isinstance(platform, PlatformStack) and isinstance(tenant, TenantStack)
    assert not platform.platform.queueing.enabled and platform.platform.queueing.capacity is None
    assert tenant.tenant.queueing.weight == "1"
