"""A platform stack (`tfk8s:kind: platform`): storage, the User Node, and per user the namespace,
shared volumes, Jupyter and TensorBoard. Its `platform` output is the contract its experiment
stacks read (settings.PlatformFacts)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pulumi

from tfk8s import backends, config, guard, readiness
from tfk8s.code import launcher_bundle
from tfk8s.ownership import Claimed, Owner
from tfk8s.settings import PlatformSettings, PlatformStack, StorageSettings
from tfk8s.storage import SharedStorage
from tfk8s.user_env import USER_NODE_PODS_PER_USER, UserEnvironment, UserEnvironmentArgs, namespace_name
from tfk8s.user_node import UserNode

SCHEMA_VERSION = 1


def backend_secret(storage: StorageSettings) -> pulumi.Output[str] | None:
    """The value of the Secret the storage backend needs, from the stack's secret config, if it needs one."""
    secret = backends.backend_of(storage).secret
    if secret is None:
        return None
    return pulumi.Config(config.NAMESPACE).require_secret(secret.config_key)


def claimed(stack: PlatformStack, owner: Owner) -> list[Claimed]:
    """Objects this stack creates under fixed names: they must be absent, or already this stack's."""
    platform, key = stack.platform, f"{config.NAMESPACE}:platform"
    crd = guard.layout_kind(owner).crd_name
    objects = [
        Claimed(
            what=f"namespace {namespace_name(platform, u.name)!r}",
            path=f"/api/v1/namespaces/{namespace_name(platform, u.name)}",
            key=f"{config.NAMESPACE}:users[{i}].name",
        )
        for i, u in enumerate(stack.users)
    ]
    objects.append(
        Claimed(
            what=f"CustomResourceDefinition {crd!r}",
            path=f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}",
            key=f"{config.NAMESPACE}:kind",
        )
    )
    storage = platform.storage
    backend = backends.backend_of(storage)
    if backend.creates_classes:  # the classes the platform creates (SharedStorage)
        objects += [
            Claimed(
                what=f"StorageClass {name!r}",
                path=f"/apis/storage.k8s.io/v1/storageclasses/{name}",
                key=f"{key}.storage.{setting}",
            )
            for setting, name in backends.classes(storage).items()
        ]
    if backend.secret is not None:
        ns, secret = backend.secret.namespace(storage), backend.secret.name
        objects.append(
            Claimed(
                what=f"Secret {ns}/{secret}",
                path=f"/api/v1/namespaces/{ns}/secrets/{secret}",
                key=f"{key}.storage.{backend.secret.namespace_setting}",
            )
        )
    return objects


def build(stack: PlatformStack, owner: Owner, root: Path, notebook: Path) -> dict[str, Any]:
    """Declare every platform resource and export readiness and the experiments' contract."""
    platform = stack.platform
    tokens = config.jupyter_tokens(stack.users)  # validated before anything is declared
    user_node = UserNode("user-node", platform.user_node, len(stack.users) * USER_NODE_PODS_PER_USER)
    storage = SharedStorage("storage", platform.storage, backend_secret(platform.storage), owner)
    launcher = launcher_bundle(root)
    assert platform.version is not None  # resolved by config.check_platform
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
                storage_class=storage.class_name,
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
        platform_guard.guard(f"{name}-guard", env.namespace.metadata.name, [env, storage, user_node])
    storage_report = storage.class_name.apply(lambda name: {"className": name, "problems": []})
    node_report = user_node.address.apply(lambda address: readiness.node_readiness(platform.user_node.name, address))
    per_user = pulumi.Output.all(**{u: e.readiness for u, e in envs.items()})
    report = pulumi.Output.all(storage_report, node_report, per_user).apply(
        lambda parts: readiness.platform_readiness(parts[0], parts[1], parts[2])
    )
    pulumi.export("ready", report.apply(lambda r: r["ready"]))
    pulumi.export("readiness", report)
    published = facts(platform, owner, storage, layouts, envs)
    pulumi.export("platform", published)
    pulumi.export("jupyterTokens", pulumi.Output.secret(pulumi.Output.all(**{u: e.jupyter_token for u, e in envs.items()})))
    return {"user_node": user_node, "storage": storage, "users": envs, "readiness": report, "platform": published}


def facts(
    platform: PlatformSettings, owner: Owner, storage: SharedStorage, layouts: guard.LayoutKind, envs: dict[str, UserEnvironment]
) -> dict[str, Any]:
    """The `platform` output: exactly what settings.PlatformFacts reads, in its aliases."""
    return {
        "schemaVersion": SCHEMA_VERSION,
        "owner": owner.annotation,
        "kubernetesVersion": platform.kubernetes_version,
        "storageClass": storage.class_name,
        "scratchStorageClass": storage.scratch_class_name,
        "userNode": {"taintKey": platform.user_node.taint_key},
        "layouts": {"group": layouts.group, "version": layouts.version, "kind": layouts.kind, "plural": layouts.plural},
        "images": platform.images.model_dump(by_alias=True),
        "ports": platform.ports.model_dump(by_alias=True),
        "allowPsGpus": platform.allow_ps_gpus,
        "awaitTimeoutSeconds": platform.await_timeout_seconds,
        "users": {name: env.facts() for name, env in envs.items()},
    }
