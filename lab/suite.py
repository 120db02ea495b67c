"""`make test`: every suite, with the tests' own tools built beside them rather than before them.

Three lanes share the machine's cores:
- one build after another, what only the tests use: first, before pytest's run starts, the real
  node's packages, binaries and images (its modules are the longest chain, and a build starved by
  the test workers made the whole run wait for it); then, beside the tests, the other tools in the
  order the modules that need them are sent;
- the policy pack's tests and the Go modules' tests;
- one pytest run over every suite, its modules spread over `--workers` processes (pytest-xdist,
  `--dist loadgroup`, with tests/conftest.py's scheduler): each unit of work (`group_of`: a module,
  or the modules that share a machine-wide singleton) runs on one worker, and the units are sent
  in the order `rank` gives.

A test never depends on the background build: it asks for its tool (lab/toolenv.build,
lab/realnode.py) and waits under the tool's lock if the build is at it, or builds it itself if the
build has not come to it yet. So the order below only decides how soon each module can start.

Each stage's start (seconds since `--epoch`, default this run's start), duration and result is
printed as a table at the end and, with `--stages FILE`, appended to FILE as tab-separated lines,
where .ci/run collects the whole run's table.

  .venv/bin/python lab/suite.py [--workers N] [--stages FILE] [--epoch UNIX_TIME] [-- PYTEST_ARGS...]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = str(ROOT / ".venv" / "bin" / "python")
POLICY_PY = str(ROOT / "policies" / ".venv" / "bin" / "python")
TOOLS = str(ROOT / "hack" / "tools.sh")


# The units of pytest's work (`group_of`) and the order they are sent in (tests/conftest.py applies
# both): the real node's modules first, as one unit (one node per machine), in the order their tools and
# images come from the background build: they are the longest chain, and the first waits for the
# node's binaries and images, built first. Then what needs only `make up`'s tools. Last the modules
# that need a tool only the tests use, to give the background build the time to make it (one sent
# early still runs: it builds or waits for its tool itself).
REAL_NODE_GROUP = "real-node"
REAL_NODE_ORDER = (
    "tests/e2e/test_real_node.py",
    "tests/e2e/test_real_training.py",
    "tests/e2e/test_real_demo.py",
    "tests/e2e/test_real_network.py",
    "tests/e2e/test_real_user_node.py",
    "tests/e2e/test_real_notebook.py",
    "tests/e2e/test_real_observability.py",
    "tests/e2e/test_real_queueing.py",
)
LATE = (
    "tests/sdk/",
    "tests/e2e/test_network.py",
    "tests/e2e/test_gitops.py",
    "tests/e2e/test_gitops_kms.py",
    "tests/e2e/test_yaml_package.py",
    "tests/e2e/test_upgrade_yaml.py",
    "tests/e2e/test_queued_jobsets.py",
    "tests/e2e/test_queued_experiments.py",
    "tests/e2e/test_queued_tenant_boundary.py",
    "tests/e2e/test_upgrade_queued.py",
    "tests/training/test_prometheus_limits.py",
    "tests/e2e/test_legacy_cluster.py",
)


# The modules that share the session's queueing cluster (tests/e2e/conftest.py `queue_cli`): one
# worker starts it once and runs them in turn.
QUEUEING_GROUP = "queueing"
QUEUEING_MODULES = ("tests/e2e/test_queued_jobsets.py", "tests/e2e/test_queued_experiments.py")


def group_of(nodeid: str) -> str:
    """The unit of work the test `nodeid` belongs to: its module, or the group of modules that
    share a machine-wide singleton (one worker runs a unit's tests, in order)."""
    path = module_of(nodeid)
    if path in REAL_NODE_ORDER:
        return REAL_NODE_GROUP
    if path in QUEUEING_MODULES:
        return QUEUEING_GROUP
    return path


def module_of(nodeid: str) -> str:
    """The test module's path of a pytest node id (`tests/e2e/test_cli.py::test_x` -> its path)."""
    return nodeid.split("::", 1)[0]


def rank(nodeid: str) -> tuple[int, int]:
    """Where the test `nodeid` is sent: lower first."""
    path = module_of(nodeid)
    if path in REAL_NODE_ORDER:
        return 0, REAL_NODE_ORDER.index(path)
    late = [i for i, prefix in enumerate(LATE) if path.startswith(prefix)]
    return (2, late[0]) if late else (1, 0)


@dataclass(frozen=True)
class Step:
    name: str
    command: tuple[str, ...]
    cwd: Path = ROOT
    env: tuple[tuple[str, str], ...] = ()  # set over this process's environment
    niceness: int = 0  # run under `nice -n`: above 0, the tests beside it come first for the cores


def tool(name: str) -> Step:
    return Step(f"build: {name}", (TOOLS, name))


def image(name: str) -> Step:
    return Step(f"build: image {name}", (PY, str(ROOT / "lab" / "images.py"), "build", name))


@dataclass(frozen=True)
class FirstBuilds:
    """What pytest's workers wait for: `before`, in order, then each of `lanes` beside the others
    (each lane in order)."""

    before: tuple[Step, ...] = ()
    lanes: tuple[tuple[Step, ...], ...] = ()

    def steps(self) -> list[Step]:
        return [*self.before, *(step for lane in self.lanes for step in lane)]


def first_builds(root: bool) -> FirstBuilds:
    """The real node's packages, binaries and images: its modules are the longest chain, so these
    are built before pytest's workers start. Beside them, the workers took most of the two cores,
    and a cold build of the node took over 24 minutes instead of 8. The images (downloads, pip, a
    disk's worth of layers) and the node's Go build (the cores) go side by side once the packages
    (debootstrap among them) are there. Without root there is no real node (nor debootstrap for
    its images): its tests fail saying why."""
    if not root:
        return FirstBuilds()
    return FirstBuilds(
        before=(Step("build: real node's Debian packages", (str(ROOT / "lab" / "realnode.sh"), "install")),),
        lanes=((tool("node"),), tuple(image(name) for name in ("pause", "python", "tensorflow", "jupyter"))),
    )


# How far the background builds yield to the tests. Set when two real-node modules failed a cold
# run with TensorFlow pods never ready, put down to builds taking the pods' cores; the likelier cause
# was found later (the kubelet's image collection, docs/tests.md "Cold a sixth time"), and a pod on
# the node gets its limit beside busy loops at any priority (bench/real_node_cpu.py). It stays until
# a cold run measures the lane without it.
BACKGROUND_NICENESS = 10


def background_builds(root: bool) -> list[Step]:
    """What only the tests use besides, built while the tests run, yielding the cores to them (a
    test that needs a tool waits for it: then the build gets the waiting test's priority). In the
    order the real node's modules reach them (cyclonus, then Prometheus, then Kueue and JobSet: that
    chain decides the run), then the legacy control plane and Heketi (the last module sent). A cold
    run in the order before, Kueue before Prometheus, left the real node's chain waiting 6.6
    minutes for Prometheus. The small tools come last: the modules that need them are sent earlier
    and build them themselves."""
    steps = [
        tool("cyclonus"),
        tool("prometheus"),
        *([image("prometheus")] if root else []),
        *(tool(name) for name in ("kueue", "jobset", "kube-legacy")),
        Step("build: heketi", (str(ROOT / "lab" / "heketi.sh"), "build")),
        *(tool(name) for name in ("versitygw", "local-kms", "yaml-host", "gensdk")),
    ]
    return [dataclasses.replace(step, niceness=BACKGROUND_NICENESS) for step in steps]


# The Go modules' tests build with the checked-in go.sum, never updating the checkout, and with
# hack/tools.sh's flags (no cgo, -trimpath, no DWARF), so that the packages its builds of the same
# modules compiled are not compiled again.
GO_TEST_ENV = (("GOFLAGS", "-mod=readonly"), ("CGO_ENABLED", "0"))
GO_TEST = ("go", "test", "-trimpath", "-gcflags=all=-dwarf=false", ".")


def side_tests() -> list[Step]:
    """The tests outside pytest's run: the policy pack's (its own virtualenv) and the Go modules'."""
    return [
        Step("test: policy pack", (POLICY_PY, "-m", "pytest", "policies/tests", "-q", "-p", "no:cacheprovider")),
        Step("test: go test hack/langhost", GO_TEST, ROOT / "hack" / "langhost", GO_TEST_ENV),
        Step("test: go test hack/gensdk", GO_TEST, ROOT / "hack" / "gensdk", GO_TEST_ENV),
    ]


def pytest_run(workers: int, pytest_args: Sequence[str]) -> Step:
    command = (PY, "-m", "pytest", "-n", str(workers), "--dist", "loadgroup", "--durations=40", *pytest_args)
    # Unbuffered: its progress reaches a log or CI as tests end, not when a buffer fills.
    return Step(f"test: pytest, {workers} workers", command, env=(("PYTHONUNBUFFERED", "1"),))


@dataclass
class Record:
    name: str
    start: float
    seconds: float
    result: str


class Stages:
    """The stages' records, kept in the order they end; also appended to `path` when given."""

    def __init__(self, epoch: float, path: Path | None) -> None:
        self.epoch = epoch
        self.path = path
        self.records: list[Record] = []
        self.lock = threading.Lock()

    def run(self, step: Step) -> bool:
        started = time.time()
        print(f"[suite {time.strftime('%H:%M:%S')}] {step.name}: {shlex.join(step.command)}", flush=True)
        try:
            command = ("nice", "-n", str(step.niceness), *step.command) if step.niceness else step.command
            returncode = subprocess.run(command, cwd=step.cwd, env={**os.environ, **dict(step.env)}, check=False).returncode
            result = "ok" if returncode == 0 else f"exit {returncode}"
        except OSError as error:  # a missing interpreter or tool: the step failed, the lane goes on
            returncode, result = 127, f"could not start: {error}"
        record = Record(step.name, started - self.epoch, time.time() - started, result)
        with self.lock:
            self.records.append(record)
            if self.path:
                with self.path.open("a") as out:
                    out.write(f"{record.name}\t{record.start:.0f}\t{record.seconds:.0f}\t{record.result}\n")
        print(f"[suite {time.strftime('%H:%M:%S')}] {step.name}: {record.result} in {record.seconds:.0f} s", flush=True)
        return returncode == 0

    def run_all(self, steps: Sequence[Step]) -> None:
        """Each step in order, whatever the one before gave."""
        for step in steps:
            self.run(step)

    def table(self) -> str:
        lines = ["| stage | start (s) | seconds | result |", "|---|---:|---:|---|"]
        for r in sorted(self.records, key=lambda r: r.start):
            lines.append(f"| {r.name} | {r.start:.0f} | {r.seconds:.0f} | {r.result} |")
        return "\n".join(lines)


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=int(os.environ.get("TEST_WORKERS", "3")))
    parser.add_argument("--stages", type=Path, help="append each stage's record to this file")
    parser.add_argument("--epoch", type=float, help="the unix time stage starts count from")
    parser.add_argument("pytest_args", nargs="*")
    args = parser.parse_args(argv)
    stages = Stages(args.epoch or time.time(), args.stages)

    tests_ended = threading.Event()

    def build() -> None:
        # One after another: a build keeps both cores busy in its compile phases already. A failed
        # build goes on to the next: the tests that need it build it again and fail with its error.
        # Once pytest's run has ended (a subset, or an early failure), what is left is not needed.
        for step in background_builds(os.geteuid() == 0):
            if tests_ended.is_set():
                break
            stages.run(step)

    side_ok: list[bool] = []
    # The policy pack's and the Go modules' tests take a minute: beside the first builds.
    side = threading.Thread(target=lambda: side_ok.extend(stages.run(step) for step in side_tests()), name="side tests")
    side.start()
    # A failure is the real-node tests' to report: they build what failed again.
    first = first_builds(os.geteuid() == 0)
    for step in first.before:
        stages.run(step)
    first_lanes = [threading.Thread(target=stages.run_all, args=(lane,), name="first builds") for lane in first.lanes]
    for lane in first_lanes:
        lane.start()
    for lane in first_lanes:
        lane.join()
    lanes = [side, threading.Thread(target=build, name="background builds")]
    lanes[1].start()
    pytest_ok = stages.run(pytest_run(args.workers, args.pytest_args))
    tests_ended.set()
    for lane in lanes:
        lane.join()
    print(stages.table(), flush=True)
    return 0 if pytest_ok and len(side_ok) == len(side_tests()) and all(side_ok) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
