"""An authenticating gate in front of TensorBoard, which has no authentication of its own.

TensorBoard listens on the pod's loopback alone; this gate is what the tenant's NodePort reaches. A
request passes with the tenant's token (the tenant's Jupyter token, from the same Secret): as
`?token=...` once (answered with a session cookie and a redirect to the same page without it, so the
token does not stay in the address bar or in TensorBoard's links), then as that cookie, or as an
`Authorization: token ...` header (scripts). Anything else gets 401 and never reaches TensorBoard.

Every tenant's apps share the User Node's host name, and a browser sends a host's cookies to every
port of it. What the gate does about that, and about clients that mean harm:
  * Sessions are the tenant's own (tfk8s_train.gate_session): the cookie `tfk8s-tensorboard-<tenant>`
    holds an HMAC of the token over the tenant's name and an expiry, so no other tenant's cookie is
    valid here, nor any after --session-max-age (12 h); HttpOnly, SameSite=Strict, Path=/.
  * No cookie and no Authorization header reaches TensorBoard; no Set-Cookie of its reaches the browser.
  * Another tenant's page is the same site (SameSite lets this gate's cookie go with what it asks)
    but another origin: a request whose Origin is not this gate's own gets 403.
  * The redirect after `?token=` is a path on this origin, whatever the request's path looks like.
  * `/tfk8s/status` and `/tfk8s/logs/...` are the gate's own (tfk8s_train.gate_routes): the tenant's
    training progress and task logs, from the log volume at --log-root; never forwarded.
  * Bounds (tfk8s_train.gate_limits): --max-connections at once, then 503; --client-timeout for each
    whole request; --backend-timeout for TensorBoard, then 504; and --max-failures wrong tokens per
    client address in --failure-window, then 429 for that address's tokens.

What it cannot do: the cookie still goes to every port of the host, where another tenant's server
(theirs to run) can read it and replay it here until it expires. Only a host name per tenant, behind
a proxy the platform runs, keeps it from going there. And it is plain HTTP: whoever is on the path
reads the token and the cookie.

    python -m tfk8s_train.token_gate --listen 6006 --backend 127.0.0.1:16006 --tenant alice --log-root /logs
    (the token in TFK8S_TOKEN)
"""

from __future__ import annotations

import argparse
import http.client
import io
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qsl, urlencode

from tfk8s_train import gate_routes
from tfk8s_train.gate_limits import GateServer, RequestDeadline, Throttle
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
# A token in a request line the server quotes in an error of its own.
QUERY_TOKEN = re.compile(r"token=[^&\s]*")
NEEDS_TOKEN = b"tfk8s: TensorBoard needs the tenant's token: open it with ?token=<jupyterToken>\n"
# TensorBoard's requests are small (plugin queries): a bigger body is refused, not held in memory.
MAX_BODY = 16 * 1024 * 1024


@dataclass(frozen=True, kw_only=True)
class Limits:
    """How much the gate takes from clients and waits for TensorBoard (see tfk8s_train.gate_limits)."""

    max_connections: int  # handled at once; one more gets 503
    client_timeout: float  # seconds for a client to send a whole request, or to keep an idle connection
    backend_timeout: float  # seconds TensorBoard may take to answer (then 504)
    max_failures: int  # wrong tokens from one client address in any failure_window, then 429
    failure_window: float  # seconds


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


def handler(
    session: Session, limits: Limits, backend: tuple[str, int], log_root: str | None = None
) -> type[BaseHTTPRequestHandler]:
    throttle = Throttle(limit=limits.max_failures, window=limits.failure_window)

    class Gate(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = limits.client_timeout  # the socket's: a client that stops reading our answer is dropped

        def setup(self) -> None:
            super().setup()
            self.rfile.close()  # the plain reader: every read goes through the request's deadline instead
            self.deadline = RequestDeadline(self.connection, limits.client_timeout)
            self.rfile = io.BufferedReader(self.deadline)

        def handle_one_request(self) -> None:
            self.deadline.restart()  # the next request, and an idle keep-alive connection, get the whole timeout
            super().handle_one_request()

        def _handle(self) -> None:
            headers = {k.lower(): v for k, v in self.headers.items()}
            path, query_token = without_token(self.path)
            if not self._same_origin(headers) or not self._admitted(headers, query_token):
                return
            if query_token is not None:  # trade the (right) token in the address for a cookie
                self.send_response(303)
                self.send_header("Location", path)
                self.send_header("Set-Cookie", session.set_cookie(time.time()))
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            length = headers.get("content-length", "0")
            if not length.isascii() or not length.isdigit() or int(length) > MAX_BODY:
                self._reply(413, f"tfk8s: a request body must be at most {MAX_BODY} bytes\n".encode())
                return
            body = self.rfile.read(int(length)) if int(length) else None  # TimeoutError: the connection ends
            if gate_routes.is_local(path):  # progress and logs, from the log volume: never TensorBoard's
                self._send(gate_routes.answer(self.command, path, log_root, time.time()))
                return
            # No cookie reaches TensorBoard (it reads none): not the gate's, not any other app's on this host.
            forwarded = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP | CREDENTIALS | {"host"}}
            connection = http.client.HTTPConnection(*backend, timeout=limits.backend_timeout)
            try:
                connection.request(self.command, path, body=body, headers=forwarded)
                response = connection.getresponse()
                data = response.read()
            except TimeoutError:
                self._reply(504, f"tfk8s: TensorBoard did not answer within {limits.backend_timeout:g} s\n".encode())
                return
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

        def _send(self, reply: gate_routes.Reply) -> None:
            try:
                self.send_response(reply.status)
                for name, value in [*reply.headers, ("Content-Length", str(reply.length))]:
                    self.send_header(name, value)
                self.end_headers()
                for chunk in reply.chunks if self.command != "HEAD" else ():
                    self.wfile.write(chunk)
            finally:
                reply.close()

        def _same_origin(self, headers: dict[str, str]) -> bool:
            """Whether a request a browser sent with an Origin comes from a page of this gate; if not,
            403 is sent. Another tenant's app is another origin (another port) but the same site, so
            a browser sends this gate's SameSite cookie along with what that app's pages ask of it;
            they state their Origin, though, when they POST or fetch (Jupyter refuses those too)."""
            origin, host = headers.get("origin"), headers.get("host", "")
            if origin is None or origin.lower() in (f"http://{host}".lower(), f"https://{host}".lower()):
                return True
            self._reply(403, f"tfk8s: a request from {origin} to the TensorBoard gate at {host}: refused\n".encode())
            return False

        def _admitted(self, headers: dict[str, str], query_token: str | None) -> bool:
            """Whether the request may pass; if not, the refusal is sent. Every token it presents must
            be the tenant's: a wrong one is refused whatever comes with it, and counts against its
            address (tfk8s_train.gate_limits.Throttle). Without a token, a valid session cookie passes."""
            auth = headers.get("authorization", "")
            header_token = auth[6:].strip() if auth.lower().startswith("token ") else None
            tokens = [t for t in (query_token, header_token) if t is not None]
            if not tokens:
                if session.has_session(headers.get("cookie", ""), time.time()):
                    return True
                self._reply(401, NEEDS_TOKEN)
                return False
            address = self.client_address[0]
            if wait := throttle.retry_after(address):
                text = f"tfk8s: too many wrong tokens from {address} (--max-failures): retry in {wait} s\n"
                self._reply(429, text.encode(), [("Retry-After", str(wait))])
                return False
            if all(session.is_token(token) for token in tokens):
                return True
            throttle.failed(address)
            self._reply(401, NEEDS_TOKEN)
            return False

        def _reply(self, status: int, text: bytes, headers: Sequence[tuple[str, str]] = ()) -> None:
            """A refusal or failure of the gate's own. The connection closes: a body the client sent is unread."""
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(text)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            self.wfile.write(text)

        do_GET = do_POST = do_HEAD = _handle

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
            if format == '"%s" %s %s':  # a request: its path alone (a `?token=` must not land in the pod's log)
                path = without_token(self.path)[0] if hasattr(self, "path") else "(no request line)"
                line = f"{self.command or ''} {path} -> {args[1]}"
            elif format.startswith("Request timed out"):
                return  # an idle keep-alive connection closing, or a client too slow: nothing to act on
            else:  # the server's own errors, which may quote the request line
                line = format % args
            sys.stderr.write(f"tfk8s-gate: {self.client_address[0]} {QUERY_TOKEN.sub('token=...', line)}\n")

    return Gate


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen", type=int, required=True, help="the port users reach (the Service's)")
    parser.add_argument("--backend", required=True, help="host:port of TensorBoard, on the pod's loopback")
    parser.add_argument("--tenant", required=True, help="the tenant's name: names the session cookie and binds it to the tenant")
    parser.add_argument("--log-root", help="the tenant's log volume, read-only: serves /tfk8s/status and /tfk8s/logs/...")
    parser.add_argument("--session-max-age", type=int, default=12 * 3600, help="seconds a session cookie is valid (12 h)")
    parser.add_argument("--max-connections", type=positive(int), default=64, help="connections handled at once (64)")
    parser.add_argument("--client-timeout", type=positive(float), default=30, help="seconds for a whole request (30)")
    parser.add_argument("--backend-timeout", type=positive(float), default=60, help="seconds TensorBoard may take (60)")
    parser.add_argument("--max-failures", type=positive(int), default=10, help="wrong tokens per address in a window (10)")
    parser.add_argument("--failure-window", type=positive(float), default=300, help="seconds --max-failures counts over (300)")
    args = parser.parse_args(argv)
    try:
        session = Session(tenant=args.tenant, token=os.environ.get("TFK8S_TOKEN", ""), max_age=args.session_max_age)
    except ValueError as error:
        print(f"tfk8s-gate: {error}", file=sys.stderr)
        return 2
    limits = Limits(
        max_connections=args.max_connections,
        client_timeout=args.client_timeout,
        backend_timeout=args.backend_timeout,
        max_failures=args.max_failures,
        failure_window=args.failure_window,
    )
    host, _, port = args.backend.rpartition(":")
    if not host or not port.isdigit():
        parser.error(f"--backend {args.backend!r}: must be host:port, e.g. 127.0.0.1:16006")
    gate = handler(session, limits, (host, int(port)), args.log_root)
    server = GateServer(("", args.listen), gate, max_connections=limits.max_connections)
    server.serve_forever()
    return 0


def positive(kind: type[int] | type[float]) -> Callable[[str], float]:
    """An argparse type: a number above 0 (argparse names the flag in its error)."""

    def parse(text: str) -> float:
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{text}: must be above 0")
        return value

    return parse


if __name__ == "__main__":
    sys.exit(main())
