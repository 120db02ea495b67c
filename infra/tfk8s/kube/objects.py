"""Kubernetes objects as resources of the Kubernetes provider, declared without its SDK's classes.

Why: the SDK's generated classes for the API groups an experiment uses (core/v1, apps/v1,
batch/v1, networking/v1, rbac/v1, apiextensions) took 0.44 s to import, because each group
module defines every input and output type of the group: paid by every `pulumi preview` and `up`,
a third of tfk8s's own fixed cost over Pulumi's floor then (docs/benchmarks.md "Fixed cost"). The provider
needs only what those classes send it: the type token, the object's fields under their API names
(`apiVersion` and `kind` included), the provider version, and which outputs are secret. This
module sends exactly that, so URNs, state and diffs stay what they were
(tests/unit/test_kube_objects.py compares the requests of both, field by field, under mocks).

Outputs are the API's own JSON, as `kubectl get -o json` spells it: `obj.metadata`,
`obj.spec`, `obj.status` are dicts with camelCase keys (the SDK's classes turned them into typed
dicts keyed in snake_case). `obj.name` and `obj.uid` are the two metadata fields other objects
refer to; they are unknown, never an error, while the object does not exist yet (a preview).
"""

from __future__ import annotations

import functools
import importlib.metadata
import re
import threading
from dataclasses import dataclass
from typing import Any, ClassVar

import pulumi

from tfk8s import pulumi_internals

PROVIDER_PACKAGE = "pulumi_kubernetes"


@dataclass(frozen=True)
class Kind:
    """One kind of object, as the provider knows it."""

    api_version: str
    kind: str
    fields: tuple[str, ...]
    """Top-level fields a program sets, by their API names (besides `apiVersion` and `kind`)."""
    server_fields: tuple[str, ...] = ()
    """Fields only the API server writes (`status`): declared so their outputs are read back."""
    secret_fields: tuple[str, ...] = ()
    """Fields whose inputs and outputs are secrets in Pulumi's state (a Secret's `data`)."""
    token_kind: str | None = None
    """The provider's name of the resource where it differs from the object's kind (NodePatch)."""

    @property
    def token(self) -> str:
        # The core group's objects have no group in their apiVersion; the provider calls it `core`.
        group_version = self.api_version if "/" in self.api_version else f"core/{self.api_version}"
        return f"kubernetes:{group_version}:{self.token_kind or self.kind}"


def _camel(python_name: str) -> str:
    head, *rest = python_name.split("_")
    return head + "".join(word.title() for word in rest)


_SEMVER_PRERELEASE = {"a": "alpha", "b": "beta", "rc": "rc"}


def provider_version(pep440: str | None = None) -> str:
    """The provider version the SDK's classes ask the engine for: the installed SDK's own version,
    as semver (4.25.0a1768448096 -> 4.25.0-alpha.1768448096). The engine keys its default provider
    by it, so another version string would be another provider and a diff of every object."""
    found = pep440 or importlib.metadata.version(PROVIDER_PACKAGE)
    match = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)(?:(a|b|rc)(\d+))?(?:\.dev(\d+))?", found)
    if match is None:
        raise ValueError(f"{PROVIDER_PACKAGE} {found}: not a release or pre-release version tfk8s knows how to pass on")
    major, minor, patch, tag, number, dev = match.groups()
    prerelease = f"{_SEMVER_PRERELEASE[tag]}.{number}" if tag else f"dev.{dev}" if dev else None
    return f"{major}.{minor}.{patch}" + (f"-{prerelease}" if prerelease else "")


@functools.cache
def _version() -> str:
    return provider_version()


# A function of the provider that needs no cluster and changes nothing: decoding no YAML.
WARM_UP_INVOKE = "kubernetes:yaml:decode"


def warm_up_provider() -> threading.Thread:
    """Have the engine start and configure the Kubernetes provider now, in the background.

    The engine starts a provider when the program first uses it: here, when the first object is
    declared, after the program's imports and its reads of the stacks and the cluster (~0.3 s).
    The provider's process start and its configuration (it reads the cluster's discovery and
    OpenAPI schema) then came on top, before the first object could be checked: with this, the
    time from the last declaration to the program's end went from 0.53 to 0.35 s (docs/benchmarks.md
    "Fixed cost"). One invoke of a function of the same provider, at the same version, makes the engine
    load it while the program goes on: the provider every object then uses, already configured.
    Nothing is declared, and the answer is not used: a provider that fails to start reports it at
    the first object, as before.

    Every stack, new ones too: on a stack's first `up` the provider's start and configuration
    (0.13 s) were otherwise on the way to the first object, a new experiment's Job among them
    (docs/benchmarks.md "Fixed cost"). The engine records a provider it loaded, so a first `up` the program
    refuses leaves the provider in the state beside the stack itself and the `pulumi` provider of
    the stack reads: no Kubernetes object, and `pulumi destroy` or `pulumi stack rm --force` as
    before. The request goes from a thread of its own because the program runs synchronously
    until its first read; a gRPC call waits without holding the GIL."""
    monitor = pulumi_internals.resource_monitor()  # here: a new thread does not see the program's settings

    def ask() -> None:
        try:
            if monitor is not None:
                pulumi_internals.invoke(monitor, WARM_UP_INVOKE, {"text": ""}, version=_version())
        except Exception:  # noqa: BLE001 -- the provider's own error surfaces at the first object
            pass

    thread = threading.Thread(target=ask, name="tfk8s-provider-warm-up", daemon=True)
    thread.start()
    return thread


class KubeObject(pulumi.CustomResource):
    """A Kubernetes object owned by this stack (or, with `get`, read from the cluster)."""

    KIND: ClassVar[Kind]

    metadata: pulumi.Output[Any]
    spec: pulumi.Output[Any]
    status: pulumi.Output[Any]
    data: pulumi.Output[Any]

    def __init__(self, resource_name: str, opts: pulumi.ResourceOptions | None = None, **fields: Any) -> None:
        self._declare(self.KIND, resource_name, fields, opts)

    def _declare(self, kind: Kind, resource_name: str, fields: dict[str, Any], opts: pulumi.ResourceOptions | None) -> None:
        given = {_camel(name): value for name, value in fields.items()}
        unknown = sorted(set(given) - set(kind.fields))
        if unknown:
            raise TypeError(f"{kind.kind} has no field {', '.join(unknown)}; its fields: {', '.join(kind.fields)}")
        reading = opts is not None and opts.id is not None
        props: dict[str, Any] = {"apiVersion": None if reading else kind.api_version, "kind": None if reading else kind.kind}
        for name in kind.fields:
            value = given.get(name)
            props[name] = pulumi.Output.secret(value) if name in kind.secret_fields and value is not None else value
        props.update({name: None for name in kind.server_fields})
        own = pulumi.ResourceOptions(version=_version(), additional_secret_outputs=list(kind.secret_fields) or None)
        super().__init__(kind.token, resource_name, props, pulumi.ResourceOptions.merge(own, opts))

    @classmethod
    def get(cls, resource_name: str, object_id: pulumi.Input[str], opts: pulumi.ResourceOptions | None = None) -> KubeObject:
        """The live object `<namespace>/<name>` (or `<name>`), read, never changed or deleted."""
        return cls(resource_name, opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(id=object_id)))

    @property
    def name(self) -> pulumi.Output[Any]:
        """`.metadata.name`: the API server's, with the suffix Pulumi's auto-naming adds."""
        return self.metadata.apply(lambda metadata: (metadata or {}).get("name"))

    @property
    def uid(self) -> pulumi.Output[Any]:
        return self.metadata.apply(lambda metadata: (metadata or {}).get("uid"))


STATUS = ("status",)

# Every kind tfk8s declares, with the top-level fields the SDK's class of the kind declares.


class ConfigMap(KubeObject):
    KIND = Kind("v1", "ConfigMap", ("metadata", "data", "binaryData", "immutable"))


class LimitRange(KubeObject):
    KIND = Kind("v1", "LimitRange", ("metadata", "spec"))


class Namespace(KubeObject):
    KIND = Kind("v1", "Namespace", ("metadata", "spec"), server_fields=STATUS)


class Node(KubeObject):
    KIND = Kind("v1", "Node", ("metadata", "spec"), server_fields=STATUS)


class NodePatch(KubeObject):
    KIND = Kind("v1", "Node", ("metadata", "spec"), server_fields=STATUS, token_kind="NodePatch")


class PersistentVolume(KubeObject):
    KIND = Kind("v1", "PersistentVolume", ("metadata", "spec"), server_fields=STATUS)


class PersistentVolumeClaim(KubeObject):
    KIND = Kind("v1", "PersistentVolumeClaim", ("metadata", "spec"), server_fields=STATUS)


class ResourceQuota(KubeObject):
    KIND = Kind("v1", "ResourceQuota", ("metadata", "spec"), server_fields=STATUS)


class Secret(KubeObject):
    KIND = Kind("v1", "Secret", ("metadata", "data", "stringData", "immutable", "type"), secret_fields=("data", "stringData"))


class Service(KubeObject):
    KIND = Kind("v1", "Service", ("metadata", "spec"), server_fields=STATUS)


class ServiceAccount(KubeObject):
    KIND = Kind("v1", "ServiceAccount", ("metadata", "automountServiceAccountToken", "imagePullSecrets", "secrets"))


class Deployment(KubeObject):
    KIND = Kind("apps/v1", "Deployment", ("metadata", "spec"), server_fields=STATUS)


class DeploymentPatch(KubeObject):
    KIND = Kind("apps/v1", "Deployment", ("metadata", "spec"), server_fields=STATUS, token_kind="DeploymentPatch")


class Job(KubeObject):
    KIND = Kind("batch/v1", "Job", ("metadata", "spec"), server_fields=STATUS)


class NetworkPolicy(KubeObject):
    KIND = Kind("networking.k8s.io/v1", "NetworkPolicy", ("metadata", "spec"), server_fields=STATUS)


class ClusterRole(KubeObject):
    KIND = Kind("rbac.authorization.k8s.io/v1", "ClusterRole", ("metadata", "rules", "aggregationRule"))


class Role(KubeObject):
    KIND = Kind("rbac.authorization.k8s.io/v1", "Role", ("metadata", "rules"))


class RoleBinding(KubeObject):
    KIND = Kind("rbac.authorization.k8s.io/v1", "RoleBinding", ("metadata", "roleRef", "subjects"))


class StorageClass(KubeObject):
    KIND = Kind(
        "storage.k8s.io/v1",
        "StorageClass",
        (
            "metadata",
            "provisioner",
            "parameters",
            "reclaimPolicy",
            "volumeBindingMode",
            "allowVolumeExpansion",
            "allowedTopologies",
            "mountOptions",
        ),
    )


class CustomResourceDefinition(KubeObject):
    KIND = Kind("apiextensions.k8s.io/v1", "CustomResourceDefinition", ("metadata", "spec"), server_fields=STATUS)


class ValidatingAdmissionPolicy(KubeObject):
    KIND = Kind("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", ("metadata", "spec"), server_fields=STATUS)


class ValidatingAdmissionPolicyBinding(KubeObject):
    KIND = Kind("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding", ("metadata", "spec"))


class JobSet(KubeObject):
    """One training cluster on a queueing platform (tfk8s.specs.jobset): its status is read back for readiness."""

    KIND = Kind("jobset.x-k8s.io/v1alpha2", "JobSet", ("metadata", "spec"), server_fields=STATUS)


class CustomObject(KubeObject):
    """An object of a kind a CustomResourceDefinition defines (the platform's Layouts and Tenants, Kueue's
    objects). `fields`: its top-level fields besides metadata and spec, by their API names (a Kueue
    WorkloadPriorityClass's `value`)."""

    def __init__(
        self,
        resource_name: str,
        *,
        api_version: str,
        kind: str,
        metadata: pulumi.Input[Any] = None,
        spec: pulumi.Input[Any] = None,
        fields: dict[str, Any] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        extra = dict(fields or {})
        names = ("metadata", "spec", *extra) if spec is not None or not extra else ("metadata", *extra)
        given = {"metadata": metadata, "spec": spec, **extra}
        self._declare(Kind(api_version, kind, names), resource_name, {n: given[n] for n in names}, opts)
