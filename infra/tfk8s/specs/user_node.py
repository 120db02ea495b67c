"""The User Node's patch, from the live node (pure): the taint tfk8s sets, whose other taints would
conflict with it, and the address users reach the node at.

A node's taints are one atomic list, so what the patch may set depends on who else set taints:
`patch_taints` refuses (UserNodeTaken) rather than conflict or delete another manager's. The
component builds its patch with it (tfk8s.components.user_node), and the program and the doctor
refuse with the same words before anything is declared (tfk8s.checks.user_node).
"""

from __future__ import annotations

from typing import Any

from tfk8s.errors import UserNodeTaken
from tfk8s.settings.platform import UserNodeSettings

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


def patch_taints(settings: UserNodeSettings, live: Any) -> list[dict[str, str]]:
    """The taint list of the User Node's patch, from the live node: ours, or UserNodeTaken before
    anything is patched; none on a node shared with training (`sharedWithTraining`), whose taints
    the patch leaves to their managers.

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


def node_address(settings: UserNodeSettings, status: Any) -> str | None:
    """The configured address, else the InternalIP (then ExternalIP, Hostname) from live status."""
    if settings.address:
        return settings.address
    addresses = {a.get("type"): a.get("address") for a in (status or {}).get("addresses") or []}
    return addresses.get("InternalIP") or addresses.get("ExternalIP") or addresses.get("Hostname")
