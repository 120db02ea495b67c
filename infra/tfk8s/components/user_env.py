"""`UserEnvironment` (tenant stack): one user's namespace, shared volumes, Jupyter and TensorBoard.

Jupyter and TensorBoard run only on the User Node (they tolerate its taint and select its label)
and are exposed by NodePort Services with `externalTrafficPolicy: Local`, so their ports answer
on the User Node alone. Both outlive experiments, which is why they see every experiment without
a platform redeploy:
  * TensorBoard reads the whole log volume: each run writes under `<experiment>/<cluster>`, so
    runs of finished and destroyed experiments stay listed;
  * Jupyter mounts the whole data and log volumes and reads the Layouts experiments create
    (tfk8s.specs.layout_document) with a service account that may only read Layouts here; the `jupyter-tf`
    Service is the address notebook-driven clusters name as their chief.
The namespace enforces the `restricted` Pod Security Standard, which every pod in it, these and the
experiments', passes (tfk8s.specs.pod_security). Its ResourceQuota bounds what the user's pods and claims
take together, and its LimitRange sizes containers that set no resources (tfk8s.specs.quota); Jupyter and
TensorBoard take the platform's container defaults explicitly.
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi

from tfk8s.components import tenant_admission
from tfk8s.components.storage import claim
from tfk8s.kube import awaits
from tfk8s.kube import objects as kube
from tfk8s.kube.api_paths import LIMIT_RANGE, NAMESPACE, NETWORK_POLICY, RESOURCE_QUOTA, SECRET
from tfk8s.schema.contract import PlatformFacts, PlatformKind
from tfk8s.schema.experiment import Resources
from tfk8s.schema.platform import TENSORBOARD_BACKEND_PORT, PodIdentity
from tfk8s.schema.tenant import TenantSettings
from tfk8s.specs import app_sessions, network_policy, pod_security, pods, quota, readiness
from tfk8s.specs.code import CodeBundle
from tfk8s.specs.labels import labels, selector_of
from tfk8s.specs.ownership import Claimed, Owner
from tfk8s.specs.pods import LAUNCHER_DIR

TOKEN_KEY = "token"
# The tenant's Jupyter token, under a fixed name: the tenant's own identities may read this one Secret
# (tfk8s.stacks.tenant), which is how a user gets the token; no stack exports it.
TOKEN_SECRET = "tfk8s-jupyter-token"
DATA_CLAIM, LOG_CLAIM = "tfk8s-data", "tfk8s-log"
NOTEBOOK_SERVICE = "jupyter-tf"
# Jupyter and TensorBoard, one replica each, both on the User Node (a tenant checks it has room).
USER_NODE_PODS_PER_USER = quota.TENANT_APP_PODS
# Where Jupyter mounts the user's volumes; layouts name directories relative to them.
NOTEBOOK_DATA_ROOT, NOTEBOOK_LOG_ROOT = "/data", "/logs"


@dataclass(frozen=True, kw_only=True)
class UserEnvironmentArgs:
    user: TenantSettings
    platform: PlatformFacts
    owner: Owner
    launcher: CodeBundle
    notebooks: dict[str, str]  # file name -> notebook JSON shipped into Jupyter's work dir
    # Created before anything in the namespace (the tenant's registration, tfk8s.components.guard).
    after: Sequence[pulumi.Resource] = ()
    # The tenant's own Jupyter token (tfk8s:jupyterToken, a secret); None: generated once.
    jupyter_token: pulumi.Output[str] | None = None


def namespace_name(platform: PlatformFacts, user: str) -> str:
    return f"{platform.namespace_prefix}{user}"


def fixed_objects(platform: PlatformFacts, user: TenantSettings, key: str) -> list[Claimed]:
    """What a UserEnvironment creates under fixed names: the namespace, and in it the namespace's
    quota, container defaults (tfk8s.specs.quota) and network policies (everything else of theirs is
    auto-named). `key` is where the tenant sits in the stack file (`tfk8s:tenant`)."""
    ns = namespace_name(platform, user.name)
    policies = network_policy.tenant_policies(user.name, platform.network, platform.ports)
    return [
        Claimed(kind=NAMESPACE, name=ns, key=f"{key}.name"),
        Claimed(kind=RESOURCE_QUOTA, namespace=ns, name=quota.QUOTA_NAME, key=f"{key}.quota"),
        Claimed(kind=LIMIT_RANGE, namespace=ns, name=quota.LIMIT_RANGE_NAME, key=f"{key}.name"),
        Claimed(kind=SECRET, namespace=ns, name=TOKEN_SECRET, key=f"{key}.name"),
        *(Claimed(kind=NETWORK_POLICY, namespace=ns, name=n, key=f"{key}.name") for n in policies),
    ]


def _loopback_probe(port: int) -> dict[str, Any]:
    """Ready once an HTTP server answers on the pod's loopback at `port`. The kubelet's own probes
    (httpGet, tcpSocket) dial the pod's IP, where a server behind the token gate never listens:
    this asks from inside the container (whose image has Python) instead."""
    ask = f"import urllib.request; urllib.request.urlopen('http://127.0.0.1:{port}/', timeout=4)"
    return {"exec": {"command": ["python", "-c", ask]}, "periodSeconds": 5, "timeoutSeconds": 5}


class UserEnvironment(pulumi.ComponentResource):
    jupyter_token: pulumi.Output[str]
    # Where the user's apps answer: their NodePorts on the User Node (None while either is unknown).
    jupyter_url: pulumi.Output[str | None]
    tensorboard_url: pulumi.Output[str | None]
    readiness: pulumi.Output[dict[str, Any]]

    def __init__(self, name: str, args: UserEnvironmentArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("tfk8s:index:UserEnvironment", name, None, opts)
        user, platform = args.user, args.platform
        self.args = args
        child = pulumi.ResourceOptions(parent=self)
        keep = user.volumes.keep_on_destroy
        assert platform.version is not None  # resolved by context_checks.check_platform
        # Deleting a namespace deletes its claims (and every experiment in it): keep it with the data.
        # Its Pod Security labels make the API server refuse any pod in it that is not `restricted`.
        self.namespace = kube.Namespace(
            name,
            metadata={
                "name": namespace_name(platform, user.name),
                "labels": {
                    **labels(user.name, "namespace"),
                    **pod_security.namespace_labels(platform.version),
                    # Under the platform's admission policies (tfk8s.components.tenant_admission).
                    **tenant_admission.namespace_labels(platform.layouts.group),
                    **args.owner.labels(),
                },
                "annotations": args.owner.annotations(),
            },
            opts=pulumi.ResourceOptions(parent=self, retain_on_delete=keep, depends_on=list(args.after)),
        )
        ns = self.namespace.name
        self._build_quota(name, args, ns)
        self._build_network_policies(name, args, ns)
        self.claims = {
            purpose: claim(
                f"{name}-{purpose}",
                claim_name=claim_name,
                namespace=ns,
                size=size,
                class_name=platform.storage_class,
                user=user.name,
                purpose=purpose,
                keep=keep,
                storage=platform.storage,
                await_timeout_seconds=platform.await_timeout_seconds,
                owner=args.owner,
                parent=self,
            )[0]
            for purpose, claim_name, size in (
                ("data", DATA_CLAIM, user.volumes.data_size),
                ("log", LOG_CLAIM, user.volumes.log_size),
            )
        }
        # The trainer package for notebooks; experiments ship their own copy (their code may be newer).
        self.trainer_config = kube.ConfigMap(
            f"{name}-trainer",
            metadata=self._meta(ns, labels(user.name, "jupyter", role="code")),
            data=args.launcher.config_map_data(),
            opts=child,
        )
        self._build_jupyter(name, args, ns)
        self._build_tensorboard(name, args, ns)
        address = pulumi.Output.from_input(platform.user_node.address)

        def url(service: kube.Service) -> pulumi.Output[str | None]:
            return pulumi.Output.all(service.spec, address).apply(lambda a: readiness.app_url(service_spec=a[0], address=a[1]))

        self.jupyter_url, self.tensorboard_url = url(self.jupyter[1]), url(self.tensorboard[1])
        apps = {
            app: pulumi.Output.all(deployment.status, service.spec, address).apply(
                lambda a: readiness.app_readiness(deployment_status=a[0], service_spec=a[1], address=a[2])
            )
            for app, (deployment, service) in (("jupyter", self.jupyter), ("tensorboard", self.tensorboard))
        }
        volumes = pulumi.Output.all(**{p: c.status for p, c in self.claims.items()}).apply(readiness.volumes_readiness)
        self.readiness = pulumi.Output.all(volumes=volumes, **apps)
        self.register_outputs(
            {
                "jupyter_token": self.jupyter_token,
                "jupyter_url": self.jupyter_url,
                "tensorboard_url": self.tensorboard_url,
                "readiness": self.readiness,
            }
        )

    def _meta(
        self, ns: pulumi.Input[str], own_labels: dict[str, str], *, annotations: dict[str, str] | None = None, **extra: Any
    ) -> dict[str, Any]:
        return {
            "namespace": ns,
            "labels": {**own_labels, **self.args.owner.labels()},
            "annotations": {**(annotations or {}), **self.args.owner.annotations()},
            **extra,
        }

    def _build_quota(self, name: str, args: UserEnvironmentArgs, ns: pulumi.Output[str]) -> None:
        """The namespace's ResourceQuota and LimitRange (tfk8s.specs.quota). The LimitRange sizes containers
        that set no resources (a user's own pods): without it the quota would refuse them."""
        child = pulumi.ResourceOptions(parent=self)
        own_labels = labels(args.user.name, "quota")
        self.resource_quota = kube.ResourceQuota(
            f"{name}-quota",
            metadata=self._meta(ns, own_labels, name=quota.QUOTA_NAME),
            spec=quota.resource_quota_spec(args.user.effective_quota(args.platform.default_quota)),
            opts=child,
        )
        self.limit_range = kube.LimitRange(
            f"{name}-container-defaults",
            metadata=self._meta(ns, own_labels, name=quota.LIMIT_RANGE_NAME),
            spec=quota.limit_range_spec(args.platform.container_defaults),
            opts=child,
        )

    def _build_network_policies(self, name: str, args: UserEnvironmentArgs, ns: pulumi.Output[str]) -> None:
        """Deny by default, then what the namespace's pods need (tfk8s.specs.network_policy); each training
        cluster adds its own. Before the apps and volumes: no pod of the namespace starts unshielded."""
        own_labels = labels(args.user.name, "network")
        self.network_policies = [
            kube.NetworkPolicy(
                f"{name}-{policy_name}",
                metadata=self._meta(ns, own_labels, name=policy_name),
                spec=spec,
                opts=pulumi.ResourceOptions(parent=self),
            )
            for policy_name, spec in network_policy.tenant_policies(
                args.user.name, args.platform.network, args.platform.ports
            ).items()
        ]

    def _build_jupyter(self, name: str, args: UserEnvironmentArgs, ns: pulumi.Output[str]) -> None:
        user, platform = args.user, args.platform
        child = pulumi.ResourceOptions(parent=self)
        # A chosen token is applied as configured (changing it rotates it). A generated one is made
        # once: later runs generate another value, but ignore_changes keeps the stored one, and the
        # exported token is read back from the Secret's state, so it never changes.
        chosen = args.jupyter_token
        token = chosen.apply(lambda t: base64.b64encode(t.encode()).decode()) if chosen is not None else None
        self.token_secret = kube.Secret(
            f"{name}-jupyter-token",
            metadata=self._meta(ns, labels(user.name, "jupyter"), name=TOKEN_SECRET),
            data={TOKEN_KEY: token or pulumi.Output.secret(base64.b64encode(secrets.token_hex(24).encode()).decode())},
            opts=pulumi.ResourceOptions(
                parent=self,
                ignore_changes=[] if chosen is not None else ["data", "stringData"],
                additional_secret_outputs=["data"],
            ),
        )
        self.jupyter_token = pulumi.Output.secret(self.token_secret.data.apply(lambda d: base64.b64decode(d[TOKEN_KEY]).decode()))
        pod_labels = labels(user.name, "jupyter")
        self._build_layout_reader(name, ns, pod_labels, platform.layouts)
        self.notebook_config = kube.ConfigMap(
            f"{name}-notebooks", metadata=self._meta(ns, pod_labels), data=args.notebooks, opts=child
        )
        # The tenant's session cookie and where the token comes from (tfk8s.specs.app_sessions).
        self.jupyter_server_config = kube.ConfigMap(
            f"{name}-jupyter-config",
            metadata=self._meta(ns, pod_labels),
            data=app_sessions.jupyter_config_files(user.name),
            opts=child,
        )
        container = {
            "name": "jupyter",
            "image": platform.images.jupyter,
            "env": [
                *app_sessions.jupyter_env(),
                # The docker-stacks images listen where JUPYTER_PORT says: the Service's and probe's port.
                {"name": "JUPYTER_PORT", "value": str(platform.ports.jupyter)},
                {"name": "PYTHONPATH", "value": LAUNCHER_DIR},
                {"name": "TFK8S_DATA_ROOT", "value": NOTEBOOK_DATA_ROOT},
                {"name": "TFK8S_LOG_ROOT", "value": NOTEBOOK_LOG_ROOT},
                {"name": "TFK8S_LAYOUT_API", "value": platform.layouts.api.root},
            ],
            "ports": [
                {"name": "http", "containerPort": platform.ports.jupyter},
                {"name": "grpc", "containerPort": platform.ports.tensorflow},
            ],
            "readinessProbe": {"httpGet": {"path": "/api", "port": "http"}, "periodSeconds": 5},
            # A writable root filesystem: Jupyter writes into its home (runtime files, ~/.local, pip
            # installs, the notebooks users save), which the image keeps on it. `restricted` does
            # not ask for a read-only root.
            "securityContext": pod_security.container_security_context(read_only_root=False),
            "volumeMounts": [
                {"name": "notebooks", "mountPath": "/home/jovyan/work/tfk8s", "readOnly": True},
                {"name": "tfk8s-train", "mountPath": f"{LAUNCHER_DIR}/tfk8s_train", "readOnly": True},
                # Data read-only: data sets are shared by every experiment of the user.
                {"name": "data", "mountPath": NOTEBOOK_DATA_ROOT, "readOnly": True},
                # Logs writable: the notebook, as an in-graph chief, writes its run's results and done marker.
                {"name": "log", "mountPath": NOTEBOOK_LOG_ROOT},
                *app_sessions.jupyter_mounts(),
            ],
        }
        volumes = [
            {"name": "notebooks", "configMap": {"name": self.notebook_config.name}},
            self._trainer_volume(args),
            {"name": "data", "persistentVolumeClaim": {"claimName": self.claims["data"].name, "readOnly": True}},
            {"name": "log", "persistentVolumeClaim": {"claimName": self.claims["log"].name}},
            *app_sessions.jupyter_volumes(
                config_map=self.jupyter_server_config.name, secret=self.token_secret.name, key=TOKEN_KEY
            ),
        ]
        self.jupyter = self._user_facing_app(
            f"{name}-jupyter",
            "jupyter",
            user.name,
            ns,
            platform,
            [container],
            volumes,
            platform.ports.jupyter,
            identity=platform.pod_security.jupyter,
            service_account=self.layout_reader.name,
        )
        # The notebook is the in-graph chief of notebook-driven clusters: their servers reach it here.
        self.notebook_service = kube.Service(
            f"{name}-jupyter-tf",
            metadata=self._meta(ns, pod_labels, name=NOTEBOOK_SERVICE, annotations=awaits.SERVICE_NO_AWAIT),
            spec={"selector": selector_of(pod_labels), "ports": [{"name": "grpc", "port": platform.ports.tensorflow}]},
            opts=child,
        )

    def _build_layout_reader(self, name: str, ns: pulumi.Output[str], pod_labels: dict[str, str], kind: PlatformKind) -> None:
        """Jupyter's identity: it may read the Layouts in the user's namespace, nothing else."""
        child = pulumi.ResourceOptions(parent=self)
        self.layout_reader = kube.ServiceAccount(f"{name}-jupyter", metadata=self._meta(ns, pod_labels), opts=child)
        role = kube.Role(
            f"{name}-jupyter-layouts",
            metadata=self._meta(ns, pod_labels),
            # `list` alone: what tfk8s_train.layouts asks for.
            rules=[{"apiGroups": [kind.group], "resources": [kind.plural], "verbs": ["list"]}],
            opts=child,
        )
        kube.RoleBinding(
            f"{name}-jupyter-layouts",
            metadata=self._meta(ns, pod_labels),
            role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role.name},
            subjects=[{"kind": "ServiceAccount", "name": self.layout_reader.name, "namespace": ns}],
            opts=child,
        )

    def _build_tensorboard(self, name: str, args: UserEnvironmentArgs, ns: pulumi.Output[str]) -> None:
        user, platform = args.user, args.platform
        gated = platform.tensorboard_requires_token
        # The whole log volume: every run of every experiment, named `<experiment>/<cluster>/...`.
        # A read-only root filesystem: TensorBoard writes only temporary files, in /tmp (its HOME).
        # TensorBoard has no authentication: gated, it listens on the pod's loopback alone and the
        # gate in front of it (tfk8s_train.token_gate) asks for the tenant's token.
        listen = (
            ["--host", "127.0.0.1", "--port", str(TENSORBOARD_BACKEND_PORT)]
            if gated
            else ["--bind_all", "--port", str(platform.ports.tensorboard)]
        )
        board = {
            "name": "tensorboard",
            "image": platform.images.tensorboard,
            "command": ["tensorboard", "--logdir", NOTEBOOK_LOG_ROOT, *listen],
            "env": [pod_security.home_in_tmp()],
            "ports": [
                {
                    "name": "tensorboard" if gated else "http",
                    "containerPort": TENSORBOARD_BACKEND_PORT if gated else platform.ports.tensorboard,
                }
            ],
            "readinessProbe": _loopback_probe(TENSORBOARD_BACKEND_PORT)
            if gated
            else {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 5},
            "securityContext": pod_security.container_security_context(read_only_root=True),
            "volumeMounts": [
                {"name": "log", "mountPath": NOTEBOOK_LOG_ROOT, "readOnly": True},
                pod_security.writable_tmp_mount(),
            ],
        }
        volumes = [
            {"name": "log", "persistentVolumeClaim": {"claimName": self.claims["log"].name, "readOnly": True}},
            pod_security.writable_tmp_volume(),
        ]
        containers = [board]
        if gated:
            containers.append(self._token_gate(user.name, platform))
            volumes.append(self._trainer_volume(args))
        self.tensorboard = self._user_facing_app(
            f"{name}-tensorboard",
            "tensorboard",
            user.name,
            ns,
            platform,
            containers,
            volumes,
            platform.ports.tensorboard,
            # The TensorFlow image's, like the training pods' that write the logs it reads.
            identity=platform.pod_security.tensorflow,
        )

    def _trainer_volume(self, args: UserEnvironmentArgs) -> dict[str, Any]:
        """The trainer package (`tfk8s-train`), for Jupyter and the TensorBoard gate."""
        files = pods.ConfigMapFiles(name=self.trainer_config.name, files=tuple(sorted(args.launcher.files)))
        return {"name": "tfk8s-train", **files.volume_source()}

    def _token_gate(self, tenant: str, platform: PlatformFacts) -> dict[str, Any]:
        """The gate users reach TensorBoard through: the tenant's Jupyter token, or 401."""
        return {
            "name": "token-gate",
            "image": platform.images.tensorboard,  # any Python 3 does; this one is already pulled
            "command": ["python", "-m", "tfk8s_train.token_gate"],
            "args": app_sessions.gate_args(
                tenant, listen=platform.ports.tensorboard, backend=f"127.0.0.1:{TENSORBOARD_BACKEND_PORT}"
            ),
            "env": [
                {
                    "name": "TFK8S_TOKEN",
                    "valueFrom": {"secretKeyRef": {"name": self.token_secret.name, "key": TOKEN_KEY}},
                },
                {"name": "PYTHONPATH", "value": LAUNCHER_DIR},
                pod_security.home_in_tmp(),
            ],
            "ports": [{"name": "http", "containerPort": platform.ports.tensorboard}],
            # TCP: every HTTP request without the token is a 401 by design.
            "readinessProbe": {"tcpSocket": {"port": "http"}, "periodSeconds": 5},
            "resources": pods.resources(Resources(cpu=quota.TOKEN_GATE_CPU, memory=quota.TOKEN_GATE_MEMORY)),
            "securityContext": pod_security.container_security_context(read_only_root=True),
            "volumeMounts": [
                {"name": "tfk8s-train", "mountPath": f"{LAUNCHER_DIR}/tfk8s_train", "readOnly": True},
                pod_security.writable_tmp_mount(),
            ],
        }

    def _user_facing_app(
        self,
        name: str,
        component: str,
        user: str,
        ns: pulumi.Output[str],
        platform: PlatformFacts,
        containers: list[dict[str, Any]],
        volumes: list[dict[str, Any]],
        port: int,
        *,
        identity: PodIdentity,
        service_account: pulumi.Input[str] | None = None,
    ) -> tuple[kube.Deployment, kube.Service]:
        pod_labels = labels(user, component)
        # Sized explicitly, as the namespace's LimitRange would: every container states what it takes
        # (the policy pack's container-resources rule), and the quota counts it.
        defaults = platform.container_defaults
        sized = pods.resources(Resources(cpu=defaults.cpu, memory=defaults.memory))
        containers = [{**c, "resources": c.get("resources") or sized} for c in containers]
        # Only Jupyter, which reads Layouts, talks to the API server.
        account: dict[str, Any] = (
            {"serviceAccountName": service_account, "automountServiceAccountToken": True}
            if service_account is not None
            else {"automountServiceAccountToken": False}
        )
        deployment = kube.Deployment(
            name,
            metadata=self._meta(ns, pod_labels, annotations=awaits.timeout(platform.await_timeout_seconds)),
            spec={
                "replicas": 1,
                "selector": {"matchLabels": selector_of(pod_labels)},
                "template": {
                    "metadata": {"labels": pod_labels},
                    "spec": {
                        **pods.user_node_placement(platform.user_node.taint_key),
                        "securityContext": pod_security.pod_security_context(identity),
                        "containers": containers,
                        "volumes": volumes,
                        **account,
                    },
                },
            },
            # The quota's LimitRange first (a pod in a namespace with a quota needs it there), and no
            # pod of the namespace starts before its network policies.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.limit_range, *self.network_policies]),
        )
        service = kube.Service(
            name,
            metadata=self._meta(ns, pod_labels, annotations=awaits.SERVICE_NO_AWAIT),
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
