"""Checks of a valid tenant stack file against its platform's facts, run once, before any resource
exists: the tenant's namespace is none the cluster or the platform keeps for itself, its identities
reach no other namespace's accounts, and its quota holds its own volumes, Jupyter, TensorBoard and other objects.

The schema (`tfk8s.settings.tenant`) checks what each value is on its own; these need the platform's
namespace prefix, storage and container defaults (`tfk8s.settings.contract.PlatformFacts`). Every problem
is reported together, as a `ConfigError` naming its key and the fix.
"""

from __future__ import annotations

from tfk8s.errors import ConfigError
from tfk8s.settings import NAMESPACE
from tfk8s.settings.contract import PlatformFacts
from tfk8s.settings.quantities import parse_quantity
from tfk8s.settings.storage import DEFAULT_SECRET_NAMESPACE
from tfk8s.settings.tenant import GITOPS_NAMESPACE, SERVICE_ACCOUNT_PREFIX, TenantStack
from tfk8s.specs import backends, quota

KEY = f"{NAMESPACE}:tenant"


def check_tenant(stack: TenantStack, platform: PlatformFacts) -> None:
    """Context checks of a tenant against its platform."""
    tenant = stack.tenant
    limits = tenant.effective_quota(platform.default_quota)
    volumes = parse_quantity(tenant.volumes.data_size) + parse_quantity(tenant.volumes.log_size)
    problems = []
    if volumes > parse_quantity(limits.storage):
        problems.append(
            f"{KEY}.volumes: the data and log volumes ({tenant.volumes.data_size} + {tenant.volumes.log_size}) do not fit the "
            f"tenant's storage quota ({limits.storage}): shrink them, or raise {KEY}.quota.storage"
        )
    if limits.persistent_volume_claims < 2:
        problems.append(f"{KEY}.quota.persistentVolumeClaims: the data and log volumes are 2 claims; allow at least 2")
    for short in quota.own_shortfalls(limits, platform.container_defaults, gated=platform.tensorboard_requires_token):
        lower = (
            f", or ask the platform team to lower platform.containerDefaults.{short.setting}"
            if short.setting in ("cpu", "memory")
            else ""
        )
        problems.append(
            f"{KEY}.quota.{short.setting}: the tenant's own objects take {short.need} ({short.what}) but its "
            f"quota is {short.have}: raise it to at least {short.need}, plus what its experiments need{lower}"
        )
    for field in ("users", "groups"):
        names = getattr(tenant.identities, field)
        for i, name in enumerate(names):
            if name in names[:i]:
                problems.append(f"{KEY}.identities.{field}[{i}]: {name!r} is listed twice; remove one")
    namespace = f"{platform.namespace_prefix}{tenant.name}"
    problems += _foreign_accounts(tenant.identities.users, namespace)
    if why := _reserved(namespace, platform):
        problems.append(
            f"{KEY}.name: the tenant's namespace would be {namespace!r} ({platform.namespace_prefix!r} + {tenant.name!r}), "
            f"{why}: choose another tenant.name"
        )
    if problems:
        raise ConfigError(problems)


def _foreign_accounts(users: tuple[str, ...], own: str) -> list[str]:
    """Service accounts of other namespaces: whoever runs pods there would act as this tenant. The
    GitOps operator's workspaces are the one exception (tfk8s_gitops.operator): the platform team's."""
    problems = []
    for i, user in enumerate(users):
        if not user.startswith(SERVICE_ACCOUNT_PREFIX):
            continue
        namespace = user.removeprefix(SERVICE_ACCOUNT_PREFIX).partition(":")[0]
        if namespace not in (own, GITOPS_NAMESPACE):
            problems.append(
                f"{KEY}.identities.users[{i}]: {user!r} is a service account of namespace {namespace!r}, so any pod run "
                f"there as it would act for this tenant: name one of the tenant's own namespace ({own!r}) or of "
                f"{GITOPS_NAMESPACE} (the GitOps operator's workspaces), or a person"
            )
    return problems


def _reserved(namespace: str, platform: PlatformFacts) -> str | None:
    """Why `namespace` can be no tenant's: Kubernetes', the GitOps operator's or the platform's own."""
    if namespace == "default" or namespace.startswith("kube-"):
        return "one of Kubernetes' own namespaces"
    if namespace == GITOPS_NAMESPACE:
        return "where the GitOps operator's Stacks and their cluster-admin accounts live"
    storage = platform.storage
    secret = backends.backend_of(storage).secret
    storage_namespaces = {DEFAULT_SECRET_NAMESPACE}
    if secret is not None:
        storage_namespaces.add(secret.namespace(storage))
    if namespace in storage_namespaces:
        return "where the platform keeps its storage Secret (platform.storage.glusterfs.secretNamespace)"
    if namespace == platform.network.dns.namespace:
        return "where the cluster's DNS pods run (platform.network.dns.namespace)"
    if namespace == platform.monitoring.namespace:
        return "where the platform's Prometheus runs, whose pods read every tenant's metrics (platform.monitoring.namespace)"
    return None
