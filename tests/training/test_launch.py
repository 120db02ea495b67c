"""The launcher: env contract parsing, the child's flags and TF_CONFIG, the done-marker barrier
that retires servers, signal forwarding, and scaling a PS Deployment to zero (fake API server).

No TensorFlow here: the children are tiny Python programs, the launcher is the real file.
"""

from __future__ import annotations

import http.server
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest
from tfk8s.settings.experiment import ClusterSettings, PsSettings, WorkerSettings
from tfk8s.specs import cluster_spec as cs
from tfk8s.specs import labels, pods
from tfk8s_train import kube_retire, launch
from tfk8s_train.launch import LaunchError, parse_env

SPEC = {"ps": ["ps-0:2222", "ps-1:2222"], "worker": ["w-0.w:2222", "w-1.w:2222"]}
CHIEF_SPEC = {**SPEC, "chief": ["c-0:2222"]}
TRAINING_DIR = Path(launch.__file__).resolve().parent.parent


def env(spec: dict[str, list[str]] | None = None, **overrides: str) -> dict[str, str]:
    base = {
        "TFK8S_CLUSTER_SPEC": json.dumps(spec or SPEC),
        "TFK8S_JOB_NAME": "worker",
        "TFK8S_TASK_INDEX": "1",
        "TFK8S_RUN_UID": "u1",
    }
    return {k: v for k, v in {**base, **overrides}.items() if v != "<unset>"}


@pytest.mark.parametrize(
    ("environ", "job", "index", "done_when"),
    [
        (env(), "worker", 1, "workers"),
        (env(TFK8S_TASK_INDEX="<unset>", JOB_COMPLETION_INDEX="0"), "worker", 0, "workers"),
        (env(TFK8S_TASK_INDEX="1", JOB_COMPLETION_INDEX="0"), "worker", 1, "workers"),
        (env(TFK8S_JOB_NAME="ps", TFK8S_TASK_INDEX="0"), "ps", 0, "workers"),
        (env(CHIEF_SPEC, TFK8S_JOB_NAME="chief", TFK8S_TASK_INDEX="0"), "chief", 0, "chief"),
        (env(CHIEF_SPEC, TFK8S_DONE_WHEN="workers"), "worker", 1, "workers"),
    ],
    ids=["explicit-index", "indexed-job", "explicit-wins", "ps", "chief", "done-when-override"],
)
def test_parse_env_reads_the_contract(environ: dict[str, str], job: str, index: int, done_when: str) -> None:
    spec = parse_env(environ)
    assert (spec.job, spec.index, spec.done_when) == (job, index, done_when)
    assert (spec.data_dir, spec.log_dir, spec.classic_flags) == ("/data", "/log", True)


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        (env(TFK8S_CLUSTER_SPEC="<unset>"), "TFK8S_CLUSTER_SPEC is not set"),
        (env(TFK8S_CLUSTER_SPEC="{ps:"), "not valid JSON"),
        (env(TFK8S_CLUSTER_SPEC='["ps-0:1"]'), "must be a non-empty JSON object"),
        (env({"ps": ["ps-0"]}), "list of 'host:port'"),
        (env({"evaluator": ["e:1"]}), "unknown job 'evaluator'"),
        (env(TFK8S_JOB_NAME="master"), "TFK8S_JOB_NAME='master'"),
        (env(TFK8S_JOB_NAME="chief"), "not a job of TFK8S_CLUSTER_SPEC"),
        (env(TFK8S_TASK_INDEX="<unset>"), "neither TFK8S_TASK_INDEX nor JOB_COMPLETION_INDEX"),
        (env(TFK8S_TASK_INDEX="one"), "TFK8S_TASK_INDEX='one' is not an integer"),
        (env(TFK8S_TASK_INDEX="2"), "task index 2 is out of range"),
        (env(TFK8S_CLASSIC_FLAGS="yes"), "TFK8S_CLASSIC_FLAGS='yes'"),
        (env(TFK8S_DONE_WHEN="chief"), "no chief"),
        (env(TFK8S_POLL_SECONDS="soon"), "TFK8S_POLL_SECONDS='soon'"),
        (env(TFK8S_RUN_UID="<unset>"), "TFK8S_RUN_UID is not set"),
        (env(TFK8S_RUN_UID=""), "TFK8S_RUN_UID is not set"),  # a downward-API label that is missing
        (env(TFK8S_RUN_UID="../other"), "must not contain '/'"),
        (env(TFK8S_WATCH_JOB_RUN="r1", TFK8S_WATCH_JOB="w"), "TFK8S_RUN_UID and TFK8S_WATCH_JOB_RUN are both set"),
        (env(TFK8S_RUN_UID="<unset>", TFK8S_WATCH_JOB_RUN="r1"), "TFK8S_WATCH_JOB_RUN is set without TFK8S_WATCH_JOB"),
    ],
    ids=[
        "no-spec",
        "bad-json",
        "not-object",
        "no-port",
        "unknown-job",
        "bad-job",
        "job-not-in-spec",
        "no-index",
        "bad-index",
        "index-range",
        "bad-flag-switch",
        "chief-missing",
        "bad-poll",
        "no-run-uid",
        "empty-run-uid",
        "run-uid-path",
        "uid-and-where-to-read-it",
        "run-without-job",
    ],
)
def test_parse_env_rejects_bad_input_naming_the_variable(environ: dict[str, str], message: str) -> None:
    with pytest.raises(LaunchError, match=message.replace("(", r"\(").replace("[", r"\[")):
        parse_env(environ)


def test_child_gets_tf_config_and_classic_flags() -> None:
    spec = parse_env(env(TFK8S_DATA_DIR="/d", TFK8S_LOG_DIR="/l"))
    child = launch.child_env(spec, {"PATH": "/bin", "TFK8S_LOG_DIR": "/l"})
    assert json.loads(child["TF_CONFIG"]) == {"cluster": SPEC, "task": {"type": "worker", "index": 1}}
    assert child["TFK8S_LOG_DIR"] == "/l/run-u1"  # the run's own directory: checkpoints, events, markers
    assert launch.child_command(spec, ["python", "t.py"]) == [
        "python",
        "t.py",
        "--ps_hosts=ps-0:2222,ps-1:2222",
        "--worker_hosts=w-0.w:2222,w-1.w:2222",
        "--job_name=worker",
        "--task_index=1",
        "--data_dir=/d",
        "--log_path=/l/run-u1",
    ]
    no_flags = parse_env(env(TFK8S_CLASSIC_FLAGS="false"))
    assert launch.child_command(no_flags, ["python", "t.py"]) == ["python", "t.py"]


# The infra's side of the contract, as production pods get it: the cluster spec of tfk8s.specs.cluster_spec
# in the environment of tfk8s.specs.pods.task_env (the pure builders, no Pulumi).
INFRA_CLUSTER = ClusterSettings(name="mnist", ps=PsSettings(count=2), workers=WorkerSettings(count=3))
IN_GRAPH_CLUSTER = INFRA_CLUSTER.model_copy(update=dict(replication="in-graph", in_graph_client="chief"))


def infra_env(job: str, index: int | None, cluster: ClusterSettings = INFRA_CLUSTER, **pod: str) -> dict[str, str]:
    """A task's environment as its pod sees it; `pod`: what Kubernetes adds (JOB_COMPLETION_INDEX)."""
    entries = pods.task_env(cluster, cs.cluster_spec(cluster, 2222), job, index, pods.run_uid_value("u1"))
    return {**{e["name"]: e["value"] for e in entries if "value" in e}, **pod}  # valueFrom: the kubelet's


@pytest.mark.parametrize(
    ("environ", "cluster", "task"),
    [
        (infra_env("worker", None, JOB_COMPLETION_INDEX="2"), INFRA_CLUSTER, {"type": "worker", "index": 2}),
        (infra_env("ps", 1), INFRA_CLUSTER, {"type": "ps", "index": 1}),
        (infra_env("chief", 0, IN_GRAPH_CLUSTER), IN_GRAPH_CLUSTER, {"type": "chief", "index": 0}),
    ],
    ids=["worker-of-indexed-job", "ps", "in-graph-chief"],
)
def test_tf_config_of_an_infra_spec_is_json_naming_the_task(
    environ: dict[str, str], cluster: ClusterSettings, task: dict[str, Any]
) -> None:
    config = json.loads(launch.tf_config(parse_env(environ)))
    assert config == {"cluster": cs.cluster_spec(cluster, 2222), "task": task}


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        (infra_env("worker", None, JOB_COMPLETION_INDEX="3"), "task index 3 is out of range: job 'worker' has 3 task(s)"),
        (infra_env("ps", -1), "task index -1 is out of range"),
        (infra_env("chief", 0), "TFK8S_JOB_NAME='chief' is not a job of TFK8S_CLUSTER_SPEC"),  # between-graph: no chief
    ],
    ids=["worker-past-the-end", "negative-ps", "chief-of-between-graph"],
)
def test_tasks_outside_an_infra_spec_are_refused(environ: dict[str, str], message: str) -> None:
    with pytest.raises(LaunchError, match=re.escape(message)):
        parse_env(environ)


def test_classic_flags_of_an_infra_spec_match_the_seed_convention() -> None:
    spec = parse_env(infra_env("ps", 1))
    assert launch.classic_flags(spec) == [
        "--ps_hosts=mnist-ps-0:2222,mnist-ps-1:2222",
        "--worker_hosts=mnist-worker-0.mnist-worker:2222,mnist-worker-1.mnist-worker:2222,mnist-worker-2.mnist-worker:2222",
        "--job_name=ps",
        "--task_index=1",
        "--data_dir=/data",
        "--log_path=/log/run-u1",  # the run's own directory of the log volume
    ]


def test_barrier_waits_for_every_expected_marker(tmp_path: Path) -> None:
    ps = parse_env(env(TFK8S_JOB_NAME="ps", TFK8S_TASK_INDEX="0", TFK8S_LOG_DIR=str(tmp_path), TFK8S_RUN_UID="r1"))
    assert not launch.barrier_met(ps)
    launch.write_done_marker(launch.run_log_dir(tmp_path, "r1"), "worker", 1)
    launch.write_done_marker(launch.run_log_dir(tmp_path, "r0"), "worker", 0)  # another run's marker never counts
    assert not launch.barrier_met(ps)
    marker = launch.write_done_marker(launch.run_log_dir(tmp_path, "r1"), "worker", 0)
    assert launch.barrier_met(ps)
    assert json.loads(marker.read_text())["job"] == "worker"
    assert sorted(p.name for p in marker.parent.iterdir()) == ["worker-0", "worker-1"]  # no temp files left


def _launch(
    tmp_path: Path,
    job: str,
    index: int,
    code: str,
    spec: dict[str, list[str]] | None = None,
    python: str = sys.executable,
    **extra: str,
) -> subprocess.Popen[str]:
    """The launcher as a process under `python` (the child it supervises runs under this interpreter)."""
    environ = {
        **os.environ,
        **env(spec, TFK8S_JOB_NAME=job, TFK8S_TASK_INDEX=str(index)),
        "TFK8S_LOG_DIR": str(tmp_path),
        "TFK8S_RUN_UID": "run",
        "TFK8S_POLL_SECONDS": "0.1",
        "TFK8S_GRACE_SECONDS": "2",
        "TFK8S_CLASSIC_FLAGS": "false",
        **extra,
    }
    if "KUBERNETES_SERVICE_HOST" not in extra:
        environ.pop("KUBERNETES_SERVICE_HOST", None)
    return subprocess.Popen(
        [python, str(TRAINING_DIR / "tfk8s_train" / "launch.py"), "--", sys.executable, "-c", code],
        env=environ,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


SERVER = "import time\nwhile True: time.sleep(0.05)"


def _until_ready(proc: subprocess.Popen[str]) -> IO[str]:
    """Reads the launcher's output until its child says `ready` (it has set its signal handlers);
    the rest of the output."""
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.strip() == "ready":
            return proc.stdout
    raise AssertionError("the launcher's output ended before its child was ready")


def test_ps_launcher_stops_its_server_once_all_workers_are_done(tmp_path: Path, launcher_python: str) -> None:
    ps = _launch(tmp_path, "ps", 0, SERVER, python=launcher_python)
    worker0 = _launch(
        tmp_path, "worker", 0, "import os, json; print(json.loads(os.environ['TF_CONFIG'])['task'])", python=launcher_python
    )
    assert worker0.wait(30) == 0
    assert "{'type': 'worker', 'index': 0}" in worker0.stdout.read()  # type: ignore[union-attr]
    with pytest.raises(subprocess.TimeoutExpired):
        ps.wait(1.0)  # one of two workers done: the PS must keep serving
    assert _launch(tmp_path, "worker", 1, "pass", python=launcher_python).wait(30) == 0
    assert ps.wait(30) == 0
    assert "are done; retiring" in ps.stdout.read()  # type: ignore[union-attr]
    # Markers persist: a PS restarted after the run is done exits at once without serving.
    late = _launch(tmp_path, "ps", 1, "import sys; sys.exit(7)", python=launcher_python)
    assert late.wait(30) == 0
    # A new run (a new Job: another uid) on the same log volume serves: the old markers are history.
    rerun = _launch(tmp_path, "ps", 0, SERVER, python=launcher_python, TFK8S_RUN_UID="next")
    with pytest.raises(subprocess.TimeoutExpired):
        rerun.wait(1.0)
    for index in (0, 1):
        assert _launch(tmp_path, "worker", index, "pass", python=launcher_python, TFK8S_RUN_UID="next").wait(30) == 0
    assert rerun.wait(30) == 0
    assert {p.name for p in launch.done_dir(launch.run_log_dir(tmp_path, "next")).iterdir()} == {"worker-0", "worker-1"}


def test_in_graph_workers_are_servers_retired_by_the_chief_marker(tmp_path: Path, launcher_python: str) -> None:
    worker = _launch(tmp_path, "worker", 1, SERVER, spec=CHIEF_SPEC, python=launcher_python)
    with pytest.raises(subprocess.TimeoutExpired):
        worker.wait(1.0)
    assert _launch(tmp_path, "chief", 0, "pass", spec=CHIEF_SPEC, python=launcher_python).wait(30) == 0
    assert worker.wait(30) == 0
    assert not (launch.done_dir(launch.run_log_dir(tmp_path, "run")) / "worker-1").exists()  # stopped, not finished


def test_failed_worker_writes_no_marker_and_passes_its_code(tmp_path: Path, launcher_python: str) -> None:
    assert _launch(tmp_path, "worker", 0, "import sys; sys.exit(3)", python=launcher_python).wait(30) == 3
    assert not launch.done_dir(launch.run_log_dir(tmp_path, "run")).exists()


def test_sigterm_is_forwarded_to_the_child(tmp_path: Path, launcher_python: str) -> None:
    code = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *_: (print('child got SIGTERM', flush=True), sys.exit(0)))\n"
        "print('ready', flush=True)\nwhile True: time.sleep(0.05)"
    )
    proc = _launch(tmp_path, "worker", 0, code, python=launcher_python)
    output = _until_ready(proc)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    assert "child got SIGTERM" in output.read()


def test_launcher_runs_as_module_and_reports_usage_errors(tmp_path: Path) -> None:
    environ = {**os.environ, "PYTHONPATH": str(TRAINING_DIR), **env(TFK8S_TASK_INDEX="<unset>")}
    environ.pop("JOB_COMPLETION_INDEX", None)
    run = subprocess.run(
        [sys.executable, "-m", "tfk8s_train.launch", "--", "true"], env=environ, capture_output=True, text=True, timeout=30
    )
    assert run.returncode == 2
    assert "neither TFK8S_TASK_INDEX nor JOB_COMPLETION_INDEX" in run.stderr


class _FakeApiServer(http.server.BaseHTTPRequestHandler):
    """The API server's answers a PS launcher reads: its Job by name, that Job listed and watched
    through a metadata.name field selector (newline-delimited JSON events, chunked, as the real one
    streams them), and the Deployment's scale subresource. `set_job` changes the Job as a
    controller would: a new resourceVersion, an event to every watch."""

    protocol_version = "HTTP/1.1"
    requests: list[dict[str, Any]] = []
    status = 200
    job: dict[str, Any] | None = None  # what GET .../jobs/<name> answers; None: 404
    version = 1  # the collection's resourceVersion
    events: list[tuple[int, dict[str, Any]]] = []  # (resourceVersion, watch event)
    watch_status = 200  # 403: a Role without list and watch; 410: every watch too old
    watch_seconds = 60.0  # how long the server keeps a watch open (a server timeout before timeoutSeconds)
    expire_first_watch = False  # the first watch answers an ERROR event 410 (its resourceVersion compacted)
    failing_watches = 0  # so many watches answer HTTP 500

    @classmethod
    def set_job(cls, job: dict[str, Any] | None) -> None:
        cls.version += 1
        if job is None:
            kind, obj = "DELETED", cls.job
        else:
            kind, obj = ("ADDED" if cls.job is None else "MODIFIED"), job
        cls.job = None if job is None else {**job, "metadata": {**job["metadata"], "resourceVersion": str(cls.version)}}
        if obj is not None:
            cls.events.append((cls.version, {"type": kind, "object": cls.job or obj}))

    def do_GET(self) -> None:  # noqa: N802
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        handler = type(self)
        kind = "watch" if query.get("watch") == "1" else "list" if url.path.endswith("/jobs") else "get"
        handler.requests.append({"path": url.path, "method": "GET", "kind": kind, "query": query, "time": time.monotonic()})
        if kind == "get":
            job = handler.job
            self._reply(200 if job is not None else 404, job or {"kind": "Status", "code": 404})
        elif handler.watch_status != 200:
            self._reply(handler.watch_status, {"kind": "Status", "code": handler.watch_status})
        elif kind == "watch" and handler.failing_watches:
            handler.failing_watches -= 1
            self._reply(500, {"kind": "Status", "code": 500})
        elif kind == "list":
            items = [handler.job] if handler.job else []
            self._reply(200, {"kind": "JobList", "metadata": {"resourceVersion": str(handler.version)}, "items": items})
        else:
            self._watch(int(query["resourceVersion"]), min(float(query["timeoutSeconds"]), handler.watch_seconds))

    def _watch(self, version: int, seconds: float) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        handler = type(self)
        if handler.expire_first_watch:
            handler.expire_first_watch = False
            self._chunk({"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}})
        else:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                for at, event in list(handler.events):
                    if at > version:
                        self._chunk(event)
                        version = at
                time.sleep(0.01)
        self.wfile.write(b"0\r\n\r\n")

    def _chunk(self, event: dict[str, Any]) -> None:
        line = json.dumps(event).encode() + b"\n"
        self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
        self.wfile.flush()

    def _reply(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_PATCH(self) -> None:  # noqa: N802 - the http.server naming convention
        body = self.rfile.read(int(self.headers["Content-Length"]))
        record = {"path": self.path, "headers": dict(self.headers), "body": json.loads(body), "time": time.monotonic()}
        type(self).requests.append(record)
        self._reply(type(self).status, {"kind": "Scale", "spec": {"replicas": 0}})

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def api_server() -> Iterator[tuple[str, type[_FakeApiServer]]]:
    fresh = {"requests": [], "status": 200, "job": None, "version": 1, "events": [], "watch_status": 200, "failing_watches": 0}
    handler = type("Handler", (_FakeApiServer,), fresh)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler
    server.shutdown()


def test_scale_deployment_patches_the_scale_subresource(api_server: tuple[str, Any]) -> None:
    url, handler = api_server
    assert kube_retire.scale_deployment(url, "team-a", "exp1-ps-0", token="s3cret") == 200
    [request] = handler.requests
    assert request["path"] == "/apis/apps/v1/namespaces/team-a/deployments/exp1-ps-0/scale"
    assert request["body"] == {"spec": {"replicas": 0}}
    assert request["headers"]["Authorization"] == "Bearer s3cret"
    assert request["headers"]["Content-Type"] == "application/merge-patch+json"


def test_retiring_reads_the_service_account_and_never_raises(tmp_path: Path, api_server: tuple[str, Any]) -> None:
    url, handler = api_server
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text("tok\n")
    (sa / "namespace").write_text("from-sa\n")
    in_pod = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "TFK8S_KUBE_API": url}  # a proxy in front of the API
    assert kube_retire.retire_deployment("exp1-ps-0", None, in_pod, sa_dir=sa)
    assert handler.requests[-1]["path"] == "/apis/apps/v1/namespaces/from-sa/deployments/exp1-ps-0/scale"
    assert handler.requests[-1]["headers"]["Authorization"] == "Bearer tok"
    assert kube_retire.retire_deployment("d", "ns", in_pod, sa_dir=sa)  # TFK8S_NAMESPACE wins over the file
    assert handler.requests[-1]["path"] == "/apis/apps/v1/namespaces/ns/deployments/d/scale"
    handler.status = 403  # RBAC forgot deployments/scale: logged, not fatal
    assert not kube_retire.retire_deployment("d", "ns", in_pod, sa_dir=sa)
    calls = len(handler.requests)
    assert not kube_retire.retire_deployment("d", "ns", {}, sa_dir=sa)  # not in a pod: nothing to do
    assert kube_retire.api_server({"KUBERNETES_SERVICE_HOST": "fd00::1"}) == "https://[fd00::1]:443"
    assert len(handler.requests) == calls


def test_ps_launcher_scales_its_deployment_to_zero_after_the_barrier(
    tmp_path: Path, api_server: tuple[str, Any], launcher_python: str
) -> None:
    """End to end through the real launcher: barrier met -> PATCH /scale -> server stopped -> exit 0."""
    url, handler = api_server
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text("tok")
    launch.write_done_marker(launch.run_log_dir(tmp_path, "run"), "worker", 0)
    launch.write_done_marker(launch.run_log_dir(tmp_path, "run"), "worker", 1)
    ps = _launch(
        tmp_path,
        "ps",
        0,
        SERVER,
        python=launcher_python,
        TFK8S_PS_DEPLOYMENT="exp1-ps-0",
        TFK8S_NAMESPACE="team-a",
        KUBERNETES_SERVICE_HOST="127.0.0.1",
        TFK8S_KUBE_API=url,
        TFK8S_SA_DIR=str(sa),
    )
    assert ps.wait(30) == 0
    assert [r["path"] for r in handler.requests] == ["/apis/apps/v1/namespaces/team-a/deployments/exp1-ps-0/scale"]


RUNNING = {"kind": "Job", "metadata": {"uid": "run", "name": "exp1-worker"}, "status": {"active": 2}}
FAILED = {
    "kind": "Job",
    "metadata": {"uid": "run"},
    "status": {"conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]},
}
NEXT_RUN = {"kind": "Job", "metadata": {"uid": "a-later-run"}, "status": {"active": 2}}


def _watching_ps(tmp_path: Path, url: str, python: str, **extra: str) -> subprocess.Popen[str]:
    sa = tmp_path / "sa"
    sa.mkdir(exist_ok=True)
    (sa / "token").write_text("tok")
    return _launch(
        tmp_path,
        "ps",
        0,
        SERVER,
        TFK8S_PS_DEPLOYMENT="exp1-ps-0",
        TFK8S_NAMESPACE="team-a",
        python=python,
        TFK8S_WATCH_JOB="exp1-worker",
        KUBERNETES_SERVICE_HOST="127.0.0.1",
        TFK8S_KUBE_API=url,
        TFK8S_SA_DIR=str(sa),
        **extra,
    )


def _gets(handler: Any) -> list[str]:
    return [r["path"] for r in handler.requests if r.get("method") == "GET"]


def _kinds(handler: Any) -> list[str]:
    """get, list and watch: the launcher's reads of its Job, in order."""
    return [r["kind"] for r in handler.requests if r.get("method") == "GET"]


def _wait_for(ps: subprocess.Popen[str], done: Any, seconds: float = 10) -> None:
    """Until done() holds, with the PS still serving; a PS still serving when it does not is killed."""
    deadline = time.monotonic() + seconds
    while not done():
        assert ps.poll() is None, ps.communicate()[0]
        if time.monotonic() > deadline:
            ps.terminate()  # forwarded to its server: a failed test leaves no process behind
            pytest.fail(f"timed out; the launcher said: {ps.communicate()[0]}")
        time.sleep(0.02)


def test_ps_retires_within_a_fraction_of_a_second_of_its_jobs_failed_event(
    tmp_path: Path, api_server: tuple[str, Any], launcher_python: str
) -> None:
    """No done marker will ever come: the Job's Failed condition, streamed by the watch, retires the
    PS at once, not at its next poll (5 s here)."""
    url, handler = api_server
    handler.set_job(RUNNING)
    ps = _watching_ps(tmp_path, url, launcher_python, TFK8S_POLL_SECONDS="5")
    _wait_for(ps, lambda: "watch" in _kinds(handler))
    time.sleep(0.3)  # the watch is streaming, and the PS serving
    assert ps.poll() is None
    failed_at = time.monotonic()
    handler.set_job(FAILED)
    assert ps.wait(10) == 0
    out = ps.stdout.read() if ps.stdout else ""
    assert "job exp1-worker is Failed; retiring" in out, out
    [scale] = [r for r in handler.requests if "method" not in r]
    assert scale["path"] == "/apis/apps/v1/namespaces/team-a/deployments/exp1-ps-0/scale"
    assert scale["time"] - failed_at < 0.5
    listed, watched = [r for r in handler.requests if r.get("method") == "GET"]
    assert listed["path"] == watched["path"] == "/apis/batch/v1/namespaces/team-a/jobs"
    assert listed["query"] == {"fieldSelector": "metadata.name=exp1-worker"}  # what RBAC's resourceNames allow
    assert watched["query"]["fieldSelector"] == "metadata.name=exp1-worker"
    assert watched["query"]["resourceVersion"] == "2"  # the list's: no event missed between the two
    assert watched["query"]["allowWatchBookmarks"] == "true" and watched["query"]["watch"] == "1"


@pytest.mark.parametrize("then", [None, NEXT_RUN], ids=["deleted (TTL clean-up, destroy)", "replaced by another run's Job"])
def test_ps_retires_when_its_job_is_gone(
    tmp_path: Path, api_server: tuple[str, Any], launcher_python: str, then: dict[str, Any] | None
) -> None:
    """A PS is created after its Job and knows its uid: a Job that is gone, or now of another uid,
    means the run it serves is over, even if that PS never saw the run end."""
    url, handler = api_server
    handler.set_job(RUNNING)
    ps = _watching_ps(tmp_path, url, launcher_python)
    _wait_for(ps, lambda: "watch" in _kinds(handler))
    handler.set_job(then)
    assert ps.wait(10) == 0
    assert "job exp1-worker of run run is gone; retiring" in (ps.stdout.read() if ps.stdout else "")


def test_ps_whose_job_is_gone_before_it_watches_retires(
    tmp_path: Path, api_server: tuple[str, Any], launcher_python: str
) -> None:
    url, handler = api_server  # no Job: the list has no item
    ps = _watching_ps(tmp_path, url, launcher_python)
    assert ps.wait(10) == 0
    assert "job exp1-worker of run run is gone; retiring" in (ps.stdout.read() if ps.stdout else "")
    assert _kinds(handler) == ["list"]


@pytest.mark.parametrize(
    ("setting", "value", "watches", "lists"),
    [("watch_seconds", 0.2, 3, 1), ("expire_first_watch", True, 2, 2), ("failing_watches", 1, 2, 2)],
    ids=[
        "the server ends the watch: it goes on from where it was",
        "410 Gone: it lists again",
        "an error: it lists again after a pause",
    ],
)
def test_ps_watches_again_when_its_watch_ends(
    tmp_path: Path, api_server: tuple[str, Any], launcher_python: str, setting: str, value: Any, watches: int, lists: int
) -> None:
    url, handler = api_server
    setattr(handler, setting, value)
    handler.set_job(RUNNING)
    ps = _watching_ps(tmp_path, url, launcher_python, TFK8S_POLL_SECONDS="0.2")
    _wait_for(ps, lambda: _kinds(handler).count("watch") >= watches)
    time.sleep(0.3)  # the last watch is streaming
    handler.set_job(FAILED)
    assert ps.wait(10) == 0
    assert "job exp1-worker is Failed; retiring" in (ps.stdout.read() if ps.stdout else "")
    assert _kinds(handler).count("list") == lists and "get" not in _kinds(handler)
    versions = [r["query"]["resourceVersion"] for r in handler.requests if r.get("kind") == "watch"]
    assert set(versions) == {"2"}, versions  # the list's, while nothing changed


def test_ps_whose_role_may_not_watch_its_job_polls_it(tmp_path: Path, api_server: tuple[str, Any], launcher_python: str) -> None:
    """A Role from before the watch, with `get` alone (the Job's list and watch answer 403): the PS
    polls its Job by name every TFK8S_POLL_SECONDS, as it did, and still retires."""
    url, handler = api_server
    handler.watch_status = 403
    handler.set_job(RUNNING)
    ps = _watching_ps(tmp_path, url, launcher_python)
    _wait_for(ps, lambda: _kinds(handler).count("get") >= 2)
    handler.set_job(FAILED)
    assert ps.wait(10) == 0
    out = ps.stdout.read() if ps.stdout else ""
    assert "may not list and watch job team-a/exp1-worker (HTTP 403): polling it every 0.1s" in out, out
    assert "job exp1-worker is Failed; retiring" in out, out
    assert _gets(handler)[1] == "/apis/batch/v1/namespaces/team-a/jobs/exp1-worker"


def test_the_launcher_matches_the_run_label_the_infra_code_puts_on_a_job() -> None:
    """The launcher runs in stock images without tfk8s's infra package, so it keeps its own copy."""
    assert kube_retire.RUN_LABEL == labels.RUN


def _job_of_run(run: str, uid: str, **metadata: Any) -> dict[str, Any]:
    return {"kind": "Job", "metadata": {"uid": uid, "labels": {"tfk8s.io/run": run}, **metadata}, "status": {"active": 2}}


def test_a_ps_without_its_run_uid_takes_it_from_its_runs_job_once_that_job_exists(
    tmp_path: Path, api_server: tuple[str, Any], launcher_python: str
) -> None:
    """The PS start beside their Job (tfk8s.components.training_cluster): no Job yet, then an earlier run's Job
    of the same name, then this run's Job while it is being deleted, are all waited out; the uid of
    this run's live Job is the run, and its done markers retire the PS."""
    url, handler = api_server
    handler.job = None  # 404: not created yet
    ps = _watching_ps(tmp_path, url, launcher_python, TFK8S_RUN_UID="", TFK8S_WATCH_JOB_RUN="r-new")
    waits = [_job_of_run("r-old", "old-uid"), _job_of_run("r-new", "gone-uid", deletionTimestamp="2026-11-25T20:00:00Z")]
    for answer in waits:
        seen = len(_gets(handler))
        deadline = time.monotonic() + 10
        while len(_gets(handler)) < seen + 2:  # polled at least twice more without starting
            assert ps.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        assert not (tmp_path / "run-old-uid").exists() and not (tmp_path / "run-gone-uid").exists()
        handler.job = answer
    handler.job = _job_of_run("r-new", "new-uid")
    deadline = time.monotonic() + 10
    while not (tmp_path / "run-new-uid").is_dir():  # the server's run directory: it started
        assert ps.poll() is None and time.monotonic() < deadline, ps.communicate()[0]
        time.sleep(0.05)
    for index in (0, 1):
        launch.write_done_marker(launch.run_log_dir(tmp_path, "new-uid"), "worker", index)
    assert ps.wait(10) == 0
    out = ps.stdout.read() if ps.stdout else ""
    assert "waiting for job exp1-worker of run r-new" in out and "run new-uid (job exp1-worker, run r-new)" in out, out
    assert "all of ['worker-0', 'worker-1'] are done; retiring" in out, out
    assert {p.name for p in tmp_path.iterdir() if p.name.startswith("run-")} == {"run-new-uid"}


def test_a_ps_told_to_read_its_run_uid_outside_a_pod_says_how_to_fix_it(tmp_path: Path, launcher_python: str) -> None:
    ps = _launch(tmp_path, "ps", 0, SERVER, python=launcher_python, TFK8S_RUN_UID="", TFK8S_WATCH_JOB="exp1-worker",
                 TFK8S_WATCH_JOB_RUN="r1")  # fmt: skip
    assert ps.wait(30) == 2
    assert "TFK8S_WATCH_JOB_RUN needs the Kubernetes API" in (ps.stdout.read() if ps.stdout else "")


# A child that asks to start anew once: the first start leaves a file beside the run's directory.
ASKS_ONCE = (
    "import os, sys\n"
    "first = os.path.join(os.environ['TFK8S_LOG_DIR'], '..', 'asked')\n"
    "if not os.path.exists(first):\n"
    "    open(first, 'w').close()\n"
    "    sys.exit(75)\n"
    "print('started again', flush=True)"
)


def _progress(tmp_path: Path, task: str) -> dict[str, Any]:
    path = Path(launch.run_log_dir(tmp_path, "run")) / ".tfk8s" / "progress" / f"{task}.json"
    found: dict[str, Any] = json.loads(path.read_text())
    return found


def test_a_child_that_asks_to_start_anew_starts_again_in_the_same_launcher(tmp_path: Path, launcher_python: str) -> None:
    """Exit 75 (an in-graph chief that lost its PS): the launcher starts the child again at once,
    itself still running (the same pod, no Job backoff), and the task's progress file and log count
    two starts; the second one ends the task as any does (its done marker)."""
    proc = _launch(tmp_path, "chief", 0, ASKS_ONCE, spec=CHIEF_SPEC, python=launcher_python)
    assert proc.wait(60) == 0
    assert proc.stdout is not None
    said = proc.stdout.read()
    assert "asks to start anew (75): starting it again in this pod" in said and "started again" in said, said
    progress = _progress(tmp_path, "chief-0")
    assert (progress["starts"], progress["state"], progress["exit_code"]) == (2, "succeeded", 0), progress
    assert (launch.done_dir(launch.run_log_dir(tmp_path, "run")) / "chief-0").exists()
    log = (Path(launch.run_log_dir(tmp_path, "run")) / "logs" / "chief-0.log").read_text()
    assert "=== tfk8s-launch: chief-0 start 1 " in log and "=== tfk8s-launch: chief-0 start 2 " in log


def test_a_child_that_keeps_asking_to_start_anew_is_left_to_a_new_pod(tmp_path: Path, launcher_python: str) -> None:
    """Started MAX_STARTS_IN_PLACE times, the launcher exits with 75 itself: the Job's next pod."""
    proc = _launch(tmp_path, "worker", 0, "import sys; sys.exit(75)", python=launcher_python)
    assert proc.wait(120) == launch.RESTART_EXIT_CODE
    assert _progress(tmp_path, "worker-0")["starts"] == launch.MAX_STARTS_IN_PLACE
    assert not launch.done_dir(launch.run_log_dir(tmp_path, "run")).exists()


def test_a_server_or_a_stopped_task_is_not_started_again(tmp_path: Path, launcher_python: str) -> None:
    """A PS's 75 is its exit code, nothing more; nor does a task told to stop (SIGTERM) start again,
    whatever its child exits with."""
    assert _launch(tmp_path, "ps", 0, "import sys; sys.exit(75)", python=launcher_python).wait(60) == 75
    assert _progress(tmp_path, "ps-0")["starts"] == 1
    code = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *_: sys.exit(75))\n"
        "print('ready', flush=True)\nwhile True: time.sleep(0.05)"
    )
    proc = _launch(tmp_path, "worker", 1, code, python=launcher_python)
    output = _until_ready(proc)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 75
    assert "starting it again" not in output.read()
    assert _progress(tmp_path, "worker-1")["starts"] == 1


def test_the_child_re_resolves_its_peers_names_within_a_second_unless_told_otherwise() -> None:
    """A peer's next pod comes back at a new address behind the same name: gRPC's default of one
    resolution per 30 s kept a lost worker out that long. The task's own value stands."""
    spec = parse_env(env())
    assert launch.child_env(spec, {})["TF_GRPC_DEFAULT_OPTIONS"] == "grpc.dns_min_time_between_resolutions_ms=1000"
    own = {"TF_GRPC_DEFAULT_OPTIONS": "grpc.keepalive_time_ms=10000"}
    assert launch.child_env(spec, own)["TF_GRPC_DEFAULT_OPTIONS"] == "grpc.keepalive_time_ms=10000"
