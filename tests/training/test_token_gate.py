"""A real TensorBoard behind the real token gate (tfk8s_train.token_gate), as the tenant's pod runs
them: TensorBoard on loopback, the gate on the port users reach. Without the tenant's token nothing
reaches TensorBoard; with it (once in the address, then as a cookie, or as a header) everything does."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tfk8s_train.cluster import free_ports

TOKEN = "s3cret-token-of-alice"
TRAINING = Path(__file__).resolve().parents[2] / "training"


def subprocess_env(**extra: str) -> dict[str, str]:
    """This environment with the training package importable (as PYTHONPATH=/opt/tfk8s in the pod)."""
    path = os.pathsep.join(p for p in (str(TRAINING), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, **extra}


def request(port: int, path: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", path, headers=headers or {})
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def wait_listening(port: int, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            request(port, "/")
            return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"nothing listens on {port}")


@pytest.fixture(scope="module")
def gate(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, int]]:
    logs = tmp_path_factory.mktemp("logs")
    (logs / "exp" / "mnist").mkdir(parents=True)
    board_port, gate_port = free_ports(2)
    board = subprocess.Popen(
        [sys.executable, "-m", "tensorboard.main", "--logdir", str(logs), "--host", "127.0.0.1", "--port", str(board_port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    log = tmp_path_factory.mktemp("gate") / "gate.log"
    with log.open("w") as err:
        gate = subprocess.Popen(
            [sys.executable, "-m", "tfk8s_train.token_gate", "--listen", str(gate_port), "--backend", f"127.0.0.1:{board_port}"],
            env=subprocess_env(TFK8S_TOKEN=TOKEN),
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        deadline = time.monotonic() + 90
        wait_listening(board_port, deadline)
        wait_listening(gate_port, deadline)
        yield gate_port, board_port
    finally:
        for process in (gate, board):
            process.terminate()
            process.wait(10)
    assert TOKEN not in log.read_text()  # requests are logged without their token


def test_without_the_token_nothing_reaches_tensorboard(gate: tuple[int, int]) -> None:
    port, _ = gate
    for path, headers in [
        ("/", {}),
        ("/data/runs", {}),
        ("/data/runs?token=wrong", {}),
        ("/data/runs", {"Authorization": "token wrong"}),
        ("/data/runs", {"Cookie": "tfk8s-token=" + TOKEN}),  # the cookie holds a digest, not the token
    ]:
        status, _, body = request(port, path, headers)
        assert status == 401, (path, headers, status)
        assert b"needs the tenant's token" in body


def test_the_token_once_becomes_a_cookie_and_tensorboard_answers(gate: tuple[int, int]) -> None:
    port, board_port = gate
    status, headers, _ = request(port, f"/?token={TOKEN}")
    assert status == 303 and headers["location"] == "/"  # the token leaves the address bar
    cookie = headers["set-cookie"].split(";")[0]
    assert TOKEN not in cookie and "HttpOnly" in headers["set-cookie"]
    status, _, body = request(port, "/data/runs", {"Cookie": cookie})
    assert status == 200 and json.loads(body) == json.loads(request(board_port, "/data/runs")[2])
    status, _, body = request(port, "/", {"Cookie": cookie})
    assert status == 200 and b"<html" in body.lower()  # TensorBoard's own page, through the gate


def test_scripts_pass_with_the_token_in_a_header(gate: tuple[int, int]) -> None:
    port, _ = gate
    status, _, body = request(port, "/data/environment", {"Authorization": f"token {TOKEN}"})
    assert status == 200 and "data_location" in json.loads(body)


def test_the_gate_refuses_to_start_without_a_token() -> None:
    (port,) = free_ports(1)
    done = subprocess.run(
        [sys.executable, "-m", "tfk8s_train.token_gate", "--listen", str(port), "--backend", "127.0.0.1:1"],
        env={k: v for k, v in subprocess_env().items() if k != "TFK8S_TOKEN"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2 and "TFK8S_TOKEN is empty" in done.stderr
