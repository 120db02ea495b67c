"""A platform stack (`tfk8s:kind: platform`): storage, the User Node, and per user the namespace,
shared volumes, Jupyter and TensorBoard. Its `platform` output is the contract its experiment
stacks read: a contract.PlatformFacts, dumped by alias."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import pulumi

from tfk8s import backends, guard, readiness, stack_config, storage, user_env
from tfk8s.code import launcher_bundle
from tfk8s.contract import LayoutKind, PlatformFacts, UserFacts, UserNodeFacts
from tfk8s.ownership import Claimed, Owner
from tfk8s.schema import NAMESPACE
from tfk8s.schema_platform import PlatformSettings, PlatformStack, StorageSettings
from tfk8s.storage import SharedStorage
from tfk8s.user_env import USER_NODE_PODS_PER_USER, UserEnvironment, UserEnvironmentArgs
from tfk8s.user_node import UserNode

# PlatformFacts.schema_version: Final, so that it types as that Literal.
SCHEMA_VERSION: Final = 1


def backend_secret(settings: StorageSettings) -> pulumi.Output[str] | None:
    """The value of the Secret the storage backend needs, from the stack's secret config, if it needs one."""
    secret = backends.backend_of(settings).secret
    if secret is None:
        return None
    return pulumi.Config(NAMESPACE).require_secret(secret.config_key)


def claimed(stack: PlatformStack, owner: Owner) -> list[Claimed]:
    """Objects this stack creates under fixed names, as its components list them: they must be
    absent, or already this stack's."""
    return [
        *user_env.fixed_objects(stack.platform, stack.users, f"{NAMESPACE}:users"),
        *guard.fixed_objects(guard.layout_kind(owner), f"{NAMESPACE}:kind"),
        *storage.fixed_objects(stack.platform.storage, f"{NAMESPACE}:platform.storage"),
    ]


def build(stack: PlatformStack, owner: Owner, root: Path, notebook: Path) -> dict[str, Any]:
    """Declare every platform resource and export readiness and the experiments' contract."""
    platform = stack.platform
    tokens = stack_config.jupyter_tokens(stack.users)  # validated before anything is declared
    user_node = UserNode("user-node", platform.user_node, len(stack.users) * USER_NODE_PODS_PER_USER)
    shared = SharedStorage("storage", platform.storage, backend_secret(platform.storage), owner)
    launcher = launcher_bundle(root)
    assert platform.version is not None  # resolved by context_checks.check_platform
    layouts = guard.layout_kind(owner)
    platform_guard = guard.PlatformGuard("platform-guard", owner, layouts, guard.policy_supported(platform.version))
    if not guard.policy_supported(platform.version):
        pulumi.log.warn(
            f"Kubernetes {platform.kubernetes_version} has no ValidatingAdmissionPolicy (1.30+): `pulumi destroy` of this "
            "platform cannot refuse while experiments still use it; destroy the experiment stacks first"
        )
    notebooks = {notebook.name: notebook.read_text(encoding="utf-8")} if notebook.exists() else {}
    envs = {
        user.name: UserEnvironment(
            user.name,
            UserEnvironmentArgs(
                user=user,
                platform=platform,
                owner=owner,
                storage_class=shared.class_name,
                layouts=layouts,
                launcher=launcher,
                notebooks=notebooks,
                # The User Node's label and taint must exist before a user-facing pod is scheduled.
                schedule_after=[user_node],
                node_checked=user_node.checked_taints,
                node_address=user_node.address,
                jupyter_token=tokens.get(user.name),
            ),
        )
        for user in stack.users
    }
    for name, env in envs.items():
        platform_guard.guard(f"{name}-guard", env.namespace.metadata.name, [env, shared, user_node])
    storage_report = shared.class_name.apply(lambda name: {"className": name, "problems": []})
    node_report = user_node.address.apply(lambda address: readiness.node_readiness(platform.user_node.name, address))
    per_user = pulumi.Output.all(**{u: e.readiness for u, e in envs.items()})
    report = pulumi.Output.all(storage_report, node_report, per_user).apply(
        lambda parts: readiness.platform_readiness(parts[0], parts[1], parts[2])
    )
    pulumi.export("ready", report.apply(lambda r: r["ready"]))
    pulumi.export("readiness", report)
    # Built once every value is known: the output is exactly the model, dumped.
    platform_output = pulumi.Output.all(
        shared.class_name, shared.scratch_class_name, pulumi.Output.all(**{u: e.facts for u, e in envs.items()})
    ).apply(
        lambda parts: published(
            facts(
                platform,
                owner=owner.annotation,
                layouts=layouts,
                storage_class=parts[0],
                scratch_storage_class=parts[1],
                users=parts[2],
            )
        )
    )
    pulumi.export("platform", platform_output)
    pulumi.export("jupyterTokens", pulumi.Output.secret(pulumi.Output.all(**{u: e.jupyter_token for u, e in envs.items()})))
    return {"user_node": user_node, "storage": shared, "users": envs, "readiness": report, "platform": platform_output}


def facts(
    platform: PlatformSettings,
    *,
    owner: str,
    layouts: LayoutKind,
    storage_class: str,
    scratch_storage_class: str | None,
    users: Mapping[str, UserFacts],
) -> PlatformFacts:
    """The experiments' contract, from resolved values (the platform's own outputs among them)."""
    assert platform.kubernetes_version is not None  # resolved by context_checks.check_platform
    return PlatformFacts(
        schema_version=SCHEMA_VERSION,
        owner=owner,
        kubernetes_version=platform.kubernetes_version,
        storage_class=storage_class,
        scratch_storage_class=scratch_storage_class,
        user_node=UserNodeFacts(taint_key=platform.user_node.taint_key),
        layouts=layouts,
        images=platform.images,
        ports=platform.ports,
        pod_security=platform.pod_security,
        allow_ps_gpus=platform.allow_ps_gpus,
        await_timeout_seconds=platform.await_timeout_seconds,
        users=dict(users),
    )


def published(contract: PlatformFacts) -> dict[str, Any]:
    """The `platform` output: the contract in its aliases, as JSON (what platform_ref parses back)."""
    return contract.model_dump(by_alias=True, mode="json")
