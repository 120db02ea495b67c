"""Real token gates (tfk8s_train.token_gate) on loopback for the gate's tests, and a backend that
records what reaches it (standing in for TensorBoard where TensorBoard itself is not the point)."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tfk8s_train.cluster import free_ports

TOKEN = "s3cret-token-of-alice"
TRAINING = Path(__file__).resolve().parents[2] / "training"


def subprocess_env(**extra: str) -> dict[str, str]:
    """This environment with the training package importable (as PYTHONPATH=/opt/tfk8s in the pod)."""
    path = os.pathsep.join(p for p in (str(TRAINING), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, **extra}


def request(
    port: int, path: str, headers: dict[str, str] | None = None, *, method: str = "GET", timeout: float = 10
) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request(method, path, headers=headers or {})
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
            time.sleep(0.1)
    raise AssertionError(f"nothing listens on {port}")


class RecordingBackend:
    """An HTTP server on loopback that answers every request with 200, a cookie of its own, and
    the request's headers as JSON; `seen` holds every request's headers (lower-case names)."""

    def __init__(self) -> None:
        seen: list[dict[str, str]] = []
        self.seen = seen

        class Record(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 - the base class's name
                headers = {k.lower(): v for k, v in self.headers.items()}
                seen.append(headers)
                body = json.dumps(headers).encode()
                self.send_response(200)
                self.send_header("Set-Cookie", "backend-cookie=1; Path=/")
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Record)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]

    def __enter__(self) -> RecordingBackend:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def gate_process(
    backend_port: int, *flags: str, tenant: str = "alice", token: str = TOKEN, log: Path | None = None
) -> Iterator[int]:
    """A gate for `tenant` in front of `backend_port`, with `flags` added; yields the port it listens
    on. Its stderr goes to `log` (or nowhere)."""
    (port,) = free_ports(1)
    argv = ["--listen", str(port), "--backend", f"127.0.0.1:{backend_port}", "--tenant", tenant, *flags]
    with open(log or os.devnull, "w") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "tfk8s_train.token_gate", *argv],
            env=subprocess_env(TFK8S_TOKEN=token),
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        wait_listening(port, time.monotonic() + 30)
        yield port
    finally:
        process.terminate()
        process.wait(10)
