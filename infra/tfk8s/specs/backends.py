"""The storage backends as one table: what each does, so that no other code asks for its name.

Every difference between `local`, `csi`, `glusterfs` and `existing` is a trait of its `Backend`
entry: the StorageClass it builds (none: it uses the cluster's classes), its scratch class, how
its claims are awaited, whether claims get a pre-bound hostPath volume, the Secret it needs, the
Kubernetes versions it works on, and the checks of its own settings. The schema
(`tfk8s.settings.storage.StorageBackend`) already refuses a name the table lacks; the table is checked once, on
import, to cover exactly those names, and is then only looked up. Adding a backend: its settings
in tfk8s.settings.storage, its entry here, its tests.

Pure: no Pulumi, so config checks and tests read it without a program; tfk8s.components.storage turns its
traits into resources.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import get_args

from tfk8s.kube.api_paths import STORAGE_CLASS
from tfk8s.settings.storage import BACKEND_SECRET_KEYS, StorageBackend, StorageSettings

HEKETI_SECRET_NAME = "tfk8s-heketi-admin"


@dataclass(frozen=True, kw_only=True)
class StorageClassSpec:
    provisioner: str
    parameters: dict[str, str] = field(default_factory=dict)
    reclaim_policy: str = "Retain"
    volume_binding_mode: str = "Immediate"
    allow_volume_expansion: bool | None = None


@dataclass(frozen=True, kw_only=True)
class BackendSecret:
    """A Secret the backend's provisioner reads; its value is a secret key of the stack's config."""

    config_key: str  # `tfk8s:<config_key>`, set with `pulumi config set --secret`
    name: str
    type: str
    data_key: str  # the Secret's key holding the value
    # The Pulumi resource is `<storage>-<resource_suffix>`: part of its URN, so renaming replaces it.
    resource_suffix: str
    namespace: Callable[[StorageSettings], str]
    namespace_setting: str  # the setting naming that namespace, under `platform.storage`


@dataclass(frozen=True, kw_only=True)
class Removal:
    """The first Kubernetes version a backend no longer works on, and what to use instead."""

    since: tuple[int, int]
    because: str  # completes "'<backend>' ..., removed in Kubernetes <since>"
    fix: str


def _no_problems(storage: StorageSettings, key: str) -> list[str]:
    return []


@dataclass(frozen=True, kw_only=True)
class Backend:
    """One backend's traits: the code asks these, never the backend's name."""

    # The platform's shared class (and scratch class, with reclaim Delete); None: the backend
    # creates no class and uses the ones the cluster has, which must then exist.
    class_spec: Callable[[StorageSettings], StorageClassSpec] | None
    # Whether experiments may get scratch volumes: from a class the platform creates next to
    # className, or, for a backend creating none, the cluster's class named by scratchClassName.
    offers_scratch: bool
    # Watch the users' claims until Bound (fast: see tfk8s.kube.awaits). Only for classes that bind
    # Immediately: a WaitForFirstConsumer class leaves a claim Pending until a pod uses it, which
    # the provider's own await accepts and a Bound condition would wait out to the timeout.
    claims_await_bound: bool
    # No dynamic provisioner: each claim gets a hostPath volume under this root, pre-bound to it.
    host_path_root: Callable[[StorageSettings], str] | None = None
    secret: BackendSecret | None = None
    removal: Removal | None = None
    # Checks of the backend's own settings (`key` is `tfk8s:platform.storage`), beyond the schema's.
    settings_problems: Callable[[StorageSettings, str], list[str]] = _no_problems

    @property
    def creates_classes(self) -> bool:
        return self.class_spec is not None


def _local_class(storage: StorageSettings) -> StorageClassSpec:
    return StorageClassSpec(provisioner="kubernetes.io/no-provisioner", reclaim_policy=storage.reclaim_policy)


def _csi_class(storage: StorageSettings) -> StorageClassSpec:
    assert storage.csi is not None  # checked by _csi_problems
    return StorageClassSpec(
        provisioner=storage.csi.provisioner, parameters=dict(storage.csi.parameters), reclaim_policy=storage.reclaim_policy
    )


def _csi_problems(storage: StorageSettings, key: str) -> list[str]:
    if storage.csi is None:
        return [f"{key}.csi.provisioner: is required: the CSI driver name, e.g. nfs.csi.k8s.io"]
    return []


def _glusterfs_class(storage: StorageSettings) -> StorageClassSpec:
    g = storage.glusterfs
    assert g is not None  # checked by _glusterfs_problems
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


def _glusterfs_problems(storage: StorageSettings, key: str) -> list[str]:
    g = storage.glusterfs
    if g is None:
        return [f"{key}.glusterfs.restUrl: is required: the Heketi REST endpoint, e.g. http://heketi.storage:8080"]
    if g.gid_min > g.gid_max:
        return [f"{key}.glusterfs.gidMin: must not exceed gidMax ({g.gid_min} > {g.gid_max})"]
    return []


def _heketi_namespace(storage: StorageSettings) -> str:
    assert storage.glusterfs is not None  # checked by _glusterfs_problems
    return storage.glusterfs.secret_namespace


def _complete(table: dict[StorageBackend, Backend]) -> dict[StorageBackend, Backend]:
    """The table, if it has exactly one entry per name the schema accepts."""
    if set(table) != set(get_args(StorageBackend)):
        raise TypeError(
            f"storage backends {sorted(table)} do not match tfk8s.settings.storage.StorageBackend {get_args(StorageBackend)}"
        )
    return table


# In the order messages list them (see missing_classes, scratchless_platforms).
BACKENDS: Mapping[StorageBackend, Backend] = _complete(
    {
        # For single-node and simulated (kwok) clusters; scratch volumes would need a provisioner.
        "local": Backend(
            class_spec=_local_class,
            offers_scratch=False,
            claims_await_bound=True,
            host_path_root=lambda storage: storage.local.host_path_root,
        ),
        "csi": Backend(class_spec=_csi_class, offers_scratch=True, claims_await_bound=True, settings_problems=_csi_problems),
        "glusterfs": Backend(
            class_spec=_glusterfs_class,
            offers_scratch=True,
            claims_await_bound=True,
            # The in-tree provisioner reads the Heketi admin key from this Secret (the class names it).
            secret=BackendSecret(
                config_key=BACKEND_SECRET_KEYS["glusterfs"],
                name=HEKETI_SECRET_NAME,
                type="kubernetes.io/glusterfs",
                data_key="key",
                resource_suffix="heketi",
                namespace=_heketi_namespace,
                namespace_setting="glusterfs.secretNamespace",
            ),
            # kubernetes/kubernetes#115035
            removal=Removal(
                since=(1, 26),
                because="uses the in-tree kubernetes.io/glusterfs provisioner",
                fix="use backend 'csi' with a Gluster/NFS/CephFS CSI driver (e.g. Kadalu, nfs.csi.k8s.io) or 'existing' "
                "with a class your cluster already has",
            ),
            settings_problems=_glusterfs_problems,
        ),
        # Its class may bind WaitForFirstConsumer: claims keep the provider's own await.
        "existing": Backend(class_spec=None, offers_scratch=True, claims_await_bound=False),
    }
)


def backend_of(storage: StorageSettings) -> Backend:
    return BACKENDS[storage.backend]


def scratch_class(storage: StorageSettings) -> str | None:
    """The class experiments' scratch claims use, if the platform offers one."""
    backend = backend_of(storage)
    if not backend.offers_scratch:
        return None
    if backend.creates_classes:
        return storage.scratch_class_name or f"{storage.class_name}-scratch"
    return storage.scratch_class_name


def classes(storage: StorageSettings) -> dict[str, str]:
    """The platform's classes by the setting naming them (`className`, `scratchClassName`)."""
    named = {"className": storage.class_name, "scratchClassName": scratch_class(storage)}
    return {setting: name for setting, name in named.items() if name is not None}


def problems(storage: StorageSettings, kube: tuple[int, int] | None, key: str) -> list[str]:
    """The backend's context checks: its settings, the cluster's version `kube`, the scratch class."""
    name, backend = storage.backend, backend_of(storage)
    found = list(backend.settings_problems(storage, key))
    removal = backend.removal
    if removal is not None and kube is not None and kube >= removal.since:
        found.append(
            f"{key}.backend: {name!r} {removal.because}, removed in Kubernetes {removal.since[0]}.{removal.since[1]}; "
            f"the cluster is {kube[0]}.{kube[1]}. Fix: {removal.fix}"
        )
    if storage.scratch_class_name is not None:
        if not backend.offers_scratch:
            found.append(
                f"{key}.scratchClassName: backend {name!r} has no provisioner for experiments' scratch volumes: "
                "remove the key (experiments of this platform then have none)"
            )
        elif backend.creates_classes and storage.scratch_class_name == storage.class_name:
            found.append(
                f"{key}.scratchClassName: is className ({storage.class_name!r}); the platform creates both "
                "classes, the shared one and the scratch one that deletes its volumes: give them different names"
            )
    return found


def missing_classes(storage: StorageSettings, read: Callable[[str], object | None], key: str) -> list[str]:
    """For a backend that creates no class: each class it uses that the cluster (`read`) lacks."""
    if backend_of(storage).creates_classes:
        return []
    creating = [name for name, b in BACKENDS.items() if b.creates_classes]
    alternatives = f"{', '.join(creating[:-1])} or {creating[-1]}" if len(creating) > 1 else creating[0]
    return [
        f"{key}.{setting}: backend {storage.backend!r} uses class {name!r}, which the cluster does not have: create it, "
        f"name one `kubectl get storageclass` lists, or choose backend {alternatives}"
        for setting, name in classes(storage).items()
        if read(STORAGE_CLASS.path(name)) is None
    ]


def scratchless_platforms() -> str:
    """The storage settings under which a platform offers no scratch class, for experiments' messages."""
    cases = [
        f"{name!r}" if not b.offers_scratch else f"{name!r} without scratchClassName"
        for name, b in BACKENDS.items()
        if not (b.offers_scratch and b.creates_classes)
    ]
    return ", or ".join(cases)
