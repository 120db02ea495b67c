"""A task's progress in Prometheus' text format, served by its launcher on TFK8S_METRICS_PORT.

TensorFlow serves no metrics of training; the launcher already knows what a scrape needs (its
`task_progress.Tracker`), so it answers `GET /metrics` itself, from a thread, in the standard
library. Every sample is labelled with the tenant, experiment, cluster, role and index (from the
pod's env), so a query needs no relabelling to say whose run it is; the run's id is on
`tfk8s_task_info` alone, which keeps the other series one per task across runs.
Only the platform's monitoring may connect: the cluster's NetworkPolicy
(docs/guide/monitoring.md).

Runs on Python 3.6 and newer, like launch.py (`make lint` checks it with vermin).
"""

import os
import socketserver
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

try:
    from tfk8s_train.task_progress import progress_dir, read_progress
except ImportError:  # beside launch.py as plain files
    from task_progress import progress_dir, read_progress  # type: ignore[no-redef]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# (name, type, help, the snapshot's key)
GAUGES = (
    ("tfk8s_global_step", "gauge", "The global step the task last saw.", "step"),
    ("tfk8s_target_steps", "gauge", "The step the run trains to, when known.", "target_steps"),
    ("tfk8s_steps_per_second", "gauge", "Global steps per second over the last 30 s.", "steps_per_second"),
    (
        "tfk8s_examples_per_second",
        "gauge",
        "Examples per second this task trained on, as the trainer reports.",
        "examples_per_second",
    ),
    ("tfk8s_loss", "gauge", "The training loss last reported.", "loss"),
    ("tfk8s_task_memory_bytes", "gauge", "Resident memory of the task's process.", "memory_bytes"),
)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels: Mapping[str, str]) -> str:
    return "{" + ",".join(f'{key}="{_escape(value)}"' for key, value in labels.items()) + "}"


def task_labels(job: str, index: int, environ: Mapping[str, str]) -> Dict[str, str]:
    return {
        "tenant": environ.get("TFK8S_TENANT", ""),
        "experiment": environ.get("TFK8S_EXPERIMENT", ""),
        "cluster": environ.get("TFK8S_CLUSTER", ""),
        "role": job,
        "index": str(index),
    }


def ps_variables(run_dir: str, task: str) -> Optional[int]:
    """Variables placed on PS `task`, as a client of the run reported them (its progress file)."""
    for client in ("chief-0", "worker-0"):
        placement = read_progress(os.path.join(progress_dir(run_dir), client + ".json")).get("placement")
        if isinstance(placement, dict) and task in placement:
            return int(placement[task])
    return None


def render(snapshot: Mapping[str, Any], labels: Mapping[str, str], *, ps_variables: Optional[int] = None) -> str:
    """The exposition of one task (text format 0.0.4)."""
    base = _labels(labels)
    lines: List[str] = []

    def sample(name: str, kind: str, text: str, value: Any, extra: Optional[Mapping[str, str]] = None) -> None:
        if value is None:
            return
        lines.append(f"# HELP {name} {text}")
        lines.append(f"# TYPE {name} {kind}")
        lines.append(f"{name}{_labels({**labels, **extra}) if extra else base} {float(value)!r}")

    sample("tfk8s_task_info", "gauge", "The task and the run it belongs to.", 1, {"run": str(snapshot.get("run", ""))})
    sample("tfk8s_task_up", "gauge", "1 while the task's process runs.", 1 if snapshot.get("state") == "running" else 0)
    sample("tfk8s_task_starts_total", "counter", "Launches of this task in this run (1 + restarts).", snapshot.get("starts"))
    for name, kind, text, key in GAUGES:
        sample(name, kind, text, snapshot.get(key))
    first, started = snapshot.get("first_step_at"), snapshot.get("started_at")
    if first is not None and started is not None and snapshot.get("starts") == 1:
        sample(
            "tfk8s_first_step_seconds",
            "gauge",
            "Seconds from the task's start to the run's first step.",
            max(first - started, 0.0),
        )
    if snapshot.get("job") == "ps":
        retired = 1 if snapshot.get("state") == "retired" else 0
        sample("tfk8s_ps_retirements_total", "counter", "1 once this PS retired at its run's end.", retired)
        sample("tfk8s_ps_variables", "gauge", "Variables placed on this PS.", ps_variables)
    return "\n".join(lines) + "\n"


class _Server(socketserver.ThreadingMixIn, HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def serve(port: int, exposition: Callable[[], str]) -> Optional[Tuple[HTTPServer, threading.Thread]]:
    """Serve `GET /metrics` on every address of `port` from a daemon thread; None if it cannot bind."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the base class's name
            if self.path.split("?", 1)[0] != "/metrics":
                self.send_error(404, "only /metrics here")
                return
            body = exposition().encode()
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - scrapes are not news
            pass

    try:
        server = _Server(("", port), Handler)
    except OSError as err:
        print(f"tfk8s-launch: no metrics: cannot listen on port {port}: {err}", file=sys.stderr, flush=True)
        return None
    thread = threading.Thread(target=server.serve_forever, name="tfk8s-metrics", daemon=True)
    thread.start()
    return server, thread
