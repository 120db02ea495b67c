"""The TensorBoard gate's own routes: a tenant's training progress and every task's log, read from
her log volume. tfk8s_train.token_gate answers them itself, after the same token check as every
other request, and never forwards them to TensorBoard (docs/guide/status.md):

  GET /tfk8s/status[?experiment=<name>]
      JSON: every experiment's clusters (or one experiment's), each by its latest run
      (tfk8s_train.run_status); 404 for an experiment with nothing on the volume.
  GET /tfk8s/logs/<experiment>/<cluster>/<task>[?run=<uid>][&tail=<lines>]
      text/plain: the task's log in that run (the latest by default), its rotated files first, so
      the text reads in order; with `tail`, its last lines, across the rotated files. The header
      X-Tfk8s-Run names the run.

Each path segment is percent-decoded and must then match a strict pattern (tfk8s_train.log_tree):
`..`, `%2e%2e`, an empty segment (`//etc`), a `/` or a NUL within one are refused with 400 before
anything is opened, and the volume is read beneath its root without following links. Replies are
never cached and never rendered as a page (`nosniff`, a sandboxing Content-Security-Policy): a
log holds whatever the training code printed. Every refusal is text that starts with `tfk8s:`.

Standard library only: the gate runs in the TensorBoard image's Python.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, unquote

from tfk8s_train import run_status
from tfk8s_train.log_tree import NAME, RUN_PREFIX, TASK, Absent, Concatenation, Entry, LogTree

PREFIX = "/tfk8s/"
ROUTES = "/tfk8s/status[?experiment=<name>], /tfk8s/logs/<experiment>/<cluster>/<task>[?run=<uid>&tail=<lines>]"
MAX_TAIL = 1_000_000
TEXT, JSON = "text/plain; charset=utf-8", "application/json"
HEADERS = [
    ("Cache-Control", "no-store"),
    ("X-Content-Type-Options", "nosniff"),
    ("Content-Security-Policy", "default-src 'none'; sandbox"),
]


@dataclass
class Reply:
    """What the gate sends: its status and headers, `length` bytes of `chunks`, then `close()`."""

    status: int
    content_type: str
    length: int
    chunks: Iterable[bytes]
    headers: list[tuple[str, str]] = field(default_factory=list)
    close: Callable[[], None] = lambda: None

    @classmethod
    def whole(cls, status: int, content_type: str, body: bytes) -> Reply:
        return cls(status, content_type, len(body), [body])


class Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def is_local(path: str) -> bool:
    """Whether the gate answers `path` itself (a path without its query)."""
    return path.partition("?")[0] in ("/tfk8s", "/tfk8s/") or path.startswith(PREFIX)


def answer(method: str, target: str, log_root: str | None, now: float) -> Reply:
    """The reply to `method target` (a same-origin path, its query without the token)."""
    try:
        reply = route(method, target, log_root, now)
    except Refused as refused:
        reply = Reply.whole(refused.status, TEXT, f"tfk8s: {refused}\n".encode())
    except OSError as error:
        reply = Reply.whole(500, TEXT, f"tfk8s: the log volume could not be read ({error.strerror or error})\n".encode())
    reply.headers = [("Content-Type", reply.content_type), *HEADERS, *reply.headers]
    return reply


def route(method: str, target: str, log_root: str | None, now: float) -> Reply:
    if method not in ("GET", "HEAD"):
        raise Refused(405, f"{method}: the gate's routes answer GET and HEAD alone")
    if log_root is None:
        raise Refused(404, "this TensorBoard gate serves no log volume (it was started without --log-root)")
    path, _, query = target.partition("?")
    try:
        segments = [unquote(part, errors="strict") for part in path.split("/")[2:]]
    except UnicodeDecodeError:
        raise Refused(400, "the path is not UTF-8 once percent-decoded") from None
    for segment in segments:
        if segment in ("", ".", "..") or any(c in segment for c in "/\\\0"):
            raise Refused(400, f"path segment {segment!r}: refused (an empty segment, a dot segment, a slash or a NUL)")
    tree = LogTree(log_root)
    if segments == ["status"]:
        params = parameters(query, {"experiment"})
        return status(tree, params.get("experiment"), now)
    if len(segments) == 4 and segments[0] == "logs":
        params = parameters(query, {"run", "tail"})
        experiment, cluster, task = segments[1:]
        return logs(tree, experiment, cluster, task, params.get("run"), params.get("tail"))
    raise Refused(404, f"no such route: {ROUTES}")


def parameters(query: str, known: set[str]) -> dict[str, str]:
    pairs = parse_qsl(query, keep_blank_values=True)
    names = [name for name, _ in pairs]
    for name in names:
        if name not in known:
            raise Refused(400, f"unknown parameter {name!r}: this route takes {', '.join(sorted(known))}")
        if names.count(name) > 1:
            raise Refused(400, f"parameter {name!r} given more than once")
    return dict(pairs)


def checked(what: str, value: str, pattern: re.Pattern[str]) -> str:
    if not pattern.fullmatch(value):
        raise Refused(400, f"{what} {value!r}: must match {pattern.pattern}")
    return value


def status(tree: LogTree, experiment: str | None, now: float) -> Reply:
    if experiment is not None:
        checked("experiment", experiment, NAME)
    found = run_status.summarise(tree, now, experiment)
    if experiment is not None and experiment not in found["experiments"]:
        raise Refused(
            404,
            f"no experiment {experiment!r} on the log volume: none of its tasks has started yet, or its name "
            "is another (the experiment stack's `experiment` output)",
        )
    return Reply.whole(200, JSON, json.dumps(found, sort_keys=True).encode())


def log_files(entries: list[Entry], task: str) -> list[str]:
    """The task's log files among `entries`, oldest first: `<task>.log.<n>` (higher n older), then `<task>.log`."""
    pattern = re.compile(re.escape(task) + r"\.log(?:\.([1-9][0-9]{0,2}))?")
    found = [(m, e.name) for e in entries if not e.is_dir and (m := pattern.fullmatch(e.name))]
    return [name for _, name in sorted(found, key=lambda f: -int(f[0].group(1) or 0))]


def logs(tree: LogTree, experiment: str, cluster: str, task: str, run: str | None, tail: str | None) -> Reply:
    checked("experiment", experiment, NAME)
    checked("cluster", cluster, NAME)
    checked("task", task, TASK)
    lines = None
    if tail is not None:
        if not (tail.isascii() and tail.isdigit()) or not 1 <= int(tail) <= MAX_TAIL:
            raise Refused(400, f"tail {tail!r}: must be a number of lines from 1 to {MAX_TAIL}")
        lines = int(tail)
    where = f"{experiment}/{cluster}"
    if run is None:
        runs = run_status.latest_runs(tree, experiment, cluster, [])
        if not runs:
            raise Refused(404, f"no run of {where} on the log volume: none of its tasks has started yet")
        run = runs[0][0]
    checked("run", run, NAME)
    directory = (experiment, cluster, RUN_PREFIX + run, "logs")
    try:
        entries = tree.entries(*directory)
    except Absent:
        raise Refused(404, f"no logs of run {run} of {where} on the log volume") from None
    names = log_files(entries, task)
    if not names:
        tasks = sorted({e.name.partition(".log")[0] for e in entries if ".log" in e.name})
        raise Refused(404, f"no log of {task} in run {run} of {where}; tasks with logs: {', '.join(tasks) or 'none'}")
    fds = []
    for name in names:
        try:
            fds.append(tree.open(*directory, name))
        except Absent:
            pass  # rotated away meanwhile
    stream = Concatenation(fds)
    try:
        start = 0 if lines is None else stream.tail_start(lines)
    except BaseException:
        stream.close()
        raise
    return Reply(200, TEXT, stream.size - start, stream.chunks(start), [("X-Tfk8s-Run", run)], stream.close)
