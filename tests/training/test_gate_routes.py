"""The TensorBoard gate's own routes (tfk8s_train.gate_routes), through a real gate process on loopback
with a log volume of fabricated runs: progress as JSON and a task's log as text, behind the same
token as everything else, answered by the gate itself and never forwarded, with no way out of the
log volume (`..`, its percent-encodings, absolute paths, links). Then `tfk8s status` and `tfk8s
logs` (tfk8s.cli) against that gate, as a user runs them, and an experiment's readiness reading its
clusters' progress from it (tfk8s.stack_kinds.progress), as `pulumi up` does."""

from __future__ import annotations

import base64
import io
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from fabricated_runs import NOW, settle, write_log, write_progress
from gate_processes import TOKEN, RecordingBackend, gate_process, request
from tfk8s.cli import main as cli
from tfk8s.kube.api_paths import SECRET
from tfk8s.kube.secrets import Get
from tfk8s.settings.contract import TenantFacts
from tfk8s.stack_kinds import progress

AUTH = {"Authorization": f"token {TOKEN}"}
PS_LINES = [f"ps line {i}" for i in range(5)]


@pytest.fixture(scope="module")
def volume(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("volume")
    logs = root / "logs"
    write_progress(logs, "u1", "ps-0", state="retired", updated_at=NOW - 50)
    write_progress(logs, "u1", "worker-0", state="succeeded", exit_code=0, step=300, target_steps=300, updated_at=NOW - 40)
    write_progress(logs, "u1", "worker-1", state="failed", exit_code=1, step=290, target_steps=300, updated_at=NOW - 45)
    write_log(logs, "u1", "ps-0.log.2", PS_LINES[:2])
    write_log(logs, "u1", "ps-0.log.1", PS_LINES[2:4])
    write_log(logs, "u1", "ps-0.log", PS_LINES[4:])
    write_log(logs, "u1", "worker-1.log", ["Traceback (most recent call last):", "ValueError: boom"])
    write_log(logs, "u0", "worker-1.log", ["an older run"])
    settle(logs, "u0", NOW - 3600)
    settle(logs, "u1", NOW - 40)
    (root / "outside").mkdir()
    write_log(root / "outside", "u9", "worker-0.log", ["what lies outside"], experiment="dev", cluster="mnist")
    (logs / "linked").symlink_to(root / "outside" / "dev")  # a link to a directory out of the volume
    (root / "passwd").write_text("root:x:0:0\n")
    return root


@pytest.fixture(scope="module")
def gate(volume: Path) -> Iterator[tuple[int, RecordingBackend]]:
    with RecordingBackend() as backend, gate_process(backend.port, "--log-root", str(volume / "logs")) as port:
        yield port, backend


@pytest.mark.parametrize("path", ["/tfk8s/status", "/tfk8s/logs/dev/mnist/ps-0", "/tfk8s/nothing"])
def test_without_the_token_the_routes_answer_401(gate: tuple[int, RecordingBackend], path: str) -> None:
    port, backend = gate
    for headers in [{}, {"Authorization": "token wrong"}, {"Cookie": f"tfk8s-tensorboard-alice={TOKEN}"}]:
        status, _, body = request(port, path, headers)
        assert status == 401 and b"needs the tenant's token" in body, (path, headers)
    assert not backend.seen


def test_status_is_every_experiments_clusters_by_their_latest_run(gate: tuple[int, RecordingBackend]) -> None:
    port, backend = gate
    status, headers, body = request(port, "/tfk8s/status", AUTH)
    assert status == 200 and headers["content-type"] == "application/json" and headers["cache-control"] == "no-store"
    found = json.loads(body)
    cluster = found["experiments"]["dev"]["clusters"]["mnist"]
    assert (cluster["run"], cluster["state"], cluster["step"], cluster["finished"]) == ("u1", "failed", 300, True)
    assert found["experiments"].keys() == {"dev"}  # the link to another directory is not an experiment
    status, _, body = request(port, "/tfk8s/status?experiment=dev", AUTH)
    assert status == 200 and json.loads(body)["experiments"].keys() == {"dev"}
    status, _, body = request(port, "/tfk8s/status?experiment=nope", AUTH)
    assert status == 404 and body.startswith(b"tfk8s: no experiment 'nope'")
    assert not backend.seen  # answered by the gate, never TensorBoard


def test_a_session_cookie_reaches_the_routes_too(gate: tuple[int, RecordingBackend]) -> None:
    port, backend = gate
    status, headers, _ = request(port, f"/tfk8s/status?experiment=dev&token={TOKEN}")
    assert status == 303 and headers["location"] == "/tfk8s/status?experiment=dev"
    cookie = headers["set-cookie"].split(";")[0]
    status, _, body = request(port, headers["location"], {"Cookie": cookie})
    assert status == 200 and "mnist" in json.loads(body)["experiments"]["dev"]["clusters"]
    assert not backend.seen


def test_a_tasks_log_reads_in_order_across_its_rotated_files(gate: tuple[int, RecordingBackend]) -> None:
    port, _ = gate
    status, headers, body = request(port, "/tfk8s/logs/dev/mnist/ps-0", AUTH)
    assert status == 200 and body.decode().splitlines() == PS_LINES
    assert headers["content-type"] == "text/plain; charset=utf-8" and headers["x-tfk8s-run"] == "u1"
    # A log holds whatever the training printed: never a page a browser renders or caches.
    assert headers["x-content-type-options"] == "nosniff" and "sandbox" in headers["content-security-policy"]
    status, _, body = request(port, "/tfk8s/logs/dev/mnist/ps-0?tail=3", AUTH)
    assert status == 200 and body.decode().splitlines() == PS_LINES[-3:]
    status, _, body = request(port, "/tfk8s/logs/dev/mnist/worker-1?run=u0", AUTH)
    assert status == 200 and body == b"an older run\n"
    status, headers, body = request(port, "/tfk8s/logs/dev/mnist/ps-0", AUTH, method="HEAD")
    assert status == 200 and body == b"" and int(headers["content-length"]) == len("".join(f"{line}\n" for line in PS_LINES))


@pytest.mark.parametrize(
    "path, status, says",
    [
        ("/tfk8s/logs/dev/mnist/worker-0", 404, b"no log of worker-0 in run u1 of dev/mnist; tasks with logs: ps-0, worker-1"),
        ("/tfk8s/logs/dev/mnist/ps-0?run=u7", 404, b"no logs of run u7"),
        ("/tfk8s/logs/dev/other/ps-0", 404, b"no run of dev/other"),
        ("/tfk8s/logs/dev/mnist/ps-0?tail=0", 400, b"tail '0'"),
        ("/tfk8s/logs/dev/mnist/ps-0?tail=-1", 400, b"tail '-1'"),
        ("/tfk8s/logs/dev/mnist/ps-0?lines=3", 400, b"unknown parameter 'lines'"),
        ("/tfk8s/logs/dev/mnist/ps-0?run=u1&run=u0", 400, b"more than once"),
        ("/tfk8s/logs/dev/mnist/ps-0/more", 404, b"no such route"),
        ("/tfk8s", 404, b"no such route"),
    ],
    ids=[
        "no-such-task",
        "no-such-run",
        "no-such-cluster",
        "tail-zero",
        "tail-negative",
        "unknown-param",
        "twice",
        "deeper",
        "bare",
    ],
)
def test_what_is_not_there_is_named(gate: tuple[int, RecordingBackend], path: str, status: int, says: bytes) -> None:
    port, backend = gate
    got, _, body = request(port, path, AUTH)
    assert got == status and says in body, body
    assert not backend.seen


@pytest.mark.parametrize(
    "path",
    [
        "/tfk8s/logs/../../passwd/x/ps-0",
        "/tfk8s/logs/dev/../../../passwd/ps-0",
        "/tfk8s/logs/%2e%2e/%2e%2e/outside/ps-0",
        "/tfk8s/logs/%2E%2E/dev/mnist/ps-0",
        "/tfk8s/logs/dev/mnist/..%2f..%2f..%2fpasswd",
        "/tfk8s/logs/dev%2fmnist/x/ps-0",
        "/tfk8s/logs//etc/passwd/ps-0",
        "/tfk8s//logs/dev/mnist/ps-0",
        "/tfk8s/logs/dev/./mnist/ps-0",
        "/tfk8s/logs/%2Fetc/passwd/ps-0",
        "/tfk8s/logs/dev/mnist/ps-0%00",
        "/tfk8s/logs/dev/mnist/ps-0?run=../../outside",
        "/tfk8s/logs/dev/mnist/ps-0?run=%2e%2e",
        "/tfk8s/logs/dev/mnist/%c0%ae%c0%ae",
        "/tfk8s/status?experiment=..",
        "/tfk8s/status?experiment=%2Fetc",
    ],
)
def test_no_path_leaves_the_log_volume(gate: tuple[int, RecordingBackend], path: str) -> None:
    port, backend = gate
    status, _, body = request(port, path, AUTH)
    assert status == 400 and body.startswith(b"tfk8s: "), (path, status, body)
    assert b"root:x" not in body and not backend.seen


def test_links_in_the_volume_are_not_followed(gate: tuple[int, RecordingBackend]) -> None:
    port, _ = gate
    for path in [
        "/tfk8s/logs/linked/mnist/worker-0",
        "/tfk8s/logs/linked/mnist/worker-0?run=u9",
        "/tfk8s/status?experiment=linked",
    ]:
        status, _, body = request(port, path, AUTH)
        assert status == 404 and b"what lies outside" not in body, (path, body)


def test_the_routes_keep_the_connection_and_refuse_other_methods(gate: tuple[int, RecordingBackend]) -> None:
    port, backend = gate
    status, headers, body = request(port, "/tfk8s/status", AUTH, method="POST")
    assert status == 405 and b"GET and HEAD alone" in body
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        ask = f"GET /tfk8s/logs/dev/mnist/worker-1?tail=1 HTTP/1.1\r\nHost: x\r\nAuthorization: token {TOKEN}\r\n\r\n".encode()
        raw.sendall(ask * 2)  # two requests on one connection: both answered
        received = b""
        while received.count(b"ValueError: boom") < 2:
            chunk = raw.recv(65536)
            assert chunk, received
            received += chunk
    assert received.count(b"HTTP/1.1 200") == 2
    assert not backend.seen


def test_other_paths_still_reach_tensorboard(gate: tuple[int, RecordingBackend]) -> None:
    port, backend = gate
    status, _, _ = request(port, "/data/tfk8s/status", AUTH)
    assert status == 200 and len(backend.seen) == 1
    backend.seen.clear()


def test_a_gate_without_a_log_volume_says_so() -> None:
    with RecordingBackend() as backend, gate_process(backend.port) as port:
        status, _, body = request(port, "/tfk8s/status", AUTH)
        assert status == 404 and b"started without --log-root" in body and not backend.seen


def cli_world(port: int, out: io.StringIO, err: io.StringIO) -> cli.World:
    """The URL and the token given, as the environment gives them; no pulumi to ask for the rest."""
    environ = {"TFK8S_TENSORBOARD_URL": f"http://127.0.0.1:{port}/", "TFK8S_TOKEN": TOKEN}
    slept: list[float] = []

    def sleep(seconds: float) -> None:  # a watch that never ends fails instead
        slept.append(seconds)
        assert len(slept) < 20, "--watch did not end"

    no_pulumi = lambda cwd: lambda args: (1, "", "no pulumi here")  # noqa: E731
    return cli.World(environ=environ, out=out, err=err, run=no_pulumi, sleep=sleep, terminal=False)


def test_the_cli_draws_status_and_prints_logs_through_the_gate(gate: tuple[int, RecordingBackend]) -> None:
    port, _ = gate
    out, err = io.StringIO(), io.StringIO()
    assert (
        cli.main(["status", "--stack", "dev", "--watch", "--interval", "0.1"], cli_world(port, out, err)) == 1
    )  # a worker failed
    text = out.getvalue()
    assert "dev/mnist  [##############################] 100%  300/300" in text and "failed" in text, text
    assert "worker-1   failed" in text and "exit code 1" in text
    assert TOKEN not in text + err.getvalue()
    out, err = io.StringIO(), io.StringIO()
    assert (
        cli.main(["logs", "--stack", "dev", "--cluster", "mnist", "--task", "ps-0", "--tail", "2"], cli_world(port, out, err))
        == 0
    )
    assert out.getvalue().splitlines() == PS_LINES[-2:] and "run u1" in err.getvalue()
    out, err = io.StringIO(), io.StringIO()
    assert cli.main(["logs", "--stack", "dev", "--cluster", "mnist", "--task", "worker-0"], cli_world(port, out, err)) == 2
    assert "no log of worker-0 in run u1" in err.getvalue() and TOKEN not in err.getvalue()


def test_readiness_reads_each_clusters_progress_through_the_gate(gate: tuple[int, RecordingBackend]) -> None:
    port, backend = gate
    tenant = TenantFacts.model_validate(
        {
            "schemaVersion": 1,
            "platformStack": "organization/tfk8s/platform-dev",
            "owner": "organization/tfk8s/tenant-alice@test",
            "name": "alice",
            "namespace": "tfk8s-alice",
            "dataClaim": "data",
            "logClaim": "log",
            "notebookHost": "jupyter:8888",
            "tensorboardUrl": f"http://127.0.0.1:{port}/",
            "quota": {},
        },
        strict=False,
    )

    def secret_holding(token: str) -> Get:
        data = {"token": base64.b64encode(token.encode()).decode()}
        return lambda path: {"data": data} if path == SECRET.path("tfk8s-jupyter-token", "tfk8s-alice") else None

    found = progress.read("dev", ["mnist", "cifar"], tenant, "dev", secret_holding(TOKEN))
    assert {k: found["mnist"][k] for k in ("step", "target_steps", "fraction", "state")} == (
        {"step": 300, "target_steps": 300, "fraction": 1.0, "state": "failed"}
    )
    assert found["mnist"]["last_checkpoint"] is None and "tasks" not in found["mnist"]
    assert found["cifar"]["unknown"].startswith("no progress on the log volume yet")
    assert progress.read("nope", ["mnist"], tenant, "nope", secret_holding(TOKEN))["mnist"]["unknown"].startswith(
        "no progress on the log volume yet"
    )
    refused = progress.read("dev", ["mnist"], tenant, "dev", secret_holding("an-old-token"))["mnist"]["unknown"]
    assert "refused the token (401)" in refused and "an-old-token" not in refused and TOKEN not in json.dumps(found)
    assert not backend.seen
