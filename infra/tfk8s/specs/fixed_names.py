"""The names objects get before they exist: what a tenant's environment and a training cluster
create under fixed names, as the ownership and collision checks claim them before anything is
declared (tfk8s.specs.ownership.Claimed), and the components then use. Pure.

The names of a cluster's own objects are its `Names` (tfk8s.specs.cluster_spec); the platform's
components list theirs beside them (their `fixed_objects`).
"""

from __future__ import annotations

from tfk8s.kube.api_paths import (
    CONFIG_MAP,
    JOB,
    JOBSET,
    LIMIT_RANGE,
    NAMESPACE,
    NETWORK_POLICY,
    PERSISTENT_VOLUME_CLAIM,
    RESOURCE_QUOTA,
    SECRET,
    SERVICE,
)
from tfk8s.settings import NAMESPACE as CONFIG_NAMESPACE
from tfk8s.settings.contract import PlatformFacts, PlatformKind
from tfk8s.settings.experiment import ClusterSettings
from tfk8s.settings.tenant import TenantSettings
from tfk8s.specs import app_sessions, jobset, network_policy, quota
from tfk8s.specs import cluster_spec as cs
from tfk8s.specs.code import CodeBundle
from tfk8s.specs.ownership import Claimed


def namespace_name(platform: PlatformFacts, user: str) -> str:
    """A tenant's namespace: the platform's prefix and the tenant's name."""
    return f"{platform.namespace_prefix}{user}"


def tenant_claims(platform: PlatformFacts, user: TenantSettings, key: str) -> list[Claimed]:
    """What a UserEnvironment (tfk8s.components.user_env) creates under fixed names: the namespace, and in it the namespace's
    quota, container defaults (tfk8s.specs.quota) and network policies (everything else of theirs is
    auto-named). `key` is where the tenant sits in the stack file (`tfk8s:tenant`)."""
    ns = namespace_name(platform, user.name)
    policies = network_policy.tenant_policies(user.name, platform.network, platform.ports)
    return [
        Claimed(kind=NAMESPACE, name=ns, key=f"{key}.name"),
        Claimed(kind=RESOURCE_QUOTA, namespace=ns, name=quota.QUOTA_NAME, key=f"{key}.quota"),
        Claimed(kind=LIMIT_RANGE, namespace=ns, name=quota.LIMIT_RANGE_NAME, key=f"{key}.name"),
        Claimed(kind=SECRET, namespace=ns, name=app_sessions.TOKEN_SECRET, key=f"{key}.name"),
        *(Claimed(kind=NETWORK_POLICY, namespace=ns, name=n, key=f"{key}.name") for n in policies),
    ]


def own_trainer(experiment: str, cluster: str, launcher: CodeBundle) -> str:
    """The name of a cluster's own trainer ConfigMap, outside an Experiment (which shares one):
    the cluster's and the content's digest, as the experiment's is (tfk8s.components.experiment)."""
    return f"{cs.qualified_name(experiment, cluster)}-trainer-{launcher.digest[:10]}"


def own_trainer_claim(experiment: str, cluster: str, namespace: str, launcher: CodeBundle) -> Claimed:
    """A cluster's own trainer ConfigMap, claimed under the stack file's cluster name."""
    name = own_trainer(experiment, cluster, launcher)
    return Claimed(kind=CONFIG_MAP, namespace=namespace, name=name, key=f"{CONFIG_NAMESPACE}:clusters[0].name")


def cluster_claims(
    experiment: str, cluster: ClusterSettings, namespace: str, layouts: PlatformKind, key: str, *, queued: bool = False
) -> list[Claimed]:
    """What a TrainingCluster (tfk8s.components.training_cluster) creates under fixed names (its
    `Names`, which are DNS identities): the Services and Jobs of its tasks (or, `queued`, its task
    Services and its JobSet), its scratch claim, its Layout and its NetworkPolicy. `key` is where
    `cluster` sits in the stack file (`tfk8s:clusters[0]`)."""
    names = cs.Names(cluster=cs.qualified_name(experiment, cluster.name))
    found: list[Claimed] = []
    if queued:
        services = [task.name for task in jobset.task_services(names.cluster, cluster, run_id="")]
        found.append(Claimed(kind=JOBSET, namespace=namespace, name=names.cluster, key=f"{key}.name"))
    else:
        roles = [cs.WORKER, cs.CHIEF] if cs.has_chief_job(cluster) else [cs.WORKER]
        services = [names.ps_service(i) for i in range(cluster.ps.count)] + [names.indexed(role) for role in roles]
        found += [Claimed(kind=JOB, namespace=namespace, name=names.indexed(role), key=f"{key}.name") for role in roles]
    found += [Claimed(kind=SERVICE, namespace=namespace, name=n, key=f"{key}.name") for n in services]
    if cluster.scratch is not None:
        found.append(Claimed(kind=PERSISTENT_VOLUME_CLAIM, namespace=namespace, name=names.scratch_claim(), key=f"{key}.scratch"))
    found.append(Claimed(kind=layouts.api, namespace=namespace, name=names.layout(), key=f"{key}.name"))
    found.append(Claimed(kind=NETWORK_POLICY, namespace=namespace, name=names.cluster, key=f"{key}.name"))
    return found
