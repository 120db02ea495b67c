"""The schema of an experiment stack file (`tfk8s:kind: experiment`): types, defaults and value checks.

An experiment stack holds one tenant's training clusters, placed in that tenant's namespace; it
reads its tenant's and platform's facts (`tfk8s.settings.contract`) from the contract the tenant stack
publishes in that namespace (`tfk8s.stack_kinds.tenant_contract`), with the experimenter's own credentials, and
the checks that need them are `tfk8s.checks.context`. Nothing here touches Pulumi: the launcher's tests
build these models without an engine.
"""

from __future__ import annotations

import ipaddress
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, model_validator

from tfk8s.settings.types import (
    Bytes,
    Cidr,
    CodeUrl,
    DnsName,
    Image,
    LabelKey,
    LabelValue,
    Model,
    NamespaceName,
    NonNegative,
    Positive,
    Quantity,
    RelativePath,
    ServiceName,
)

Replication = Literal["between-graph", "in-graph"]
TrainingMode = Literal["async", "sync"]
CodeSource = Literal["configmap", "url", "image"]
InGraphClient = Literal["chief", "notebook"]

# The launcher and our trainer: always shipped to every TensorFlow pod (see tfk8s.specs.code).
LAUNCHER_PACKAGE = "training/tfk8s_train"
# Our trainer, shipped with the launcher; any other command is a user script.
DEFAULT_TRAINER = ("python", "-m", "tfk8s_train", "train")
# The trainer's own default too (tfk8s_train.config.TrainConfig.checkpoint_seconds).
DEFAULT_CHECKPOINT_SECONDS = 60


class Resources(Model):
    cpu: Quantity = "1"
    """CPU cores of each pod, requests = limits."""
    memory: Bytes = "2Gi"
    """Memory of each pod, requests = limits."""
    gpus: NonNegative = 0
    """GPUs of each pod, as `nvidia.com/gpu`."""


class Toleration(Model):
    """A Kubernetes toleration of a role's pods, e.g. of a GPU node pool's taint. The User Node's
    taint is never tolerable (tfk8s.checks.context)."""

    key: LabelKey | None = None
    """The taint's key; None with `operator: Exists` tolerates every taint, which is refused."""
    operator: Literal["Exists", "Equal"] = "Equal"
    """Equal: the taint's value must be `value`; Exists: any value of `key`."""
    value: LabelValue | None = None
    """The taint's value, with `operator: Equal`."""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    """The taint effect tolerated; None: every effect."""
    toleration_seconds: int | None = None
    """NoExecute only: how long the pod stays on a node after the taint appears."""

    @model_validator(mode="after")
    def _as_kubernetes_accepts(self) -> Toleration:
        # The API server's own rules, refused here with the fix instead of by the provider mid-update.
        if self.operator == "Exists" and self.value is not None:
            raise ValueError("operator Exists tolerates any value: remove `value`, or use operator Equal")
        if self.key is None and self.operator != "Exists":
            raise ValueError("a toleration without `key` must have operator Exists (and then tolerates every taint)")
        if self.toleration_seconds is not None and self.effect != "NoExecute":
            raise ValueError("tolerationSeconds applies to effect NoExecute alone: set `effect: NoExecute` or remove it")
        return self


class Placement(Model):
    """Where a role's pods may run, as Kubernetes places pods: what the platform allows of it is
    `platform.placement` (tfk8s.checks.context). The in-graph chief is placed as the PS are."""

    node_selector: dict[LabelKey, LabelValue] = Field(default_factory=dict)
    """Node labels the pods must run on, e.g. {"example.com/gpu": "a100"}."""
    tolerations: tuple[Toleration, ...] = ()
    """Taints the pods tolerate, e.g. a GPU pool's or a dedicated CPU pool's."""


class PsSettings(Placement, Resources):
    count: Positive = 1
    """Parameter servers: one Deployment and one Service each."""
    cpu: Quantity = "500m"
    """CPU cores of each parameter server, requests = limits."""
    memory: Bytes = "1Gi"
    """Memory of each parameter server, requests = limits."""

    @property
    def resources(self) -> Resources:
        return Resources(cpu=self.cpu, memory=self.memory, gpus=self.gpus)


class WorkerSettings(Placement, Resources):
    count: Positive = 2
    """Workers: the pods of one Indexed Job."""
    backoff_limit_per_index: NonNegative = 3
    """Retries per worker index before the whole Job, and the run, fails (Indexed Job
    backoffLimitPerIndex). Kubernetes < 1.29: the same total, shared (`backoffLimit` = this x workers)."""

    @property
    def resources(self) -> Resources:
        return Resources(cpu=self.cpu, memory=self.memory, gpus=self.gpus)


def url_address(url: str) -> str | None:
    """The CIDR of the URL's host when it is an IP address (a /32 or /128), else None."""
    try:
        address = ipaddress.ip_address(urlsplit(url).hostname or "")
    except ValueError:
        return None
    return f"{address}/{address.max_prefixlen}"


class CodeSettings(Model):
    source: CodeSource = "configmap"
    """How the code reaches the pods: configmap (`path`), url (`url`) or image (already in `image`)."""
    path: str | None = LAUNCHER_PACKAGE
    """configmap: a directory of this repository, shipped as a ConfigMap (1 MiB limit)."""
    url: CodeUrl | None = None
    """url: fetched by an init container before the task starts (the seed's curl)."""
    addresses: tuple[Cidr, ...] = ()
    """url: the addresses the URL's host resolves to, as CIDRs (e.g. 203.0.113.7/32): where the
    training pods may fetch from, on the URL's port, and nowhere else (a NetworkPolicy names no
    hosts). Needed when the host is a name; a host that is an IP address opens that address."""

    @model_validator(mode="after")
    def _opens_the_host_alone(self) -> CodeSettings:
        if self.addresses and self.source != "url":
            raise ValueError(f"addresses apply to source: url alone (this code is source: {self.source}): remove them")
        for cidr in (*self.addresses, *filter(None, [url_address(self.url or "")])):
            network = ipaddress.ip_network(cidr)
            if network.is_link_local or network.is_loopback or network.is_multicast or network.is_unspecified:
                # 169.254.169.254 is a cloud's metadata service: node credentials, for any pod let through.
                raise ValueError(
                    f"{cidr} is a link-local, loopback or multicast address, which no training pod may reach (a cloud's "
                    "metadata service answers at 169.254.169.254): serve the code from an address of your network"
                )
        if self.source == "url" and self.url and not self.addresses and url_address(self.url) is None:
            host = urlsplit(self.url).hostname
            raise ValueError(
                f"the url's host {host!r} is a name, and a NetworkPolicy opens addresses alone: list the addresses "
                "it resolves to from the cluster under code.addresses, e.g. addresses: [203.0.113.7/32], or use an "
                "IP address in the url"
            )
        return self


class RunSettings(Model):
    """What TFJob users call the run policy, per training cluster."""

    number: NonNegative = 0
    """Bump to start a fresh run from step 0 after a failed one: re-applying an unchanged failed Job
    does nothing (pulumi-kubernetes#856); a new number is a new run id and a new lineage, so a new Job,
    new PS and no checkpoint taken over. Running again after `destroy` or a TTL clean-up needs no
    bump: a new Job is a new run, which continues from the newest checkpoint of an earlier run of the
    same settings and code that did not end (docs/guide/faults.md), and else starts from step 0."""
    active_deadline_seconds: Positive | None = None
    """Kubernetes fails the worker (and chief) Job this many seconds after it starts; None: never."""
    ttl_seconds_after_finished: NonNegative | None = None
    """Finished worker/chief Jobs and their pods (and the run's PS, which the Job owns) are deleted
    this long after they end; None: kept. Logs live on the log volume, not in the pods, so
    nothing of them is lost; `pulumi up --refresh` afterwards starts a new run."""
    checkpoint_seconds: Positive = DEFAULT_CHECKPOINT_SECONDS
    """The most training a lost task may cost: the built-in trainer's chief checkpoints at least this
    often on the log volume (besides every `--checkpoint-steps` global steps), and a task that comes
    back resumes from the newest checkpoint. Set to another value, every task gets it as
    TFK8S_CHECKPOINT_SECONDS, for a script of one's own to do the same (docs/guide/faults.md)."""
    node_lost_seconds: NonNegative | None = None
    """How long a task's pod waits for its node when the node stops answering (NotReady or
    unreachable) before Kubernetes evicts it and its task starts again on another node, from the
    newest checkpoint: the `tolerationSeconds` of every training pod's tolerations of
    node.kubernetes.io/not-ready and node.kubernetes.io/unreachable. The node's own grace comes
    first (kube-controller-manager's --node-monitor-grace-period, 50 s by default). None:
    Kubernetes' default, 300 s. A change is a new run, which continues the training from its
    newest checkpoint."""
    priority: DnsName | None = None
    """On a queueing platform, the WorkloadPriorityClass the run waits at: one of the platform's
    `queueing.priorityClasses` (e.g. urgent). A higher one is admitted first and may preempt a lower
    run of this tenant, or what another tenant borrowed beyond its fair share; the preempted run
    resumes from its checkpoint once admitted again. None: the platform's default (0). No new run
    when it changes (tfk8s.specs.cluster_spec.run_id leaves it out)."""


class ScratchSettings(Model):
    size: Bytes = Field(description="the scratch volume's size, e.g. 20Gi")


class ClusterSettings(Model):
    # A digit first is fine: every object name it is part of starts with the experiment's name
    # (tfk8s.specs.cluster_spec.qualified_name), which is a DNS-1035 label.
    name: DnsName = Field(description="a DNS-1123 label for the training cluster, e.g. mnist or 2d-unet")
    replication: Replication = "between-graph"
    """between-graph: every worker is a client of its own; in-graph: one client drives all (`inGraphClient`)."""
    training: TrainingMode = "async"
    """Passed to the trainer as --sync, to user scripts and a notebook client as TFK8S_TRAINING."""
    in_graph_client: InGraphClient = "chief"
    """In-graph only: who drives the cluster, a chief Job or the user's Jupyter notebook."""
    ps: PsSettings = Field(default_factory=PsSettings)
    workers: WorkerSettings = Field(default_factory=WorkerSettings)
    image: Image | None = None
    """The TensorFlow image of this cluster's pods; None: the platform's `images.tensorflow`."""
    code: CodeSettings = Field(default_factory=CodeSettings)
    command: tuple[str, ...] = Field(default=DEFAULT_TRAINER, min_length=1)
    """The task's command, run through the launcher (which gives it TF_CONFIG and, with
    `classicFlags`, the seed's flags)."""
    args: tuple[str, ...] = ()
    """Extra arguments after `command`."""
    classic_flags: bool = True
    """Append --ps_hosts/--worker_hosts/--job_name/--task_index/--data_dir/--log_path."""
    data_sub_path: RelativePath | None = None
    """The part of the user's data volume mounted at /data (None: all of it, every data set)."""
    data_writable: bool = False
    """Mount /data read-write, for a cluster that writes data sets (`python -m tfk8s_train prepare-data`).
    Read-only by default: every experiment of the user reads the same data sets."""
    run: RunSettings = Field(default_factory=RunSettings)
    scratch: ScratchSettings | None = None
    """A volume of this cluster's own at /scratch in workers and chief (not PS): intermediate files
    that are not data sets or logs. It is deleted with the experiment; None: no scratch volume."""


class ExperimentStack(Model):
    """The `tfk8s:` keys of an experiment stack file."""

    kind: Literal["experiment"]
    namespace: NamespaceName = Field(
        min_length=1,
        description="whose experiment this is: the namespace of the tenant to run in (tfk8s-alice), where its tenant "
        "stack publishes what experiments rely on",
    )
    experiment: ServiceName | None = None
    """Names the experiment's objects and its runs (`<experiment>/<cluster>`); default: the stack name."""
    clusters: tuple[ClusterSettings, ...] = Field(min_length=1, description="the training clusters")
