"""How the platform's Prometheus scrapes training tasks: the scrape the platform declares in its
monitoring namespace, as a PodMonitor (the Prometheus Operator's) or as a `scrape_configs` file in a
ConfigMap (for a Prometheus without the operator), both built from one list of relabelings.

What a task serves is its launcher's (training/tfk8s_train/launch.py, docs/guide/monitoring.md):
`GET /metrics` on the container port named `metrics`, every sample labelled tenant, experiment,
cluster, role and index. The scrape
  * keeps the running training pods of this platform's tenants (their labels, their namespace
    prefix), on that port alone;
  * labels each target with `namespace` and `pod` from discovery, which no exposition can change (a
    tenant's own code may write any label into its metrics, never another namespace);
  * fills tenant, experiment, cluster, role and index from the pod's labels (a worker's index from
    its Job's completion index) where the exposition lacks them: the exposition's own win.
Prometheus itself would let either side win for every label (`honor_labels`); the last point is
its default (the target's win, the exposition's kept as `exported_<name>`) undone, for those five
labels alone, by metric relabelings.

What a task serves is its tenant's code's to shape, so each target is bounded (`TARGET_LIMITS`):
only `tfk8s_*` names are kept, and a target over the sample, label or body-size limits fails its
scrape whole (its `up` is 0) while every other target's series stay.

Pure: no Pulumi (tfk8s.components.monitoring declares the objects).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import yaml

from tfk8s.settings.monitoring import MonitoringSettings
from tfk8s.specs import labels as tfk8s_labels
from tfk8s.specs.network_policy import TRAINING_COMPONENT
from tfk8s.specs.pods import METRICS_PORT_NAME

Json = dict[str, Any]

# The PodMonitor's or ConfigMap's name in the monitoring namespace, and the scrape's job.
SCRAPE_NAME = "tfk8s-training"
# The ConfigMap's one key: the file a Prometheus lists in its `scrape_config_files`.
SCRAPE_FILE = f"{SCRAPE_NAME}.yml"
METRICS_PATH = "/metrics"
# A worker's or chief's index: its Indexed Job's completion index (the pod template is one for all).
COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
# The labels of every sample, and the pod label each is filled from where the exposition lacks it.
TASK_LABELS = {
    "tenant": tfk8s_labels.USER,
    "experiment": tfk8s_labels.EXPERIMENT,
    "cluster": tfk8s_labels.CLUSTER,
    "role": tfk8s_labels.ROLE,
    "index": tfk8s_labels.INDEX,
}


# The names a launcher serves (training/tfk8s_train/task_metrics.py): everything else is dropped.
KEPT_NAMES = "tfk8s_.*"
# What one target may cost the shared Prometheus, counted after the kept names: a launcher serves one
# series per name, 13 at most, each with about 10 labels, in a body of a few KB.
TARGET_LIMITS = {
    "sample_limit": 500,
    "label_limit": 30,
    "label_name_length_limit": 128,
    "label_value_length_limit": 512,
    "body_size_limit": "1MB",
}


def training_pod_labels() -> dict[str, str]:
    """The labels every training pod (PS, worker, chief) of every tenant carries, and nothing else does."""
    return tfk8s_labels.of_component(TRAINING_COMPONENT)


def _sanitized(name: str) -> str:
    """A Kubernetes label or annotation name as Prometheus' discovery spells it in a meta label."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


def pod_label(name: str) -> str:
    return f"__meta_kubernetes_pod_label_{_sanitized(name)}"


def pod_annotation(name: str) -> str:
    return f"__meta_kubernetes_pod_annotation_{_sanitized(name)}"


@dataclass(frozen=True, kw_only=True)
class Relabel:
    """One relabeling, rendered for a Prometheus file (snake_case) or a PodMonitor (camelCase)."""

    action: str = "replace"
    source: tuple[str, ...] = ()
    target: str | None = None
    regex: str | None = None
    replacement: str | None = None

    def rendered(self, *, camel: bool) -> Json:
        keys = ("sourceLabels", "targetLabel") if camel else ("source_labels", "target_label")
        found: Json = {"action": self.action}
        if self.source:
            found[keys[0]] = list(self.source)
        if self.target is not None:
            found[keys[1]] = self.target
        if self.regex is not None:
            found["regex"] = self.regex
        if self.replacement is not None:
            found["replacement"] = self.replacement
        return found


def target_relabelings(namespace_prefix: str, *, operator: bool) -> list[Relabel]:
    """Which discovered pods are scraped, and their targets' labels. `operator`: for a PodMonitor,
    whose operator already keeps the named port, drops finished pods and labels namespace and pod."""
    selected = training_pod_labels()
    keep = [
        Relabel(action="keep", source=tuple(pod_label(k) for k in selected), regex=";".join(selected.values())),
        # This platform's tenants alone: their namespaces are its prefix (letters, digits and '-', no
        # regex syntax: tfk8s.settings.types) and a tenant's name.
        Relabel(action="keep", source=("__meta_kubernetes_namespace",), regex=f"{namespace_prefix}.+"),
    ]
    if not operator:
        keep += [
            Relabel(action="keep", source=("__meta_kubernetes_pod_container_port_name",), regex=METRICS_PORT_NAME),
            Relabel(action="drop", source=("__meta_kubernetes_pod_phase",), regex="(Failed|Succeeded)"),
        ]
    filled = [Relabel(source=(pod_label(label),), target=name) for name, label in TASK_LABELS.items() if name != "index"]
    # A PS has its index as a label; a worker's or chief's is its Job's completion index.
    filled += [
        Relabel(source=(pod_annotation(COMPLETION_INDEX_ANNOTATION),), target="index", regex="(.+)"),
        Relabel(source=(pod_label(TASK_LABELS["index"]),), target="index", regex="(.+)"),
    ]
    discovered = (
        []
        if operator
        else [
            Relabel(source=("__meta_kubernetes_namespace",), target="namespace"),
            Relabel(source=("__meta_kubernetes_pod_name",), target="pod"),
        ]
    )
    return keep + filled + discovered


def metric_relabelings() -> list[Relabel]:
    """The exposition's own tenant, experiment, cluster, role and index win over the pod's: Prometheus
    kept them as `exported_<name>` (its default, `honor_labels: false`); `namespace` and `pod` stay
    discovery's."""
    kept = Relabel(action="keep", source=("__name__",), regex=KEPT_NAMES)
    restored = [Relabel(source=(f"exported_{name}",), target=name, regex="(.+)") for name in TASK_LABELS]
    return [kept, *restored, Relabel(action="labeldrop", regex=f"exported_({'|'.join(TASK_LABELS)})")]


def _camel(snake: str) -> str:
    first, *rest = snake.split("_")
    return first + "".join(part.title() for part in rest)


def pod_monitor_spec(monitoring: MonitoringSettings, namespace_prefix: str) -> Json:
    """The PodMonitor's spec: the training pods of every namespace, kept to this platform's tenants."""
    return {
        "selector": {"matchLabels": training_pod_labels()},
        "namespaceSelector": {"any": True},
        # The PodMonitor's per-target limits: the same, in its camelCase (sampleLimit, bodySizeLimit, ...).
        **{_camel(key): value for key, value in TARGET_LIMITS.items()},
        "podMetricsEndpoints": [
            {
                "port": METRICS_PORT_NAME,
                "path": METRICS_PATH,
                "interval": monitoring.interval,
                "honorLabels": False,
                "relabelings": [r.rendered(camel=True) for r in target_relabelings(namespace_prefix, operator=True)],
                "metricRelabelings": [r.rendered(camel=True) for r in metric_relabelings()],
            }
        ],
    }


def scrape_config(monitoring: MonitoringSettings, namespace_prefix: str) -> Json:
    """The `scrape_configs` file: Kubernetes pod discovery (filtered by the API server to training
    pods), then the same relabelings as the PodMonitor's."""
    selector = ",".join(f"{k}={v}" for k, v in training_pod_labels().items())
    return {
        "scrape_configs": [
            {
                "job_name": SCRAPE_NAME,
                "scrape_interval": monitoring.interval,
                "metrics_path": METRICS_PATH,
                "honor_labels": False,
                **TARGET_LIMITS,
                "kubernetes_sd_configs": [{"role": "pod", "selectors": [{"role": "pod", "label": selector}]}],
                "relabel_configs": [r.rendered(camel=False) for r in target_relabelings(namespace_prefix, operator=False)],
                "metric_relabel_configs": [r.rendered(camel=False) for r in metric_relabelings()],
            }
        ]
    }


def scrape_config_file(monitoring: MonitoringSettings, namespace_prefix: str) -> str:
    """`scrape_config` as the YAML file Prometheus reads."""
    return yaml.safe_dump(scrape_config(monitoring, namespace_prefix), sort_keys=False)
