"""`tfk8s doctor` (tfk8s.doctor) without a cluster: the rights it asks for against what the stacks
declare, the stack file it checks against, how a probe pod's status becomes a verdict, that the
sandbox goes whatever happens, the probes' own client and server over real sockets, and the
command's exit codes and JSON. On real clusters that pass and fail: tests/e2e/test_doctor_on_clusters.py."""

from __future__ import annotations

import io
import json
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from mocked_program import ROOT
from tfk8s.cli import main as cli
from tfk8s.doctor import network_probe, node_reads, reads, rights
from tfk8s.doctor.checkup import Options, checkup
from tfk8s.doctor.findings import Verdict
from tfk8s.doctor.sandbox import Sandbox
from tfk8s.doctor.target import Placement, TargetError, load
from tfk8s.kube import client as kube_client
from tfk8s.kube.api_error import KubeApiError
from tfk8s.kube.api_paths import VALIDATING_ADMISSION_POLICY

GOLDEN = ROOT / "tests" / "unit" / "golden"


def declared_kinds() -> set[tuple[str, str]]:
    """(API group, kind) of every Kubernetes object the golden platform and tenant stacks declare."""
    kinds = set()
    for path in [*GOLDEN.glob("platform-*.jsonl"), *GOLDEN.glob("tenant-*.jsonl"), *GOLDEN.glob("imagenet-*.jsonl")]:
        for line in path.read_text().splitlines():
            kind = json.loads(line).get("type", "")
            if kind.startswith("kubernetes:") and not kind.endswith("Patch") or kind == "kubernetes:core/v1:NodePatch":
                _, version, name = kind.split(":")
                group = version.rpartition("/")[0] if "/" in version else ""
                kinds.add(("" if group == "core" else group, name.removesuffix("Patch")))
    return kinds


def test_the_rights_asked_cover_every_kind_the_platform_and_tenant_stacks_declare() -> None:
    declared = {k for k in declared_kinds() if not k[0].endswith(".layouts.tfk8s.io")}  # the platform's own kinds
    assert ("apps", "Deployment") in declared and ("", "Node") in declared  # the golden files were read
    asked = {**rights.ALWAYS, **rights.QUEUEING, **rights.MONITORING}
    assert declared - set(asked) == set()


def test_queueing_and_pod_monitors_add_their_kinds_only_when_the_platform_uses_them() -> None:
    plain = load(None, ROOT).settings
    queued = plain.model_copy(update={"queueing": plain.queueing.model_copy(update={"enabled": True})})
    resources = lambda perms: {p.resource for p in perms}  # noqa: E731
    assert "clusterqueues" not in resources(rights.needed(plain, pod_monitors=True))
    assert "clusterqueues" in resources(rights.needed(queued, pod_monitors=False))
    watched = plain.model_copy(update={"monitoring": plain.monitoring.model_copy(update={"namespace": "monitoring"})})
    assert "podmonitors" in resources(rights.needed(watched, pod_monitors=True))
    assert "podmonitors" not in resources(rights.needed(watched, pod_monitors=False))


def write_stack(tmp_path: Path, config: dict[str, Any]) -> Path:
    path = tmp_path / "Pulumi.p.yaml"
    path.write_text(yaml.safe_dump({"config": config}))
    return path


def test_a_stack_file_is_read_by_the_programs_schema_and_refused_with_its_key() -> None:
    target = load("platform-dev", ROOT)
    assert target.source.endswith("stacks/Pulumi.platform-dev.yaml") and target.settings.storage.class_name == "tfk8s-local"
    with pytest.raises(TargetError, match="tfk8s:kind is 'tenant', not 'platform'"):
        load("tenant-alice", ROOT)
    with pytest.raises(TargetError, match=r"no stack file .*Pulumi\.missing\.yaml"):
        load("missing", ROOT)


def test_a_bad_key_names_the_key(tmp_path: Path) -> None:
    path = write_stack(
        tmp_path, {"tfk8s:kind": "platform", "tfk8s:platform": {"userNode": {"name": "n"}, "storage": {"backend": "nfs"}}}
    )
    with pytest.raises(TargetError, match=r"platform\.storage\.backend"):
        load(str(path), tmp_path)


def test_without_a_stack_the_defaults_are_checked_and_no_user_node() -> None:
    target = load(None, ROOT)
    assert not target.user_node and target.settings.images.tensorflow.startswith("tensorflow/tensorflow")


class FakeApi:
    """Objects by path: what is POSTed is kept (its status as `status_of` says), DELETEs recorded."""

    def __init__(
        self, status_of: Callable[[str], dict[str, Any]] | None = None, refuse: dict[str, KubeApiError] | None = None
    ) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.deleted: list[str] = []
        self.posted: list[str] = []
        self.status_of = status_of or (lambda name: {})
        self.refuse = refuse or {}

    def get(self, path: str, *, metadata_only: bool = False) -> dict[str, Any] | None:
        found = self.objects.get(path)
        if found is not None and found.get("kind") == "Pod":
            status = self.status_of(found["metadata"]["name"])
            scheduled = status.get("phase") not in (None, "Pending") or "containerStatuses" in status
            return {**found, "status": status, "spec": {**found["spec"], **({"nodeName": "n1"} if scheduled else {})}}
        return found

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        for prefix, error in self.refuse.items():
            if path.startswith(prefix):
                raise error
        self.posted.append(path)
        if "review" in path:
            return {"status": {"allowed": True, "userInfo": {"username": "admin"}}}
        if "?dryRun" in path:
            raise KubeApiError(
                'POST: HTTP 403 Forbidden: pods "privileged" is forbidden: violates PodSecurity "restricted:v1.34"', 403
            )
        name = body["metadata"]["name"]
        self.objects[f"{path}/{name}"] = body
        return body

    def delete(self, path: str) -> dict[str, Any] | None:
        self.deleted.append(path)
        return {}


def finished(code: int) -> dict[str, Any]:
    return {
        "phase": "Succeeded" if code == 0 else "Failed",
        "podIP": "10.0.0.9",
        "containerStatuses": [{"state": {"terminated": {"exitCode": code}}}],
    }


READY = {"phase": "Running", "podIP": "10.0.0.9", "conditions": [{"type": "Ready", "status": "True"}]}


def sandbox(api: FakeApi) -> Sandbox:
    clock = iter(range(10_000))
    return Sandbox(api, Placement(), (1, 34), clock=lambda: float(next(clock)), sleep=lambda s: None)


def network_verdicts(statuses: dict[str, dict[str, Any]], *, enforced: bool = True) -> dict[str, Any]:
    settings = load("platform-dev", ROOT).settings
    settings = settings.model_copy(update={"network": settings.network.model_copy(update={"policy_enforced": enforced})})
    api = FakeApi(lambda name: statuses[name])
    with sandbox(api) as box:
        found = network_probe.network(box, settings, "img", timeout=20)
    return {f.check: f for f in found}


def test_a_deny_policy_that_lets_the_client_through_fails_with_the_cni_fix() -> None:
    found = network_verdicts({"server": READY, "reach": finished(0), "denied": finished(1), "allowed": finished(0)})
    assert found["dns"].verdict is Verdict.PASSED and found["pod-network"].verdict is Verdict.PASSED
    deny = found["network-policy-deny"]
    assert deny.verdict is Verdict.FAILED and deny.required and "Calico" in (deny.fix or "")
    assert found["network-policy-allow"].verdict is Verdict.PASSED


def test_a_stack_that_says_policies_are_not_enforced_is_not_refused_for_it() -> None:
    found = network_verdicts(
        {"server": READY, "reach": finished(0), "denied": finished(1), "allowed": finished(0)}, enforced=False
    )
    assert found["network-policy-deny"].verdict is Verdict.FAILED and not found["network-policy-deny"].required


def test_the_client_exit_bits_say_dns_or_the_service_or_the_pod_network() -> None:
    found = network_verdicts({"server": READY, "reach": finished(0b001), "denied": finished(0), "allowed": finished(0)})
    assert found["dns"].verdict is Verdict.FAILED and "could not resolve" in found["dns"].detail
    found = network_verdicts({"server": READY, "reach": finished(0b010), "denied": finished(0), "allowed": finished(0)})
    assert "kube-proxy" in (found["dns"].fix or "")
    found = network_verdicts({"server": READY, "reach": finished(0b100), "denied": finished(0), "allowed": finished(0)})
    assert found["pod-network"].verdict is Verdict.FAILED
    assert found["network-policy-deny"].verdict is Verdict.NOT_PROVEN  # no baseline: a block would prove nothing


def test_a_server_whose_image_cannot_be_pulled_leaves_the_network_not_proven_and_says_why() -> None:
    stuck = {
        "phase": "Pending",
        "containerStatuses": [{"state": {"waiting": {"reason": "ErrImagePull", "message": "not found"}}}],
    }
    found = network_verdicts({"server": stuck})
    assert {f.verdict for f in found.values()} == {Verdict.NOT_PROVEN}
    assert "ErrImagePull: not found" in found["network-policy-deny"].detail


def test_a_pod_that_runs_and_never_finishes_is_not_proven_after_the_timeout() -> None:
    running = {"phase": "Running", "podIP": "10.0.0.9", "conditions": [{"type": "Ready", "status": "True"}]}
    found = network_verdicts({"server": READY, "reach": running})
    assert found["dns"].verdict is Verdict.NOT_PROVEN and "not finished after 20 s" in found["dns"].detail


def test_an_unschedulable_pod_waits_and_its_reason_is_given() -> None:
    pending = {
        "phase": "Pending",
        "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes are available"}
        ],
    }
    api = FakeApi(lambda name: pending)
    with sandbox(api) as box:
        outcome = box.run_pod(box.pod_body("p", "img", ["true"], load(None, ROOT).settings.pod_security.tensorflow), 5)
    assert not outcome.finished and "0/3 nodes are available" in outcome.why


def test_the_sandbox_is_deleted_whatever_happens_cluster_scoped_objects_too() -> None:
    api = FakeApi()
    with pytest.raises(RuntimeError), sandbox(api) as box:
        box.create(rights_kind("StorageClass"), {"metadata": {"name": box.namespace}})
        raise RuntimeError("a probe broke")
    assert api.deleted == [f"/api/v1/namespaces/{box.namespace}", f"/apis/storage.k8s.io/v1/storageclasses/{box.namespace}"]


def rights_kind(kind: str) -> Any:
    from tfk8s.kube import api_paths

    return next(v for v in vars(api_paths).values() if isinstance(v, api_paths.ApiKind) and v.kind == kind)


def test_probe_pods_pass_the_restricted_level_and_follow_the_placement() -> None:
    box = Sandbox(FakeApi(), Placement({"pool": "train"}, ("gpu",)), (1, 34))
    body = box.pod_body("p", "img", ["true"], load(None, ROOT).settings.pod_security.tensorflow, node="n2")
    spec = body["spec"]
    assert spec["securityContext"]["runAsNonRoot"] and spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert spec["containers"][0]["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert spec["nodeSelector"] == {"pool": "train", "kubernetes.io/hostname": "n2"}
    assert spec["tolerations"] == [{"key": "gpu", "operator": "Exists"}]


@pytest.fixture
def greeter() -> Iterator[int]:
    """The probes' server script, run here: the port it answers on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = network_probe.SERVER.replace(str(network_probe.PORT), str(port)).replace('"0.0.0.0"', '"127.0.0.1"')
    server = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        yield port
    finally:
        server.kill()
        server.wait()


def client(*args: str) -> int:
    return subprocess.run([sys.executable, "-c", network_probe.CLIENT, *args], timeout=60).returncode


def test_the_client_sees_the_server_open_and_a_closed_port_blocked(greeter: int) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # bound, never listening: refused
    shut = closed.getsockname()[1]
    try:
        assert client("open", "5", "dns:localhost", f"tcp:127.0.0.1:{greeter}") == 0
        assert client("open", "2", f"tcp:127.0.0.1:{greeter}", f"tcp:127.0.0.1:{shut}") == 0b10
        assert client("blocked", "5", f"tcp:127.0.0.1:{shut}") == 0
        assert client("blocked", "3", f"tcp:127.0.0.1:{greeter}") == 0b1
        assert client("open", "2", "dns:no-such-name.invalid") == 0b1
    finally:
        closed.close()


def kwok_node(name: str, *, taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {"taints": taints or [], "podCIDRs": ["10.244.1.0/24"]},
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "allocatable": {"cpu": "4", "memory": "8Gi"},
            "addresses": [{"type": "InternalIP", "address": "192.0.2.7"}],
        },
    }


def test_reads_of_nodes_the_user_node_capacity_and_pod_networks() -> None:
    settings = load("platform-dev", ROOT).settings
    tainted = kwok_node("gpu-1", taints=[{"key": "gpu", "effect": "NoSchedule"}])
    found = {f.check: f for f in node_reads.nodes([kwok_node("tfk8s-user-node"), tainted], settings, Placement(), user_node=True)}
    assert found["nodes"].verdict is Verdict.PASSED and "gpu-1" not in found["nodes"].detail
    assert found["user-node"].verdict is Verdict.PASSED and "192.0.2.7" in found["user-node"].detail
    assert found["capacity"].verdict is Verdict.ADVICE and "32 cpu" in found["capacity"].detail  # 32 CPUs asked of 4
    missing = {f.check: f for f in node_reads.nodes([tainted], settings, Placement(), user_node=True)}
    assert missing["nodes"].verdict is Verdict.FAILED and missing["user-node"].verdict is Verdict.FAILED
    # A cluster of one node whose User Node trains too: its control-plane taint keeps everything off.
    shared = settings.model_copy(update={"user_node": settings.user_node.model_copy(update={"shared_with_training": True})})
    kubeadm_taint = {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}
    control_plane = kwok_node("tfk8s-user-node", taints=[kubeadm_taint])
    control_plane["metadata"]["managedFields"] = [{"manager": "kubeadm", "fieldsV1": {"f:spec": {"f:taints": {}}}}]
    one = {f.check: f for f in node_reads.nodes([control_plane], shared, Placement(), user_node=True)}
    assert one["user-node"].verdict is Verdict.FAILED and "sharedWithTraining" in one["user-node"].detail
    untainted = {f.check: f for f in node_reads.nodes([kwok_node("tfk8s-user-node")], shared, Placement(), user_node=True)}
    assert untainted["user-node"].verdict is Verdict.PASSED
    covered = settings.model_copy(update={"network": settings.network.model_copy(update={"pod_cidrs": ("10.244.0.0/16",)})})
    assert node_reads.pod_networks([tainted], covered)[0].verdict is Verdict.PASSED
    elsewhere = settings.model_copy(update={"network": settings.network.model_copy(update={"pod_cidrs": ("10.88.0.0/16",)})})
    assert node_reads.pod_networks([tainted], elsewhere)[0].verdict is Verdict.FAILED


def test_version_older_than_the_guards_fails_and_a_pinned_version_must_be_the_servers() -> None:
    settings = load("platform-dev", ROOT).settings  # pins 1.34
    old = {f.check: f for f in reads.version((1, 25), settings)}
    assert old["version"].verdict is Verdict.FAILED and "1.30" in (old["version"].fix or "")
    assert old["kubernetes-version"].verdict is Verdict.FAILED and '"1.25"' in (old["kubernetes-version"].fix or "")
    assert [f.verdict for f in reads.version((1, 34), settings)] == [Verdict.PASSED]


def cluster_of(api: Any) -> Callable[[Any], kube_client.Cluster]:
    return lambda environ: kube_client.Cluster((1, 34), api)


def test_the_command_exits_2_with_one_line_when_it_cannot_start(tmp_path: Path) -> None:
    err = io.StringIO()
    world = cli.World(environ={"KUBECONFIG": str(tmp_path / "none")}, out=io.StringIO(), err=err)
    assert cli.main(["doctor"], world) == 2
    assert err.getvalue().count("\n") == 1 and "does not exist" in err.getvalue()
    err = io.StringIO()
    world = cli.World(environ={}, out=io.StringIO(), err=err, cluster=cluster_of(None))
    assert cli.main(["doctor"], world) == 2 and "credentials cannot be used" in err.getvalue()


class ReadOnlyApi(FakeApi):
    """A cluster of two Ready nodes whose API answers reads and reviews; creating a namespace is forbidden."""

    server = "https://192.0.2.1:6443"

    def get(self, path: str, *, metadata_only: bool = False) -> dict[str, Any] | None:
        if path == "/api/v1/nodes":
            return {"items": [kwok_node("tfk8s-user-node"), kwok_node("n2")]}
        if path == VALIDATING_ADMISSION_POLICY.root:
            return {"resources": [{"name": "validatingadmissionpolicies"}, {"name": "validatingadmissionpolicybindings"}]}
        if path.startswith("/api/v1/namespaces/kube-system/pods"):
            return {"items": [{"status": {"phase": "Running"}}]}
        return super().get(path)


def test_the_json_report_lists_every_check_and_a_forbidden_sandbox_leaves_the_probes_not_proven() -> None:
    api = ReadOnlyApi(refuse={"/api/v1/namespaces": KubeApiError("POST /api/v1/namespaces: HTTP 403 Forbidden", 403)})
    out = io.StringIO()
    world = cli.World(environ={}, out=out, err=io.StringIO(), cluster=cluster_of(api))
    assert cli.main(["doctor", "--stack", "platform-dev", "--cwd", str(ROOT), "--json"], world) == 1
    report = json.loads(out.getvalue())
    verdicts = {c["check"]: c["verdict"] for c in report["checks"]}
    assert verdicts["version"] == "pass" and verdicts["rights"] == "pass" and verdicts["user-node"] == "pass"
    assert verdicts["network-policy-deny"] == "not proven" and not report["ready"]
    assert report["identity"] == "user 'admin'" and report["settings"].endswith("Pulumi.platform-dev.yaml")


def test_the_report_is_ready_only_when_every_required_check_passed() -> None:
    api = ReadOnlyApi()
    statuses = {
        "server": READY,
        "reach": finished(0),
        "denied": finished(0),
        "allowed": finished(0),
        "image-0": finished(0),
        "image-1": finished(0),
    }
    api.status_of = lambda name: statuses[name]
    target = load("platform-dev", ROOT)
    found = checkup(api, api.server, (1, 34), target, Options())
    by_check = {f.check: f for f in found.findings}
    assert by_check["rwx-two-nodes"].verdict is Verdict.NOT_PROVEN  # local storage: one node's directories
    assert not found.ready
    probed = [
        f
        for f in found.findings
        if f.check in ("pod-security", "dns", "pod-network") or f.check.startswith(("network-policy", "image:"))
    ]
    assert len(probed) == 7 and all(f.verdict is Verdict.PASSED for f in probed)
    assert any(p.endswith("/namespaces") for p in api.posted) and api.deleted[0].startswith("/api/v1/namespaces/tfk8s-doctor-")


def test_a_poll_that_times_out_is_asked_again_until_the_probes_own_deadline() -> None:
    """On a loaded API server a GET of the probe's pod may time out (CI saw it cold): that poll knows
    nothing yet, the next may answer. Only the probe's deadline decides."""

    class SlowApi(FakeApi):
        def __init__(self) -> None:
            super().__init__(lambda name: finished(0))
            self.timeouts = 2

        def get(self, path: str, *, metadata_only: bool = False) -> dict[str, Any] | None:
            if "/pods/" in path and self.timeouts:
                self.timeouts -= 1
                raise TimeoutError("The read operation timed out")
            return super().get(path, metadata_only=metadata_only)

    api = SlowApi()
    with sandbox(api) as box:
        identity = load("platform-dev", ROOT).settings.pod_security.tensorflow
        outcome = box.run_pod(box.pod_body("probe", "img", ["true"], identity), timeout=20)
    assert api.timeouts == 0 and outcome.exit_code == 0
