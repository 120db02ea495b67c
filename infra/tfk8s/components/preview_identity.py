"""The pull requests' preview identity, declared by the platform (`platform.gitops.previewIdentity`):
the ClusterRole its tenants bind it to in their namespaces, and the policy that lets it dry-run
alone (what each says and why: tfk8s.specs.preview_identity).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from tfk8s.kube import objects as kube
from tfk8s.settings.contract import PlatformKind
from tfk8s.specs import preview_identity
from tfk8s.specs.experimenter_rights import program_rules, rules_for_role
from tfk8s.specs.ownership import Owner


@dataclass(frozen=True, kw_only=True)
class PreviewIdentityArgs:
    layouts: PlatformKind
    """The platform's Layout kind, which experiments declare."""
    queueing: bool
    """The platform's `queueing.enabled`: its experiments declare JobSets instead of Deployments and Jobs."""
    owner: Owner


class PreviewIdentity(pulumi.ComponentResource):
    """The preview role (`role`: its name, which the platform publishes for its tenants) and the
    dry-run-only policy, bound with Deny everywhere."""

    role: pulumi.Output[str]

    def __init__(self, name: str, args: PreviewIdentityArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("tfk8s:index:PreviewIdentity", name, None, opts)
        meta = {"labels": args.owner.labels(), "annotations": args.owner.annotations()}
        child = pulumi.ResourceOptions(parent=self)
        policy = kube.ValidatingAdmissionPolicy(
            f"{name}-dry-run-only", metadata=meta, spec=preview_identity.dry_run_only(), opts=child
        )
        binding = kube.ValidatingAdmissionPolicyBinding(
            f"{name}-dry-run-only",
            metadata=meta,
            spec={"policyName": policy.name, "validationActions": ["Deny"]},
            opts=child,
        )
        # After the policy's binding, deleted before it: the role never grants a write undry-run.
        # What the program needs of the experimenter table: no Secret, log or exec (tfk8s.specs.preview_identity).
        rules = program_rules(args.layouts, queueing=args.queueing)
        cluster_role = kube.ClusterRole(
            f"{name}-role",
            metadata=meta,
            rules=rules_for_role(rules),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[binding]),
        )
        self.role = cluster_role.name
        self.register_outputs({"role": self.role})
