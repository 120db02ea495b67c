"""The one schema of tfk8s stack files: types, defaults and value checks, written once.

Two kinds of stack share the project (see README "Two kinds of stack"):
  * a platform stack (`tfk8s:kind: platform`): storage, the User Node and, per user, the
    namespace, the shared data and log volumes, Jupyter and TensorBoard;
  * experiment stacks (`tfk8s:kind: experiment`): one user's training clusters, placed in that
    user's namespace and reading the platform's facts (`PlatformFacts`) from its stack outputs.

The models are pydantic v2, frozen, with camelCase aliases (the names in the stack file) and
`extra="forbid"`: a typo is an error, never a silent default. `tfk8s.config` validates raw
config with them and turns errors into messages naming the full key; `hack/schema.py` publishes
their JSON Schema for editors. Nothing here touches Pulumi.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field
from pydantic.alias_generators import to_camel

from tfk8s.api_paths import ApiKind
from tfk8s.quantities import parse_quantity

StorageBackend = Literal["glusterfs", "csi", "existing", "local"]
Replication = Literal["between-graph", "in-graph"]
TrainingMode = Literal["async", "sync"]
CodeSource = Literal["configmap", "url", "image"]
InGraphClient = Literal["chief", "notebook"]

# The launcher and our trainer: always shipped to every TensorFlow pod (see tfk8s.code).
LAUNCHER_PACKAGE = "training/tfk8s_train"
# Our trainer, shipped with the launcher; any other command is a user script.
DEFAULT_TRAINER = ("python", "-m", "tfk8s_train", "train")

# Job backoffLimitPerIndex / maxFailedIndexes: beta (on by default) from 1.29; older API servers
# drop the fields with only a warning.
PER_INDEX_RETRIES_SINCE = (1, 29)
# Leaves room for "-worker-<index>" in pod hostnames and "-ps-<index>-<run>" in Deployment names.
MAX_NAME_LENGTH = 40
# A namespace name is a DNS-1123 label: at most 63 characters.
MAX_NAMESPACE_LENGTH = 63

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def dns_name(value: str) -> str:
    """`value` if it can name Kubernetes objects (a DNS-1123 label, room for suffixes); else ValueError."""
    if len(value) > MAX_NAME_LENGTH:
        raise ValueError(f"{value!r} is {len(value)} characters; at most {MAX_NAME_LENGTH} (it prefixes Kubernetes names)")
    if not _DNS1123_LABEL.match(value):
        raise ValueError(
            f"{value!r} is not a DNS-1123 label: use lowercase letters, digits and '-', starting and ending alphanumeric"
        )
    return value


def _namespace_prefix(value: str) -> str:
    if value and not re.fullmatch(r"[a-z0-9]([-a-z0-9]*)?", value):
        raise ValueError(
            f"{value!r} must be lowercase letters, digits and '-', starting alphanumeric (it starts namespace names)"
        )
    if len(value) + MAX_NAME_LENGTH > MAX_NAMESPACE_LENGTH:
        raise ValueError(
            f"{value!r} is {len(value)} characters; at most {MAX_NAMESPACE_LENGTH - MAX_NAME_LENGTH} (prefix + user name <= 63)"
        )
    return value


def _quantity(value: str) -> str:
    if parse_quantity(value) <= 0:  # raises ValueError naming the bad quantity
        raise ValueError(f"must be greater than zero, got {value!r}")
    return value


def _number_as_string(value: Any) -> Any:
    # `cpu: 2` is as natural as `cpu: "2"`; booleans are not numbers here.
    return str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


def _http_url(value: str) -> str:
    if not re.match(r"^https?://", value):
        raise ValueError(f"must be an http(s) URL, got {value!r}")
    return value


def _relative_path(value: str) -> str:
    parts = value.split("/")
    if value.startswith("/") or ".." in parts or "" in parts:
        raise ValueError(f"{value!r} must be a relative path inside the volume (no leading '/', no '..', no '//')")
    return value


def _version(text: str) -> tuple[int, int]:
    major, minor = text.split(".")
    return int(major), int(minor)


def _at_least(minimum: int) -> AfterValidator:
    def check(value: int) -> int:
        if value < minimum:
            raise ValueError(f"must be {'at least 1' if minimum == 1 else '0 or more'}, got {value}")
        return value

    return AfterValidator(check)


DnsName = Annotated[str, AfterValidator(dns_name)]
Positive = Annotated[int, _at_least(1)]
NonNegative = Annotated[int, _at_least(0)]
Port = Annotated[int, Field(ge=1, le=65535)]
Quantity = Annotated[str, BeforeValidator(_number_as_string), AfterValidator(_quantity)]
KubeVersion = Annotated[str, Field(pattern=r"^1\.\d+$")]


class Model(BaseModel):
    """Frozen, camelCase in files, unknown keys refused, no type coercion (`count: "2"` is an error)."""

    model_config = ConfigDict(frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True, strict=True)


# --- platform stack ---------------------------------------------------------------------------


class GlusterfsSettings(Model):
    """Heketi-backed in-tree GlusterFS provisioning (Kubernetes < 1.26 only)."""

    rest_url: Annotated[str, AfterValidator(_http_url)] = Field(
        description="the Heketi REST endpoint, e.g. http://heketi.storage:8080"
    )
    rest_user: str = "admin"
    cluster_id: str | None = None
    volume_type: str = "replicate:3"
    gid_min: Positive = 2000
    gid_max: Positive = 2147483647
    # Namespace of the Secret holding the Heketi admin key; the provisioner reads it there.
    secret_namespace: DnsName = "default"


class CsiSettings(Model):
    """Any CSI driver with ReadWriteMany support (NFS CSI, CephFS, Kadalu, ...)."""

    provisioner: str = Field(description="the CSI driver name, e.g. nfs.csi.k8s.io")
    parameters: dict[str, str] = Field(default_factory=dict)


class LocalSettings(Model):
    """Statically provisioned hostPath volumes, bound by Kubernetes' own PV binder.

    For single-node and simulated (kwok) clusters: hostPath is only "shared" when every pod
    runs on one machine, so never use it for real multi-node training.
    """

    host_path_root: Annotated[str, Field(pattern=r"^/")] = "/var/lib/tfk8s"


class StorageSettings(Model):
    backend: StorageBackend = "local"
    # Name of the StorageClass to create (or, for `existing`, to use).
    class_name: DnsName = "tfk8s-shared"
    # Retain: deleting a claim never deletes the data behind it.
    reclaim_policy: Literal["Retain", "Delete"] = "Retain"
    # The class of experiments' scratch volumes (`clusters[].scratch`), which go with their
    # experiment, so it reclaims with Delete. glusterfs/csi: the class the platform creates next to
    # className (default `<className>-scratch`); existing: a class the cluster has (unset: no
    # scratch volumes); local: none (its volumes are pre-created by the platform alone).
    scratch_class_name: DnsName | None = None
    glusterfs: GlusterfsSettings | None = None
    csi: CsiSettings | None = None
    local: LocalSettings = Field(default_factory=LocalSettings)


class UserNodeSettings(Model):
    """The one node that runs (and exposes) the user-facing pods."""

    name: str = Field(description="the name of an existing node to dedicate to Jupyter and TensorBoard")
    # Address users reach NodePorts on; when unset, the node's InternalIP from live status.
    address: str | None = None
    taint_key: str = "tfk8s.io/user-node"


class ImageSettings(Model):
    tensorflow: str = "tensorflow/tensorflow:2.21.0"
    jupyter: str = "quay.io/jupyter/tensorflow-notebook:2025-12-01"
    tensorboard: str = "tensorflow/tensorflow:2.21.0"


class PortSettings(Model):
    tensorflow: Port = 2222
    jupyter: Port = 8888
    tensorboard: Port = 6006


class PlatformSettings(Model):
    user_node: UserNodeSettings
    storage: StorageSettings = Field(default_factory=StorageSettings)
    images: ImageSettings = Field(default_factory=ImageSettings)
    ports: PortSettings = Field(default_factory=PortSettings)
    # "major.minor" of the target cluster; the API server's own /version wins when readable.
    kubernetes_version: KubeVersion | None = None
    namespace_prefix: Annotated[str, AfterValidator(_namespace_prefix)] = "tfk8s-"
    # GPUs on parameter servers waste accelerators on a memory-bound job; opt in explicitly.
    allow_ps_gpus: bool = False
    # How long `pulumi up` waits for PS, workers, Jupyter and TensorBoard to come up.
    await_timeout_seconds: Positive = 600

    @property
    def version(self) -> tuple[int, int] | None:
        return _version(self.kubernetes_version) if self.kubernetes_version else None


class UserVolumes(Model):
    """The user's shared volumes: every experiment mounts them (data whole, logs per run)."""

    data_size: Quantity = "10Gi"
    log_size: Quantity = "10Gi"
    # Keep the user's namespace, claims and volumes when the platform stack is destroyed.
    keep_on_destroy: bool = True


class PlatformUser(Model):
    name: DnsName = Field(description="a DNS-1123 user name, e.g. alice")
    volumes: UserVolumes = Field(default_factory=UserVolumes)


class PlatformStack(Model):
    """The `tfk8s:` keys of a platform stack file (secrets `heketiAdminKey`, `jupyterTokens` apart)."""

    kind: Literal["platform"]
    platform: PlatformSettings
    users: tuple[PlatformUser, ...] = Field(min_length=1, description="users, each {name, volumes?}")


# --- experiment stack -------------------------------------------------------------------------


class Resources(Model):
    cpu: Quantity = "1"
    memory: Quantity = "2Gi"
    gpus: NonNegative = 0


class PsSettings(Resources):
    count: Positive = 1
    cpu: Quantity = "500m"
    memory: Quantity = "1Gi"

    @property
    def resources(self) -> Resources:
        return Resources(cpu=self.cpu, memory=self.memory, gpus=self.gpus)


class WorkerSettings(Resources):
    count: Positive = 2
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: tuple[dict[str, str], ...] = ()
    # Retries per worker index before the whole Job fails (Indexed Job backoffLimitPerIndex).
    backoff_limit_per_index: NonNegative = 3

    @property
    def resources(self) -> Resources:
        return Resources(cpu=self.cpu, memory=self.memory, gpus=self.gpus)


class CodeSettings(Model):
    source: CodeSource = "configmap"
    # configmap: a directory of this repository, shipped as a ConfigMap (1 MiB limit).
    path: str | None = LAUNCHER_PACKAGE
    # url: fetched by an init container before the task starts (the seed's curl).
    url: Annotated[str, AfterValidator(_http_url)] | None = None


class RunSettings(Model):
    """What TFJob users call the run policy, per training cluster."""

    # Bump to start a fresh run after a failed one: re-applying an unchanged failed Job does
    # nothing (pulumi-kubernetes#856); a new number is a new run id, so a new Job and new PS.
    # Running again after `destroy` or a TTL clean-up needs no bump: a new Job is a new run.
    number: NonNegative = 0
    # Kubernetes fails the worker (and chief) Job this many seconds after it starts; None: never.
    active_deadline_seconds: Positive | None = None
    # Finished worker/chief Jobs and their pods (and the run's PS, which the Job owns) are deleted
    # this long after they end; None: kept. Logs live on the log volume, not in the pods, so
    # nothing of them is lost; `pulumi up --refresh` afterwards starts a new run.
    ttl_seconds_after_finished: NonNegative | None = None


class ScratchSettings(Model):
    size: Quantity = Field(description="the scratch volume's size, e.g. 20Gi")


class ClusterSettings(Model):
    name: DnsName = Field(description="a DNS-1123 name for the training cluster, e.g. mnist")
    replication: Replication = "between-graph"
    training: TrainingMode = "async"
    # In-graph only: who drives the cluster, a chief Job or the user's Jupyter notebook.
    in_graph_client: InGraphClient = "chief"
    ps: PsSettings = Field(default_factory=PsSettings)
    workers: WorkerSettings = Field(default_factory=WorkerSettings)
    image: str | None = None
    code: CodeSettings = Field(default_factory=CodeSettings)
    command: tuple[str, ...] = Field(default=DEFAULT_TRAINER, min_length=1)
    args: tuple[str, ...] = ()
    # Append --ps_hosts/--worker_hosts/--job_name/--task_index/--data_dir/--log_path.
    classic_flags: bool = True
    # The part of the user's data volume mounted at /data (None: all of it, every data set).
    data_sub_path: Annotated[str, AfterValidator(_relative_path)] | None = None
    run: RunSettings = Field(default_factory=RunSettings)
    # A volume of this cluster's own at /scratch in workers and chief (not PS): intermediate files
    # that are not data sets or logs. It is deleted with the experiment; None: no scratch volume.
    scratch: ScratchSettings | None = None


class ExperimentStack(Model):
    """The `tfk8s:` keys of an experiment stack file."""

    kind: Literal["experiment"]
    platform_stack: str = Field(
        min_length=1, description="the platform stack to run on: its name (platform-dev) or org/project/stack"
    )
    user: DnsName = Field(description="whose experiment this is: a user of the platform stack")
    # Names the experiment's objects and its runs (`<experiment>/<cluster>`); default: the stack name.
    experiment: DnsName | None = None
    clusters: tuple[ClusterSettings, ...] = Field(min_length=1, description="the training clusters")


STACK_KINDS: dict[str, type[Model]] = {"platform": PlatformStack, "experiment": ExperimentStack}


# --- what a platform stack publishes for its experiments (its `platform` output) ----------------


class UserFacts(Model):
    namespace: str
    data_claim: str
    log_claim: str
    # host:port of the user's Jupyter as an in-graph chief (the notebook-driven clusters' client).
    notebook_host: str
    jupyter_url: str | None = None
    tensorboard_url: str | None = None


class UserNodeFacts(Model):
    taint_key: str


class LayoutKind(Model):
    """The platform's own Layout kind (tfk8s.guard): experiments create one per cluster, notebooks read them."""

    group: str
    version: str
    kind: str
    plural: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{self.group}"

    @property
    def api(self) -> ApiKind:
        """Where the API serves Layouts: they live in the users' namespaces."""
        return ApiKind(kind=self.kind, api_version=self.api_version, plural=self.plural, namespaced=True)


class PlatformFacts(Model):
    """The platform's published contract: what an experiment may rely on, and nothing else.

    Written once: the platform builds it (platform_stack.facts) and exports it dumped by alias;
    experiments parse that output back with it (platform_ref), leniently (`strict=False`): stack
    outputs travel as JSON numbers (2222.0).
    """

    model_config = ConfigDict(frozen=True, extra="ignore", alias_generator=to_camel, populate_by_name=True)

    schema_version: Literal[1]
    # The owner annotation of the platform's objects (tfk8s.ownership).
    owner: str
    kubernetes_version: KubeVersion
    storage_class: str
    # Where experiments' scratch claims go (backends.scratch_class); None: none offered.
    scratch_storage_class: str | None = None
    user_node: UserNodeFacts
    layouts: LayoutKind
    images: ImageSettings
    ports: PortSettings
    allow_ps_gpus: bool
    await_timeout_seconds: Positive
    users: dict[str, UserFacts]

    @property
    def version(self) -> tuple[int, int]:
        return _version(self.kubernetes_version)
