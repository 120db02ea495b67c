"""The schema of a platform stack file (`tfk8s:kind: platform`): types, defaults and value checks.

A platform stack holds what the cluster's tenants share: storage, the User Node, the Layout and
Tenant kinds, the experimenter role and the destroy guards (see docs/concepts/stacks.md).
What it publishes for tenants and experiments is `tfk8s.settings.contract`; the tenant and experiment stack
files' schemas are `tfk8s.settings.tenant` and `tfk8s.settings.experiment`.
Nothing here touches Pulumi.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from tfk8s.settings.monitoring import MonitoringSettings
from tfk8s.settings.node_keys import selectable_key, tolerable_key
from tfk8s.settings.queueing import QueueingSettings
from tfk8s.settings.storage import StorageSettings
from tfk8s.settings.types import (
    Bytes,
    Cidr,
    DnsName,
    DnsSubdomain,
    Host,
    Image,
    KubeVersion,
    LabelKey,
    LabelValue,
    LinuxId,
    Model,
    NamespacePrefix,
    NonNegative,
    Port,
    Positive,
    PositiveId,
    Quantity,
    version_tuple,
)

# Where TensorBoard listens, on its pod's loopback, behind the token gate users reach (tfk8s.components.user_env).
TENSORBOARD_BACKEND_PORT = 16006


class UserNodeSettings(Model):
    """The one node that runs (and exposes) the user-facing pods."""

    name: DnsSubdomain = Field(description="the name of an existing node to dedicate to Jupyter and TensorBoard")
    address: Host | None = None
    """Address users reach NodePorts on (an IP address or a host name); when unset, the node's
    InternalIP from live status."""
    taint_key: LabelKey = "tfk8s.io/user-node"
    """The key of the NoSchedule taint and of the label tfk8s puts on the User Node. Its taints must
    be none or only this one (another manager's taints stop `preview`)."""
    shared_with_training: bool = False
    """A cluster of one node (k3s, minikube, kind, the local demo's real node): the User Node also
    runs the experiments' parameter servers and workers. The platform then only labels it (no taint,
    and another manager's taints are left alone), and training pods no longer require a node
    without the label. The apps' NetworkPolicies still keep training pods from Jupyter and
    TensorBoard, and tenants still may not select, tolerate or name the node. Keep it off wherever
    there is a second node: training code then shares the kernel of the node users log in to."""


class ImageSettings(Model):
    """The images of the platform's pods; an experiment may set its own `image` per cluster."""

    tensorflow: Image = "tensorflow/tensorflow:2.21.0"
    """Parameter servers, workers and chief, unless the cluster sets `image`."""
    jupyter: Image = "quay.io/jupyter/tensorflow-notebook:2025-12-01"
    """Each tenant's Jupyter (a docker-stacks image: see `podSecurity.jupyter`)."""
    tensorboard: Image = "tensorflow/tensorflow:2.21.0"
    """Each tenant's TensorBoard, and its token gate."""
    allow_latest: bool = False
    """Whether an image tagged latest, or untagged, may run. Off: every image the platform and its
    experiments name is pinned (a tag other than latest, or a digest), so a run can be repeated, and
    `preview`/`up` refuse one that is not, wherever they run (the policy pack's no-latest-image
    refuses it too, in GitOps)."""


class PortSettings(Model):
    """The containers' ports: each its own, since Jupyter listens on its HTTP port and, as an in-graph
    client, on TensorFlow's (Jupyter is told its port through JUPYTER_PORT)."""

    tensorflow: Port = 2222
    """TensorFlow's gRPC servers (PS, workers, chief, and Jupyter as an in-graph client)."""
    jupyter: Port = 8888
    """Jupyter's HTTP port (given to it as JUPYTER_PORT); must differ from `tensorflow`."""
    tensorboard: Port = 6006
    """The port of TensorBoard's token gate, the one users reach."""
    metrics: Port = 9470
    """Where each training task's launcher serves its Prometheus metrics (container port `metrics`,
    given to it as TFK8S_METRICS_PORT; docs/guide/monitoring.md); only the platform's Prometheus
    (`monitoring`) may reach it. Must differ from the other ports."""

    @model_validator(mode="after")
    def _distinct(self) -> PortSettings:
        if self.tensorboard == TENSORBOARD_BACKEND_PORT:
            raise ValueError(
                f"tensorboard is {self.tensorboard}, where TensorBoard itself listens behind its token gate: choose another"
            )
        if self.jupyter == self.tensorflow:
            raise ValueError(
                f"jupyter and tensorflow are both {self.jupyter}: Jupyter listens on both (it is the in-graph client "
                "of notebook-driven clusters); give them different ports"
            )
        # A training task listens on tensorflow and metrics; the policies open each to different peers,
        # so one port for two of them would open one to the other's.
        others = {
            "tensorflow": self.tensorflow,
            "jupyter": self.jupyter,
            "tensorboard": self.tensorboard,
            "TensorBoard's own (behind its token gate)": TENSORBOARD_BACKEND_PORT,
        }
        clash = [name for name, port in others.items() if port == self.metrics]
        if clash:
            raise ValueError(
                f"metrics is {self.metrics}, the port of {clash[0]} too: the policies open each port to different "
                "pods; give metrics a port of its own (default 9470)"
            )
        return self


class DnsSettings(Model):
    """Where the cluster's DNS pods are: every pod of a tenant may ask them, and nothing else outside."""

    namespace: DnsName = "kube-system"
    """The namespace of the DNS pods."""
    pod_labels: dict[LabelKey, LabelValue] = Field(default_factory=lambda: {"k8s-app": "kube-dns"})
    """The labels of the DNS pods (CoreDNS keeps kube-dns's `k8s-app: kube-dns`)."""
    port: Port = 53
    """The port the DNS pods answer on (UDP and TCP)."""
    cidrs: list[Cidr] = Field(default_factory=list)
    """Addresses of a DNS server that is no pod of the pod network, which no pod selector matches,
    e.g. ["169.254.20.10/32"] for NodeLocal DNSCache, or a resolver on the node's own address;
    allowed besides the DNS pods. None wider than /8 (IPv4) or /32 (IPv6)."""


class ApiServerSettings(Model):
    """The API server as pods reach it: the addresses and ports behind the `kubernetes` Service."""

    cidrs: list[Cidr] = Field(default_factory=list)
    """e.g. ["10.0.0.10/32"], none wider than /8 (IPv4) or /32 (IPv6). Empty: read at `pulumi up`
    from the `kubernetes` EndpointSlice of `default`, with the ports. Only PS pods (which retire
    themselves) and Jupyter (which reads Layouts) may reach them."""
    ports: list[Port] = Field(default_factory=list)
    """e.g. [6443]: set with `cidrs`, and only with them (empty `cidrs`: both are read)."""


class NetworkSettings(Model):
    """The NetworkPolicies every tenant's namespace gets (tfk8s.specs.network_policy; docs/security.md "Security model")."""

    policy_enforced: bool = True
    """Whether the cluster's CNI enforces NetworkPolicy (Calico, Cilium and Antrea do; flannel alone and
    kwok do not). tfk8s creates the policies either way; false makes every tenant and experiment warn
    that TensorFlow's unauthenticated gRPC servers are reachable from any pod of the cluster."""
    dns: DnsSettings = Field(default_factory=DnsSettings)
    api_server: ApiServerSettings = Field(default_factory=ApiServerSettings)
    pod_cidrs: list[Cidr] = Field(default_factory=list)
    """The cluster's pod addresses, e.g. ["10.244.0.0/16"]: Jupyter and TensorBoard refuse connections
    from them, so a pod of another tenant (which may open its own egress) never reaches a tenant's
    apps; users still come from outside the pod network through the User Node's NodePorts (which keep
    their address: `externalTrafficPolicy: Local`). On a dual-stack cluster name both families' (a
    family whose pod network is not named reaches no app: its pods could not be told from users).
    Required where `policyEnforced` (the platform's `up` refuses it empty there); empty where
    policies are not enforced."""


class PlacementSettings(Model):
    """Where training pods may ask to run: what an experiment's `ps` and `workers` `tolerations` and
    `nodeSelector` may name. Never the taints Kubernetes puts on nodes (the control plane's, a cordoned
    or failing node's) nor the User Node's; never its label, the control plane's or `kubernetes.io/hostname`
    (tfk8s.settings.node_keys)."""

    toleration_keys: list[Annotated[LabelKey, AfterValidator(tolerable_key)]] = Field(default_factory=list)
    """Taint keys training pods may tolerate, e.g. ["nvidia.com/gpu"]; empty: any but Kubernetes' own
    (node-role.kubernetes.io/*, node.kubernetes.io/*, node.cloudprovider.kubernetes.io/*) and the User
    Node's. List them to keep other teams' tainted nodes theirs."""
    node_selector_keys: list[Annotated[LabelKey, AfterValidator(selectable_key)]] = Field(default_factory=list)
    """Node label keys training pods may select on, e.g. ["example.com/gpu"]; empty: any but the User
    Node's and the control plane's (node-role.kubernetes.io/*)."""
    priority_classes: list[DnsName] = Field(default_factory=list)
    """PriorityClasses the pods in tenants' namespaces may name, e.g. ["tfk8s-batch"]; empty: none. A
    pod of higher priority preempts lower ones on a full node, other tenants' Jupyter among them
    (`system-node-critical` would outrank everything), so the platform lists what tenants may use."""


class PodIdentity(Model):
    """The non-root user and groups a pod's processes run as (its pod-level securityContext)."""

    run_as_user: PositiveId = Field(
        description="UID of every process in the pod; never 0: the `restricted` Pod Security Standard refuses root"
    )
    run_as_group: LinuxId = Field(description="primary GID of those processes: the group of every file they create")
    fs_group: LinuxId = Field(
        description="supplementary GID of the processes. Volumes whose ownership Kubernetes manages (emptyDir, "
        "block storage, CSI drivers whose fsGroupPolicy allows it; not hostPath) are given to this group, "
        "group-writable, when mounted"
    )


class PodSecuritySettings(Model):
    """Who tfk8s's pods run as. Every pod passes the `restricted` Pod Security Standard, which each
    user's namespace enforces, so none runs as root (see docs/security.md "Pod security")."""

    tensorflow: PodIdentity = PodIdentity(run_as_user=1000, run_as_group=1000, fs_group=1000)
    """Pods of the TensorFlow images: training pods (PS, workers, chief) and TensorBoard. Those images
    run as root unless told otherwise, so they get this UID. 1000 is Jupyter's UID too: the notebook
    (an in-graph chief) and the workers own what each other writes on the shared log volume."""
    jupyter: PodIdentity = PodIdentity(run_as_user=1000, run_as_group=100, fs_group=100)
    """Jupyter: the docker-stacks image's own user `jovyan` (1000) and group `users` (100), which own
    its home directory; change it only with an image built for another user."""


class Quota(Model):
    """What one user's namespace may hold at once, all experiments and the user's Jupyter and
    TensorBoard together: the namespace's ResourceQuota (tfk8s.specs.quota). Kubernetes refuses a pod or
    claim beyond it, and an experiment that would not fit is refused at preview, with the numbers.

    The defaults fit the repository's stacks and a few experiments per user with room to spare
    (the local cluster's e2e tests run three of alice's at once, 1 PS + 2 workers each, and two
    GPU workers), while one experiment with `workers.count: 500` can no longer take the cluster."""

    cpu: Quantity = "32"
    """CPU cores requested (and limited: tfk8s pods set requests = limits) by all pods of the user
    together, e.g. "32" or "500m". 32: two of the local cluster's CPU nodes, about 12 experiments
    of 1 PS + 2 workers at the defaults (1 core each, 500m per PS)."""
    memory: Bytes = "128Gi"
    """Memory requested (and limited) by all pods of the user together, e.g. 128Gi. 4 GiB per
    default core: the defaults' 2Gi per worker core with room for larger workers."""
    gpus: NonNegative = 4
    """`nvidia.com/gpu` requested by all pods of the user together (0: no GPUs). 4: one GPU node
    of the local cluster; accelerators are the scarce resource, so ask for more explicitly."""
    storage: Bytes = "500Gi"
    """The sum of the sizes of all the user's claims (`requests.storage`): the data and log
    volumes (10Gi each by default) and experiments' scratch volumes, e.g. 500Gi."""
    pods: Positive = 100
    """Pods that are not finished (Jupyter and TensorBoard are 2). 100: a rerun briefly runs the
    old run's pods next to the new ones, and a finished Job's pods no longer count."""
    services: Positive = 50
    """Services: 3 of the platform's (Jupyter, TensorBoard, the notebook's TensorFlow port), and
    per training cluster one per PS plus one per Job (workers, chief)."""
    persistent_volume_claims: Positive = 20
    """Claims: the data and log volumes, plus one per training cluster with a scratch volume."""
    # Object counts: what the tenant's people could otherwise create without bound with kubectl,
    # each object the API server's memory and etcd's disk, shared by every tenant.
    config_maps: Positive = 100
    """ConfigMaps: the platform's 4 (trainer, notebooks, guard, kube-root-ca.crt), and per experiment
    its trainer package plus one per training cluster with ConfigMap code."""
    secrets: Positive = 20
    """Secrets: the platform's Jupyter token; experiments make none."""
    service_accounts: Positive = 50
    """ServiceAccounts: `default` and Jupyter's, plus one per training cluster (its PS retirement)."""
    roles: Positive = 50
    """Roles: 2 of the platform's, plus one per training cluster."""
    role_bindings: Positive = 50
    """RoleBindings: 3 of the platform's, plus one per training cluster."""
    network_policies: Positive = 50
    """NetworkPolicies: the platform's (deny by default, DNS, the apps), plus one per training cluster."""
    jobs: Positive = 100
    """Jobs: one or two per training cluster (workers, and an in-graph chief)."""
    deployments: Positive = 100
    """Deployments: Jupyter and TensorBoard, plus one per PS."""


class ContainerDefaults(Model):
    """The resources of a container in a user's namespace that sets none: the namespace's
    LimitRange, requests = limits. tfk8s's training containers size themselves; this covers
    Jupyter and TensorBoard, and the pods a user creates by hand (which the quota would refuse
    without requests)."""

    cpu: Quantity = "1"
    """CPU cores per container (requests = limits), e.g. "1". 1: a default worker's."""
    memory: Bytes = "2Gi"
    """Memory per container (requests = limits), e.g. 2Gi. 2Gi: a default worker's, enough for
    Jupyter driving a notebook client; raise it for heavier notebooks."""
    ephemeral_storage: Bytes = "4Gi"
    """The most node-local disk a container may fill (its writable layer and logs), e.g. 4Gi: every
    container's limit and the largest any may set, so a pod cannot fill the node's disk under other
    tenants' pods. 4Gi: room for Jupyter's pip installs in its home."""


class GitOpsSettings(Model):
    """See docs/guide/gitops.md, "What a pull request runs"."""

    preview_identity: bool = False
    """Declare the identity a pull request's preview runs as, `system:serviceaccount:tfk8s-gitops:tfk8s-preview`
    (tfk8s.specs.preview_identity): in every tenant's namespace it may read and dry-run what an experiment
    declares (no Secret, no log, no exec), and the API server refuses each of its requests that is not a
    dry run. Its token is what the preview workflow holds instead of the team's credentials. Needs
    Kubernetes 1.30+ (ValidatingAdmissionPolicy)."""


class PlatformSettings(Model):
    user_node: UserNodeSettings
    storage: StorageSettings = Field(default_factory=StorageSettings)
    images: ImageSettings = Field(default_factory=ImageSettings)
    ports: PortSettings = Field(default_factory=PortSettings)
    network: NetworkSettings = Field(default_factory=NetworkSettings)
    """Who may talk to whom in tenants' namespaces, and whether the cluster enforces it."""
    monitoring: MonitoringSettings = Field(default_factory=MonitoringSettings)
    """The platform's Prometheus: where it runs, which of its pods may scrape training tasks, how the scrape is declared."""
    queueing: QueueingSettings = Field(default_factory=QueueingSettings)
    """Whether experiments wait their turn in Kueue, and the capacity and priorities they share (off by default)."""
    pod_security: PodSecuritySettings = Field(default_factory=PodSecuritySettings)
    """Who the pods of the platform and its experiments run as (non-root: users' namespaces enforce `restricted`)."""
    kubernetes_version: KubeVersion | None = None
    """The target cluster's Kubernetes version, "major.minor". Optional: the API server's own /version is
    read at preview and wins, and a different value here is an error; needed only where /version cannot be
    read with the kubeconfig's credentials. glusterfs is refused from 1.26; Job retries are per worker
    from 1.29; the destroy guard needs 1.30."""
    namespace_prefix: NamespacePrefix = "tfk8s-"
    """Each tenant's namespace is this prefix and the tenant's name (at most 63 characters)."""
    tensorboard_requires_token: bool = True
    """TensorBoard has no authentication: it listens on its pod's loopback behind a gate that asks for
    the tenant's Jupyter token (docs/security.md "Security model"). false: TensorBoard answers anyone who
    reaches the User Node's NodePort."""
    placement: PlacementSettings = Field(default_factory=PlacementSettings)
    """What experiments' tolerations and node selectors may name."""
    allow_ps_gpus: bool = False
    """GPUs on parameter servers waste accelerators on a memory-bound job; opt in explicitly."""
    await_timeout_seconds: Positive = 600
    """How long `pulumi up` waits for PS, workers, Jupyter and TensorBoard to come up."""
    default_quota: Quota = Field(default_factory=Quota)
    """Every tenant's namespace quota unless the tenant stack sets its own (`tenant.quota`)."""
    container_defaults: ContainerDefaults = Field(default_factory=ContainerDefaults)
    """Requests = limits of containers that set none, in every user's namespace (a LimitRange)."""
    gitops: GitOpsSettings = Field(default_factory=GitOpsSettings)
    """What the team's GitOps pipeline gets from the platform: an identity for pull requests' previews."""

    @property
    def version(self) -> tuple[int, int] | None:
        return version_tuple(self.kubernetes_version) if self.kubernetes_version else None


class PlatformStack(Model):
    """The `tfk8s:` keys of a platform stack file (the secret `heketiAdminKey` apart). Users are
    tenant stacks of their own (tfk8s.settings.tenant)."""

    kind: Literal["platform"]
    platform: PlatformSettings
