"""The Grafana dashboard of a run (docs/dashboards/tfk8s-training.json) is one Grafana imports, and
reads only what a training task's launcher serves (lab/dashboards.py lists its queries; an e2e test
runs them against a real Prometheus)."""

from __future__ import annotations

import re
from itertools import combinations
from typing import Any

import pytest

import dashboards

ROOT = dashboards.ROOT
BOARD = dashboards.load()
PANELS = dashboards.panels(BOARD)
VARIABLES = {v["name"]: v for v in BOARD["templating"]["list"]}
PANEL_TYPES = {"stat", "gauge", "bargauge", "timeseries", "table", "row", "text"}
GRID_COLUMNS = 24


def test_the_dashboard_is_a_grafana_dashboard() -> None:
    assert isinstance(BOARD["title"], str) and BOARD["title"]
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,40}", BOARD["uid"])  # Grafana's uid: at most 40 characters
    assert isinstance(BOARD["schemaVersion"], int) and BOARD["schemaVersion"] >= 36  # Grafana 9 and later
    assert set(BOARD["time"]) == {"from", "to"}
    assert "id" not in BOARD or BOARD["id"] is None  # an export for import: no instance's database id
    assert PANELS


def test_every_panel_has_a_unique_id_a_place_on_the_grid_and_queries_of_the_chosen_prometheus() -> None:
    ids = [p["id"] for p in PANELS]
    assert all(isinstance(i, int) for i in ids) and len(ids) == len(set(ids)), ids
    for p in PANELS:
        where = f'panel {p["id"]} "{p.get("title")}"'
        assert p["type"] in PANEL_TYPES and p["title"], where
        grid = p["gridPos"]
        assert set(grid) == {"x", "y", "w", "h"} and all(isinstance(v, int) for v in grid.values()), where
        assert grid["w"] >= 1 and grid["h"] >= 1 and grid["x"] >= 0 and grid["y"] >= 0, where
        assert grid["x"] + grid["w"] <= GRID_COLUMNS, where
        if p["type"] in ("row", "text"):
            continue
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, where
        targets = p["targets"]
        assert targets, where
        refs = [t["refId"] for t in targets]
        assert len(refs) == len(set(refs)), where
        for t in targets:
            assert t["expr"].strip(), where
            assert t.get("datasource", p["datasource"]) == p["datasource"], where


def test_no_two_panels_overlap() -> None:
    def cells(p: dict[str, Any]) -> set[tuple[int, int]]:
        g = p["gridPos"]
        return {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}

    for a, b in combinations(PANELS, 2):
        assert not cells(a) & cells(b), (a["title"], b["title"])


def test_every_variable_a_query_names_is_defined_and_templated_by_tenant_experiment_cluster() -> None:
    assert VARIABLES["datasource"]["type"] == "datasource" and VARIABLES["datasource"]["query"] == "prometheus"
    assert [n for n in VARIABLES if n != "datasource"] == ["tenant", "experiment", "cluster"]
    for query in dashboards.queries(BOARD) + dashboards.variable_queries(BOARD):
        unknown = dashboards.variables_used(query.expr) - set(VARIABLES) - dashboards.GRAFANA_VARIABLES
        assert not unknown, (query.where, unknown)
    for name in ("tenant", "experiment", "cluster"):
        assert VARIABLES[name]["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        # Every panel query follows the three choices.
        for query in dashboards.queries(BOARD):
            assert f'{name}=~"${name}"' in query.expr, (query.where, name)


def test_every_query_reads_only_metrics_of_the_launchers_contract() -> None:
    used: set[str] = set()
    for query in dashboards.queries(BOARD) + dashboards.variable_queries(BOARD):
        names = dashboards.metric_names(query.expr)
        assert names, f"{query.where}: reads no metric"
        assert names <= set(dashboards.CONTRACT_METRICS), (query.where, names - set(dashboards.CONTRACT_METRICS))
        used |= names
    # What the dashboard is for: a run's step, rates, ETA, loss, first step, memory and starts.
    assert {
        "tfk8s_global_step",
        "tfk8s_target_steps",
        "tfk8s_steps_per_second",
        "tfk8s_examples_per_second",
        "tfk8s_loss",
        "tfk8s_first_step_seconds",
        "tfk8s_task_memory_bytes",
        "tfk8s_task_starts_total",
    } <= used


def test_the_contract_is_what_the_launcher_serves() -> None:
    """CONTRACT_METRICS, names and types, is what a task's launcher exposes (a PS with every figure
    known, so that every metric is there), each sample labelled with the task's labels."""
    from tfk8s_train import task_metrics

    snapshot = {
        "run": "u1",
        "job": "ps",
        "state": "retired",
        "starts": 1,
        "started_at": 100.0,
        "first_step_at": 130.0,
        "step": 120,
        "target_steps": 300,
        "steps_per_second": 4.2,
        "examples_per_second": 512.0,
        "loss": 0.31,
        "memory_bytes": 123456789,
    }
    environ = {"TFK8S_TENANT": "alice", "TFK8S_EXPERIMENT": "dev", "TFK8S_CLUSTER": "mnist"}
    text = task_metrics.render(snapshot, task_metrics.task_labels("ps", 0, environ), ps_variables=7)
    assert dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M)) == dashboards.CONTRACT_METRICS
    samples = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert len(samples) == len(dashboards.CONTRACT_METRICS)
    for line in samples:
        labels = dict(re.findall(r'(\w+)="([^"]*)"', line.split("{", 1)[1].rsplit("}", 1)[0]))
        assert {k: labels[k] for k in dashboards.TASK_LABELS} == {
            "tenant": "alice",
            "experiment": "dev",
            "cluster": "mnist",
            "role": "ps",
            "index": "0",
        }, line


def test_the_eta_is_computed_from_target_step_and_rate() -> None:
    (eta,) = [q for q in dashboards.queries(BOARD) if '"ETA"' in q.where]
    assert dashboards.metric_names(eta.expr) == {"tfk8s_target_steps", "tfk8s_global_step", "tfk8s_steps_per_second"}
    assert "> 0" in eta.expr  # no division by a zero rate
    (panel,) = [p for p in PANELS if p["title"] == "ETA"]
    assert panel["fieldConfig"]["defaults"]["unit"] == "s"


def test_the_queries_helper_lists_every_target_and_expands_the_variables() -> None:
    listed = dashboards.queries(BOARD)
    assert len(listed) == sum(len(p.get("targets", [])) for p in PANELS)
    assert len({q.where for q in listed}) == len(listed)
    alice = dashboards.expanded(listed[0].expr, {"tenant": "alice"})
    assert 'tenant=~"alice"' in alice and 'experiment=~".*"' in alice and "$" not in alice
    assert dashboards.expanded("rate(x[$__rate_interval])") == "rate(x[1m])"


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("tfk8s_loss", {"tfk8s_loss"}),
        ('max by (tenant, cluster) (tfk8s_global_step{tenant=~"$tenant", role!="ps"})', {"tfk8s_global_step"}),
        ("sum(rate(tfk8s_task_starts_total[5m])) without (index) offset 1h", {"tfk8s_task_starts_total"}),
        ("a / on (cluster) group_left (run) b > bool 1e3", {"a", "b"}),
        ('label_values(tfk8s_task_info{tenant=~"$tenant"}, experiment)', {"tfk8s_task_info"}),
        ('{__name__="tfk8s_loss", tenant="alice"}', {"tfk8s_loss"}),
        ("time() - tfk8s_first_step_seconds", {"tfk8s_first_step_seconds"}),
        ("job:rate5m:sum * 2", {"job:rate5m:sum"}),
    ],
    ids=["bare", "aggregated", "range-offset-without", "matching", "label-values", "name-matcher", "fn", "recording"],
)
def test_metric_names_are_read_from_promql(expr: str, names: set[str]) -> None:
    assert dashboards.metric_names(expr) == names


def test_a_function_promql_does_not_have_is_an_error() -> None:
    with pytest.raises(ValueError, match="'rates' is no PromQL function"):
        dashboards.metric_names("rates(tfk8s_loss[5m])")


def test_the_guide_lists_the_contracts_metrics() -> None:
    guide = (ROOT / "docs" / "guide" / "monitoring.md").read_text()
    listed = set(re.findall(r"`(tfk8s_[a-z_]+)`", guide))
    assert listed == set(dashboards.CONTRACT_METRICS)
