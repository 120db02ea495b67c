"""`UserEnvironment` (tenant stack): one user's namespace, shared volumes, Jupyter and TensorBoard,
and what the user's identities may do there.

Jupyter and TensorBoard run only on the User Node and answer on its NodePorts alone
(tfk8s.specs.user_apps). Both outlive experiments, which is why they see every experiment without
a platform redeploy:
  * TensorBoard reads the whole log volume: each run writes under `<experiment>/<cluster>`, so
    runs of finished and destroyed experiments stay listed;
  * Jupyter mounts the whole data and log volumes and reads the Layouts experiments create
    (tfk8s.specs.layout_document) with a service account that may only read Layouts here; the `jupyter-tf`
    Service is the address notebook-driven clusters name as their chief.
The namespace enforces the `restricted` Pod Security Standard, which every pod in it, these and the
experiments', passes (tfk8s.specs.pod_security). Its ResourceQuota bounds what the user's pods and claims
take together, and its LimitRange sizes containers that set no resources (tfk8s.specs.quota); Jupyter and
TensorBoard take the platform's container defaults explicitly. The user's identities get the platform's
experimenter role here alone, and may read their Jupyter token (tfk8s.specs.tenant_access); the
environment publishes the contract its owner gives it (the tenant stack's, for its experiments).
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi

from tfk8s.components import namespace_bounds
from tfk8s.components.storage import claim
from tfk8s.kube import awaits
from tfk8s.kube import objects as kube
from tfk8s.settings.contract import PlatformFacts, PlatformKind
from tfk8s.settings.platform import PodIdentity
from tfk8s.settings.tenant import TenantSettings
from tfk8s.specs import (
    app_sessions,
    pod_security,
    pods,
    quota,
    readiness,
    tenant_admission,
    user_apps,
)
from tfk8s.specs.code import CodeBundle, trainer_archive
from tfk8s.specs.fixed_names import namespace_name
from tfk8s.specs.labels import labels, selector_of
from tfk8s.specs.ownership import Owner

# The tenant's Jupyter token, under a fixed name: the tenant's own identities may read this one Secret
# (tfk8s.components.namespace_bounds.declare_access), which is how a user gets the token (and
# `tfk8s status`); no stack exports it.
TOKEN_SECRET, TOKEN_KEY = app_sessions.TOKEN_SECRET, app_sessions.TOKEN_KEY
DATA_CLAIM, LOG_CLAIM = "tfk8s-data", "tfk8s-log"
NOTEBOOK_SERVICE = "jupyter-tf"
# Jupyter and TensorBoard, one replica each, both on the User Node (a tenant checks it has room).
USER_NODE_PODS_PER_USER = quota.TENANT_APP_PODS


@dataclass(frozen=True, kw_only=True)
class PublishedContract:
    """A ConfigMap the environment publishes in its namespace under a fixed `name`, its data made from
    where the user's apps answer: the tenant's contract for its experiments (tfk8s.stack_kinds.tenant_contract)."""

    name: str
    data: Callable[[str | None, str | None], Mapping[str, str]]  # (jupyter_url, tensorboard_url) -> data


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
    # None: the environment publishes no contract.
    contract: PublishedContract | None = None


class UserEnvironment(pulumi.ComponentResource):
    jupyter_token: pulumi.Output[str]
    # Where the user's apps answer: their NodePorts on the User Node (None while either is unknown).
    jupyter_url: pulumi.Output[str | None]
    tensorboard_url: pulumi.Output[str | None]
    readiness: pulumi.Output[dict[str, Any]]

    def __init__(self, name: str, args: UserEnvironmentArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("tfk8s:index:UserEnvironment", name, None, opts)
        self.args = args
        self.namespace = self._build_namespace(name, args)
        ns = self.namespace.name
        bounded = (args.user, args.platform, args.owner, ns, self)
        self.resource_quota, self.limit_range = namespace_bounds.declare_quota(name, *bounded)
        self.network_policies = namespace_bounds.declare_network_policies(name, *bounded)
        self.claims = self._build_claims(name, args, ns)
        self.trainer_config = self._build_trainer(name, args, ns)
        self._build_jupyter(name, args, ns)
        self._build_tensorboard(name, args, ns)
        self._readiness(args)
        self.access = namespace_bounds.declare_access(*bounded, token_secret=TOKEN_SECRET)
        self._build_contract(args, ns)
        self.register_outputs(
            {
                "jupyter_token": self.jupyter_token,
                "jupyter_url": self.jupyter_url,
                "tensorboard_url": self.tensorboard_url,
                "readiness": self.readiness,
            }
        )

    def _build_namespace(self, name: str, args: UserEnvironmentArgs) -> kube.Namespace:
        """Deleting a namespace deletes its claims (and every experiment in it): kept with the data.
        Its Pod Security labels make the API server refuse any pod in it that is not `restricted`."""
        user, platform = args.user, args.platform
        assert platform.version is not None  # resolved by context_checks.check_platform
        return kube.Namespace(
            name,
            metadata={
                "name": namespace_name(platform, user.name),
                "labels": {
                    **labels(user.name, "namespace"),
                    **pod_security.namespace_labels(platform.version),
                    # Under the platform's admission policies (tfk8s.specs.tenant_admission).
                    **tenant_admission.namespace_labels(platform.layouts.group),
                    **args.owner.labels(),
                },
                "annotations": args.owner.annotations(),
            },
            opts=pulumi.ResourceOptions(
                parent=self, retain_on_delete=args.user.volumes.keep_on_destroy, depends_on=list(args.after)
            ),
        )

    def _build_claims(self, name: str, args: UserEnvironmentArgs, ns: pulumi.Input[str]) -> dict[str, kube.PersistentVolumeClaim]:
        """The user's data and log volumes (ReadWriteMany), kept on destroy when the settings say so."""
        user, platform = args.user, args.platform
        return {
            purpose: claim(
                f"{name}-{purpose}",
                claim_name=claim_name,
                namespace=ns,
                size=size,
                class_name=platform.storage_class,
                user=user.name,
                purpose=purpose,
                keep=user.volumes.keep_on_destroy,
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

    def _build_trainer(self, name: str, args: UserEnvironmentArgs, ns: pulumi.Input[str]) -> kube.ConfigMap:
        """The trainer package for notebooks and the TensorBoard gate (experiments ship their own
        copy: their code may be newer), as experiments ship theirs: one zip archive (~97 KB in
        base64) instead of its sources (~200 KB), which Pulumi kept three copies of (600 of a
        tenant's 830 KB of state), rewrote at every checkpoint of a tenant's `up` and checked and
        diffed at every command (docs/benchmarks.md "A fleet"). The digest of the sources is in the
        resource's name: new sources are a new ConfigMap, and a rollout of both apps, never an update
        of this one, which `ignore_changes` would skip (deflate's bytes depend on the zlib Python
        links: tfk8s.specs.code.CodeBundle.zipped)."""
        return kube.ConfigMap(
            f"{name}-trainer-{args.launcher.digest[:10]}",
            metadata=self._meta(ns, labels(args.user.name, "jupyter", role="code")),
            binary_data=trainer_archive(args.launcher),
            immutable=True,
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=["binaryData"]),
        )

    def _readiness(self, args: UserEnvironmentArgs) -> None:
        """The apps' URLs on the User Node, and the readiness of the volumes and both apps, from live status."""
        address = pulumi.Output.from_input(args.platform.user_node.address)

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

    def _meta(self, ns: pulumi.Input[str], own_labels: dict[str, str], **more: Any) -> dict[str, Any]:
        return namespace_bounds.metadata(self.args.owner, ns, own_labels, **more)

    def _build_contract(self, args: UserEnvironmentArgs, ns: pulumi.Output[str]) -> None:
        """The contract its owner publishes here (logical name `contract`, as first declared: one per program)."""
        self.contract: kube.ConfigMap | None = None
        published = args.contract
        if published is None:
            return
        urls = pulumi.Output.all(self.jupyter_url, self.tensorboard_url)
        self.contract = kube.ConfigMap(
            "contract",
            metadata=self._meta(ns, labels(args.user.name, "tenant"), name=published.name),
            data=urls.apply(lambda u: dict(published.data(u[0], u[1]))),
            opts=pulumi.ResourceOptions(parent=self),
        )

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
        volumes = [
            {"name": "notebooks", "configMap": {"name": self.notebook_config.name}},
            self._trainer_volume(),
            {"name": "data", "persistentVolumeClaim": {"claimName": self.claims["data"].name, "readOnly": True}},
            {"name": "log", "persistentVolumeClaim": {"claimName": self.claims["log"].name}},
            *app_sessions.jupyter_volumes(
                config_map=self.jupyter_server_config.name, secret=self.token_secret.name, key=TOKEN_KEY
            ),
        ]
        self.jupyter = self._user_facing_app(
            f"{name}-jupyter",
            pod_labels,
            ns,
            platform,
            [user_apps.jupyter_container(platform)],
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
        containers = [user_apps.tensorboard_container(platform)]
        volumes = [
            {"name": "log", "persistentVolumeClaim": {"claimName": self.claims["log"].name, "readOnly": True}},
            pod_security.writable_tmp_volume(),
        ]
        if platform.tensorboard_requires_token:
            containers.append(user_apps.token_gate(user.name, platform, self.token_secret.name, TOKEN_KEY))
            volumes.append(self._trainer_volume())
        self.tensorboard = self._user_facing_app(
            f"{name}-tensorboard",
            labels(user.name, "tensorboard"),
            ns,
            platform,
            containers,
            volumes,
            platform.ports.tensorboard,
            # The TensorFlow image's, like the training pods' that write the logs it reads.
            identity=platform.pod_security.tensorflow,
        )

    def _trainer_volume(self) -> dict[str, Any]:
        """The trainer package (`tfk8s-train`), for Jupyter and the TensorBoard gate."""
        files = pods.ConfigMapFiles(name=self.trainer_config.name, files=(pods.TRAINER_ARCHIVE,))
        return {"name": user_apps.TRAINER_VOLUME, **files.volume_source()}

    def _user_facing_app(
        self,
        name: str,
        pod_labels: dict[str, str],
        ns: pulumi.Output[str],
        platform: PlatformFacts,
        containers: list[dict[str, Any]],
        volumes: list[dict[str, Any]],
        port: int,
        *,
        identity: PodIdentity,
        service_account: pulumi.Input[str] | None = None,
    ) -> tuple[kube.Deployment, kube.Service]:
        """A Deployment on the User Node and its NodePort Service (tfk8s.specs.user_apps)."""
        spec = user_apps.deployment_spec(
            pod_labels, platform, containers, volumes, identity=identity, service_account=service_account
        )
        deployment = kube.Deployment(
            name,
            metadata=self._meta(ns, pod_labels, annotations=awaits.timeout(platform.await_timeout_seconds)),
            spec=spec,
            # The quota's LimitRange first (a pod in a namespace with a quota needs it there), and no
            # pod of the namespace starts before its network policies.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.limit_range, *self.network_policies]),
        )
        service = kube.Service(
            name,
            metadata=self._meta(ns, pod_labels, annotations=awaits.SERVICE_NO_AWAIT),
            spec=user_apps.node_port_spec(pod_labels, port),
            opts=pulumi.ResourceOptions(parent=self),
        )
        return deployment, service
