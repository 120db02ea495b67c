"""Readiness comes from live status: every not-ready case is named, `ready` only when all are."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest
from mocked_program import facts_with_scratch, run_program
from mocks import healthy_status
from tfk8s.specs.readiness import app_readiness, cluster_readiness

HEALTHY: dict[str, Any] = {
    "ps": [{"availableReplicas": 1}],
    "workers": {"ready": 2, "active": 2, "succeeded": 0, "failed": 0},
    "chief": None,
}


def with_(**changes: Any) -> dict[str, Any]:
    return {**HEALTHY, **changes}


CLUSTER_CASES = [
    ("healthy", HEALTHY, "Running", []),
    ("ps-unavailable", with_(ps=[{"availableReplicas": 0}]), "Pending", ["parameter servers: 0/1 available"]),
    ("ps-no-status", with_(ps=[None]), "Pending", ["parameter servers: 0/1 available"]),
    ("workers-starting", with_(workers={"ready": 1, "active": 2}), "Pending", ["workers: 1/2 ready or done"]),
    (
        "worker-crashed-retrying",
        with_(workers={"ready": 1, "active": 2, "failed": 1}),
        "Pending",
        ["workers: 1/2 ready or done", "workers: 1 pod(s) failed (retried per index)"],
    ),
    ("scratch-bound", with_(scratch={"phase": "Bound"}), "Running", []),
    ("scratch-lost", with_(scratch={"phase": "Lost"}), "Pending", ["scratch volume is Lost, not Bound"]),
    ("scratch-no-status", with_(scratch=None), "Pending", ["scratch volume is Unknown, not Bound"]),
    (
        "job-failed",
        with_(workers={"failed": 4, "conditions": [{"type": "Failed", "status": "True"}]}),
        "Failed",
        ["training failed: 4 worker pod(s) failed", "workers Job failed"],
    ),
    (
        "deadline-exceeded",
        with_(
            workers={
                "failed": 0,
                "conditions": [
                    {
                        "type": "Failed",
                        "status": "True",
                        "reason": "DeadlineExceeded",
                        "message": "Job was active longer than specified deadline",
                    }
                ],
            }
        ),
        "Failed",
        [
            "training failed: 0 worker pod(s) failed",
            "workers Job failed: DeadlineExceeded (Job was active longer than specified deadline)",
        ],
    ),
]


@pytest.mark.parametrize(("status", "phase", "problems"), [c[1:] for c in CLUSTER_CASES], ids=[c[0] for c in CLUSTER_CASES])
def test_cluster_readiness(status: dict[str, Any], phase: str, problems: list[str]) -> None:
    result = cluster_readiness(ps_expected=1, workers_expected=2, chief_expected=False, status=status)
    assert result["problems"] == problems
    assert result["ready"] is (not problems)
    assert result["phase"] == phase


def test_in_graph_chief_must_be_ready_too() -> None:
    status = with_(chief={"ready": 0, "active": 1})
    result = cluster_readiness(ps_expected=1, workers_expected=2, chief_expected=True, status=status)
    assert result["problems"] == ["chief: not ready"] and not result["ready"]


@pytest.mark.parametrize(
    ("deployment", "spec", "address", "problems", "url"),
    [
        ({"availableReplicas": 1}, {"ports": [{"nodePort": 30001}]}, "10.0.0.10", [], "http://10.0.0.10:30001/"),
        # As the engine hands numbers back: JSON floats.
        ({"availableReplicas": 1.0}, {"ports": [{"nodePort": 30001.0}]}, "10.0.0.10", [], "http://10.0.0.10:30001/"),
        ({"availableReplicas": 0}, {"ports": [{"nodePort": 30001}]}, "10.0.0.10", ["not available"], "http://10.0.0.10:30001/"),
        ({"availableReplicas": 1}, {"ports": [{}]}, "10.0.0.10", ["no NodePort assigned"], None),
        (
            {"availableReplicas": 1},
            {"ports": [{"nodePort": 30001}]},
            None,
            ["User Node address unknown (set tfk8s:platform.userNode.address)"],
            None,
        ),
    ],
    ids=["healthy", "engine-floats", "unavailable", "no-node-port", "no-address"],
)
def test_app_readiness(deployment: Any, spec: Any, address: str | None, problems: list[str], url: str | None) -> None:
    result = app_readiness(deployment_status=deployment, service_spec=spec, address=address)
    assert (result["problems"], result["url"], result["ready"]) == (problems, url, not problems)


def _hook(broken_type: str, status: dict[str, Any]) -> Any:
    def hook(typ: str, name: str, state: dict[str, Any]) -> dict[str, Any] | None:
        if typ == broken_type and ("ps" in name or "jupyter" in name or "worker" in name or "log" in name):
            return status
        return healthy_status(typ, name, state)

    return hook


EXPERIMENT_CASES = [
    ("healthy", None, None, []),
    ("ps-down", "kubernetes:apps/v1:Deployment", {"availableReplicas": 0}, ["mnist: parameter servers: 0/1 available"]),
    (
        "worker-failed",
        "kubernetes:batch/v1:Job",
        {"ready": 1, "failed": 1},
        ["mnist: workers: 1/2 ready or done", "mnist: workers: 1 pod(s) failed (retried per index)"],
    ),
]


@pytest.mark.parametrize(("typ", "status", "not_ready"), [c[1:] for c in EXPERIMENT_CASES], ids=[c[0] for c in EXPERIMENT_CASES])
def test_experiment_output_reports_every_problem_and_links_the_users_apps(
    dev_config: dict[str, Any], typ: str | None, status: Any, not_ready: list[str]
) -> None:
    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(dev_config, _hook(typ, status) if typ else healthy_status)

        def check(report: dict[str, Any]) -> None:
            assert report["notReady"] == not_ready
            assert report["ready"] is (not not_ready)
            # The user's Jupyter and TensorBoard, as the tenant stack published them.
            assert (report["jupyter"], report["tensorboard"]) == ("http://10.0.0.10:30001/", "http://10.0.0.10:30002/")

        return d.components["readiness"].apply(check)

    run()


@pulumi.runtime.test
def test_an_unbound_scratch_volume_makes_its_experiment_not_ready(dev_config: dict[str, Any]) -> None:
    dev_config["clusters"][0]["scratch"] = {"size": "1Gi"}

    def hook(typ: str, name: str, state: dict[str, Any]) -> dict[str, Any] | None:
        return {"phase": "Pending"} if name.endswith("-scratch") else healthy_status(typ, name, state)

    d = run_program(dev_config, hook, platform=facts_with_scratch())

    def check(report: dict[str, Any]) -> None:
        assert report["notReady"] == ["mnist: scratch volume is Pending, not Bound"] and report["ready"] is False

    return d.components["readiness"].apply(check)


TENANT_CASES = [
    ("healthy", None, None, []),
    ("apps-down", "kubernetes:apps/v1:Deployment", {"availableReplicas": 0}, ["jupyter: not available"]),  # Jupyter only
    (
        "claims-pending",
        "kubernetes:core/v1:PersistentVolumeClaim",
        {"phase": "Pending"},
        ["volumes: log volume is Pending, not Bound"],
    ),
]


@pytest.mark.parametrize(("typ", "status", "not_ready"), [c[1:] for c in TENANT_CASES], ids=[c[0] for c in TENANT_CASES])
def test_tenant_output_reports_its_own_problems(
    tenant_config: dict[str, Any], typ: str | None, status: Any, not_ready: list[str]
) -> None:
    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(tenant_config, _hook(typ, status) if typ else healthy_status)

        def check(report: dict[str, Any]) -> None:
            assert report["notReady"] == not_ready
            assert report["ready"] is (not not_ready)
            # The platform's User Node address (its published facts) and the app's NodePort.
            assert report["jupyter"]["url"].startswith("http://10.0.0.10:3")
            assert report["tensorboard"]["url"].startswith("http://10.0.0.10:3")

        return d.components["readiness"].apply(check)

    run()


PLATFORM_CASES = [
    ("healthy", None, []),
    (
        "no-node-address",
        {"addresses": []},
        ["userNode: no address for node 'tfk8s-user-node' (set tfk8s:platform.userNode.address)"],
    ),
]


@pytest.mark.parametrize(("node_status", "not_ready"), [c[1:] for c in PLATFORM_CASES], ids=[c[0] for c in PLATFORM_CASES])
def test_platform_output_reports_its_own_problems(
    platform_config: dict[str, Any], node_status: Any, not_ready: list[str]
) -> None:
    def hook(typ: str, name: str, state: dict[str, Any]) -> dict[str, Any] | None:
        if typ == "kubernetes:core/v1:NodePatch" and node_status is not None:
            return node_status
        return healthy_status(typ, name, state)

    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(platform_config, hook)

        def check(report: dict[str, Any]) -> None:
            assert report["notReady"] == not_ready
            assert report["ready"] is (not not_ready)
            assert report["storage"]["className"] == "tfk8s-local"
            address = None if not_ready else "10.0.0.10"  # the User Node's InternalIP
            assert report["userNode"] == {
                "name": "tfk8s-user-node",
                "address": address,
                "problems": [p.removeprefix("userNode: ") for p in not_ready],
            }
            assert "users" not in report  # each tenant reports its own apps

        return d.components["readiness"].apply(check)

    run()
