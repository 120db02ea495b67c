"""A real node beside the simulated ones (lab/realnode.sh): a real kubelet and container runtime
registered on a local control plane, pods that really run in containers built here, under the
`restricted` Pod Security level, reaching each other and the API server through cluster DNS.

On a machine that cannot run one (no root, no cgroups), these tests fail with the reason
`lab/realnode.sh check` gives; they are not skipped (realnode_drivers.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from drivers import CLUSTER, Kube
from realnode_drivers import REALNODE, assert_machine_can_run_it, import_image

import realnode
import toolenv

NAMESPACE = "probe"
# The pod spec fields the `restricted` level requires, as a training pod of tfk8s carries them.
RESTRICTED = {
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}
CONTAINER_RESTRICTED = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


@pytest.fixture(scope="module")
def real() -> Iterator[tuple[Kube, str]]:
    """A local cluster of its own with this machine's real node; (kubectl, the node's name)."""
    name = f"{CLUSTER}-real"
    env = {**os.environ, "TFK8S_CLUSTER_NAME": name}
    assert_machine_can_run_it(name)
    with realnode.one_at_a_time(), toolenv.throwaway_cluster(name) as kubeconfig:
        subprocess.run([REALNODE, "start"], check=True, env=env)
        state = toolenv.CACHE / "realnode" / name
        yield Kube(kubeconfig, cluster=name), f"tfk8s-real-{name}"
        subprocess.run([REALNODE, "stop"], check=True, env=env)
        # Nothing of the node is left: its processes, their mounts, the bridge, the bridge's rules,
        # kube-proxy's and kube-router's rules and kube-router's sets.
        left = subprocess.run(["pgrep", "-af", str(state)], capture_output=True, text=True).stdout
        assert not left, f"processes of the stopped node: {left}"
        assert str(state) not in Path("/proc/mounts").read_text()
        assert subprocess.run(["ip", "link", "show", "tfk8s0"], capture_output=True).returncode != 0
        rules = subprocess.run(["iptables-save"], check=True, capture_output=True, text=True).stdout
        assert 'name: \\"tfk8s\\"' not in rules and "KUBE-" not in rules and "kube-router" not in rules, rules
        sets = subprocess.run(["ipset", "list", "-n"], check=True, capture_output=True, text=True).stdout.split()
        assert not [s for s in sets if s.startswith(("KUBE-", "kube-router", "TMP-"))], sets


def test_the_real_node_is_a_kubelet_of_its_own_tainted_and_left_alone_by_kwok(real: tuple[Kube, str]) -> None:
    kube, node = real
    live = kube.get("node", name=node)
    info = live["status"]["nodeInfo"]
    assert info["kubeletVersion"] == "v1.34.4" and info["containerRuntimeVersion"].startswith("containerd://"), info
    assert "kwok.x-k8s.io/node" not in live["metadata"].get("annotations", {})
    assert live["metadata"]["labels"]["tfk8s.io/real-node"] == "true"
    assert {"key": "tfk8s.io/real-node", "value": "true", "effect": "NoSchedule"} in live["spec"]["taints"]
    ready = next(c for c in live["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True" and ready["reason"] == "KubeletReady", ready
    # The simulated nodes are still kwok's.
    fake = [n for n in kube.get("nodes") if n["metadata"]["name"] != node]
    assert fake and all(n["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake" for n in fake)
    # The kubelet never collects the node's images, which are imported, never pulled: on this kind
    # of VM it reads the disk as 88% full after a cold CI's builds, and removed the sandbox image.
    config = json.loads(kube.run("get", "--raw", f"/api/v1/nodes/{node}/proxy/configz"))["kubeletconfig"]
    assert config["imageGCHighThresholdPercent"] == 100, config


PEER = "import http.server; http.server.HTTPServer(('', 8080), http.server.SimpleHTTPRequestHandler).serve_forever()"
PROBE = """
import json, os, socket, ssl, urllib.request
ns, me = os.environ["NS"], os.environ["NAME"]
sa = "/var/run/secrets/kubernetes.io/serviceaccount/"
api = socket.gethostbyname("kubernetes.default.svc.cluster.local")
peer = socket.gethostbyname("peer.probe." + ns + ".svc.cluster.local")
page = urllib.request.urlopen("http://peer.probe:8080/", timeout=10).status
context = ssl.create_default_context(cafile=sa + "ca.crt")
request = urllib.request.Request(
    "https://kubernetes.default.svc/api/v1/namespaces/" + ns + "/pods/" + me,
    headers={"Authorization": "Bearer " + open(sa + "token").read()},
)
pod = json.load(urllib.request.urlopen(request, context=context, timeout=10))
print(json.dumps({"api": api, "peer": peer, "page": page, "uid": os.getuid(), "node": pod["spec"]["nodeName"]}))
"""


def _pod(name: str, node: str, image: str, command: list[str], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": name}},
        "spec": {
            "nodeSelector": {"tfk8s.io/real-node": "true"},
            "tolerations": [{"key": "tfk8s.io/real-node", "operator": "Equal", "value": "true", "effect": "NoSchedule"}],
            "securityContext": RESTRICTED,
            "containers": [
                {
                    "name": "main",
                    "image": image,
                    "imagePullPolicy": "Never",
                    "command": command,
                    "securityContext": CONTAINER_RESTRICTED,
                }
            ],
            **spec,
        },
    }


def _wait(kube: Kube, name: str, phases: set[str], seconds: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    while True:
        pod = kube.get("pod", NAMESPACE, name)
        if pod["status"].get("phase") in phases:
            return pod
        assert time.monotonic() < deadline, json.dumps(pod["status"], indent=1)
        time.sleep(0.5)


def test_pods_run_for_real_restricted_and_find_each_other_and_the_api_by_dns(real: tuple[Kube, str]) -> None:
    kube, node = real
    image = import_image(kube, "python")
    assert image.startswith("tfk8s.local/python:bookworm-3.11-"), image
    kube.run("create", "namespace", NAMESPACE)
    kube.run("label", "namespace", NAMESPACE, "pod-security.kubernetes.io/enforce=restricted")
    # The probe may read its own pod: a Role, as tfk8s's PS retirement has one.
    kube.run("create", "role", "read-pods", "-n", NAMESPACE, "--verb=get", "--resource=pods")
    kube.run("create", "rolebinding", "read-pods", "-n", NAMESPACE, "--role=read-pods", f"--serviceaccount={NAMESPACE}:default")
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "probe", "namespace": NAMESPACE},
        "spec": {"clusterIP": "None", "selector": {"app": "peer"}, "ports": [{"port": 8080}]},
    }
    peer = _pod("peer", node, image, ["python3", "-c", PEER], hostname="peer", subdomain="probe")
    probe = _pod("probe", node, image, ["python3", "-c", PROBE], restartPolicy="Never")
    probe["spec"]["containers"][0]["env"] = [
        {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    ]
    for obj in (service, peer):
        _apply(kube, obj)
    running = _wait(kube, "peer", {"Running"})
    assert running["spec"]["nodeName"] == node and running["status"]["podIP"].startswith("10.88."), running["status"]
    _apply(kube, probe)
    done = _wait(kube, "probe", {"Succeeded", "Failed"})
    log = kube.run("logs", "-n", NAMESPACE, "probe")
    assert done["status"]["phase"] == "Succeeded", log
    seen = json.loads(log.strip().splitlines()[-1])
    assert seen["peer"] == running["status"]["podIP"] and seen["page"] == 200, seen
    assert seen["api"] == kube.get("service", "default", "kubernetes")["spec"]["clusterIP"], seen
    assert seen["uid"] == 1000 and seen["node"] == node, seen


def _apply(kube: Kube, obj: dict[str, Any]) -> None:
    subprocess.run(
        [kube.binary, "--kubeconfig", str(kube.kubeconfig), "apply", "-f", "-"],
        input=json.dumps(obj),
        check=True,
        capture_output=True,
        text=True,
    )
