"""Experiments register with their tenant, tenants with their platform, and neither the platform
nor a tenant can be destroyed from under what registered with it.

Each platform stack defines its own kinds in the group `<id>.layouts.tfk8s.io` (`<id>` hashes the
platform's identity, so platforms sharing a cluster never share a kind):
  * `Layout`, namespaced: an experiment creates one per training cluster in its tenant's namespace
    (tfk8s.specs.layout_document); its spec is the cluster's layout, which the tenant's notebook reads;
  * `Tenant`, cluster-wide: a tenant stack creates one, named after its user, before anything else
    of the tenant and deletes it last.
Their existence is what the guards check.

`pulumi destroy` does not run our program, so the refusals live in the API server: two
ValidatingAdmissionPolicies (Kubernetes >= 1.30), one per guard:
  * a tenant's guard ConfigMap (in its namespace) may not be deleted while any Layout exists there;
  * the platform's guard, the experimenter ClusterRole every tenant binds, may not be deleted while
    any Tenant exists.
Each guard depends on everything else of its stack, so Pulumi deletes it first: the destroy stops
there, with the policy's message naming the stacks still in the way, before anything else is
touched.

Why CRDs and not built-in kinds (Namespaces, ConfigMaps) as the policies' params: an API server
stops resolving params of a built-in kind for good once no binding uses that kind
(kubernetes#130887), and with `parameterNotFoundAction: Allow` the guard would then silently
allow. Reproduced on this project's 1.34 cluster: a second platform's guard let its destroy through
after the first platform was destroyed. CRD kinds are not affected, and each platform has its own.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi

from tfk8s.kube import objects as kube
from tfk8s.kube.api_paths import CLUSTER_ROLE, CUSTOM_RESOURCE_DEFINITION
from tfk8s.settings.contract import PlatformKind
from tfk8s.specs.ownership import Claimed, Owner

# The guards' label: its value is the platform's group, which each policy selects on.
GUARD_LABEL = "tfk8s.io/platform-guard"
GUARD_NAME = "tfk8s-tenant"
TENANT_IN_USE = (
    "'the tfk8s tenant is still used by experiment stack ' + params.metadata.labels['tfk8s.io/stack'] + "
    "' (' + params.metadata.name + ' in ' + params.metadata.namespace + '): destroy the experiment stacks "
    "first (pulumi destroy -s <experiment>), then the tenant'"
)
PLATFORM_IN_USE = (
    "'the tfk8s platform is still used by tenant stack ' + params.metadata.labels['tfk8s.io/stack'] + "
    "' (tenant ' + params.metadata.name + '): destroy the tenant stacks first (pulumi destroy -s <tenant>), "
    "then the platform'"
)
# An UPDATE that removes or changes the guard label would take the object out of the policy's
# objectSelector, and its DELETE would then pass: refused like the DELETE itself.
KEEPS_GUARD_LABEL = (
    "request.operation != 'UPDATE' || (has(object.metadata.labels) && "
    f"'{GUARD_LABEL}' in object.metadata.labels && "
    f"object.metadata.labels['{GUARD_LABEL}'] == oldObject.metadata.labels['{GUARD_LABEL}'])"
)
STRIPPED = f"'removing or changing the label {GUARD_LABEL} would unguard it; refused: ' + "


def platform_group(owner: Owner) -> str:
    """The platform's own API group: it hashes the platform's identity, so platforms never share it."""
    digest = hashlib.sha256(f"{owner.organization}/{owner.project}/{owner.stack}".encode()).hexdigest()[:10]
    return f"p{digest}.layouts.tfk8s.io"


def layout_kind(group: str) -> PlatformKind:
    return PlatformKind(group=group, version="v1", kind="Layout", plural="layouts")


def tenant_kind(group: str) -> PlatformKind:
    return PlatformKind(group=group, version="v1", kind="Tenant", plural="tenants", namespaced=False)


def experimenter_role(group: str) -> str:
    """The name of the platform's experimenter ClusterRole (its group's id keeps platforms apart)."""
    return f"tfk8s-experimenter-{group.split('.', 1)[0]}"


def fixed_objects(group: str, key: str) -> list[Claimed]:
    """What PlatformGuard creates under fixed names: its kinds' CRDs and the experimenter role
    (`key`: what chose them)."""
    return [
        *(Claimed(kind=CUSTOM_RESOURCE_DEFINITION, name=k.crd_name, key=key) for k in (layout_kind(group), tenant_kind(group))),
        Claimed(kind=CLUSTER_ROLE, name=experimenter_role(group), key=key),
    ]


def _crd(name: str, kind: PlatformKind, description: str, opts: pulumi.ResourceOptions, meta: dict[str, Any]) -> Any:
    return kube.CustomResourceDefinition(
        name,
        metadata={**meta, "name": kind.crd_name},
        spec={
            "group": kind.group,
            "scope": "Namespaced" if kind.namespaced else "Cluster",
            "names": {
                "kind": kind.kind,
                "plural": kind.plural,
                "singular": kind.kind.lower(),
                "listKind": f"{kind.kind}List",
            },
            "versions": [
                {
                    "name": kind.version,
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": description,
                            "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                        }
                    },
                }
            ],
        },
        opts=opts,
    )


def _refusal(
    name: str, kind: PlatformKind, matched: dict[str, Any], message: str, meta: dict[str, Any], opts: pulumi.ResourceOptions
) -> Any:
    """A policy refusing DELETE of what `matched` selects while any object of `kind` exists (and an
    UPDATE that strips its guard label), and its binding. Without a namespace, namespaced params are
    looked up in the namespace of the object being deleted; cluster-scoped ones cluster-wide."""
    policy = kube.ValidatingAdmissionPolicy(
        f"{name}-policy",
        metadata=meta,
        spec={
            "failurePolicy": "Fail",
            "paramKind": {"apiVersion": kind.api_version, "kind": kind.kind},
            "matchConstraints": matched,
            # The objectSelector matches an UPDATE if the old or the new object carries the label.
            "validations": [
                {"expression": "request.operation != 'DELETE'", "messageExpression": message},
                {"expression": KEEPS_GUARD_LABEL, "messageExpression": STRIPPED + message},
            ],
        },
        opts=opts,
    )
    return kube.ValidatingAdmissionPolicyBinding(
        f"{name}-binding",
        metadata=meta,
        spec={
            "policyName": policy.name,
            "validationActions": ["Deny"],
            "paramRef": {"selector": {}, "parameterNotFoundAction": "Allow"},
        },
        opts=opts,
    )


@dataclass(frozen=True, kw_only=True)
class PlatformGuardArgs:
    owner: Owner
    group: str  # the platform's API group (`platform_group(owner)`)
    with_policy: bool  # the cluster has ValidatingAdmissionPolicy (tfk8s.specs.tenant_admission.policy_supported)
    # What the experimenter role lets its tenants do (tfk8s.specs.experimenter_rights.experimenter_rules, as RBAC rules).
    experimenter_rules: list[dict[str, Any]]
    # The rest of the platform: the role is deleted before any of it.
    guarded: Sequence[pulumi.Resource] = ()


class PlatformGuard(pulumi.ComponentResource):
    """The Layout and Tenant CRDs, (>= 1.30) the two policies with their bindings, and the platform's
    own guard: the experimenter ClusterRole tenants bind, deleted before everything it depends on
    (`guarded` among them) and only when no Tenant is left (>= 1.30).

    Objects under fixed names: `fixed_objects`."""

    experimenter_role: pulumi.Output[str]

    def __init__(self, name: str, args: PlatformGuardArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("tfk8s:index:PlatformGuard", name, None, opts)
        owner, group = args.owner, args.group
        self.layouts, self.tenants = layout_kind(group), tenant_kind(group)
        meta = {"labels": owner.labels(), "annotations": owner.annotations()}
        child = pulumi.ResourceOptions(parent=self)
        self.crds = [
            _crd(
                f"{name}-layouts",
                self.layouts,
                "A training cluster of an experiment stack, as its tenant's notebook drives it.",
                child,
                meta,
            ),
            _crd(f"{name}-tenants", self.tenants, "A tenant stack of this platform: its user's namespace.", child, meta),
        ]
        self.bindings: list[Any] = []
        if args.with_policy:
            after_crds = pulumi.ResourceOptions(parent=self, depends_on=self.crds)
            tenant_guards = {
                "resourceRules": [
                    {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"], "operations": ["DELETE", "UPDATE"]}
                ],
                "objectSelector": {"matchLabels": {GUARD_LABEL: group}},
            }
            platform_guard = {
                "resourceRules": [
                    {
                        "apiGroups": ["rbac.authorization.k8s.io"],
                        "apiVersions": ["v1"],
                        "resources": ["clusterroles"],
                        "operations": ["DELETE", "UPDATE"],
                    }
                ],
                "objectSelector": {"matchLabels": {GUARD_LABEL: group}},
            }
            self.bindings = [
                _refusal(f"{name}-tenant", self.layouts, tenant_guards, TENANT_IN_USE, meta, after_crds),
                _refusal(f"{name}-platform", self.tenants, platform_guard, PLATFORM_IN_USE, meta, after_crds),
            ]
        self.role = kube.ClusterRole(
            f"{name}-experimenter",
            metadata={
                "name": experimenter_role(group),
                "labels": {**owner.labels(), GUARD_LABEL: group},
                "annotations": owner.annotations(),
            },
            rules=args.experimenter_rules,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*self.bindings, *self.crds, *args.guarded]),
        )
        self.experimenter_role = self.role.name
        self.register_outputs({"experimenter_role": self.experimenter_role})


def tenant_guard(
    name: str, namespace: pulumi.Input[str], group: str, owner: Owner, depends_on: Sequence[pulumi.Resource]
) -> kube.ConfigMap:
    """A tenant's guard: deleted before everything it depends on, and only when no experiment is left
    (on clusters without the policy, deleted like anything else)."""
    return kube.ConfigMap(
        name,
        metadata={
            "name": GUARD_NAME,
            "namespace": namespace,
            "labels": {**owner.labels(), GUARD_LABEL: group},
            "annotations": owner.annotations(),
        },
        data={"purpose": "deleting this ConfigMap is refused while experiments exist here (tfk8s.guard)"},
        opts=pulumi.ResourceOptions(depends_on=list(depends_on)),
    )
