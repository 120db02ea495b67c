"""The Pulumi program: which kind of stack this is, checks before anything exists, then declare.

Order, so that nothing is created on bad input: the configuration (schema), the cluster
(preflight: reachable, which version), for experiments the platform stack's facts, the context
checks, the ownership reads of every object to be created under a fixed name, and for experiments
whether they fit in their user's quota. Only then are resources declared.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pulumi

from tfk8s import (
    api_paths,
    backends,
    context_checks,
    experiment_stack,
    ownership,
    platform_ref,
    platform_stack,
    preflight,
    quota_check,
    stack_config,
)
from tfk8s.config_errors import ConfigError
from tfk8s.schema import NAMESPACE
from tfk8s.schema_experiment import ExperimentStack
from tfk8s.schema_platform import PlatformStack

PROJECT_ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = PROJECT_ROOT / "training" / "master_client.ipynb"

Reader = Callable[[str], Mapping[str, Any] | None]


class OwnershipConflict(pulumi.RunError):
    """An object this stack would create exists and belongs to someone else; nothing was changed."""


def owner_of(kind: str, environ: Mapping[str, str]) -> ownership.Owner:
    return ownership.Owner(
        organization=pulumi.get_organization(),
        project=pulumi.get_project(),
        stack=pulumi.get_stack(),
        kind=kind,
        state=ownership.state_id(environ),
    )


def refuse_foreign(claims: list[ownership.Claimed], read: Reader | None, owner: ownership.Owner, fix: str) -> None:
    if read is None:
        pulumi.log.warn(
            "tfk8s cannot read the cluster with the kubeconfig's credentials: ownership of existing objects is not checked"
        )
        return
    problems = ownership.refusals(claims, read, owner.annotation, fix)
    if problems:
        raise OwnershipConflict(
            "refusing to adopt objects tfk8s does not own; nothing was changed:\n  - " + "\n  - ".join(problems)
        )


def refuse_over_quota(stack: ExperimentStack, experiment: str, namespace: str, read_whole: Reader | None) -> None:
    """Refuse, before anything is declared, an experiment its user's quota has no room for (tfk8s.quota_check)."""
    if read_whole is None:
        pulumi.log.warn(
            "tfk8s cannot read the cluster with the kubeconfig's credentials: the user's quota is not checked; "
            "pods beyond it will stay unscheduled"
        )
        return
    room = quota_check.live_room(read_whole, namespace, experiment)
    if room is None:  # the namespace has no tfk8s quota: Kubernetes will refuse nothing either
        return
    problems = quota_check.refusals(quota_check.experiment_demand(stack.clusters), room, stack.user)
    if problems:
        raise ConfigError(problems)


def run_platform(
    stack: PlatformStack,
    server: tuple[int, int] | None,
    read: Reader | None,
    environ: Mapping[str, str],
    root: Path = PROJECT_ROOT,
) -> dict[str, Any]:
    stack = context_checks.check_platform(stack, server)
    if read is not None:
        missing = backends.missing_classes(stack.platform.storage, read, f"{NAMESPACE}:platform.storage")
        if missing:
            raise ConfigError(missing)
    owner = owner_of("platform", environ)
    fix = (
        "Choose another name (namespacePrefix, user name, className), "
        "or delete or relabel the object if it is a leftover of this stack"
    )
    refuse_foreign(platform_stack.claimed(stack, owner), read, owner, fix)
    return platform_stack.build(stack, owner, root, NOTEBOOK)


def run_experiment(
    stack: ExperimentStack,
    server: tuple[int, int] | None,
    read: Reader | None,
    environ: Mapping[str, str],
    root: Path = PROJECT_ROOT,
    read_outputs: Callable[[str], dict[str, Any]] = platform_ref.read_outputs,
    read_whole: Reader | None = None,
) -> dict[str, Any]:
    """`read` GETs objects' metadata alone (ownership); `read_whole` whole objects and lists (the quota)."""
    facts = platform_ref.platform_facts(stack.platform_stack, stack.user, read_outputs)
    if server is not None:  # the cluster may have been upgraded since the platform's last `up`
        facts = facts.model_copy(update={"kubernetes_version": f"{server[0]}.{server[1]}"})
    experiment = context_checks.experiment_name(stack, pulumi.get_stack())
    context_checks.check_experiment(stack, pulumi.get_stack(), facts, root)
    owner = owner_of("experiment", environ)
    namespace = facts.users[stack.user].namespace
    if read is not None:
        other = ownership.foreign(read(api_paths.NAMESPACE.path(namespace)) or {"metadata": {}}, facts.owner)
        if other:
            raise OwnershipConflict(
                f"tfk8s:user: namespace {namespace!r} of user {stack.user!r} is not the platform stack's "
                f"({facts.owner}): it is missing or managed by {other}. `pulumi up` the platform stack "
                f"{stack.platform_stack!r} first; nothing was changed"
            )
    fix = "Another experiment uses this name: set a different tfk8s:experiment (or cluster name)"
    refuse_foreign(experiment_stack.claimed(stack, experiment, facts), read, owner, fix)
    refuse_over_quota(stack, experiment, namespace, read_whole)
    return experiment_stack.build(stack, experiment, facts, owner, root)


# A stack keeps every Output and future alive until the program ends; with Python's default
# thresholds the cyclic GC rescans that growing heap again and again, which made program
# evaluation super-linear: 5.3 ms per resource at 4,504 resources, 3.1 ms with these thresholds
# and 2.5 ms with no collection at all (bench/program_eval.py). Programs are short-lived.
EVALUATION_GC_THRESHOLDS = (100_000, 50, 100)


def main() -> None:
    gc.set_threshold(*EVALUATION_GC_THRESHOLDS)
    stack = stack_config.load()
    # Presence only: reading a kubeconfig stored as a secret through Config.get would warn.
    kubeconfig_in_config = pulumi.runtime.get_config("kubernetes:kubeconfig") is not None
    cluster = preflight.check_cluster(os.environ, kubeconfig_in_config=kubeconfig_in_config)
    api = cluster.api
    read = (lambda path: api.get(path, metadata_only=True)) if api is not None else None
    if isinstance(stack, PlatformStack):
        run_platform(stack, cluster.version, read, os.environ)
    else:
        # Whole objects for the quota check alone: its ResourceQuota's status, its own pods' resources.
        read_whole = (lambda path: api.get(path, metadata_only=False)) if api is not None else None
        run_experiment(stack, cluster.version, read, os.environ, read_whole=read_whole)
