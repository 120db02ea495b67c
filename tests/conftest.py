"""How the suites share the machine when `make test` runs them in parallel (pytest-xdist,
`--dist loadgroup`; lab/suite.py).

Each test module is one unit of work, so its module-scoped fixtures (a platform, a cluster of its
own) are set up once, on one worker. Modules that share a machine-wide singleton name a group of
their own instead (`pytestmark = pytest.mark.xdist_group(...)`), and a group runs on one worker,
one module after another: the real node (one per machine: its bridge, pod range and kubelet ports;
lab/realnode.py also holds a lock while one runs, for whoever else starts one).

The units are sent in the order they are collected, so that order is chosen here, by the rank
lab/suite.py gives (it also decides the background build's order): the real node's modules
first, then what needs only `make up`'s tools, and last the modules whose tools come later.
"""

from __future__ import annotations

import os

import pytest

import suite


def group_of(item: pytest.Item) -> str:
    marker = item.get_closest_marker("xdist_group")
    return str(marker.args[0]) if marker else suite.module_of(item.nodeid)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Before xdist's own hook reads the groups; the same order on every worker (a stable sort).
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(group_of(item)))
    items.sort(key=lambda item: suite.rank(item.nodeid, group_of(item)))


# What each module cost (its tests' set-up, call and tear-down, summed over whichever worker ran
# them), printed at the end of the run: docs/tests.md keeps the latest, so that a change that adds
# a heavy module says so.
MODULE_SECONDS: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    path = suite.module_of(report.nodeid)
    MODULE_SECONDS[path] = MODULE_SECONDS.get(path, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):  # an xdist worker: the controller reports for the run
        return
    counts = os.environ.get("TFK8S_TEST_COUNTS")
    if counts:  # for .ci/run's closing line
        stats = terminalreporter.stats
        failed = len(stats.get("failed", [])) + len(stats.get("error", []))
        with open(counts, "a") as out:
            out.write(f"{len(stats.get('passed', []))} passed, {failed} failed, {len(stats.get('skipped', []))} skipped\n")
    if not MODULE_SECONDS:
        return
    terminalreporter.section("seconds per module (set-up, tests and tear-down)")
    for path, seconds in sorted(MODULE_SECONDS.items(), key=lambda item: -item[1]):
        if seconds >= 1:
            terminalreporter.write_line(f"{seconds:8.0f}  {path}")
