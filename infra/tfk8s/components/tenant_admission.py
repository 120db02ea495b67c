"""The platform's ValidatingAdmissionPolicies in its tenants' namespaces, declared: each policy of
tfk8s.specs.tenant_admission (what RBAC leaves open, closed by the API server itself, and why),
bound with Deny.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi

from tfk8s.kube import objects as kube
from tfk8s.settings.contract import PlatformKind
from tfk8s.settings.platform import PlacementSettings, UserNodeSettings
from tfk8s.settings.queueing import QueueingSettings
from tfk8s.specs.ownership import Owner
from tfk8s.specs.tenant_admission import policies


@dataclass(frozen=True, kw_only=True)
class TenantAdmissionArgs:
    group: str
    """The platform's group: its tenant namespaces carry it (`namespace_labels`)."""
    tenants: PlatformKind
    """The platform's Tenant kind: who may create Tenants is the platform team, exempt from the rules."""
    user_node: UserNodeSettings
    placement: PlacementSettings
    owner: Owner
    queueing: bool = False
    """The platform's `queueing.enabled`: its experiments' JobSets are checked too."""
    kueue: str = QueueingSettings.model_fields["controller"].default
    """The user name Kueue's controller acts as (`queueing.controller`): it alone resumes a JobSet."""


class TenantAdmission(pulumi.ComponentResource):
    """The policies of `policies`, each bound with Deny in the platform's tenant namespaces."""

    def __init__(self, name: str, args: TenantAdmissionArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("tfk8s:index:TenantAdmission", name, None, opts)
        meta = {"labels": args.owner.labels(), "annotations": args.owner.annotations()}
        child = pulumi.ResourceOptions(parent=self)
        self.policies: dict[str, Any] = {}
        self.bindings: dict[str, Any] = {}
        shorts = policies(args.group, args.tenants, args.user_node, args.placement, queueing=args.queueing, kueue=args.kueue)
        for short, spec in shorts.items():
            policy = kube.ValidatingAdmissionPolicy(f"{name}-{short}", metadata=meta, spec=spec, opts=child)
            self.policies[short] = policy
            self.bindings[short] = kube.ValidatingAdmissionPolicyBinding(
                f"{name}-{short}",
                metadata=meta,
                spec={"policyName": policy.name, "validationActions": ["Deny"]},
                opts=child,
            )
        self.register_outputs({})
