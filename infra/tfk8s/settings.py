"""Typed, frozen settings for one tfk8s stack.

Every default lives here and only here. `tfk8s.config` turns raw stack configuration into these
objects (and rejects bad input); everything else receives them and never reads `pulumi.Config`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

StorageBackend = Literal["glusterfs", "csi", "existing", "local"]
Replication = Literal["between-graph", "in-graph"]
TrainingMode = Literal["async", "sync"]
CodeSource = Literal["configmap", "url", "image"]
InGraphClient = Literal["chief", "notebook"]

# The launcher and our trainer: always shipped to every TensorFlow pod (see tfk8s.code).
LAUNCHER_PACKAGE = "training/tfk8s_train"
# Our trainer, shipped with the launcher; any other command is a user script.
DEFAULT_TRAINER = ("python", "-m", "tfk8s_train", "train")

# The in-tree kubernetes.io/glusterfs provisioner was removed in Kubernetes 1.26
# (kubernetes/kubernetes#115035).
GLUSTERFS_REMOVED_IN = (1, 26)
# Job backoffLimitPerIndex / maxFailedIndexes: beta (on by default) from 1.29; older API servers
# drop the fields with only a warning.
PER_INDEX_RETRIES_SINCE = (1, 29)


@dataclass(frozen=True, kw_only=True)
class GlusterfsSettings:
    """Heketi-backed in-tree GlusterFS provisioning (Kubernetes < 1.26 only)."""

    rest_url: str
    rest_user: str = "admin"
    cluster_id: str | None = None
    volume_type: str = "replicate:3"
    gid_min: int = 2000
    gid_max: int = 2147483647
    # Namespace of the Secret holding the Heketi admin key; the provisioner reads it there.
    secret_namespace: str = "default"


@dataclass(frozen=True, kw_only=True)
class CsiSettings:
    """Any CSI driver with ReadWriteMany support (NFS CSI, CephFS, Kadalu, ...)."""

    provisioner: str
    parameters: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class LocalSettings:
    """Statically provisioned hostPath volumes, bound by Kubernetes' own PV binder.

    For single-node and simulated (kwok) clusters: hostPath is only "shared" when every pod
    runs on one machine, so never use it for real multi-node training.
    """

    host_path_root: str = "/var/lib/tfk8s"


@dataclass(frozen=True, kw_only=True)
class StorageSettings:
    backend: StorageBackend = "local"
    # Name of the StorageClass to create (or, for `existing`, to use).
    class_name: str = "tfk8s-shared"
    # Retain: deleting a claim never deletes the data behind it.
    reclaim_policy: Literal["Retain", "Delete"] = "Retain"
    glusterfs: GlusterfsSettings | None = None
    csi: CsiSettings | None = None
    local: LocalSettings = field(default_factory=LocalSettings)


@dataclass(frozen=True, kw_only=True)
class UserNodeSettings:
    """The one node that runs (and exposes) the user-facing pods."""

    name: str
    # Address users reach NodePorts on; when unset, the node's InternalIP from live status.
    address: str | None = None
    taint_key: str = "tfk8s.io/user-node"


@dataclass(frozen=True, kw_only=True)
class ImageSettings:
    tensorflow: str = "tensorflow/tensorflow:2.21.0"
    jupyter: str = "quay.io/jupyter/tensorflow-notebook:2025-12-01"
    tensorboard: str = "tensorflow/tensorflow:2.21.0"


@dataclass(frozen=True, kw_only=True)
class PortSettings:
    tensorflow: int = 2222
    jupyter: int = 8888
    tensorboard: int = 6006


@dataclass(frozen=True, kw_only=True)
class PlatformSettings:
    user_node: UserNodeSettings
    storage: StorageSettings = field(default_factory=StorageSettings)
    images: ImageSettings = field(default_factory=ImageSettings)
    ports: PortSettings = field(default_factory=PortSettings)
    # (major, minor) of the target cluster, when known; used to refuse removed features.
    kubernetes_version: tuple[int, int] | None = None
    namespace_prefix: str = "tfk8s-"
    # GPUs on parameter servers waste accelerators on a memory-bound job; opt in explicitly.
    allow_ps_gpus: bool = False
    # How long `pulumi up` waits for PS, workers, Jupyter and TensorBoard to come up.
    await_timeout_seconds: int = 600


@dataclass(frozen=True, kw_only=True)
class Resources:
    cpu: str = "1"
    memory: str = "2Gi"
    gpus: int = 0


@dataclass(frozen=True, kw_only=True)
class PsSettings:
    count: int = 1
    resources: Resources = field(default_factory=lambda: Resources(cpu="500m", memory="1Gi"))


@dataclass(frozen=True, kw_only=True)
class WorkerSettings:
    count: int = 2
    resources: Resources = field(default_factory=Resources)
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[dict[str, str], ...] = ()
    # Retries per worker index before the whole Job fails (Indexed Job backoffLimitPerIndex).
    backoff_limit_per_index: int = 3


@dataclass(frozen=True, kw_only=True)
class CodeSettings:
    source: CodeSource = "configmap"
    # configmap: a directory of this repository, shipped as a ConfigMap (1 MiB limit).
    path: str | None = LAUNCHER_PACKAGE
    # url: fetched by an init container before the task starts (the seed's curl).
    url: str | None = None


@dataclass(frozen=True, kw_only=True)
class VolumeSettings:
    data_size: str = "10Gi"
    log_size: str = "10Gi"
    # Keep the data and log claims (and the volumes behind them) when the cluster is destroyed.
    keep_on_destroy: bool = True


@dataclass(frozen=True, kw_only=True)
class RunSettings:
    """What TFJob users call the run policy, per training cluster."""

    # Bump to start a fresh run after a failed one: re-applying an unchanged failed Job does
    # nothing (pulumi-kubernetes#856); a new number is a new run id, so a new Job and new PS.
    number: int = 0
    # Kubernetes fails the worker (and chief) Job this many seconds after it starts; None: never.
    active_deadline_seconds: int | None = None
    # Finished worker/chief Jobs and their pods are deleted this long after they end; None: kept.
    # Logs live on the log volume, not in the pods, so nothing of them is lost.
    ttl_seconds_after_finished: int | None = None


@dataclass(frozen=True, kw_only=True)
class ClusterSettings:
    name: str
    replication: Replication = "between-graph"
    training: TrainingMode = "async"
    # In-graph only: who drives the cluster, a chief Job or the user's Jupyter notebook.
    in_graph_client: InGraphClient = "chief"
    ps: PsSettings = field(default_factory=PsSettings)
    workers: WorkerSettings = field(default_factory=WorkerSettings)
    image: str | None = None
    code: CodeSettings = field(default_factory=CodeSettings)
    command: tuple[str, ...] = DEFAULT_TRAINER
    args: tuple[str, ...] = ()
    # Append --ps_hosts/--worker_hosts/--job_name/--task_index/--data_dir/--log_path.
    classic_flags: bool = True
    volumes: VolumeSettings = field(default_factory=VolumeSettings)
    run: RunSettings = field(default_factory=RunSettings)


@dataclass(frozen=True, kw_only=True)
class UserSettings:
    name: str
    clusters: tuple[ClusterSettings, ...]


@dataclass(frozen=True, kw_only=True)
class Settings:
    platform: PlatformSettings
    users: tuple[UserSettings, ...]
