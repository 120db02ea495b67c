"""The Kueue objects of a queueing platform (tfk8s.specs.queueing): a queue per tenant, its quota."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from tfk8s.schema.platform import Quota
from tfk8s.schema.tenant import QuotaOverrides, TenantSettings
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


def nominal(cluster_queue: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """resource -> (flavor, nominalQuota), over every group."""
    return {
        r["name"]: (f["name"], r["nominalQuota"])
        for group in cluster_queue["spec"]["resourceGroups"]
        for f in group["flavors"]
        for r in f["resources"]
    }


@pytest.mark.parametrize("tenant", [ALICE, BOB], ids=["own-quota", "platform-default"])
def test_a_tenants_nominal_quota_is_its_namespace_quota(tenant: queueing.TenantQueue) -> None:
    hard = namespace_quota.hard(tenant.quota)
    assert nominal(queueing.cluster_queue(tenant, "tfk8s")) == {
        "cpu": ("cpu", hard["requests.cpu"]),
        "memory": ("cpu", hard["requests.memory"]),
        "nvidia.com/gpu": ("gpu", hard["requests.nvidia.com/gpu"]),
    }
    assert hard["requests.cpu"] == str(tenant.quota.cpu) and hard["requests.nvidia.com/gpu"] == str(tenant.quota.gpus)


def test_no_queue_admits_past_its_tenants_quota() -> None:
    """Borrowing would admit a JobSet whose pods the namespace's ResourceQuota then refuses."""
    for group in queueing.cluster_queue(ALICE, "tfk8s")["spec"]["resourceGroups"]:
        for flavor in group["flavors"]:
            assert all(r["borrowingLimit"] == "0" for r in flavor["resources"])


def test_every_flavor_names_its_groups_resources_in_order_and_exists() -> None:
    """Kueue refuses a ClusterQueue whose flavor's resources are not its group's coveredResources, in order."""
    declared = {f["metadata"]["name"] for f in queueing.resource_flavors()}
    covered: list[str] = []
    for group in queueing.cluster_queue(ALICE, "tfk8s")["spec"]["resourceGroups"]:
        covered += group["coveredResources"]
        for flavor in group["flavors"]:
            assert flavor["name"] in declared
            assert [r["name"] for r in flavor["resources"]] == group["coveredResources"]
    assert len(covered) == len(set(covered))  # a resource in two groups is refused too


def test_the_gpu_flavor_selects_exactly_the_nodes_with_gpus() -> None:
    (gpu,) = [f for f in queueing.resource_flavors() if f["metadata"]["name"] == queueing.GPU_FLAVOR]
    wanted = gpu["spec"]["nodeLabels"].items()
    nodes = yaml.safe_load((ROOT / "hack" / "kwok" / "nodes.yaml").read_text())["items"]
    with_gpus = {n["metadata"]["name"] for n in nodes if "nvidia.com/gpu" in n["status"]["capacity"]}
    selected = {n["metadata"]["name"] for n in nodes if wanted <= n["metadata"]["labels"].items()}
    assert with_gpus and selected == with_gpus


def test_each_tenant_has_its_own_queue_in_one_cohort_fed_by_its_namespace_alone() -> None:
    objects = queueing.platform_objects([ALICE, BOB], "tfk8s", [("urgent", 1000)])
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
    assert kinds.index("ResourceFlavor") < kinds.index("ClusterQueue") < kinds.index("LocalQueue")


def test_a_jobset_queued_at_a_priority_names_the_local_queue_and_class_the_platform_declares() -> None:
    (urgent,) = queueing.workload_priority_classes([("urgent", 1000)])
    assert (urgent["kind"], urgent["metadata"]["name"], urgent["value"]) == ("WorkloadPriorityClass", "urgent", 1000)
    local = queueing.local_queue(ALICE)
    queued = jobset.Queueing(local_queue=local["metadata"]["name"], priority_class=urgent["metadata"]["name"]).labels()
    assert queued == {"kueue.x-k8s.io/queue-name": "experiments", "kueue.x-k8s.io/priority-class": "urgent"}


def test_a_priority_class_named_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="named twice: urgent"):
        queueing.workload_priority_classes([("urgent", 1000), ("batch", 10), ("urgent", 5)])
