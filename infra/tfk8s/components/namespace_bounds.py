"""What bounds a user's namespace, for `UserEnvironment` (tfk8s.components.user_env): its
ResourceQuota and LimitRange, its network policies, and what the user's identities may do there.

Each function declares its objects as children of the environment (`parent`), under the logical
names the tenant stack first gave them: renaming one would replace it.
"""

from __future__ import annotations

from typing import Any

import pulumi

from tfk8s.kube import objects as kube
from tfk8s.settings.contract import PlatformFacts
from tfk8s.settings.tenant import TenantSettings
from tfk8s.specs import network_policy, preview_identity, quota, tenant_access
from tfk8s.specs.labels import labels
from tfk8s.specs.ownership import Owner


def metadata(
    owner: Owner, ns: pulumi.Input[str], own_labels: dict[str, str], *, annotations: dict[str, str] | None = None, **extra: Any
) -> dict[str, Any]:
    """An object's metadata in the user's namespace: its own labels and annotations and its stack's mark."""
    return {
        "namespace": ns,
        "labels": {**own_labels, **owner.labels()},
        "annotations": {**(annotations or {}), **owner.annotations()},
        **extra,
    }


def declare_quota(
    name: str, user: TenantSettings, platform: PlatformFacts, owner: Owner, ns: pulumi.Input[str], parent: pulumi.Resource
) -> tuple[kube.ResourceQuota, kube.LimitRange]:
    """The namespace's ResourceQuota and LimitRange (tfk8s.specs.quota). The LimitRange sizes containers
    that set no resources (a user's own pods): without it the quota would refuse them."""
    child = pulumi.ResourceOptions(parent=parent)
    own_labels = labels(user.name, "quota")
    resource_quota = kube.ResourceQuota(
        f"{name}-quota",
        metadata=metadata(owner, ns, own_labels, name=quota.QUOTA_NAME),
        spec=quota.resource_quota_spec(user.effective_quota(platform.default_quota)),
        opts=child,
    )
    limit_range = kube.LimitRange(
        f"{name}-container-defaults",
        metadata=metadata(owner, ns, own_labels, name=quota.LIMIT_RANGE_NAME),
        spec=quota.limit_range_spec(platform.container_defaults),
        opts=child,
    )
    return resource_quota, limit_range


def declare_network_policies(
    name: str, user: TenantSettings, platform: PlatformFacts, owner: Owner, ns: pulumi.Input[str], parent: pulumi.Resource
) -> list[kube.NetworkPolicy]:
    """Deny by default, then what the namespace's pods need (tfk8s.specs.network_policy); each training
    cluster adds its own. Declared before the apps and volumes: no pod of the namespace starts unshielded."""
    own_labels = labels(user.name, "network")
    return [
        kube.NetworkPolicy(
            f"{name}-{policy_name}",
            metadata=metadata(owner, ns, own_labels, name=policy_name),
            spec=spec,
            opts=pulumi.ResourceOptions(parent=parent),
        )
        for policy_name, spec in network_policy.tenant_policies(user.name, platform.network, platform.ports).items()
    ]


def declare_access(
    user: TenantSettings,
    platform: PlatformFacts,
    owner: Owner,
    ns: pulumi.Input[str],
    parent: pulumi.Resource,
    *,
    token_secret: str,
) -> list[pulumi.Resource]:
    """The user's identities (none: only the platform team's act here) get the platform's experimenter
    role in this namespace alone, and may `get` their Jupyter token's Secret (`token_secret`) and no other;
    the pull requests' preview identity, where the platform has one, gets its preview role here."""
    child = pulumi.ResourceOptions(parent=parent)
    meta = metadata(owner, ns, labels(user.name, "tenant"))
    previews: list[pulumi.Resource] = []
    if platform.preview_role is not None:
        previews.append(
            kube.RoleBinding(
                "previews",
                metadata=meta,
                role_ref=tenant_access.role_ref("ClusterRole", platform.preview_role),
                subjects=[preview_identity.subject()],
                opts=child,
            )
        )
    # Logical names without the environment's, as the tenant stack first declared them: a program
    # holds one UserEnvironment whose user has identities.
    members = tenant_access.subjects(user.identities)
    if not members:
        return previews
    experimenters = kube.RoleBinding(
        "experimenters",
        metadata=meta,
        role_ref=tenant_access.role_ref("ClusterRole", platform.experimenter_role),
        subjects=members,
        opts=child,
    )
    reader = kube.Role("jupyter-token-reader", metadata=meta, rules=tenant_access.secret_reader_rules(token_secret), opts=child)
    readers = kube.RoleBinding(
        "jupyter-token-reader",
        metadata=meta,
        role_ref=tenant_access.role_ref("Role", reader.name),
        subjects=members,
        opts=child,
    )
    return [*previews, experimenters, reader, readers]
