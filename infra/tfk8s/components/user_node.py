"""The User Node: an existing node tainted and labelled so that only user-facing pods run there."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from tfk8s.kube import objects as kube
from tfk8s.pulumi_errors import shown_when_raised
from tfk8s.settings.platform import UserNodeSettings
from tfk8s.specs.user_node import node_address, patch_taints


@dataclass(frozen=True, kw_only=True)
class UserNodeArgs:
    node: UserNodeSettings  # an existing node: its name, the taint and label key, the address users reach


class UserNode(pulumi.ComponentResource):
    """Patches (never owns) the node: `pulumi destroy` removes only our taint and label.

    The node is read first and the patch's taints are built from it (tfk8s.specs.user_node.patch_taints),
    so a node whose taints belong to someone else (UserNodeTaken) stops `pulumi preview`/`up` before
    the patch is sent. Tenants check it has room for their pods (tfk8s.checks.user_node.check_room).
    """

    address: pulumi.Output[str | None]
    checked_taints: pulumi.Output[list[dict[str, str]]]

    def __init__(self, name: str, args: UserNodeArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("tfk8s:index:UserNode", name, None, opts)
        settings = args.node
        self.live = live = kube.Node.get(f"{name}-live", settings.name, opts=pulumi.ResourceOptions(parent=self))

        # Refused here too for a program of one's own (tfk8s's checks the node before it declares it).
        self.checked_taints = pulumi.Output.all(live.metadata, live.spec).apply(
            shown_when_raised(lambda ms: patch_taints(settings, {"metadata": ms[0], "spec": ms[1]}))
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
