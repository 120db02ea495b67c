"""What the launcher keeps and serves of its child: the output on the log volume (`task_log`), the
progress file (`task_progress`), and the metrics endpoint (`task_metrics`).

    TFK8S_LOG_MAX_BYTES   one log file's size before it is rotated (default 10 MiB)
    TFK8S_LOG_BACKUPS     rotated files kept (default 2): a task keeps at most 3 x 10 MiB
    TFK8S_PROGRESS_SECONDS how often the progress file is rewritten (default 5)
    TFK8S_METRICS_PORT    serve /metrics on this port (pods: the platform's metrics port); unset: none
    TFK8S_TARGET_STEPS    the run's step target, for scripts whose flags do not say it

Nothing here may stop training: a log volume that fails loses the file, not the run.

Runs on Python 3.6 and newer, like launch.py (`make lint` checks it with vermin).
"""

import os
import sys
import threading
import time
from http.server import HTTPServer
from typing import IO, Mapping, Optional, Sequence, Tuple

try:
    from tfk8s_train import task_metrics
    from tfk8s_train.task_log import OutputPump, RotatingLog
    from tfk8s_train.task_progress import Tracker, target_from_command
except ImportError:  # beside launch.py as plain files
    import task_metrics  # type: ignore[no-redef]
    from task_log import OutputPump, RotatingLog  # type: ignore[no-redef]
    from task_progress import Tracker, target_from_command  # type: ignore[no-redef]

DEFAULT_LOG_MAX_BYTES = 10 * 1024 * 1024


def _number(environ: Mapping[str, str], name: str, default: float) -> float:
    raw = environ.get(name, "").strip()
    try:
        return float(raw) if raw else default
    except ValueError:
        print(f"tfk8s-launch: {name}={raw!r} is not a number; using {default}", file=sys.stderr, flush=True)
        return default


class TaskWatch:
    def __init__(self, *, task: str, run: str, run_dir: str, cmd: Sequence[str], environ: Mapping[str, str]) -> None:
        job = task.rpartition("-")[0]
        self.tracker = Tracker(
            task=task, run=run, run_dir=run_dir, target=target_from_command(cmd, dict(environ)), read_events=job != "ps"
        )
        log: Optional[RotatingLog] = None
        try:
            log = RotatingLog(
                os.path.join(run_dir, "logs", task + ".log"),
                int(_number(environ, "TFK8S_LOG_MAX_BYTES", DEFAULT_LOG_MAX_BYTES)),
                int(_number(environ, "TFK8S_LOG_BACKUPS", 2)),
            )
        except OSError as err:
            print(f"tfk8s-launch: not keeping this task's log on the log volume: {err}", file=sys.stderr, flush=True)
        self.pump = OutputPump(log, [self.tracker.on_line])
        self.pump.note(
            f"=== tfk8s-launch: {task} start {self.tracker.starts} at {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} ==="
        )
        self.interval = max(_number(environ, "TFK8S_PROGRESS_SECONDS", 5.0), 0.2)
        self.labels = task_metrics.task_labels(self.tracker.job, self.tracker.index, environ)
        self.run_dir, self.task = run_dir, task
        self.port = environ.get("TFK8S_METRICS_PORT", "").strip()
        self.stopped = threading.Event()
        self.reporter = threading.Thread(target=self._report, name="tfk8s-progress", daemon=True)
        self.write_failed = False
        self.server: Optional[Tuple[HTTPServer, threading.Thread]] = None

    def note(self, line: str) -> None:
        self.pump.note(line)

    def attach(self, pid: int, output: IO[bytes]) -> None:
        """The child started: copy its output, report its progress, serve its metrics."""
        self.tracker.child_started(pid)
        self.pump.start(output)
        self._write()
        self.reporter.start()
        if self.port.isdigit():
            self.server = task_metrics.serve(int(self.port), self.exposition)

    def exposition(self) -> str:
        snapshot = self.tracker.snapshot()
        variables = task_metrics.ps_variables(self.run_dir, self.task) if self.tracker.job == "ps" else None
        return task_metrics.render(snapshot, self.labels, ps_variables=variables)

    def drain(self) -> None:
        """The child is gone: wait (a little) for the last of its output to be copied."""
        self.pump.join(5.0)

    def finish(self, state: str, exit_code: Optional[int]) -> None:
        """The child is gone (`state`: succeeded, failed or retired): the last of its output and progress."""
        self.drain()
        self.stopped.set()
        if self.reporter.is_alive():
            self.reporter.join(30.0)  # its last write must not land after the final one
        self.tracker.poll()
        self.tracker.child_ended(state, exit_code)
        self._write()
        self.pump.close()
        if self.server is not None:  # its port free again, for the launcher's next start of the child
            self.server[0].shutdown()
            self.server[0].server_close()

    def _report(self) -> None:
        while not self.stopped.wait(self.interval):
            self.tracker.poll()
            self._write()

    def _write(self) -> None:
        try:
            self.tracker.write()
        except OSError as err:
            if not self.write_failed:
                self.write_failed = True
                print(f"tfk8s-launch: cannot write this task's progress: {err}", file=sys.stderr, flush=True)
