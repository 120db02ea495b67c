"""Where the Kubernetes API serves each kind tfk8s reads by name: the one table of API paths.

Before anything is declared, the program GETs the objects it would create under fixed names
(tfk8s.specs.ownership) and the storage classes a platform uses without creating them
(tfk8s.specs.backends), and an experiment reads its user's quota and lists its own pods, Services and
claims (tfk8s.checks.quota). Those reads take their paths from the kinds below, so no other code writes an
API path. A kind a platform defines itself (its Layout, tfk8s.components.guard) is an `ApiKind` too.

Pure: no Pulumi, so settings, config checks and tests use it without a program.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote


@dataclass(frozen=True, kw_only=True)
class ApiKind:
    """A kind as the API serves it: its apiVersion, its resource (plural) and its scope."""

    kind: str  # as in manifests: "StorageClass"
    api_version: str  # "v1" for the core group, else "<group>/<version>"
    plural: str
    namespaced: bool

    @property
    def group(self) -> str:
        """The API group, as RBAC and admission rules name it: "" for the core group."""
        return self.api_version.rpartition("/")[0]

    @property
    def root(self) -> str:
        """The API root serving the kind: /api/v1 for the core group, /apis/<group>/<version> otherwise."""
        return f"/apis/{self.api_version}" if "/" in self.api_version else f"/api/{self.api_version}"

    def path(self, name: str, namespace: str | None = None) -> str:
        """The path of one object: a namespace for namespaced kinds, none for cluster-scoped ones."""
        if self.namespaced != (namespace is not None):
            raise ValueError(f"{self.kind} is {'namespaced' if self.namespaced else 'cluster-scoped'}: {name!r} in {namespace!r}")
        scope = f"/namespaces/{namespace}" if namespace is not None else ""
        return f"{self.root}{scope}/{self.plural}/{name}"

    def count_path(self) -> str:
        """The path listing one object of a cluster-scoped kind: the list's `remainingItemCount` tells
        how many there are, without transferring them."""
        if self.namespaced:
            raise ValueError(f"{self.kind} is namespaced: count it per namespace")
        return f"{self.root}/{self.plural}?limit=1"

    def list_path(self, namespace: str, label_selector: dict[str, str]) -> str:
        """The path listing the objects of a namespaced kind in `namespace` that carry every label given."""
        if not self.namespaced:
            raise ValueError(f"{self.kind} is cluster-scoped: no list in namespace {namespace!r}")
        selector = quote(",".join(f"{k}={v}" for k, v in sorted(label_selector.items())), safe="")
        collection = f"{self.root}/namespaces/{namespace}/{self.plural}"
        return f"{collection}?labelSelector={selector}" if selector else collection


# The built-in kinds tfk8s creates under fixed names or reads by name.
NAMESPACE = ApiKind(kind="Namespace", api_version="v1", plural="namespaces", namespaced=False)
SECRET = ApiKind(kind="Secret", api_version="v1", plural="secrets", namespaced=True)
SERVICE = ApiKind(kind="Service", api_version="v1", plural="services", namespaced=True)
PERSISTENT_VOLUME_CLAIM = ApiKind(
    kind="PersistentVolumeClaim", api_version="v1", plural="persistentvolumeclaims", namespaced=True
)
# A user's namespace quota and container defaults (tfk8s.specs.quota); pods, listed to sum an experiment's own use.
RESOURCE_QUOTA = ApiKind(kind="ResourceQuota", api_version="v1", plural="resourcequotas", namespaced=True)
LIMIT_RANGE = ApiKind(kind="LimitRange", api_version="v1", plural="limitranges", namespaced=True)
POD = ApiKind(kind="Pod", api_version="v1", plural="pods", namespaced=True)
JOB = ApiKind(kind="Job", api_version="batch/v1", plural="jobs", namespaced=True)
# An experiment's trainer package, named after its content (tfk8s.components.experiment).
CONFIG_MAP = ApiKind(kind="ConfigMap", api_version="v1", plural="configmaps", namespaced=True)
STORAGE_CLASS = ApiKind(kind="StorageClass", api_version="storage.k8s.io/v1", plural="storageclasses", namespaced=False)
# What `tfk8s doctor` reads or cleans up (tfk8s.doctor): a CSI driver by name, the guards' admission
# API (its discovery document), a volume its probe's claim left behind.
CSI_DRIVER = ApiKind(kind="CSIDriver", api_version="storage.k8s.io/v1", plural="csidrivers", namespaced=False)
VALIDATING_ADMISSION_POLICY = ApiKind(
    kind="ValidatingAdmissionPolicy",
    api_version="admissionregistration.k8s.io/v1",
    plural="validatingadmissionpolicies",
    namespaced=False,
)
PERSISTENT_VOLUME = ApiKind(kind="PersistentVolume", api_version="v1", plural="persistentvolumes", namespaced=False)
CUSTOM_RESOURCE_DEFINITION = ApiKind(
    kind="CustomResourceDefinition", api_version="apiextensions.k8s.io/v1", plural="customresourcedefinitions", namespaced=False
)
# The platform's experimenter role, which tenants bind in their namespaces (tfk8s.specs.experimenter_rights).
CLUSTER_ROLE = ApiKind(kind="ClusterRole", api_version="rbac.authorization.k8s.io/v1", plural="clusterroles", namespaced=False)
# The User Node, read whole by a tenant for its allocatable pods (tfk8s.checks.user_node.check_room).
NODE = ApiKind(kind="Node", api_version="v1", plural="nodes", namespaced=False)
# Tenants' and training clusters' NetworkPolicies (tfk8s.specs.network_policy), created under fixed names.
NETWORK_POLICY = ApiKind(kind="NetworkPolicy", api_version="networking.k8s.io/v1", plural="networkpolicies", namespaced=True)
# Where the `kubernetes` Service of `default` really goes: the API server as pods reach it.
ENDPOINT_SLICE = ApiKind(kind="EndpointSlice", api_version="discovery.k8s.io/v1", plural="endpointslices", namespaced=True)
# The Prometheus Operator's kind, which a platform declares its scrape as where the cluster serves it
# (tfk8s.components.monitoring); its group version's discovery document says whether it does.
POD_MONITOR = ApiKind(kind="PodMonitor", api_version="monitoring.coreos.com/v1", plural="podmonitors", namespaced=True)
# Kueue's and JobSet's kinds, which a queueing platform needs served (tfk8s.checks.queueing) and declares
# under fixed names (tfk8s.components.queueing).
RESOURCE_FLAVOR = ApiKind(kind="ResourceFlavor", api_version="kueue.x-k8s.io/v1beta2", plural="resourceflavors", namespaced=False)
COHORT = ApiKind(kind="Cohort", api_version="kueue.x-k8s.io/v1beta2", plural="cohorts", namespaced=False)
CLUSTER_QUEUE = ApiKind(kind="ClusterQueue", api_version="kueue.x-k8s.io/v1beta2", plural="clusterqueues", namespaced=False)
LOCAL_QUEUE = ApiKind(kind="LocalQueue", api_version="kueue.x-k8s.io/v1beta2", plural="localqueues", namespaced=True)
WORKLOAD_PRIORITY_CLASS = ApiKind(
    kind="WorkloadPriorityClass", api_version="kueue.x-k8s.io/v1beta2", plural="workloadpriorityclasses", namespaced=False
)
# A queued cluster's Workload, which its readiness lists (tfk8s.stack_kinds.queue_status).
WORKLOAD = ApiKind(kind="Workload", api_version="kueue.x-k8s.io/v1beta2", plural="workloads", namespaced=True)
JOBSET = ApiKind(kind="JobSet", api_version="jobset.x-k8s.io/v1alpha2", plural="jobsets", namespaced=True)
