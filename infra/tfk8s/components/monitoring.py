"""The platform's side of the team's Prometheus (platform stack), in its namespace,
`platform.monitoring.namespace`, which tfk8s neither creates nor deletes (tfk8s.checks.monitoring
checks it exists): the scrape of training tasks, and the NetworkPolicy that keeps tenants out.

A PodMonitor where the Prometheus Operator runs (`scrape: podMonitor`), a ConfigMap holding a
`scrape_configs` file otherwise (`scrapeConfig`: the platform team mounts it into its Prometheus
and lists it in `scrape_config_files`); what either says is tfk8s.specs.monitoring's. Under a fixed
name, so the team's Prometheus can name it: `fixed_objects`.

MonitoringFence: the namespace's pods take nothing from a tenant's namespace
(tfk8s.specs.network_policy.tenants_kept_out), where the platform names its pod network.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from tfk8s.errors import ConfigError
from tfk8s.kube import objects as kube
from tfk8s.kube.api_paths import CONFIG_MAP, NETWORK_POLICY, POD_MONITOR
from tfk8s.settings.monitoring import MonitoringSettings
from tfk8s.specs import monitoring as scrape
from tfk8s.specs import network_policy
from tfk8s.specs.labels import PART_OF
from tfk8s.specs.ownership import Claimed, Owner


def fixed_objects(monitoring: MonitoringSettings, pod_cidrs: list[str], key: str) -> list[Claimed]:
    """What TrainingScrape and MonitoringFence create under a fixed name, `monitoring.scrape`
    resolved; `key` is where `monitoring` sits in the stack file (`tfk8s:platform.monitoring`)."""
    if monitoring.namespace is None:
        return []
    kind = POD_MONITOR if monitoring.scrape == "podMonitor" else CONFIG_MAP
    claimed = [Claimed(kind=kind, namespace=monitoring.namespace, name=scrape.SCRAPE_NAME, key=f"{key}.namespace")]
    if pod_cidrs:
        claimed.append(
            Claimed(
                kind=NETWORK_POLICY, namespace=monitoring.namespace, name=network_policy.TENANTS_KEPT_OUT, key=f"{key}.namespace"
            )
        )
    return claimed


@dataclass(frozen=True, kw_only=True)
class TrainingScrapeArgs:
    # `namespace` set and `scrape` resolved to podMonitor or scrapeConfig (tfk8s.checks.monitoring).
    monitoring: MonitoringSettings
    namespace_prefix: str  # the platform's tenants' namespaces: the scrape keeps theirs alone
    owner: Owner


class TrainingScrape(pulumi.ComponentResource):
    """How the platform's Prometheus finds every tenant's training tasks: a PodMonitor or a ConfigMap."""

    object_name: pulumi.Output[str]

    def __init__(self, name: str, args: TrainingScrapeArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        monitoring = args.monitoring
        if monitoring.namespace is None or monitoring.scrape == "auto":  # before anything is declared
            raise ConfigError(
                [
                    f"TrainingScrapeArgs.monitoring: namespace {monitoring.namespace!r}, scrape {monitoring.scrape!r}: "
                    "name the Prometheus's namespace, and a scrape of podMonitor or scrapeConfig (the kind its cluster serves)"
                ]
            )
        super().__init__("tfk8s:index:TrainingScrape", name, None, opts)
        owner = args.owner
        metadata = {
            "name": scrape.SCRAPE_NAME,
            "namespace": monitoring.namespace,
            # The team's selector labels first: tfk8s's own (which stack owns it) cannot be overridden.
            "labels": {
                **monitoring.monitor_labels,
                "app.kubernetes.io/part-of": PART_OF,
                "app.kubernetes.io/managed-by": "pulumi",
            }
            | owner.labels(),
            "annotations": owner.annotations(),
        }
        child = pulumi.ResourceOptions(parent=self)
        self.pod_monitor: kube.CustomObject | None = None
        self.config_map: kube.ConfigMap | None = None
        declared: kube.KubeObject
        if monitoring.scrape == "podMonitor":
            self.pod_monitor = declared = kube.CustomObject(
                f"{name}-pod-monitor",
                api_version=POD_MONITOR.api_version,
                kind=POD_MONITOR.kind,
                metadata=metadata,
                spec=scrape.pod_monitor_spec(monitoring, args.namespace_prefix),
                opts=child,
            )
        else:
            self.config_map = declared = kube.ConfigMap(
                f"{name}-config",
                metadata=metadata,
                data={scrape.SCRAPE_FILE: scrape.scrape_config_file(monitoring, args.namespace_prefix)},
                opts=child,
            )
        self.object_name = declared.name
        self.register_outputs({"object_name": self.object_name})


@dataclass(frozen=True, kw_only=True)
class MonitoringFenceArgs:
    namespace: str  # the team's Prometheus's, `platform.monitoring.namespace`
    pod_cidrs: list[str]  # `platform.network.podCidrs`, not empty
    owner: Owner


class MonitoringFence(pulumi.ComponentResource):
    """The monitoring namespace's NetworkPolicy: no tenant's pod connects to anything there."""

    policy_name: pulumi.Output[str]

    def __init__(self, name: str, args: MonitoringFenceArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        spec = network_policy.tenants_kept_out(args.pod_cidrs)  # refuses no pod network, before anything is declared
        super().__init__("tfk8s:index:MonitoringFence", name, None, opts)
        owner = args.owner
        self.policy = kube.NetworkPolicy(
            f"{name}-policy",
            metadata={
                "name": network_policy.TENANTS_KEPT_OUT,
                "namespace": args.namespace,
                "labels": {"app.kubernetes.io/part-of": PART_OF, "app.kubernetes.io/managed-by": "pulumi"} | owner.labels(),
                "annotations": owner.annotations(),
            },
            spec=spec,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.policy_name = self.policy.name
        self.register_outputs({"policy_name": self.policy_name})
