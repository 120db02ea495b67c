"""The User Node is read before it is patched: a node whose taints belong to someone else stops the
run with a message naming the key and the fix, before the patch or anything user-facing is sent."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pulumi
import pytest
from mocked_program import after, run_program
from mocks import LiveHook, plain_nodes
from tfk8s.schema_platform import UserNodeSettings
from tfk8s.user_node import UserNodeTaken, UserNodeTooSmall, check_room, checked_taints

SETTINGS = UserNodeSettings(name="gpu-7")
OURS = [{"key": "tfk8s.io/user-node", "value": "true", "effect": "NoSchedule"}]


def node(taints: list[dict[str, str]], *managers: str, snake_case: bool = False) -> dict[str, Any]:
    """A live Node whose `.spec.taints` are owned by `managers`, as the API (or the SDK's typed outputs) spell it."""
    fields, entries = ("fields_v1", "managed_fields") if snake_case else ("fieldsV1", "managedFields")
    owned = [{"manager": m, fields: {"f:spec": {"f:taints": {}}}} for m in managers]
    labels_only = {"manager": "kubelet", fields: {"f:metadata": {"f:labels": {}}}}
    return {"metadata": {"name": "gpu-7", entries: [labels_only, *owned]}, "spec": {"taints": taints}}


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
    assert checked_taints(SETTINGS, live) == OURS


@pytest.mark.parametrize("snake_case", [False, True], ids=["api-json", "sdk-typed-outputs"])
def test_someone_elses_taints_stop_the_run_naming_the_key_the_owner_and_the_fix(snake_case: bool) -> None:
    theirs = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    with pytest.raises(UserNodeTaken) as caught:
        checked_taints(SETTINGS, node(theirs, "kubectl-taint", snake_case=snake_case))
    message = str(caught.value)
    assert message.startswith("tfk8s:platform.userNode.name: node 'gpu-7'")
    assert "nvidia.com/gpu=present:NoSchedule" in message and "set by kubectl-taint" in message
    assert "kubectl taint node gpu-7 nvidia.com/gpu-" in message


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
def test_only_user_facing_workloads_wait_for_the_user_node_patch(platform_config: dict[str, Any]) -> None:
    """Pods must not be scheduled before the taint and label exist; everything else goes in parallel."""
    d = run_program(platform_config)
    user_node = d.components["user_node"]

    def check() -> None:
        waiting = sorted(
            key
            for key, opts in d.options.items()
            if user_node in (opts.depends_on or []) and not key.startswith("kubernetes:core/v1:ConfigMap::")  # guards
        )
        # Jupyter and TensorBoard of both users: the only pods a platform stack runs.
        expected = sorted(
            f"kubernetes:apps/v1:Deployment::{u}-{app}" for u in ("alice", "bob") for app in ("jupyter", "tensorboard")
        )
        assert waiting == expected
        # They are also the only pods that tolerate the taint.
        (patch,) = d.mocks.of_type("kubernetes:core/v1:NodePatch")
        (taint,) = patch.inputs["spec"]["taints"]
        for r in d.mocks.of_type("kubernetes:apps/v1:Deployment"):
            assert any(t.get("key") == taint["key"] for t in r.inputs["spec"]["template"]["spec"]["tolerations"])
            assert r.inputs["spec"]["template"]["spec"]["nodeSelector"] == {taint["key"]: "true"}

    return after(d, check)


@pytest.mark.parametrize(
    ("status", "pods_needed", "fits"),
    [
        ({"allocatable": {"pods": "110"}}, 110, True),  # 55 users
        ({"allocatable": {"pods": "110"}}, 112, False),  # 56 users
        ({"allocatable": {"pods": "250"}}, 200, True),  # 100 users on a node with kubelet --max-pods=250
        ({"allocatable": {"pods": "1k"}}, 200, True),  # a quantity, as the API may spell it
        ({}, 10_000, True),  # not reported (a preview before the read): nothing to judge
    ],
    ids=["exactly-full", "one-user-too-many", "raised-max-pods", "quantity-suffix", "unknown"],
)
def test_the_user_node_must_have_room_for_every_users_apps(status: dict[str, Any], pods_needed: int, fits: bool) -> None:
    if fits:
        check_room(SETTINGS, status, pods_needed)
        return
    with pytest.raises(UserNodeTooSmall) as caught:
        check_room(SETTINGS, status, pods_needed)
    message = str(caught.value)
    assert message.startswith("tfk8s:users: the users' Jupyter and TensorBoard pods (112)")
    assert "node 'gpu-7' allows 110 pods" in message and "maxPods" in message


def test_too_many_users_for_the_user_node_stop_the_program_before_the_patch(platform_config: dict[str, Any]) -> None:
    platform_config["users"] = [{"name": f"user{i}"} for i in range(56)]  # 112 pods on a 110-pod node
    sent = refused_run(
        platform_config, plain_nodes, r"tfk8s:users: the users' Jupyter and TensorBoard pods \(112\) all run on the User Node"
    )
    assert "kubernetes:core/v1:NodePatch" not in sent and "kubernetes:core/v1:Namespace" not in sent, sent
