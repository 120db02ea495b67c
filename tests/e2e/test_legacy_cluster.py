"""The seed's own storage, for real: a Kubernetes 1.25 control plane whose in-tree
`kubernetes.io/glusterfs` provisioner (inside kube-controller-manager, with Heketi's own Go
client) provisions the stack's claims through a real Heketi server (mock executor: the full REST
API and JWT auth, no GlusterFS bricks). Also: the retry fields a pre-1.29 API server keeps.

A cluster of its own (`<e2e cluster>-125`, hack/cluster.sh start --kube 1.25) and a project copy
of its own; the 1.34 cluster of the other e2e modules is used only to show the refusal there.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import yaml
from doctor_run import doctor
from drivers import CLUSTER as E2E_CLUSTER
from drivers import ROOT, Cli, Kube, cli_of_its_own, wait_until
from tfk8s_train.cluster import free_ports

import toolenv

CLUSTER = f"{E2E_CLUSTER}-125"
NAMESPACE = "tfk8s-taas"


@dataclass
class Heketi:
    """A client of the Heketi REST API as its docs describe it: JWT HS256 with iss, iat, exp, qsh."""

    url: str
    key: str

    def token(self, method: str, path: str) -> str:
        def b64(data: bytes) -> str:
            return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

        now = int(time.time())
        claims = {"iss": "admin", "iat": now, "exp": now + 60, "qsh": hashlib.sha256(f"{method}&{path}".encode()).hexdigest()}
        head = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode()) + "." + b64(json.dumps(claims).encode())
        return head + "." + b64(hmac.new(self.key.encode(), head.encode(), hashlib.sha256).digest())

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, dict[str, Any], str]:
        request = urllib.request.Request(
            self.url + path,
            data=json.dumps(body).encode() if body is not None else None,
            method=method,
            headers={"Authorization": "bearer " + self.token(method, path), "Content-Type": "application/json"},
        )

        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *args: Any) -> None:
                return None

        try:
            with urllib.request.build_opener(NoRedirect).open(request, timeout=10) as response:
                raw = response.read()
                return response.status, json.loads(raw) if raw.strip() else {}, response.headers.get("Location", "")
        except urllib.error.HTTPError as error:
            return error.code, {}, error.headers.get("Location", "")

    def wait(self, method: str, path: str, body: dict[str, Any]) -> str:
        """POST an asynchronous operation and poll its queue entry; the object's path, if any."""
        status, _, location = self.call(method, path, body)
        assert status == 202, (status, path)
        for _ in range(200):
            status, _, target = self.call("GET", location)
            if status in (303, 204):
                return target
            assert status == 200, (status, location)
            time.sleep(0.05)
        raise AssertionError(f"{location} never finished")

    def volumes(self) -> list[str]:
        return list(self.call("GET", "/volumes")[1]["volumes"])


@pytest.fixture(scope="module")
def heketi(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Heketi]:
    """A Heketi v9 server on loopback (reachable from the controller-manager, which runs on the host)
    with one cluster of 3 nodes in 3 zones, one mock device each (replicate:3 needs 3 zones)."""
    binary = subprocess.run([str(ROOT / "lab" / "heketi.sh"), "build"], check=True, capture_output=True, text=True).stdout
    assert binary.strip()
    work = tmp_path_factory.mktemp("heketi")
    key = secrets.token_urlsafe(24)
    (port,) = free_ports(1)
    server = subprocess.Popen(
        [str(ROOT / "lab" / "heketi.sh"), "run", str(work), str(port), key],
        stdout=open(work / "heketi.log", "w"),  # noqa: SIM115 - closed with the process
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    client = Heketi(f"http://127.0.0.1:{port}", key)
    try:
        for _ in range(100):
            try:
                if urllib.request.urlopen(client.url + "/hello", timeout=1).status == 200:
                    break
            except OSError:
                time.sleep(0.1)
        else:
            raise AssertionError((work / "heketi.log").read_text())
        status, cluster, _ = client.call("POST", "/clusters", {"file": True, "block": False})
        assert status == 201, status
        for zone in (1, 2, 3):
            node = client.wait(
                "POST",
                "/nodes",
                {
                    "cluster": cluster["id"],
                    "zone": zone,
                    "hostnames": {"manage": [f"gluster-{zone}"], "storage": [f"10.10.0.{zone}"]},
                },
            )
            node_id = node.rsplit("/", 1)[1]
            client.wait("POST", "/devices", {"node": node_id, "name": "/dev/vdb"})
        yield client
    finally:
        os.killpg(server.pid, 15)
        server.wait(10)


@pytest.fixture(scope="module")
def legacy_kube() -> Iterator[Kube]:
    with toolenv.throwaway_cluster(CLUSTER, kube="1.25") as kubeconfig:
        yield Kube(kubeconfig)


@pytest.fixture(scope="module")
def legacy(tmp_path_factory: pytest.TempPathFactory, legacy_kube: Kube) -> Cli:
    """The plain CLI on a project copy of its own, pointed at the 1.25 cluster."""
    return cli_of_its_own(toolenv.project_copy(tmp_path_factory.mktemp("legacy")), legacy_kube.kubeconfig)


def edit_stack(cli: Cli, stack: str, change: Any) -> None:
    path = cli.cwd / "stacks" / f"Pulumi.{stack}.yaml"
    document = yaml.safe_load(path.read_text())
    change(document["config"])
    path.write_text(yaml.safe_dump(document))


def test_doctor_says_1_25_is_too_old_for_the_guards(legacy_kube: Kube) -> None:
    run = doctor(legacy_kube.kubeconfig, "--stack", "platform-dev", "--no-probes")
    assert run.code == 1, run.stderr
    version = run.check("version")
    assert version["verdict"] == "fail" and "Kubernetes 1.25" in version["detail"] and "1.30 or later" in version["fix"]
    # platform-dev pins 1.34: the file and the server disagree, and the fix names the server's.
    assert run.check("kubernetes-version")["verdict"] == "fail" and '"1.25"' in run.check("kubernetes-version")["fix"]
    assert "admission-policies" not in run.verdicts()  # said once, by the version


def test_before_1_29_the_retry_budget_is_shared_and_preview_says_so(legacy: Cli, legacy_kube: Kube) -> None:
    """No kubernetesVersion in the platform stack: the server's 1.25 decides; the API server keeps the shared limit."""
    legacy("stack", "init", "platform-dev")
    edit_stack(legacy, "platform-dev", lambda c: c["tfk8s:platform"].pop("kubernetesVersion"))
    platform = legacy("up", "--stack", "platform-dev", "--yes", "--skip-preview")
    assert "no ValidatingAdmissionPolicy (1.30+)" in platform.stdout, platform.stdout  # no destroy guard here: said so
    legacy("stack", "init", "tenant-alice")
    legacy("up", "--stack", "tenant-alice", "--yes", "--skip-preview")
    legacy("stack", "init", "dev")
    preview = legacy("preview", "--stack", "dev")
    assert "Kubernetes 1.25 has no per-worker retries (backoffLimitPerIndex needs 1.29)" in preview.stdout, preview.stdout
    legacy("up", "--stack", "dev", "--yes", "--skip-preview")
    assert legacy.outputs("dev")["ready"] is True
    (job,) = legacy_kube.get("jobs", "tfk8s-alice")
    assert job["spec"]["backoffLimit"] == 6  # 3 per worker x 2 workers (docs/reference/experiment.md)
    assert "backoffLimitPerIndex" not in job["spec"] and "maxFailedIndexes" not in job["spec"]
    legacy("destroy", "--stack", "dev", "--yes")
    legacy("destroy", "--stack", "tenant-alice", "--yes")
    legacy("destroy", "--stack", "platform-dev", "--yes")
    legacy_kube.run("delete", "namespace", "tfk8s-alice", "--wait=true")
    legacy_kube.run("delete", "pv", "--all", "--wait=true")


def glusterfs_stack(legacy: Cli, heketi: Heketi) -> None:
    """The seed's imagenet platform, pointed at this Heketi and this cluster's User Node."""

    def change(config: dict[str, Any]) -> None:
        platform = config["tfk8s:platform"]
        platform["userNode"]["name"] = "tfk8s-user-node"
        platform["storage"]["glusterfs"]["restUrl"] = heketi.url
        platform["awaitTimeoutSeconds"] = 120

    legacy("stack", "init", "imagenet-platform")
    edit_stack(legacy, "imagenet-platform", change)
    legacy.set_secret("imagenet-platform", "heketiAdminKey", heketi.key)


def glusterfs_tenant(legacy: Cli) -> None:
    """The seed's user taas, with volumes small enough for the test's Heketi."""
    legacy("stack", "init", "imagenet-tenant")
    edit_stack(legacy, "imagenet-tenant", lambda c: c["tfk8s:tenant"].update(volumes={"dataSize": "1Gi", "logSize": "1Gi"}))


def test_glusterfs_claims_are_bound_by_the_in_tree_provisioner_through_heketi(
    legacy: Cli, legacy_kube: Kube, heketi: Heketi
) -> None:
    glusterfs_stack(legacy, heketi)
    glusterfs_tenant(legacy)
    assert heketi.volumes() == []
    legacy("up", "--stack", "imagenet-platform", "--yes", "--skip-preview")
    legacy("up", "--stack", "imagenet-tenant", "--yes", "--skip-preview")

    claims = {c["metadata"]["name"]: c for c in legacy_kube.get("pvc", NAMESPACE)}
    assert {n: c["status"]["phase"] for n, c in claims.items()} == {"tfk8s-data": "Bound", "tfk8s-log": "Bound"}
    volumes = {v["spec"]["claimRef"]["name"]: v for v in legacy_kube.get("pv") if v["spec"].get("claimRef")}
    in_heketi = {heketi.call("GET", f"/volumes/{i}")[1]["name"] for i in heketi.volumes()}
    for name in claims:
        pv = volumes[name]
        assert pv["metadata"]["annotations"]["pv.kubernetes.io/provisioned-by"] == "kubernetes.io/glusterfs"
        assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
        assert pv["spec"]["glusterfs"]["path"] in in_heketi  # the volume the controller-manager asked Heketi for
        assert pv["spec"]["glusterfs"]["endpoints"].startswith("glusterfs-dynamic-")
    assert len(in_heketi) == 2
    # The admin key went from the stack's Pulumi secret into a kubernetes.io/glusterfs Secret only, in
    # the platform's own namespace for it (the provisioner above read it there), where no pod may run.
    secret = legacy_kube.get("secret", "tfk8s-storage", "tfk8s-heketi-admin")
    namespace = legacy_kube.get("namespace", name="tfk8s-storage")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert legacy_kube.get("resourcequota", "tfk8s-storage", "tfk8s-no-pods")["spec"]["hard"] == {"pods": "0"}
    assert secret["type"] == "kubernetes.io/glusterfs" and base64.b64decode(secret["data"]["key"]).decode() == heketi.key
    assert heketi.key not in (legacy.cwd / "stacks" / "Pulumi.imagenet-platform.yaml").read_text()
    assert legacy.outputs("imagenet-platform")["ready"] is True and legacy.outputs("imagenet-tenant")["ready"] is True

    # The seed's imagenet cluster, as an experiment of that tenant: the seed's own names, plus a
    # scratch volume of its own in the platform's second class (Delete: it goes with the experiment).
    legacy("stack", "init", "imagenet")
    legacy("config", "set", "--path", "--stack", "imagenet", "tfk8s:clusters[0].scratch.size", "1Gi")
    legacy("up", "--stack", "imagenet", "--yes", "--skip-preview")
    scratch = legacy_kube.get("pvc", NAMESPACE, "imagenet-scratch")
    assert (scratch["status"]["phase"], scratch["spec"]["storageClassName"]) == ("Bound", "glusterfs-scratch")
    scratch_pv = legacy_kube.get("pv", None, scratch["spec"]["volumeName"])
    assert scratch_pv["spec"]["persistentVolumeReclaimPolicy"] == "Delete"
    assert len(heketi.volumes()) == 3
    assert {s["metadata"]["name"] for s in legacy_kube.get("services", NAMESPACE)} >= {
        "imagenet-ps-0",
        "imagenet-ps-1",
        "imagenet-worker",
    }
    (job,) = legacy_kube.get("jobs", NAMESPACE)
    assert job["metadata"]["name"] == "imagenet-worker" and job["spec"]["completions"] == 3

    legacy("destroy", "--stack", "imagenet", "--yes")
    # The scratch claim went with the experiment, and with it its volume, in Kubernetes and in Heketi.
    assert sorted(c["metadata"]["name"] for c in legacy_kube.get("pvc", NAMESPACE)) == ["tfk8s-data", "tfk8s-log"]
    pv_names = lambda: {v["metadata"]["name"] for v in legacy_kube.get("pv")}  # noqa: E731
    wait_until(lambda: scratch_pv["metadata"]["name"] not in pv_names(), "the scratch PersistentVolume to be deleted")
    wait_until(lambda: len(heketi.volumes()) == 2, "the scratch volume to leave Heketi")
    legacy("destroy", "--stack", "imagenet-tenant", "--yes")
    legacy("destroy", "--stack", "imagenet-platform", "--yes")
    # keepOnDestroy (the default) and reclaimPolicy Retain: claims, volumes and Heketi's bricks stay.
    assert sorted(c["metadata"]["name"] for c in legacy_kube.get("pvc", NAMESPACE)) == ["tfk8s-data", "tfk8s-log"]
    assert len(heketi.volumes()) == 2
    names = {s["metadata"]["name"] for s in legacy_kube.get("storageclasses")}
    assert not names & {"glusterfs", "glusterfs-scratch"}


def test_the_glusterfs_platform_is_refused_on_1_34_before_anything_exists(cli: Cli, kube: Kube, heketi: Heketi) -> None:
    """Same stack file, the 1.34 cluster: one message about 1.26, nothing created."""
    original = cli.cwd / "stacks" / "Pulumi.imagenet-platform.yaml"
    shutil.copy(original, original.with_suffix(".orig"))
    try:
        glusterfs_stack(cli, heketi)
        before = {n["metadata"]["name"] for n in kube.get("namespaces")}
        done = cli("up", "--stack", "imagenet-platform", "--yes", "--skip-preview", check=False)
        text = done.stdout + done.stderr
        assert done.returncode != 0
        assert "removed in Kubernetes 1.26; the cluster is 1.34" in text, text
        assert "Traceback" not in text
        assert {n["metadata"]["name"] for n in kube.get("namespaces")} == before
        assert not [s for s in kube.get("storageclasses") if s["metadata"]["name"] == "glusterfs"]
    finally:
        cli("stack", "rm", "imagenet-platform", "--yes", "--force", check=False)
        shutil.move(original.with_suffix(".orig"), original)
