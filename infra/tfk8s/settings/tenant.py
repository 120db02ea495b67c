"""The schema of a tenant stack file (`tfk8s:kind: tenant`): one user of a platform.

A tenant stack holds one user's namespace and everything in it that outlives experiments: the
shared data and log volumes, Jupyter and TensorBoard, the namespace's quota and container defaults,
and the binding that lets the tenant's identities run experiments there (see docs/guide/tenants.md).
It reads its platform's facts (`tfk8s.settings.contract.PlatformFacts`) and publishes its own
(`tfk8s.settings.contract.TenantFacts`) for its experiments. Nothing here touches Pulumi.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from tfk8s.settings.platform import PlatformSettings, Quota
from tfk8s.settings.types import (
    MAX_NAMESPACE_LENGTH,
    Bytes,
    Model,
    NonNegative,
    Positive,
    Quantity,
    ServiceName,
    StackReference,
    is_dns_label,
    is_dns_subdomain,
)

# Kubernetes' own identities: binding one of these groups would hand the tenant's namespace to
# every client (system:authenticated, system:unauthenticated) or to components.
SYSTEM_PREFIX = "system:"
# The one kind of `system:` user a tenant may name: a service account, e.g. of a GitOps runner.
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
MAX_IDENTITY_LENGTH = 253
# Where the Pulumi Kubernetes Operator's Stacks and their workspaces' service accounts live
# (tfk8s_gitops.operator): besides the tenant's own namespace, the one whose accounts a tenant may name.
GITOPS_NAMESPACE = "tfk8s-gitops"
# The account, in that namespace, pull requests' previews run as (tfk8s.specs.preview_identity).
PREVIEW_ACCOUNT = "tfk8s-preview"
# Every identity is a subject of the tenant's RoleBindings, which are one object each: a bound that
# keeps them far below the API server's object size limit (1.5 MiB: 100 names of 253 characters are
# 40 KiB) and the list readable. More people: bind a group of theirs.
MAX_IDENTITIES = 100


def _identity(value: str) -> str:
    if not value or value != value.strip() or any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ValueError("must be a non-empty name without surrounding spaces or control characters")
    if len(value) > MAX_IDENTITY_LENGTH:
        raise ValueError(f"is {len(value)} characters; at most {MAX_IDENTITY_LENGTH}")
    if "*" in value:
        raise ValueError(f"{value!r}: an identity is one name, never a pattern ('*'); list each user or group by name")
    return value


def _user(value: str) -> str:
    value = _identity(value)
    if value.startswith(SERVICE_ACCOUNT_PREFIX):
        namespace, _, name = value.removeprefix(SERVICE_ACCOUNT_PREFIX).partition(":")
        # Else the RoleBinding's subject would have an empty name, which the API server refuses mid-`up`.
        if not namespace or not name or ":" in name:
            raise ValueError(f"{value!r} is not a service account's user name: {SERVICE_ACCOUNT_PREFIX}<namespace>:<name>")
        if not is_dns_label(namespace) or not is_dns_subdomain(name):
            raise ValueError(
                f"{value!r} names no service account Kubernetes can have: its namespace is a DNS-1123 label (at most "
                f"{MAX_NAMESPACE_LENGTH} lowercase letters, digits and '-') and its name a DNS-1123 subdomain"
            )
        return value
    if value.startswith(SYSTEM_PREFIX):
        raise ValueError(
            f"{value!r} is one of Kubernetes' own identities; name a person's user name, or a service account "
            f"({SERVICE_ACCOUNT_PREFIX}<namespace>:<name>)"
        )
    return value


def _group(value: str) -> str:
    value = _identity(value)
    if value.startswith(SYSTEM_PREFIX):
        raise ValueError(
            f"{value!r} is one of Kubernetes' own groups (system:authenticated is every client): name a group of "
            "people your authenticator reports, e.g. ml-team"
        )
    return value


IdentityUser = Annotated[str, AfterValidator(_user)]
IdentityGroup = Annotated[str, AfterValidator(_group)]


class Identities(Model):
    """Who may act for the tenant: Kubernetes user names and groups exactly as the cluster's
    authenticator reports them (`kubectl auth whoami`): a client certificate's CN and O, an OIDC
    claim, a service account. Each is bound in the tenant's namespace, and nowhere else, to the
    platform's experimenter role: what an experiment's `pulumi up`/`destroy` needs there."""

    users: tuple[IdentityUser, ...] = ()
    """User names, e.g. alice or alice@example.com; none: only the platform team's own identities."""
    groups: tuple[IdentityGroup, ...] = ()
    """Groups, e.g. ml-team; never a `system:` group."""

    @model_validator(mode="after")
    def _bounded(self) -> Identities:
        if len(self.users) + len(self.groups) > MAX_IDENTITIES:
            raise ValueError(
                f"{len(self.users)} users and {len(self.groups)} groups; at most {MAX_IDENTITIES} together (each is a "
                "subject of one RoleBinding): bind a group of those people instead"
            )
        return self


class TenantVolumes(Model):
    """The tenant's shared volumes: every experiment mounts them (data whole, logs per run)."""

    data_size: Bytes = "10Gi"
    """Size of the data volume (`tfk8s-data`, ReadWriteMany), mounted at /data in every training pod;
    the tenant's volumes must fit `quota.storage`."""
    log_size: Bytes = "10Gi"
    """Size of the log volume (`tfk8s-log`, ReadWriteMany): each run's directory at /log, and
    TensorBoard's whole log directory."""
    keep_on_destroy: bool = True
    """Keep the tenant's namespace, claims and volumes when the tenant stack is destroyed."""


class QuotaOverrides(Model):
    """A tenant's own quota: each key set replaces `platform.defaultQuota`'s, unset keys keep it."""

    cpu: Quantity | None = None
    """CPU cores (e.g. "64", "500m"); unset: platform.defaultQuota.cpu."""
    memory: Bytes | None = None
    """Memory (e.g. 256Gi); unset: platform.defaultQuota.memory."""
    gpus: NonNegative | None = None
    """nvidia.com/gpu count (0: none); unset: platform.defaultQuota.gpus."""
    storage: Bytes | None = None
    """Sum of the tenant's claims' sizes (e.g. 1Ti); unset: platform.defaultQuota.storage."""
    pods: Positive | None = None
    """Unfinished pods; unset: platform.defaultQuota.pods."""
    services: Positive | None = None
    """Services; unset: platform.defaultQuota.services."""
    persistent_volume_claims: Positive | None = None
    """Claims; unset: platform.defaultQuota.persistentVolumeClaims."""
    config_maps: Positive | None = None
    """ConfigMaps; unset: platform.defaultQuota.configMaps."""
    secrets: Positive | None = None
    """Secrets; unset: platform.defaultQuota.secrets."""
    service_accounts: Positive | None = None
    """ServiceAccounts; unset: platform.defaultQuota.serviceAccounts."""
    roles: Positive | None = None
    """Roles; unset: platform.defaultQuota.roles."""
    role_bindings: Positive | None = None
    """RoleBindings; unset: platform.defaultQuota.roleBindings."""
    network_policies: Positive | None = None
    """NetworkPolicies; unset: platform.defaultQuota.networkPolicies."""
    jobs: Positive | None = None
    """Jobs; unset: platform.defaultQuota.jobs."""
    deployments: Positive | None = None
    """Deployments; unset: platform.defaultQuota.deployments."""

    def over(self, defaults: Quota) -> Quota:
        """The platform's default quota with this tenant's own keys over it."""
        own = {k: v for k, v in self.model_dump().items() if v is not None}
        return defaults.model_copy(update=own)


class TenantQueueing(Model):
    """How this tenant's experiments share the platform's queue (`platform.queueing`; unused when it is off)."""

    weight: Quantity = "1"
    """The tenant's fair-sharing weight against the other tenants', e.g. "2" for twice the share of a
    tenant of weight 1 when both wait for the same capacity."""


class TenantSettings(Model):
    name: ServiceName = Field(
        description="a DNS-1035 user name (a letter first), e.g. alice: names the namespace (<prefix><name>)"
    )
    identities: Identities = Field(default_factory=Identities)
    """Who may run this tenant's experiments (see docs/guide/tenants.md)."""
    volumes: TenantVolumes = Field(default_factory=TenantVolumes)
    quota: QuotaOverrides = Field(default_factory=QuotaOverrides)
    """This tenant's namespace quota, key by key over `platform.defaultQuota` (see docs/concepts/quotas.md)."""
    queueing: TenantQueueing = Field(default_factory=TenantQueueing)
    """This tenant's share of the platform's queue, when `platform.queueing.enabled`."""

    def effective_quota(self, platform: PlatformSettings | Quota) -> Quota:
        defaults = platform if isinstance(platform, Quota) else platform.default_quota
        return self.quota.over(defaults)


class TenantStack(Model):
    """The `tfk8s:` keys of a tenant stack file (the secret `jupyterToken` apart)."""

    kind: Literal["tenant"]
    platform_stack: StackReference = Field(
        min_length=1,
        description="the platform stack this tenant lives on: its name (platform-dev), project/stack or org/project/stack",
    )
    tenant: TenantSettings
