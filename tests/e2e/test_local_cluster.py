"""A real `pulumi up` of the dev stack against a real Kubernetes API (kwok-simulated nodes).

The tests run in file order and share one stack: preview and up, a no-op second up, a change of
one value, a failing worker, then destroy, each checked against the API server itself.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pulumi.automation as auto
import pytest
import yaml
from conftest import Kube

USER_NODE = "tfk8s-user-node"
NAMESPACE = "tfk8s-alice"
FAILING_IMAGE = "tfk8s.invalid/failing-trainer:e2e"  # hack/kwok/failing-worker-stage.yaml fails its workers


@pytest.fixture(scope="module")
def stack(project: Path) -> auto.Stack:
    """The dev stack of the project copy, driven through the Automation API's local-program mode:
    the real CLI and tfk8s's language host run the program (the API only adds the event stream)."""
    workspace = auto.LocalWorkspace(work_dir=str(project), pulumi_home=os.environ["PULUMI_HOME"])
    return auto.Stack.create_or_select("dev", workspace)


def outputs(stack: auto.Stack) -> dict[str, Any]:
    return {k: v.value for k, v in stack.outputs().items() if not v.secret}


def stack_file(stack: auto.Stack) -> Path:
    return Path(stack.workspace.work_dir) / "stacks" / f"Pulumi.{stack.name}.yaml"


def users_config(stack: auto.Stack) -> list[dict[str, Any]]:
    return yaml.safe_load(stack_file(stack).read_text())["config"]["tfk8s:users"]


def set_users(stack: auto.Stack, users: list[dict[str, Any]]) -> None:
    """Edit the stack file, as a user or a GitOps pipeline does before the next `up`."""
    document = yaml.safe_load(stack_file(stack).read_text())
    document["config"]["tfk8s:users"] = users
    stack_file(stack).write_text(yaml.safe_dump(document))


class Steps:
    """Resource operations of one preview/up, from the engine's event stream."""

    def __init__(self) -> None:
        self.ops: dict[str, str] = {}

    def __call__(self, event: auto.EngineEvent) -> None:
        pre = event.resource_pre_event
        if pre is not None and pre.metadata.type.startswith("kubernetes:"):
            self.ops[f"{pre.metadata.type.rsplit(':', 1)[1]}::{pre.metadata.urn.rsplit('::', 1)[1]}"] = pre.metadata.op.value

    def changed(self) -> dict[str, str]:
        return {k: v for k, v in self.ops.items() if v not in ("same", "read")}


def changes(result: auto.UpResult) -> dict[str, int]:
    """What an `up` changed. Reads (the User Node is read on every run) are not changes, as for
    `pulumi up --expect-no-changes`."""
    return {op: n for op, n in (result.summary.resource_changes or {}).items() if op not in ("same", "read")}


def test_preview_then_up_brings_the_stack_to_ready(stack: auto.Stack, kube: Kube) -> None:
    preview = stack.preview(color="never")
    assert preview.change_summary.get("create", 0) >= 20, preview.change_summary
    assert NAMESPACE not in {n["metadata"]["name"] for n in kube.get("namespaces")}  # preview created nothing

    stack.up(color="never", on_output=print)
    out = outputs(stack)
    assert out["ready"] is True, json.dumps(out["readiness"], indent=2)

    # What Pulumi said, checked against the API server.
    deployments = {d["metadata"]["name"]: d for d in kube.get("deployments", NAMESPACE)}
    assert all(d["status"].get("availableReplicas") == 1 for d in deployments.values())
    assert len([n for n in deployments if n.startswith("mnist-ps-0-")]) == 1
    (job,) = kube.get("jobs", NAMESPACE)
    assert (job["metadata"]["name"], job["status"].get("ready")) == ("mnist-worker", 2)
    claims = {c["metadata"]["name"]: c["status"]["phase"] for c in kube.get("pvc", NAMESPACE)}
    assert claims == {"mnist-data": "Bound", "mnist-log": "Bound"}

    pods = kube.get("pods", NAMESPACE)
    workers = sorted(
        p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"]
        for p in pods
        if p["metadata"]["labels"].get("tfk8s.io/role") == "worker"
    )
    assert workers == ["0", "1"]
    on_user_node = {
        p["metadata"]["labels"]["app.kubernetes.io/name"] for p in kube.get("pods") if p["spec"].get("nodeName") == USER_NODE
    }
    assert on_user_node == {"jupyter", "tensorboard"}
    for service in kube.get("services", NAMESPACE):
        if service["spec"]["type"] == "NodePort":
            assert service["spec"]["externalTrafficPolicy"] == "Local"
    node = kube.get("node", name=USER_NODE)
    assert {"key": "tfk8s.io/user-node", "value": "true", "effect": "NoSchedule"} in node["spec"]["taints"]
    url = out["readiness"]["users"]["alice"]["jupyter"]["url"]
    node_ports = {s["spec"]["ports"][0]["nodePort"] for s in kube.get("services", NAMESPACE) if s["spec"]["type"] == "NodePort"}
    assert url.startswith("http://") and int(url.rsplit(":", 1)[1].rstrip("/")) in node_ports


def test_second_up_changes_nothing(stack: auto.Stack) -> None:
    token = stack.outputs()["jupyterTokens"]
    result = stack.up(color="never")
    assert changes(result) == {}, result.summary.resource_changes
    after = stack.outputs()["jupyterTokens"]
    assert after.secret and after.value == token.value  # generated once, stable across ups


def test_someone_elses_taint_on_the_user_node_stops_up_and_is_left_alone(stack: auto.Stack, kube: Kube) -> None:
    """Node taints are one atomic list: tfk8s must refuse, clearly, rather than conflict or clobber."""
    ours = {"key": "tfk8s.io/user-node", "value": "true", "effect": "NoSchedule"}
    theirs = {"key": "dedicated", "value": "infra", "effect": "NoSchedule"}
    kube.run("taint", "node", USER_NODE, "dedicated=infra:NoSchedule")
    try:
        with pytest.raises(auto.CommandError, match=r"tfk8s:platform\.userNode\.name: node 'tfk8s-user-node' already has taints"):
            stack.up(color="never")
        taints = kube.get("node", name=USER_NODE)["spec"]["taints"]
        assert len(taints) == 2 and ours in taints and theirs in taints  # nothing patched, nothing lost
    finally:
        kube.run("taint", "node", USER_NODE, "dedicated-")
    result = stack.up(color="never")  # their taint gone: exactly ours is no conflict, whoever co-owns it
    assert changes(result) == {}, result.summary.resource_changes

    # kubectl now co-owns our taint, so a destroy would leave it behind (SSA releases only our
    # share). Drop it as an operator might; `up --refresh` sees the drift and puts ours back alone.
    kube.run("taint", "node", USER_NODE, "tfk8s.io/user-node-")
    stack.up(color="never", refresh=True)
    assert kube.get("node", name=USER_NODE)["spec"]["taints"] == [ours]


def test_a_ps_can_retire_itself_and_nothing_else(stack: auto.Stack, kube: Kube, tmp_path: Path) -> None:
    """The launcher's scale-to-zero call, with the PS pods' own service account, against the real API."""
    from tfk8s_train.kube_retire import retire_deployment

    deployments = {
        d["metadata"]["labels"]["app.kubernetes.io/name"] + "/" + d["metadata"]["labels"].get("tfk8s.io/role", ""): d
        for d in kube.get("deployments", NAMESPACE)
    }
    ps, jupyter = deployments["tensorflow/ps"], deployments["jupyter/"]
    account = ps["spec"]["template"]["spec"]["serviceAccountName"]
    (tmp_path / "token").write_text(kube.run("create", "token", account, "-n", NAMESPACE))
    config = json.loads(kube.run("config", "view", "--raw", "-o", "json"))["clusters"][0]["cluster"]
    (tmp_path / "ca.crt").write_bytes(Path(config["certificate-authority"]).read_bytes())
    environ = {"TFK8S_KUBE_API": config["server"]}

    assert retire_deployment(jupyter["metadata"]["name"], NAMESPACE, environ, tmp_path) is False  # RBAC: 403
    assert retire_deployment(ps["metadata"]["name"], NAMESPACE, environ, tmp_path) is True
    scale = {d["metadata"]["name"]: d["spec"]["replicas"] for d in kube.get("deployments", NAMESPACE)}
    assert scale[ps["metadata"]["name"]] == 0 and scale[jupyter["metadata"]["name"]] == 1

    # Pulumi does not fight the retirement: the PS Deployment declares no replicas.
    result = stack.up(color="never")
    assert changes(result) == {}, result.summary.resource_changes
    assert kube.get("deployment", NAMESPACE, ps["metadata"]["name"])["spec"]["replicas"] == 0
    # Readiness reads live status once refreshed: a retired PS while workers run is a problem.
    stack.up(color="never", refresh=True)
    assert "alice/mnist: parameter servers: 0/1 available" in outputs(stack)["readiness"]["notReady"]


def test_gpu_workers_are_scheduled_on_gpu_nodes_only(stack: auto.Stack, kube: Kube) -> None:
    users = users_config(stack)
    users[0]["clusters"][0]["workers"]["gpus"] = 1
    set_users(stack, users)
    stack.up(color="never")
    assert outputs(stack)["ready"] is True
    pods = [
        p
        for p in kube.get("pods", NAMESPACE)
        if p["metadata"]["labels"].get("tfk8s.io/role") == "worker" and not p["metadata"].get("deletionTimestamp")
    ]
    assert len(pods) == 2
    # No nodeSelector: the scheduler finds the nodes advertising nvidia.com/gpu by itself.
    assert {p["spec"]["nodeName"] for p in pods} <= {"tfk8s-gpu-0", "tfk8s-gpu-1"}
    assert all(p["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1" for p in pods)
    ps = [p for p in kube.get("pods", NAMESPACE) if p["metadata"]["labels"].get("tfk8s.io/role") == "ps"]
    assert all("nvidia.com/gpu" not in p["spec"]["containers"][0]["resources"].get("limits", {}) for p in ps)
    users[0]["clusters"][0]["workers"].pop("gpus")
    set_users(stack, users)


def test_more_workers_change_only_what_depends_on_the_layout(stack: auto.Stack, kube: Kube) -> None:
    users = users_config(stack)
    users[0]["clusters"][0]["workers"]["count"] = 3
    set_users(stack, users)
    steps = Steps()
    stack.up(color="never", on_event=steps)
    changed = steps.changed()
    # The worker Job is replaced (its pod template and completions change); PS tasks start a new
    # run (new Deployment name), so the retire Role follows, and the PS Service is updated in place
    # to select only the new run's pods (same name, same DNS). Volumes, Jupyter: untouched.
    assert changed.get("Job::alice-mnist-worker") in {"replace", "create-replacement", "delete-replaced"}
    assert not [k for k in changed if k.startswith(("PersistentVolume", "Namespace", "StorageClass", "Secret"))], changed
    assert not [k for k in changed if "jupyter" in k or "tensorboard" in k], changed
    assert "Service::alice-mnist-worker" not in changed and changed.get("Service::alice-mnist-ps-0") == "update", changed
    run = kube.get("service", NAMESPACE, "mnist-ps-0")["spec"]["selector"]["tfk8s.io/run"]
    assert [d["metadata"]["name"] for d in kube.get("deployments", NAMESPACE) if "-ps-0-" in d["metadata"]["name"]] == [
        f"mnist-ps-0-{run[:8]}"
    ]
    assert outputs(stack)["ready"] is True
    (job,) = kube.get("jobs", NAMESPACE)
    assert (job["spec"]["completions"], job["status"].get("ready")) == (3, 3)


def test_failing_worker_is_reported_and_up_does_not_hang(stack: auto.Stack) -> None:
    users = users_config(stack)
    users[0]["clusters"][0]["image"] = FAILING_IMAGE
    set_users(stack, users)
    started = time.monotonic()
    stack.up(color="never")
    elapsed = time.monotonic() - started
    readiness = outputs(stack)["readiness"]
    assert readiness["ready"] is False
    assert any("alice/mnist: workers:" in p and "failed" in p for p in readiness["notReady"]), readiness["notReady"]
    assert elapsed < 120, f"up took {elapsed:.0f}s with a failing worker"


def test_destroy_leaves_only_the_data_the_user_kept(stack: auto.Stack, kube: Kube) -> None:
    stack.destroy(color="never")
    leftovers = {
        kind: [o["metadata"]["name"] for o in kube.get(kind, NAMESPACE)]
        for kind in ("deployments", "jobs", "services", "secrets", "serviceaccounts", "roles", "rolebindings")
    }
    leftovers["serviceaccounts"] = [n for n in leftovers["serviceaccounts"] if n != "default"]
    assert all(not names for names in leftovers.values()), leftovers
    assert [c["metadata"]["name"] for c in kube.get("configmaps", NAMESPACE)] == ["kube-root-ca.crt"]
    # keepOnDestroy (the default): claims, their volumes and the namespace holding them stay.
    assert sorted(c["metadata"]["name"] for c in kube.get("pvc", NAMESPACE)) == ["mnist-data", "mnist-log"]
    kept_volumes = [v for v in kube.get("pv") if v["spec"].get("claimRef", {}).get("namespace") == NAMESPACE]
    assert len(kept_volumes) == 2
    assert "tfk8s.io/user-node" not in kube.get("node", name=USER_NODE)["metadata"].get("labels", {})
    assert not [t for t in kube.get("node", name=USER_NODE)["spec"].get("taints", []) if t["key"] == "tfk8s.io/user-node"]
    assert not kube.get("storageclasses") or all(s["metadata"]["name"] != "tfk8s-local" for s in kube.get("storageclasses"))


def test_destroy_without_keep_leaves_nothing(stack: auto.Stack, kube: Kube) -> None:
    kube.run("delete", "namespace", NAMESPACE, "--wait=true")
    kube.run("delete", "pv", "--all", "--wait=true")
    users = users_config(stack)
    users[0]["clusters"][0].pop("image", None)
    users[0]["clusters"][0]["volumes"]["keepOnDestroy"] = False
    set_users(stack, users)
    stack.up(color="never")
    assert outputs(stack)["ready"] is True
    stack.destroy(color="never")
    assert (
        NAMESPACE not in {n["metadata"]["name"] for n in kube.get("namespaces")}
        or kube.get("namespace", name=NAMESPACE)["status"]["phase"] == "Terminating"
    )
    assert [v["metadata"]["name"] for v in kube.get("pv")] == []
