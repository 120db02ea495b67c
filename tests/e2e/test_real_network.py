"""NetworkPolicies enforced for real: on the real node, kube-router's firewall (lab/realnode.sh)
lets through exactly what the policies of tfk8s's tenant and experiment stacks allow, probed with
real TCP connections between real pods, and agrees with cyclonus's offline matrix of the same live
policies (policy_matrix.py, test_network.py).

Two tenants, alice and bob, each run an experiment `net` of two between-graph clusters, `one` and
`two`, each a PS and a worker placed on the real node. Their pods run the Python image built here
with a command that only accepts connections on TensorFlow's port: what is probed is the network,
not TensorFlow (test_real_training.py trains through the same policies). Every pod tries every
pod's port 2222; this machine, the node itself, reaches them all (kubelet probes and NodePorts
come from there), so each refusal between pods is the policies'.

Then `tfk8s doctor` on the same cluster: its probes pass here (the firewall enforces, DNS
resolves, the images run) but sharing a volume across nodes, which one node's hostPath cannot
prove; and once kube-router is stopped (a CNI that ignores policies), its default-deny check fails.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from doctor_run import Run, doctor, sandboxes_kept, stack_file
from drivers import CLUSTER, Cli, Kube
from policy_matrix import designed, evaluate, short_name
from realnode_drivers import (
    POD_CIDR,
    REAL_NODE_KEY,
    REALNODE,
    give_volumes_to_pods,
    import_image,
    node_of,
    place_on_real_node,
    platform_settings,
    probe_from_node,
    probe_from_pod,
    project,
    real_cluster,
    until,
)

from realnode import script_env

TENANTS = ("alice", "bob")
EXPERIMENT = "net"
PORT = 2222
# Accepts and closes connections on TensorFlow's port, forever (one line: a config value).
LISTEN = (
    "import socket; s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
    f"s.bind(('', {PORT})); s.listen(64); [s.accept()[0].close() for _ in iter(int, 1)]"
)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Kube, list[dict[str, Any]]]]:
    """The two tenants' experiments up on a cluster with the real node; (kubectl, their pods)."""
    with real_cluster(f"{CLUSTER}-net") as kube:
        image = import_image(kube, "python")
        work = tmp_path_factory.mktemp("real-network")
        cli = project(kube, work / "project", "real-network-test")
        cli("stack", "select", "--create", "platform-dev")
        for path, value in platform_settings(work / "volumes").items():
            cli("config", "set", "--stack", "platform-dev", "--path", path, value)
        cli("up", "--stack", "platform-dev", "--yes", "--skip-preview")
        for user in TENANTS:
            cli.init_tenant(f"tenant-{user}", platform="platform-dev", user=user)
            cli("up", "--stack", f"tenant-{user}", "--yes", "--skip-preview")
        give_volumes_to_pods(kube, [f"{EXPERIMENT}/one", f"{EXPERIMENT}/two"])
        for user in TENANTS:
            _experiment(cli, f"{EXPERIMENT}-{user}", f"tenant-{user}", image)
        node = node_of(kube)

        def all_running() -> list[dict[str, Any]] | None:
            pods = [p for p in kube.get("pods") if p["spec"].get("nodeName") == node]
            running = [p for p in pods if p["status"].get("phase") == "Running" and p["status"].get("podIP")]
            return running if len(running) == len(TENANTS) * 4 else None

        yield kube, until("every PS and worker runs on the real node", 180, all_running)


def _experiment(cli: Cli, stack: str, tenant: str, image: str) -> None:
    settings = {"tfk8s:experiment": EXPERIMENT}
    for i, name in enumerate(("one", "two")):
        cluster = f"tfk8s:clusters[{i}]"
        settings |= {
            f"{cluster}.name": name,
            f"{cluster}.image": image,
            f"{cluster}.classicFlags": "false",
            f"{cluster}.command[0]": "python3",
            **{f"{cluster}.{role}.cpu": "100m" for role in ("ps", "workers")},
            **{f"{cluster}.{role}.memory": "128Mi" for role in ("ps", "workers")},
            f"{cluster}.ps.count": "1",
            f"{cluster}.workers.count": "1",
        }
    cli.init_experiment(stack, tenant=tenant, settings=settings)
    for i in range(2):
        place_on_real_node(cli, stack, i)
        cli.set_value(stack, f"tfk8s:clusters[{i}].command[1]", "-c")
        cli.set_value(stack, f"tfk8s:clusters[{i}].command[2]", LISTEN)
    cli("up", "--stack", stack, "--yes", "--skip-preview")


def _at_port(addresses: list[str]) -> dict[str, str]:
    """Each address at TensorFlow's port, as the probes take them."""
    return {a: f"{a}:{PORT}" for a in addresses}


def test_the_firewall_lets_through_exactly_the_designed_pairs_and_agrees_with_cyclonus(
    live: tuple[Kube, list[dict[str, Any]]], tmp_path: Path
) -> None:
    kube, pods = live
    name = {p["status"]["podIP"]: f"{p['metadata']['namespace']}/{short_name(p).split('/', 1)[1]}" for p in pods}
    addresses = sorted(name)
    assert sorted(name.values()) == sorted(
        f"tfk8s-{user}/{cluster}-{role}-0" for user in TENANTS for cluster in ("one", "two") for role in ("ps", "worker")
    )

    # The control: from the node every listener answers (also once the firewall holds every pod).
    def all_listening() -> bool:
        return all(probe_from_node(_at_port(addresses)).values())

    until("every pod listens on its port", 60, all_listening)

    reached = {
        (name[pod["status"]["podIP"]], name[a])
        for pod in pods
        for a, ok in probe_from_pod(kube, pod, _at_port(addresses)).items()
        if ok
    }
    everything = {(s, t) for s in name.values() for t in name.values()}
    matrices, _ = evaluate(kube, [f"tfk8s-{user}" for user in TENANTS], tmp_path)
    cyclonus = {pair for pair, cell in matrices[PORT].items() if cell == "." and pair in everything}
    design = {(s, t) for s, t in everything if designed(s, t, PORT)}
    assert reached == design, sorted(reached ^ design)
    assert cyclonus == design, sorted(cyclonus ^ design)
    # What that means: a cluster's PS and worker reach each other, nothing crosses clusters or tenants.
    assert ("tfk8s-alice/one-worker-0", "tfk8s-alice/one-ps-0") in reached
    assert ("tfk8s-alice/one-ps-0", "tfk8s-alice/one-worker-0") in reached
    assert ("tfk8s-alice/one-worker-0", "tfk8s-alice/two-ps-0") not in reached
    assert not [(s, t) for s, t in reached if s.split("/")[0] != t.split("/")[0]]
    print(f"\n[real network] {len(reached)} of {len(everything)} pairs connect, as designed and as cyclonus computes")


# `tfk8s doctor` on this cluster: the probes' pods on the real node (its label and taint), the Python
# image built here for the probes and the platform's TensorFlow images, and a Jupyter image no node
# can pull. Run after the firewall's test above, on the same live cluster.
UNPULLABLE = "registry.invalid/tfk8s/jupyter:none"


def _doctor_here(kube: Kube, tmp_path: Path, image: str, *extra: str) -> Run:
    settings = platform_settings(tmp_path / "volumes")
    stack = stack_file(
        tmp_path,
        {
            "images": {"tensorflow": image, "tensorboard": image, "jupyter": UNPULLABLE},
            "network": {
                "policyEnforced": True,
                "dns": {"cidrs": [settings["tfk8s:platform.network.dns.cidrs[0]"]]},
                "podCidrs": [POD_CIDR],
            },
        },
    )
    placement = ["--node-selector", f"{REAL_NODE_KEY}=true", "--toleration", REAL_NODE_KEY]
    return doctor(kube.kubeconfig, "--stack", str(stack), *placement, *extra)


def test_doctor_proves_the_firewall_dns_and_images_and_says_rwx_is_not_proven(
    live: tuple[Kube, list[dict[str, Any]]], tmp_path: Path
) -> None:
    kube, _ = live
    run = _doctor_here(kube, tmp_path, import_image(kube, "python"))
    verdicts = run.verdicts()
    for check in ("pod-security", "dns", "pod-network", "network-policy-deny", "network-policy-allow", "dns-route"):
        assert verdicts[check] == "pass", (check, run.check(check))
    assert verdicts[f"image:{import_image(kube, 'python')}"] == "pass"
    pull = run.check(f"image:{UNPULLABLE}")
    assert pull["verdict"] == "fail" and ("ErrImagePull" in pull["detail"] or "ImagePullBackOff" in pull["detail"]), pull
    # The nodes report no pod range (no controller allocates them here): not compared, and said.
    assert verdicts["pod-cidrs"] == "advice" and "no spec.podCIDRs" in run.check("pod-cidrs")["detail"]
    # hostPath volumes on one node: sharing across nodes is not proven here, and the doctor says so.
    assert verdicts["rwx-two-nodes"] == "not proven" and "one node" in run.check("rwx-two-nodes")["detail"]
    assert run.code == 1 and sandboxes_kept(kube.kubeconfig) == []
    assert run.report is not None
    print(f"\n[doctor] {len(verdicts)} checks on the real node in {run.seconds:.1f} s (its own count: {run.report['seconds']} s)")


def test_doctor_fails_a_cni_that_does_not_enforce_policies(live: tuple[Kube, list[dict[str, Any]]], tmp_path: Path) -> None:
    kube, _ = live
    subprocess.run([REALNODE, "firewall-off"], check=True, env=script_env(kube.cluster or ""))
    run = _doctor_here(kube, tmp_path, import_image(kube, "python"))
    deny = run.check("network-policy-deny")
    assert deny["verdict"] == "fail" and deny["required"] and "not enforced" in deny["detail"], deny
    assert "Calico" in deny["fix"] and "policyEnforced: false" in deny["fix"]
    assert run.check("pod-network")["verdict"] == "pass" and run.code == 1
