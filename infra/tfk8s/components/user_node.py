"""The User Node: an existing node tainted and labelled so that only user-facing pods run there."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pulumi

from tfk8s.errors import UserNodeTaken, UserNodeTooSmall
from tfk8s.kube import objects as kube
from tfk8s.pulumi_errors import shown_when_raised
from tfk8s.schema.platform import UserNodeSettings
from tfk8s.schema.quantities import parse_quantity
from tfk8s.specs.quota import format_amount

# pulumi-kubernetes applies as `pulumi-kubernetes-<hash>`; any other manager is someone else.
PULUMI_MANAGER_PREFIX = "pulumi-kubernetes"


def our_taint(settings: UserNodeSettings) -> dict[str, str]:
    return {"key": settings.taint_key, "value": "true", "effect": "NoSchedule"}


def foreign_taint_managers(metadata: Any) -> list[str]:
    """Field managers other than Pulumi's that own the node's `.spec.taints`."""
    owners = []
    for entry in (metadata or {}).get("managedFields") or []:
        fields = (entry.get("fieldsV1") or {}).get("f:spec") or {}
        manager = entry.get("manager") or "?"
        if "f:taints" in fields and not manager.startswith(PULUMI_MANAGER_PREFIX):
            owners.append(manager)
    return sorted(set(owners))


def checked_taints(settings: UserNodeSettings, live: Any) -> list[dict[str, str]]:
    """Our taint list for the patch, or UserNodeTaken before anything is patched; none on a node
    shared with training (`sharedWithTraining`), whose taints the patch leaves to their managers.

    Kubernetes keeps a node's taints as one atomic list: a server-side apply of ours next to
    taints another manager (kubectl taint, kubelet --register-with-taints, a cloud controller)
    set fails with a field conflict, and forcing it would delete theirs. Applying exactly the
    value already there is no conflict (both become owners), so that case passes.
    """
    live = live or {}
    taints = [{k: t.get(k) for k in ("key", "value", "effect")} for t in (live.get("spec") or {}).get("taints") or []]
    managers = foreign_taint_managers(live.get("metadata"))
    if settings.shared_with_training:
        # Ours, from before the node was shared, goes with the patch's next apply; anyone else's
        # keeps the apps and the training pods off (they tolerate neither).
        blocking = [t for t in taints if t["effect"] in ("NoSchedule", "NoExecute")]
        if managers and blocking:
            shown = ", ".join(f"{t['key']}={t.get('value') or ''}:{t['effect']}" for t in blocking)
            raise UserNodeTaken(
                f"tfk8s:platform.userNode.name: node {settings.name!r} has taints [{shown}] set by {', '.join(managers)}; "
                "on a node shared with training (userNode.sharedWithTraining) neither Jupyter and TensorBoard nor the "
                f"training pods tolerate them. Remove them (kubectl taint node {settings.name} "
                f"{' '.join(t['key'] + '-' for t in blocking)}) or choose another node for userNode.name."
            )
        return []
    ours = [our_taint(settings)]
    if managers and taints != ours:
        shown = ", ".join(f"{t['key']}={t.get('value') or ''}:{t['effect']}" for t in taints)
        untaint = " ".join(f"{t['key']}-" for t in taints)
        raise UserNodeTaken(
            f"tfk8s:platform.userNode.name: node {settings.name!r} already has taints [{shown}] set by "
            f"{', '.join(managers)}; Kubernetes keeps a node's taints as one list, so tfk8s cannot add "
            f"its {settings.taint_key} taint without conflicting with them or deleting them. Remove them "
            f"(kubectl taint node {settings.name} {untaint}) or choose another node for userNode.name."
        )
    return ours


def check_room(node: str, status: Any, tenants: int, each: Mapping[str, Decimal], key: str) -> None:
    """UserNodeTooSmall unless the node's allocatable pods, CPU and memory hold `tenants` tenants'
    apps, `each` being one tenant's (`pods`, and `cpu` and `memory` in base units).

    Only that node runs them, and the scheduler leaves a pod it has no room for Pending, so `pulumi
    up` would wait out its timeout: kubelet's default max-pods is 110 (55 tenants with a Jupyter
    and a TensorBoard each), and Jupyter and TensorBoard request the platform's container defaults
    (1 CPU and 2Gi each by default: 16 CPUs hold 7 tenants). What else runs there (daemons that
    tolerate the taint) is not counted: the check refuses only what can never fit. A resource the
    node does not report passes.
    """
    allocatable = (status or {}).get("allocatable") or {}
    short = []
    for resource, per_tenant in each.items():
        reported = allocatable.get(resource)
        if reported is None or tenants * per_tenant <= parse_quantity(str(reported)):
            continue
        needed, has = format_amount(resource, tenants * per_tenant), format_amount(resource, parse_quantity(str(reported)))
        where = f"where node {node!r} allows {has} (status.allocatable.{resource})"
        short.append(f"{needed} {_NAMES[resource]} with this one, {where}")
    if short:
        raise UserNodeTooSmall(
            f"{key}: the tenants' Jupyter and TensorBoard pods all run on the User Node; they need "
            + "; ".join(short)
            + ". Raise that node's kubelet maxPods or give it more CPU and memory, lower the platform stack's "
            "tfk8s:platform.containerDefaults (the apps' size), or put the tenant on another platform stack."
        )


_NAMES = {"pods": "pods", "cpu": "CPUs", "memory": "of memory"}


def node_address(settings: UserNodeSettings, status: Any) -> str | None:
    """The configured address, else the InternalIP (then ExternalIP, Hostname) from live status."""
    if settings.address:
        return settings.address
    addresses = {a.get("type"): a.get("address") for a in (status or {}).get("addresses") or []}
    return addresses.get("InternalIP") or addresses.get("ExternalIP") or addresses.get("Hostname")


@dataclass(frozen=True, kw_only=True)
class UserNodeArgs:
    node: UserNodeSettings  # an existing node: its name, the taint and label key, the address users reach


class UserNode(pulumi.ComponentResource):
    """Patches (never owns) the node: `pulumi destroy` removes only our taint and label.

    The node is read first and the patch's taints are computed from it (`checked_taints`), so a
    node whose taints belong to someone else (UserNodeTaken) stops `pulumi preview`/`up` before the
    patch is sent. Tenants check it has room for their pods (`check_room`).
    """

    address: pulumi.Output[str | None]
    checked_taints: pulumi.Output[list[dict[str, str]]]

    def __init__(self, name: str, args: UserNodeArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("tfk8s:index:UserNode", name, None, opts)
        settings = args.node
        self.live = live = kube.Node.get(f"{name}-live", settings.name, opts=pulumi.ResourceOptions(parent=self))

        # Checked again here for a program of one's own (tfk8s's checks the node before it declares it).
        self.checked_taints = pulumi.Output.all(live.metadata, live.spec).apply(
            shown_when_raised(lambda ms: checked_taints(settings, {"metadata": ms[0], "spec": ms[1]}))
        )
        # A shared node's patch names no taints at all: an empty list would be a claim on the
        # node's one atomic taint list, in conflict with any other manager's.
        self.patch = kube.NodePatch(
            name,
            metadata={"name": settings.name, "labels": {settings.taint_key: "true"}},
            spec=None if settings.shared_with_training else {"taints": self.checked_taints},
            opts=pulumi.ResourceOptions(parent=self),
        )
        # Provider output types are dict subclasses, so node_address reads them like plain dicts.
        self.address = self.patch.status.apply(lambda status: node_address(settings, status))
        self.register_outputs({"address": self.address, "checked_taints": self.checked_taints})
