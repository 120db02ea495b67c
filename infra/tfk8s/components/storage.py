"""Shared storage (platform stack): the StorageClass (GlusterFS/Heketi, CSI, local or an existing
one) and each user's ReadWriteMany data and log claims, which every experiment of the user mounts.

Data survival: the class reclaims with `Retain` (deleting a claim never deletes its volume), and
claims of users with `volumes.keepOnDestroy` carry Pulumi's `retain_on_delete`, so destroying the
platform leaves them (and the namespace holding them) in place; the next `pulumi up` of the same
platform stack takes them back by name. Experiments never create or delete claims of the shared
class; their optional scratch claims (tfk8s.components.training_cluster) use the scratch class, which deletes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pulumi

from tfk8s.errors import ConfigError
from tfk8s.kube import awaits
from tfk8s.kube import objects as kube
from tfk8s.kube.api_paths import NAMESPACE, NETWORK_POLICY, RESOURCE_QUOTA, SECRET, STORAGE_CLASS
from tfk8s.settings.storage import StorageSettings
from tfk8s.specs import network_policy, pod_security
from tfk8s.specs.backends import StorageClassSpec, backend_of, classes, scratch_class
from tfk8s.specs.labels import labels
from tfk8s.specs.ownership import Claimed, Owner

# Namespaces every cluster has: a backend's Secret may go there, but the platform never owns them.
BUILT_IN_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})
SECRET_QUOTA = "tfk8s-no-pods"


def secret_namespace(storage: StorageSettings) -> str | None:
    """The namespace the platform creates for its backend's Secret (the Heketi key): one of its own,
    which no tenant may read and where nothing runs. None: no Secret, or it goes to a built-in one."""
    backend = backend_of(storage)
    if backend.secret is None:
        return None
    namespace = backend.secret.namespace(storage)
    return None if namespace in BUILT_IN_NAMESPACES else namespace


def fixed_objects(storage: StorageSettings, key: str) -> list[Claimed]:
    """What SharedStorage creates under fixed names: the classes it builds and its backend's Secret.

    `key` is where `storage` sits in the stack file (`tfk8s:platform.storage`). A backend that
    creates no class claims none: it uses the cluster's own (backends.missing_classes).
    """
    backend = backend_of(storage)
    found = []
    if backend.creates_classes:
        found += [Claimed(kind=STORAGE_CLASS, name=name, key=f"{key}.{setting}") for setting, name in classes(storage).items()]
    if backend.secret is not None:
        setting = f"{key}.{backend.secret.namespace_setting}"
        namespace = backend.secret.namespace(storage)
        found.append(Claimed(kind=SECRET, namespace=namespace, name=backend.secret.name, key=setting))
        if secret_namespace(storage) is not None:
            found += [
                Claimed(kind=NAMESPACE, name=namespace, key=setting),
                Claimed(kind=NETWORK_POLICY, namespace=namespace, name=network_policy.DEFAULT_DENY, key=setting),
                Claimed(kind=RESOURCE_QUOTA, namespace=namespace, name=SECRET_QUOTA, key=setting),
            ]
    return found


@dataclass(frozen=True, kw_only=True)
class SharedStorageArgs:
    storage: StorageSettings
    owner: Owner
    kubernetes_version: tuple[int, int]  # the cluster's (major, minor): the Secret namespace's Pod Security labels
    # The value of the Secret the backend needs (the Heketi key), when it needs one (backend.secret).
    secret_value: pulumi.Output[str] | None = None


class SharedStorage(pulumi.ComponentResource):
    """The platform's StorageClasses and the Secret its backend needs (tfk8s.specs.backends), if any.

    Two classes when the backend offers scratch volumes: the shared one (the users' data and logs,
    `Retain` by default) and the scratch one (experiments' scratch volumes, `Delete`: they go with
    their experiment, and a retained volume per destroyed experiment would only leak space). A
    backend that creates no class publishes the names of the cluster's own.
    """

    class_name: pulumi.Output[str]
    scratch_class_name: pulumi.Output[str | None]

    def __init__(self, name: str, args: SharedStorageArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        storage = args.storage
        backend = backend_of(storage)
        if backend.secret is not None and args.secret_value is None:  # before anything is declared
            raise ConfigError(
                [
                    f"SharedStorageArgs.secret_value: backend {storage.backend!r} needs its Secret's value: "
                    "pass it as a secret (pulumi.Output.secret, or a secret of the stack's config)"
                ]
            )
        super().__init__("tfk8s:index:SharedStorage", name, None, opts)
        owner, secret_value = args.owner, args.secret_value
        self.secret: kube.Secret | None = None
        self.storage_class: kube.StorageClass | None = None
        meta_labels = {"app.kubernetes.io/part-of": "tfk8s", "app.kubernetes.io/managed-by": "pulumi", **owner.labels()}
        annotations = owner.annotations()
        if backend.secret is not None:
            assert secret_value is not None  # checked above
            namespace: pulumi.Input[str] = backend.secret.namespace(storage)
            if (own := secret_namespace(storage)) is not None:
                namespace = self._secret_namespace(name, own, meta_labels, annotations, args.kubernetes_version)
            self.secret = kube.Secret(
                f"{name}-{backend.secret.resource_suffix}",
                type=backend.secret.type,
                metadata={
                    "name": backend.secret.name,
                    "namespace": namespace,
                    "labels": meta_labels,
                    "annotations": annotations,
                },
                string_data={backend.secret.data_key: secret_value},
                opts=pulumi.ResourceOptions(parent=self),
            )
        self.scratch_class: kube.StorageClass | None = None
        scratch = scratch_class(storage)
        if backend.class_spec is None:
            self.class_name = pulumi.Output.from_input(storage.class_name)
            self.scratch_class_name = pulumi.Output.from_input(scratch)
        else:
            spec = backend.class_spec(storage)
            class_opts = pulumi.ResourceOptions(parent=self, depends_on=[self.secret] if self.secret else None)

            def storage_class(resource_name: str, class_name: str, spec: StorageClassSpec) -> kube.StorageClass:
                metadata = {"name": class_name, "labels": meta_labels, "annotations": annotations}
                return kube.StorageClass(resource_name, metadata=metadata, **vars(spec), opts=class_opts)

            self.storage_class = storage_class(f"{name}-class", storage.class_name, spec)
            self.class_name = self.storage_class.name
            self.scratch_class_name = pulumi.Output.from_input(None)
            if scratch is not None:
                self.scratch_class = storage_class(f"{name}-scratch-class", scratch, replace(spec, reclaim_policy="Delete"))
                self.scratch_class_name = self.scratch_class.name
        self.register_outputs({"class_name": self.class_name, "scratch_class_name": self.scratch_class_name})

    def _secret_namespace(
        self, name: str, namespace: str, meta_labels: dict[str, str], annotations: dict[str, str], version: tuple[int, int]
    ) -> pulumi.Output[str]:
        """The backend Secret's own namespace: restricted, no pods (a quota of zero), no traffic. Only
        the platform team and the provisioner (kube-controller-manager) read Secrets there."""
        child = pulumi.ResourceOptions(parent=self)
        created = kube.Namespace(
            f"{name}-secret-namespace",
            metadata={
                "name": namespace,
                "labels": {**meta_labels, **pod_security.namespace_labels(version)},
                "annotations": annotations,
            },
            opts=child,
        )
        ns = created.name
        meta = {"namespace": ns, "labels": meta_labels, "annotations": annotations}
        kube.ResourceQuota(
            f"{name}-secret-namespace-quota", metadata={**meta, "name": SECRET_QUOTA}, spec={"hard": {"pods": "0"}}, opts=child
        )
        deny = network_policy.deny_all()
        kube.NetworkPolicy(
            f"{name}-secret-namespace-deny", metadata={**meta, "name": network_policy.DEFAULT_DENY}, spec=deny, opts=child
        )
        return ns


def claim(
    resource_name: str,
    *,
    claim_name: str,
    namespace: pulumi.Input[str],
    size: str,
    class_name: pulumi.Input[str],
    user: str,
    purpose: str,
    keep: bool,
    storage: StorageSettings,
    await_timeout_seconds: int,
    owner: Owner,
    parent: pulumi.Resource,
) -> tuple[kube.PersistentVolumeClaim, kube.PersistentVolume | None]:
    """A ReadWriteMany claim; for a backend without a provisioner also the hostPath volume pre-bound to it."""
    backend = backend_of(storage)
    meta_labels = {**labels(user, "storage", role=purpose), **owner.labels()}
    volume = None
    if backend.host_path_root is not None:
        volume = kube.PersistentVolume(
            f"{resource_name}-pv",
            metadata={"labels": meta_labels, "annotations": owner.annotations()},
            spec={
                "capacity": {"storage": size},
                "accessModes": ["ReadWriteMany"],
                "storageClassName": class_name,
                "persistentVolumeReclaimPolicy": storage.reclaim_policy,
                "hostPath": {
                    "path": pulumi.Output.concat(backend.host_path_root(storage), "/", namespace, "/", claim_name),
                    "type": "DirectoryOrCreate",
                },
                # Pre-binding: the binder matches this volume to this claim and no other.
                "claimRef": {"namespace": namespace, "name": claim_name},
            },
            opts=pulumi.ResourceOptions(parent=parent, retain_on_delete=keep),
        )
    waits = awaits.claim_await(await_timeout_seconds, until_bound=backend.claims_await_bound)
    pvc = kube.PersistentVolumeClaim(
        resource_name,
        metadata={
            "name": claim_name,
            "namespace": namespace,
            "labels": meta_labels,
            "annotations": {**waits, **owner.annotations()},
        },
        spec={"accessModes": ["ReadWriteMany"], "storageClassName": class_name, "resources": {"requests": {"storage": size}}},
        opts=pulumi.ResourceOptions(parent=parent, retain_on_delete=keep, depends_on=[volume] if volume else None),
    )
    return pvc, volume
