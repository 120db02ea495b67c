"""The contracts between the three kinds of stack: what a platform publishes (its `platform` output)
for its tenants and their experiments, and what a tenant publishes (its `tenant` output) for its
experiments.

Written once: each stack builds its facts (platform_stack.facts, tenant_stack.facts) and exports
them dumped by alias; readers parse them back with the same model (a tenant its platform's output,
tfk8s.stack_kinds.ref; an experiment both from its tenant's ConfigMap, tfk8s.stack_kinds.tenant_contract). A stack may
rely on these facts and on nothing else of the stack it reads. Nothing here touches Pulumi.
"""

from __future__ import annotations

import typing
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic.alias_generators import to_camel

from tfk8s.kube.api_paths import ApiKind
from tfk8s.settings.monitoring import MonitoringSettings
from tfk8s.settings.platform import (
    ContainerDefaults,
    ImageSettings,
    NetworkSettings,
    PlacementSettings,
    PodSecuritySettings,
    PortSettings,
    Quota,
)
from tfk8s.settings.queueing import QueueingSettings
from tfk8s.settings.storage import StorageSettings
from tfk8s.settings.types import KubeVersion, Model, Positive, version_tuple


class Facts(Model):
    """Parsed leniently (`strict=False`): stack outputs travel as JSON numbers (2222.0); keys this
    version does not know are ignored, at every depth (docs/operations/releases.md, the window)."""

    model_config = ConfigDict(frozen=True, extra="ignore", alias_generator=to_camel, populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _known_keys_only(cls, data: Any) -> Any:
        # The settings nested here are the stack files' models, which refuse an unknown key (a typo in
        # a stack file must be an error). In facts a newer release published, it is a key this
        # release does not know: 0.3.0's readers refused a 0.4 platform's that way.
        return known_keys(cls, data)

    def published(self) -> dict[str, Any]:
        """The facts as a stack publishes them (an output, the tenant's contract ConfigMap): their
        aliases, as JSON; readers parse them back with the same model."""
        return self.model_dump(by_alias=True, mode="json")


class TenantFacts(Facts):
    """The tenant's published contract: what its experiments may rely on, and nothing else."""

    schema_version: Literal[1]
    release: str | None = None
    """The tfk8s release of the tenant stack that published these facts (tfk8s.release); None: one
    from before releases were recorded (0.3.0), which did not say."""
    platform_stack: str
    """The platform the tenant lives on, qualified (org/project/stack)."""
    owner: str
    """The owner annotation of the tenant's objects (tfk8s.specs.ownership): its namespace among them."""
    name: str
    """The tenant's user name: it labels every object of the tenant's experiments."""
    namespace: str
    data_claim: str
    log_claim: str
    notebook_host: str
    """host:port of the user's Jupyter as an in-graph chief (the notebook-driven clusters' client)."""
    jupyter_url: str | None = None
    tensorboard_url: str | None = None
    quota: Quota
    """The namespace's ResourceQuota, as applied (the platform's default with the tenant's own keys)."""


class UserNodeFacts(Model):
    name: str
    taint_key: str
    address: str | None = None
    """Where users reach the NodePorts: the configured address, else the node's from live status."""
    shared_with_training: bool = False
    """Training pods may run there too (platform.userNode.sharedWithTraining; absent, as from 0.3.0: no)."""


class PlatformKind(Model):
    """A kind the platform defines (tfk8s.components.guard): experiments create a Layout per cluster in their
    tenant's namespace (notebooks read them); each tenant registers as a cluster-wide Tenant."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{self.group}"

    @property
    def api(self) -> ApiKind:
        """Where the API serves the kind."""
        return ApiKind(kind=self.kind, api_version=self.api_version, plural=self.plural, namespaced=self.namespaced)


class PlatformFacts(Facts):
    """The platform's published contract: what a tenant or an experiment may rely on, and nothing else."""

    schema_version: Literal[1]
    release: str | None = None
    """The tfk8s release of the platform stack that published these facts (tfk8s.release); None:
    one from before releases were recorded (0.3.0), which did not say."""
    owner: str
    """The owner annotation of the platform's objects (tfk8s.specs.ownership)."""
    kubernetes_version: KubeVersion
    storage: StorageSettings
    """How the tenants' volumes are provisioned (no secret in it: those are the platform's own config)."""
    storage_class: str
    scratch_storage_class: str | None = None
    """Where experiments' scratch claims go (backends.scratch_class); None: none offered."""
    user_node: UserNodeFacts
    layouts: PlatformKind
    tenants: PlatformKind
    experimenter_role: str
    """The ClusterRole a tenant binds its identities to, in its namespace alone (tfk8s.specs.experimenter_rights)."""
    preview_role: str | None = None
    """The ClusterRole a tenant binds the pull requests' preview identity to, in its namespace alone
    (tfk8s.specs.preview_identity); None: the platform declares no preview identity."""
    namespace_prefix: str
    images: ImageSettings
    ports: PortSettings
    network: NetworkSettings = NetworkSettings()
    """The tenants' NetworkPolicies' parameters, the API server's addresses resolved (default: a
    platform published before policies existed)."""
    monitoring: MonitoringSettings = MonitoringSettings()
    """Where the platform's Prometheus runs: the training pods' policies let its pods in on the metrics
    port; `scrape` as resolved at the platform's `up` (default: a platform published before it existed,
    no monitoring)."""
    queueing: QueueingSettings = QueueingSettings()
    """Whether tenants queue their experiments in Kueue, in which cohort (default: a platform published
    before it existed, no queueing)."""
    pod_security: PodSecuritySettings
    """Who the pods run as: training pods take `tensorflow` (the namespace enforces `restricted`)."""
    allow_ps_gpus: bool
    tensorboard_requires_token: bool = True
    placement: PlacementSettings = PlacementSettings()
    """What experiments may tolerate and select (default: a platform published before it existed)."""
    await_timeout_seconds: Positive
    default_quota: Quota
    container_defaults: ContainerDefaults

    @property
    def version(self) -> tuple[int, int]:
        return version_tuple(self.kubernetes_version)

    def published(self) -> dict[str, Any]:
        """As Facts.published, without `queueing` while it is off and `previewRole` while there is
        none: a reader parses their absence back as such, and the contracts of platforms without them
        stay as they were."""
        out = super().published()
        if self.queueing == QueueingSettings():
            out.pop("queueing")
        if self.preview_role is None:
            out.pop("previewRole")
        return out


def known_keys(model: type[BaseModel], data: Any) -> Any:
    """`data` with only the keys `model` declares (by alias or name), and so on down its nested
    models: what a reader keeps of facts that a newer release published."""
    if not isinstance(data, dict):
        return data
    kept = {}
    for name, field in model.model_fields.items():
        for key in (field.alias or name, name):
            if key in data:
                kept[key] = _known_in(field.annotation, data[key])
                break
    return kept


def _known_in(annotation: Any, value: Any) -> Any:
    """`value` of a field typed `annotation`, its models' unknown keys dropped: a model, an optional
    model, or a tuple, list or dict of them. A union of several models is left to validation."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return known_keys(annotation, value)
    args = [arg for arg in typing.get_args(annotation) if arg is not Ellipsis]
    origin = typing.get_origin(annotation)
    if origin in (list, tuple) and isinstance(value, list) and len(set(args)) == 1:
        return [_known_in(args[0], item) for item in value]
    if origin is dict and isinstance(value, dict) and args:
        return {key: _known_in(args[-1], item) for key, item in value.items()}
    models = [arg for arg in args if isinstance(arg, type) and issubclass(arg, BaseModel)]
    return known_keys(models[0], value) if len(models) == 1 else value
