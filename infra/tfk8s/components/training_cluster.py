"""`TrainingCluster`: one distributed TensorFlow cluster (PS + workers [+ chief]) and its volumes.

Shape (resource count is independent of the worker count):
  * per PS task: a Deployment and a Service `<c>-ps-<i>` (the seed's shape; PS counts are small);
  * workers: one Indexed Job `<c>-worker` and one headless Service `<c>-worker`, so task i is the
    pod `<c>-worker-<i>.<c>-worker` and learns its index from JOB_COMPLETION_INDEX;
  * in-graph with a chief client: one more Indexed Job + headless Service `<c>-chief`;
  * its NetworkPolicy `<c>`: gRPC among its own pods alone (tfk8s.specs.network_policy);
  * the user's code ConfigMap if any, the RBAC that lets a PS scale its own Deployment to zero
    once every worker is done (no PS left behind), and the Layout that registers the cluster with
    its platform and publishes it to the user's Jupyter (tfk8s.specs.layout_document, tfk8s.components.guard). The
    trainer package's ConfigMap is the experiment's, shared by its clusters (tfk8s.components.experiment).

Pods mount the user's data and log volumes, which the platform stack owns, so logs and data sets
outlive the experiment. The one claim a cluster may own is its scratch volume (`scratch`, at
/scratch in workers and chief), in the platform's scratch class, which deletes the volume with the
claim: scratch goes with the experiment. `<c>` in names is `<experiment>-<cluster>`.

The PS Deployments, the Jobs, their Services and the PS's RBAC are tfk8s.components.unqueued_cluster's.
On a platform that queues in Kueue (`platform.queueing.enabled`), they give way to one JobSet,
admitted whole or not at all, and a Service per task (tfk8s.components.queued_cluster); the rest
is the same, declared here along one path for both shapes.

What `pulumi up` waits for: PS Deployments until available; the worker Job only until every
worker pod is Ready, or one has failed or succeeded (never until training completes).

A run is one Job, the one the PS watch (workers; the chief with a chief client): its uid keys the
run's done markers and directory on the log volume (tfk8s_train.launch, TFK8S_RUN_UID). Its own
pods read the uid from their controller-uid label; the PS, created beside the Job, read it from
the Job once it exists with their run id (TFK8S_WATCH_JOB_RUN), so they start while the Job's
pods do. What is given the uid as a value (the worker Job of a chief-driven cluster, the Layout
the notebook reads) is created after the Job. The PS Deployments are owned by that Job
(ownerReferences, added by a DeploymentPatch once the Job is up): when a TTL clean-up deletes a
finished Job, Kubernetes deletes its PS too, so `pulumi up --refresh` re-creates both, a new run
that trains instead of a Job waiting on a PS scaled to zero by the run before.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pulumi

from tfk8s.components import queued_cluster, unqueued_cluster
from tfk8s.kube import awaits
from tfk8s.kube import objects as kube
from tfk8s.settings.contract import PlatformFacts, TenantFacts
from tfk8s.settings.experiment import ClusterSettings, TrainingMode
from tfk8s.specs import cluster_spec as cs
from tfk8s.specs import layout_document, network_policy, pods, run_policy
from tfk8s.specs.code import CodeBundle, installed_launcher_bundle, trainer_archive
from tfk8s.specs.fixed_names import own_trainer
from tfk8s.specs.labels import labels
from tfk8s.specs.ownership import Owner


@dataclass(frozen=True, kw_only=True)
class TrainingClusterArgs:
    user: str
    experiment: str
    cluster: ClusterSettings
    platform: PlatformFacts
    owner: Owner
    namespace: str
    data_claim: str  # the user's volumes (platform stack)
    log_claim: str
    # The trainer package the pods run (default: the tfk8s_train installed beside tfk8s).
    launcher: CodeBundle = field(default_factory=installed_launcher_bundle)
    # The experiment's ConfigMap holding `launcher` (tfk8s.components.experiment.trainer_config_map);
    # None: the cluster ships its own copy (`<experiment>-<cluster>-trainer-<digest>`).
    launcher_config_map: str | None = None
    code: CodeBundle | None = None
    notebook_host: str | None = None
    # Register the cluster as a Layout of `platform.layouts` (its tenant's notebook reads it, the
    # platform's guard counts it). False in a program with no tfk8s platform to define that kind.
    publish_layout: bool = True


def in_tenant(
    tenant: TenantFacts,
    experiment: str,
    cluster: ClusterSettings,
    platform: PlatformFacts,
    owner: Owner,
    launcher: CodeBundle,
    *,
    launcher_config_map: str | None = None,
    code: CodeBundle | None = None,
) -> TrainingClusterArgs:
    """The arguments of `cluster` of `experiment` in `tenant`'s namespace, on its volumes, driven
    by its notebook when the cluster says so: an Experiment's clusters and the package's."""
    return TrainingClusterArgs(
        user=tenant.name,
        experiment=experiment,
        cluster=cluster,
        platform=platform,
        owner=owner,
        namespace=tenant.namespace,
        data_claim=tenant.data_claim,
        log_claim=tenant.log_claim,
        launcher=launcher,
        launcher_config_map=launcher_config_map,
        code=code,
        notebook_host=tenant.notebook_host if cluster.in_graph_client == "notebook" else None,
    )


# In every training cluster's URN, so in every existing experiment's state: never change it.
TOKEN = "tfk8s:index:TrainingCluster"


class TrainingClusterBody(pulumi.ComponentResource):
    """What a training cluster declares, shared by the library's `TrainingCluster` and the component
    package's (tfk8s.component_package.training_cluster), which reads its arguments from the tenant's contract.
    No class annotations: the package's schema is inferred from its class's annotations, and would
    read these too (lab/component-package/README.md, 4.1)."""

    def _declare(self, name: str, args: TrainingClusterArgs) -> None:
        """Declare the cluster's objects, children of this component. Its outputs are the caller's
        to register: a component registers them once."""
        self._identify(args)
        self._ship_code(name, args)
        self.scratch_claim = self._build_scratch(name, args) if args.cluster.scratch is not None else None
        self.network_policy = self._build_network_policy(name, args)
        self.cluster_pods = self._cluster_pods(args)
        self.chief_expected = cs.has_chief_job(args.cluster)
        self.queued_workloads: queued_cluster.QueuedWorkloads | None = None
        self.unqueued_workloads: unqueued_cluster.UnqueuedWorkloads | None = None
        if self.queued:
            self.queued_workloads = queued_cluster.declare(
                f"{name}-jobset",
                jobset_name=self.names.cluster,
                cluster_pods=self.cluster_pods,
                run_id=self.run_id,
                platform=args.platform,
                owner_labels=args.owner.labels(),
                meta=self._meta,
                cluster_labels=self._labels,
                after=[self.network_policy, *([self.scratch_claim] if self.scratch_claim else [])],
                parent=self,
            )
            self.run_uid: pulumi.Output[str] = self.queued_workloads.run_uid
        else:
            self.unqueued_workloads = unqueued_cluster.declare(
                unqueued_cluster.Shape(
                    name=name,
                    names=self.names,
                    run_id=self.run_id,
                    cluster_pods=self.cluster_pods,
                    platform=args.platform,
                    namespace=args.namespace,
                    kubernetes_version=self.kubernetes_version,
                    meta=self._meta,
                    cluster_labels=self._labels,
                    network_policy=self.network_policy,
                    after=[self.scratch_claim] if self.scratch_claim else [],
                    parent=self,
                ),
                chief_expected=self.chief_expected,
            )
            self.run_uid = self.unqueued_workloads.run_job.uid
        self.layout = self._build_layout(name, args) if args.publish_layout else None
        self.status = self._status()

    def _identify(self, args: TrainingClusterArgs) -> None:
        """What names the cluster and its run: the names, the TF cluster spec, the run's id."""
        c, platform = args.cluster, args.platform
        self.args = args
        self.names = cs.Names(cluster=cs.qualified_name(args.experiment, c.name))
        self.queued = platform.queueing.enabled
        self.spec = cs.cluster_spec(
            c, platform.ports.tensorflow, args.notebook_host, experiment=args.experiment, queued=self.queued
        )
        self.training = c.training  # an in-graph client (the notebook) must train the same way
        image = c.image or platform.images.tensorflow
        code_digest = args.launcher.digest + (args.code.digest if args.code else "")
        self.kubernetes_version = platform.version
        job_policy = run_policy.immutable_fields(c, self.kubernetes_version)
        self.run_id = cs.run_id(c, self.spec, image, code_digest, job_policy)
        self.log_sub_path = layout_document.log_sub_path(args.experiment, c.name)

    def _ship_code(self, name: str, args: TrainingClusterArgs) -> None:
        """The trainer package (the experiment's, or its own outside one) and the cluster's code."""
        self.trainer_config = None
        self.launcher_config_map = args.launcher_config_map
        if self.launcher_config_map is None:
            self.launcher_config_map = own_trainer(args.experiment, args.cluster.name, args.launcher)
            self.trainer_config = self._build_trainer(name, self.launcher_config_map)
        self.code_config = None
        if args.code is not None:
            self.code_config = kube.ConfigMap(
                f"{name}-code",
                metadata=self._meta(labels=self._labels("tensorflow", role="code")),
                data=args.code.config_map_data(),
                opts=pulumi.ResourceOptions(parent=self),
            )

    def _build_network_policy(self, name: str, args: TrainingClusterArgs) -> kube.NetworkPolicy:
        """gRPC only among this cluster's pods (and its notebook client), metrics to the platform's
        Prometheus alone: before any of them starts."""
        c, platform = args.cluster, args.platform
        return kube.NetworkPolicy(
            f"{name}-network",
            metadata=self._meta(name=self.names.cluster, labels=self._labels("network")),
            spec=network_policy.cluster_policy(
                args.user,
                args.experiment,
                c,
                platform.ports,
                platform.monitoring,
                notebook_client=c.replication == "in-graph" and args.notebook_host is not None,
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _build_layout(self, name: str, args: TrainingClusterArgs) -> kube.CustomObject:
        """The cluster's Layout (the platform's kind), which the tenant's Jupyter reads."""
        layout_kind = args.platform.layouts
        return kube.CustomObject(
            f"{name}-layout",
            api_version=layout_kind.api_version,
            kind=layout_kind.kind,
            metadata=self._meta(name=self.names.layout(), labels=self._labels("layout")),
            spec=layout_document.spec(
                experiment=args.experiment,
                cluster=args.cluster,
                spec=self.spec,
                run_id=self.run_id,
                run_uid=self.run_uid,
                log_sub_path=self.log_sub_path,
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _status(self) -> pulumi.Output[dict[str, Any]]:
        """Every workload's live status, for readiness; `scratch` only when the cluster has one
        (readiness.cluster_readiness tells absent from unbound)."""
        scratch = {"scratch": self.scratch_claim.status} if self.scratch_claim else {}
        if self.queued_workloads is not None:
            return pulumi.Output.all(jobset=self.queued_workloads.status, **scratch)
        assert self.unqueued_workloads is not None
        return self.unqueued_workloads.status(**scratch)

    def _labels(self, component: str, **extra: Any) -> dict[str, str]:
        """Our recommended labels plus the owning stack's (see tfk8s.specs.ownership)."""
        a = self.args
        return {**labels(a.user, component, experiment=a.experiment, cluster=a.cluster.name, **extra), **a.owner.labels()}

    def _meta(
        self,
        *,
        labels: dict[str, str],
        name: str | None = None,
        annotations: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "namespace": self.args.namespace,
            "labels": labels,
            "annotations": {**(annotations or {}), **self.args.owner.annotations()},
        }
        if name is not None:
            meta["name"] = name
        return meta

    def _cluster_pods(self, args: TrainingClusterArgs) -> pods.ClusterPods:
        """What every TensorFlow pod of this cluster is built from: after its code and scratch volumes."""
        code, scratch = self.code_config, self.scratch_claim
        return pods.ClusterPods(
            tenant=args.user,
            experiment=args.experiment,
            cluster=args.cluster,
            platform=args.platform,
            spec=self.spec,
            volumes=pods.VolumeSources(
                data_claim=args.data_claim,
                log_claim=args.log_claim,
                launcher=pods.ConfigMapFiles(name=self.launcher_config_map, files=(pods.TRAINER_ARCHIVE,)),
                code=pods.ConfigMapFiles(name=code.name, files=tuple(sorted(args.code.files))) if code and args.code else None,
                scratch_claim=scratch.name if scratch else None,
            ),
            log_sub_path=self.log_sub_path,
            lineage=cs.lineage(args.cluster, args.code.digest if args.code else ""),
        )

    def _build_trainer(self, name: str, config_map: str) -> kube.ConfigMap:
        """The cluster's own copy of the trainer package, as an Experiment ships its clusters' one
        (tfk8s.components.experiment): a zip archive, immutable, named after its sources' digest."""
        return kube.ConfigMap(
            f"{name}-trainer",
            metadata=self._meta(name=config_map, labels=self._labels("tensorflow", role="code")),
            binary_data=trainer_archive(self.args.launcher),
            immutable=True,
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=["binaryData"]),
        )

    def _build_scratch(self, name: str, args: TrainingClusterArgs) -> kube.PersistentVolumeClaim:
        """The cluster's scratch claim. The provider's own claim await, which knows WaitForFirstConsumer
        classes (possible for `existing`), bounded by the platform's timeout."""
        assert args.cluster.scratch is not None and args.platform.scratch_storage_class is not None
        return kube.PersistentVolumeClaim(
            f"{name}-scratch",
            metadata=self._meta(
                name=self.names.scratch_claim(),
                labels=self._labels("storage", role="scratch"),
                annotations=awaits.timeout(args.platform.await_timeout_seconds),
            ),
            spec={
                "accessModes": ["ReadWriteMany"],
                "storageClassName": args.platform.scratch_storage_class,
                "resources": {"requests": {"storage": args.cluster.scratch.size}},
            },
            opts=pulumi.ResourceOptions(parent=self),
        )


class TrainingCluster(TrainingClusterBody):
    spec: dict[str, list[str]]
    training: TrainingMode
    status: pulumi.Output[dict[str, Any]]

    def __init__(self, name: str, args: TrainingClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TOKEN, name, None, opts)
        self._declare(name, args)
        self.register_outputs({"spec": self.spec, "status": self.status})
