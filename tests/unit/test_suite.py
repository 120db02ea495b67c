"""`make test`'s plan (lab/suite.py, tests/conftest.py): the order pytest's units of work are sent
in, the modules that share the real node held to one worker, the stages' records, and the tools'
builds safe to ask for twice at once (the background build and a test)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import suite

ROOT = Path(__file__).resolve().parents[2]
E2E = ROOT / "tests" / "e2e"


@pytest.mark.parametrize(
    ("nodeid", "want"),
    [
        ("tests/e2e/test_real_node.py::test_x", (0, 0)),
        ("tests/e2e/test_real_queueing.py::test_x", (0, len(suite.REAL_NODE_ORDER) - 1)),
        ("tests/unit/test_config.py::test_x[a]", (1, 0)),
        ("tests/e2e/test_cli.py::test_x", (1, 0)),
        ("tests/sdk/test_go_sdk.py::test_x", (2, 0)),
        ("tests/e2e/test_legacy_cluster.py::test_x", (2, len(suite.LATE) - 1)),
    ],
    ids=["real-node-first", "real-node-in-build-order", "unit", "main-tools-e2e", "late-sdk", "late-legacy"],
)
def test_rank_sends_the_real_node_first_and_the_late_tools_last(nodeid: str, want: tuple[int, int]) -> None:
    assert suite.rank(nodeid) == want


def test_a_sort_by_rank_keeps_the_collection_order_within_a_rank() -> None:
    collected = [
        "tests/unit/test_b.py::t",
        "tests/e2e/test_gitops.py::t",
        "tests/unit/test_a.py::t",
        "tests/e2e/test_real_training.py::t",
        "tests/e2e/test_network.py::t",
        "tests/e2e/test_real_node.py::t",
    ]
    assert sorted(collected, key=suite.rank) == [
        "tests/e2e/test_real_node.py::t",
        "tests/e2e/test_real_training.py::t",
        "tests/unit/test_b.py::t",
        "tests/unit/test_a.py::t",
        "tests/e2e/test_network.py::t",
        "tests/e2e/test_gitops.py::t",
    ]


@pytest.mark.parametrize(
    ("nodeid", "want"),
    [
        ("tests/unit/test_config.py::test_x[a::b]", "tests/unit/test_config.py"),
        ("tests/e2e/test_real_user_node.py::test_x", suite.REAL_NODE_GROUP),
        ("tests/e2e/test_queued_jobsets.py::test_x", suite.QUEUEING_GROUP),
        ("tests/e2e/test_queued_tenant_boundary.py::test_x", "tests/e2e/test_queued_tenant_boundary.py"),
    ],
    ids=["a-module", "the-real-node", "the-queueing-cluster", "a-queued-module-of-its-own"],
)
def test_a_unit_of_work_is_a_module_or_the_modules_that_share_a_singleton(nodeid: str, want: str) -> None:
    assert suite.group_of(nodeid) == want


def test_every_module_that_starts_the_real_node_is_in_its_unit_in_a_known_place() -> None:
    starters = sorted(
        f"tests/e2e/{path.name}"
        for path in E2E.glob("test_*.py")
        if any(call in path.read_text() for call in ("real_cluster(", '[REALNODE, "start"]', "make up-real-node"))
    )
    assert len(starters) >= 6, starters
    assert sorted(suite.REAL_NODE_ORDER) == starters


def test_the_modules_that_share_the_queueing_cluster_share_a_unit() -> None:
    sharers = sorted(
        f"tests/e2e/{p.name}" for p in E2E.glob("test_*.py") if "queue_cli" in p.read_text() or "queue_kube" in p.read_text()
    )
    assert sharers == sorted(suite.QUEUEING_MODULES)


# The stand-ins' modules and their tests' counts. unit/test_a is the largest unit: xdist's own order
# (largest first) would send it first.
STAND_INS = {
    "unit/test_a": 8,
    "e2e/test_real_training": 2,
    "unit/test_b": 2,
    "e2e/test_real_node": 2,
    "unit/test_c": 2,
    "e2e/test_cli": 2,
}


def xdist_run(tmp_path: Path, workers: int, env: dict[str, str] | None = None, failing: str = "") -> list[tuple[str, str]]:
    """Stand-ins of the real node's two modules and four others, run by pytest-xdist with
    tests/conftest.py's scheduler; (worker, module) of each test, in the order they ran. The
    stand-in named `failing` (module::test) fails after it has run."""
    tests = tmp_path / "tests"
    for folder in ("e2e", "unit"):
        (tests / folder).mkdir(parents=True)
    (tests / "conftest.py").write_text((ROOT / "tests" / "conftest.py").read_text())
    record = tmp_path / "ran.log"
    test = (
        "def test_INDEX():\n"
        f"    with open({str(record)!r}, 'a') as out:\n"
        "        out.write(os.environ['PYTEST_XDIST_WORKER'] + ' ' + __name__ + '\\n')\n"
        "    time.sleep(0.1)\n"
    )
    for module, count in STAND_INS.items():
        body = "import os, time\n" + "".join(test.replace("INDEX", str(i)) for i in range(count))
        if failing.startswith(f"{module}::"):
            name = failing.split("::")[1]
            body = body.replace(f"def {name}():\n", f"def {name}():\n    assert not 'fails', 'the stand-in fails'\n")
        (tests / f"{module}.py").write_text(body)
    # Not the files of the run this test is part of (.ci/run's), nor its worker's identity.
    outer = {k: v for k, v in os.environ.items() if k not in ("TFK8S_MODULE_TIMES", "TFK8S_TEST_COUNTS", "PYTEST_XDIST_WORKER")}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", str(workers), "--dist", "loadgroup", "-p", "no:cacheprovider", "-q", "tests"],
        cwd=tmp_path,
        env={**outer, "PYTHONPATH": str(ROOT / "lab"), **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == (1 if failing else 0), run.stdout[-2000:] + run.stderr[-2000:]
    ran = [tuple(line.split()) for line in record.read_text().splitlines()]
    assert len(ran) == sum(STAND_INS.values()) - (1 if failing else 0)
    return ran  # type: ignore[return-value]


def test_xdist_runs_each_unit_on_one_worker_the_real_nodes_modules_in_order(tmp_path: Path) -> None:
    ran = xdist_run(tmp_path, workers=3)
    for module in {m for _, m in ran}:
        assert len({w for w, m in ran if m == module}) == 1, (module, ran)
    (worker,) = {w for w, m in ran if m.startswith("test_real_")}
    assert [m for w, m in ran if w == worker][:4] == ["test_real_node"] * 2 + ["test_real_training"] * 2, ran


def test_xdist_sends_the_real_nodes_unit_first_and_the_rest_in_collection_order(tmp_path: Path) -> None:
    ran = xdist_run(tmp_path, workers=1)
    modules = [m for i, (_, m) in enumerate(ran) if i == 0 or ran[i - 1][1] != m]
    assert modules == ["test_real_node", "test_real_training", "test_cli", "test_a", "test_b", "test_c"], ran


def test_each_modules_seconds_so_far_are_kept_in_a_file_for_a_run_stopped_before_its_end(tmp_path: Path) -> None:
    """What .ci/run prints when CI's time limit stops pytest before its own table: the controller
    keeps every module's seconds so far in TFK8S_MODULE_TIMES, the longest first."""
    times = tmp_path / "modules.txt"
    xdist_run(tmp_path, workers=2, env={"TFK8S_MODULE_TIMES": str(times)})
    rows = [line.split() for line in times.read_text().splitlines()]
    assert sorted(path for _, _, path in rows) == sorted(f"tests/{m}.py" for m in STAND_INS)
    assert rows[0][2] == "tests/unit/test_a.py" and float(rows[0][0]) >= 0.8, rows  # 8 tests of 0.1 s at least
    assert not list(tmp_path.glob("modules.txt.*")), "a partial write left behind"


def test_the_counts_file_names_each_failed_test_and_its_cause_after_the_counts(tmp_path: Path) -> None:
    """CI keeps only the end of .ci/run's output: the file it prints there says which tests failed
    and why, not only how many."""
    counts = tmp_path / "counts.txt"
    xdist_run(tmp_path, workers=2, env={"TFK8S_TEST_COUNTS": str(counts)}, failing="unit/test_b::test_1")
    lines = counts.read_text().splitlines()
    assert lines[0] == f"{sum(STAND_INS.values()) - 1} passed, 1 failed, 0 skipped", lines
    cause = "AssertionError: the stand-in fails assert not 'fails'"
    assert lines[1:] == [f"FAILED tests/unit/test_b.py::test_1 (call): {cause}"], lines


def test_background_builds_yield_the_cores_to_the_tests(tmp_path: Path) -> None:
    assert all(step.niceness > 0 for step in suite.background_builds(root=True))
    assert all(step.niceness == 0 for step in suite.first_builds(root=True).steps())  # the tests wait for these
    out = tmp_path / "nice"
    stages = suite.Stages(epoch=0.0, path=None)
    assert stages.run(suite.Step("niced", ("sh", "-c", f"nice >{out}"), niceness=suite.BACKGROUND_NICENESS))
    assert int(out.read_text()) >= suite.BACKGROUND_NICENESS  # what the step's process ran at


def test_the_nodes_go_build_and_its_images_go_side_by_side_after_its_packages() -> None:
    first = suite.first_builds(root=True)
    assert [step.name for step in first.before] == ["build: real node's Debian packages"]  # debootstrap
    lanes = [[step.name for step in lane] for lane in first.lanes]
    assert ["build: node"] in lanes
    assert ["build: image pause", "build: image python", "build: image tensorflow", "build: image jupyter"] in lanes
    assert suite.first_builds(root=False).steps() == []  # no real node without root


def test_stages_record_each_step_with_its_result_in_the_file_and_the_table(tmp_path: Path) -> None:
    records = tmp_path / "stages.tsv"
    stages = suite.Stages(epoch=0.0, path=records)
    assert stages.run(suite.Step("passes", ("true",))) is True
    assert stages.run(suite.Step("fails", ("sh", "-c", 'exit "$CODE"'), env=(("CODE", "3"),))) is False
    lines = [line.split("\t") for line in records.read_text().splitlines()]
    assert [(line[0], line[3]) for line in lines] == [("passes", "ok"), ("fails", "exit 3")]
    assert all(int(line[1]) > 1_000_000_000 for line in lines)  # seconds since the epoch given (0)
    table = stages.table()
    assert "| passes |" in table and "| fails |" in table and "exit 3" in table


def with_fake_go(tmp_path: Path, script: str) -> dict[str, str]:
    """An environment whose `go` runs `script` (shell), then leaves a versitygw where `go install`
    would, and whose tool cache and module cache are the test's own."""
    fake = tmp_path / "fakebin"
    fake.mkdir()
    (fake / "go").write_text(
        "#!/bin/sh\n" + script + 'mkdir -p "$GOBIN" && printf "#!/bin/sh\\n" >"$GOBIN/versitygw" && chmod +x "$GOBIN/versitygw"\n'
    )
    (fake / "go").chmod(0o755)
    return {
        **os.environ,
        "PATH": f"{fake}{os.pathsep}{os.environ['PATH']}",
        "TFK8S_CACHE": str(tmp_path / "cache"),
        "GOMODCACHE": str(tmp_path / "modules"),
    }


def test_two_asks_for_one_tool_at_once_build_it_once(tmp_path: Path) -> None:
    """hack/tools.sh under its per-tool lock: the second asker waits for the first build, then
    finds the tool cached. A `go` of our own records each build, taking a second over it."""
    builds = tmp_path / "builds.log"
    env = with_fake_go(tmp_path, f'echo "$*" >>{builds}\n[ "$1" = install ] || exit 0\nsleep 1\n')
    askers = [
        subprocess.Popen([str(ROOT / "hack" / "tools.sh"), "versitygw"], env=env, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    errors = [asker.communicate(timeout=60)[1] for asker in askers]
    assert [asker.returncode for asker in askers] == [0, 0], errors
    installs = [line for line in builds.read_text().splitlines() if line.startswith("install")]
    assert len(installs) == 1, installs
    assert os.access(tmp_path / "cache" / "bin" / "versitygw", os.X_OK)


def test_a_niced_build_someone_waits_for_gets_full_priority_back(tmp_path: Path) -> None:
    """The background lane builds under `nice` (BACKGROUND_NICENESS); a test that asks for the tool
    meanwhile waits on its lock, and the build then runs at the waiter's niceness (as root; anyone
    else may not lower a niceness, and waits as it is). A `go` of our own records its niceness
    before and after the second asker arrives."""
    seen = tmp_path / "nice.log"
    env = with_fake_go(tmp_path, f'[ "$1" = install ] || exit 0\nnice >>{seen}\nsleep 3\nnice >>{seen}\n')
    tools = str(ROOT / "hack" / "tools.sh")
    lane = subprocess.Popen(["nice", "-n", str(suite.BACKGROUND_NICENESS), tools, "versitygw"], env=env, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 10
    while not seen.exists():  # the build has started
        assert time.monotonic() < deadline
        time.sleep(0.05)
    test = subprocess.run([tools, "versitygw"], env=env, capture_output=True, text=True, timeout=60)
    assert lane.wait(timeout=60) == 0 and test.returncode == 0, test.stderr
    before, after = (int(line) for line in seen.read_text().split())
    ours = os.nice(0)  # this process's, and so the waiter's
    assert before == min(ours + suite.BACKGROUND_NICENESS, 19)
    assert after == (ours if os.geteuid() == 0 else before)
