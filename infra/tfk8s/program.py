"""The Pulumi program: settings in, platform and per-user environments out, readiness exported."""

from __future__ import annotations

import gc
import os
from pathlib import Path
from typing import Any

import pulumi

from tfk8s import config, preflight, readiness
from tfk8s.code import CodeBundle, bundle, launcher_bundle
from tfk8s.settings import LAUNCHER_PACKAGE, ClusterSettings, Settings
from tfk8s.storage import SharedStorage
from tfk8s.training_cluster import TrainingCluster
from tfk8s.user_env import UserEnvironment, UserEnvironmentArgs
from tfk8s.user_node import UserNode

PROJECT_ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = PROJECT_ROOT / "training" / "master_client.ipynb"


def heketi_admin_key(settings: Settings) -> pulumi.Output[str] | None:
    if settings.platform.storage.backend != "glusterfs":
        return None
    if settings.platform.kubernetes_version is None:
        pulumi.log.warn(
            "storage.backend 'glusterfs' needs the in-tree kubernetes.io/glusterfs provisioner, removed in "
            "Kubernetes 1.26: set tfk8s:platform.kubernetesVersion so tfk8s can check, or use backend 'csi'"
        )
    return pulumi.Config(config.NAMESPACE).require_secret("heketiAdminKey")


def user_codes(settings: Settings, root: Path) -> dict[str, dict[str, CodeBundle | None]]:
    """Per user and cluster, the code directory to ship (None when the launcher package suffices)."""
    result: dict[str, dict[str, CodeBundle | None]] = {}
    for user in settings.users:
        result[user.name] = {}
        for c in user.clusters:
            shipped = c.code.source == "configmap" and c.code.path not in (None, LAUNCHER_PACKAGE)
            result[user.name][c.name] = bundle(root / c.code.path) if shipped and c.code.path else None
    return result


def build(settings: Settings, root: Path = PROJECT_ROOT) -> dict[str, Any]:
    """Declare every resource; return the components (tests inspect them)."""
    tokens = config.jupyter_tokens(settings)  # validated before anything is declared
    user_node = UserNode("user-node", settings.platform.user_node)
    storage = SharedStorage("storage", settings.platform, heketi_admin_key(settings))
    launcher = launcher_bundle(root)
    notebooks = {NOTEBOOK.name: NOTEBOOK.read_text(encoding="utf-8")} if NOTEBOOK.exists() else {}
    codes = user_codes(settings, root)
    envs = {
        user.name: UserEnvironment(
            user.name,
            UserEnvironmentArgs(
                user=user,
                platform=settings.platform,
                storage_class=storage.class_name,
                launcher=launcher,
                codes=codes[user.name],
                notebooks=notebooks,
                # The User Node's label and taint must exist before any pod is scheduled: user-facing
                # pods select the label, and the taint must already keep training pods off. Only
                # the workloads wait; namespaces, claims and ConfigMaps are created meanwhile.
                schedule_after=[user_node],
                node_checked=user_node.checked_taints,
                jupyter_token=tokens.get(user.name),
            ),
        )
        for user in settings.users
    }
    report = readiness_output(settings, user_node, envs)
    pulumi.export("ready", report.apply(lambda r: r["ready"]))
    pulumi.export("readiness", report)
    pulumi.export("clusterSpecs", {u: {c: env.clusters[c].spec for c in env.clusters} for u, env in envs.items()})
    pulumi.export("jupyterTokens", pulumi.Output.secret(pulumi.Output.all(**{u: e.jupyter_token for u, e in envs.items()})))
    return {"user_node": user_node, "storage": storage, "users": envs, "readiness": report}


def cluster_readiness(settings: ClusterSettings, cluster: TrainingCluster) -> pulumi.Output[dict[str, Any]]:
    chief_expected = cluster.chief_job is not None

    def report(status: dict[str, Any]) -> dict[str, Any]:
        return readiness.cluster_readiness(
            ps_expected=settings.ps.count,
            workers_expected=settings.workers.count,
            chief_expected=chief_expected,
            status=status,
        )

    return cluster.status.apply(report)


def readiness_output(settings: Settings, user_node: UserNode, envs: dict[str, UserEnvironment]) -> pulumi.Output[dict[str, Any]]:
    per_user = {}
    for user in settings.users:
        env = envs[user.name]
        apps = {
            app: pulumi.Output.all(deployment.status, service.spec, user_node.address).apply(
                lambda a: readiness.app_readiness(deployment_status=a[0], service_spec=a[1], address=a[2])
            )
            for app, (deployment, service) in (("jupyter", env.jupyter), ("tensorboard", env.tensorboard))
        }
        clusters = {c.name: cluster_readiness(c, env.clusters[c.name]) for c in user.clusters}
        per_user[user.name] = pulumi.Output.all(
            jupyter=apps["jupyter"], tensorboard=apps["tensorboard"], clusters=pulumi.Output.all(**clusters)
        )
    return pulumi.Output.all(**per_user).apply(readiness.stack_readiness)


# A stack keeps every Output and future alive until the program ends; with Python's default
# thresholds the cyclic GC rescans that growing heap again and again, which made program
# evaluation super-linear: 5.3 ms per resource at 4,504 resources, 3.1 ms with these thresholds
# and 2.5 ms with no collection at all (bench/program_eval.py). Programs are short-lived.
EVALUATION_GC_THRESHOLDS = (100_000, 50, 100)


def main() -> None:
    gc.set_threshold(*EVALUATION_GC_THRESHOLDS)
    # Presence only: reading a kubeconfig stored as a secret through Config.get would warn.
    kubeconfig_in_config = pulumi.runtime.get_config("kubernetes:kubeconfig") is not None
    server = preflight.check_cluster(os.environ, kubeconfig_in_config=kubeconfig_in_config)
    build(config.load(PROJECT_ROOT, server))
