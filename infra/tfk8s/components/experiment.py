"""`Experiment`: one tenant's training clusters, in that tenant's namespace, on the tenant's volumes.

Everything here belongs to the experiment stack alone (see tfk8s.specs.ownership): the trainer package's
ConfigMap (one per experiment, shared by its clusters), the clusters, and their Layouts.
Nothing of the tenant or the platform is created, adopted or deleted: the namespace, the volumes
and the tenant's Jupyter and TensorBoard are read from their facts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi

from tfk8s.components.training_cluster import TrainingCluster, TrainingClusterBody, in_tenant
from tfk8s.kube import objects as kube
from tfk8s.kube.api_paths import CONFIG_MAP
from tfk8s.settings import NAMESPACE
from tfk8s.settings.contract import PlatformFacts, TenantFacts
from tfk8s.settings.experiment import ClusterSettings
from tfk8s.specs import queue_readiness, readiness
from tfk8s.specs.code import CodeBundle, trainer_archive
from tfk8s.specs.labels import labels
from tfk8s.specs.ownership import Claimed, Owner


def trainer_config_map(experiment: str, launcher: CodeBundle) -> str:
    """The name of the experiment's trainer ConfigMap: the experiment's, and its content's digest.

    Known before anything is created, so the run's Job is not held until the ConfigMap is created,
    as it was while Pulumi's auto-naming chose the name (created in the same wave, the ConfigMap is
    there before a kubelet mounts it, and a kubelet retries a missing one). Changed content is
    another name: a new ConfigMap, replaced as auto-naming's was, and a new run (the digest is in
    the run id)."""
    return f"{experiment}-trainer-{launcher.digest[:10]}"


def trainer_claims(experiment: str, namespace: str, launcher: CodeBundle) -> list[Claimed]:
    """What an Experiment itself creates under a fixed name: its trainer ConfigMap."""
    name = trainer_config_map(experiment, launcher)
    return [Claimed(kind=CONFIG_MAP, namespace=namespace, name=name, key=f"{NAMESPACE}:experiment")]


QueueReader = Callable[[Sequence[str], pulumi.Input[Any]], "pulumi.Output[dict[str, dict[str, Any]]] | None"]


@dataclass(frozen=True, kw_only=True)
class ExperimentArgs:
    experiment: str
    clusters: tuple[ClusterSettings, ...]
    platform: PlatformFacts
    tenant: TenantFacts
    owner: Owner
    launcher: CodeBundle
    codes: dict[str, CodeBundle | None]  # cluster name -> its code (None: launcher/trainer only)
    # Cluster name -> its training progress or `unknown`, read by the stack (tfk8s.stack_kinds.progress);
    # None: readiness reports none (a preview).
    progress: pulumi.Output[dict[str, dict[str, Any]]] | None = None
    # On a queueing platform: (JobSet names, what to read after) -> each JobSet's Workload facts or
    # `unknown`, read by the stack (tfk8s.stack_kinds.queue_status); None, or returning None: not read (a preview).
    read_queue: QueueReader | None = None


class Experiment(pulumi.ComponentResource):
    clusters: dict[str, TrainingCluster]
    readiness: pulumi.Output[dict[str, Any]]

    def __init__(self, name: str, args: ExperimentArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("tfk8s:index:Experiment", name, None, opts)
        user = args.tenant
        child = pulumi.ResourceOptions(parent=self)
        trainer = trainer_config_map(args.experiment, args.launcher)
        # One copy of the trainer package per experiment, mounted by all its clusters, as one zip
        # archive: 84 KB of source are ~35 KB deflated, and Pulumi keeps three copies of a
        # ConfigMap's data in the state it reads and rewrites at every command, and checks and diffs
        # it at every preview and `up` (docs/benchmarks.md "Fixed cost"). The name is the sources' digest, so
        # the archive's bytes never change under one name but for another zlib's deflate: Pulumi
        # ignores those, and Kubernetes keeps the ConfigMap as it was made (immutable). The digest
        # is in the resource's own name too: new sources are a new resource, never a replacement
        # of this one, which `ignore_changes` would create with the old archive.
        self.trainer_config = kube.ConfigMap(
            trainer,
            metadata={
                "name": trainer,
                "namespace": user.namespace,
                "labels": {**labels(user.name, "tensorflow", experiment=args.experiment, role="code"), **args.owner.labels()},
                "annotations": args.owner.annotations(),
            },
            binary_data=trainer_archive(args.launcher),
            immutable=True,
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=["binaryData"]),
        )
        self.clusters = {
            c.name: TrainingCluster(
                f"{args.experiment}-{c.name}",
                in_tenant(
                    user,
                    args.experiment,
                    c,
                    args.platform,
                    args.owner,
                    args.launcher,
                    # The name, not the Output: the pods need not wait for the ConfigMap's creation.
                    launcher_config_map=trainer,
                    code=args.codes.get(c.name),
                ),
                opts=child,
            )
            for c in args.clusters
        }
        queued = {c.name: self.clusters[c.name] for c in args.clusters if self.clusters[c.name].queued}
        found = None
        if queued and args.read_queue is not None:
            # After the JobSets exist: the Workloads Kueue makes for them are what is read.
            jobsets = [cluster.names.cluster for cluster in queued.values()]
            found = args.read_queue(jobsets, pulumi.Output.all(*[cluster.run_uid for cluster in queued.values()]))
        per_cluster = {c.name: cluster_readiness(c, self.clusters[c.name], found) for c in args.clusters}
        links = {"jupyter": user.jupyter_url, "tensorboard": user.tensorboard_url}
        self.readiness = pulumi.Output.all(pulumi.Output.all(**per_cluster), args.progress).apply(
            lambda both: readiness.experiment_readiness(both[0], links, both[1])
        )
        self.register_outputs({"readiness": self.readiness})


def cluster_readiness(
    settings: ClusterSettings, cluster: TrainingClusterBody, queue: pulumi.Output[dict[str, dict[str, Any]]] | None
) -> pulumi.Output[dict[str, Any]]:
    """One cluster's readiness from its live status (and on a queueing platform, its Workload's
    facts `queue`, by JobSet name): for an Experiment's clusters and the package's TrainingCluster."""
    ps, workers, chief = settings.ps.count, settings.workers.count, cluster.chief_expected
    if not cluster.queued:
        return cluster.status.apply(
            lambda status: readiness.cluster_readiness(
                ps_expected=ps, workers_expected=workers, chief_expected=chief, status=status
            )
        )
    jobset = cluster.names.cluster
    return pulumi.Output.all(cluster.status, queue).apply(
        lambda both: queue_readiness.queued_cluster_readiness(
            ps_expected=ps,
            workers_expected=workers,
            chief_expected=chief,
            status=both[0],
            queue=None if both[1] is None else both[1].get(jobset),
        )
    )
