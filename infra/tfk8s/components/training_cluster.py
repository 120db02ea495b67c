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

On a platform that queues in Kueue (`platform.queueing.enabled`), the PS Deployments, the Jobs,
their Services and the PS's RBAC give way to one JobSet, admitted whole or not at all, and a
Service per task (tfk8s.components.queued_cluster); the rest is the same.

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

from tfk8s.components import queued_cluster
from tfk8s.kube import awaits
from tfk8s.kube import objects as kube
from tfk8s.schema.contract import PlatformFacts, TenantFacts
from tfk8s.schema.experiment import ClusterSettings, TrainingMode
from tfk8s.specs import cluster_spec as cs
from tfk8s.specs import layout_document, network_policy, pods, run_policy
from tfk8s.specs.code import CodeBundle, installed_launcher_bundle, trainer_archive
from tfk8s.specs.fixed_names import own_trainer
from tfk8s.specs.labels import labels, selector_of
from tfk8s.specs.ownership import Owner
from tfk8s.specs.roles import CHIEF_ROLE, PS_ROLE, WORKER_ROLE, Role


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
    package's (tfk8s.package.training_cluster), which reads its arguments from the tenant's contract.
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
        self.chief_job: kube.Job | None = None
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
            self.run_uid = self._build_deployments_and_jobs(name, args)
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
        return pulumi.Output.all(
            ps=pulumi.Output.all(*[d.status for d in self.ps_deployments]),
            workers=self.worker_job.status,
            chief=self.chief_job.status if self.chief_job else None,
            **scratch,
        ).apply(lambda s: {**s, "ps": list(s["ps"])})

    def _build_deployments_and_jobs(self, name: str, args: TrainingClusterArgs) -> pulumi.Output[str]:
        """The seed's shape, on a platform that does not queue: per PS a Deployment and its Service,
        the run's Job(s) and their headless Services, the PS's RBAC and ownership. Returns the run's uid."""
        c = args.cluster
        # The Job a PS watches: when it fails (or ends, or is deleted) the run is over.
        self.watched_job = self.names.indexed((CHIEF_ROLE if self.chief_expected else WORKER_ROLE).name)
        self.ps_deployment_names = [f"{self.names.cluster}-ps-{i}-{self.run_id[:8]}" for i in range(c.ps.count)]
        self._build_ps_rbac(name, args)
        self.ps_services = [self._build_ps_service(name, args, i) for i in range(c.ps.count)]
        # Beside the run's Job, not after it: the PS read their uid themselves (module docstring).
        self.ps_deployments = [self._build_ps_deployment(name, i) for i in range(c.ps.count)]

        # The run's Job, then whatever is given its uid.
        own_uid = pods.run_uid_of_own_job(self.kubernetes_version)
        self.chief_service = None
        if self.chief_expected:
            self.chief_service, self.chief_job = self._build_indexed(name, CHIEF_ROLE, own_uid)
        worker_uid = pods.run_uid_value(self.chief_job.uid) if self.chief_job else own_uid
        self.worker_service, self.worker_job = self._build_indexed(name, WORKER_ROLE, worker_uid)
        run_job = self.chief_job or self.worker_job
        self.ps_owners = [self._own_ps(name, i, run_job) for i in range(c.ps.count)]
        return run_job.uid

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

    def _build_ps_rbac(self, name: str, args: TrainingClusterArgs) -> None:
        """Lets PS pods read and watch the Job they serve and scale their own Deployments to zero, and nothing else."""
        child = pulumi.ResourceOptions(parent=self)
        meta = self._meta(labels=self._labels("tensorflow", role=PS_ROLE.name))
        self.ps_account = kube.ServiceAccount(f"{name}-ps", metadata=meta, automount_service_account_token=False, opts=child)
        self.ps_role = kube.Role(
            f"{name}-ps-retire",
            metadata=meta,
            rules=[
                {
                    "apiGroups": ["apps"],
                    "resources": ["deployments/scale"],
                    # `patch` alone: tfk8s_train.kube_retire PATCHes the scale subresource.
                    "verbs": ["patch"],
                    "resourceNames": self.ps_deployment_names,
                },
                {
                    "apiGroups": ["batch"],
                    "resources": ["jobs"],
                    # `get` (the run's uid, and the poll where a watch is refused), `list` and `watch`
                    # through an exact metadata.name field selector, which the API server takes as the
                    # request's name, so resourceNames applies (tfk8s_train.job_watch).
                    "verbs": ["get", "list", "watch"],
                    "resourceNames": [self.watched_job],
                },
            ],
            opts=child,
        )
        kube.RoleBinding(
            f"{name}-ps-retire",
            metadata=meta,
            role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": self.ps_role.name},
            subjects=[{"kind": "ServiceAccount", "name": self.ps_account.name, "namespace": args.namespace}],
            opts=child,
        )

    def _ps_labels(self, index: int) -> dict[str, str]:
        return self._labels("tensorflow", role=PS_ROLE.name, index=index, run=self.run_id)

    def _build_ps_service(self, name: str, args: TrainingClusterArgs, index: int) -> kube.Service:
        pod_labels = self._ps_labels(index)
        return kube.Service(
            f"{name}-ps-{index}",
            metadata=self._meta(name=self.names.ps_service(index), labels=pod_labels, annotations=awaits.SERVICE_NO_AWAIT),
            # publishNotReadyAddresses: workers resolve a PS as soon as its pod exists, instead of
            # crashing on NXDOMAIN while it starts (kubeflow/trainer#1458). The selector holds the
            # run id: a PS of an earlier run that is still stopping is never an endpoint.
            spec={
                "selector": selector_of(pod_labels),
                "publishNotReadyAddresses": True,
                "ports": [{"name": "grpc", "port": args.platform.ports.tensorflow, "targetPort": "grpc"}],
            },
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _build_ps_deployment(self, name: str, index: int) -> kube.Deployment:
        pod_labels = self._ps_labels(index)
        # The run id in the name: a new run gets a fresh Deployment, and the PS can find its own
        # Deployment to retire it (see tfk8s_train.launch).
        deployment_name = self.ps_deployment_names[index]
        template = pods.pod_template(
            PS_ROLE,
            self.cluster_pods,
            labels=pod_labels,
            index=index,
            run_uid=pods.run_uid_of_watched_job(self.run_id),
            scale_to_zero=pods.ScaleToZero(
                deployment=deployment_name, watched_job=self.watched_job, service_account=self.ps_account.name
            ),
        )
        return kube.Deployment(
            f"{name}-ps-{index}",
            metadata=self._meta(
                name=deployment_name,
                labels=pod_labels,
                annotations=awaits.timeout(self.args.platform.await_timeout_seconds),
            ),
            # No `replicas`: the server default (1) applies, and the PS may scale itself to zero
            # without Pulumi fighting it.
            spec={"selector": {"matchLabels": selector_of(pod_labels)}, "strategy": {"type": "Recreate"}, "template": template},
            # A PS serves unauthenticated gRPC: never before the policy that fences it in.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.network_policy]),
        )

    def _own_ps(self, name: str, index: int, run_job: kube.Job) -> kube.DeploymentPatch:
        """The run's Job as the owner of PS `index`'s Deployment, so Kubernetes deletes the PS with
        that Job. A patch of its own (its own field manager), because the Job's uid is known only
        once the Job is up, and the PS must not wait for that to start.

        Kept on delete: the owner goes with its Deployment (a new run is a new Deployment), and
        the provider's delete of a patch re-applies the object's bare name, which fails, or would
        create it, once the Deployment is gone, as it is after the Job's TTL clean-up."""
        return kube.DeploymentPatch(
            f"{name}-ps-{index}-owner",
            metadata={
                "name": self.ps_deployments[index].name,
                "namespace": self.args.namespace,
                "annotations": awaits.PATCH_NO_AWAIT,
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": run_job.name, "uid": run_job.uid}],
            },
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.ps_deployments[index]], retain_on_delete=True),
        )

    def _build_indexed(self, name: str, role: Role, run_uid: dict[str, Any]) -> tuple[kube.Service, kube.Job]:
        """The Indexed Job of `role` (workers, chief) and the headless Service that is its pods' subdomain."""
        c, platform = self.args.cluster, self.args.platform
        tasks = role.count(c)
        job_name = self.names.indexed(role.name)
        # The run id in the pods' labels: a changed cluster (or a bumped `run.number`) changes the
        # Job's template, so the Job is replaced: a new run, also after a failed one.
        pod_labels = self._labels("tensorflow", role=role.name, run=self.run_id)
        service = kube.Service(
            f"{name}-{role.name}",
            metadata=self._meta(name=job_name, labels=pod_labels, annotations=awaits.SERVICE_NO_AWAIT),
            spec={
                "clusterIP": "None",
                "selector": selector_of(pod_labels),
                "publishNotReadyAddresses": True,
                "ports": [{"name": "grpc", "port": platform.ports.tensorflow, "targetPort": "grpc"}],
            },
            opts=pulumi.ResourceOptions(parent=self),
        )
        # Many tasks read their index from JOB_COMPLETION_INDEX (one template for all); one task is task 0.
        index = 0 if role.one_task else None
        template = pods.pod_template(role, self.cluster_pods, labels=pod_labels, index=index, run_uid=run_uid, subdomain=job_name)
        # Before Kubernetes 1.29 a Job's tasks share its retries: worth a word when there are several.
        warning = None if role.one_task else run_policy.shared_retries_warning(c, tasks, self.kubernetes_version)
        if warning:
            pulumi.log.warn(warning, resource=self)
        job = kube.Job(
            f"{name}-{role.name}",
            metadata=self._meta(
                name=job_name, labels=pod_labels, annotations=awaits.training_job(platform.await_timeout_seconds, tasks)
            ),
            spec={
                "completionMode": "Indexed",
                "completions": tasks,
                "parallelism": tasks,
                # Retries (per index where the server can), deadline and TTL: see run_policy.
                **run_policy.job_fields(c, tasks, self.kubernetes_version),
                "template": template,
            },
            # The Job name is its pods' DNS identity, so a changed Job must go before its successor.
            # Its pods start behind their NetworkPolicy (they serve unauthenticated gRPC) and on a
            # bound scratch claim. Not after the Services: those are created in the same wave,
            # within a fraction of a second, long before a pod's container has started and
            # imported TensorFlow to look a peer up; waiting for them held every new run's Job
            # for about 0.1 s (docs/benchmarks.md "Fixed cost").
            opts=pulumi.ResourceOptions(
                parent=self,
                delete_before_replace=True,
                depends_on=[self.network_policy, *([self.scratch_claim] if self.scratch_claim else [])],
            ),
        )
        return service, job


class TrainingCluster(TrainingClusterBody):
    spec: dict[str, list[str]]
    training: TrainingMode
    status: pulumi.Output[dict[str, Any]]

    def __init__(self, name: str, args: TrainingClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(TOKEN, name, None, opts)
        self._declare(name, args)
        self.register_outputs({"spec": self.spec, "status": self.status})
