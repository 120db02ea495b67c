"""The schema of a platform's monitoring (`platform.monitoring`): where its Prometheus runs and how it
scrapes training tasks (docs/guide/monitoring.md). Nothing here touches Pulumi."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from tfk8s.settings.types import (
    Duration,
    LabelKey,
    LabelValue,
    Model,
    NamespaceName,
)

ScrapeMode = Literal["auto", "podMonitor", "scrapeConfig"]
# Labels tfk8s writes on its own objects (tfk8s.specs.ownership, tfk8s.specs.labels): never set by a stack file.
RESERVED_LABEL_PREFIX = "tfk8s.io/"


def _no_reserved_labels(labels: dict[str, str]) -> dict[str, str]:
    reserved = sorted(k for k in labels if k.startswith(RESERVED_LABEL_PREFIX))
    if reserved:
        raise ValueError(f"{reserved} are tfk8s's own labels (which stack owns the object): remove them")
    return labels


class MonitoringSettings(Model):
    """Where the platform's Prometheus runs and how it is told to scrape training tasks
    (docs/guide/monitoring.md). tfk8s runs no Prometheus: the platform team does, in a namespace
    of its own, which must exist before the platform's `up`."""

    namespace: NamespaceName | None = None
    """The namespace of the platform's Prometheus, e.g. monitoring; there the platform declares the
    scrape (a PodMonitor or a ConfigMap, see `scrape`), and only its pods matching `podLabels` may
    reach the training pods' metrics port. None: no monitoring (no scrape is declared, and no pod may
    reach the metrics port)."""
    pod_labels: dict[LabelKey, LabelValue] = Field(default_factory=lambda: {"app.kubernetes.io/name": "prometheus"})
    """The labels of the Prometheus pods in `namespace`, the only pods the training pods' policies let
    in on the metrics port; {} lets in every pod of that namespace."""
    scrape: ScrapeMode = "auto"
    """How the scrape is declared in `namespace`: podMonitor, a monitoring.coreos.com/v1 PodMonitor
    (the Prometheus Operator's; refused where the cluster does not serve it); scrapeConfig, a ConfigMap
    holding a `scrape_configs` file for a Prometheus without the operator to load
    (`scrape_config_files`); auto: podMonitor where the cluster serves that kind, else scrapeConfig."""
    monitor_labels: Annotated[dict[LabelKey, LabelValue], AfterValidator(_no_reserved_labels)] = Field(default_factory=dict)
    """Labels put on the PodMonitor or ConfigMap besides tfk8s's own, for a Prometheus that selects by
    them, e.g. {release: kube-prometheus-stack} (that chart's podMonitorSelector)."""
    interval: Duration = "15s"
    """How often Prometheus scrapes each task, e.g. 15s or 1m (launchers refresh their figures every 5 s)."""
