"""A task's output kept on the log volume: `<run>/logs/<task>.log`, rotated and bounded in size.

A pod's own log goes with the pod (a PS is scaled to zero as its run ends, a Job's pods go with its
TTL), and a tenant cannot read pod logs anyway; the run's directory on her log volume outlives
both, and her TensorBoard already reads it. So the launcher pipes its child's stdout and stderr
(one stream: the order of lines is what a reader needs) through here: every line goes on to the
container's stdout, as before, and into the file. At `max_bytes` the file becomes `.log.1` (the
older ones move up, the oldest past `backups` goes), so a chatty task never fills the volume.

A log volume that fails (full, gone) never stops training: the file is given up with one line on
the container's stdout, and the lines keep flowing there.

Runs on Python 3.6 and newer, like launch.py (`make lint` checks it with vermin).
"""

import os
import sys
import threading
from typing import IO, Callable, List, Optional

LineHandler = Callable[[str], None]


class RotatingLog:
    """Appends lines to `path`, rotating it to `path.1` .. `path.<backups>` at `max_bytes`."""

    def __init__(self, path: str, max_bytes: int, backups: int) -> None:
        self.path, self.max_bytes, self.backups = path, max(max_bytes, 1024), max(backups, 0)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        self.handle: Optional[IO[bytes]] = open(path, "ab")
        self.size = self.handle.tell()

    def write(self, line: bytes) -> None:
        if self.handle is None:
            return
        if self.size and self.size + len(line) > self.max_bytes:
            self._rotate()
        self.handle.write(line)
        self.handle.flush()
        self.size += len(line)

    def _rotate(self) -> None:
        assert self.handle is not None
        self.handle.close()
        for index in range(self.backups, 0, -1):
            older = self.path if index == 1 else f"{self.path}.{index - 1}"
            if os.path.exists(older):
                os.replace(older, f"{self.path}.{index}")
        if not self.backups:
            os.remove(self.path)
        self.handle = open(self.path, "ab")
        self.size = 0

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()
            self.handle = None


class OutputPump:
    """Copies a child's output, line by line, to the container's stdout, the log file and `handlers`."""

    def __init__(self, log: Optional[RotatingLog], handlers: List[LineHandler]) -> None:
        self.log, self.handlers = log, handlers
        self.lock = threading.Lock()  # the launcher's own lines go through `note` from other threads
        self.thread: Optional[threading.Thread] = None

    def start(self, stream: IO[bytes]) -> None:
        self.thread = threading.Thread(target=self._pump, args=(stream,), name="tfk8s-output", daemon=True)
        self.thread.start()

    def note(self, line: str) -> None:
        """A line of the launcher's own, into the same file (it also went to stderr)."""
        self._keep((line.rstrip("\n") + "\n").encode("utf-8", "replace"))

    def join(self, timeout: float) -> None:
        if self.thread is not None:
            self.thread.join(timeout)

    def _pump(self, stream: IO[bytes]) -> None:
        out = sys.stdout.buffer
        for line in iter(stream.readline, b""):
            try:
                out.write(line)
                out.flush()
            except (OSError, ValueError):
                pass
            self._keep(line)
            text = line.decode("utf-8", "replace")
            for handle in self.handlers:
                try:
                    handle(text)
                except Exception as err:  # a reader's bug must not stop the copy of the output
                    print(f"tfk8s-launch: progress reader failed on a line: {err!r}", file=sys.stderr, flush=True)
        stream.close()

    def _keep(self, line: bytes) -> None:
        with self.lock:
            if self.log is None:
                return
            try:
                self.log.write(line)
            except OSError as err:
                self.log.close()
                self.log = None
                print(f"tfk8s-launch: no longer keeping this task's log on the log volume: {err}", file=sys.stderr, flush=True)

    def close(self) -> None:
        with self.lock:
            if self.log is not None:
                self.log.close()
