"""Queueing's objects (issue 38; tfk8s.components.queueing, tfk8s.checks.queueing): off by default they
are declared and asked for nowhere; on, the platform declares exactly the Cohort with the capacity,
the flavors and the priority classes, only on a cluster that serves Kueue and JobSet, and each tenant
its ClusterQueue in the cohort and its LocalQueue."""

from __future__ import annotations

import copy
from typing import Any

import pulumi
import pytest
from mocked_program import after, declared_types, facts_for, run_program
from tfk8s.errors import ClusterLacks
from tfk8s.settings.contract import PlatformFacts
from tfk8s.specs import queueing as spec
from tfk8s.specs import quota

KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:"
KUEUE_DISCOVERY = "/apis/kueue.x-k8s.io/v1beta2"
JOBSET_DISCOVERY = "/apis/jobset.x-k8s.io/v1alpha2"
USER_NODE = {"metadata": {"name": "tfk8s-user-node"}, "spec": {}, "status": {}}
API_SERVER = {"cidrs": ["10.0.0.1/32"], "ports": [6443]}
# The pod network a platform on a cluster that enforces policies names (its apps refuse it).
POD_CIDRS = ["10.244.0.0/16"]
CAPACITY = {"cpu": "64", "memory": "256Gi", "gpus": 8}
QUOTA = "kubernetes:core/v1:ResourceQuota"


def cluster(*, kueue: bool, jobset: bool) -> tuple[Any, list[str]]:
    """A `read_whole` of a cluster with the User Node and, as asked, Kueue's and JobSet's kinds; and the paths asked."""
    asked: list[str] = []
    objects: dict[str, Any] = {"/api/v1/nodes/tfk8s-user-node": USER_NODE}
    if kueue:
        objects[KUEUE_DISCOVERY] = {"resources": [{"name": "clusterqueues"}, {"name": "cohorts"}, {"name": "localqueues"}]}
    if jobset:
        objects[JOBSET_DISCOVERY] = {"resources": [{"name": "jobsets"}, {"name": "jobsets/status"}]}

    def read_whole(path: str) -> Any:
        asked.append(path)
        return objects.get(path)

    return read_whole, asked


def queued(platform_config: dict[str, Any], **queueing: Any) -> dict[str, Any]:
    platform_config["platform"]["queueing"] = {"enabled": True, "capacity": CAPACITY, **queueing}
    platform_config["platform"]["network"] = {"apiServer": API_SERVER, "podCidrs": POD_CIDRS}
    return platform_config


def kueue_objects(d: Any) -> list[Any]:
    return [r for r in d.mocks.resources if r.typ.startswith(KUEUE)]


def test_a_platform_without_queueing_declares_nothing_of_kueue_and_asks_nothing(platform_config: dict[str, Any]) -> None:
    read_whole, asked = cluster(kueue=True, jobset=True)
    platform_config["platform"]["network"] = {"apiServer": API_SERVER, "podCidrs": POD_CIDRS}

    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(platform_config, read_whole=read_whole)

        def check() -> None:
            assert kueue_objects(d) == []
            assert KUEUE_DISCOVERY not in asked and JOBSET_DISCOVERY not in asked

        return after(d, check)

    run()


def test_a_queueing_platform_declares_the_cohort_with_the_capacity_its_flavors_and_priority_classes(
    platform_config: dict[str, Any],
) -> None:
    read_whole, _ = cluster(kueue=True, jobset=True)
    config = queued(platform_config, cohort="training", priorityClasses={"urgent": 1000, "batch": 10})

    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(config, read_whole=read_whole)

        def check() -> None:
            by_kind: dict[str, list[Any]] = {}
            for r in kueue_objects(d):
                by_kind.setdefault(r.typ.removeprefix(KUEUE), []).append(r)
            assert sorted(by_kind) == ["Cohort", "ResourceFlavor", "WorkloadPriorityClass"]  # no queue: tenants' own
            (cohort,) = by_kind["Cohort"]
            assert cohort.inputs["metadata"]["name"] == "training"
            quotas = {
                r["name"]: (f["name"], r["nominalQuota"])
                for g in cohort.inputs["spec"]["resourceGroups"]
                for f in g["flavors"]
                for r in f["resources"]
            }
            assert quotas == {"cpu": ("cpu", "64"), "memory": ("cpu", "256Gi"), "nvidia.com/gpu": ("gpu", "8")}
            flavors = {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in by_kind["ResourceFlavor"]}
            assert flavors == {"cpu": {}, "gpu": {"nodeLabels": spec.GPU_NODE_LABELS}}
            classes = {r.inputs["metadata"]["name"]: r.inputs["value"] for r in by_kind["WorkloadPriorityClass"]}
            assert classes == {"urgent": 1000, "batch": 10}
            for r in kueue_objects(d):
                assert r.inputs["metadata"]["labels"]["tfk8s.io/stack-kind"] == "platform", r.name

        return after(d, check)

    run()


@pytest.mark.parametrize(
    ("kueue", "jobset", "missing"),
    [
        (False, True, r"kueue\.x-k8s\.io/v1beta2 clusterqueues"),
        (True, False, r"jobset\.x-k8s\.io/v1alpha2 jobsets"),
        (False, False, r"kueue\.x-k8s\.io/v1beta2 clusterqueues and no jobset\.x-k8s\.io/v1alpha2 jobsets"),
    ],
    ids=["no-kueue", "no-jobset", "neither"],
)
def test_queueing_on_a_cluster_without_kueue_or_jobset_is_refused_before_anything_exists(
    platform_config: dict[str, Any], kueue: bool, jobset: bool, missing: str
) -> None:
    read_whole, _ = cluster(kueue=kueue, jobset=jobset)
    message = (
        rf"tfk8s:platform\.queueing\.enabled: is true, but the cluster serves no {missing} .*start --queueing.*enabled: false"
    )
    # Not the stack file's fault: a missing prerequisite, distinct from a ConfigError.
    with declared_types() as declared, pytest.raises(ClusterLacks, match=message) as raised:
        run_program(queued(platform_config), read_whole=read_whole)
    assert str(raised.value).startswith("the cluster lacks what the stack needs:\n  - tfk8s:platform.queueing.enabled")
    assert [t for t in declared if t.startswith("kubernetes:")] == []


def queueing_facts(platform_config: dict[str, Any]) -> dict[str, Any]:
    raw = copy.deepcopy(platform_config)
    raw["platform"]["queueing"] = {"enabled": True, "cohort": "training", "capacity": CAPACITY}
    return facts_for(raw)


def test_a_tenant_on_a_queueing_platform_declares_its_queue_in_the_cohort_borrowing_up_to_its_quota(
    platform_config: dict[str, Any], tenant_config: dict[str, Any]
) -> None:
    tenant_config["tenant"]["queueing"] = {"weight": "2"}

    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(tenant_config, platform=queueing_facts(platform_config))

        def check() -> None:
            assert sorted(r.typ.removeprefix(KUEUE) for r in kueue_objects(d)) == ["ClusterQueue", "LocalQueue"]
            (queue,) = d.mocks.of_type(f"{KUEUE}ClusterQueue")
            (local,) = d.mocks.of_type(f"{KUEUE}LocalQueue")
            namespace = "tfk8s-alice"
            assert queue.inputs["metadata"]["name"] == namespace == local.inputs["metadata"]["namespace"]
            assert local.inputs["spec"] == {"clusterQueue": namespace}
            cq = queue.inputs["spec"]
            assert cq["cohortName"] == "training" and cq["fairSharing"] == {"weight": "2"}
            assert cq["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
            hard = {k: v for k, v in d.mocks.of_type(QUOTA)[0].inputs["spec"]["hard"].items() if k.startswith("requests.")}
            borrowing = {
                r["name"]: (r["nominalQuota"], r["borrowingLimit"])
                for g in cq["resourceGroups"]
                for f in g["flavors"]
                for r in f["resources"]
            }
            # The quota less what the tenant's Jupyter, TensorBoard and token gate take of it (the
            # namespace's own ResourceQuota counts them too), all GPUs: they take none.
            facts = PlatformFacts.model_validate(queueing_facts(platform_config), strict=False)
            apps = quota.apps_requests(facts.container_defaults, gated=facts.tensorboard_requires_token)
            assert apps["cpu"] > 0 and apps["memory"] > 0
            assert borrowing == {
                "cpu": ("0", spec.kube_quantity("cpu", quota.amount(hard["requests.cpu"]) - apps["cpu"])),
                "memory": ("0", spec.kube_quantity("memory", quota.amount(hard["requests.memory"]) - apps["memory"])),
                "nvidia.com/gpu": ("0", hard["requests.nvidia.com/gpu"]),
            }
            assert quota.amount(borrowing["cpu"][1]) + apps["cpu"] == quota.amount(hard["requests.cpu"])

        return after(d, check)

    run()


def test_a_tenant_on_a_platform_without_queueing_declares_no_queue(tenant_config: dict[str, Any]) -> None:
    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(tenant_config)

        def check() -> None:
            assert kueue_objects(d) == []

        return after(d, check)

    run()
