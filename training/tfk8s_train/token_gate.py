"""An authenticating gate in front of TensorBoard, which has no authentication of its own.

TensorBoard listens on the pod's loopback alone; this gate is what the user's NodePort reaches. A
request passes with the tenant's token (the user's Jupyter token, from the same Secret): as
`?token=...` once (the gate answers with a cookie and a redirect to the same page without it, so the
token does not stay in the address bar or in TensorBoard's links), as that cookie, or as an
`Authorization: token ...` header (scripts). Anything else gets 401 and never reaches TensorBoard.

    python -m tfk8s_train.token_gate --listen 6006 --backend 127.0.0.1:16006 --tenant alice   (token in TFK8S_TOKEN)
"""

from __future__ import annotations

import argparse
import http.client
import os
import sys
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlencode

from tfk8s_train.gate_session import Session

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
# What the gate checks and TensorBoard never sees.
CREDENTIALS = {"cookie", "authorization"}


def authorized(session: Session, headers: dict[str, str], query_token: str | None) -> bool:
    if query_token is not None and session.is_token(query_token):
        return True
    auth = headers.get("authorization", "")
    if auth.lower().startswith("token ") and session.is_token(auth[6:].strip()):
        return True
    return session.has_session(headers.get("cookie", ""), time.time())


# What a browser strips from the start of a Location (C0 controls and space) or reads as a slash.
LEADING_SLASHES = "/\\" + "".join(map(chr, range(0x21)))


def same_origin_path(path: str) -> str:
    """`path` as a Location a browser resolves on the gate's own origin. Browsers read `\\` as `/`
    and a leading `//` as "another host follows", so `/\\evil.example/` would send the user to
    evil.example: the leading run of slashes and backslashes (and whatever a browser strips there)
    is one `/`. Percent-escapes stay escaped (`/%2F%2Fhost` is a path to a browser too)."""
    return "/" + path.lstrip(LEADING_SLASHES)


def without_token(target: str) -> tuple[str, str | None]:
    """The request target as a same-origin path without its `token` query parameter, and that
    parameter's value (None if absent). A target is a path and a query: whatever looks like a
    scheme or host in it is read as path (no browser sends a fragment)."""
    path, _, query = target.partition("#")[0].partition("?")
    pairs = parse_qsl(query, keep_blank_values=True)
    tokens = [v for k, v in pairs if k == "token"]
    rest = urlencode([(k, v) for k, v in pairs if k != "token"])
    return same_origin_path(path) + (f"?{rest}" if rest else ""), (tokens[0] if tokens else None)


def handler(session: Session, backend_host: str, backend_port: int) -> type[BaseHTTPRequestHandler]:
    class Gate(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _handle(self) -> None:
            headers = {k.lower(): v for k, v in self.headers.items()}
            path, query_token = without_token(self.path)
            if not authorized(session, headers, query_token):
                self._reply(401, b"tfk8s: TensorBoard needs the tenant's token: open it with ?token=<jupyterToken>\n")
                return
            if query_token is not None:  # trade the token in the address for a cookie
                self.send_response(303)
                self.send_header("Location", path)
                self.send_header("Set-Cookie", session.set_cookie(time.time()))
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            length = int(headers.get("content-length") or 0)
            body = self.rfile.read(length) if length else None
            # No cookie reaches TensorBoard (it reads none): not the gate's, not any other app's on this host.
            forwarded = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP | CREDENTIALS | {"host"}}
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
                # Cookies are the gate's alone: one TensorBoard set would reach every app on this host.
                if name.lower() not in HOP_BY_HOP | {"content-length", "set-cookie"}:
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
    parser.add_argument("--tenant", required=True, help="the tenant's name: names the session cookie and binds it to the tenant")
    parser.add_argument("--session-max-age", type=int, default=12 * 3600, help="seconds a session cookie is valid (12 h)")
    args = parser.parse_args(argv)
    try:
        session = Session(tenant=args.tenant, token=os.environ.get("TFK8S_TOKEN", ""), max_age=args.session_max_age)
    except ValueError as error:
        print(f"tfk8s-gate: {error}", file=sys.stderr)
        return 2
    host, _, port = args.backend.rpartition(":")
    server = ThreadingHTTPServer(("", args.listen), handler(session, host, int(port)))
    server.daemon_threads = True
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
