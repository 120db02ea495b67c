"""Who can reach whom, computed by a real NetworkPolicy engine from the live policies and pods.

kwok runs no containers and enforces no policy, so nothing here sends a packet: cyclonus evaluates
the live policies offline (policy_matrix.py; test_real_network.py sends real packets on the real
node). Two tenants, alice and bob, each run one experiment `net` of two clusters: `one`
(between-graph) and `two` (in-graph, driven by the tenant's Jupyter). The matrix must be exactly
the design of tfk8s.specs.network_policy, and every pair across tenants denied.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from drivers import Cli, Kube
from policy_matrix import designed, evaluate

TENANTS = ("alice", "bob")
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


def test_the_live_policies_allow_exactly_the_designed_pairs_and_nothing_across_tenants(
    kube: Kube, experiments: list[str], tmp_path: Path
) -> None:
    namespaces = [f"tfk8s-{user}" for user in TENANTS]
    matrices, pods = evaluate(kube, namespaces, tmp_path)
    # Per tenant: the five of tfk8s.specs.network_policy's tenant policies and one per cluster.
    policies = [p for p in kube.get("networkpolicies") if p["metadata"]["namespace"] in namespaces]
    assert len(policies) == len(namespaces) * (5 + 2), [p["metadata"]["name"] for p in policies]
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
    print(render(allowed[2222], pods))  # docs/security.md's matrix (pytest -s shows it)


def render(allowed: set[tuple[str, str]], pods: list[str]) -> str:
    """The port-2222 matrix as docs/security.md shows it: rows are sources, columns targets."""
    short = [re.sub(r"^tfk8s-", "", p) for p in pods]
    lines = ["| from \\ to | " + " | ".join(short) + " |", "|---" * (len(pods) + 1) + "|"]
    for s, label in zip(pods, short, strict=True):
        lines.append(f"| {label} | " + " | ".join("✓" if (s, t) in allowed else "·" for t in pods) + " |")
    return "\n".join(lines)
