"""A platform stack (`tfk8s:kind: platform`): what the cluster's tenants share. Storage, the User
Node, the platform's Layout and Tenant kinds, the experimenter role tenants bind, the guards, and
the scrape of training tasks by the platform team's Prometheus, and, when queueing is on, Kueue's
cohort, flavors and priority classes.
Its `platform` output is the contract its tenant and experiment stacks read: a
contract.PlatformFacts, dumped by alias. Nothing in it grows with the number of tenants."""

from __future__ import annotations

from typing import Any, Final

import pulumi

from tfk8s.components import guard, monitoring, queueing, storage, tenant_admission
from tfk8s.components.preview_identity import PreviewIdentity, PreviewIdentityArgs
from tfk8s.components.storage import SharedStorage, SharedStorageArgs
from tfk8s.components.user_node import UserNode, UserNodeArgs
from tfk8s.errors import ConfigError
from tfk8s.release import VERSION
from tfk8s.settings import NAMESPACE
from tfk8s.settings.contract import PlatformFacts, UserNodeFacts
from tfk8s.settings.platform import PlatformSettings, PlatformStack
from tfk8s.settings.storage import StorageSettings
from tfk8s.specs import backends, experimenter_rights, readiness
from tfk8s.specs.ownership import Claimed, Owner
from tfk8s.specs.tenant_admission import policy_supported
from tfk8s.stack_kinds import config as stack_config
from tfk8s.stack_kinds.exports import export_readiness

# PlatformFacts.schema_version: Final, so that it types as that Literal.
SCHEMA_VERSION: Final = 1


def backend_secret(settings: StorageSettings) -> pulumi.Output[str] | None:
    """The value of the Secret the storage backend needs, from the stack's secret config, if it needs
    one; a ConfigError naming the key when it is missing (called before anything is declared)."""
    secret = backends.backend_of(settings).secret
    if secret is None:
        return None
    value = stack_config.secret_config(secret.config_key)  # a value in plain text is refused, as the Jupyter token's
    if value is None:
        raise ConfigError(
            [
                f"{NAMESPACE}:{secret.config_key}: backend {settings.backend!r} needs it and it is not set: "
                f"pulumi config set --secret {NAMESPACE}:{secret.config_key} <value>"
            ]
        )
    return value


def claimed(stack: PlatformStack, owner: Owner) -> list[Claimed]:
    """Objects this stack creates under fixed names, as its components list them: they must be
    absent, or already this stack's."""
    return [
        *guard.fixed_objects(guard.platform_group(owner), f"{NAMESPACE}:kind"),
        *storage.fixed_objects(stack.platform.storage, f"{NAMESPACE}:platform.storage"),
        *monitoring.fixed_objects(
            stack.platform.monitoring, stack.platform.network.pod_cidrs, f"{NAMESPACE}:platform.monitoring"
        ),
        *queueing.fixed_objects(stack.platform.queueing, f"{NAMESPACE}:platform.queueing"),
    ]


def build(stack: PlatformStack, owner: Owner) -> dict[str, Any]:
    """Declare every platform resource and export readiness and the tenants' contract."""
    platform = stack.platform
    key = backend_secret(platform.storage)  # first: a missing key must stop the program before any resource
    user_node = UserNode("user-node", UserNodeArgs(node=platform.user_node))
    assert platform.version is not None  # resolved by context_checks.check_platform
    shared = SharedStorage(
        "storage", SharedStorageArgs(storage=platform.storage, owner=owner, kubernetes_version=platform.version, secret_value=key)
    )
    group = guard.platform_group(owner)
    admission = _admission(platform, group, owner)
    monitoring_objects = _monitoring(platform, owner)
    queues: list[pulumi.Resource] = []
    if platform.queueing.enabled:  # Kueue and JobSet served: tfk8s.checks.queueing
        queues.append(
            queueing.QueueingPlatform("queueing", queueing.QueueingPlatformArgs(queueing=platform.queueing, owner=owner))
        )
    previews = _preview_identity(platform, group, owner)
    # Last: its experimenter role, which every tenant binds, is the platform's guard, deleted first
    # and only when no tenant is left.
    platform_guard = guard.PlatformGuard(
        "platform-guard",
        guard.PlatformGuardArgs(
            owner=owner,
            group=group,
            with_policy=policy_supported(platform.version),
            experimenter_rules=experimenter_rights.rules_for_role(
                experimenter_rights.experimenter_rules(guard.layout_kind(group), queueing=platform.queueing.enabled)
            ),
            guarded=[shared, user_node, *admission, *monitoring_objects, *queues, *previews],
        ),
    )
    storage_report = shared.class_name.apply(lambda name: {"className": name, "problems": []})
    node_report = user_node.address.apply(lambda address: readiness.node_readiness(platform.user_node.name, address))
    report = pulumi.Output.all(storage_report, node_report).apply(lambda parts: readiness.platform_readiness(parts[0], parts[1]))
    export_readiness(report)
    preview_role = previews[0].role if previews else None
    platform_output = _publish(platform, owner, group, shared, user_node, platform_guard, preview_role)
    return {"user_node": user_node, "storage": shared, "guard": platform_guard, "readiness": report, "platform": platform_output}


def _admission(platform: PlatformSettings, group: str, owner: Owner) -> list[pulumi.Resource]:
    """The tenants' admission policies, where the API server has them (1.30+); a warning elsewhere."""
    assert platform.version is not None
    if policy_supported(platform.version):
        args = tenant_admission.TenantAdmissionArgs(
            group=group,
            tenants=guard.tenant_kind(group),
            user_node=platform.user_node,
            placement=platform.placement,
            owner=owner,
            queueing=platform.queueing.enabled,
            kueue=platform.queueing.controller,
        )
        return [tenant_admission.TenantAdmission("tenant-admission", args)]
    pulumi.log.warn(
        f"Kubernetes {platform.kubernetes_version} has no ValidatingAdmissionPolicy (1.30+): `pulumi destroy` of this "
        "platform cannot refuse while tenants still use it, nor of a tenant while experiments do; destroy "
        "experiments first, then tenants. Nor can it refuse what RBAC lets tenants do beyond experiments "
        "(tfk8s.components.tenant_admission): pods on the User Node, NodePort Services, bindings to everyone"
    )
    return []


def _preview_identity(platform: PlatformSettings, group: str, owner: Owner) -> list[PreviewIdentity]:
    """The pull requests' preview identity, when asked for (1.30+: tfk8s.checks.context)."""
    if not platform.gitops.preview_identity:
        return []
    args = PreviewIdentityArgs(layouts=guard.layout_kind(group), queueing=platform.queueing.enabled, owner=owner)
    return [PreviewIdentity("preview-identity", args)]


def _monitoring(platform: PlatformSettings, owner: Owner) -> list[pulumi.Resource]:
    """The scrape of training tasks by the platform's Prometheus and, with the pod network named,
    the fence of its namespace against tenants' pods; nothing without a monitoring namespace."""
    if platform.monitoring.namespace is None:  # `scrape` resolved by tfk8s.checks.monitoring
        return []
    scrape_args = monitoring.TrainingScrapeArgs(
        monitoring=platform.monitoring, namespace_prefix=platform.namespace_prefix, owner=owner
    )
    found: list[pulumi.Resource] = [monitoring.TrainingScrape("training-scrape", scrape_args)]
    if platform.network.pod_cidrs:
        fence_args = monitoring.MonitoringFenceArgs(
            namespace=platform.monitoring.namespace, pod_cidrs=platform.network.pod_cidrs, owner=owner
        )
        found.append(monitoring.MonitoringFence("monitoring-fence", fence_args))
    return found


def _publish(
    platform: PlatformSettings,
    owner: Owner,
    group: str,
    shared: SharedStorage,
    user_node: UserNode,
    platform_guard: guard.PlatformGuard,
    preview_role: pulumi.Output[str] | None,
) -> pulumi.Output[Any]:
    """The `platform` output: the tenants' contract, built once every value is known, exactly the model dumped."""
    resolved = (shared.class_name, shared.scratch_class_name, user_node.address, platform_guard.experimenter_role, preview_role)
    platform_output = pulumi.Output.all(*resolved).apply(
        lambda parts: facts(
            platform,
            owner=owner.annotation,
            group=group,
            storage_class=parts[0],
            scratch_storage_class=parts[1],
            user_node_address=parts[2],
            experimenter_role=parts[3],
            preview_role=parts[4],
        ).published()
    )
    pulumi.export("platform", platform_output)
    return platform_output


def facts(
    platform: PlatformSettings,
    *,
    owner: str,
    group: str,
    storage_class: str,
    scratch_storage_class: str | None,
    user_node_address: str | None,
    experimenter_role: str,
    preview_role: str | None = None,
) -> PlatformFacts:
    """The tenants' and experiments' contract, from resolved values (the platform's own outputs among them)."""
    assert platform.kubernetes_version is not None  # resolved by context_checks.check_platform
    return PlatformFacts(
        schema_version=SCHEMA_VERSION,
        release=VERSION,
        owner=owner,
        kubernetes_version=platform.kubernetes_version,
        storage=platform.storage,
        storage_class=storage_class,
        scratch_storage_class=scratch_storage_class,
        user_node=UserNodeFacts(
            name=platform.user_node.name,
            taint_key=platform.user_node.taint_key,
            address=user_node_address,
            shared_with_training=platform.user_node.shared_with_training,
        ),
        layouts=guard.layout_kind(group),
        tenants=guard.tenant_kind(group),
        experimenter_role=experimenter_role,
        preview_role=preview_role,
        namespace_prefix=platform.namespace_prefix,
        images=platform.images,
        ports=platform.ports,
        network=platform.network,
        monitoring=platform.monitoring,
        queueing=platform.queueing,
        pod_security=platform.pod_security,
        allow_ps_gpus=platform.allow_ps_gpus,
        placement=platform.placement,
        tensorboard_requires_token=platform.tensorboard_requires_token,
        await_timeout_seconds=platform.await_timeout_seconds,
        default_quota=platform.default_quota,
        container_defaults=platform.container_defaults,
    )
