"""A tenant stack (`tfk8s:kind: tenant`): one user of a platform, in a namespace of its own.

It registers the tenant with its platform (a cluster-wide `Tenant`, tfk8s.components.guard), then declares the
namespace and what lives there beyond any experiment (tfk8s.components.user_env: volumes, Jupyter, TensorBoard,
quota, container defaults, the tenant's identities bound to the platform's experimenter role in that
namespace alone, tfk8s.specs.experimenter_rights), and guards the namespace while experiments use it. Its
environment publishes the contract its experiments read in that namespace (tfk8s.stack_kinds.tenant_contract), and the
same tenant facts as its `tenant` output (a contract.TenantFacts, dumped by alias) for people and
pipelines.
Nothing here reads or declares anything of another tenant, so a tenant's preview and `up` cost the
same whatever the number of tenants.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import pulumi

from tfk8s.components import guard, queueing, user_env
from tfk8s.components.user_env import PublishedContract, UserEnvironment, UserEnvironmentArgs
from tfk8s.kube import objects as kube
from tfk8s.release import VERSION
from tfk8s.settings import NAMESPACE
from tfk8s.settings.contract import PlatformFacts, TenantFacts
from tfk8s.settings.tenant import TenantSettings, TenantStack
from tfk8s.specs import app_sessions, fixed_names, readiness
from tfk8s.specs import queueing as queueing_spec
from tfk8s.specs import quota as namespace_quota
from tfk8s.specs.code import launcher_bundle
from tfk8s.specs.labels import labels
from tfk8s.specs.ownership import Claimed, Owner
from tfk8s.specs.tenant_admission import policy_supported
from tfk8s.stack_kinds import tenant_contract
from tfk8s.stack_kinds.exports import export_readiness

# TenantFacts.schema_version: Final, so that it types as that Literal.
SCHEMA_VERSION: Final = 1
TENANT_KEY = f"{NAMESPACE}:tenant"


def claimed(stack: TenantStack, platform: PlatformFacts) -> list[Claimed]:
    """Objects this stack creates under fixed names: its registration, its namespace and the
    namespace's quota objects, and its experiments' contract. Absent, or already this stack's: two
    tenant stacks can never share a user name."""
    return [
        Claimed(kind=platform.tenants.api, name=stack.tenant.name, key=f"{TENANT_KEY}.name"),
        *fixed_names.tenant_claims(platform, stack.tenant, TENANT_KEY),
        tenant_contract.claim(fixed_names.namespace_name(platform, stack.tenant.name), f"{TENANT_KEY}.name"),
        *queueing.tenant_fixed_objects(platform.queueing, tenant_queue(stack.tenant, platform), f"{TENANT_KEY}.name"),
    ]


def tenant_queue(tenant: TenantSettings, platform: PlatformFacts) -> queueing_spec.TenantQueue:
    """The tenant's queue: its quota is what it may borrow from the platform's cohort, its weight its fair share."""
    return queueing.tenant_queue(
        tenant.name,
        fixed_names.namespace_name(platform, tenant.name),
        tenant.effective_quota(platform.default_quota),
        tenant.queueing.weight,
        namespace_quota.apps_requests(platform.container_defaults, gated=platform.tensorboard_requires_token),
    )


def token_location(namespace: str) -> dict[str, str]:
    return {
        "namespace": namespace,
        "name": app_sessions.TOKEN_SECRET,
        "key": user_env.TOKEN_KEY,
        "read": f"kubectl -n {namespace} get secret {app_sessions.TOKEN_SECRET} -o jsonpath='{{.data.token}}' | base64 -d",
    }


def build(
    stack: TenantStack,
    platform: PlatformFacts,
    platform_stack: str,
    owner: Owner,
    root: Path,
    notebook: Path,
    jupyter_token: pulumi.Output[str] | None,
) -> dict[str, Any]:
    """Declare the tenant; export its readiness, its experiments' contract and where its Jupyter token is."""
    tenant = stack.tenant
    registration = _register(tenant, platform, owner)
    notebooks = {notebook.name: notebook.read_text(encoding="utf-8")} if notebook.exists() else {}

    def facts_at(jupyter_url: str | None, tensorboard_url: str | None) -> TenantFacts:
        return facts(
            tenant,
            platform,
            platform_stack=platform_stack,
            owner=owner.annotation,
            jupyter_url=jupyter_url,
            tensorboard_url=tensorboard_url,
        )

    env = UserEnvironment(
        tenant.name,
        UserEnvironmentArgs(
            user=tenant,
            platform=platform,
            owner=owner,
            launcher=launcher_bundle(root, "tenant"),
            notebooks=notebooks,
            after=[registration],
            jupyter_token=jupyter_token,
            # What its experiments read in its namespace (tfk8s.stack_kinds.tenant_contract).
            contract=PublishedContract(
                name=tenant_contract.NAME,
                data=lambda jupyter_url, tensorboard_url: tenant_contract.data(facts_at(jupyter_url, tensorboard_url), platform),
            ),
        ),
    )
    namespace = env.namespace.name
    tenant_facts = pulumi.Output.all(env.jupyter_url, env.tensorboard_url).apply(lambda urls: facts_at(urls[0], urls[1]))
    _guard(tenant, platform, owner, env)
    report = env.readiness.apply(readiness.tenant_readiness)
    export_readiness(report)
    tenant_output = tenant_facts.apply(TenantFacts.published)
    pulumi.export("tenant", tenant_output)
    # Where the token is, not the token: a stack others read exports nothing secret, so reading it
    # never needs this stack's secrets provider. The tenant's identities read the Secret themselves.
    pulumi.export("jupyterTokenSecret", namespace.apply(lambda ns: token_location(ns)))
    return {"user": env, "registration": registration, "readiness": report, "tenant": tenant_output}


def _register(tenant: TenantSettings, platform: PlatformFacts, owner: Owner) -> kube.CustomObject:
    """The tenant's registration with its platform, first in and last out: the platform refuses its
    own destroy while one exists (tfk8s.components.guard)."""
    meta = {"labels": {**labels(tenant.name, "tenant"), **owner.labels()}, "annotations": owner.annotations()}
    return kube.CustomObject(
        "tenant",
        api_version=platform.tenants.api_version,
        kind=platform.tenants.kind,
        metadata={**meta, "name": tenant.name},
        spec={"namespace": fixed_names.namespace_name(platform, tenant.name), "stack": owner.stack},
    )


def _guard(tenant: TenantSettings, platform: PlatformFacts, owner: Owner, env: UserEnvironment) -> None:
    """The tenant's queues on a queueing platform, and its guard: deleted before the environment, its
    identities' bindings, its contract and its queues (tfk8s.components.guard)."""
    namespace = env.namespace.name
    guarded: list[pulumi.Resource] = [env, *env.access, *([env.contract] if env.contract is not None else [])]
    if platform.queueing.enabled:
        queue_args = queueing.TenantQueuesArgs(
            queue=tenant_queue(tenant, platform), cohort=platform.queueing.cohort, namespace=namespace, owner=owner
        )
        guarded.append(queueing.TenantQueues(f"{tenant.name}-queues", queue_args))
    if policy_supported(platform.version):
        guard.tenant_guard("tenant-guard", namespace, platform.layouts.group, owner, guarded)


def facts(
    tenant: TenantSettings,
    platform: PlatformFacts,
    *,
    platform_stack: str,
    owner: str,
    jupyter_url: str | None,
    tensorboard_url: str | None,
) -> TenantFacts:
    """What the tenant's experiments rely on, from resolved values."""
    return TenantFacts(
        schema_version=SCHEMA_VERSION,
        release=VERSION,
        platform_stack=platform_stack,
        owner=owner,
        name=tenant.name,
        namespace=fixed_names.namespace_name(platform, tenant.name),
        data_claim=user_env.DATA_CLAIM,
        log_claim=user_env.LOG_CLAIM,
        notebook_host=f"{user_env.NOTEBOOK_SERVICE}:{platform.ports.tensorflow}",
        jupyter_url=jupyter_url,
        tensorboard_url=tensorboard_url,
        quota=tenant.effective_quota(platform.default_quota),
    )
