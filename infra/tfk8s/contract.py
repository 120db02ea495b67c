"""The platform's contract: what a platform stack publishes (its `platform` output) and experiments read.

Written once: the platform builds `PlatformFacts` (platform_stack.facts) and exports it dumped by
alias; experiments parse that output back with it (platform_ref). An experiment may rely on these
facts and on nothing else of its platform. Nothing here touches Pulumi.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict
from pydantic.alias_generators import to_camel

from tfk8s.api_paths import ApiKind
from tfk8s.schema_platform import ImageSettings, PodSecuritySettings, PortSettings
from tfk8s.schema_types import KubeVersion, Model, Positive, version_tuple


class UserFacts(Model):
    namespace: str
    data_claim: str
    log_claim: str
    notebook_host: str
    """host:port of the user's Jupyter as an in-graph chief (the notebook-driven clusters' client)."""
    jupyter_url: str | None = None
    tensorboard_url: str | None = None


class UserNodeFacts(Model):
    taint_key: str


class LayoutKind(Model):
    """The platform's own Layout kind (tfk8s.guard): experiments create one per cluster, notebooks read them."""

    group: str
    version: str
    kind: str
    plural: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{self.group}"

    @property
    def api(self) -> ApiKind:
        """Where the API serves Layouts: they live in the users' namespaces."""
        return ApiKind(kind=self.kind, api_version=self.api_version, plural=self.plural, namespaced=True)


class PlatformFacts(Model):
    """The platform's published contract: what an experiment may rely on, and nothing else.

    Parsed leniently (`strict=False`): stack outputs travel as JSON numbers (2222.0); keys this
    version does not know are ignored.
    """

    model_config = ConfigDict(frozen=True, extra="ignore", alias_generator=to_camel, populate_by_name=True)

    schema_version: Literal[1]
    owner: str
    """The owner annotation of the platform's objects (tfk8s.ownership)."""
    kubernetes_version: KubeVersion
    storage_class: str
    scratch_storage_class: str | None = None
    """Where experiments' scratch claims go (backends.scratch_class); None: none offered."""
    user_node: UserNodeFacts
    layouts: LayoutKind
    images: ImageSettings
    ports: PortSettings
    pod_security: PodSecuritySettings
    """Who the pods run as: training pods take `tensorflow` (the namespace enforces `restricted`)."""
    allow_ps_gpus: bool
    await_timeout_seconds: Positive
    users: dict[str, UserFacts]

    @property
    def version(self) -> tuple[int, int]:
        return version_tuple(self.kubernetes_version)
