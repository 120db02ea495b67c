"""A real TensorBoard behind the real token gate (tfk8s_train.token_gate), as the tenant's pod runs
them: TensorBoard on loopback, the gate on the port users reach. Without the tenant's token nothing
reaches TensorBoard; with it (once in the address, then as a cookie, or as a header) everything does.
And the session cookie is the tenant's own: named after it, bound to it, expiring, never forwarded."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from gate_processes import TOKEN, RecordingBackend, gate_process, request, subprocess_env, wait_listening
from tfk8s_train.cluster import free_ports
from tfk8s_train.gate_session import Session


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
            [sys.executable, "-m", "tfk8s_train.token_gate", "--listen", str(gate_port), "--backend", f"127.0.0.1:{board_port}"]
            + ["--tenant", "alice"],
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
        ("/data/runs", {"Cookie": "tfk8s-tensorboard-alice=" + TOKEN}),  # the cookie holds a digest, not the token
    ]:
        status, _, body = request(port, path, headers)
        assert status == 401, (path, headers, status)
        assert b"needs the tenant's token" in body


def test_the_token_once_becomes_a_cookie_and_tensorboard_answers(gate: tuple[int, int]) -> None:
    port, board_port = gate
    status, headers, _ = request(port, f"/?token={TOKEN}")
    assert status == 303 and headers["location"] == "/"  # the token leaves the address bar
    cookie = headers["set-cookie"].split(";")[0]
    assert TOKEN not in cookie and cookie.startswith("tfk8s-tensorboard-alice=")
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
        [sys.executable, "-m", "tfk8s_train.token_gate", "--listen", str(port), "--backend", "127.0.0.1:1", "--tenant", "alice"],
        env={k: v for k, v in subprocess_env().items() if k != "TFK8S_TOKEN"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2 and "TFK8S_TOKEN is empty" in done.stderr


def test_the_session_cookie_is_named_after_the_tenant_and_expires(gate: tuple[int, int]) -> None:
    """Every tenant's apps share the User Node's host name, and a browser sends a host's cookies to
    every port: the cookie says whose it is, lives 12 h at most, and no script or other site gets it."""
    port, _ = gate
    _, headers, _ = request(port, f"/?token={TOKEN}")
    name_value, *attributes = [part.strip() for part in headers["set-cookie"].split(";")]
    assert name_value.split("=")[0] == "tfk8s-tensorboard-alice"
    assert sorted(attributes) == ["HttpOnly", "Max-Age=43200", "Path=/", "SameSite=Strict"]


def test_another_tenants_session_is_never_valid_here_even_with_the_same_token() -> None:
    """Bob's gate, with a token equal to Alice's (a collision, or one chosen twice): his browser
    session is worth nothing at Alice's gate, under his cookie's name or under hers."""
    with RecordingBackend() as backend, gate_process(backend.port) as alice, gate_process(backend.port, tenant="bob") as bob:
        _, headers, _ = request(bob, f"/?token={TOKEN}")
        bobs = headers["set-cookie"].split(";")[0]
        name, _, value = bobs.partition("=")
        assert name == "tfk8s-tensorboard-bob"
        assert request(bob, "/", {"Cookie": bobs})[0] == 200  # valid where it was issued
        for cookie in (bobs, f"tfk8s-tensorboard-alice={value}"):
            assert request(alice, "/", {"Cookie": cookie})[0] == 401, cookie
        assert len(backend.seen) == 1


def test_a_session_past_its_expiry_is_refused_whatever_the_browser_keeps() -> None:
    session = Session(tenant="alice", token=TOKEN, max_age=60)
    now = time.time()
    with RecordingBackend() as backend, gate_process(backend.port, "--session-max-age", "60") as port:
        assert request(port, "/", {"Cookie": f"{session.cookie_name}={session.cookie_value(now)}"})[0] == 200
        expired = session.cookie_value(now - 61)
        assert request(port, "/", {"Cookie": f"{session.cookie_name}={expired}"})[0] == 401
        # Signed with the token but for longer than the gate grants: not a session it issued.
        longer = Session(tenant="alice", token=TOKEN, max_age=3600).cookie_value(now)
        assert request(port, "/", {"Cookie": f"{session.cookie_name}={longer}"})[0] == 401


def test_no_cookie_and_no_credential_reaches_tensorboard_and_none_comes_back() -> None:
    """The gate takes its own cookie and the token off every request, and every other cookie of the
    host too (other tenants' gates, any Jupyter's: TensorBoard reads none); a cookie TensorBoard
    would set never reaches the browser, where it would go to every app on the host."""
    session = Session(tenant="alice", token=TOKEN, max_age=43200)
    own = f"{session.cookie_name}={session.cookie_value(time.time())}"
    others = "tfk8s-tensorboard-bob=1.ab; username-10-0-0-5-30888=2|1:0|x; _xsrf=2|abc; tfk8s-jupyter-alice=z"
    with RecordingBackend() as backend, gate_process(backend.port) as port:
        status, headers, body = request(port, "/data/runs", {"Cookie": f"{others}; {own}", "X-Kept": "yes"})
        assert status == 200 and "set-cookie" not in headers
        status, headers, _ = request(port, "/data/runs", {"Authorization": f"token {TOKEN}"})
        assert status == 200 and "set-cookie" not in headers
    first, second = backend.seen
    assert json.loads(body) == first and first["x-kept"] == "yes"  # the rest of the request does pass
    assert not {"cookie", "authorization"} & (set(first) | set(second))
