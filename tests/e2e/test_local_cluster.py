"""A real `pulumi up` of the dev experiment of the tenant-alice tenant on the platform-dev platform,
against a real Kubernetes API (kwok-simulated nodes).

The tests run in file order and share the stacks: preview and up, a no-op second up, a change of
one value, a failing worker, then destroy of the experiment, each checked against the API server.
The platform and the tenants stay for the modules after this one (test_stack_model.py destroys them).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pulumi.automation as auto
import pytest
import yaml
from drivers import Kube

USER_NODE = "tfk8s-user-node"
NAMESPACE = "tfk8s-alice"
FAILING_IMAGE = "tfk8s.invalid/failing-trainer:e2e"  # hack/kwok/failing-worker-stage.yaml fails its workers


@pytest.fixture(scope="module")
def stack(project: Path, tenants: dict[str, str]) -> auto.Stack:
    """The dev experiment of the project copy, driven through the Automation API's local-program
    mode: the real CLI and tfk8s's language host run the program (the API adds the event stream)."""
    workspace = auto.LocalWorkspace(work_dir=str(project), pulumi_home=os.environ["PULUMI_HOME"])
    return auto.Stack.create_or_select("dev", workspace)


@pytest.fixture(scope="module")
def platform_stack(project: Path, platform: str) -> auto.Stack:
    workspace = auto.LocalWorkspace(work_dir=str(project), pulumi_home=os.environ["PULUMI_HOME"])
    return auto.Stack.select(platform, workspace)


@pytest.fixture(scope="module")
def tenant_stack(project: Path, tenants: dict[str, str]) -> auto.Stack:
    workspace = auto.LocalWorkspace(work_dir=str(project), pulumi_home=os.environ["PULUMI_HOME"])
    return auto.Stack.select(tenants["alice"], workspace)


def outputs(stack: auto.Stack) -> dict[str, Any]:
    return {k: v.value for k, v in stack.outputs().items() if not v.secret}


def stack_file(stack: auto.Stack) -> Path:
    return Path(stack.workspace.work_dir) / "stacks" / f"Pulumi.{stack.name}.yaml"


def clusters_config(stack: auto.Stack) -> list[dict[str, Any]]:
    return yaml.safe_load(stack_file(stack).read_text())["config"]["tfk8s:clusters"]


def set_clusters(stack: auto.Stack, clusters: list[dict[str, Any]]) -> None:
    """Edit the stack file, as a user or a GitOps pipeline does before the next `up`."""
    document = yaml.safe_load(stack_file(stack).read_text())
    document["config"]["tfk8s:clusters"] = clusters
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


def test_preview_then_up_brings_the_experiment_to_ready(stack: auto.Stack, tenant_stack: auto.Stack, kube: Kube) -> None:
    preview = stack.preview(color="never")
    assert preview.change_summary.get("create", 0) >= 10, preview.change_summary
    assert not kube.get("jobs", NAMESPACE)  # preview created nothing

    stack.up(color="never", on_output=print)
    out = outputs(stack)
    assert out["ready"] is True, json.dumps(out["readiness"], indent=2)

    # What Pulumi said, checked against the API server.
    deployments = {d["metadata"]["name"]: d for d in kube.get("deployments", NAMESPACE)}
    assert all(d["status"].get("availableReplicas") == 1 for d in deployments.values())
    assert len([n for n in deployments if n.startswith("dev-mnist-ps-0-")]) == 1
    (job,) = kube.get("jobs", NAMESPACE)
    assert (job["metadata"]["name"], job["status"].get("ready")) == ("dev-mnist-worker", 2)
    # The user's volumes are the tenant's; the experiment mounts them, its logs under dev/mnist.
    claims = {c["metadata"]["name"]: c["status"]["phase"] for c in kube.get("pvc", NAMESPACE)}
    assert claims == {"tfk8s-data": "Bound", "tfk8s-log": "Bound"}
    mounts = {m["mountPath"]: m for m in job["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]}
    assert mounts["/log"]["subPath"] == "dev/mnist"

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
    url = out["readiness"]["jupyter"]
    assert url == outputs(tenant_stack)["readiness"]["jupyter"]["url"]
    node_ports = {s["spec"]["ports"][0]["nodePort"] for s in kube.get("services", NAMESPACE) if s["spec"]["type"] == "NodePort"}
    assert url.startswith("http://") and int(url.rsplit(":", 1)[1].rstrip("/")) in node_ports


def test_second_up_of_every_stack_changes_nothing(
    stack: auto.Stack, tenant_stack: auto.Stack, platform_stack: auto.Stack, kube: Kube
) -> None:
    where = tenant_stack.outputs()["jupyterTokenSecret"].value
    token = kube.get("secret", where["namespace"], where["name"])["data"][where["key"]]
    for each in (platform_stack, tenant_stack, stack):
        result = each.up(color="never")
        assert changes(result) == {}, (each.name, result.summary.resource_changes)
    after = kube.get("secret", where["namespace"], where["name"])["data"][where["key"]]
    assert len(token) >= 32 and after == token  # generated once, stable across ups


def test_the_api_servers_pod_security_admission_accepts_every_pod_and_refuses_a_privileged_one(
    stack: auto.Stack, kube: Kube
) -> None:
    """The user's namespace enforces `restricted`; every pod of the platform and the experiment got
    through that admission (they exist), and re-evaluated against the newest profile they still pass."""
    labels = kube.get("namespace", name=NAMESPACE)["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    assert labels["pod-security.kubernetes.io/enforce-version"] == "v1.34"
    pods = {p["metadata"]["labels"].get("app.kubernetes.io/name", "") + "/" + p["metadata"]["labels"].get("tfk8s.io/role", "")
            for p in kube.get("pods", NAMESPACE)}  # fmt: skip
    assert {"jupyter/", "tensorboard/", "tensorflow/ps", "tensorflow/worker"} <= pods, pods
    # The API server evaluates the namespace's existing pods against a changed label and warns of
    # each one that violates it (a dry run: nothing changes).
    check = subprocess.run(
        [kube.binary, "--kubeconfig", str(kube.kubeconfig), "label", "--dry-run=server", "--overwrite", "namespace",
         NAMESPACE, "pod-security.kubernetes.io/enforce=restricted", "pod-security.kubernetes.io/enforce-version=latest"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "violate" not in check.stderr.lower(), check.stderr
    privileged = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "privileged", "namespace": NAMESPACE},
        "spec": {"containers": [{"name": "c", "image": "busybox", "securityContext": {"privileged": True}}]},
    }
    refused = subprocess.run(
        [kube.binary, "--kubeconfig", str(kube.kubeconfig), "create", "-f", "-"],
        input=json.dumps(privileged), capture_output=True, text=True,
    )  # fmt: skip
    assert refused.returncode != 0 and 'violates PodSecurity "restricted' in refused.stderr, refused.stderr


def test_someone_elses_taint_on_the_user_node_stops_up_and_is_left_alone(platform_stack: auto.Stack, kube: Kube) -> None:
    """Node taints are one atomic list: tfk8s must refuse, clearly, rather than conflict or clobber."""
    stack = platform_stack
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


def test_a_tenant_the_user_node_has_no_cpu_for_stops_before_anything_changes(tenant_stack: auto.Stack, kube: Kube) -> None:
    """The User Node's CPU caps the tenants, as its pods do: with 1 CPU left allocatable, alice's own
    Jupyter and TensorBoard (platform-dev's containerDefaults) could not be scheduled again, and her
    preview says so with the numbers instead of an `up` waiting out its timeout on Pending pods."""
    before = kube.get("node", name=USER_NODE)["status"]
    shrunk = {key: {**before[key], "cpu": "1"} for key in ("capacity", "allocatable")}
    kube.run("patch", "node", USER_NODE, "--subresource=status", "--type=merge", "-p", json.dumps({"status": shrunk}))
    try:
        with pytest.raises(auto.CommandError) as caught:
            tenant_stack.preview(color="never")
        message = str(caught.value)
        assert "tfk8s:tenant: the tenants' Jupyter and TensorBoard pods all run on the User Node" in message, message
        assert "where node 'tfk8s-user-node' allows 1 (status.allocatable.cpu)" in message, message
    finally:
        restored = {key: before[key] for key in ("capacity", "allocatable")}
        kube.run("patch", "node", USER_NODE, "--subresource=status", "--type=merge", "-p", json.dumps({"status": restored}))
    assert tenant_stack.preview(color="never").change_summary.get("create", 0) == 0


def test_a_ps_can_retire_itself_and_nothing_else(stack: auto.Stack, kube: Kube, tmp_path: Path) -> None:
    """The launcher's scale-to-zero call, with the PS pods' own service account, against the real API."""
    from tfk8s_train.kube_retire import retire_deployment

    deployments = {
        d["metadata"]["labels"]["app.kubernetes.io/name"] + "/" + d["metadata"]["labels"].get("tfk8s.io/role", ""): d
        for d in kube.get("deployments", NAMESPACE)
        if d["metadata"]["labels"].get("tfk8s.io/experiment") in (None, "dev")
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
    assert "mnist: parameter servers: 0/1 available" in outputs(stack)["readiness"]["notReady"]


def test_gpu_workers_are_scheduled_on_gpu_nodes_only(stack: auto.Stack, kube: Kube) -> None:
    clusters = clusters_config(stack)
    clusters[0]["workers"]["gpus"] = 1
    set_clusters(stack, clusters)
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
    clusters[0]["workers"].pop("gpus")
    set_clusters(stack, clusters)


def test_more_workers_change_only_what_depends_on_the_layout(stack: auto.Stack, kube: Kube) -> None:
    clusters = clusters_config(stack)
    clusters[0]["workers"]["count"] = 3
    set_clusters(stack, clusters)
    steps = Steps()
    stack.up(color="never", on_event=steps)
    changed = steps.changed()
    # The worker Job is replaced (its pod template and completions change); PS tasks start a new
    # run (new Deployment name), so the retire Role follows, and the PS and worker Services are
    # updated in place to select only the new run's pods (same names, same DNS); the layout
    # follows the new spec.
    assert changed.get("Job::dev-mnist-worker") in {"replace", "create-replacement", "delete-replaced"}
    assert changed.get("Service::dev-mnist-worker") == "update" and changed.get("Service::dev-mnist-ps-0") == "update", changed
    assert changed.get("Layout::dev-mnist-layout") == "update", changed
    assert not [k for k in changed if "trainer" in k], changed
    run = kube.get("service", NAMESPACE, "dev-mnist-ps-0")["spec"]["selector"]["tfk8s.io/run"]
    assert [d["metadata"]["name"] for d in kube.get("deployments", NAMESPACE) if "-ps-0-" in d["metadata"]["name"]] == [
        f"dev-mnist-ps-0-{run[:8]}"
    ]
    assert outputs(stack)["ready"] is True
    (job,) = kube.get("jobs", NAMESPACE)
    assert (job["spec"]["completions"], job["status"].get("ready")) == (3, 3)
    (crd,) = [c["metadata"]["name"] for c in kube.get("crd") if c["spec"]["names"]["kind"] == "Layout"]
    layout = kube.get(crd, NAMESPACE, "dev-mnist-layout")["spec"]
    assert len(layout["spec"]["worker"]) == 3 and layout["runId"] == run


def test_failing_worker_is_reported_and_up_does_not_hang(stack: auto.Stack) -> None:
    clusters = clusters_config(stack)
    clusters[0]["image"] = FAILING_IMAGE
    set_clusters(stack, clusters)
    started = time.monotonic()
    stack.up(color="never")
    elapsed = time.monotonic() - started
    readiness = outputs(stack)["readiness"]
    assert readiness["ready"] is False
    assert any("mnist: workers:" in p and "failed" in p for p in readiness["notReady"]), readiness["notReady"]
    assert elapsed < 120, f"up took {elapsed:.0f}s with a failing worker"


def layout_kinds(kube: Kube) -> list[str]:
    return [c["metadata"]["name"] for c in kube.get("crd") if c["spec"]["names"]["kind"] == "Layout"]


def test_destroying_the_experiment_leaves_the_tenant_the_platform_and_the_users_data(
    stack: auto.Stack, tenant_stack: auto.Stack, platform_stack: auto.Stack, kube: Kube
) -> None:
    stack.destroy(color="never")
    experiment_objects = {
        kind: [
            o["metadata"]["name"] for o in kube.get(kind, NAMESPACE) if o["metadata"].get("labels", {}).get("tfk8s.io/experiment")
        ]
        for kind in (
            "deployments",
            "jobs",
            "services",
            "configmaps",
            "serviceaccounts",
            "roles",
            "rolebindings",
            *layout_kinds(kube),
        )
    }
    assert all(not names for names in experiment_objects.values()), experiment_objects
    # The tenant's and the platform's objects are all there and unchanged: a no-change up proves it.
    assert sorted(c["metadata"]["name"] for c in kube.get("pvc", NAMESPACE)) == ["tfk8s-data", "tfk8s-log"]
    for each in (tenant_stack, platform_stack):
        assert changes(each.up(color="never")) == {}
        assert outputs(each)["ready"] is True
    stack.workspace.remove_stack("dev")
