"""A training cluster's workloads on a platform that does not queue (the seed's shape): per PS task
a Deployment and its Service, the run's Indexed Job(s) with their headless Services, the PS's RBAC
and their ownership by the run's Job.

TrainingCluster declares these, or on a queueing platform a JobSet and its task Services
(tfk8s.components.queued_cluster); everything around them is the same (the component's module
says the shape and why). What the run's uid is and who reads it: the component's module too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi

from tfk8s.components.queued_cluster import Labels, Meta
from tfk8s.kube import awaits
from tfk8s.kube import objects as kube
from tfk8s.settings.contract import PlatformFacts
from tfk8s.specs import cluster_spec as cs
from tfk8s.specs import pods, run_policy
from tfk8s.specs.labels import selector_of
from tfk8s.specs.roles import CHIEF_ROLE, PS_ROLE, WORKER_ROLE, Role


@dataclass(frozen=True, kw_only=True)
class UnqueuedWorkloads:
    ps_services: list[kube.Service]
    ps_deployments: list[kube.Deployment]
    ps_owners: list[kube.DeploymentPatch]
    worker_service: kube.Service
    worker_job: kube.Job
    chief_service: kube.Service | None
    chief_job: kube.Job | None

    @property
    def run_job(self) -> kube.Job:
        """The Job the PS watch: the chief's where there is one, else the workers'."""
        return self.chief_job or self.worker_job

    def status(self, **beside: pulumi.Output[Any]) -> pulumi.Output[dict[str, Any]]:
        """What readiness reads (tfk8s.specs.readiness): each PS Deployment's, the worker and chief
        Jobs', and `beside` them (a scratch claim's)."""
        return pulumi.Output.all(
            ps=pulumi.Output.all(*[d.status for d in self.ps_deployments]),
            workers=self.worker_job.status,
            chief=self.chief_job.status if self.chief_job else None,
            **beside,
        ).apply(lambda s: {**s, "ps": list(s["ps"])})


@dataclass(frozen=True, kw_only=True)
class Shape:
    """What the workloads are built from: the component's names and facts, its metadata makers,
    and what the pods start behind (the NetworkPolicy, a scratch claim)."""

    name: str  # the Pulumi resources' prefix
    names: cs.Names
    run_id: str
    cluster_pods: pods.ClusterPods
    platform: PlatformFacts
    namespace: str
    kubernetes_version: tuple[int, int]
    meta: Meta
    cluster_labels: Labels
    network_policy: kube.NetworkPolicy
    after: Sequence[pulumi.Resource]
    parent: pulumi.Resource

    def child(self, **options: Any) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(parent=self.parent, **options)


def declare(shape: Shape, *, chief_expected: bool) -> UnqueuedWorkloads:
    """The PS (RBAC, Services, Deployments), the run's Job(s), then the PS's ownership by it."""
    cluster = shape.cluster_pods.cluster
    # The Job a PS watches: when it fails (or ends, or is deleted) the run is over.
    watched_job = shape.names.indexed((CHIEF_ROLE if chief_expected else WORKER_ROLE).name)
    deployment_names = [f"{shape.names.cluster}-ps-{i}-{shape.run_id[:8]}" for i in range(cluster.ps.count)]
    account = _ps_rbac(shape, deployment_names, watched_job)
    ps_services = [_ps_service(shape, i) for i in range(cluster.ps.count)]
    # Beside the run's Job, not after it: the PS read their uid themselves (the component's module).
    ps_deployments = [_ps_deployment(shape, i, deployment_names[i], watched_job, account) for i in range(cluster.ps.count)]
    # The run's Job, then whatever is given its uid.
    own_uid = pods.run_uid_of_own_job(shape.kubernetes_version)
    chief_service, chief_job = _indexed(shape, CHIEF_ROLE, own_uid) if chief_expected else (None, None)
    worker_uid = pods.run_uid_value(chief_job.uid) if chief_job else own_uid
    worker_service, worker_job = _indexed(shape, WORKER_ROLE, worker_uid)
    run_job = chief_job or worker_job
    return UnqueuedWorkloads(
        ps_services=ps_services,
        ps_deployments=ps_deployments,
        ps_owners=[_own_ps(shape, i, deployment, run_job) for i, deployment in enumerate(ps_deployments)],
        worker_service=worker_service,
        worker_job=worker_job,
        chief_service=chief_service,
        chief_job=chief_job,
    )


def _ps_rbac(shape: Shape, deployment_names: list[str], watched_job: str) -> kube.ServiceAccount:
    """Lets PS pods read and watch the Job they serve and scale their own Deployments to zero, and nothing else."""
    meta = shape.meta(labels=shape.cluster_labels("tensorflow", role=PS_ROLE.name))
    account = kube.ServiceAccount(f"{shape.name}-ps", metadata=meta, automount_service_account_token=False, opts=shape.child())
    role = kube.Role(
        f"{shape.name}-ps-retire",
        metadata=meta,
        rules=[
            {
                "apiGroups": ["apps"],
                "resources": ["deployments/scale"],
                # `patch` alone: tfk8s_train.kube_retire PATCHes the scale subresource.
                "verbs": ["patch"],
                "resourceNames": deployment_names,
            },
            {
                "apiGroups": ["batch"],
                "resources": ["jobs"],
                # `get` (the run's uid, and the poll where a watch is refused), `list` and `watch`
                # through an exact metadata.name field selector, which the API server takes as the
                # request's name, so resourceNames applies (tfk8s_train.job_watch).
                "verbs": ["get", "list", "watch"],
                "resourceNames": [watched_job],
            },
        ],
        opts=shape.child(),
    )
    kube.RoleBinding(
        f"{shape.name}-ps-retire",
        metadata=meta,
        role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role.name},
        subjects=[{"kind": "ServiceAccount", "name": account.name, "namespace": shape.namespace}],
        opts=shape.child(),
    )
    return account


def _ps_labels(shape: Shape, index: int) -> dict[str, str]:
    return shape.cluster_labels("tensorflow", role=PS_ROLE.name, index=index, run=shape.run_id)


def _ps_service(shape: Shape, index: int) -> kube.Service:
    pod_labels = _ps_labels(shape, index)
    return kube.Service(
        f"{shape.name}-ps-{index}",
        metadata=shape.meta(name=shape.names.ps_service(index), labels=pod_labels, annotations=awaits.SERVICE_NO_AWAIT),
        # publishNotReadyAddresses: workers resolve a PS as soon as its pod exists, instead of
        # crashing on NXDOMAIN while it starts (kubeflow/trainer#1458). The selector holds the
        # run id: a PS of an earlier run that is still stopping is never an endpoint.
        spec={
            "selector": selector_of(pod_labels),
            "publishNotReadyAddresses": True,
            "ports": [{"name": "grpc", "port": shape.platform.ports.tensorflow, "targetPort": "grpc"}],
        },
        opts=shape.child(),
    )


def _ps_deployment(
    shape: Shape, index: int, deployment_name: str, watched_job: str, account: kube.ServiceAccount
) -> kube.Deployment:
    # The run id in the name: a new run gets a fresh Deployment, and the PS can find its own
    # Deployment to retire it (see tfk8s_train.launch).
    pod_labels = _ps_labels(shape, index)
    template = pods.pod_template(
        PS_ROLE,
        shape.cluster_pods,
        labels=pod_labels,
        index=index,
        run_uid=pods.run_uid_of_watched_job(shape.run_id),
        scale_to_zero=pods.ScaleToZero(deployment=deployment_name, watched_job=watched_job, service_account=account.name),
    )
    return kube.Deployment(
        f"{shape.name}-ps-{index}",
        metadata=shape.meta(
            name=deployment_name, labels=pod_labels, annotations=awaits.timeout(shape.platform.await_timeout_seconds)
        ),
        # No `replicas`: the server default (1) applies, and the PS may scale itself to zero
        # without Pulumi fighting it.
        spec={"selector": {"matchLabels": selector_of(pod_labels)}, "strategy": {"type": "Recreate"}, "template": template},
        # A PS serves unauthenticated gRPC: never before the policy that fences it in.
        opts=shape.child(depends_on=[shape.network_policy]),
    )


def _own_ps(shape: Shape, index: int, deployment: kube.Deployment, run_job: kube.Job) -> kube.DeploymentPatch:
    """The run's Job as the owner of PS `index`'s Deployment, so Kubernetes deletes the PS with
    that Job. A patch of its own (its own field manager), because the Job's uid is known only
    once the Job is up, and the PS must not wait for that to start.

    Kept on delete: the owner goes with its Deployment (a new run is a new Deployment), and
    the provider's delete of a patch re-applies the object's bare name, which fails, or would
    create it, once the Deployment is gone, as it is after the Job's TTL clean-up."""
    return kube.DeploymentPatch(
        f"{shape.name}-ps-{index}-owner",
        metadata={
            "name": deployment.name,
            "namespace": shape.namespace,
            "annotations": awaits.PATCH_NO_AWAIT,
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": run_job.name, "uid": run_job.uid}],
        },
        opts=shape.child(depends_on=[deployment], retain_on_delete=True),
    )


def _indexed(shape: Shape, role: Role, run_uid: dict[str, Any]) -> tuple[kube.Service, kube.Job]:
    """The Indexed Job of `role` (workers, chief) and the headless Service that is its pods' subdomain."""
    cluster, platform = shape.cluster_pods.cluster, shape.platform
    tasks = role.count(cluster)
    job_name = shape.names.indexed(role.name)
    # The run id in the pods' labels: a changed cluster (or a bumped `run.number`) changes the
    # Job's template, so the Job is replaced: a new run, also after a failed one.
    pod_labels = shape.cluster_labels("tensorflow", role=role.name, run=shape.run_id)
    service = kube.Service(
        f"{shape.name}-{role.name}",
        metadata=shape.meta(name=job_name, labels=pod_labels, annotations=awaits.SERVICE_NO_AWAIT),
        spec={
            "clusterIP": "None",
            "selector": selector_of(pod_labels),
            "publishNotReadyAddresses": True,
            "ports": [{"name": "grpc", "port": platform.ports.tensorflow, "targetPort": "grpc"}],
        },
        opts=shape.child(),
    )
    # Many tasks read their index from JOB_COMPLETION_INDEX (one template for all); one task is task 0.
    index = 0 if role.one_task else None
    template = pods.pod_template(role, shape.cluster_pods, labels=pod_labels, index=index, run_uid=run_uid, subdomain=job_name)
    # Before Kubernetes 1.29 a Job's tasks share its retries: worth a word when there are several.
    warning = None if role.one_task else run_policy.shared_retries_warning(cluster, tasks, shape.kubernetes_version)
    if warning:
        pulumi.log.warn(warning, resource=shape.parent)
    job = kube.Job(
        f"{shape.name}-{role.name}",
        metadata=shape.meta(
            name=job_name, labels=pod_labels, annotations=awaits.training_job(platform.await_timeout_seconds, tasks)
        ),
        spec={
            "completionMode": "Indexed",
            "completions": tasks,
            "parallelism": tasks,
            # Retries (per index where the server can), deadline and TTL: see run_policy.
            **run_policy.job_fields(cluster, tasks, shape.kubernetes_version),
            "template": template,
        },
        # The Job name is its pods' DNS identity, so a changed Job must go before its successor.
        # Its pods start behind their NetworkPolicy (they serve unauthenticated gRPC) and on a
        # bound scratch claim. Not after the Services: those are created in the same wave,
        # within a fraction of a second, long before a pod's container has started and
        # imported TensorFlow to look a peer up; waiting for them held every new run's Job
        # for about 0.1 s (docs/benchmarks.md "Fixed cost").
        opts=shape.child(delete_before_replace=True, depends_on=[shape.network_policy, *shape.after]),
    )
    return service, job
