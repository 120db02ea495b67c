"""Prometheus metrics of training tasks, the infra side (issue 37; docs/guide/monitoring.md): what
each task is told and exposes, who may reach it, and how the platform's Prometheus is told to scrape.
What the launcher serves there is training/tfk8s_train/launch.py's."""

from __future__ import annotations

import copy
from typing import Any

import pulumi
from mocked_program import DEPLOYMENT, JOB, Deployment, after, facts_for, pod_labels, pod_spec, run_program, stack_config

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
