"""An authenticating gate in front of TensorBoard, which has no authentication of its own.

TensorBoard listens on the pod's loopback alone; this gate is what the user's NodePort reaches. A
request passes with the tenant's token (the user's Jupyter token, from the same Secret): as
`?token=...` once (the gate answers with a cookie and a redirect to the same page without it, so the
token does not stay in the address bar or in TensorBoard's links), as that cookie, or as an
`Authorization: token ...` header (scripts). Anything else gets 401 and never reaches TensorBoard.

    python -m tfk8s_train.token_gate --listen 6006 --backend 127.0.0.1:16006   (token in TFK8S_TOKEN)
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import http.client
import os
import sys
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

COOKIE = "tfk8s-token"
# Hop-by-hop headers (RFC 9110 7.6.1) are the gate's own, never forwarded.
HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
}


def cookie_value(token: str) -> str:
    """What the cookie holds: a digest of the token, not the token (a leaked cookie is not the token)."""
    return hmac.new(token.encode(), b"tfk8s-tensorboard", hashlib.sha256).hexdigest()


def authorized(token: str, headers: dict[str, str], query_token: str | None) -> bool:
    if query_token is not None and hmac.compare_digest(query_token.encode(), token.encode()):
        return True
    auth = headers.get("authorization", "")
    if auth.lower().startswith("token ") and hmac.compare_digest(auth[6:].strip().encode(), token.encode()):
        return True
    for part in headers.get("cookie", "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == COOKIE and hmac.compare_digest(value.encode(), cookie_value(token).encode()):
            return True
    return False


def without_token(path: str) -> tuple[str, str | None]:
    """`path` without its `token` query parameter, and that parameter's value (None if absent)."""
    parts = urlsplit(path)
    query = parse_qsl(parts.query, keep_blank_values=True)
    tokens = [v for k, v in query if k == "token"]
    rest = urlencode([(k, v) for k, v in query if k != "token"])
    return urlunsplit(("", "", parts.path or "/", rest, parts.fragment)), (tokens[0] if tokens else None)


def handler(token: str, backend_host: str, backend_port: int) -> type[BaseHTTPRequestHandler]:
    class Gate(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _handle(self) -> None:
            headers = {k.lower(): v for k, v in self.headers.items()}
            path, query_token = without_token(self.path)
            if not authorized(token, headers, query_token):
                self._reply(401, b"tfk8s: TensorBoard needs the tenant's token: open it with ?token=<jupyterToken>\n")
                return
            if query_token is not None:  # trade the token in the address for a cookie
                self.send_response(303)
                self.send_header("Location", path)
                self.send_header("Set-Cookie", f"{COOKIE}={cookie_value(token)}; HttpOnly; SameSite=Strict; Path=/")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            length = int(headers.get("content-length") or 0)
            body = self.rfile.read(length) if length else None
            forwarded = {
                k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP | {"cookie", "authorization", "host"}
            }
            connection = http.client.HTTPConnection(backend_host, backend_port, timeout=60)
            try:
                connection.request(self.command, path, body=body, headers=forwarded)
                response = connection.getresponse()
                data = response.read()
            except OSError as error:
                self._reply(502, f"tfk8s: TensorBoard is not answering ({error})\n".encode())
                return
            finally:
                connection.close()
            self.send_response(response.status)
            for name, value in response.getheaders():
                if name.lower() not in HOP_BY_HOP | {"content-length"}:
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        def _reply(self, status: int, text: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)

        do_GET = do_POST = do_HEAD = _handle

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
            # Paths only: a `?token=` in a request line must not land in the pod's log.
            sys.stderr.write(f"tfk8s-gate: {self.command} {without_token(self.path)[0]} -> {args[1] if len(args) > 1 else ''}\n")

    return Gate


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen", type=int, required=True, help="the port users reach (the Service's)")
    parser.add_argument("--backend", required=True, help="host:port of TensorBoard, on the pod's loopback")
    args = parser.parse_args(argv)
    token = os.environ.get("TFK8S_TOKEN", "")
    if not token:
        print("tfk8s-gate: TFK8S_TOKEN is empty: refusing to serve TensorBoard without a token", file=sys.stderr)
        return 2
    host, _, port = args.backend.rpartition(":")
    server = ThreadingHTTPServer(("", args.listen), handler(token, host, int(port)))
    server.daemon_threads = True
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
