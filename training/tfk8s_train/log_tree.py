"""The tenant's log volume as the TensorBoard gate reads it: experiments, clusters and runs beneath
one root, `<root>/<experiment>/<cluster>/run-<uid>/`, and in a run what its tasks' launchers write
(docs/guide/status.md; tfk8s_train.launch): `.tfk8s/progress/<task>.json` and
`logs/<task>.log` with its rotated `.log.1`, `.log.2`.

The volume is written by the tenant's training code, so nothing in it is trusted. Every name is
checked before it is used, and every directory and file is opened relative to its parent's file
descriptor with O_NOFOLLOW: a symbolic link anywhere beneath the root is neither followed nor
listed, and no path can leave the root (the root itself, the pod's mount, may be a link). Files are
opened non-blocking (a FIFO never holds a reader) and read only if regular.

Standard library only: the gate runs in the TensorBoard image's Python.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass

# An experiment's or a cluster's name, a run's uid: a letter or digit, then letters, digits, `_.-`.
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
# A task: `<job>-<index>`, as the launcher names it.
TASK = re.compile(r"(ps|worker|chief|evaluator)-(0|[1-9][0-9]{0,5})")
RUN_PREFIX = "run-"
# What any one name beneath the root may be, whoever asks (the patterns above are stricter).
SAFE = re.compile(r"[A-Za-z0-9_.-]{1,255}")
DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
BLOCK = 64 * 1024


class Absent(Exception):
    """Not there as a plain directory or regular file (a symbolic link, a FIFO, a device count as absent)."""


@dataclass(frozen=True)
class Entry:
    name: str
    is_dir: bool
    mtime: float


def safe(part: str) -> str:
    if not SAFE.fullmatch(part) or part in (".", ".."):
        raise ValueError(f"{part!r}: not a name beneath the log root")
    return part


class LogTree:
    """Read-only access beneath `root`, by names, never through a symbolic link."""

    def __init__(self, root: str) -> None:
        self.root = root

    @contextlib.contextmanager
    def directory(self, *parts: str) -> Iterator[int]:
        """A file descriptor of the directory `root/parts...`; Absent if any part is not a directory."""
        opened = [self._open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, None)]
        try:
            for part in parts:
                opened.append(self._open(safe(part), DIRECTORY_FLAGS, opened[-1]))
            yield opened[-1]
        finally:
            for fd in opened:
                os.close(fd)

    def entries(self, *parts: str) -> list[Entry]:
        """The plain directories and regular files in `root/parts...` (Absent if it is not a directory)."""
        found = []
        with self.directory(*parts) as fd, os.scandir(fd) as scan:
            for item in scan:
                try:
                    info = item.stat(follow_symlinks=False)
                except OSError:
                    continue  # gone meanwhile
                if stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode):
                    found.append(Entry(item.name, stat.S_ISDIR(info.st_mode), info.st_mtime))
        return found

    def mtime(self, *parts: str) -> float:
        with self.directory(*parts) as fd:
            return os.fstat(fd).st_mtime

    def open(self, *parts: str) -> int:
        """A file descriptor of the regular file `root/parts...` (the caller closes it)."""
        *folders, name = parts
        with self.directory(*folders) as parent:
            fd = self._open(safe(name), FILE_FLAGS, parent)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise Absent(os.path.join(*parts))
        return fd

    def read(self, *parts: str, limit: int) -> bytes:
        """The whole regular file, if it holds at most `limit` bytes (ValueError otherwise)."""
        fd = self.open(*parts)
        try:
            size = os.fstat(fd).st_size
            if size > limit:
                raise ValueError(f"{size} bytes, more than {limit}")
            return os.pread(fd, limit + 1, 0)[:limit]
        finally:
            os.close(fd)

    @staticmethod
    def _open(name: str, flags: int, parent: int | None) -> int:
        try:
            return os.open(name, flags, dir_fd=parent)
        except OSError as error:
            if error.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.EACCES, errno.ENXIO):
                raise Absent(name) from None
            raise


class Concatenation:
    """Files read as one stream, in order, each as long as it was when opened (a log the launcher
    rotates meanwhile keeps its bytes: the descriptors hold the files, whatever their names become)."""

    def __init__(self, fds: list[int]) -> None:
        self.fds = fds
        try:
            self.sizes = [os.fstat(fd).st_size for fd in fds]
        except BaseException:
            self.close()
            raise
        self.size = sum(self.sizes)

    def close(self) -> None:
        """Close the files (again: nothing)."""
        fds, self.fds = self.fds, []
        for fd in fds:
            os.close(fd)

    def read(self, offset: int, length: int) -> bytes:
        """`length` bytes from `offset` of the stream (padded with newlines where a file shrank)."""
        out = []
        for fd, size in zip(self.fds, self.sizes, strict=True):
            if offset < size and length > 0:
                n = min(length, size - offset)
                data = os.pread(fd, n, offset)
                out.append(data + b"\n" * (n - len(data)))
                length -= n
                offset = 0
            else:
                offset -= size
        return b"".join(out)

    def tail_start(self, lines: int) -> int:
        """Where the last `lines` lines start (a last line without its newline counts as one)."""
        end = self.size
        if end and self.read(end - 1, 1) == b"\n":
            end -= 1  # the last line's own newline does not start another
        seen, position = 0, end
        while position > 0:
            start = max(0, position - BLOCK)
            block = self.read(start, position - start)
            found = block.rfind(b"\n")
            while found >= 0:
                seen += 1
                if seen == lines:
                    return start + found + 1
                found = block.rfind(b"\n", 0, found)
            position = start
        return 0

    def chunks(self, start: int) -> Iterator[bytes]:
        """The stream from `start` to its end, a block at a time (the caller closes the files)."""
        for offset in range(start, self.size, BLOCK):
            yield self.read(offset, min(BLOCK, self.size - offset))
