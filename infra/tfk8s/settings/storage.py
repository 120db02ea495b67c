"""The schema of a platform's storage (`platform.storage`): the backends of the tenants' shared
volumes and their settings. Nothing here touches Pulumi (the StorageClasses are tfk8s.specs.backends')."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tfk8s.settings.types import (
    AbsolutePath,
    DnsName,
    HeketiUrl,
    Model,
    PositiveId,
)

StorageBackend = Literal["glusterfs", "csi", "existing", "local"]
# The stack file's secret key each storage backend reads its provisioner's Secret from
# (`tfk8s:<key>`, set with `pulumi config set --secret`): never part of the models
# (tfk8s.settings.stack_file); the Secret itself is tfk8s.specs.backends'.
BACKEND_SECRET_KEYS: dict[str, str] = {"glusterfs": "heketiAdminKey"}
# Where the platform keeps a storage backend's Secret by default: never a tenant's namespace.
DEFAULT_SECRET_NAMESPACE = "tfk8s-storage"


class GlusterfsSettings(Model):
    """Heketi-backed in-tree GlusterFS provisioning (Kubernetes < 1.26 only)."""

    rest_url: HeketiUrl = Field(description="the Heketi REST endpoint, e.g. http://heketi.storage:8080")
    rest_user: str = Field(default="admin", pattern=r"^[A-Za-z0-9_.@-]+$")
    """Heketi's user; its key is the secret `tfk8s:heketiAdminKey`."""
    cluster_id: str | None = None
    """Heketi cluster id(s) to provision from; None: any."""
    volume_type: str = Field(default="replicate:3", pattern=r"^(replicate:[1-9][0-9]?|disperse:[1-9][0-9]?:[1-9][0-9]?|none)$")
    """Heketi's volume type: replicate:N, disperse:D:R or none."""
    gid_min: PositiveId = 2000
    """Lowest GID the provisioner gives a volume (added to the pods' groups)."""
    gid_max: PositiveId = 2147483647
    """Highest GID the provisioner gives a volume."""
    secret_namespace: DnsName = DEFAULT_SECRET_NAMESPACE
    """Namespace of the Secret holding the Heketi admin key; the provisioner reads it there. The
    platform creates it (restricted, no pods, no traffic), so no tenant's role reaches it; a built-in
    namespace (default, kube-system) is used as it is."""


class CsiSettings(Model):
    """Any CSI driver with ReadWriteMany support (NFS CSI, CephFS, Kadalu, ...)."""

    provisioner: str = Field(description="the CSI driver name, e.g. nfs.csi.k8s.io")
    parameters: dict[str, str] = Field(default_factory=dict)
    """The driver's StorageClass parameters, e.g. {"server": "nfs.example.com", "share": "/tfk8s"}."""


class LocalSettings(Model):
    """Statically provisioned hostPath volumes, bound by Kubernetes' own PV binder.

    For single-node and simulated (kwok) clusters: hostPath is only "shared" when every pod
    runs on one machine, so never use it for real multi-node training.
    """

    host_path_root: AbsolutePath = "/var/lib/tfk8s"
    """The node directory the users' volumes are created under; on a real node, owned by the
    training UID (`podSecurity.tensorflow`)."""


class StorageSettings(Model):
    """How the tenants' shared volumes (ReadWriteMany) are provisioned."""

    backend: StorageBackend = "local"
    """local: hostPath volumes (single-node and simulated clusters); glusterfs: Heketi (Kubernetes
    < 1.26); csi: a CSI driver's class; existing: a StorageClass the cluster already has."""
    class_name: DnsName = "tfk8s-shared"
    """Name of the StorageClass to create (or, for `existing`, to use)."""
    reclaim_policy: Literal["Retain", "Delete"] = "Retain"
    """Retain: deleting a claim never deletes the data behind it."""
    scratch_class_name: DnsName | None = None
    """The class of experiments' scratch volumes (`clusters[].scratch`), which go with their
    experiment, so it reclaims with Delete. glusterfs/csi: the class the platform creates next to
    className (default `<className>-scratch`); existing: a class the cluster has (unset: no
    scratch volumes); local: none (its volumes are pre-created by the platform alone)."""
    glusterfs: GlusterfsSettings | None = None
    csi: CsiSettings | None = None
    local: LocalSettings = Field(default_factory=LocalSettings)
