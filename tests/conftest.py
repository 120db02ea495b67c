"""How the suites share the machine when `make test` runs them in parallel (pytest-xdist,
`--dist loadgroup`; lab/suite.py).

Each unit of work runs on one worker, its tests in order: a test module, so that its
module-scoped fixtures (a platform, a cluster of its own) are set up once, or the modules that share
a machine-wide singleton (`suite.group_of`): the real node (one per machine: its bridge, pod range
and kubelet ports; lab/realnode.py also holds a lock while one runs, for whoever else starts one)
and the session's queueing cluster. The units are sent in the order `suite.rank` gives: the
real node's modules first, then what needs only `make up`'s tools, and last the modules whose tools
the background build makes later.

The units come from the node ids here, not from `xdist_group` marks: xdist's loadgroup reads a
mark by rewriting node ids, which pytest 9.2 ignores (pytest-xdist#1386), and then spreads a
group's tests over every worker, where they wait on the real node's lock one after another.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

import suite


class UnitScheduling(LoadScopeScheduling):
    """xdist's load-by-scope scheduling, with `suite.group_of` as the scope of a test."""

    def _split_scope(self, nodeid: str) -> str:
        return suite.group_of(nodeid)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> LoadScopeScheduling | None:
    if config.getvalue("dist") != "loadgroup":
        return None
    # The units in the order `suite.rank` sorted them into, not xdist's largest first (its default
    # for scopes, `--loadscope-reorder`), which sent the real node's unit after big unit modules.
    config.option.loadscopereorder = False
    return UnitScheduling(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The units are sent in the order their first tests are collected; the same on every worker
    # (a stable sort).
    items.sort(key=lambda item: suite.rank(item.nodeid))


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
