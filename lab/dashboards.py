"""The Grafana dashboard of a run (docs/dashboards/tfk8s-training.json, docs/guide/monitoring.md) as
the tests read it: its PromQL queries, the metric names each one reads, and the metrics a training
task's launcher serves (the contract of issue 37, training/tfk8s_train/launch.py).

tests/unit/test_dashboard.py checks the dashboard is well formed and reads the contract's metrics
alone; an e2e test with a real Prometheus runs every query of `queries()`, its Grafana variables
filled in by `expanded()`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DASHBOARD = ROOT / "docs" / "dashboards" / "tfk8s-training.json"

# What every task's launcher serves on /metrics (name -> Prometheus type), every sample labelled
# tenant, experiment, cluster, role and index (training/tfk8s_train/task_metrics.py renders them:
# tests/unit/test_dashboard.py keeps the two equal); docs/guide/monitoring.md lists them for users.
CONTRACT_METRICS = {
    "tfk8s_task_info": "gauge",
    "tfk8s_global_step": "gauge",
    "tfk8s_target_steps": "gauge",
    "tfk8s_steps_per_second": "gauge",
    "tfk8s_examples_per_second": "gauge",
    "tfk8s_loss": "gauge",
    "tfk8s_first_step_seconds": "gauge",
    "tfk8s_task_memory_bytes": "gauge",
    "tfk8s_task_starts_total": "counter",
    "tfk8s_task_up": "gauge",
    "tfk8s_ps_retirements_total": "counter",
    "tfk8s_ps_variables": "gauge",
}
TASK_LABELS = ("tenant", "experiment", "cluster", "role", "index")

# PromQL's functions and aggregations (prometheus/promql/parser/functions.go, lex.go): a name
# followed by `(` is one of these, or the query is wrong.
AGGREGATIONS = frozenset(
    "sum min max avg group stddev stdvar count count_values bottomk topk quantile limitk limit_ratio".split()
)
FUNCTIONS = AGGREGATIONS | frozenset(
    """abs absent absent_over_time acos acosh asin asinh atan atanh avg_over_time ceil changes clamp clamp_max
    clamp_min cos cosh count_over_time days_in_month day_of_month day_of_week day_of_year deg delta deriv exp
    floor histogram_avg histogram_count histogram_fraction histogram_quantile histogram_stddev histogram_stdvar
    histogram_sum holt_winters hour idelta increase irate label_join label_replace last_over_time ln log10 log2
    mad_over_time max_over_time min_over_time minute month pi predict_linear present_over_time
    quantile_over_time rad rate resets round scalar sgn sin sinh sort sort_by_label sort_by_label_desc
    sort_desc sqrt stddev_over_time stdvar_over_time sum_over_time tan tanh time timestamp vector year""".split()
)
# Words of the language that are no metric: set operators, modifiers, special numbers.
KEYWORDS = frozenset("and or unless bool offset by without on ignoring group_left group_right atan2 inf nan start end".split())
# Grafana's own variables, which a query may use without defining them.
GRAFANA_VARIABLES = frozenset({"__interval", "__interval_ms", "__range", "__range_s", "__range_ms", "__rate_interval"})

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_LABEL_LISTS = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_NAME = re.compile(r"(?<![\w.:$])[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_VALUES = re.compile(r"^\s*label_values\(\s*(?:(?P<selector>.*),)?\s*(?P<label>[a-zA-Z_][a-zA-Z0-9_]*)\s*\)\s*$", re.S)
_VARIABLE = re.compile(r"\$(?:\{(?P<braced>\w+)(?::\w+)?\}|(?P<bare>\w+))")


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads: every name that is no function, keyword, label
    (inside `{...}` or a `by (...)` list) or number. A name called as a function that PromQL does
    not have is a ValueError. Grafana's `label_values(selector, label)` reads its selector's."""
    found = _LABEL_VALUES.match(expr)
    if found:
        return metric_names(found["selector"]) if found["selector"] else set()
    # A selector may name its metric as a matcher: `{__name__="tfk8s_loss"}` (a regex counts as its text).
    names = {m["name"] for m in re.finditer(r'__name__\s*=~?\s*"(?P<name>[^"]*)"', expr)}
    text = _STRING.sub('""', expr)
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # ranges and subqueries' steps
    text = _LABEL_LISTS.sub("", text)
    for match in _NAME.finditer(text):
        word = match.group()
        if text[match.end() :].lstrip().startswith("("):
            if word not in FUNCTIONS:
                raise ValueError(f"{word!r} is no PromQL function (in {expr!r})")
            continue
        if word not in KEYWORDS:
            names.add(word)
    return names


def variables_used(expr: str) -> set[str]:
    """The Grafana variables an expression names: `$tenant`, `${tenant}`, `${tenant:regex}`."""
    return {m["braced"] or m["bare"] for m in _VARIABLE.finditer(expr)}


def expanded(expr: str, values: Mapping[str, str] | None = None) -> str:
    """`expr` as Grafana would send it, each variable replaced by its value in `values` (default
    `.*`: every value, as the dashboard's "All" does), Grafana's interval variables by 1m."""
    given = dict(values or {})

    def value(match: re.Match[str]) -> str:
        name = match["braced"] or match["bare"]
        if name in GRAFANA_VARIABLES:
            return "1m"
        return given.get(name, ".*")

    return _VARIABLE.sub(value, expr)


def load(path: Path = DASHBOARD) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(path.read_text())
    return found


@dataclass(frozen=True, kw_only=True)
class Query:
    """One PromQL query of the dashboard: a panel's target, or a template variable's values."""

    where: str  # `panel 3 "ETA" target A`, `variable cluster`
    expr: str


def panels(dashboard: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every panel, those inside collapsed rows included."""
    found = []
    for panel in dashboard.get("panels", []):
        found.append(panel)
        found += panel.get("panels", [])
    return found


def queries(dashboard: Mapping[str, Any] | None = None) -> list[Query]:
    """Every panel target's PromQL (the queries a real Prometheus must answer)."""
    board = load() if dashboard is None else dashboard
    return [
        Query(where=f'panel {p["id"]} "{p["title"]}" target {t["refId"]}', expr=t["expr"])
        for p in panels(board)
        for t in p.get("targets", [])
    ]


def variable_queries(dashboard: Mapping[str, Any] | None = None) -> list[Query]:
    """Every query variable's `label_values(...)` (Grafana's, not PromQL: its selector is a series query)."""
    board = load() if dashboard is None else dashboard
    found = []
    for variable in board.get("templating", {}).get("list", []):
        if variable.get("type") == "query":
            query = variable["query"]
            text = query.get("query", "") if isinstance(query, dict) else query
            found.append(Query(where=f"variable {variable['name']}", expr=text))
    return found
