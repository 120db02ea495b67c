"""The User Node: an existing node tainted and labelled so that only user-facing pods run there."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from tfk8s.settings import UserNodeSettings


def node_address(settings: UserNodeSettings, status: Any) -> str | None:
    """The configured address, else the InternalIP (then ExternalIP, Hostname) from live status."""
    if settings.address:
        return settings.address
    addresses = {a.get("type"): a.get("address") for a in (status or {}).get("addresses") or []}
    return addresses.get("InternalIP") or addresses.get("ExternalIP") or addresses.get("Hostname")


class UserNode(pulumi.ComponentResource):
    """Patches (never owns) the node: `pulumi destroy` removes only our taint and label."""

    address: pulumi.Output[str | None]

    def __init__(self, name: str, settings: UserNodeSettings, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("tfk8s:index:UserNode", name, None, opts)
        self.patch = k8s.core.v1.NodePatch(
            name,
            metadata={"name": settings.name, "labels": {settings.taint_key: "true"}},
            spec={"taints": [{"key": settings.taint_key, "value": "true", "effect": "NoSchedule"}]},
            opts=pulumi.ResourceOptions(parent=self),
        )
        # Provider output types are dict subclasses, so node_address reads them like plain dicts.
        self.address = self.patch.status.apply(lambda status: node_address(settings, status))
        self.register_outputs({"address": self.address})
