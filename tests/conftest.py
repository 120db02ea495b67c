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
import resource
import time
from collections.abc import Iterator
from pathlib import Path
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


def pytest_configure(config: pytest.Config) -> None:
    global IS_WORKER
    IS_WORKER = hasattr(config, "workerinput")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The units are sent in the order their first tests are collected; the same on every worker
    # (a stable sort).
    items.sort(key=lambda item: suite.rank(item.nodeid))


# What each module cost (its tests' set-up, call and tear-down, summed over whichever worker ran
# them), printed at the end of the run: docs/tests.md keeps the latest, so that a change that adds
# a heavy module says so. Wall seconds, and CPU-seconds: what the worker's process and the children
# it waited for (pulumi and its plugins, TensorFlow's loopback tasks, kubectl) spent, which is what
# a cold CI, busy on both cores, pays for. Not counted: daemons no test waits for (a kwok cluster's
# components, the real node's containers).
MODULE_SECONDS: dict[str, float] = {}
MODULE_CPU_SECONDS: dict[str, float] = {}
CPU_PROPERTY = "tfk8s-cpu-seconds"
IS_WORKER = False  # this process an xdist worker, which leaves the run's table to the controller


def module_rows(at_least: float = 0.0) -> list[str]:
    """The table's rows so far, of the modules that took `at_least` seconds, the longest first:
    wall seconds, CPU-seconds, path."""
    by_wall = sorted(((s, path) for path, s in MODULE_SECONDS.items() if s >= at_least), reverse=True)
    return [f"{seconds:8.0f}  {MODULE_CPU_SECONDS.get(path, 0.0):8.0f}  {path}" for seconds, path in by_wall]


def cpu_seconds() -> float:
    """This process's CPU-seconds, and its reaped children's."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def _timed_phase(item: pytest.Item, when: str) -> Iterator[None]:
    started = cpu_seconds()
    yield
    # Read into this phase's report (pytest copies the item's properties into each report it makes).
    item.user_properties.append((f"{CPU_PROPERTY}:{when}", cpu_seconds() - started))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    yield from _timed_phase(item, "setup")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    yield from _timed_phase(item, "call")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    yield from _timed_phase(item, "teardown")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if getattr(report, "context", None) is not None:  # a subtest's: its test's own report counts its time
        return
    path = suite.module_of(report.nodeid)
    MODULE_SECONDS[path] = MODULE_SECONDS.get(path, 0.0) + report.duration
    spent = sum(v for k, v in report.user_properties if k == f"{CPU_PROPERTY}:{report.when}")
    MODULE_CPU_SECONDS[path] = MODULE_CPU_SECONDS.get(path, 0.0) + spent
    so_far = os.environ.get("TFK8S_MODULE_TIMES")
    if so_far and not IS_WORKER:  # the run's whole count: the controller's (or a run without xdist)
        _write_module_times(Path(so_far))


def _write_module_times(path: Path) -> None:
    """The table so far, kept in a file (TFK8S_MODULE_TIMES) as each report arrives: when a run is
    stopped before its end (CI's time limit), .ci/run prints what each module had cost by then."""
    partial = path.with_name(path.name + ".tmp")
    partial.write_text("".join(f"{row}\n" for row in module_rows()))
    partial.replace(path)


def _crash_line(report: pytest.TestReport) -> str:
    """The line that says why a test failed (its exception's first line), cut to one screen line."""
    crash = getattr(report.longrepr, "reprcrash", None)
    message = crash.message if crash is not None else str(report.longrepr)
    return " ".join(message.split())[:300]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    if IS_WORKER:
        return
    counts = os.environ.get("TFK8S_TEST_COUNTS")
    if counts:  # for .ci/run's closing line
        # Tests, not their subtests: a failed subtest fails its test too, which counts it.
        stats = {
            kind: [r for r in reports if getattr(r, "context", None) is None] for kind, reports in terminalreporter.stats.items()
        }
        failures = stats.get("failed", []) + stats.get("error", [])
        with open(counts, "w") as out:
            out.write(f"{len(stats.get('passed', []))} passed, {len(failures)} failed, {len(stats.get('skipped', []))} skipped\n")
            # CI keeps only its output's last lines: the failures' names and causes among them.
            out.writelines(f"FAILED {r.nodeid} ({r.when}): {_crash_line(r)}\n" for r in failures)
    if not MODULE_SECONDS:
        return
    terminalreporter.section("seconds per module (set-up, tests and tear-down): wall, CPU")
    for row in module_rows(at_least=1):
        terminalreporter.write_line(row)
    terminalreporter.write_line(f"{sum(MODULE_SECONDS.values()):8.0f}  {sum(MODULE_CPU_SECONDS.values()):8.0f}  (all)")
