"""What one client can take of the TensorBoard gate (tfk8s_train.token_gate): connections, time,
and guesses. Each connection holds a thread; without bounds, idle or trickling sockets would hold
them all and the gate would answer no one, and a loop could try tokens as fast as it can send them.

  * At most `max_connections` connections are handled at once (GateServer); one more is answered
    503 with `Retry-After` and closed by the accepting thread, which starts no thread for it.
  * Each request, head and body, must arrive within `seconds` of when the gate starts waiting for
    it (RequestDeadline): a client that sends nothing, or trickles a byte at a time, holds its
    connection that long at most, and an idle keep-alive connection is closed after it.
  * At most `limit` wrong tokens per client address in any `window` seconds (Throttle); then that
    address's tokens get 429 with `Retry-After`, unchecked, until the oldest failure is `window` old.

Standard library only: the gate runs in the TensorFlow image's Python.
"""

from __future__ import annotations

import contextlib
import io
import ipaddress
import math
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from typing import Any

BUSY_TEXT = b"tfk8s: the TensorBoard gate is at its connection limit; retry in a moment\n"
BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: text/plain; charset=utf-8\r\n"
    + f"Content-Length: {len(BUSY_TEXT)}\r\nConnection: close\r\n\r\n".encode()
    + BUSY_TEXT
)


class GateServer(ThreadingHTTPServer):
    """A ThreadingHTTPServer that handles at most `max_connections` connections at once."""

    daemon_threads = True
    request_queue_size = 64  # the listen backlog: connections the kernel holds until they are accepted

    def __init__(self, address: tuple[str, int], handler: Any, *, max_connections: int) -> None:
        self.max_connections = max_connections
        self._slots = threading.BoundedSemaphore(max_connections)
        self._refusal_logged_at: float | None = None  # refusals are logged once a minute at most
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self._refuse(request)
            return
        try:
            super().process_request(request, client_address)  # a thread, which releases the slot
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def _refuse(self, request: socket.socket) -> None:
        """503 and close, without blocking the accepting thread: a fresh socket's send buffer takes
        the answer whole or the client is gone. What the client already sent is read first, else
        closing on unread data would reset the connection before the client reads the 503."""
        now = time.monotonic()
        if self._refusal_logged_at is None or now - self._refusal_logged_at > 60:
            self._refusal_logged_at = now
            sys.stderr.write(f"tfk8s-gate: all {self.max_connections} connections busy (--max-connections): refusing more\n")
        with contextlib.suppress(OSError):
            request.setblocking(False)
            request.send(BUSY)
            request.recv(65536)
        self.shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # One line, not a traceback, for a client that went away mid-request.
        sys.stderr.write(f"tfk8s-gate: {client_address[0]}: connection ended: {sys.exc_info()[1]!r}\n")


class RequestDeadline(io.RawIOBase):
    """A connection's reading side on which each request must arrive within `seconds` of `restart()`:
    every read waits at most what is left. The socket's own timeout (for writes too) stays `seconds`."""

    def __init__(self, connection: socket.socket, seconds: float) -> None:
        super().__init__()
        self._connection, self._seconds = connection, seconds
        self._until = time.monotonic() + seconds

    def restart(self) -> None:
        self._until = time.monotonic() + self._seconds

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self._until - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"no whole request within {self._seconds:g} s (--client-timeout)")
        self._connection.settimeout(left)
        try:
            return self._connection.recv_into(buffer)
        finally:
            self._connection.settimeout(self._seconds)


class Throttle:
    """Wrong tokens per client address: `limit` in any `window` seconds, then none is checked until
    the oldest of them is `window` old (a refused token is not checked: no oracle for a guesser).

    What counts is a token presented and wrong (in the query or the Authorization header). Not a
    request without one (a browser's first visit), nor a stale session cookie (the browser sends it
    with every request; a cookie is a 256-bit digest no one guesses). A valid session cookie passes
    whatever its address did: only typing the token from a throttled address waits. An IPv6 client
    is its /64 (a host holds a whole one); `capacity` addresses are remembered at most.
    """

    def __init__(self, *, limit: int, window: float, capacity: int = 4096, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit, self.window, self.capacity, self._clock = limit, window, capacity, clock
        self._failures: dict[str, deque[float]] = {}  # per address, its last `limit` failures
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """How many addresses are remembered."""
        return len(self._failures)

    @staticmethod
    def key(address: str) -> str:
        ip = ipaddress.ip_address(address)
        if isinstance(ip, ipaddress.IPv6Address):
            if ip.ipv4_mapped is not None:
                return str(ip.ipv4_mapped)
            return str(ipaddress.ip_network(f"{ip}/64", strict=False))
        return str(ip)

    def retry_after(self, address: str) -> int:
        """Seconds until `address` may present a token again; 0: now."""
        now = self._clock()
        with self._lock:
            failures = self._failures.get(self.key(address))
            if failures is None or len(failures) < self.limit or failures[0] <= now - self.window:
                return 0
            return max(1, math.ceil(failures[0] + self.window - now))

    def failed(self, address: str) -> None:
        now = self._clock()
        with self._lock:
            self._failures.setdefault(self.key(address), deque(maxlen=self.limit)).append(now)
            if len(self._failures) > self.capacity:
                self._forget(now)

    def _forget(self, now: float) -> None:
        """Addresses whose failures are all past the window; then, were there still too many, the
        longest remembered."""
        for key in [k for k, failures in self._failures.items() if failures[-1] <= now - self.window]:
            del self._failures[key]
        for key in list(self._failures)[: max(0, len(self._failures) - self.capacity)]:
            del self._failures[key]
