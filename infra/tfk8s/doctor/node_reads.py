"""The doctor's checks of the nodes it read (tfk8s.doctor.reads.list_nodes): Ready nodes for
training, the User Node, the tenants' quota against the training nodes, and the pod networks the
platform names against the nodes' pod ranges. Pure: each returns findings (tfk8s.doctor.findings).

The User Node's taints are judged by the platform's own check, so the doctor and `pulumi up`
cannot disagree.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from tfk8s.checks import user_node as user_node_checks
from tfk8s.doctor.findings import Finding, advice, failed, passed
from tfk8s.doctor.target import Placement
from tfk8s.errors import UserNodeTaken
from tfk8s.settings.platform import PlatformSettings
from tfk8s.settings.quantities import parse_quantity
from tfk8s.specs.quota import format_amount
from tfk8s.specs.user_node import node_address

Nodes = Sequence[Mapping[str, Any]]


def is_ready(node: Mapping[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def name_of(node: Mapping[str, Any]) -> str:
    return str((node.get("metadata") or {}).get("name"))


def eligible(node: Mapping[str, Any], placement: Placement) -> bool:
    """A node a probe pod of `placement` may be scheduled on: Ready, schedulable, its labels matching
    the selector and every NoSchedule or NoExecute taint tolerated."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    spec = node.get("spec") or {}
    taints = [t for t in spec.get("taints") or [] if t.get("effect") in ("NoSchedule", "NoExecute")]
    return (
        is_ready(node)
        and not spec.get("unschedulable")
        and all(labels.get(k) == v for k, v in placement.node_selector.items())
        and all(t.get("key") in placement.tolerations for t in taints)
    )


def nodes(nodes: Nodes, settings: PlatformSettings, placement: Placement, *, user_node: bool) -> list[Finding]:
    """Ready nodes for training; the User Node (it exists, is Ready, has an address, carries no
    foreign taints: the platform's own check); the tenants' quota against the training nodes."""
    findings = []
    training = [n for n in nodes if eligible(n, placement)]
    if training:
        findings.append(
            passed("nodes", f"{len(training)} Ready node(s) for training: {', '.join(name_of(n) for n in training[:5])}")
        )
    else:
        findings.append(
            failed(
                "nodes",
                f"no Ready, schedulable node matches the probes' placement ({len(nodes)} node(s) in all)",
                "add nodes, or give --node-selector and --toleration as your experiments' placement",
            )
        )
    if user_node:
        findings.append(user_node_finding(nodes, settings))
    findings += capacity(training, settings)
    return findings


def user_node_finding(nodes: Nodes, settings: PlatformSettings) -> Finding:
    wanted = settings.user_node
    assert wanted is not None
    node = next((n for n in nodes if name_of(n) == wanted.name), None)
    key = "tfk8s:platform.userNode.name"
    if node is None:
        return failed(
            "user-node", f"{key}: the cluster has no node {wanted.name!r}", "name an existing node (`kubectl get nodes`)"
        )
    try:
        user_node_checks.check_taints(wanted, node)
    except UserNodeTaken as error:
        return failed("user-node", str(error), "as the message says")
    if not is_ready(node):
        return failed("user-node", f"node {wanted.name!r} is not Ready", "fix the node or choose another for userNode.name")
    address = node_address(wanted, node.get("status"))
    if address is None:
        return failed(
            "user-node",
            f"node {wanted.name!r} reports no address, so users have none to reach Jupyter and TensorBoard at",
            "set tfk8s:platform.userNode.address to the address users reach the node's NodePorts at",
        )
    return passed("user-node", f"node {wanted.name!r} is Ready; users reach its NodePorts at {address}")


def _total(nodes: Nodes, resource: str) -> Decimal:
    return sum(
        (parse_quantity(str(((n.get("status") or {}).get("allocatable") or {}).get(resource, "0"))) for n in nodes), Decimal(0)
    )


def capacity(training: Nodes, settings: PlatformSettings) -> list[Finding]:
    """Advice when one tenant's default quota, or queueing's capacity, is more than the training nodes hold."""
    if not training:
        return []
    asked = {"cpu": parse_quantity(settings.default_quota.cpu), "memory": parse_quantity(settings.default_quota.memory)}
    where = "tfk8s:platform.defaultQuota"
    if settings.queueing.enabled and settings.queueing.capacity is not None:
        queued = settings.queueing.capacity
        asked = {"cpu": parse_quantity(queued.cpu), "memory": parse_quantity(queued.memory)}
        where = "tfk8s:platform.queueing.capacity"
    over = [
        f"{format_amount(r, asked[r])} {r} where the nodes have {format_amount(r, _total(training, r))}"
        for r in ("cpu", "memory")
        if asked[r] > _total(training, r)
    ]
    if not over:
        return [passed("capacity", f"{where} fits in the training nodes' allocatable CPU and memory")]
    return [
        advice(
            "capacity",
            f"{where} asks {'; '.join(over)}: an experiment of that size is admitted and then waits Pending",
            f"lower {where} to what the nodes hold, or add nodes",
        )
    ]


def pod_networks(nodes: Nodes, settings: PlatformSettings) -> list[Finding]:
    """`network.podCidrs` covers every node's pod range: the apps refuse those addresses, and a range
    left out is one whose pods could reach Jupyter and TensorBoard around the policies."""
    configured = [ipaddress.ip_network(c, strict=False) for c in settings.network.pod_cidrs]
    ranges = [(name_of(n), c) for n in nodes for c in (n.get("spec") or {}).get("podCIDRs") or []]
    if not configured:
        return [
            advice(
                "pod-cidrs",
                "tfk8s:platform.network.podCidrs is not set: the apps' firewall does not refuse pod addresses",
                "set it to the cluster's pod network" + (f" ({', '.join(sorted({c for _, c in ranges}))})" if ranges else ""),
            )
        ]
    outside = [f"{name} {c}" for name, c in ranges if not any(_within(c, net) for net in configured)]
    if outside:
        return [
            failed(
                "pod-cidrs",
                f"tfk8s:platform.network.podCidrs does not cover the pod range of node(s) {', '.join(outside)}",
                "add the cluster's pod network (its cluster CIDR) to tfk8s:platform.network.podCidrs",
            )
        ]
    if not ranges:
        return [advice("pod-cidrs", "the nodes report no spec.podCIDRs (the CNI assigns addresses itself): not compared")]
    return [passed("pod-cidrs", f"tfk8s:platform.network.podCidrs covers every node's pod range ({len(ranges)})")]


def _within(cidr: str, network: ipaddress.IPv4Network | ipaddress.IPv6Network) -> bool:
    inner = ipaddress.ip_network(cidr, strict=False)
    return inner.version == network.version and inner.subnet_of(network)  # type: ignore[arg-type]
