"""`UserEnvironment`: one user's namespace, Jupyter Notebook, TensorBoard and training clusters.

Jupyter and TensorBoard run only on the User Node (they tolerate its taint and select its label)
and are exposed by NodePort Services with `externalTrafficPolicy: Local`, so their ports answer
on the User Node alone.
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from tfk8s import awaits, pods
from tfk8s.code import CodeBundle
from tfk8s.labels import labels, selector_of
from tfk8s.notebook import notebook_client
from tfk8s.settings import PlatformSettings, UserSettings
from tfk8s.training_cluster import TrainingCluster, TrainingClusterArgs

TOKEN_KEY = "token"


@dataclass(frozen=True, kw_only=True)
class UserEnvironmentArgs:
    user: UserSettings
    platform: PlatformSettings
    storage_class: pulumi.Input[str]
    launcher: CodeBundle
    codes: dict[str, CodeBundle | None]  # cluster name -> its code (None: launcher/trainer only)
    notebooks: dict[str, str]  # file name -> notebook JSON shipped into Jupyter's work dir
    schedule_after: Sequence[pulumi.Resource] = ()  # see TrainingClusterArgs.schedule_after
    # Resolves once the User Node may be patched (UserNode.checked_taints): the namespace, and so
    # everything in it, is not created on a node tfk8s would have to refuse.
    node_checked: pulumi.Output[Any] | None = None
    # The user's own Jupyter token (tfk8s:jupyterTokens, a secret); None: generated once.
    jupyter_token: pulumi.Output[str] | None = None


def tensorboard_logdir_spec(cluster_names: list[str]) -> str:
    """One TensorBoard run per cluster: `mnist:/logs/mnist,cifar:/logs/cifar`."""
    return ",".join(f"{name}:/logs/{name}" for name in cluster_names)


class UserEnvironment(pulumi.ComponentResource):
    jupyter_token: pulumi.Output[str]
    clusters: dict[str, TrainingCluster]

    def __init__(self, name: str, args: UserEnvironmentArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("tfk8s:index:UserEnvironment", name, None, opts)
        user, platform = args.user, args.platform
        self.schedule_after = args.schedule_after
        child = pulumi.ResourceOptions(parent=self)
        keep_data = any(c.volumes.keep_on_destroy for c in user.clusters)
        # Deleting a namespace deletes its claims: keep it when any of its claims are kept.
        self.namespace = k8s.core.v1.Namespace(
            name,
            metadata={
                "name": self._gated(f"{platform.namespace_prefix}{user.name}", args.node_checked),
                "labels": labels(user.name, "namespace"),
            },
            opts=pulumi.ResourceOptions(parent=self, retain_on_delete=keep_data),
        )
        ns = self.namespace.metadata.name

        # One copy of the trainer package per namespace, mounted by every cluster and Jupyter: it is
        # ~90 KB of source, and Pulumi keeps three copies of each ConfigMap's data in the state it
        # rewrites after every step, so a copy per cluster made large stacks CPU-bound in the engine.
        self.trainer_config = k8s.core.v1.ConfigMap(
            f"{name}-trainer",
            metadata={"namespace": ns, "labels": labels(user.name, "tensorflow", role="code")},
            data=args.launcher.config_map_data(),
            opts=child,
        )
        notebook_host = f"{name}-jupyter-tf:{platform.ports.tensorflow}"
        self.clusters = {}
        for c in user.clusters:
            self.clusters[c.name] = TrainingCluster(
                f"{user.name}-{c.name}",
                TrainingClusterArgs(
                    user=user.name,
                    cluster=c,
                    platform=platform,
                    namespace=ns,
                    storage_class=args.storage_class,
                    launcher=args.launcher,
                    launcher_config_map=self.trainer_config.metadata.name,
                    code=args.codes.get(c.name),
                    notebook_host=notebook_host if c.in_graph_client == "notebook" else None,
                    schedule_after=args.schedule_after,
                ),
                opts=child,
            )

        self._build_jupyter(name, args, ns)
        self._build_tensorboard(name, args, ns)
        self.register_outputs({"jupyter_token": self.jupyter_token})

    @staticmethod
    def _gated(value: str, gate: pulumi.Output[Any] | None) -> pulumi.Input[str]:
        return gate.apply(lambda _: value) if gate is not None else value

    def _build_jupyter(self, name: str, args: UserEnvironmentArgs, ns: pulumi.Output[str]) -> None:
        user, platform = args.user, args.platform
        child = pulumi.ResourceOptions(parent=self)
        # A chosen token is applied as configured (changing it rotates it). A generated one is made
        # once: later runs generate another value, but ignore_changes keeps the stored one, and the
        # exported token is read back from the Secret's state, so it never changes.
        chosen = args.jupyter_token
        token = chosen.apply(lambda t: base64.b64encode(t.encode()).decode()) if chosen is not None else None
        self.token_secret = k8s.core.v1.Secret(
            f"{name}-jupyter-token",
            metadata={"namespace": ns, "labels": labels(user.name, "jupyter")},
            data={TOKEN_KEY: token or pulumi.Output.secret(base64.b64encode(secrets.token_hex(24).encode()).decode())},
            opts=pulumi.ResourceOptions(
                parent=self,
                ignore_changes=[] if chosen is not None else ["data", "stringData"],
                additional_secret_outputs=["data"],
            ),
        )
        self.jupyter_token = pulumi.Output.secret(self.token_secret.data.apply(lambda d: base64.b64decode(d[TOKEN_KEY]).decode()))

        pod_labels = labels(user.name, "jupyter")
        driven = {
            c.name: self.clusters[c.name]
            for c in user.clusters
            if c.replication == "in-graph" and c.in_graph_client == "notebook"
        }
        client = notebook_client(driven, self.trainer_config.metadata.name, sorted(args.launcher.files))
        self.notebook_config = k8s.core.v1.ConfigMap(
            f"{name}-notebooks", metadata={"namespace": ns, "labels": pod_labels}, data=args.notebooks, opts=child
        )
        container = {
            "name": "jupyter",
            "image": platform.images.jupyter,
            "env": [
                {
                    "name": "JUPYTER_TOKEN",
                    "valueFrom": {"secretKeyRef": {"name": self.token_secret.metadata.name, "key": TOKEN_KEY}},
                },
                *client.env,
            ],
            "ports": [
                {"name": "http", "containerPort": platform.ports.jupyter},
                {"name": "grpc", "containerPort": platform.ports.tensorflow},
            ],
            "readinessProbe": {"httpGet": {"path": "/api", "port": "http"}, "periodSeconds": 5},
            "volumeMounts": [{"name": "notebooks", "mountPath": "/home/jovyan/work/tfk8s", "readOnly": True}, *client.mounts],
        }
        self.jupyter = self._user_facing_app(
            f"{name}-jupyter",
            "jupyter",
            user.name,
            ns,
            platform,
            container,
            [{"name": "notebooks", "configMap": {"name": self.notebook_config.metadata.name}}, *client.volumes],
            platform.ports.jupyter,
        )
        if driven:
            # The notebook is the in-graph chief: servers reach it by this name.
            k8s.core.v1.Service(
                f"{name}-jupyter-tf",
                metadata={"name": f"{name}-jupyter-tf", "namespace": ns, "labels": pod_labels},
                spec={"selector": selector_of(pod_labels), "ports": [{"name": "grpc", "port": platform.ports.tensorflow}]},
                opts=child,
            )

    def _build_tensorboard(self, name: str, args: UserEnvironmentArgs, ns: pulumi.Output[str]) -> None:
        user, platform = args.user, args.platform
        names = [c.name for c in user.clusters]
        container = {
            "name": "tensorboard",
            "image": platform.images.tensorboard,
            "command": [
                "tensorboard",
                "--logdir_spec",
                tensorboard_logdir_spec(names),
                "--bind_all",
                "--port",
                str(platform.ports.tensorboard),
            ],
            "ports": [{"name": "http", "containerPort": platform.ports.tensorboard}],
            "readinessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 5},
            "volumeMounts": [{"name": f"log-{n}", "mountPath": f"/logs/{n}", "readOnly": True} for n in names],
        }
        volumes = [
            {
                "name": f"log-{n}",
                "persistentVolumeClaim": {"claimName": self.clusters[n].log_claim.metadata.name, "readOnly": True},
            }
            for n in names
        ]
        self.tensorboard = self._user_facing_app(
            f"{name}-tensorboard", "tensorboard", user.name, ns, platform, container, volumes, platform.ports.tensorboard
        )

    def _user_facing_app(
        self,
        name: str,
        component: str,
        user: str,
        ns: pulumi.Output[str],
        platform: PlatformSettings,
        container: dict[str, Any],
        volumes: list[dict[str, Any]],
        port: int,
    ) -> tuple[k8s.apps.v1.Deployment, k8s.core.v1.Service]:
        pod_labels = labels(user, component)
        annotations = awaits.timeout(platform)
        deployment = k8s.apps.v1.Deployment(
            name,
            metadata={"namespace": ns, "labels": pod_labels, "annotations": annotations},
            spec={
                "replicas": 1,
                "selector": {"matchLabels": selector_of(pod_labels)},
                "template": {
                    "metadata": {"labels": pod_labels},
                    "spec": {
                        **pods.user_node_placement(platform),
                        "containers": [container],
                        "volumes": volumes,
                        "automountServiceAccountToken": False,
                    },
                },
            },
            # Its pods select the User Node's label: the patch must be there first.
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(self.schedule_after)),
        )
        service = k8s.core.v1.Service(
            name,
            metadata={"namespace": ns, "labels": pod_labels, "annotations": awaits.SERVICE_NO_AWAIT},
            # Local: the NodePort answers only on nodes running the pod, i.e. the User Node.
            spec={
                "type": "NodePort",
                "externalTrafficPolicy": "Local",
                "selector": selector_of(pod_labels),
                "ports": [{"name": "http", "port": port, "targetPort": "http"}],
            },
            opts=pulumi.ResourceOptions(parent=self),
        )
        return deployment, service
