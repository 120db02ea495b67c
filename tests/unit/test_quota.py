"""Each tenant's namespace has a quota and container defaults, and an experiment that would not fit is
refused before anything is declared, with the numbers (tfk8s.specs.quota, tfk8s.checks.quota)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pulumi
import pytest
from mocked_program import DEPLOYMENT, after, facts_for, facts_with_scratch, run_program
from tfk8s.checks import quota as quota_check
from tfk8s.errors import ConfigError
from tfk8s.kube.api_paths import PERSISTENT_VOLUME_CLAIM, POD, RESOURCE_QUOTA, SERVICE
from tfk8s.settings.experiment import ClusterSettings
from tfk8s.settings.stack_file import validate
from tfk8s.specs import quota
from tfk8s.specs.labels import EXPERIMENT
from tfk8s.stack_kinds import experiment as experiment_stack

QUOTA_TYPE, LIMIT_RANGE_TYPE = "kubernetes:core/v1:ResourceQuota", "kubernetes:core/v1:LimitRange"
NAMESPACE = "tfk8s-alice"


# --- the objects -------------------------------------------------------------------------------


@pytest.mark.parametrize("own", [False, True], ids=["defaults", "own-keys"])
def test_each_tenant_gets_a_quota_over_the_platform_defaults_and_container_defaults(
    platform_config: dict[str, Any], tenant_config: dict[str, Any], own: bool
) -> None:
    platform_config["platform"]["defaultQuota"] = {"memory": "64Gi"}
    platform_config["platform"]["containerDefaults"] = {"cpu": "500m", "memory": "1Gi"}
    if own:
        tenant_config["tenant"]["quota"] = {"cpu": "8", "gpus": 0, "persistentVolumeClaims": 5, "configMaps": 7}

    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(tenant_config, platform=facts_for(platform_config))

        def check() -> None:
            (alice,) = [r.inputs for r in d.mocks.of_type(QUOTA_TYPE)]
            assert alice["metadata"]["name"] == quota.QUOTA_NAME and alice["metadata"]["namespace"] == NAMESPACE
            hard = alice["spec"]["hard"]
            if own:
                # The tenant's own keys over the platform's defaults; the rest stays the default.
                assert (hard["requests.cpu"], hard["limits.cpu"], hard["requests.nvidia.com/gpu"]) == ("8", "8", "0")
                assert (hard["persistentvolumeclaims"], hard["requests.memory"], hard["pods"]) == ("5", "64Gi", "100")
                assert (hard["count/configmaps"], hard["count/secrets"]) == ("7", "20")
            else:
                assert hard == {
                    "requests.cpu": "32",
                    "limits.cpu": "32",
                    "requests.memory": "64Gi",  # the platform's default, changed
                    "limits.memory": "64Gi",
                    "requests.nvidia.com/gpu": "4",
                    "requests.storage": "500Gi",
                    "pods": "100",
                    "services": "50",
                    "persistentvolumeclaims": "20",
                    # Object counts: what kubectl could otherwise create without bound.
                    "count/configmaps": "100",
                    "count/secrets": "20",
                    "count/serviceaccounts": "50",
                    "count/roles.rbac.authorization.k8s.io": "50",
                    "count/rolebindings.rbac.authorization.k8s.io": "50",
                    "count/networkpolicies.networking.k8s.io": "50",
                    "count/jobs.batch": "100",
                    "count/deployments.apps": "100",
                }
            (limit_range,) = [r.inputs for r in d.mocks.of_type(LIMIT_RANGE_TYPE)]
            assert limit_range["metadata"]["namespace"] == NAMESPACE
            # Node-local disk: limited for every container, never above the default, requested as 0.
            assert limit_range["spec"]["limits"] == [
                {
                    "type": "Container",
                    "default": {"cpu": "500m", "memory": "1Gi", "ephemeral-storage": "4Gi"},
                    "defaultRequest": {"cpu": "500m", "memory": "1Gi", "ephemeral-storage": "0"},
                    "max": {"ephemeral-storage": "4Gi"},
                }
            ]
            # Marked as every object of the tenant: owner labels and annotation.
            for obj in [alice, limit_range]:
                meta = obj["metadata"]
                assert meta["labels"]["tfk8s.io/stack"] == "tenant-alice" and meta["labels"]["tfk8s.io/stack-kind"] == "tenant"
                assert meta["annotations"]["tfk8s.io/owner"].startswith("organization/tfk8s/tenant-alice@")
            # Jupyter and TensorBoard set no resources: the LimitRange sizes them, so it comes first.
            assert len(d.mocks.of_type(DEPLOYMENT)) == 2
            for r in d.mocks.of_type(DEPLOYMENT):
                depends = d.options[f"{DEPLOYMENT}::{r.name}"].depends_on
                assert any(getattr(dep, "_name", "").endswith("-container-defaults") for dep in depends or []), r.name

        return after(d, check)

    run()


# The quota's settings for object counts, and the type of the objects each counts.
COUNTED = {
    "services": "kubernetes:core/v1:Service",
    "deployments": DEPLOYMENT,
    "configMaps": "kubernetes:core/v1:ConfigMap",
    "secrets": "kubernetes:core/v1:Secret",
    "serviceAccounts": "kubernetes:core/v1:ServiceAccount",
    "roles": "kubernetes:rbac.authorization.k8s.io/v1:Role",
    "roleBindings": "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding",
    "networkPolicies": "kubernetes:networking.k8s.io/v1:NetworkPolicy",
}
# What Kubernetes itself puts in every namespace: kube-root-ca.crt, the default ServiceAccount.
BY_KUBERNETES = {"configMaps": 1, "serviceAccounts": 1}


def test_what_a_tenant_declares_is_what_its_quota_is_checked_to_hold(tenant_config: dict[str, Any]) -> None:
    """`own_shortfalls` checks the tenant's own objects against its quota from `TENANT_OWN_COUNTS`:
    a tenant with identities (their access objects) declares exactly that many of each kind."""
    assert tenant_config["tenant"]["identities"]["users"], "the tenant's access objects are counted too"

    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(tenant_config)

        def check() -> None:
            own = [r for r in d.mocks.resources if r.inputs.get("metadata", {}).get("namespace") == NAMESPACE]
            for setting, typ in COUNTED.items():
                declared = sum(1 for r in own if r.typ == typ) + BY_KUBERNETES.get(setting, 0)
                assert declared == quota.TENANT_OWN_COUNTS[setting][0], setting
            replicas = sum(int(r.inputs["spec"]["replicas"]) for r in own if r.typ == DEPLOYMENT)
            assert replicas == quota.TENANT_OWN_COUNTS["pods"][0]

        return after(d, check)

    run()


def test_the_default_quota_and_container_defaults() -> None:
    platform = validate({"kind": "platform", "platform": {"userNode": {"name": "n"}}})
    tenant = validate({"kind": "tenant", "platformStack": "p", "tenant": {"name": "alice"}})
    effective = tenant.tenant.effective_quota(platform.platform)  # type: ignore[union-attr]
    assert effective.model_dump(by_alias=True) == {
        "cpu": "32",
        "memory": "128Gi",
        "gpus": 4,
        "storage": "500Gi",
        "pods": 100,
        "services": 50,
        "persistentVolumeClaims": 20,
        "configMaps": 100,
        "secrets": 20,
        "serviceAccounts": 50,
        "roles": 50,
        "roleBindings": 50,
        "networkPolicies": 50,
        "jobs": 100,
        "deployments": 100,
    }
    defaults = platform.platform.container_defaults.model_dump()  # type: ignore[union-attr]
    assert defaults == {"cpu": "1", "memory": "2Gi", "ephemeral_storage": "4Gi"}


def test_a_bad_quota_key_is_refused_with_its_key() -> None:
    raw: dict[str, Any] = {"kind": "tenant", "platformStack": "p", "tenant": {"name": "alice", "quota": {"cpus": 4}}}
    with pytest.raises(ConfigError, match=r"tfk8s:tenant\.quota\.cpus: unknown key"):
        validate(raw)
    raw["tenant"]["quota"] = {"memory": "lots"}
    with pytest.raises(ConfigError, match=r"tfk8s:tenant\.quota\.memory: .*not a Kubernetes quantity"):
        validate(raw)
    platform = {"kind": "platform", "platform": {"userNode": {"name": "n"}, "defaultQuota": {"cpus": 4}}}
    with pytest.raises(ConfigError, match=r"tfk8s:platform\.defaultQuota\.cpus: unknown key"):
        validate(platform)


# --- the refusal: arithmetic -----------------------------------------------------------------------


def test_demand_counts_ps_workers_the_chief_services_and_scratch() -> None:
    cluster = ClusterSettings.model_validate(
        {
            "name": "big",
            "replication": "in-graph",
            "inGraphClient": "chief",
            "ps": {"count": 2, "cpu": "500m", "memory": "1Gi"},
            "workers": {"count": 4, "cpu": "2", "memory": "4Gi", "gpus": 1},
            "scratch": {"size": "20Gi"},
        }
    )
    demand = quota_check.experiment_demand([cluster])

    def total(setting: str) -> Decimal:
        return sum((p.total for p in demand[setting]), Decimal(0))

    assert total("cpu") == Decimal("1") + 8 + 2  # 2 PS x 0.5, 4 workers x 2, the chief x 2
    assert total("memory") == (2 + 16 + 4) * 2**30
    assert total("gpus") == 4  # the chief has none
    assert (total("pods"), total("services")) == (7, 4)  # 2 PS Services, one per Job
    assert (total("storage"), total("persistentVolumeClaims")) == (20 * 2**30, 1)


def test_own_usage_counts_unfinished_pods_and_the_largest_init_container() -> None:
    def pod(cpu: str, phase: str = "Running", init_cpu: str | None = None) -> dict[str, Any]:
        spec: dict[str, Any] = {"containers": [{"resources": {"limits": {"cpu": cpu, "memory": "1Gi"}}}]}
        if init_cpu:
            spec["initContainers"] = [{"resources": {"requests": {"cpu": init_cpu}}}]
        return {"spec": spec, "status": {"phase": phase}}

    used = quota_check.own_usage(
        [pod("1"), pod("500m", init_cpu="2"), pod("4", phase="Succeeded")],
        [{}, {}],
        [{"spec": {"resources": {"requests": {"storage": "5Gi"}}}}],
    )
    assert used["requests.cpu"] == Decimal(3)  # 1 + max(0.5, 2); the finished pod counts no more
    assert used["limits.memory"] == 2 * 2**30
    assert (used["pods"], used["services"], used["persistentvolumeclaims"]) == (2, 2, 1)
    assert used["requests.storage"] == 5 * 2**30


@pytest.mark.parametrize(
    ("setting", "value", "shown"),
    [
        ("cpu", Decimal("0.5"), "0.5"),
        ("cpu", Decimal(502), "502"),
        ("memory", Decimal(3 * 2**29), "1.5Gi"),
        ("storage", Decimal(100), "100"),
    ],
)
def test_amounts_are_shown_as_users_write_them(setting: str, value: Decimal, shown: str) -> None:
    assert quota.format_amount(setting, value) == shown


# --- the refusal: before anything is declared ------------------------------------------------------


def own_pod(cpu: str, memory: str) -> dict[str, Any]:
    amounts = {"cpu": cpu, "memory": memory}
    return {"spec": {"containers": [{"resources": {"requests": amounts, "limits": amounts}}]}, "status": {"phase": "Running"}}


def cluster_with(hard: dict[str, str], used: dict[str, str], own: list[dict[str, Any]] | None = None, services: int = 0) -> Any:
    """A cluster whose namespace tfk8s-alice has this quota, and the `dev` experiment's own live pods."""
    mine = {EXPERIMENT: "dev"}
    objects: dict[str, Any] = {
        RESOURCE_QUOTA.path(quota.QUOTA_NAME, NAMESPACE): {"spec": {"hard": hard}, "status": {"hard": hard, "used": used}},
        POD.list_path(NAMESPACE, mine): {"items": own or []},
        SERVICE.list_path(NAMESPACE, mine): {"items": [{}] * services},
        PERSISTENT_VOLUME_CLAIM.list_path(NAMESPACE, mine): {"items": []},
    }
    return lambda path: objects.get(path)


CPU = {"requests.cpu": "16", "limits.cpu": "16"}
# The dev experiment: 1 PS (500m, 1Gi) and 2 workers (1 CPU, 2Gi): 2.5 CPUs, 5Gi, 3 pods, 2 Services.
DEV_OWN = [own_pod("500m", "1Gi"), own_pod("1", "2Gi"), own_pod("1", "2Gi")]

REFUSALS: dict[str, tuple[dict[str, Any], Any, bool, str | None]] = {
    # name: (changes to clusters[0], the cluster, with a scratch class, the refusal expected or None)
    "fits": ({}, cluster_with(CPU, {"requests.cpu": "4", "limits.cpu": "4"}), False, None),
    "cpu-over": (
        {"workers": {"count": 500, "cpu": "1", "memory": "2Gi"}},
        cluster_with(CPU, {"requests.cpu": "4", "limits.cpu": "4"}),
        False,
        r"^invalid tfk8s configuration:\n  - tfk8s:clusters\[0\]\.workers\.count: the experiment asks cpu 500\.5 "
        r"\(1 PS x 0\.5, 500 workers x 1\), tenant alice's quota has 12 of 16 left \(used 4\): lower workers\.count or "
        r"workers\.cpu, or ask the platform team to raise tfk8s:tenant\.quota\.cpu of tenant alice$",
    ),
    "gpu-over": (
        {"workers": {"count": 2, "gpus": 2}},
        cluster_with({"requests.nvidia.com/gpu": "4"}, {"requests.nvidia.com/gpu": "1"}),
        False,
        r"tfk8s:clusters\[0\]\.workers\.count: the experiment asks gpus 4 \(2 workers x 2\), tenant alice's quota has 3 of 4 "
        r"left \(used 1\): lower workers\.count or workers\.gpus, or ask the platform team to raise "
        r"tfk8s:tenant\.quota\.gpus of tenant alice",
    ),
    "pods-over": (
        {},
        cluster_with({"pods": "4"}, {"pods": "2"}),
        False,
        r"tfk8s:clusters\[0\]\.workers\.count: the experiment asks pods 3 \(1 PS, 2 workers\), tenant alice's quota has 2 "
        r"of 4 left \(used 2\): lower workers\.count, or ask the platform team to raise "
        r"tfk8s:tenant\.quota\.pods of tenant alice",
    ),
    # 3.5 of 4 CPUs used, 2.5 of them by this experiment's own pods, which the update replaces.
    "update-fits-with-own-use": (
        {},
        cluster_with({"requests.cpu": "4", "pods": "5"}, {"requests.cpu": "3500m", "pods": "5"}, DEV_OWN),
        False,
        None,
    ),
    # The same update with 1 worker more does not fit: the message shows the experiment's own share.
    "update-over-despite-own-use": (
        {"workers": {"count": 3}},
        cluster_with({"requests.cpu": "4"}, {"requests.cpu": "3500m"}, DEV_OWN),
        False,
        r"tfk8s:clusters\[0\]\.workers\.count: the experiment asks cpu 3\.5 \(1 PS x 0\.5, 3 workers x 1\), tenant alice's "
        r"quota has 3 of 4 left \(used 3\.5, 2\.5 of it this experiment's own\)",
    ),
    "storage-over-with-scratch": (
        {"scratch": {"size": "20Gi"}},
        cluster_with({"requests.storage": "10Gi", "persistentvolumeclaims": "20"}, {"requests.storage": "2Gi"}),
        True,
        r"tfk8s:clusters\[0\]\.scratch\.size: the experiment asks storage 20Gi \(1 scratch claim x 20Gi\), tenant alice's "
        r"quota has 8Gi of 10Gi left \(used 2Gi\): lower scratch\.size, or ask the platform team to raise "
        r"tfk8s:tenant\.quota\.storage of tenant alice",
    ),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_an_experiment_that_does_not_fit_is_refused_before_anything_is_declared(
    case: str, dev_config: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    changes, read_whole, scratch, refusal = REFUSALS[case]
    for key, value in changes.items():
        current = dev_config["clusters"][0].get(key)
        dev_config["clusters"][0][key] = {**current, **value} if isinstance(current, dict) else value
    platform = facts_with_scratch() if scratch else None
    if refusal is None:
        declared: list[bool] = []
        monkeypatch.setattr(experiment_stack, "build", lambda *args, **kwargs: declared.append(True) or {})
        run_program(dev_config, read_whole=read_whole, platform=platform)
        assert declared == [True]
        return
    monkeypatch.setattr(experiment_stack, "build", lambda *args, **kwargs: pytest.fail("declared resources"))
    with pytest.raises(ConfigError, match=refusal):
        d = run_program(dev_config, read_whole=read_whole, platform=platform)
        pytest.fail(f"created {len(d.mocks.resources)} resources")


def test_a_namespace_without_a_tfk8s_quota_refuses_nothing(dev_config: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """A platform from before quotas: Kubernetes enforces none, so neither does the check."""
    dev_config["clusters"][0]["workers"]["count"] = 500
    declared: list[bool] = []
    monkeypatch.setattr(experiment_stack, "build", lambda *args, **kwargs: declared.append(True) or {})
    run_program(dev_config, read_whole=lambda path: None)
    assert declared == [True]
