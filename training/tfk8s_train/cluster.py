"""A real TensorFlow cluster of local processes on loopback, each started through the launcher.

Every task gets exactly the env contract the infra code writes into pods (see ``launch.py``),
so what runs here is what runs on Kubernetes. Each launcher gets its own process group: one
``killpg`` reaches the launcher and its TensorFlow child, so nothing is left behind.
"""

from __future__ import annotations

import json
import os
import random
import re
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from tfk8s_train.launch import run_log_dir
from tfk8s_train.task_progress import PROGRESS_PREFIX

TRAINING_DIR = Path(__file__).resolve().parent.parent
LAUNCH_PY = Path(__file__).resolve().parent / "launch.py"
PROGRESS = re.compile(re.escape(PROGRESS_PREFIX) + r"task=(\S+) step=(\d+) loss=(\S+) accuracy=(\S+) examples_per_sec=(\S+)")
SCRUBBED = ("TF_CONFIG", "JOB_COMPLETION_INDEX")


# Where the kernel picks a client socket's own port (Linux; elsewhere, or where the range starts too
# low to leave room beneath it, ports come from the kernel as before).
EPHEMERAL_PORTS = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST_PORT = 10000
TRIES = 1000  # random ports tried beneath the range before asking the kernel


def _first_ephemeral() -> int | None:
    try:
        return int(EPHEMERAL_PORTS.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _bound(host: str, port: int) -> socket.socket | None:
    s = socket.socket()
    try:
        s.bind((host, port))
    except OSError:  # in use (or closing)
        s.close()
        return None
    return s


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """Ports free now, from below the kernel's ephemeral range where it is known: a task binds its
    port seconds later (after TensorFlow's import), and a port from that range (what binding to 0
    hands out) may by then be the local port of any outgoing connection on the machine, which the
    kernel never gives one from below it. All sockets stay open until all are chosen."""
    first = _first_ephemeral()
    sockets: list[socket.socket] = []
    try:
        if first is not None and first - LOWEST_PORT >= 1000:
            for _ in range(TRIES):
                if len(sockets) >= count:
                    break
                port = random.randrange(LOWEST_PORT, first)
                if port not in {s.getsockname()[1] for s in sockets} and (bound := _bound(host, port)) is not None:
                    sockets.append(bound)
        while len(sockets) < count:  # no range known, or too busy beneath it: the kernel's choice
            bound = _bound(host, 0)
            if bound is None:
                raise OSError(f"no free port on {host}")
            sockets.append(bound)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def make_spec(num_ps: int, num_workers: int, chief: bool, host: str = "127.0.0.1") -> dict[str, list[str]]:
    ports = iter(free_ports(num_ps + num_workers + int(chief), host))
    spec = {
        "ps": [f"{host}:{next(ports)}" for _ in range(num_ps)],
        "worker": [f"{host}:{next(ports)}" for _ in range(num_workers)],
    }
    if chief:
        spec["chief"] = [f"{host}:{next(ports)}"]
    return spec


@dataclass
class Task:
    job: str
    index: int
    process: subprocess.Popen[str] | None = None
    lines: deque[str] = field(default_factory=lambda: deque(maxlen=2000))
    progress: tuple[int, float, float, float] | None = None  # step, loss, accuracy, examples/s
    starts: int = 0

    @property
    def name(self) -> str:
        return f"{self.job}-{self.index}"


class LocalCluster:
    """Start, watch, kill and restart the tasks of one run. Use as a context manager."""

    def __init__(
        self,
        *,
        spec: Mapping[str, Sequence[str]],
        command: Sequence[str],
        log_dir: str,
        data_dir: str,
        classic_flags: bool = True,
        jobs: Sequence[str] | None = None,
        extra_env: Mapping[str, str] | None = None,
        output: TextIO | None = sys.stdout,
        on_progress: Callable[[Task], None] | None = None,
    ) -> None:
        self.spec = {job: list(hosts) for job, hosts in spec.items()}
        self.command = list(command)
        self.log_dir, self.data_dir = log_dir, data_dir
        # Each cluster is a new run, as each new Job is on Kubernetes (see launch.py, TFK8S_RUN_UID):
        # its own directory under log_dir, whatever earlier runs left there.
        self.run_uid = f"local-{secrets.token_hex(6)}"
        self.classic_flags = classic_flags
        self.extra_env = dict(extra_env or {})
        self.output = output
        self.on_progress = on_progress
        started = jobs if jobs is not None else list(self.spec)
        self.tasks = {f"{j}-{i}": Task(j, i) for j in started for i in range(len(self.spec[j]))}
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def env_for(self, job: str, index: int) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in SCRUBBED and not k.startswith("TFK8S_")}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(TRAINING_DIR), env.get("PYTHONPATH")) if p)
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        env["PYTHONUNBUFFERED"] = "1"
        env.update(
            {
                "TFK8S_CLUSTER_SPEC": json.dumps(self.spec),
                "TFK8S_JOB_NAME": job,
                "TFK8S_TASK_INDEX": str(index),
                "TFK8S_DATA_DIR": self.data_dir,
                "TFK8S_LOG_DIR": self.log_dir,
                "TFK8S_RUN_UID": self.run_uid,
                "TFK8S_CLASSIC_FLAGS": "true" if self.classic_flags else "false",
                "TFK8S_POLL_SECONDS": "0.5",
                "TFK8S_GRACE_SECONDS": "5",
            }
        )
        env.update(self.extra_env)
        return env

    @property
    def run_log_dir(self) -> Path:
        """Where this run's tasks write: checkpoints, TensorBoard events, results, done markers."""
        return Path(run_log_dir(self.log_dir, self.run_uid))

    def start(self) -> LocalCluster:
        Path(self.log_dir).mkdir(parents=True, exist_ok=True)
        for task in self.tasks.values():
            self.start_task(task.name)
        return self

    def start_task(self, name: str) -> Task:
        task = self.tasks[name]
        if task.process is not None and task.process.poll() is None:
            raise RuntimeError(f"{name} is still running")
        task.process = subprocess.Popen(
            [sys.executable, str(LAUNCH_PY), "--", *self.command],
            env=self.env_for(task.job, task.index),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            bufsize=1,
            start_new_session=True,  # its own process group: killpg reaches the TF child too
        )
        task.starts += 1
        thread = threading.Thread(target=self._pump, args=(task, task.process), daemon=True, name=f"log-{name}")
        thread.start()
        self._threads.append(thread)
        return task

    def _pump(self, task: Task, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        # No file of its own: each task's launcher keeps its output in <run>/logs/<task>.log.
        for line in process.stdout:
            line = line.rstrip("\n")
            task.lines.append(line)
            match = PROGRESS.search(line)
            if match:
                task.progress = (int(match[2]), float(match[3]), float(match[4]), float(match[5]))
                if self.on_progress:
                    self.on_progress(task)
                    continue  # the callback shows it
            if self.output is not None:
                with self._lock:
                    print(f"[{task.name}] {line}", file=self.output, flush=True)

    def signal_task(self, name: str, signum: int = signal.SIGKILL) -> None:
        """Send `signum` to the task's process group; wait for it to end unless it only pauses or resumes it."""
        process = self.tasks[name].process
        if process is not None and process.poll() is None:
            _killpg(process.pid, signum)
            if signum not in (signal.SIGSTOP, signal.SIGCONT):
                process.wait()

    def returncodes(self) -> dict[str, int | None]:
        return {name: (t.process.poll() if t.process else None) for name, t in self.tasks.items()}

    def wait(self, timeout: float) -> dict[str, int | None]:
        """Wait until every task exited; on the first failure or at the timeout stop everything.

        Returns the exit codes; a task that failed or had to be stopped shows a non-zero code.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            codes = self.returncodes()
            if any(code not in (None, 0) for code in codes.values()):
                self._say(f"a task failed ({codes}): stopping every task")
                break
            if all(code == 0 for code in codes.values()):
                break
            time.sleep(0.2)
        else:
            self._say(f"timeout after {timeout:.0f}s: stopping every task")
        if any(code != 0 for code in self.returncodes().values()):
            self.stop()
        for thread in self._threads:
            thread.join(timeout=5)
        return self.returncodes()

    def stop(self, grace: float = 5.0) -> None:
        """SIGTERM every process group, SIGKILL every group after ``grace`` seconds."""
        started = [t.process for t in self.tasks.values() if t.process is not None]
        for process in started:
            if process.poll() is None:
                _killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for process in started:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for process in started:
            _killpg(process.pid, signal.SIGKILL)  # also a TF child its launcher left behind
            process.wait()

    def _say(self, message: str) -> None:
        if self.output is not None:
            with self._lock:
                print(f"[runner] {message}", file=self.output, flush=True)

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _killpg(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass
