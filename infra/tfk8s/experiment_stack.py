"""An experiment stack (`tfk8s:kind: experiment`): one user's training clusters on a platform stack."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pulumi

from tfk8s import cluster_spec as cs
from tfk8s import config
from tfk8s.code import CodeBundle, bundle, launcher_bundle
from tfk8s.experiment import Experiment, ExperimentArgs
from tfk8s.ownership import Claimed, Owner
from tfk8s.settings import LAUNCHER_PACKAGE, ExperimentStack, PlatformFacts


def codes(stack: ExperimentStack, root: Path) -> dict[str, CodeBundle | None]:
    """Per cluster, the code directory to ship (None when the launcher package suffices)."""
    result: dict[str, CodeBundle | None] = {}
    for c in stack.clusters:
        shipped = c.code.source == "configmap" and c.code.path not in (None, LAUNCHER_PACKAGE)
        result[c.name] = bundle(root / c.code.path) if shipped and c.code.path else None
    return result


def claimed(stack: ExperimentStack, experiment: str, facts: PlatformFacts) -> list[Claimed]:
    """Objects created under fixed names (their names are DNS identities): absent, or already ours."""
    ns = facts.users[stack.user].namespace
    objects = []
    for i, c in enumerate(stack.clusters):
        names = cs.Names(cluster=cs.qualified_name(experiment, c.name))
        key = f"{config.NAMESPACE}:clusters[{i}].name"
        services = [names.ps_service(p) for p in range(c.ps.count)] + [names.indexed(cs.WORKER)]
        jobs = [names.indexed(cs.WORKER)]
        if cs.has_chief_job(c):
            services.append(names.indexed(cs.CHIEF))
            jobs.append(names.indexed(cs.CHIEF))
        objects += [Claimed(what=f"Service {ns}/{n}", path=f"/api/v1/namespaces/{ns}/services/{n}", key=key) for n in services]
        objects += [Claimed(what=f"Job {ns}/{n}", path=f"/apis/batch/v1/namespaces/{ns}/jobs/{n}", key=key) for n in jobs]
        if c.scratch is not None:
            claim = names.scratch_claim()
            objects.append(
                Claimed(
                    what=f"PersistentVolumeClaim {ns}/{claim}",
                    path=f"/api/v1/namespaces/{ns}/persistentvolumeclaims/{claim}",
                    key=f"{config.NAMESPACE}:clusters[{i}].scratch",
                )
            )
        layout, kind = names.layout(), facts.layouts
        path = f"/apis/{kind.group}/{kind.version}/namespaces/{ns}/{kind.plural}/{layout}"
        objects.append(Claimed(what=f"{kind.kind} {ns}/{layout}", path=path, key=key))
    return objects


def build(stack: ExperimentStack, experiment: str, facts: PlatformFacts, owner: Owner, root: Path) -> dict[str, Any]:
    """Declare the experiment's clusters; export their readiness and cluster specs."""
    env = Experiment(
        experiment,
        ExperimentArgs(
            user=stack.user,
            experiment=experiment,
            clusters=stack.clusters,
            platform=facts,
            owner=owner,
            launcher=launcher_bundle(root),
            codes=codes(stack, root),
        ),
    )
    pulumi.export("ready", env.readiness.apply(lambda r: r["ready"]))
    pulumi.export("readiness", env.readiness)
    pulumi.export("experiment", experiment)
    pulumi.export("clusterSpecs", {name: cluster.spec for name, cluster in env.clusters.items()})
    return {"experiment": env, "readiness": env.readiness}
