"""What the platform team's credentials must be allowed, asked of the API server before the first `up`.

The platform stack and the tenant stacks (both the platform team's) manage the kinds below; each
is asked with the verbs the provider uses on what it manages (tfk8s.specs.experimenter_rights.MANAGED), cluster-wide:
a tenant's namespaced objects live in namespaces that do not exist yet. tests/unit/test_doctor.py
holds this table to what the programs declare under mocks (their golden manifests), so a kind a
stack starts declaring cannot be left out here.

Not asked: the platform's own kinds (its Layout and Tenant, defined by the CRDs it creates, cannot
be asked about before they exist; whoever may create CRDs is in practice allowed them), and RBAC's
`escalate`/`bind`, which credentials holding every rule they grant do not need.
"""

from __future__ import annotations

from collections.abc import Sequence

from tfk8s.kube.api_paths import (
    CLUSTER_QUEUE,
    COHORT,
    LOCAL_QUEUE,
    POD_MONITOR,
    RESOURCE_FLAVOR,
    WORKLOAD_PRIORITY_CLASS,
    ApiKind,
)
from tfk8s.settings.platform import PlatformSettings
from tfk8s.specs.experimenter_rights import MANAGED, Permission

PLATFORM = "the platform stack"
TENANT = "each tenant stack"


def _perm(group: str, resource: str, needed_for: str, *, namespaced: bool, verbs: tuple[str, ...] = MANAGED) -> Permission:
    return Permission(api_group=group, resource=resource, verbs=verbs, needed_for=needed_for, namespaced=namespaced)


# Kinds by (API group, kind), as manifests name them, and the resource RBAC asks about.
ALWAYS: dict[tuple[str, str], Permission] = {
    ("apiextensions.k8s.io", "CustomResourceDefinition"): _perm(
        "apiextensions.k8s.io", "customresourcedefinitions", f"{PLATFORM}: its Layout and Tenant kinds", namespaced=False
    ),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"): _perm(
        "admissionregistration.k8s.io", "validatingadmissionpolicies", f"{PLATFORM}: its guards (1.30+)", namespaced=False
    ),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"): _perm(
        "admissionregistration.k8s.io", "validatingadmissionpolicybindings", f"{PLATFORM}: its guards (1.30+)", namespaced=False
    ),
    ("rbac.authorization.k8s.io", "ClusterRole"): _perm(
        "rbac.authorization.k8s.io", "clusterroles", f"{PLATFORM}: the experimenter role", namespaced=False
    ),
    ("storage.k8s.io", "StorageClass"): _perm(
        "storage.k8s.io", "storageclasses", f"{PLATFORM}: the shared volumes' class", namespaced=False
    ),
    ("", "Node"): _perm("", "nodes", f"{PLATFORM}: the User Node's label and taint", namespaced=False, verbs=("get", "patch")),
    ("", "Namespace"): _perm("", "namespaces", f"{TENANT}: its namespace", namespaced=False),
    ("", "PersistentVolume"): _perm("", "persistentvolumes", f"{TENANT}: its volumes on local storage", namespaced=False),
    ("", "PersistentVolumeClaim"): _perm("", "persistentvolumeclaims", f"{TENANT}: its data and log claims", namespaced=True),
    ("", "ResourceQuota"): _perm("", "resourcequotas", f"{TENANT}: its quota", namespaced=True),
    ("", "LimitRange"): _perm("", "limitranges", f"{TENANT}: its containers' defaults", namespaced=True),
    ("", "Secret"): _perm("", "secrets", f"{TENANT}: its Jupyter token", namespaced=True),
    ("", "ConfigMap"): _perm("", "configmaps", f"{TENANT}: its contract and apps' settings", namespaced=True),
    ("", "Service"): _perm("", "services", f"{TENANT}: Jupyter's and TensorBoard's NodePorts", namespaced=True),
    ("", "ServiceAccount"): _perm("", "serviceaccounts", f"{TENANT}: its apps' identities", namespaced=True),
    ("apps", "Deployment"): _perm("apps", "deployments", f"{TENANT}: Jupyter and TensorBoard", namespaced=True),
    ("rbac.authorization.k8s.io", "Role"): _perm(
        "rbac.authorization.k8s.io", "roles", f"{TENANT}: its apps' roles", namespaced=True
    ),
    ("rbac.authorization.k8s.io", "RoleBinding"): _perm(
        "rbac.authorization.k8s.io", "rolebindings", f"{TENANT}: its identities' experimenter role", namespaced=True
    ),
    ("networking.k8s.io", "NetworkPolicy"): _perm(
        "networking.k8s.io", "networkpolicies", f"{TENANT}: its firewall", namespaced=True
    ),
}


def _of(kind: ApiKind, needed_for: str) -> tuple[tuple[str, str], Permission]:
    return (kind.group, kind.kind), _perm(kind.group, kind.plural, needed_for, namespaced=kind.namespaced)


QUEUEING = dict(
    [
        _of(RESOURCE_FLAVOR, f"{PLATFORM}: queueing's flavor"),
        _of(COHORT, f"{PLATFORM}: queueing's cohort"),
        _of(WORKLOAD_PRIORITY_CLASS, f"{PLATFORM}: queueing's priority classes"),
        _of(CLUSTER_QUEUE, f"{TENANT}: its queue"),
        _of(LOCAL_QUEUE, f"{TENANT}: its queue"),
    ]
)
MONITORING = dict([_of(POD_MONITOR, f"{PLATFORM}: the scrape of its tenants' training pods")])
# Where the platform fences its monitoring namespace (it names its pod network), it declares a
# NetworkPolicy too, beside the tenants' own.
FENCED = {
    ("networking.k8s.io", "NetworkPolicy"): _perm(
        "networking.k8s.io",
        "networkpolicies",
        f"{TENANT}: its firewall; {PLATFORM}: its monitoring namespace's fence",
        namespaced=True,
    )
}


def needed(settings: PlatformSettings, *, pod_monitors: bool) -> Sequence[Permission]:
    """What the platform and tenant stacks of `settings` manage; `pod_monitors`: the cluster serves
    PodMonitors and the platform's monitoring would declare them."""
    table = dict(ALWAYS)
    if settings.queueing.enabled:
        table.update(QUEUEING)
    if settings.monitoring.namespace and pod_monitors and settings.monitoring.scrape != "scrapeConfig":
        table.update(MONITORING)
    if settings.monitoring.namespace and settings.network.pod_cidrs:
        table.update(FENCED)
    return list(table.values())
