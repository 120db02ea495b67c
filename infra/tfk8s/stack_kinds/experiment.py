"""An experiment stack (`tfk8s:kind: experiment`): one tenant's training clusters, in its namespace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pulumi

from tfk8s import tenant_gate
from tfk8s.components.experiment import Experiment, ExperimentArgs, trainer_claims
from tfk8s.kube.secrets import Get
from tfk8s.settings import NAMESPACE
from tfk8s.settings.contract import PlatformFacts, TenantFacts
from tfk8s.settings.experiment import LAUNCHER_PACKAGE, ExperimentStack
from tfk8s.specs import fixed_names
from tfk8s.specs.code import CodeBundle, bundle
from tfk8s.specs.ownership import Claimed, Owner
from tfk8s.stack_kinds import progress, queue_status
from tfk8s.stack_kinds.exports import export_readiness


def codes(stack: ExperimentStack, root: Path) -> dict[str, CodeBundle | None]:
    """Per cluster, the code directory to ship (None when the launcher package suffices)."""
    result: dict[str, CodeBundle | None] = {}
    for i, c in enumerate(stack.clusters):
        shipped = c.code.source == "configmap" and c.code.path not in (None, LAUNCHER_PACKAGE)
        key = f"{NAMESPACE}:clusters[{i}].code.path"
        result[c.name] = bundle(root / c.code.path, key=key) if shipped and c.code.path else None
    return result


def claimed(
    stack: ExperimentStack, experiment: str, platform: PlatformFacts, tenant: TenantFacts, launcher: CodeBundle
) -> list[Claimed]:
    """Objects created under fixed names (their names are DNS identities, or the trainer package's
    content), as the experiment and each training cluster list them: absent, or already ours."""
    return trainer_claims(experiment, tenant.namespace, launcher) + [
        claim
        for i, cluster in enumerate(stack.clusters)
        for claim in fixed_names.cluster_claims(
            experiment,
            cluster,
            tenant.namespace,
            platform.layouts,
            f"{NAMESPACE}:clusters[{i}]",
            queued=platform.queueing.enabled,
        )
    ]


def standalone_claimed(
    stack: ExperimentStack, experiment: str, platform: PlatformFacts, tenant: TenantFacts, launcher: CodeBundle
) -> list[Claimed]:
    """What the stack's one cluster creates under fixed names when it stands alone (the component
    package's): its own objects and its own copy of the trainer package, no experiment's."""
    (cluster,) = stack.clusters
    return [
        fixed_names.own_trainer_claim(experiment, cluster.name, tenant.namespace, launcher),
        *fixed_names.cluster_claims(
            experiment, cluster, tenant.namespace, platform.layouts, f"{NAMESPACE}:clusters[0]", queued=platform.queueing.enabled
        ),
    ]


def build(
    stack: ExperimentStack,
    experiment: str,
    platform: PlatformFacts,
    tenant: TenantFacts,
    owner: Owner,
    root: Path,
    launcher: CodeBundle,
    read_whole: Get,
    open_gate: tenant_gate.Opener = tenant_gate.opener,
) -> dict[str, Any]:
    """Declare the experiment's clusters; export their readiness (during an `up`, with each one's
    progress, read from the tenant's gate with the token `read_whole` reads) and cluster specs."""
    names = [c.name for c in stack.clusters]
    env = Experiment(
        experiment,
        ExperimentArgs(
            experiment=experiment,
            clusters=stack.clusters,
            platform=platform,
            tenant=tenant,
            owner=owner,
            launcher=launcher,
            codes=codes(stack, root),
            progress=progress.progress(experiment, names, platform, tenant, read_whole, open_gate),
            read_queue=lambda jobsets, after: queue_status.read(tenant.namespace, jobsets, platform, read_whole, after=after),
        ),
    )
    export_readiness(env.readiness)
    pulumi.export("experiment", experiment)
    pulumi.export("clusterSpecs", {name: cluster.spec for name, cluster in env.clusters.items()})
    return {"experiment": env, "readiness": env.readiness}
