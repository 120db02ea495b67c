"""The Pulumi program: which kind of stack this is, checks before anything exists, then declare.

Order, so that nothing is created on bad input: the configuration (schema), the cluster
(tfk8s.kube.client.connect: reachable, which version), for tenants and experiments the facts of the stacks they
build on, the context checks (for platforms also their Prometheus's namespace and the scrape's
kind), the ownership reads of every object to be created under a fixed name, for tenants whether
the User Node has room, and for experiments whether the caller may act in the tenant's namespace
(before any read there) and whether they fit in the tenant's quota. Only then are resources declared.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pulumi

from tfk8s import pulumi_internals, tenant_gate, timings
from tfk8s.checks import access
from tfk8s.checks import context as context_checks
from tfk8s.checks import monitoring as monitoring_checks
from tfk8s.checks import queueing as queueing_checks
from tfk8s.checks import quota as quota_check
from tfk8s.checks import tenant as tenant_checks
from tfk8s.checks import user_node as user_node_checks
from tfk8s.components.user_env import USER_NODE_PODS_PER_USER
from tfk8s.errors import AccessDenied, ConfigError, ContractUnavailable, OwnershipConflict, refusing, unchanged
from tfk8s.kube import api_paths
from tfk8s.kube import client as kube_client
from tfk8s.settings import NAMESPACE, state_store
from tfk8s.settings.contract import PlatformFacts, TenantFacts
from tfk8s.settings.experiment import ExperimentStack
from tfk8s.settings.platform import NetworkSettings, PlatformStack
from tfk8s.settings.tenant import TenantStack
from tfk8s.specs import backends, experimenter_rights, network_policy, ownership
from tfk8s.specs import quota as namespace_quota
from tfk8s.specs.code import CodeBundle, launcher_bundle
from tfk8s.stack_kinds import config as stack_config
from tfk8s.stack_kinds import experiment as experiment_stack
from tfk8s.stack_kinds import platform as platform_stack
from tfk8s.stack_kinds import ref as stack_ref
from tfk8s.stack_kinds import tenant as tenant_stack
from tfk8s.stack_kinds import tenant_contract

PROJECT_ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = PROJECT_ROOT / "training" / "master_client.ipynb"

Reader = Callable[[str], Mapping[str, Any] | None]


def owner_of(kind: str, environ: Mapping[str, str]) -> ownership.Owner:
    return ownership.Owner(
        organization=pulumi.get_organization(),
        project=pulumi.get_project(),
        stack=pulumi.get_stack(),
        kind=kind,
        state=state_store.state_id(environ),
    )


def refuse_foreign(claims: list[ownership.Claimed], read: Reader | None, owner: ownership.Owner, fix: str) -> None:
    if read is None:
        pulumi.log.warn(
            "tfk8s cannot read the cluster with the kubeconfig's credentials: ownership of existing objects is not checked"
        )
        return
    problems = ownership.refusals(claims, read, owner.annotation, fix)
    if problems:
        raise OwnershipConflict(refusing(problems, "to adopt objects tfk8s does not own"))


def refuse_over_quota(
    stack: ExperimentStack,
    experiment: str,
    platform: PlatformFacts,
    tenant: TenantFacts,
    read_whole: Reader,
    cluster: str | None = None,
) -> None:
    """Refuse, before anything is declared, an experiment its tenant's quota has no room for (tfk8s.checks.quota;
    on a platform that queues, it waits for what its tenant's other experiments use)."""
    room = quota_check.live_room(read_whole, tenant.namespace, experiment, cluster)
    if room is None:  # the namespace has no tfk8s quota: Kubernetes will refuse nothing either
        return
    queued = platform.queueing.enabled
    demand = quota_check.experiment_demand(stack.clusters, queued=queued)
    apps = namespace_quota.apps_requests(platform.container_defaults, gated=platform.tensorboard_requires_token)
    problems = quota_check.refusals(demand, room, tenant.name, queued=queued, apps=apps)
    if problems:
        raise ConfigError(problems)


def with_api_server(stack: PlatformStack, read_whole: Reader | None) -> PlatformStack:
    """The platform with the API server's addresses, which tenants' policies let PS and Jupyter
    reach: as configured, else as the `kubernetes` EndpointSlice says."""
    network = stack.platform.network
    if network.api_server.cidrs:
        return stack
    found = network_policy.api_server_from_endpoints(
        read_whole(api_paths.ENDPOINT_SLICE.path("kubernetes", namespace="default")) if read_whole else None
    )
    if not found.cidrs:
        pulumi.log.warn(
            f"the API server's addresses are unknown (the `kubernetes` EndpointSlice of `default` is unreadable): where "
            f"the CNI enforces NetworkPolicy, parameter servers cannot retire themselves and Jupyter cannot list "
            f"experiments; set {NAMESPACE}:platform.network.apiServer.cidrs and .ports"
        )
    update = {"network": network.model_copy(update={"api_server": found})}
    return stack.model_copy(update={"platform": stack.platform.model_copy(update=update)})


def warn_unenforced(network: NetworkSettings) -> None:
    if not network.policy_enforced:
        pulumi.log.warn(
            f"{NAMESPACE}:platform.network.policyEnforced is false: this cluster's CNI does not enforce NetworkPolicy, so "
            "any pod of the cluster (another tenant's notebook included) can reach TensorFlow's unauthenticated gRPC "
            "servers in this namespace, run graphs on them and read or write this tenant's volumes through them"
        )


def with_scrape(stack: PlatformStack, read_whole: Reader | None) -> PlatformStack:
    """The platform with its monitoring namespace checked and its scrape's kind resolved (tfk8s.checks.monitoring)."""
    monitoring = stack.platform.monitoring
    if read_whole is None and monitoring.namespace is not None and monitoring.scrape == "auto":
        pulumi.log.warn(
            f"tfk8s cannot read the cluster with the kubeconfig's credentials, so it cannot tell whether the Prometheus "
            f"Operator's PodMonitor is served: the scrape is declared as a ConfigMap ({NAMESPACE}:platform.monitoring.scrape "
            "is auto); set it to podMonitor or scrapeConfig to choose"
        )
    return monitoring_checks.check_monitoring(stack, read_whole)


def refuse_bad_user_node(stack: PlatformStack, read_whole: Reader | None) -> None:
    """The User Node exists and its taints are free for ours, checked before anything is declared
    (the component checks the taints again, from its own read, before it patches)."""
    if read_whole is None:
        return
    settings = stack.platform.user_node
    node = read_whole(api_paths.NODE.path(settings.name))
    if node is None:
        raise ConfigError(
            [
                f"{NAMESPACE}:platform.userNode.name: there is no node {settings.name!r} in the cluster: name an existing "
                "node (kubectl get nodes) to dedicate to the users' Jupyter and TensorBoard"
            ]
        )
    user_node_checks.check_taints(settings, node)  # UserNodeTaken, naming the key and the fix


def run_platform(
    stack: PlatformStack,
    server: tuple[int, int] | None,
    read: Reader | None,
    environ: Mapping[str, str],
    read_whole: Reader | None = None,
) -> dict[str, Any]:
    stack = with_api_server(context_checks.check_platform(stack, server), read_whole)
    warn_unenforced(stack.platform.network)
    refuse_bad_user_node(stack, read_whole)
    stack = with_scrape(stack, read_whole)
    queueing_checks.check_queueing(stack, read_whole)
    if read is not None:
        missing = backends.missing_classes(stack.platform.storage, read, f"{NAMESPACE}:platform.storage")
        if missing:
            raise ConfigError(missing)
    owner = owner_of("platform", environ)
    fix = "Choose another name (className), or delete or relabel the object if it is a leftover of this stack"
    refuse_foreign(platform_stack.claimed(stack, owner), read, owner, fix)
    return platform_stack.build(stack, owner)


def current(facts: PlatformFacts, server: tuple[int, int] | None) -> PlatformFacts:
    """The platform's facts with the cluster's version, which may have been upgraded since the platform's last `up`."""
    return facts if server is None else facts.model_copy(update={"kubernetes_version": f"{server[0]}.{server[1]}"})


def refuse_full_user_node(stack: TenantStack, platform: PlatformFacts, read: Reader | None, read_whole: Reader | None) -> None:
    """Refuse a new tenant whose Jupyter and TensorBoard the User Node has no room for: pods, CPU
    and memory, every tenant's apps being the platform's size (`apps_requests`). Counts the
    platform's Tenants from one list of one item (its `remainingItemCount`), so the check costs the
    same at 10 or 1,000 tenants."""
    if read is None or read_whole is None:
        return
    node = read_whole(api_paths.NODE.path(platform.user_node.name)) or {}
    listed = read_whole(platform.tenants.api.count_path()) or {}
    tenants = len(listed.get("items") or []) + int((listed.get("metadata") or {}).get("remainingItemCount") or 0)
    registered = read(platform.tenants.api.path(stack.tenant.name)) is not None
    apps = namespace_quota.apps_requests(platform.container_defaults, gated=platform.tensorboard_requires_token)
    each = {"pods": Decimal(USER_NODE_PODS_PER_USER), **apps}
    user_node_checks.check_room(
        platform.user_node.name, node.get("status"), tenants + (0 if registered else 1), each, f"{NAMESPACE}:tenant"
    )


def run_tenant(
    stack: TenantStack,
    server: tuple[int, int] | None,
    read: Reader | None,
    environ: Mapping[str, str],
    root: Path = PROJECT_ROOT,
    read_outputs: stack_ref.ReadOutputs = stack_ref.read_outputs,
    read_whole: Reader | None = None,
) -> dict[str, Any]:
    platform = current(stack_ref.platform_facts(stack.platform_stack, read_outputs), server)
    tenant_checks.check_tenant(stack, platform)
    warn_unenforced(platform.network)
    token = stack_config.jupyter_token()  # validated before anything is declared
    owner = owner_of("tenant", environ)
    fix = (
        "Another tenant stack has this user name: choose another tenant.name, or delete or relabel the object if it "
        "is a leftover of this stack"
    )
    refuse_foreign(tenant_stack.claimed(stack, platform), read, owner, fix)
    refuse_full_user_node(stack, platform, read, read_whole)
    return tenant_stack.build(stack, platform, stack_ref.qualified(stack.platform_stack), owner, root, NOTEBOOK, token)


def refuse_without_access(platform: PlatformFacts, tenant: TenantFacts, post: access.Post | None) -> None:
    """Ask the API server, before anything is read or declared, whether the caller may do what this
    experiment's `up` and `destroy` need in its tenant's namespace (tfk8s.specs.experimenter_rights); refuse naming the
    identity, the namespace and every missing verb. One request when everything is allowed."""
    if post is None:
        return
    rules = experimenter_rights.program_rules(platform.layouts, queueing=platform.queueing.enabled)
    missed = access.missing(post, tenant.namespace, rules)
    if missed:
        who = access.identity(post)
        raise AccessDenied(refusing(access.refusals(missed, who, tenant.namespace, tenant_contract.KEY)))


@dataclass(frozen=True)
class CheckedExperiment:
    """What an experiment's clusters are declared from, once every check has passed."""

    experiment: str
    platform: PlatformFacts
    tenant: TenantFacts
    owner: ownership.Owner
    launcher: CodeBundle


def check_experiment(
    stack: ExperimentStack,
    server: tuple[int, int] | None,
    read: Reader | None,
    environ: Mapping[str, str],
    root: Path,
    read_whole: Reader | None,
    post: access.Post | None,
    launcher: CodeBundle,
    *,
    standalone: bool = False,
) -> CheckedExperiment:
    """Everything an experiment is checked against before a resource is declared: its tenant's
    contract (read with the caller's own credentials), the settings against the platform, the
    caller's rights, whose the namespace and the fixed names are, and the quota. The experiment
    program and the component package's TrainingCluster (tfk8s.component_package) both start here; `launcher`
    is the trainer package its pods run (its content names the experiment's trainer ConfigMap).
    `standalone`: the stack's one cluster stands alone (the package's): it ships its own trainer
    ConfigMap, and what else its experiment runs is another stack's, counted against the quota."""
    if read_whole is None:
        raise ContractUnavailable(tenant_contract.UNREADABLE)
    who = (lambda: access.identity(post)) if post is not None else (lambda: access.UNKNOWN_IDENTITY)
    tenant, platform = tenant_contract.read(stack.namespace, read_whole, who)
    timings.mark("facts")
    platform = current(platform, server)
    experiment = context_checks.experiment_name(stack, pulumi.get_stack())
    context_checks.check_experiment(stack, pulumi.get_stack(), platform, root)
    warn_unenforced(platform.network)
    owner = owner_of("experiment", environ)
    namespace = tenant.namespace
    timings.mark("checks")
    # First: without these rights the reads below would fail with the API server's bare 403.
    refuse_without_access(platform, tenant, post)
    timings.mark("access")
    if read is not None:
        other = ownership.foreign(read(api_paths.NAMESPACE.path(namespace)) or {"metadata": {}}, tenant.owner)
        if other:
            raise OwnershipConflict(
                unchanged(
                    f"{tenant_contract.KEY}: namespace {namespace!r} of tenant {tenant.name!r} is not the tenant stack's "
                    f"({tenant.owner}): it is managed by {other}. `pulumi up` the tenant stack of {tenant.name!r} again"
                )
            )
    fix = "Another experiment uses this name: set a different tfk8s:experiment (or cluster name)"
    claims = (
        experiment_stack.standalone_claimed(stack, experiment, platform, tenant, launcher)
        if standalone
        else experiment_stack.claimed(stack, experiment, platform, tenant, launcher)
    )
    refuse_foreign(claims, read, owner, fix)
    timings.mark("ownership")
    refuse_over_quota(stack, experiment, platform, tenant, read_whole, stack.clusters[0].name if standalone else None)
    timings.mark("quota")
    return CheckedExperiment(experiment=experiment, platform=platform, tenant=tenant, owner=owner, launcher=launcher)


def run_experiment(
    stack: ExperimentStack,
    server: tuple[int, int] | None,
    read: Reader | None,
    environ: Mapping[str, str],
    root: Path = PROJECT_ROOT,
    read_whole: Reader | None = None,
    post: access.Post | None = None,
    open_gate: tenant_gate.Opener = tenant_gate.opener,
) -> dict[str, Any]:
    """`read` GETs objects' metadata alone (ownership); `read_whole` whole objects and lists (the
    contract, the quota, the tenant's token for readiness' progress); `post` asks the API server's
    access reviews; `open_gate` asks the tenant's TensorBoard gate for that progress."""
    checked = check_experiment(stack, server, read, environ, root, read_whole, post, launcher_bundle(root, "experiment"))
    assert read_whole is not None  # check_experiment refuses without it
    outputs = experiment_stack.build(
        stack, checked.experiment, checked.platform, checked.tenant, checked.owner, root, checked.launcher, read_whole, open_gate
    )
    timings.mark("declared")
    return outputs


def main() -> None:
    """The program, as infra/__main__.py runs it (tfk8s.entry.main, after tfk8s.entry.boot)."""
    stack = stack_config.load()
    timings.mark("settings")
    # Presence only: reading a kubeconfig stored as a secret through Config.get would warn.
    kubeconfig_in_config = pulumi_internals.raw_config("kubernetes:kubeconfig") is not None
    cluster = kube_client.connect(os.environ, kubeconfig_in_config=kubeconfig_in_config)
    timings.mark("preflight")
    api = cluster.api
    read = (lambda path: api.get(path, metadata_only=True)) if api is not None else None
    # Whole objects where metadata is not enough: the User Node's room, the quota's status, pods' resources.
    read_whole = (lambda path: api.get(path, metadata_only=False)) if api is not None else None
    if isinstance(stack, PlatformStack):
        run_platform(stack, cluster.version, read, os.environ, read_whole=read_whole)
    elif isinstance(stack, TenantStack):
        run_tenant(stack, cluster.version, read, os.environ, read_whole=read_whole)
    else:
        run_experiment(stack, cluster.version, read, os.environ, read_whole=read_whole, post=api.post if api else None)
