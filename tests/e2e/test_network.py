"""Who can reach whom, computed by a real NetworkPolicy engine from the live policies and pods.

kwok runs no containers and enforces no policy, so nothing here sends a packet: cyclonus
(hack/tools.sh cyclonus) evaluates the NetworkPolicies the tenant and experiment stacks created on
the real API server against a model of the live pods (their namespaces, labels, IPs and declared
ports), for every pair of pods and each of TensorFlow's, Jupyter's and TensorBoard's ports. Two
tenants, alice and bob, each run one experiment `net` of two clusters: `one` (between-graph) and
`two` (in-graph, driven by the tenant's Jupyter). The matrix must be exactly the design of
tfk8s.network_policy, and every pair across tenants denied.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from drivers import Cli, Kube

import toolenv

TENANTS = ("alice", "bob")
PORTS = {2222: "tensorflow", 8888: "jupyter", 6006: "tensorboard"}
CLUSTERS = {
    "tfk8s:clusters[0].name": "one",
    "tfk8s:clusters[0].ps.count": "1",
    "tfk8s:clusters[0].workers.count": "1",
    "tfk8s:clusters[0].workers.cpu": "250m",
    "tfk8s:clusters[0].workers.memory": "512Mi",
    "tfk8s:clusters[1].name": "two",
    "tfk8s:clusters[1].replication": "in-graph",
    "tfk8s:clusters[1].training": "sync",
    "tfk8s:clusters[1].inGraphClient": "notebook",
    "tfk8s:clusters[1].ps.count": "1",
    "tfk8s:clusters[1].workers.count": "1",
    "tfk8s:clusters[1].workers.cpu": "250m",
    "tfk8s:clusters[1].workers.memory": "512Mi",
}


@pytest.fixture(scope="module")
def experiments(cli: Cli, tenants: dict[str, str]) -> Iterator[list[str]]:
    stacks = [f"net-{user}" for user in TENANTS]
    for user, stack in zip(TENANTS, stacks, strict=True):
        cli.init_experiment(stack, tenant=tenants[user], settings={"tfk8s:experiment": "net", **CLUSTERS})
        cli("up", "--stack", stack, "--yes", "--skip-preview")
    try:
        yield stacks
    finally:
        for stack in stacks:
            cli("destroy", "--stack", stack, "--yes")
            cli("stack", "rm", stack, "--yes")


def short_name(pod: dict[str, Any]) -> str:
    """`alice/one-ps-0`, `alice/two-worker-0`, `alice/jupyter`: what a pod is, for the matrix."""
    labels = pod["metadata"]["labels"]
    user = labels["tfk8s.io/user"]
    if "tfk8s.io/cluster" not in labels:
        return f"{user}/{labels['app.kubernetes.io/name']}"
    index = labels.get("tfk8s.io/index") or pod["metadata"].get("annotations", {}).get(
        "batch.kubernetes.io/job-completion-index", "0"
    )
    return f"{user}/{labels['tfk8s.io/cluster']}-{labels['tfk8s.io/role']}-{index}"


def probe_model(kube: Kube, namespaces: list[str]) -> dict[str, Any]:
    """cyclonus's synthetic probe model: the live pods of `namespaces`, one model container per
    declared port (cyclonus probes a container's one port), named for what they are."""
    labels = {n["metadata"]["name"]: n["metadata"].get("labels", {}) for n in kube.get("namespaces")}
    pods = []
    for namespace in namespaces:
        for pod in kube.get("pods", namespace):
            if pod["status"].get("phase") in ("Succeeded", "Failed") or pod["metadata"].get("deletionTimestamp"):
                continue
            ports = [(c["name"], p) for c in pod["spec"]["containers"] for p in c.get("ports", [])]
            pods.append(
                {
                    "Namespace": namespace,
                    "Name": short_name(pod).split("/", 1)[1],
                    "Labels": pod["metadata"]["labels"],
                    "IP": pod["status"].get("podIP", ""),
                    "Containers": [
                        {"Name": f"{c}-{p['name']}", "Port": p["containerPort"], "PortName": p["name"], "Protocol": "TCP"}
                        for c, p in ports
                    ],
                }
            )
    return {
        "Probes": [{"Protocol": "TCP", "Port": port} for port in PORTS],
        "Resources": {"Namespaces": {n: labels[n] for n in namespaces}, "Pods": pods},
    }


def combined_tables(output: str) -> list[dict[tuple[str, str], str]]:
    """Each probe's `Combined:` table of `cyclonus analyze --mode probe`: (from, to) -> cell."""
    tables = []
    for block in output.split("Combined:")[1:]:
        table = block.strip().split("\n\n")[0]  # the table alone, not the next probe's
        rows = [line for line in table.splitlines() if line.startswith("|")]
        header = [c.strip() for c in rows[0].strip("|").split("|")][1:]
        cells = {}
        for row in rows[1:]:
            fields = [c.strip() for c in row.strip("|").split("|")]
            for to, cell in zip(header, fields[1:], strict=True):
                cells[(fields[0].lower(), to.lower())] = cell
        tables.append(cells)
    return tables


def evaluate(kube: Kube, namespaces: list[str], work: Path) -> tuple[dict[int, dict[tuple[str, str], str]], list[str]]:
    policies = [p for p in kube.get("networkpolicies") if p["metadata"]["namespace"] in namespaces]
    for p in policies:  # as applied: the engine reads the spec, the server's bookkeeping is noise
        p["metadata"] = {k: p["metadata"][k] for k in ("name", "namespace", "labels") if k in p["metadata"]}
        p.pop("status", None)
    (work / "policies").mkdir()
    for p in policies:  # one file each: cyclonus reads the first document of a file alone
        (work / "policies" / f"{p['metadata']['namespace']}-{p['metadata']['name']}.yaml").write_text(yaml.safe_dump(p))
    assert len(policies) == len(namespaces) * 5 + 2 * len(namespaces), [p["metadata"]["name"] for p in policies]
    model = probe_model(kube, namespaces)
    (work / "model.json").write_text(json.dumps(model, indent=1))
    done = subprocess.run(
        [
            toolenv.CYCLONUS,
            "analyze",
            "--mode",
            "probe",
            "--policy-path",
            str(work / "policies"),
            "--probe-path",
            str(work / "model.json"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    tables = combined_tables(done.stdout)
    # One table per probe port, then one for the live pods cyclonus read itself (none: no kube context).
    assert len(tables) >= len(PORTS), done.stdout[-3000:]
    pods = sorted(f"{p['Namespace']}/{p['Name']}" for p in model["Resources"]["Pods"])
    return dict(zip(PORTS, tables, strict=False)), pods


def designed(source: str, target: str, port: int) -> bool:
    """tfk8s.network_policy's design, written out: may `source` open `port` on `target`?"""
    (s_ns, s_pod), (t_ns, t_pod) = source.split("/"), target.split("/")
    if s_ns != t_ns:
        return False  # nothing crosses tenants
    if port != 2222:
        return False  # Jupyter and TensorBoard answer users through NodePorts; no pod of a tenant calls them
    s_cluster, t_cluster = s_pod.split("-")[0], t_pod.split("-")[0]
    if "jupyter" in (s_pod, t_pod):
        other = t_cluster if s_pod == "jupyter" else s_cluster
        return other == "two"  # the notebook-driven cluster and its client, both ways
    if "tensorboard" in (s_pod, t_pod):
        return False
    return s_cluster == t_cluster


def test_the_live_policies_allow_exactly_the_designed_pairs_and_nothing_across_tenants(
    kube: Kube, experiments: list[str], tmp_path: Path
) -> None:
    namespaces = [f"tfk8s-{user}" for user in TENANTS]
    matrices, pods = evaluate(kube, namespaces, tmp_path)
    # Per tenant: Jupyter, TensorBoard, and per cluster a PS and a worker.
    expected_pods = sorted(
        f"{ns}/{name}"
        for ns in namespaces
        for name in ("jupyter", "tensorboard", "one-ps-0", "one-worker-0", "two-ps-0", "two-worker-0")
    )
    assert pods == expected_pods
    allowed: dict[int, set[tuple[str, str]]] = {}
    for port, cells in matrices.items():
        for (source, target), cell in cells.items():
            # `.` allowed, `X` denied, `N` the target has no such port (no connection either way).
            assert cell in (".", "X", "N"), (port, source, target, cell)
        allowed[port] = {pair for pair, cell in cells.items() if cell == "."}
        designed_pairs = {(s, t) for s in pods for t in pods if designed(s, t, port) and cells[(s, t)] != "N"}
        assert allowed[port] == designed_pairs, (port, sorted(allowed[port] ^ designed_pairs))
    cross = [(s, t) for port in allowed for s, t in allowed[port] if s.split("/")[0] != t.split("/")[0]]
    assert cross == []
    # The design allows something: a cluster's PS and worker, both ways, and the notebook client.
    assert ("tfk8s-alice/one-worker-0", "tfk8s-alice/one-ps-0") in allowed[2222]
    assert ("tfk8s-bob/jupyter", "tfk8s-bob/two-ps-0") in allowed[2222]
    assert ("tfk8s-bob/jupyter", "tfk8s-bob/one-ps-0") not in allowed[2222]
    # The API server as the platform read it from the live EndpointSlice: PS pods may reach it alone.
    live = kube.get("endpointslices", "default", "kubernetes")
    addresses = sorted(f"{a}/32" for e in live["endpoints"] for a in e["addresses"])
    (ps_api,) = [p for p in kube.get("networkpolicies", "tfk8s-alice") if p["metadata"]["name"] == "tfk8s-ps-api"]
    (rule,) = ps_api["spec"]["egress"]
    assert sorted(peer["ipBlock"]["cidr"] for peer in rule["to"]) == addresses
    assert [p["port"] for p in rule["ports"]] == [p["port"] for p in live["ports"]]
    print(render(allowed[2222], pods))  # the README's matrix (pytest -s shows it)


def render(allowed: set[tuple[str, str]], pods: list[str]) -> str:
    """The port-2222 matrix as the README shows it: rows are sources, columns targets."""
    short = [re.sub(r"^tfk8s-", "", p) for p in pods]
    lines = ["| from \\ to | " + " | ".join(short) + " |", "|---" * (len(pods) + 1) + "|"]
    for s, label in zip(pods, short, strict=True):
        lines.append(f"| {label} | " + " | ".join("✓" if (s, t) in allowed else "·" for t in pods) + " |")
    return "\n".join(lines)
