"""Container and pod-template specs (plain dicts in Kubernetes' own camelCase), no Pulumi calls.

One builder, `pod_template`, makes the pods of every role: the PS Deployments' and the worker and
chief Jobs'. Where they differ, it reads the role's traits (tfk8s.specs.roles). What they share with the
platform's pods, the securityContexts of the `restricted` Pod Security Standard, is tfk8s.specs.pod_security's.

Components pass these straight to pulumi_kubernetes resources; tests read them as a user reads
YAML.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tfk8s.settings.contract import PlatformFacts
from tfk8s.settings.experiment import DEFAULT_CHECKPOINT_SECONDS, DEFAULT_TRAINER, ClusterSettings, Resources
from tfk8s.settings.node_keys import NODE_LOST_TAINTS
from tfk8s.specs import cluster_spec as cs
from tfk8s.specs import pod_security
from tfk8s.specs.roles import TASK_CONTAINER, Role, Volume

LAUNCHER_DIR = "/opt/tfk8s"
CODE_DIR = f"{LAUNCHER_DIR}/code"
# An experiment's pods: the package as one zip archive in the trainer ConfigMap (tfk8s.specs.code,
# CodeBundle.zipped), on PYTHONPATH, its launcher run as a module.
TRAINER_PACKAGE = "tfk8s_train"
TRAINER_ARCHIVE = f"{TRAINER_PACKAGE}.zip"
TRAINER_DIR = f"{LAUNCHER_DIR}/trainer"
TRAINER_PATH = f"{TRAINER_DIR}/{TRAINER_ARCHIVE}"
LAUNCH_MODULE = f"{TRAINER_PACKAGE}.launch"
GPU_RESOURCE = "nvidia.com/gpu"
# The container port the launcher serves its Prometheus metrics on (docs/guide/monitoring.md), by
# this name: the platform's scrape keeps it.
METRICS_PORT_NAME = "metrics"

Json = dict[str, Any]


def resources(spec: Resources) -> Json:
    """Requests equal limits: training tasks get a guaranteed share, never a burst they can't keep."""
    amounts: dict[str, Any] = {"cpu": spec.cpu, "memory": spec.memory}
    if spec.gpus:
        amounts[GPU_RESOURCE] = str(spec.gpus)
    return {"requests": dict(amounts), "limits": dict(amounts)}


def user_node_toleration(taint_key: str) -> Json:
    return {"key": taint_key, "operator": "Equal", "value": "true", "effect": "NoSchedule"}


def user_node_placement(taint_key: str) -> Json:
    """Pin a pod to the User Node: select its label and tolerate its taint."""
    return {"nodeSelector": {taint_key: "true"}, "tolerations": [user_node_toleration(taint_key)]}


def node_lost_tolerations(seconds: int) -> list[Json]:
    """A task's pod waits `seconds` for a node that stopped answering (run.nodeLostSeconds)."""
    return [{"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds} for key in NODE_LOST_TAINTS]


def avoid_user_node(taint_key: str) -> Json:
    """Training pods stay off the User Node even if a toleration would let them on."""
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": taint_key, "operator": "DoesNotExist"}]}]
            }
        }
    }


# Since Kubernetes 1.27 the Job controller labels its pods `batch.kubernetes.io/controller-uid`;
# before, only `controller-uid` (kept since for compatibility, but legacy).
PREFIXED_JOB_UID_LABEL_SINCE = (1, 27)


def run_uid_of_own_job(kubernetes_version: tuple[int, int]) -> Json:
    """TFK8S_RUN_UID for the pods of the run's own Job: its uid, from the label its controller sets."""
    if kubernetes_version >= PREFIXED_JOB_UID_LABEL_SINCE:
        label = "batch.kubernetes.io/controller-uid"
    else:
        label = "controller-uid"
    return {"name": "TFK8S_RUN_UID", "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{label}']"}}}


def run_uid_value(job_uid: Any) -> Json:
    """TFK8S_RUN_UID for a chief's workers: the uid of the run's Job (the chief's), created before them."""
    return {"name": "TFK8S_RUN_UID", "value": job_uid}


def run_uid_of_watched_job(run_id: str) -> Json:
    """For the PS, in place of TFK8S_RUN_UID: the run id the Job they watch is labelled with. The
    launcher reads that Job's uid once it exists, so the PS need not wait for the Job to be created
    (tfk8s_train.launch.resolve_run_uid)."""
    return {"name": "TFK8S_WATCH_JOB_RUN", "value": run_id}


def task_env(cluster: ClusterSettings, spec: dict[str, list[str]], job: str, index: int | None, run_uid: Json) -> list[Json]:
    """The contract read by `tfk8s_train.launch` (see training/README.md).

    Worker pods get no TFK8S_TASK_INDEX: the Indexed Job sets JOB_COMPLETION_INDEX at run time,
    so one pod template serves every worker. `run_uid` is one of the three entries above that
    give a task its run: a run is one Job, so a Job re-created with the same settings is a new run.
    """
    env: list[Json] = [
        {"name": "TFK8S_CLUSTER_SPEC", "value": json.dumps(spec, sort_keys=True)},
        {"name": "TFK8S_JOB_NAME", "value": job},
        {"name": "TFK8S_DATA_DIR", "value": cs.DATA_DIR},
        {"name": "TFK8S_LOG_DIR", "value": cs.LOG_DIR},
        run_uid,
        {"name": "TFK8S_CLASSIC_FLAGS", "value": "true" if cluster.classic_flags else "false"},
        {"name": "TFK8S_REPLICATION", "value": cluster.replication},
        {"name": "TFK8S_TRAINING", "value": cluster.training},
        {"name": "TFK8S_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "PYTHONPATH", "value": f"{TRAINER_PATH}:{CODE_DIR}"},
        {"name": "PYTHONUNBUFFERED", "value": "1"},
    ]
    if cluster.run.checkpoint_seconds != DEFAULT_CHECKPOINT_SECONDS:
        # Only when set: a variable every running experiment's pods gained on an upgrade would
        # replace their Jobs (templates are immutable), restarting runs for a default the trainer has.
        env.append({"name": "TFK8S_CHECKPOINT_SECONDS", "value": str(cluster.run.checkpoint_seconds)})
    if index is not None:
        env.append({"name": "TFK8S_TASK_INDEX", "value": str(index)})
    return env


def identity_env(tenant: str, experiment: str, cluster: ClusterSettings, metrics_port: int) -> list[Json]:
    """Whose task this is, and where its launcher serves its metrics: the labels of every sample it
    exposes (tenant, experiment, cluster; its role and index it knows), on the platform's metrics
    port (docs/guide/monitoring.md). The same values as the pod's labels (tfk8s.specs.labels)."""
    return [
        {"name": "TFK8S_TENANT", "value": tenant},
        {"name": "TFK8S_EXPERIMENT", "value": experiment},
        {"name": "TFK8S_CLUSTER", "value": cluster.name},
        {"name": "TFK8S_METRICS_PORT", "value": str(metrics_port)},
    ]


@dataclass(frozen=True, kw_only=True)
class ConfigMapFiles:
    """A directory shipped as a ConfigMap: its keys are flat, so `items` rebuild its subdirectories."""

    name: Any  # the ConfigMap's name, or the Pulumi output of it
    files: tuple[str, ...]  # paths relative to the directory, sorted

    def volume_source(self) -> Json:
        if all(key_of(f) == f for f in self.files):
            # A flat directory is the ConfigMap as Kubernetes mounts it: no `items`, which every
            # pod template would carry (and every preview check and diff) for nothing.
            return {"configMap": {"name": self.name}}
        return {"configMap": {"name": self.name, "items": [{"key": key_of(f), "path": f} for f in self.files]}}


@dataclass(frozen=True, kw_only=True)
class VolumeSources:
    """What a cluster's pod volumes are made of: the user's claims (the platform stack's), the
    experiment's launcher ConfigMap, and the cluster's own code ConfigMap and scratch claim."""

    data_claim: Any
    log_claim: Any
    launcher: ConfigMapFiles  # the trainer ConfigMap, mounted at TRAINER_DIR: the package's zip archive
    code: ConfigMapFiles | None = None  # None: an empty /opt/tfk8s/code (code in the image, or fetched by url)
    scratch_claim: Any | None = None


def volumes(mounted: frozenset[Volume], sources: VolumeSources) -> list[Json]:
    """The pod's volumes among `mounted` (roles.Role.mounts)."""
    if "scratch" in mounted and sources.scratch_claim is None:
        raise ValueError("a pod mounts scratch, but the cluster has no scratch claim")
    code = sources.code.volume_source() if sources.code is not None else {"emptyDir": {"sizeLimit": pod_security.CODE_SIZE_LIMIT}}
    # List order is part of the manifest (a new order would roll or replace every pod): keep it.
    every: list[Json] = [
        {"name": "data", **_claim(sources.data_claim)},
        {"name": "log", **_claim(sources.log_claim)},
        {"name": "launcher", **sources.launcher.volume_source()},
        {"name": "scratch", **_claim(sources.scratch_claim)},
        {"name": "code", **code},
    ]
    return [volume for volume in every if volume["name"] in mounted]


def _claim(name: Any) -> Json:
    return {"persistentVolumeClaim": {"claimName": name}}


def key_of(relative_path: str) -> str:
    """ConfigMap keys may not contain '/': 'pkg/mod.py' is stored as 'pkg__mod.py'."""
    return relative_path.replace("/", "__")


def task_args(cluster: ClusterSettings) -> list[str]:
    """Our trainer learns sync/async from a flag; user scripts read TFK8S_TRAINING if they care."""
    if tuple(cluster.command) == DEFAULT_TRAINER and cluster.training == "sync":
        return ["--sync", *cluster.args]
    return list(cluster.args)


@dataclass(frozen=True, kw_only=True)
class ClusterPods:
    """What the TensorFlow pods of one training cluster are built from, whatever their role."""

    tenant: str  # the tenant's user name, which labels its objects
    experiment: str
    cluster: ClusterSettings
    platform: PlatformFacts
    spec: dict[str, list[str]]  # the TF cluster spec (tfk8s.specs.cluster_spec)
    volumes: VolumeSources
    log_sub_path: str  # the cluster's directory on the user's log volume (tfk8s.specs.layout_document)
    lineage: str  # what its runs train, as the user decides it (tfk8s.specs.cluster_spec.lineage)


def tf_container(role: Role, cluster_pods: ClusterPods, env: list[Json]) -> Json:
    """The seed's /data and /log in every task that mounts them: /log is this run's own directory of
    the user's log volume (`<experiment>/<cluster>`, which TensorBoard shows as the run's name), /data
    the user's data volume or the part of it `dataSubPath` names; and the cluster's scratch volume at
    /scratch where the role mounts it (its path in TFK8S_SCRATCH_DIR). Its root filesystem is
    read-only: TensorFlow writes its temporary files and caches in the pod's /tmp, its HOME."""
    cluster, platform = cluster_pods.cluster, cluster_pods.platform
    port = platform.ports.tensorflow
    # Read-only unless the cluster writes data sets: /data is shared by every experiment of the user.
    data_mount: Json = {"name": "data", "mountPath": cs.DATA_DIR, **({} if cluster.data_writable else {"readOnly": True})}
    if cluster.data_sub_path:
        data_mount["subPath"] = cluster.data_sub_path
    # List order is part of the manifest (a new order would roll or replace every pod): keep it.
    every_mount: list[Json] = [
        data_mount,
        {"name": "log", "mountPath": cs.LOG_DIR, "subPath": cluster_pods.log_sub_path},
        {"name": "launcher", "mountPath": TRAINER_DIR, "readOnly": True},
        {"name": "code", "mountPath": CODE_DIR},
        {"name": "scratch", "mountPath": cs.SCRATCH_DIR},
    ]
    mounted = role.mounts(cluster)
    container: Json = {
        "name": TASK_CONTAINER,
        "image": cluster.image or platform.images.tensorflow,
        "command": ["python", "-m", LAUNCH_MODULE, "--", *cluster.command],
        "args": task_args(cluster),
        "workingDir": CODE_DIR,
        "env": [*env, pod_security.home_in_tmp()],
        "ports": [{"name": "grpc", "containerPort": port}, {"name": METRICS_PORT_NAME, "containerPort": platform.ports.metrics}],
        "resources": resources(role.resources(cluster)),
        "volumeMounts": [*(mount for mount in every_mount if mount["name"] in mounted), pod_security.writable_tmp_mount()],
        "securityContext": pod_security.container_security_context(read_only_root=True),
    }
    if role.serves:
        # A serving task is usable by its peers once its gRPC server listens. A client (the chief)
        # is connected to by nobody, so it has no probe.
        container["readinessProbe"] = {"tcpSocket": {"port": port}, "periodSeconds": 5}
    return container


def url_fetcher(cluster: ClusterSettings, platform: PlatformFacts, sized: Resources) -> Json:
    """The seed's `curl script -o /opt/name.py`, as an init container that fails loudly. It writes
    nothing but that file, into the code emptyDir: its root filesystem is read-only. It is sized
    like its task's container without GPUs (`sized`), so the pod's quota share is the task's alone:
    an unsized init container would get the namespace's LimitRange defaults, which can be larger
    (a pod counts its largest init container when that beats its containers' sum)."""
    assert cluster.code.url is not None
    filename = cluster.code.url.rstrip("/").rsplit("/", 1)[-1] or "train.py"
    fetch = "import os, urllib.request; urllib.request.urlretrieve(os.environ['TFK8S_CODE_URL'], os.environ['TFK8S_CODE_FILE'])"
    return {
        "name": "fetch-code",
        "image": cluster.image or platform.images.tensorflow,
        "command": ["python", "-c", fetch],
        "env": [
            {"name": "TFK8S_CODE_URL", "value": cluster.code.url},
            {"name": "TFK8S_CODE_FILE", "value": f"{CODE_DIR}/{filename}"},
        ],
        "volumeMounts": [{"name": "code", "mountPath": CODE_DIR}],
        "resources": resources(sized.model_copy(update={"gpus": 0})),
        "securityContext": pod_security.container_security_context(read_only_root=True),
    }


@dataclass(frozen=True, kw_only=True)
class ScaleToZero:
    """What a task that retires by scaling its own Deployment to zero is given (roles.Retirement)."""

    deployment: str  # its own Deployment, named with the run id (see tfk8s_train.launch)
    watched_job: str  # the run's Job: once it has failed, completed or is gone, the run is over
    service_account: Any  # allowed to read that Job and scale that Deployment, and nothing else

    def env(self) -> list[Json]:
        return [
            {"name": "TFK8S_PS_DEPLOYMENT", "value": self.deployment},
            {"name": "TFK8S_WATCH_JOB", "value": self.watched_job},
        ]


def pod_template(
    role: Role,
    cluster_pods: ClusterPods,
    *,
    labels: dict[str, str],
    index: int | None,
    run_uid: Json,
    subdomain: str | None = None,
    scale_to_zero: ScaleToZero | None = None,
) -> Json:
    """The pod template of a role's tasks, for its Deployment or its Indexed Job.

    `index`, `run_uid`: see task_env. `subdomain`: the headless Service of an Indexed Job (pod i is
    `<job>-<i>.<subdomain>`). `scale_to_zero`: for a role that retires so, and only for it.
    """
    if (scale_to_zero is not None) != (role.retirement == "scale-to-zero"):
        raise ValueError(f"role {role.name} retires by {role.retirement!r}: ScaleToZero is for scale-to-zero alone")
    cluster, platform = cluster_pods.cluster, cluster_pods.platform
    mounted = role.mounts(cluster)
    env = task_env(cluster, cluster_pods.spec, role.name, index, run_uid)
    env += identity_env(cluster_pods.tenant, cluster_pods.experiment, cluster, platform.ports.metrics)
    env.append({"name": "TFK8S_LINEAGE", "value": cluster_pods.lineage})
    if "scratch" in mounted:
        env.append({"name": "TFK8S_SCRATCH_DIR", "value": cs.SCRATCH_DIR})
    if scale_to_zero is not None:
        env.extend(scale_to_zero.env())
    spec: Json = {
        "restartPolicy": role.restart_policy,
        "securityContext": pod_security.pod_security_context(platform.pod_security.tensorflow),
        "containers": [tf_container(role, cluster_pods, env)],
        "volumes": [*volumes(mounted, cluster_pods.volumes), pod_security.writable_tmp_volume()],
        # Only a task that scales its own Deployment talks to the API server.
        "automountServiceAccountToken": scale_to_zero is not None,
    }
    if not platform.user_node.shared_with_training:
        spec["affinity"] = avoid_user_node(platform.user_node.taint_key)
    if scale_to_zero is not None:
        spec["serviceAccountName"] = scale_to_zero.service_account
    if subdomain:
        spec["subdomain"] = subdomain
    if cluster.code.source == "url":
        spec["initContainers"] = [url_fetcher(cluster, platform, role.resources(cluster))]
    placement = role.placement(cluster)
    tolerations: list[Json] = []
    if placement is not None:
        if placement.node_selector:
            spec["nodeSelector"] = dict(placement.node_selector)
        # As written in the stack file: Kubernetes' own defaults apply to what it leaves out.
        tolerations += [t.model_dump(by_alias=True, exclude_unset=True) for t in placement.tolerations]
    if cluster.run.node_lost_seconds is not None:
        # Beside any of the stack file's own: of several tolerations of a taint, the shortest time holds.
        tolerations += node_lost_tolerations(cluster.run.node_lost_seconds)
    if tolerations:
        spec["tolerations"] = tolerations
    return {"metadata": {"labels": labels}, "spec": spec}
