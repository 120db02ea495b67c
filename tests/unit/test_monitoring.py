"""Prometheus metrics of training tasks, the infra side (issue 37; docs/guide/monitoring.md): what
each task is told and exposes, who may reach it, and how the platform's Prometheus is told to scrape.
What the launcher serves there is training/tfk8s_train/launch.py's."""

from __future__ import annotations

import copy
import logging
import re
from typing import Any

import pulumi
import pytest
import yaml
from mocked_program import (
    DEPLOYMENT,
    JOB,
    Deployment,
    after,
    declared_types,
    facts_for,
    pod_labels,
    pod_spec,
    run_program,
    stack_config,
)
from tfk8s.checks import monitoring as monitoring_checks
from tfk8s.errors import ConfigError
from tfk8s.settings.contract import PlatformFacts
from tfk8s.settings.monitoring import MonitoringSettings
from tfk8s.specs import monitoring as monitoring_spec
from tfk8s.specs.labels import labels
from tfk8s.specs.network_policy import tenants_kept_out

TRAINING_ENV = ("TFK8S_TENANT", "TFK8S_EXPERIMENT", "TFK8S_CLUSTER", "TFK8S_METRICS_PORT")


def training_workloads(d: Deployment) -> list[Any]:
    workloads = d.mocks.of_type(DEPLOYMENT) + d.mocks.of_type(JOB)
    return [r for r in workloads if pod_labels(r)["app.kubernetes.io/name"] == "tensorflow"]


def container(workload: Any) -> dict[str, Any]:
    (found,) = pod_spec(workload)["containers"]
    return dict(found)


def identity(workload: Any) -> dict[str, str | None]:
    return {e["name"]: e.get("value") for e in container(workload)["env"] if e["name"] in TRAINING_ENV}


def with_chief(raw: dict[str, Any]) -> dict[str, Any]:
    raw["clusters"][0].update(replication="in-graph", inGraphClient="chief")
    return raw


def test_every_task_is_told_whose_it_is_and_serves_metrics_on_the_platforms_port(dev_config: dict[str, Any]) -> None:
    """PS, workers and chief: the labels of their samples are their pod's labels, their port the platform's."""

    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(with_chief(dev_config))

        def check() -> None:
            workloads = training_workloads(d)
            assert sorted({pod_labels(w)["tfk8s.io/role"] for w in workloads}) == ["chief", "ps", "worker"]
            for w in workloads:
                labels = pod_labels(w)
                assert identity(w) == {
                    "TFK8S_TENANT": labels["tfk8s.io/user"],
                    "TFK8S_EXPERIMENT": labels["tfk8s.io/experiment"],
                    "TFK8S_CLUSTER": labels["tfk8s.io/cluster"],
                    "TFK8S_METRICS_PORT": "9470",
                }, w.name
                assert identity(w)["TFK8S_TENANT"] == "alice" and identity(w)["TFK8S_CLUSTER"] == "mnist"
                assert {"name": "metrics", "containerPort": 9470} in container(w)["ports"], w.name

        return after(d, check)

    run()


def test_the_launcher_labels_a_tasks_samples_with_its_pods_labels_from_the_env_it_is_given(dev_config: dict[str, Any]) -> None:
    """What the pods are told is what the launcher reads (training/tfk8s_train/task_metrics.py)."""
    from tfk8s_train import task_metrics

    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(dev_config)

        def check() -> None:
            for w in training_workloads(d):
                pod = pod_labels(w)
                told = {k: v for k, v in identity(w).items() if v is not None}
                found = task_metrics.task_labels(pod["tfk8s.io/role"], 0, told)
                assert (found["tenant"], found["experiment"], found["cluster"]) == (
                    pod["tfk8s.io/user"],
                    pod["tfk8s.io/experiment"],
                    pod["tfk8s.io/cluster"],
                ), w.name

        return after(d, check)

    run()


def test_another_metrics_port_changes_the_port_and_its_env_and_nothing_else(dev_config: dict[str, Any]) -> None:
    platform_raw = copy.deepcopy(stack_config("platform-dev"))
    platform_raw["platform"]["ports"] = {"metrics": 9999}
    runs: dict[str, dict[str, Any]] = {}

    def pods_of(d: Deployment) -> dict[str, Any]:
        return {w.name: pod_spec(w) for w in training_workloads(d)}

    @pulumi.runtime.test
    def default() -> pulumi.Output[Any]:
        d = run_program(copy.deepcopy(dev_config))
        return after(d, lambda: runs.update(default=pods_of(d)))

    @pulumi.runtime.test
    def changed() -> pulumi.Output[Any]:
        d = run_program(copy.deepcopy(dev_config), platform=facts_for(platform_raw))
        return after(d, lambda: runs.update(changed=pods_of(d)))

    default()
    changed()
    before, after_change = runs["default"], runs["changed"]
    assert set(before) == set(after_change)
    for name, spec in before.items():
        theirs = copy.deepcopy(after_change[name])
        (c,) = theirs["containers"]
        assert {"name": "metrics", "containerPort": 9999} in c["ports"]
        assert {"name": "TFK8S_METRICS_PORT", "value": "9999"} in c["env"]
        c["ports"] = [p if p["name"] != "metrics" else {**p, "containerPort": 9470} for p in c["ports"]]
        c["env"] = [e if e["name"] != "TFK8S_METRICS_PORT" else {**e, "value": "9470"} for e in c["env"]]
        assert theirs == spec, name


def test_jupyter_is_no_task_and_exposes_no_metrics(tenant_config: dict[str, Any]) -> None:
    """Jupyter as an in-graph client runs no launcher: no metrics port, no task identity."""

    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(tenant_config)

        def check() -> None:
            apps = d.mocks.of_type(DEPLOYMENT)
            assert apps
            for app in apps:
                for c in pod_spec(app)["containers"]:
                    assert all(p["name"] != "metrics" for p in c.get("ports", [])), app.name
                    assert not {e["name"] for e in c.get("env", [])} & set(TRAINING_ENV), app.name

        return after(d, check)

    run()


# --- The platform's scrape -------------------------------------------------------------------

POD_MONITOR = "kubernetes:monitoring.coreos.com/v1:PodMonitor"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
DISCOVERY = "/apis/monitoring.coreos.com/v1"
MONITORING_NS = "/api/v1/namespaces/monitoring"
USER_NODE = {"metadata": {"name": "tfk8s-user-node"}, "spec": {}, "status": {}}
API_SERVER = {"cidrs": ["10.0.0.1/32"], "ports": [6443]}
# The pod network a platform on a cluster that enforces policies names (its apps refuse it).
POD_CIDRS = ["10.244.0.0/16"]


def monitored(platform_config: dict[str, Any], **monitoring: Any) -> dict[str, Any]:
    platform_config["platform"]["monitoring"] = {"namespace": "monitoring", **monitoring}
    platform_config["platform"]["network"] = {"policyEnforced": False, "apiServer": API_SERVER}
    return platform_config


def cluster(*, served: bool, namespace: dict[str, Any] | None = None) -> tuple[Any, list[str]]:
    """A `read_whole` of a cluster that has the User Node, the monitoring namespace (as given) and,
    if `served`, the Prometheus Operator's PodMonitor; and the paths it was asked."""
    asked: list[str] = []
    objects: dict[str, Any] = {"/api/v1/nodes/tfk8s-user-node": USER_NODE, MONITORING_NS: namespace}
    if served:
        objects[DISCOVERY] = {"kind": "APIResourceList", "resources": [{"name": "podmonitors", "kind": "PodMonitor"}]}

    def read_whole(path: str) -> Any:
        asked.append(path)
        return objects.get(path)

    return read_whole, asked


A_NAMESPACE = {"metadata": {"name": "monitoring", "labels": {"kubernetes.io/metadata.name": "monitoring"}}}


@pytest.mark.parametrize(
    ("scrape", "served", "declared"),
    [
        ("auto", True, POD_MONITOR),
        ("auto", False, CONFIG_MAP),
        ("podMonitor", True, POD_MONITOR),
        ("scrapeConfig", True, CONFIG_MAP),
        ("scrapeConfig", False, CONFIG_MAP),
    ],
    ids=["auto-with-operator", "auto-without", "pod-monitor", "config-map-beside-the-operator", "config-map"],
)
def test_the_platform_declares_one_scrape_in_the_monitoring_namespace_of_the_kind_the_cluster_serves(
    platform_config: dict[str, Any], scrape: str, served: bool, declared: str
) -> None:
    read_whole, _ = cluster(served=served, namespace=A_NAMESPACE)

    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(monitored(platform_config, scrape=scrape, monitorLabels={"release": "prom"}), read_whole=read_whole)

        def check() -> None:
            scrapes = d.mocks.of_type(POD_MONITOR) + [
                r for r in d.mocks.of_type(CONFIG_MAP) if r.inputs["metadata"].get("namespace") == "monitoring"
            ]
            (found,) = scrapes
            assert found.typ == declared
            meta = found.inputs["metadata"]
            assert (meta["name"], meta["namespace"]) == ("tfk8s-training", "monitoring")
            # The team's selector label, and the platform's ownership marks (tfk8s.specs.ownership).
            assert meta["labels"]["release"] == "prom"
            assert meta["labels"]["tfk8s.io/stack-kind"] == "platform"
            assert meta["annotations"]["tfk8s.io/owner"].startswith("organization/tfk8s/platform-dev@")
            # The namespace is the platform team's: tfk8s creates none.
            assert not d.mocks.of_type("kubernetes:core/v1:Namespace")
            # The experimenter role (the platform's guard) is deleted before the scrape.
            role_options = d.options["kubernetes:rbac.authorization.k8s.io/v1:ClusterRole::platform-guard-experimenter"]
            assert any(getattr(r, "_name", "") == "training-scrape" for r in role_options.depends_on)

        return after(d, check)

    run()


def test_a_platform_without_monitoring_declares_no_scrape_and_asks_nothing(platform_config: dict[str, Any]) -> None:
    read_whole, asked = cluster(served=True, namespace=A_NAMESPACE)
    platform_config["platform"]["network"] = {"apiServer": API_SERVER, "podCidrs": POD_CIDRS}

    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(platform_config, read_whole=read_whole)

        def check() -> None:
            assert not d.mocks.of_type(POD_MONITOR)
            assert not [r for r in d.mocks.of_type(CONFIG_MAP) if r.inputs["metadata"].get("namespace") == "monitoring"]
            assert DISCOVERY not in asked and MONITORING_NS not in asked

        return after(d, check)

    run()


@pytest.mark.parametrize(
    ("scrape", "served", "namespace", "message"),
    [
        (
            "auto",
            True,
            None,
            r"tfk8s:platform\.monitoring\.namespace: there is no namespace 'monitoring' in the cluster; tfk8s runs no "
            r"Prometheus and creates no namespace for one: install Prometheus there first .*or remove "
            r"tfk8s:platform\.monitoring\.namespace",
        ),
        (
            "auto",
            True,
            {"metadata": {"name": "monitoring", "labels": {"tfk8s.io/stack": "tenant-mon", "tfk8s.io/stack-kind": "tenant"}}},
            r"tfk8s:platform\.monitoring\.namespace: 'monitoring' is the namespace of tenant stack 'tenant-mon', whose people "
            r"could then run pods there that read every tenant's training metrics",
        ),
        (
            "podMonitor",
            False,
            A_NAMESPACE,
            r"tfk8s:platform\.monitoring\.scrape: is podMonitor, but the cluster serves no monitoring\.coreos\.com/v1 "
            r"podmonitors .*install them, or set scrape: scrapeConfig",
        ),
    ],
    ids=["namespace-missing", "namespace-of-a-tenant", "pod-monitor-not-served"],
)
def test_a_scrape_with_nowhere_to_go_is_refused_before_anything_exists(
    platform_config: dict[str, Any], scrape: str, served: bool, namespace: Any, message: str
) -> None:
    read_whole, _ = cluster(served=served, namespace=namespace)
    with declared_types() as declared, pytest.raises(ConfigError, match=message):
        run_program(monitored(platform_config, scrape=scrape), read_whole=read_whole)
    assert [t for t in declared if t.startswith("kubernetes:")] == []


@pytest.mark.parametrize(
    ("discovery", "served"),
    [
        (None, False),  # 404: the group version is not served
        ({"resources": [{"name": "servicemonitors"}, {"name": "prometheuses"}]}, False),
        ({"resources": [{"name": "podmonitors"}, {"name": "podmonitors/status"}]}, True),
    ],
    ids=["no-group", "group-without-pod-monitors", "pod-monitors"],
)
def test_the_pod_monitor_is_served_when_its_group_versions_discovery_lists_it(discovery: Any, served: bool) -> None:
    asked: list[str] = []
    assert monitoring_checks.pod_monitors_served(lambda path: asked.append(path) or discovery) is served
    assert asked == [DISCOVERY]
    assert monitoring_checks.pod_monitors_served(None) is None  # nothing can be read: unknown


def test_without_credentials_auto_is_the_config_map_with_a_warning(platform_config: dict[str, Any], caplog: Any) -> None:
    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        with caplog.at_level(logging.WARNING):
            d = run_program(monitored(platform_config))

        def check() -> None:
            assert not d.mocks.of_type(POD_MONITOR)
            assert [r.inputs["metadata"]["name"] for r in d.mocks.of_type(CONFIG_MAP)] == ["tfk8s-training"]
            # Published resolved: experiments read where Prometheus is, never `auto`.
            assert d.mocks.of_type(CONFIG_MAP)[0].inputs["metadata"]["namespace"] == "monitoring"

        return after(d, check)

    run()
    assert "tfk8s:platform.monitoring.scrape" in caplog.text and "declared as a ConfigMap" in caplog.text


def test_the_platform_publishes_its_prometheus_for_experiments_with_the_scrape_resolved(platform_config: dict[str, Any]) -> None:
    facts = PlatformFacts.model_validate(facts_for(monitored(platform_config, podLabels={"app": "prom"})), strict=False)
    assert facts.monitoring.namespace == "monitoring"
    assert dict(facts.monitoring.pod_labels) == {"app": "prom"}
    assert facts.ports.metrics == 9470
    # A platform published before monitoring existed: none, and the default port.
    old = {k: v for k, v in facts_for(stack_config("platform-dev")).items() if k != "monitoring"}
    old["ports"] = {k: v for k, v in old["ports"].items() if k != "metrics"}
    parsed = PlatformFacts.model_validate(old, strict=False)
    assert parsed.monitoring.namespace is None and parsed.ports.metrics == 9470


# --- What the scrape does to a task's samples, by Prometheus' relabeling rules --------------------


def relabeled(labels: dict[str, str], rules: list[dict[str, Any]]) -> dict[str, str] | None:
    """Prometheus' relabeling (replace, keep, drop, labeldrop) of a scrape file's rules; None: dropped."""
    labels = dict(labels)
    for rule in rules:
        regex = re.compile(rule.get("regex", "(.*)"))
        action = rule.get("action", "replace")
        if action == "labeldrop":
            labels = {k: v for k, v in labels.items() if not regex.fullmatch(k)}
            continue
        value = rule.get("separator", ";").join(labels.get(s, "") for s in rule.get("source_labels", []))
        match = regex.fullmatch(value)
        if action == "keep" and not match or action == "drop" and match:
            return None
        if action == "replace" and match:
            result = match.expand(rule.get("replacement", "$1").replace("$", "\\"))
            if result:
                labels[rule["target_label"]] = result
            else:
                labels.pop(rule["target_label"], None)
    return labels


def scraped(discovered: dict[str, str], exposed: dict[str, str], job: dict[str, Any]) -> dict[str, str] | None:
    """One exposed sample's labels once `job` scraped it from a target Prometheus discovered so."""
    target = relabeled(discovered, job["relabel_configs"])
    if target is None:
        return None
    sample = dict(exposed)
    assert job["honor_labels"] is False
    for name, value in target.items():
        if name.startswith("__"):
            continue
        if name in sample:
            sample[f"exported_{name}"] = sample[name]  # Prometheus keeps the exposition's value so
        sample[name] = value
    return relabeled(sample, job["metric_relabel_configs"])


def discovered_as(pod: dict[str, str], namespace: str, name: str, *, completion_index: str | None = None) -> dict[str, str]:
    """The meta labels Prometheus' Kubernetes pod discovery gives the metrics port of a pod so labelled."""
    meta = {monitoring_spec.pod_label(k): v for k, v in pod.items()}
    if completion_index is not None:  # the Job controller's annotation on an Indexed Job's pods
        meta[monitoring_spec.pod_annotation("batch.kubernetes.io/job-completion-index")] = completion_index
    return {
        **meta,
        "__meta_kubernetes_namespace": namespace,
        "__meta_kubernetes_pod_name": name,
        "__meta_kubernetes_pod_phase": "Running",
        "__meta_kubernetes_pod_container_port_name": "metrics",
        "__address__": "10.244.0.7:9470",
    }


def scrape_job() -> dict[str, Any]:
    settings = MonitoringSettings(namespace="monitoring")
    parsed = yaml.safe_load(monitoring_spec.scrape_config_file(settings, "tfk8s-"))
    (job,) = parsed["scrape_configs"]
    training_pods = "app.kubernetes.io/name=tensorflow,app.kubernetes.io/part-of=tfk8s"  # filtered by the API server
    assert job["kubernetes_sd_configs"] == [{"role": "pod", "selectors": [{"role": "pod", "label": training_pods}]}]
    return dict(job)


def test_a_tasks_samples_carry_its_labels_whether_or_not_it_exposes_them(dev_config: dict[str, Any]) -> None:
    """The labels come from the exposition where it has them, else from the pod (its labels as the
    experiment declares them); `namespace` is always discovery's, whatever the exposition says."""
    workers: list[dict[str, str]] = []

    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(dev_config)
        return after(d, lambda: workers.extend(pod_labels(w) for w in training_workloads(d) if w.typ == JOB))

    run()
    (worker,) = workers
    job = scrape_job()
    target = discovered_as(worker, "tfk8s-alice", "dev-mnist-worker-1-x7k2p", completion_index="1")
    own = {"tenant": "alice", "experiment": "dev", "cluster": "mnist", "role": "worker", "index": "1"}
    where = {"namespace": "tfk8s-alice", "pod": "dev-mnist-worker-1-x7k2p"}
    # A bare exposition (a launcher before issue 37's labels): the pod's labels.
    assert scraped(target, {"__name__": "tfk8s_global_step"}, job) == {"__name__": "tfk8s_global_step", **own, **where}
    # The launcher's own labels win where it has them (here one the pod could not know), and no
    # exported_* label is left behind.
    exposed = {"__name__": "tfk8s_loss", **own, "cluster": "renamed", "run": "u1"}
    assert scraped(target, exposed, job) == {**exposed, **where}
    # The exposition may claim any tenant, never another namespace.
    assert scraped(target, {"__name__": "tfk8s_loss", "tenant": "bob", "namespace": "tfk8s-bob"}, job) == {
        "__name__": "tfk8s_loss",
        **own,
        **where,
        "tenant": "bob",
        "exported_namespace": "tfk8s-bob",
    }


def test_a_ps_index_is_its_label_and_only_this_platforms_running_training_pods_are_scraped() -> None:
    job = scrape_job()
    ps = labels("alice", "tensorflow", experiment="dev", cluster="mnist", role="ps", index=0, run="r1")
    sample = {"__name__": "tfk8s_ps_variables"}
    assert scraped(discovered_as(ps, "tfk8s-alice", "ps"), sample, job) == {
        **sample,
        "tenant": "alice",
        "experiment": "dev",
        "cluster": "mnist",
        "role": "ps",
        "index": "0",
        "namespace": "tfk8s-alice",
        "pod": "ps",
    }
    # Jupyter (no task), a pod of another platform's prefix, another port, a finished pod: none scraped.
    jupyter = labels("alice", "jupyter")
    assert scraped(discovered_as(jupyter, "tfk8s-alice", "jupyter"), sample, job) is None
    assert scraped(discovered_as(ps, "team-alice", "ps"), sample, job) is None
    running_ps = discovered_as(ps, "tfk8s-alice", "ps")
    assert scraped({**running_ps, "__meta_kubernetes_pod_container_port_name": "grpc"}, sample, job) is None
    assert scraped({**running_ps, "__meta_kubernetes_pod_phase": "Succeeded"}, sample, job) is None


def test_the_pod_monitor_relabels_as_the_scrape_file_does() -> None:
    """One list of rules: the PodMonitor's are the file's in the operator's spelling, less what the
    operator does itself (keep the named port, drop finished pods, label namespace and pod)."""
    settings = MonitoringSettings(namespace="monitoring", interval="30s")
    (endpoint,) = monitoring_spec.pod_monitor_spec(settings, "tfk8s-")["podMetricsEndpoints"]
    job = scrape_job()
    spelled = {"sourceLabels": "source_labels", "targetLabel": "target_label"}

    def in_file_spelling(rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{spelled.get(k, k): v for k, v in rule.items()} for rule in rules]

    operator_does = {"__meta_kubernetes_pod_container_port_name", "__meta_kubernetes_pod_phase", "__meta_kubernetes_pod_name"}
    file_rules = [
        r
        for r in job["relabel_configs"]
        if not set(r.get("source_labels", [])) & operator_does and r.get("target_label") != "namespace"
    ]
    assert in_file_spelling(endpoint["relabelings"]) == file_rules
    assert in_file_spelling(endpoint["metricRelabelings"]) == job["metric_relabel_configs"]
    assert endpoint["port"] == "metrics" and endpoint["path"] == "/metrics" and endpoint["interval"] == "30s"
    assert endpoint["honorLabels"] is False


def test_each_target_is_bounded_and_only_tfk8s_names_are_kept() -> None:
    """A task's code shapes what it serves: the scrape keeps tfk8s_* names alone and bounds each
    target's samples, labels and body (tests/training/test_prometheus_limits.py: by a real Prometheus)."""
    job = scrape_job()
    limits = {key: job[key] for key in ("sample_limit", "label_limit", "label_name_length_limit", "label_value_length_limit")}
    assert limits == {"sample_limit": 500, "label_limit": 30, "label_name_length_limit": 128, "label_value_length_limit": 512}
    assert job["body_size_limit"] == "1MB"
    ps = labels("alice", "tensorflow", experiment="dev", cluster="mnist", role="ps", index=0, run="r1")
    target = discovered_as(ps, "tfk8s-alice", "ps")
    assert scraped(target, {"__name__": "python_gc_objects_collected_total"}, job) is None
    assert scraped(target, {"__name__": "tfk8s_loss"}, job) is not None
    # The PodMonitor's, in the operator's spelling, are the same limits.
    spec = monitoring_spec.pod_monitor_spec(MonitoringSettings(namespace="monitoring"), "tfk8s-")
    camel = {"sampleLimit", "labelLimit", "labelNameLengthLimit", "labelValueLengthLimit", "bodySizeLimit"}
    assert {key: spec[key] for key in camel} == {
        "sampleLimit": 500,
        "labelLimit": 30,
        "labelNameLengthLimit": 128,
        "labelValueLengthLimit": 512,
        "bodySizeLimit": "1MB",
    }


NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"


def namespace_selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A namespaceSelector of matchExpressions with Exists and DoesNotExist alone (all the fence writes)."""
    assert set(selector) == {"matchExpressions"}, selector
    operators = {"Exists": lambda key: key in labels, "DoesNotExist": lambda key: key not in labels}
    return all(operators[e["operator"]](e["key"]) for e in selector["matchExpressions"])


def test_the_monitoring_namespace_takes_nothing_from_a_tenants_namespace(
    platform_config: dict[str, Any], tenant_config: dict[str, Any]
) -> None:
    read_whole, _ = cluster(served=False, namespace=A_NAMESPACE)
    config = monitored(platform_config)
    config["platform"]["network"]["podCidrs"] = [*POD_CIDRS, "fd00:10:244::/56"]
    declared: list[dict[str, Any]] = []

    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(config, read_whole=read_whole)

        def check() -> None:
            (fence,) = d.mocks.of_type(NETWORK_POLICY)
            meta, spec = fence.inputs["metadata"], fence.inputs["spec"]
            declared.append(spec)
            assert (meta["name"], meta["namespace"]) == ("tfk8s-tenants-kept-out", "monitoring")
            assert meta["labels"]["tfk8s.io/stack-kind"] == "platform"
            # Every pod of the team's namespace, ingress alone: Prometheus still scrapes out of it.
            assert spec["podSelector"] == {} and spec["policyTypes"] == ["Ingress"]
            (rule,) = spec["ingress"]
            assert "ports" not in rule, "every port: the fence is by source alone"
            namespaces = [p["namespaceSelector"] for p in rule["from"] if "namespaceSelector" in p]
            blocks = [p["ipBlock"] for p in rule["from"] if "ipBlock" in p]
            assert all(set(p) in ({"namespaceSelector"}, {"ipBlock"}) for p in rule["from"]), rule
            # The team's own namespaces come in; every address but the pod network's (nodes, whence
            # kubelet probes come, the control plane, users' browsers) too.
            assert any(namespace_selects(s, A_NAMESPACE["metadata"]["labels"]) for s in namespaces)
            assert any(namespace_selects(s, {"kubernetes.io/metadata.name": "kube-system"}) for s in namespaces)
            assert blocks == [
                {"cidr": "0.0.0.0/0", "except": POD_CIDRS},
                {"cidr": "::/0", "except": ["fd00:10:244::/56"]},
            ]

        return after(d, check)

    run()

    # The namespace the tenant stack declares is one the fence keeps out.
    @pulumi.runtime.test
    def tenant() -> pulumi.Output[Any]:
        d = run_program(tenant_config, platform=facts_for(config))

        def check() -> None:
            (namespace,) = d.mocks.of_type("kubernetes:core/v1:Namespace")
            labels = namespace.inputs["metadata"]["labels"]
            (fence,) = declared
            selectors = [p["namespaceSelector"] for p in fence["ingress"][0]["from"] if "namespaceSelector" in p]
            assert selectors and not any(namespace_selects(s, labels) for s in selectors), labels

        return after(d, check)

    tenant()


def test_without_the_pod_network_the_monitoring_namespace_is_not_fenced(platform_config: dict[str, Any]) -> None:
    """A node's address, whence kubelet probes come, cannot be told from a pod's: no fence (a platform
    whose CNI enforces policies must name its pod network anyway)."""
    read_whole, _ = cluster(served=False, namespace=A_NAMESPACE)

    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(monitored(platform_config), read_whole=read_whole)

        def check() -> None:
            assert not d.mocks.of_type(NETWORK_POLICY)
            assert [
                r.inputs["metadata"]["name"]
                for r in d.mocks.of_type(CONFIG_MAP)
                if r.inputs["metadata"].get("namespace") == "monitoring"
            ] == ["tfk8s-training"]

        return after(d, check)

    run()


def test_the_fence_needs_the_pod_network_and_says_which_argument_gives_it() -> None:
    with pytest.raises(
        ConfigError, match=r"MonitoringFenceArgs.pod_cidrs: empty: .* give them \(a stack file's platform.network.podCidrs\)"
    ):
        tenants_kept_out([])


@pytest.mark.parametrize("namespace", ["kube-system", "default", "coredns"])
def test_a_fenced_monitoring_namespace_the_cluster_shares_is_refused_naming_the_key(
    platform_config: dict[str, Any], namespace: str
) -> None:
    """The fence takes every pod of the namespace: in kube-system, or the DNS's, it would cut every
    tenant off the cluster's DNS. Refused before anything is declared; without a pod network (no
    fence) the same namespace is the team's choice."""
    live = {"metadata": {"name": namespace, "labels": {"kubernetes.io/metadata.name": namespace}}}
    config = monitored(platform_config, scrape="scrapeConfig")
    config["platform"]["monitoring"]["namespace"] = namespace
    config["platform"]["network"]["dns"] = {"namespace": "coredns"}
    config["platform"]["network"]["podCidrs"] = POD_CIDRS
    objects = {"/api/v1/nodes/tfk8s-user-node": USER_NODE, f"/api/v1/namespaces/{namespace}": live}

    def read_whole(path: str) -> Any:
        return objects.get(path)

    message = (
        rf"tfk8s:platform\.monitoring\.namespace: '{namespace}' is one of the cluster's own namespaces.*a namespace of its own"
    )
    with declared_types() as declared, pytest.raises(ConfigError, match=message):
        run_program(config, read_whole=read_whole)
    assert [t for t in declared if t.startswith("kubernetes:")] == []
    del config["platform"]["network"]["podCidrs"]
    unfenced = copy.deepcopy(config)

    @pulumi.runtime.test
    def run() -> pulumi.Output[Any]:
        d = run_program(unfenced, read_whole=read_whole)
        return after(d, lambda: None if not d.mocks.of_type(NETWORK_POLICY) else pytest.fail("a fence without a pod network"))

    run()
