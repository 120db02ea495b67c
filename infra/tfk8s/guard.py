"""Experiments register with their platform, and the platform cannot be destroyed from under them.

Each platform stack defines its own namespaced kind, `Layout` in the group `<id>.layouts.tfk8s.io`
(`<id>` hashes the platform's owner mark, so platforms sharing a cluster never share the CRD).
An experiment creates one Layout per training cluster in the user's namespace (tfk8s.layout_document):
its spec is the cluster's layout, which the user's notebook reads, and its existence is what the
guard checks.

`pulumi destroy` of a platform does not run our program, so the refusal lives in the API server:
a ValidatingAdmissionPolicy (Kubernetes >= 1.30) denies deleting a user's guard ConfigMap while
any Layout exists in that namespace. The guards depend on everything else of the platform, so
Pulumi deletes them first: the destroy stops there, with the policy's message naming the
experiment stacks, before Jupyter, TensorBoard, the volumes, the class or the node patch are
touched. Removing a user who still has experiments is refused the same way.

Why a CRD and not the experiments' ConfigMaps as the policy's params: an API server stops
resolving params of a built-in kind for good once no binding uses that kind (kubernetes#130887),
and with `parameterNotFoundAction: Allow` the guard would then silently allow. Reproduced on
this project's 1.34 cluster: a second platform's guard let its destroy through after the first
platform was destroyed. CRD kinds are not affected, and each platform has its own.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import pulumi
import pulumi_kubernetes as k8s

from tfk8s.api_paths import CUSTOM_RESOURCE_DEFINITION
from tfk8s.contract import LayoutKind
from tfk8s.ownership import STACK, Claimed, Owner

GUARD_LABEL = "tfk8s.io/platform-guard"
GUARD_NAME = "tfk8s-platform"
# ValidatingAdmissionPolicy: GA (admissionregistration.k8s.io/v1, on by default) since 1.30.
POLICY_SINCE = (1, 30)


def layout_kind(owner: Owner) -> LayoutKind:
    """The platform's own kind: its group hashes the platform's identity, so platforms never share it."""
    digest = hashlib.sha256(f"{owner.organization}/{owner.project}/{owner.stack}".encode()).hexdigest()[:10]
    return layout_kind_in(f"p{digest}.layouts.tfk8s.io")


def layout_kind_in(group: str) -> LayoutKind:
    """The Layout kind of `group` (the unit tests' platform names a group of its own)."""
    return LayoutKind(group=group, version="v1", kind="Layout", plural="layouts")


def fixed_objects(kind: LayoutKind, key: str) -> list[Claimed]:
    """What PlatformGuard creates under a fixed name: the CRD of the platform's kind (`key`: what chose it)."""
    return [Claimed(kind=CUSTOM_RESOURCE_DEFINITION, name=kind.crd_name, key=key)]


def policy_supported(version: tuple[int, int]) -> bool:
    return version >= POLICY_SINCE


class PlatformGuard(pulumi.ComponentResource):
    """The Layout CRD, the policy and its binding (>= 1.30), and one guard ConfigMap per user namespace."""

    def __init__(
        self, name: str, owner: Owner, kind: LayoutKind, with_policy: bool, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("tfk8s:index:PlatformGuard", name, None, opts)
        self.owner, self.kind = owner, kind
        meta = {"labels": owner.labels(), "annotations": owner.annotations()}
        self.crd = k8s.apiextensions.v1.CustomResourceDefinition(
            f"{name}-layouts",
            metadata={**meta, "name": kind.crd_name},
            spec={
                "group": kind.group,
                "scope": "Namespaced",
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
                                "description": "A training cluster of an experiment stack, as its user's notebook drives it.",
                                "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                            }
                        },
                    }
                ],
            },
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.binding: k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding | None = None
        if with_policy:
            self._build_policy(name, meta)
        self.register_outputs({})

    def _build_policy(self, name: str, meta: dict[str, dict[str, str]]) -> None:
        kind = self.kind
        message = (
            "'the tfk8s platform is still used by experiment stack ' + params.metadata.labels['tfk8s.io/stack'] + "
            "' (' + params.metadata.name + ' in ' + params.metadata.namespace + '): destroy the experiment stacks "
            "first (pulumi destroy -s <experiment>), then the platform'"
        )
        policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
            f"{name}-policy",
            metadata=meta,
            spec={
                "failurePolicy": "Fail",
                "paramKind": {"apiVersion": kind.api_version, "kind": kind.kind},
                "matchConstraints": {
                    "resourceRules": [
                        {"apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"], "operations": ["DELETE"]}
                    ],
                    "objectSelector": {"matchLabels": {GUARD_LABEL: self.owner.labels()[STACK]}},
                },
                "validations": [{"expression": "false", "messageExpression": message}],
            },
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.crd]),
        )
        self.binding = k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
            f"{name}-binding",
            metadata=meta,
            spec={
                "policyName": policy.metadata.name,
                "validationActions": ["Deny"],
                # Without a namespace, params are looked up in the namespace of the guard being deleted.
                "paramRef": {"selector": {}, "parameterNotFoundAction": "Allow"},
            },
            opts=pulumi.ResourceOptions(parent=self),
        )

    def guard(
        self, name: str, namespace: pulumi.Input[str], depends_on: Sequence[pulumi.Resource]
    ) -> k8s.core.v1.ConfigMap | None:
        """A user's guard: deleted before everything it depends on, and only when no experiment is left."""
        if self.binding is None:
            return None
        return k8s.core.v1.ConfigMap(
            name,
            metadata={
                "name": GUARD_NAME,
                "namespace": namespace,
                "labels": {**self.owner.labels(), GUARD_LABEL: self.owner.labels()[STACK]},
                "annotations": self.owner.annotations(),
            },
            data={"purpose": "deleting this ConfigMap is refused while experiments exist here (tfk8s.guard)"},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.binding, self.crd, *depends_on]),
        )
