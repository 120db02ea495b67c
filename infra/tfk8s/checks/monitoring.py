"""Before a platform declares its scrape (tfk8s.components.monitoring): is there a Prometheus's
namespace to declare it in, is it the platform team's, and which kind does the cluster serve?

tfk8s runs no Prometheus and creates no namespace for one: the platform team runs it in a namespace
of its own (`platform.monitoring.namespace`), which must exist before the platform's `up`, and must
be no tenant's (its pods, matching `podLabels`, would read every tenant's metrics) nor, where the
platform fences it, one the cluster shares (kube-system, the DNS's). `scrape: auto`
becomes `podMonitor` where the API serves the Prometheus Operator's
monitoring.coreos.com/v1 podmonitors (the group version's discovery document lists them), else
`scrapeConfig`; an explicit `podMonitor` on a cluster without that kind is refused here, not by the
provider after half the platform exists. Run once, with the program's other reads; every problem
is reported together, as a `ConfigError` naming its key and the fix.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tfk8s.errors import ConfigError
from tfk8s.kube.api_paths import NAMESPACE as NAMESPACE_KIND
from tfk8s.kube.api_paths import POD_MONITOR
from tfk8s.settings import NAMESPACE
from tfk8s.settings.monitoring import ScrapeMode
from tfk8s.settings.platform import PlatformStack
from tfk8s.specs.ownership import STACK, STACK_KIND

Reader = Callable[[str], Mapping[str, Any] | None]
KEY = f"{NAMESPACE}:platform.monitoring"
# Namespaces of the cluster's own: Kubernetes', and (with the DNS namespace) what every pod needs.
CLUSTER_NAMESPACES = frozenset({"kube-system", "kube-public", "kube-node-lease", "default"})


def fence_problems(stack: PlatformStack) -> list[str]:
    """Where the platform fences its monitoring namespace against tenants' pods (it names its pod
    network: tfk8s.components.monitoring.MonitoringFence), that namespace is Prometheus's own: the
    fence takes every pod there, and in a namespace the cluster shares (the DNS's, kube-system's) it
    would cut every tenant off what runs beside Prometheus."""
    platform = stack.platform
    namespace = platform.monitoring.namespace
    if namespace is None or not platform.network.pod_cidrs:
        return []
    if namespace in CLUSTER_NAMESPACES | {platform.network.dns.namespace}:
        return [
            f"{KEY}.namespace: {namespace!r} is one of the cluster's own namespaces; the platform keeps every tenant's "
            "pods out of its monitoring namespace (a NetworkPolicy over all its pods, docs/guide/monitoring.md), which "
            f"here would cut them off what else runs in {namespace!r} (the cluster's DNS among it): run your Prometheus "
            "in a namespace of its own and name that"
        ]
    return []


def pod_monitors_served(read_whole: Reader | None) -> bool | None:
    """Whether the API serves monitoring.coreos.com/v1 podmonitors; None: unknown (nothing could be read)."""
    if read_whole is None:
        return None
    listed = read_whole(POD_MONITOR.root) or {}  # absent (404): the group version is not served
    return any(r.get("name") == POD_MONITOR.plural for r in listed.get("resources") or [])


def resolved_mode(asked: ScrapeMode, served: bool | None) -> ScrapeMode:
    """The kind the scrape is declared as: what was asked, `auto` as the cluster serves (unknown: the ConfigMap)."""
    if asked != "auto":
        return asked
    return "podMonitor" if served else "scrapeConfig"


def namespace_problems(namespace: str, live: Mapping[str, Any] | None) -> list[str]:
    """The monitoring namespace exists and is no tenant's."""
    if live is None:
        return [
            f"{KEY}.namespace: there is no namespace {namespace!r} in the cluster; tfk8s runs no Prometheus and creates "
            "no namespace for one: install Prometheus there first (docs/guide/monitoring.md), name the namespace where "
            f"yours runs, or remove {KEY}.namespace"
        ]
    labels = (live.get("metadata") or {}).get("labels") or {}
    if labels.get(STACK_KIND) == "tenant":
        return [
            f"{KEY}.namespace: {namespace!r} is the namespace of tenant stack {labels.get(STACK, '?')!r}, whose people "
            "could then run pods there that read every tenant's training metrics: name the namespace where the "
            "platform team's Prometheus runs"
        ]
    return []


def check_monitoring(stack: PlatformStack, read_whole: Reader | None) -> PlatformStack:
    """The platform with `monitoring.scrape` resolved to podMonitor or scrapeConfig, or a ConfigError.
    Without credentials to read the cluster (`read_whole` None), the namespace is not checked and
    `auto` is the ConfigMap, which every Prometheus can load."""
    monitoring = stack.platform.monitoring
    if monitoring.namespace is None:
        return stack
    problems = fence_problems(stack)
    if read_whole is not None:
        problems += namespace_problems(monitoring.namespace, read_whole(NAMESPACE_KIND.path(monitoring.namespace)))
    served = pod_monitors_served(read_whole)
    if monitoring.scrape == "podMonitor" and served is False:
        problems.append(
            f"{KEY}.scrape: is podMonitor, but the cluster serves no {POD_MONITOR.api_version} {POD_MONITOR.plural} (the "
            "Prometheus Operator's CustomResourceDefinitions are not installed): install them, or set scrape: "
            "scrapeConfig (a ConfigMap any Prometheus loads) or auto"
        )
    if problems:
        raise ConfigError(problems)
    resolved = monitoring.model_copy(update={"scrape": resolved_mode(monitoring.scrape, served)})
    return stack.model_copy(update={"platform": stack.platform.model_copy(update={"monitoring": resolved})})
