"""Shared storage (platform stack): the StorageClass (GlusterFS/Heketi, CSI, local or an existing
one) and each user's ReadWriteMany data and log claims, which every experiment of the user mounts.

Data survival: the class reclaims with `Retain` (deleting a claim never deletes its volume), and
claims of users with `volumes.keepOnDestroy` carry Pulumi's `retain_on_delete`, so destroying the
platform leaves them (and the namespace holding them) in place; the next `pulumi up` of the same
platform stack takes them back by name. Experiments never create or delete claims of the shared
class; their optional scratch claims (tfk8s.training_cluster) use the scratch class, which deletes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pulumi
import pulumi_kubernetes as k8s

from tfk8s import awaits
from tfk8s.labels import labels
from tfk8s.ownership import Owner
from tfk8s.settings import PlatformSettings

HEKETI_SECRET_NAME = "tfk8s-heketi-admin"


@dataclass(frozen=True, kw_only=True)
class StorageClassSpec:
    provisioner: str
    parameters: dict[str, str] = field(default_factory=dict)
    reclaim_policy: str = "Retain"
    volume_binding_mode: str = "Immediate"
    allow_volume_expansion: bool | None = None


def storage_class_spec(platform: PlatformSettings) -> StorageClassSpec:
    """Provisioner and parameters of the class the configured backend needs (not for `existing`)."""
    storage = platform.storage
    if storage.backend == "glusterfs":
        g = storage.glusterfs
        assert g is not None
        parameters = {
            "resturl": g.rest_url,
            "restuser": g.rest_user,
            "secretNamespace": g.secret_namespace,
            "secretName": HEKETI_SECRET_NAME,
            "volumetype": g.volume_type,
            "gidMin": str(g.gid_min),
            "gidMax": str(g.gid_max),
        }
        if g.cluster_id:
            parameters["clusterid"] = g.cluster_id
        return StorageClassSpec(
            provisioner="kubernetes.io/glusterfs",
            parameters=parameters,
            reclaim_policy=storage.reclaim_policy,
            allow_volume_expansion=True,
        )
    if storage.backend == "csi":
        assert storage.csi is not None
        return StorageClassSpec(
            provisioner=storage.csi.provisioner, parameters=dict(storage.csi.parameters), reclaim_policy=storage.reclaim_policy
        )
    # local: no dynamic provisioner; each claim gets a pre-created volume bound by Kubernetes' binder.
    return StorageClassSpec(provisioner="kubernetes.io/no-provisioner", reclaim_policy=storage.reclaim_policy)


class SharedStorage(pulumi.ComponentResource):
    """The platform's StorageClasses (none for `existing`) and, for GlusterFS, the Heketi key Secret.

    Two classes for glusterfs and csi: the shared one (the users' data and logs, `Retain` by
    default) and the scratch one (experiments' scratch volumes, `Delete`: they go with their
    experiment, and a retained volume per destroyed experiment would only leak space).
    """

    class_name: pulumi.Output[str]
    scratch_class_name: pulumi.Output[str | None]

    def __init__(
        self,
        name: str,
        platform: PlatformSettings,
        heketi_admin_key: pulumi.Output[str] | None,
        owner: Owner,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("tfk8s:index:SharedStorage", name, None, opts)
        storage = platform.storage
        self.heketi_secret: k8s.core.v1.Secret | None = None
        self.storage_class: k8s.storage.v1.StorageClass | None = None
        meta_labels = {"app.kubernetes.io/part-of": "tfk8s", "app.kubernetes.io/managed-by": "pulumi", **owner.labels()}
        annotations = owner.annotations()
        if storage.backend == "glusterfs":
            assert storage.glusterfs is not None and heketi_admin_key is not None
            self.heketi_secret = k8s.core.v1.Secret(
                f"{name}-heketi",
                type="kubernetes.io/glusterfs",
                metadata={
                    "name": HEKETI_SECRET_NAME,
                    "namespace": storage.glusterfs.secret_namespace,
                    "labels": meta_labels,
                    "annotations": annotations,
                },
                string_data={"key": heketi_admin_key},
                opts=pulumi.ResourceOptions(parent=self),
            )
        self.scratch_class: k8s.storage.v1.StorageClass | None = None
        if storage.backend == "existing":
            self.class_name = pulumi.Output.from_input(storage.class_name)
            self.scratch_class_name = pulumi.Output.from_input(storage.scratch_class)
        else:
            spec = storage_class_spec(platform)
            class_opts = pulumi.ResourceOptions(parent=self, depends_on=[self.heketi_secret] if self.heketi_secret else None)

            def storage_class(resource_name: str, class_name: str, spec: StorageClassSpec) -> k8s.storage.v1.StorageClass:
                metadata = {"name": class_name, "labels": meta_labels, "annotations": annotations}
                return k8s.storage.v1.StorageClass(resource_name, metadata=metadata, **vars(spec), opts=class_opts)

            self.storage_class = storage_class(f"{name}-class", storage.class_name, spec)
            self.class_name = self.storage_class.metadata.apply(lambda m: m["name"])
            self.scratch_class_name = pulumi.Output.from_input(None)
            if storage.scratch_class is not None:
                self.scratch_class = storage_class(
                    f"{name}-scratch-class", storage.scratch_class, replace(spec, reclaim_policy="Delete")
                )
                self.scratch_class_name = self.scratch_class.metadata.apply(lambda m: m["name"])
        self.register_outputs({"class_name": self.class_name, "scratch_class_name": self.scratch_class_name})


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
    platform: PlatformSettings,
    owner: Owner,
    parent: pulumi.Resource,
) -> tuple[k8s.core.v1.PersistentVolumeClaim, k8s.core.v1.PersistentVolume | None]:
    """A ReadWriteMany claim; for the `local` backend also the hostPath volume pre-bound to it."""
    meta_labels = {**labels(user, "storage", role=purpose), **owner.labels()}
    volume = None
    if platform.storage.backend == "local":
        volume = k8s.core.v1.PersistentVolume(
            f"{resource_name}-pv",
            metadata={"labels": meta_labels, "annotations": owner.annotations()},
            spec={
                "capacity": {"storage": size},
                "accessModes": ["ReadWriteMany"],
                "storageClassName": class_name,
                "persistentVolumeReclaimPolicy": platform.storage.reclaim_policy,
                "hostPath": {
                    "path": pulumi.Output.concat(platform.storage.local.host_path_root, "/", namespace, "/", claim_name),
                    "type": "DirectoryOrCreate",
                },
                # Pre-binding: the binder matches this volume to this claim and no other.
                "claimRef": {"namespace": namespace, "name": claim_name},
            },
            opts=pulumi.ResourceOptions(parent=parent, retain_on_delete=keep),
        )
    pvc = k8s.core.v1.PersistentVolumeClaim(
        resource_name,
        metadata={
            "name": claim_name,
            "namespace": namespace,
            "labels": meta_labels,
            "annotations": {**awaits.claim(platform), **owner.annotations()},
        },
        spec={"accessModes": ["ReadWriteMany"], "storageClassName": class_name, "resources": {"requests": {"storage": size}}},
        opts=pulumi.ResourceOptions(parent=parent, retain_on_delete=keep, depends_on=[volume] if volume else None),
    )
    return pvc, volume
