"""An HTTP server that answers like the API server's reads, echoing what a request carried (its
path, Accept, Authorization and impersonation headers): for tfk8s's own API client's tests."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Server(ThreadingHTTPServer):
    connections = 0
    close_after_first = False


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the API server speaks
    server: Server

    def setup(self) -> None:
        super().setup()
        self.server.connections += 1

    def do_GET(self) -> None:
        status = {"/missing": 404, "/forbidden": 403}.get(self.path, 200)
        impersonation = [[k, v] for k, v in self.headers.items() if k.lower().startswith("impersonate-")]
        answer = {
            "path": self.path,
            "accept": self.headers["Accept"],
            **({"authorization": self.headers["Authorization"]} if self.headers["Authorization"] else {}),
            **({"impersonation": impersonation} if impersonation else {}),
        }
        body = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        if self.server.close_after_first:  # an idle timeout: gone without a `Connection: close`
            self.close_connection = True

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def serving() -> Iterator[Server]:
    running = Server(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=running.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield running
    finally:
        running.shutdown()
        running.server_close()
