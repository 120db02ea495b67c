"""The real token gate (tfk8s_train.token_gate) against what a hostile page or client does: paths
that would redirect a browser to another host, connections that hold the gate without asking
anything of it, and a backend that never answers. Limits are flags: small ones keep these fast."""

from __future__ import annotations

import http.client
import re
import socket
import time
from collections.abc import Iterator

import pytest
from gate_processes import TOKEN, RecordingBackend, gate_process, request

C0_AND_SPACE = "".join(map(chr, range(0x21)))


@pytest.fixture(scope="module")
def gate() -> Iterator[tuple[int, RecordingBackend]]:
    with RecordingBackend() as backend, gate_process(backend.port) as port:
        yield port, backend


def browser_stays_on_origin(location: str) -> bool:
    """Whether a browser that follows `location` from an http page stays on that page's origin, as
    the WHATWG URL Standard parses it: leading and trailing C0 controls and spaces are stripped, tabs
    and newlines removed anywhere, `\\` read as `/` (http is a special scheme); a scheme makes the
    URL absolute, and after a leading `//` (any number of slashes) comes a host."""
    url = location.strip(C0_AND_SPACE).translate({9: None, 10: None, 13: None}).replace("\\", "/")
    if re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", url):
        return False
    return not url.startswith("//")


@pytest.mark.parametrize(
    "target, location",
    [
        ("//evil.example/?token=T", "/evil.example/"),
        ("/\\evil.example/?token=T", "/evil.example/"),
        ("/\\\\evil.example?token=T", "/evil.example"),
        ("/%2F%2Fevil.example?token=T", "/%2F%2Fevil.example"),  # escapes stay escaped: a path to a browser
        ("/\\/\\evil.example/runs?run=a&token=T", "/evil.example/runs?run=a"),
        ("http:\\\\evil.example/?token=T", "/http:\\\\evil.example/"),
        ("/data/runs?token=T", "/data/runs"),
    ],
    ids=["slash-slash", "slash-backslash", "slash-two-backslashes", "escaped-slashes", "mixed-run", "scheme", "plain"],
)
def test_the_redirect_after_the_token_never_leaves_the_gates_origin(
    gate: tuple[int, RecordingBackend], target: str, location: str
) -> None:
    """`?token=` is traded for a cookie and a redirect to the same page without it: that page is a
    path on the gate itself, whatever the target looks like (no open redirect to another host)."""
    port, _ = gate
    status, headers, _ = request(port, target.replace("T", TOKEN))
    assert status == 303 and headers["set-cookie"].startswith("tfk8s-tensorboard-alice=")
    assert headers["location"] == location
    assert browser_stays_on_origin(headers["location"])


@pytest.mark.parametrize(
    "location, stays",
    [("/a", True), ("/a//b", True), ("//evil", False), ("/\\evil", False), ("\\/evil", False), (" /\t/evil", False)],
)
def test_the_browser_model_of_these_tests_reads_hosts_where_browsers_do(location: str, stays: bool) -> None:
    assert browser_stays_on_origin(location) == stays


def seconds_until_closed(client: socket.socket, *, trickle: bool, within: float) -> float | None:
    """How long until the gate closes `client` (None: not within `within` s); trickling, the client
    sends one more byte of a request head every 0.2 s, never the end of it."""
    start = time.monotonic()
    client.settimeout(0.2)
    if trickle:
        client.sendall(b"GET / HTTP/1.1\r\nX-Slow: ")
    while time.monotonic() - start < within:
        try:
            if trickle:
                client.sendall(b"x")
            if client.recv(1024) == b"":
                return time.monotonic() - start
        except TimeoutError:
            continue
        except OSError:  # reset, or a broken pipe: closed as well
            return time.monotonic() - start
    return None


@pytest.mark.parametrize("trickle", [False, True], ids=["sends-nothing", "trickles-a-header"])
def test_a_connection_without_a_whole_request_is_closed_after_the_client_timeout(trickle: bool) -> None:
    with RecordingBackend() as backend, gate_process(backend.port, "--client-timeout", "1") as port:
        with socket.create_connection(("127.0.0.1", port)) as client:
            closed = seconds_until_closed(client, trickle=trickle, within=5)
    assert closed is not None and 0.8 <= closed <= 2.5, closed


def test_a_keep_alive_connection_gets_the_whole_timeout_for_each_request() -> None:
    with RecordingBackend() as backend, gate_process(backend.port, "--client-timeout", "1") as port:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        try:
            for _ in range(3):  # 1.8 s in all on one connection, never 1 s idle
                connection.request("GET", "/data/runs", headers={"Authorization": f"token {TOKEN}"})
                response = connection.getresponse()
                assert response.status == 200 and response.read()
                time.sleep(0.6)
        finally:
            connection.close()
    assert len(backend.seen) == 3


def test_connections_beyond_the_limit_get_503_at_once_and_service_returns_within_the_client_timeout() -> None:
    """N+1 clients that connect and send nothing: the gate answers the N+2nd, a legitimate one,
    with 503 at once (it never hangs), and serves it as soon as the idle ones are dropped."""
    limit, client_timeout = 2, 1.5
    authorized = {"Authorization": f"token {TOKEN}"}
    flags = ("--max-connections", str(limit), "--client-timeout", str(client_timeout))
    with RecordingBackend() as backend, gate_process(backend.port, *flags) as port:
        idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(limit + 1)]
        opened = time.monotonic()
        try:
            time.sleep(0.2)  # the gate has accepted them
            start = time.monotonic()
            status, headers, _ = request(port, "/data/runs", authorized)
            assert status == 503 and headers["retry-after"] == "1" and time.monotonic() - start < 0.5
            while (status := request(port, "/data/runs", authorized)[0]) != 200:
                assert status == 503 and time.monotonic() - opened < client_timeout + 1, status
                time.sleep(0.1)
        finally:
            for client in idle:
                client.close()
    assert len(backend.seen) == 1


def test_a_backend_that_never_answers_gets_504_after_the_backend_timeout() -> None:
    with socket.create_server(("127.0.0.1", 0)) as silent:  # connections wait in its backlog, unanswered
        with gate_process(silent.getsockname()[1], "--backend-timeout", "0.5") as port:
            start = time.monotonic()
            status, _, body = request(port, "/data/runs", {"Authorization": f"token {TOKEN}"})
    assert status == 504 and b"within 0.5 s" in body and time.monotonic() - start < 3
