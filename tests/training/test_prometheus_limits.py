"""The training scrape's bounds, judged by a real Prometheus (hack/tools.sh prometheus, the binary the
real node's monitoring runs): the platform's own scrape job (tfk8s.specs.monitoring, its per-target
limits and kept names), its Kubernetes discovery replaced by three targets on loopback: a launcher's
real exposition (tfk8s_train.task_metrics), a task whose code serves a flood of tfk8s_* series, and
one that serves other names alone. The flood fails its scrape whole and stores nothing of its own;
the other names are dropped; the launcher's series are all there.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import socketserver
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from tfk8s.settings.monitoring import MonitoringSettings
from tfk8s.specs import monitoring
from tfk8s_train import task_metrics

import toolenv

LAUNCHER = task_metrics.render(
    {"run": "r1", "state": "running", "starts": 1, "job": "worker", "step": 42},
    {"tenant": "alice", "experiment": "dev", "cluster": "mnist", "role": "worker", "index": "0"},
)
# One more series of a kept name than a target may bring.
FLOOD = "".join(f'tfk8s_flood{{i="{i}"}} 1\n' for i in range(monitoring.TARGET_LIMITS["sample_limit"] + 1))
OTHER_NAMES = "".join(f"python_gc_objects_{i}_total 1\n" for i in range(50))


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


@contextlib.contextmanager
def serving(body: str) -> Iterator[str]:
    """`body` served at GET / on a loopback port; host:port."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            data = body.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = _Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


@pytest.fixture
def targets() -> Iterator[dict[str, str]]:
    with contextlib.ExitStack() as stack:
        bodies = {"launcher": LAUNCHER, "flood": FLOOD + LAUNCHER, "other": OTHER_NAMES}
        yield {name: stack.enter_context(serving(body)) for name, body in bodies.items()}


@pytest.fixture
def prometheus(tmp_path: Path, targets: dict[str, str]) -> Iterator[str]:
    binary = toolenv.tool("prometheus")
    (job,) = monitoring.scrape_config(MonitoringSettings(namespace="monitoring", interval="1s"), "tfk8s-")["scrape_configs"]
    del job["kubernetes_sd_configs"]
    job["relabel_configs"] = []  # they select and label discovered pods; these targets are static
    job["static_configs"] = [{"targets": list(targets.values())}]
    config = tmp_path / "prometheus.yml"
    config.write_text(yaml.safe_dump({"scrape_configs": [job]}))
    port = toolenv.free_port()
    server = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "prometheus.log").open("w"),
    )
    try:
        toolenv.wait_for_port(server, port, "prometheus")
        base = f"http://127.0.0.1:{port}"
        # It listens before its storage is open, answering 503 until then (/-/ready says when).
        deadline = time.monotonic() + 60
        while not _ready(base):
            assert time.monotonic() < deadline and server.poll() is None, (tmp_path / "prometheus.log").read_text()[-3000:]
            time.sleep(0.2)
        yield base
    finally:
        server.terminate()
        server.wait(10)


def _ready(base: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base}/-/ready", timeout=5) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def query(base: str, promql: str) -> dict[str, float]:
    """An instant query's answer: each series' instance (or its name) -> value."""
    url = f"{base}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
    with urllib.request.urlopen(url, timeout=5) as response:
        result = json.load(response)["data"]["result"]
    return {r["metric"].get("instance", r["metric"].get("__name__", "")): float(r["value"][1]) for r in result}


def test_a_task_serving_a_flood_is_dropped_whole_and_the_others_series_stay(prometheus: str, targets: dict[str, str]) -> None:
    deadline = time.monotonic() + 30
    while len(query(prometheus, "up")) < 3:  # every target scraped once
        assert time.monotonic() < deadline, query(prometheus, "up")
        time.sleep(0.2)
    time.sleep(1.5)  # a second round, so the flood's refusal and the others' series are settled
    launcher, flood, other = targets["launcher"], targets["flood"], targets["other"]
    assert query(prometheus, "up") == {launcher: 1.0, flood: 0.0, other: 1.0}
    kept = query(prometheus, 'count by (instance) ({__name__=~"tfk8s_.*"})')
    assert kept == {launcher: float(sum(line.startswith("tfk8s_") for line in LAUNCHER.splitlines()))}, kept
    # Nothing of the other names was stored, from any target (only Prometheus' own up and scrape_*).
    stored = query(prometheus, 'count by (__name__) ({__name__=~".+", __name__!~"tfk8s_.*|up|scrape_.*"})')
    assert stored == {}, stored
    # Refused for its size, not for anything else: Prometheus says which limit.
    with urllib.request.urlopen(f"{prometheus}/api/v1/targets", timeout=5) as response:
        active = json.load(response)["data"]["activeTargets"]
    (errors,) = [t["lastError"] for t in active if t["labels"]["instance"] == flood]
    assert "sample limit exceeded" in errors, errors
