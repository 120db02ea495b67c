"""`make test`'s plan (lab/suite.py, tests/conftest.py): the order pytest's units of work are sent
in, the modules that share the real node held to one worker, the stages' records, and the tools'
builds safe to ask for twice at once (the background build and a test)."""

from __future__ import annotations

import ast
import os
import subprocess
from pathlib import Path

import pytest

import suite

ROOT = Path(__file__).resolve().parents[2]
E2E = ROOT / "tests" / "e2e"


@pytest.mark.parametrize(
    ("nodeid", "group", "want"),
    [
        ("tests/e2e/test_real_node.py::test_x", suite.REAL_NODE_GROUP, (0, 0)),
        ("tests/e2e/test_real_observability.py::test_x", suite.REAL_NODE_GROUP, (0, 5)),
        ("tests/unit/test_config.py::test_x[a]", "tests/unit/test_config.py", (1, 0)),
        ("tests/e2e/test_cli.py::test_x", "tests/e2e/test_cli.py", (1, 0)),
        ("tests/sdk/test_go_sdk.py::test_x", "tests/sdk/test_go_sdk.py", (2, 0)),
        ("tests/e2e/test_legacy_cluster.py::test_x", "tests/e2e/test_legacy_cluster.py", (2, len(suite.LATE) - 1)),
    ],
    ids=["real-node-first", "real-node-in-build-order", "unit", "main-tools-e2e", "late-sdk", "late-legacy"],
)
def test_rank_sends_the_real_node_first_and_the_late_tools_last(nodeid: str, group: str, want: tuple[int, int]) -> None:
    assert suite.rank(nodeid, group) == want


def test_a_sort_by_rank_keeps_the_collection_order_within_a_rank() -> None:
    collected = [
        ("tests/unit/test_b.py::t", "tests/unit/test_b.py"),
        ("tests/e2e/test_gitops.py::t", "tests/e2e/test_gitops.py"),
        ("tests/unit/test_a.py::t", "tests/unit/test_a.py"),
        ("tests/e2e/test_real_training.py::t", suite.REAL_NODE_GROUP),
        ("tests/e2e/test_network.py::t", "tests/e2e/test_network.py"),
        ("tests/e2e/test_real_node.py::t", suite.REAL_NODE_GROUP),
    ]
    ordered = [nodeid for nodeid, _ in sorted(collected, key=lambda c: suite.rank(*c))]
    assert ordered == [
        "tests/e2e/test_real_node.py::t",
        "tests/e2e/test_real_training.py::t",
        "tests/unit/test_b.py::t",
        "tests/unit/test_a.py::t",
        "tests/e2e/test_network.py::t",
        "tests/e2e/test_gitops.py::t",
    ]


def module_group(path: Path) -> str | None:
    """The name a module's `pytestmark = pytest.mark.xdist_group(NAME)` gives, NAME as written."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets):
            call = node.value
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "xdist_group":
                (argument,) = call.args
                return ast.unparse(argument)
    return None


def test_every_module_that_starts_the_real_node_runs_in_its_group_in_a_known_place() -> None:
    starters = sorted(
        path
        for path in E2E.glob("test_*.py")
        if any(call in path.read_text() for call in ("real_cluster(", '[REALNODE, "start"]'))
    )
    assert len(starters) >= 6, starters
    for path in starters:
        assert module_group(path) == "REAL_NODE_GROUP", f"{path.name} starts the real node outside its xdist group"
        assert f"tests/e2e/{path.name}" in suite.REAL_NODE_ORDER, f"{path.name} has no place in suite.REAL_NODE_ORDER"
    # And no other module claims the node's group.
    others = [p.name for p in E2E.glob("test_*.py") if p not in starters and module_group(p) == "REAL_NODE_GROUP"]
    assert not others


def test_the_modules_that_share_the_queueing_cluster_share_a_worker() -> None:
    sharers = sorted(p.name for p in E2E.glob("test_*.py") if "queue_cli" in p.read_text() or "queue_kube" in p.read_text())
    assert sharers == ["test_queued_experiments.py", "test_queued_jobsets.py"]
    assert {module_group(E2E / name) for name in sharers} == {"QUEUEING_GROUP"}


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


def test_two_asks_for_one_tool_at_once_build_it_once(tmp_path: Path) -> None:
    """hack/tools.sh under its per-tool lock: the second asker waits for the first build, then
    finds the tool cached. A `go` of our own records each build, taking a second over it."""
    fake = tmp_path / "fakebin"
    fake.mkdir()
    builds = tmp_path / "builds.log"
    (fake / "go").write_text(
        "#!/bin/sh\n"
        f'echo "$*" >>{builds}\n'
        '[ "$1" = install ] || exit 0\n'
        "sleep 1\n"
        'mkdir -p "$GOBIN" && printf "#!/bin/sh\\n" >"$GOBIN/cyclonus" && chmod +x "$GOBIN/cyclonus"\n'
    )
    (fake / "go").chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{fake}{os.pathsep}{os.environ['PATH']}",
        "TFK8S_CACHE": str(tmp_path / "cache"),
        "GOMODCACHE": str(tmp_path / "modules"),
    }
    askers = [
        subprocess.Popen([str(ROOT / "hack" / "tools.sh"), "cyclonus"], env=env, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    errors = [asker.communicate(timeout=60)[1] for asker in askers]
    assert [asker.returncode for asker in askers] == [0, 0], errors
    installs = [line for line in builds.read_text().splitlines() if line.startswith("install")]
    assert len(installs) == 1, installs
    assert os.access(tmp_path / "cache" / "bin" / "cyclonus", os.X_OK)
