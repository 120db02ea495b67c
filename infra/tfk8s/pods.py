"""Container and pod-template specs (plain dicts in Kubernetes' own camelCase), no Pulumi calls.

Components pass these straight to pulumi_kubernetes resources; tests read them as a user reads
YAML.
"""

from __future__ import annotations

import json
from typing import Any

from tfk8s import cluster_spec as cs
from tfk8s.settings import DEFAULT_TRAINER, ClusterSettings, PlatformFacts, Resources

LAUNCHER_DIR = "/opt/tfk8s"
LAUNCHER = f"{LAUNCHER_DIR}/tfk8s_train/launch.py"
CODE_DIR = f"{LAUNCHER_DIR}/code"
GPU_RESOURCE = "nvidia.com/gpu"

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
    """TFK8S_RUN_UID for every other task: the uid of the run's Job, created before them."""
    return {"name": "TFK8S_RUN_UID", "value": job_uid}


def task_env(cluster: ClusterSettings, spec: dict[str, list[str]], job: str, index: int | None, run_uid: Json) -> list[Json]:
    """The contract read by `tfk8s_train.launch` (see training/README.md).

    Worker pods get no TFK8S_TASK_INDEX: the Indexed Job sets JOB_COMPLETION_INDEX at run time,
    so one pod template serves every worker. `run_uid` is one of the two TFK8S_RUN_UID entries
    above: a run is one Job, so a Job re-created with the same settings is a new run.
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
        {"name": "PYTHONPATH", "value": f"{LAUNCHER_DIR}:{CODE_DIR}"},
        {"name": "PYTHONUNBUFFERED", "value": "1"},
    ]
    if index is not None:
        env.append({"name": "TFK8S_TASK_INDEX", "value": str(index)})
    return env


def volumes(
    launcher_config_map: Any,
    launcher_files: list[str],
    data_claim: Any,
    log_claim: Any,
    code_config_map: Any | None,
    code_files: list[str],
    mount_data: bool,
    scratch_claim: Any | None = None,
) -> list[Json]:
    """Pod volumes; ConfigMap keys are flat, so `items` rebuild the package directory.

    PS tasks (`mount_data` false) hold variables only: no data, no scratch.
    """
    result: list[Json] = [
        {"name": "log", "persistentVolumeClaim": {"claimName": log_claim}},
        {
            "name": "launcher",
            "configMap": {
                "name": launcher_config_map,
                # Mounted at /opt/tfk8s/tfk8s_train: each file sits directly under it.
                "items": [{"key": key_of(f), "path": f} for f in launcher_files],
            },
        },
    ]
    if mount_data:
        result.insert(0, {"name": "data", "persistentVolumeClaim": {"claimName": data_claim}})
        if scratch_claim is not None:
            result.append({"name": "scratch", "persistentVolumeClaim": {"claimName": scratch_claim}})
    if code_config_map is not None:
        result.append(
            {"name": "code", "configMap": {"name": code_config_map, "items": [{"key": key_of(f), "path": f} for f in code_files]}}
        )
    else:
        result.append({"name": "code", "emptyDir": {}})
    return result


def key_of(relative_path: str) -> str:
    """ConfigMap keys may not contain '/': 'pkg/mod.py' is stored as 'pkg__mod.py'."""
    return relative_path.replace("/", "__")


def task_args(cluster: ClusterSettings) -> list[str]:
    """Our trainer learns sync/async from a flag; user scripts read TFK8S_TRAINING if they care."""
    if tuple(cluster.command) == DEFAULT_TRAINER and cluster.training == "sync":
        return ["--sync", *cluster.args]
    return list(cluster.args)


def tf_container(
    cluster: ClusterSettings,
    platform: PlatformFacts,
    env: list[Json],
    *,
    resources_spec: Resources,
    mount_data: bool,
    log_sub_path: str,
    serves: bool = True,
) -> Json:
    """The seed's /data and /log in every task: /log is this run's own directory of the user's log
    volume (`<experiment>/<cluster>`, which TensorBoard shows as the run's name), /data the user's
    data volume or the part of it `dataSubPath` names. Workers and chief also get the cluster's
    scratch volume at /scratch when it has one (its path in TFK8S_SCRATCH_DIR)."""
    port = platform.ports.tensorflow
    mounts: list[Json] = [
        {"name": "log", "mountPath": cs.LOG_DIR, "subPath": log_sub_path},
        {"name": "launcher", "mountPath": LAUNCHER_DIR + "/tfk8s_train", "readOnly": True},
        {"name": "code", "mountPath": CODE_DIR},
    ]
    if mount_data:
        data_mount: Json = {"name": "data", "mountPath": cs.DATA_DIR}
        if cluster.data_sub_path:
            data_mount["subPath"] = cluster.data_sub_path
        mounts.insert(0, data_mount)
        if cluster.scratch is not None:
            mounts.append({"name": "scratch", "mountPath": cs.SCRATCH_DIR})
            env = [*env, {"name": "TFK8S_SCRATCH_DIR", "value": cs.SCRATCH_DIR}]
    container: Json = {
        "name": "tensorflow",
        "image": cluster.image or platform.images.tensorflow,
        "command": ["python", LAUNCHER, "--", *cluster.command],
        "args": task_args(cluster),
        "workingDir": CODE_DIR,
        "env": env,
        "ports": [{"name": "grpc", "containerPort": port}],
        # The gRPC server listening is what makes a task usable by its peers.
        "resources": resources(resources_spec),
        "volumeMounts": mounts,
    }
    if serves:
        # A serving task is usable by its peers once its gRPC server listens. A chief is only a
        # client (nobody connects to it), so it has no probe.
        container["readinessProbe"] = {"tcpSocket": {"port": port}, "periodSeconds": 5}
    return container


def url_fetcher(cluster: ClusterSettings, platform: PlatformFacts) -> Json:
    """The seed's `curl script -o /opt/name.py`, as an init container that fails loudly."""
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
    }


def tf_pod_spec(
    cluster: ClusterSettings,
    platform: PlatformFacts,
    container: Json,
    pod_volumes: list[Json],
    *,
    restart_policy: str,
    subdomain: str | None = None,
    service_account: Any = None,
    workers: bool = False,
) -> Json:
    spec: Json = {
        "restartPolicy": restart_policy,
        "containers": [container],
        "volumes": pod_volumes,
        "affinity": avoid_user_node(platform.user_node.taint_key),
        "automountServiceAccountToken": service_account is not None,
    }
    if service_account is not None:
        spec["serviceAccountName"] = service_account
    if subdomain:
        spec["subdomain"] = subdomain
    if cluster.code.source == "url":
        spec["initContainers"] = [url_fetcher(cluster, platform)]
    if workers:
        if cluster.workers.node_selector:
            spec["nodeSelector"] = dict(cluster.workers.node_selector)
        if cluster.workers.tolerations:
            spec["tolerations"] = [dict(t) for t in cluster.workers.tolerations]
    return spec
