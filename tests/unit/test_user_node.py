"""The User Node is read before it is patched: a node whose taints belong to someone else stops the
run with a message naming the key and the fix, before the patch or anything user-facing is sent."""

from __future__ import annotations

import asyncio
import gc
from decimal import Decimal
from typing import Any

import pulumi
import pytest
from mocked_program import after, declared_types, facts_for, run_program, stack_config
from mocks import LiveHook
from tfk8s.checks.user_node import check_room
from tfk8s.errors import UserNodeTaken, UserNodeTooSmall
from tfk8s.kube.api_paths import NODE
from tfk8s.settings import state_store
from tfk8s.settings.contract import PlatformFacts
from tfk8s.settings.platform import UserNodeSettings
from tfk8s.specs import ownership
from tfk8s.specs.user_node import patch_taints
from tfk8s.stack_kinds import tenant as tenant_stack

SETTINGS = UserNodeSettings(name="gpu-7")
OURS = [{"key": "tfk8s.io/user-node", "value": "true", "effect": "NoSchedule"}]


def node(taints: list[dict[str, str]], *managers: str) -> dict[str, Any]:
    """A live Node whose `.spec.taints` are owned by `managers`, as the API spells it (and the program reads it)."""
    owned = [{"manager": m, "fieldsV1": {"f:spec": {"f:taints": {}}}} for m in managers]
    labels_only = {"manager": "kubelet", "fieldsV1": {"f:metadata": {"f:labels": {}}}}
    return {"metadata": {"name": "gpu-7", "managedFields": [labels_only, *owned]}, "spec": {"taints": taints}}


@pytest.mark.parametrize(
    "live",
    [
        node([]),
        node(OURS, "pulumi-kubernetes-7f6d523d"),  # ours, from the last `up`
        node([{"key": "tfk8s.io/old-key", "value": "true", "effect": "NoSchedule"}], "pulumi-kubernetes-1"),  # key renamed
        node(OURS, "kubectl-taint"),  # someone added exactly ours: applying the same value is no conflict
        {},
    ],
    ids=["untainted", "ours", "ours-renamed", "same-value-elsewhere", "unknown-in-preview"],
)
def test_a_node_we_may_patch_gets_exactly_our_taint(live: dict[str, Any]) -> None:
    assert patch_taints(SETTINGS, live) == OURS


def test_someone_elses_taints_stop_the_run_naming_the_key_the_owner_and_the_fix() -> None:
    theirs = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    with pytest.raises(UserNodeTaken) as caught:
        patch_taints(SETTINGS, node(theirs, "kubectl-taint"))
    message = str(caught.value)
    assert message.startswith("tfk8s:platform.userNode.name: node 'gpu-7'")
    assert "nvidia.com/gpu=present:NoSchedule" in message and "set by kubectl-taint" in message
    assert "kubectl taint node gpu-7 nvidia.com/gpu-" in message


def test_a_node_shared_with_training_gets_no_taint_and_refuses_anyone_elses_that_would_keep_pods_off() -> None:
    shared = UserNodeSettings(name="gpu-7", shared_with_training=True)
    assert patch_taints(shared, node([])) == []
    assert patch_taints(shared, node(OURS, "pulumi-kubernetes-7f6d523d")) == []  # ours, from before: the patch drops it
    soft = [{"key": "spot", "value": "true", "effect": "PreferNoSchedule"}]
    assert patch_taints(shared, node(soft, "kubelet")) == []
    theirs = [{"key": "node-role.kubernetes.io/control-plane", "value": "", "effect": "NoSchedule"}]
    with pytest.raises(UserNodeTaken) as caught:
        patch_taints(shared, node(theirs, "kubeadm"))
    message = str(caught.value)
    assert message.startswith("tfk8s:platform.userNode.name: node 'gpu-7' has taints [node-role.kubernetes.io/control-plane=:")
    assert "sharedWithTraining" in message and "kubectl taint node gpu-7 node-role.kubernetes.io/control-plane-" in message


@pulumi.runtime.test
def test_a_shared_user_node_is_labelled_and_its_patch_claims_no_taints(platform_config: dict[str, Any]) -> None:
    """The patch names no `.spec.taints` (an empty list would claim the node's one atomic list): the
    taint of a dedicated User Node from before goes with it, anyone else's soft one stays."""
    platform_config["platform"]["userNode"]["sharedWithTraining"] = True

    def was_dedicated(typ: str, object_id: str) -> dict[str, Any]:
        live = node(OURS, "pulumi-kubernetes-7f6d523d")
        live["spec"]["taints"].append({"key": "spot", "value": "true", "effect": "PreferNoSchedule"})
        return live

    d = run_program(platform_config, live_hook=was_dedicated)

    def check() -> None:
        (patch,) = d.mocks.of_type("kubernetes:core/v1:NodePatch")
        assert patch.inputs["metadata"]["labels"] == {"tfk8s.io/user-node": "true"}
        assert "spec" not in patch.inputs, patch.inputs.get("spec")

    # Experiments learn it from the platform's facts (and drop the affinity that keeps them off the node).
    assert facts_for(platform_config)["userNode"]["sharedWithTraining"] is True
    return after(d, check)


def test_a_taken_node_stops_the_program_before_the_patch_and_the_user_environments(platform_config: dict[str, Any]) -> None:
    def taken(typ: str, object_id: str) -> dict[str, Any]:
        return node([{"key": "dedicated", "value": "infra", "effect": "NoExecute"}], "kubelet")

    sent = refused_run(platform_config, taken, r"tfk8s:platform\.userNode\.name: node 'tfk8s-user-node'")
    assert "kubernetes:core/v1:NodePatch" not in sent
    # Only cluster-scoped platform objects that no pod needs: the class, the Layout kind and the destroy guard's policy.
    cluster_scoped = {
        "kubernetes:storage.k8s.io/v1:StorageClass",
        "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition",
        "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy",
        "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding",
    }
    assert not any(t.startswith("kubernetes:") and t not in cluster_scoped for t in sent), sent


def refused_run(platform_config: dict[str, Any], live_hook: LiveHook, refusal: str) -> set[str]:
    """Run the platform program expecting `refusal`; the resource types it sent before stopping."""
    declared: list[Any] = []

    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(platform_config, live_hook=live_hook)
        declared.append(d)
        return d.components["readiness"]

    with pytest.raises(Exception, match=refusal):
        run()
    retrieve_failed_outputs()
    (d,) = declared
    return {r.typ for r in d.mocks.resources}


def retrieve_failed_outputs() -> None:
    """Every output downstream of the refused node fails with the same error; retrieve them all, or asyncio
    logs each as "Future exception was never retrieved" when it is collected, burying the run's real output."""
    gc.collect()
    for obj in gc.get_objects():
        if isinstance(obj, asyncio.Future) and obj.done() and not obj.cancelled():
            obj.exception()


@pulumi.runtime.test
def test_the_platform_runs_no_pod_and_only_its_guard_waits_for_the_user_node_patch(platform_config: dict[str, Any]) -> None:
    """The experimenter role, which tenants bind, is deleted before the node is unpatched (tfk8s.components.guard)."""
    d = run_program(platform_config)
    user_node = d.components["user_node"]

    def check() -> None:
        waiting = sorted(key for key, opts in d.options.items() if user_node in (opts.depends_on or []))
        assert waiting == ["kubernetes:rbac.authorization.k8s.io/v1:ClusterRole::platform-guard-experimenter"]
        assert not d.mocks.of_type("kubernetes:apps/v1:Deployment")

    return after(d, check)


@pulumi.runtime.test
def test_a_tenants_apps_are_the_only_pods_on_the_user_node(tenant_config: dict[str, Any]) -> None:
    """They tolerate the platform's taint and select its label: the tenant learns both from the platform's facts."""
    platform = facts_for(stack_config("platform-dev"))
    platform["userNode"]["taintKey"] = "example.com/users"
    d = run_program(tenant_config, platform=platform)

    def check() -> None:
        deployments = d.mocks.of_type("kubernetes:apps/v1:Deployment")
        assert sorted(r.name for r in deployments) == ["alice-jupyter", "alice-tensorboard"]
        for r in deployments:
            spec = r.inputs["spec"]["template"]["spec"]
            assert any(t.get("key") == "example.com/users" and t.get("effect") == "NoSchedule" for t in spec["tolerations"])
            assert spec["nodeSelector"] == {"example.com/users": "true"}

    return after(d, check)


# One tenant's apps at the platform's default size: Jupyter and TensorBoard (1 CPU, 2Gi each) and
# TensorBoard's token gate (100m, 128Mi).
ONE_TENANT = {"pods": Decimal(2), "cpu": Decimal("2.1"), "memory": Decimal(4 * 2**30 + 128 * 2**20)}
ROOMY = {"cpu": "1000", "memory": "4000Gi"}


@pytest.mark.parametrize(
    ("status", "tenants", "fits"),
    [
        ({"allocatable": {"pods": "110", **ROOMY}}, 55, True),  # exactly full
        ({"allocatable": {"pods": "110", **ROOMY}}, 56, False),
        ({"allocatable": {"pods": "250", **ROOMY}}, 100, True),  # a node with kubelet --max-pods=250
        ({"allocatable": {"pods": "1k", **ROOMY}}, 100, True),  # a quantity, as the API may spell it
        ({}, 5_000, True),  # not reported (a preview before the read): nothing to judge
    ],
    ids=["exactly-full", "one-tenant-too-many", "raised-max-pods", "quantity-suffix", "unknown"],
)
def test_the_user_node_must_have_room_for_every_tenants_pods(status: dict[str, Any], tenants: int, fits: bool) -> None:
    if fits:
        check_room("gpu-7", status, tenants, ONE_TENANT, "tfk8s:tenant")
        return
    with pytest.raises(UserNodeTooSmall) as caught:
        check_room("gpu-7", status, tenants, ONE_TENANT, "tfk8s:tenant")
    message = str(caught.value)
    assert message.startswith("tfk8s:tenant: the tenants' Jupyter and TensorBoard pods all run on the User Node")
    assert "112 pods with this one, where node 'gpu-7' allows 110 (status.allocatable.pods)" in message
    assert "maxPods" in message and "CPUs" not in message


@pytest.mark.parametrize(
    ("allocatable", "tenants", "short"),
    [
        ({"cpu": "16", "memory": "64Gi"}, 7, []),  # kwok's User Node: 14.7 CPUs, 28.88Gi
        ({"cpu": "16", "memory": "64Gi"}, 8, ["16.8 CPUs with this one, where node 'gpu-7' allows 16"]),
        ({"cpu": "16000m", "memory": "30Gi"}, 8, ["16.8 CPUs", "33Gi of memory with this one, where node 'gpu-7' allows 30Gi"]),
        ({"cpu": "64", "memory": "8Gi"}, 2, ["8.25Gi of memory with this one, where node 'gpu-7' allows 8Gi"]),
    ],
    ids=["room-for-seven", "cpu-short", "both-short", "memory-short"],
)
def test_the_user_node_must_have_the_cpu_and_memory_every_tenants_apps_request(
    allocatable: dict[str, str], tenants: int, short: list[str]
) -> None:
    """The scheduler leaves an app it has no CPU or memory for Pending: refused before, not after a timeout."""
    status = {"allocatable": {"pods": "110", **allocatable}}
    if not short:
        check_room("gpu-7", status, tenants, ONE_TENANT, "tfk8s:tenant")
        return
    with pytest.raises(UserNodeTooSmall) as caught:
        check_room("gpu-7", status, tenants, ONE_TENANT, "tfk8s:tenant")
    message = str(caught.value)
    assert all(part in message for part in short), message
    assert ("CPUs" in message) == any("CPUs" in part for part in short)
    assert "pods with this one" not in message and "tfk8s:platform.containerDefaults" in message


TENANT_OWNER = f"organization/tfk8s/tenant-alice@{state_store.state_id({'PULUMI_BACKEND_URL': 'file:///test-state'})}"


def a_cluster_with(tenants: int, registered: bool, max_pods: str = "4", cpu: str | None = None) -> tuple[Any, Any]:
    """`read` and `read_whole` of a cluster whose User Node allows `max_pods` pods (and `cpu` CPUs) and whose platform
    has `tenants` Tenants (listed one at a time: one item and the remaining count), alice among them if `registered`."""
    platform = PlatformFacts.model_validate(facts_for(stack_config("platform-dev")), strict=False)
    alice = platform.tenants.api.path("alice")
    allocatable = {"pods": max_pods, **({"cpu": cpu} if cpu else {})}
    whole = {
        NODE.path("tfk8s-user-node"): {"metadata": {"name": "tfk8s-user-node"}, "status": {"allocatable": allocatable}},
        platform.tenants.api.count_path(): {"items": [{}], "metadata": {"remainingItemCount": tenants - 1}},
    }
    mine = {alice: {"metadata": {"annotations": {ownership.OWNER: TENANT_OWNER}}}} if registered else {}
    return (lambda path: mine.get(path)), (lambda path: whole.get(path))


def test_a_new_tenant_the_user_node_has_no_room_for_is_refused_before_anything_is_declared(
    tenant_config: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two tenants' 4 pods fill a 4-pod node: a third is refused, naming the key and the fix."""
    monkeypatch.setattr(tenant_stack, "build", lambda *args, **kwargs: pytest.fail("declared resources"))
    read, read_whole = a_cluster_with(tenants=2, registered=False)
    with pytest.raises(UserNodeTooSmall) as caught:
        run_program(tenant_config, read=read, read_whole=read_whole)
    message = str(caught.value)
    assert message.startswith("tfk8s:tenant: the tenants' Jupyter and TensorBoard pods all run on the User Node")
    assert "6 pods with this one, where node 'tfk8s-user-node' allows 4" in message and "maxPods" in message


def test_a_new_tenant_the_user_node_has_no_cpu_for_is_refused_before_anything_is_declared(
    tenant_config: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Room for the pods is not enough: seven tenants' apps at platform-dev's size fill 16 CPUs."""
    monkeypatch.setattr(tenant_stack, "build", lambda *args, **kwargs: pytest.fail("declared resources"))
    read, read_whole = a_cluster_with(tenants=7, registered=False, max_pods="110", cpu="16")
    with pytest.raises(UserNodeTooSmall) as caught:
        run_program(tenant_config, read=read, read_whole=read_whole)
    message = str(caught.value)
    assert "CPUs with this one, where node 'tfk8s-user-node' allows 16 (status.allocatable.cpu)" in message
    assert "pods with this one" not in message


@pytest.mark.parametrize(
    ("tenants", "registered", "max_pods"),
    [(2, True, "4"), (1, False, "4"), (2, False, "110")],
    ids=["already-registered", "room-for-one-more", "larger-node"],
)
def test_a_tenant_the_user_node_has_room_for_passes(
    tenant_config: dict[str, Any], monkeypatch: pytest.MonkeyPatch, tenants: int, registered: bool, max_pods: str
) -> None:
    """A registered tenant is already counted: its update needs no room beyond what it has."""
    declared: list[bool] = []
    monkeypatch.setattr(tenant_stack, "build", lambda *args, **kwargs: declared.append(True) or {})
    read, read_whole = a_cluster_with(tenants, registered, max_pods)
    run_program(tenant_config, read=read, read_whole=read_whole)
    assert declared == [True]


def test_without_a_whole_object_reader_the_room_is_not_judged(
    tenant_config: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    declared: list[bool] = []
    monkeypatch.setattr(tenant_stack, "build", lambda *args, **kwargs: declared.append(True) or {})
    read, _ = a_cluster_with(tenants=200, registered=False)
    run_program(tenant_config, read=read)
    assert declared == [True]


@pytest.mark.parametrize("case", ["missing", "taken"])
def test_a_missing_or_taken_user_node_is_refused_before_any_resource(platform_config: dict[str, Any], case: str) -> None:
    """With the cluster readable, the program reads the node itself before declaring anything."""
    taken = {
        "metadata": {
            "name": "tfk8s-user-node",
            "managedFields": [{"manager": "kubelet", "fieldsV1": {"f:spec": {"f:taints": {}}}}],
        },
        "spec": {"taints": [{"key": "dedicated", "value": "infra", "effect": "NoExecute"}]},
    }
    asked: list[str] = []

    def read_whole(path: str) -> dict[str, Any] | None:
        asked.append(path)
        return {"missing": None, "taken": taken}[case] if path == "/api/v1/nodes/tfk8s-user-node" else None

    expected = {
        "missing": r"tfk8s:platform\.userNode\.name: there is no node 'tfk8s-user-node' in the cluster",
        "taken": r"tfk8s:platform\.userNode\.name: node 'tfk8s-user-node' already has taints \[dedicated=infra:NoExecute\]",
    }[case]
    with declared_types() as declared:
        with pytest.raises(Exception, match=expected):
            run_program(platform_config, read_whole=read_whole)
    assert "/api/v1/nodes/tfk8s-user-node" in asked
    assert declared == []
