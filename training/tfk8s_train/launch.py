"""Run one task of a TensorFlow cluster under the tfk8s env contract (standard library only).

Every tfk8s pod, and every process of the local runner, starts its training command through
this file, so it must run in stock images (tensorflow/tensorflow, jupyter) that lack our deps:

    python -m tfk8s_train.launch -- CMD...    (pods: the package a zip archive on PYTHONPATH)
    python /path/to/tfk8s_train/launch.py -- CMD...

Contract (environment, written by the infra code and by ``tfk8s_train.runner``):

    TFK8S_CLUSTER_SPEC  JSON {"ps": [...], "worker": [...], "chief": [...]} of "host:port"
    TFK8S_JOB_NAME      ps | worker | chief
    TFK8S_TASK_INDEX    integer; if absent, JOB_COMPLETION_INDEX (Kubernetes Indexed Jobs)
    TFK8S_DATA_DIR      default /data          TFK8S_LOG_DIR  default /log
    TFK8S_RUN_UID       what makes this run one run (required unless TFK8S_WATCH_JOB_RUN is set).
                        On Kubernetes the uid of the run's Job (the one the PS watches): its own
                        pods read it from their controller-uid label, a chief's workers get it
                        as a value; the local runner makes a fresh one per invocation. The
                        child's log directory is ``<TFK8S_LOG_DIR>/run-<uid>`` (TFK8S_LOG_DIR and
                        --log_path point there), which also holds the run's done markers
    TFK8S_WATCH_JOB_RUN instead of TFK8S_RUN_UID, with TFK8S_WATCH_JOB (a PS): the run id the
                        watched Job is labelled with (tfk8s.io/run). The launcher waits until
                        that Job exists with that label and takes its uid as TFK8S_RUN_UID
    TFK8S_LINEAGE       optional: what the run trains, apart from tfk8s's own changes (a digest the
                        program computes); a new run's chief continues an earlier run of the same
                        lineage that did not end, from its newest checkpoint (run_lineage.py)
    TFK8S_CLASSIC_FLAGS "true" (default) appends --ps_hosts --worker_hosts --job_name
                        --task_index --data_dir --log_path to CMD; "false" does not
    TFK8S_DONE_WHEN     "workers" or "chief"; default: "chief" if the spec has a chief
    TFK8S_POLL_SECONDS  barrier poll interval, and the Job's where it cannot be watched (default 1)
    TFK8S_GRACE_SECONDS SIGTERM-to-SIGKILL grace when retiring a server (default 10)
    TFK8S_PS_DEPLOYMENT, TFK8S_NAMESPACE  optional: the PS's own Deployment, scaled to 0
    TFK8S_WATCH_JOB     optional: the run's worker (or chief) Job; a PS retires when it is
                        Failed, Complete, deleted, or of another uid than TFK8S_RUN_UID
    TFK8S_KUBE_API, TFK8S_SA_DIR          optional: API server URL / service-account dir
    TFK8S_METRICS_PORT, TFK8S_LOG_MAX_BYTES, TFK8S_LOG_BACKUPS, TFK8S_PROGRESS_SECONDS,
    TFK8S_TARGET_STEPS, TFK8S_TENANT, TFK8S_EXPERIMENT, TFK8S_CLUSTER
                        what the launcher keeps and serves of its child (``task_watch.py``):
                        its output in ``<run>/logs/<task>.log``, its progress in
                        ``<run>/.tfk8s/progress/<task>.json``, Prometheus metrics on the port

Runs on Python 3.6 and newer (the tensorflow/tensorflow:1.15.5-py3 image): `make lint` checks it
with vermin, so no dataclasses, no `from __future__ import annotations`, no `X | None` at runtime.

The child always gets TF_CONFIG = {"cluster": spec, "task": {"type": job, "index": i}}.
SIGTERM and SIGINT are forwarded to the child; the launcher exits with the child's code
(128 + N if the child died of signal N). A worker's or chief's child that exits with
RESTART_EXIT_CODE (75, EX_TEMPFAIL) is started again at once, in the same pod, unless the launcher
was told to stop: an in-graph chief whose parameter server was lost must start its coordinator
anew, and a new pod would first wait out the Job's pod-failure backoff.

Why a done-marker barrier: a TensorFlow PS (and an in-graph worker) runs ``server.join()``
and never returns, so a finished job leaves its PS running forever (kubeflow/trainer#657,
tensorflow/tensorflow#4713). Here, when a worker or chief child exits 0, its launcher writes
``<log_dir>/run-<uid>/.tfk8s/done/<job>-<index>`` (atomically: temp file + rename) on the
shared log volume. The launchers of the serving tasks (every PS; in chief mode also every
worker) poll that directory; once all expected markers exist (all workers, or the chief)
they scale their own Deployment to zero if asked to, stop the child (SIGTERM, then SIGKILL
after the grace period) and exit 0. Markers persist, so a worker that finished long ago
still counts, and a server of the same run restarted after the barrier exits at once. This
works for unmodified user scripts because only the launcher takes part. A PS run by a
Deployment would be restarted after exiting, so with TFK8S_PS_DEPLOYMENT set it first scales
that Deployment to zero (``kube_retire.py``: service-account token, failures only logged).

Why markers belong to a Job's uid, not to the config: the log volume outlives experiments, so
an experiment destroyed and brought up again with the same settings, or a Job that a TTL
clean-up deleted and `pulumi up --refresh` re-created, would find the earlier run's markers and
retire its new parameter servers before they served. A new Job has a new uid: a new run directory,
no markers, no checkpoint of its own, its own TensorBoard runs beside the earlier ones. A run of the
same training (TFK8S_LINEAGE) whose Job was replaced before it ended, as an upgrade of tfk8s does,
is continued: the new run's chief starts from its newest checkpoint (``run_lineage.py``).

Why a PS reads its run's uid from the Job rather than being given it: a PS Deployment created
with the uid as a value could only be created once the Job existed, and `pulumi up` learns a
Job's uid only when the Job is ready, so the PS started a second later on every new run. With
TFK8S_WATCH_JOB_RUN the PS starts beside its Job. It matches the run label and skips a Job being
deleted, so an earlier run's Job of the same name, still going, is never taken for its own.

Why a PS also watches its Job: markers are written only on success, so a run whose workers fail
for good (or pass their deadline) would leave its PS serving forever. With TFK8S_WATCH_JOB the PS
launcher follows that Job through a watch of the API (``job_watch.py``; a poll every
TFK8S_POLL_SECONDS where its Role allows only ``get``) and retires as soon as it is Failed or
Complete, or is gone: deleted (a TTL clean-up), or replaced by a Job of another uid (another run).
"""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Dict, List, Mapping, NamedTuple, Optional, Sequence, Set, Tuple, Union

try:  # a module of the package: python -m tfk8s_train.launch, or PYTHONPATH=/opt/tfk8s as in pods
    from tfk8s_train import atomic_file, run_lineage
    from tfk8s_train.job_watch import RunEnd
    from tfk8s_train.kube_retire import api_server, retire_deployment, run_job_uid
    from tfk8s_train.task_watch import TaskWatch
except ImportError:  # a plain script without the package on the path: the sibling file
    import atomic_file  # type: ignore[no-redef]
    import run_lineage  # type: ignore[no-redef]
    from job_watch import RunEnd  # type: ignore[no-redef]
    from kube_retire import api_server, retire_deployment, run_job_uid  # type: ignore[no-redef]
    from task_watch import TaskWatch  # type: ignore[no-redef]

JOBS = ("ps", "worker", "chief")


class LaunchError(ValueError):
    """The env contract is broken; the message names the variable and the fix."""


class LaunchSpec(NamedTuple):
    """The env contract of one task, parsed once."""

    cluster: Mapping[str, Tuple[str, ...]]
    job: str
    index: int  # type: ignore[assignment]  # shadows tuple.index, which nothing here calls
    data_dir: str
    log_dir: str
    run_uid: str
    classic_flags: bool
    done_when: str
    poll_seconds: float
    grace_seconds: float
    ps_deployment: Optional[str]
    namespace: Optional[str]
    watch_job: Optional[str] = None
    watch_job_run: Optional[str] = None  # run_uid is "" until read from that Job (resolve_run_uid)

    @property
    def task(self) -> str:
        return f"{self.job}-{self.index}"

    @property
    def run_log_dir(self) -> str:
        """This run's own directory under the log volume: the child's log dir, and its markers."""
        return run_log_dir(self.log_dir, self.run_uid)

    @property
    def serves(self) -> bool:
        """True if the child is a server that only stops when the barrier is met."""
        return self.job == "ps" or (self.job == "worker" and self.done_when == "chief")


# Where the launcher's lines go besides stderr: the task's log file, once there is one (TaskWatch).
_LOG_COPIES = []  # type: List[TaskWatch]


def _log(message: str) -> None:
    line = f"tfk8s-launch: {message}"
    print(line, file=sys.stderr, flush=True)
    for watch in _LOG_COPIES:
        watch.note(line)


def _parse_cluster(raw: Optional[str]) -> Dict[str, Tuple[str, ...]]:
    if not raw:
        raise LaunchError('TFK8S_CLUSTER_SPEC is not set: give a JSON object like {"ps": ["h:2222"], "worker": [...]}')
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as err:
        raise LaunchError(f"TFK8S_CLUSTER_SPEC is not valid JSON ({err})") from err
    if not isinstance(value, dict) or not value:
        raise LaunchError("TFK8S_CLUSTER_SPEC must be a non-empty JSON object of job -> list of host:port")
    cluster = {}  # type: Dict[str, Tuple[str, ...]]
    for job, hosts in value.items():
        if job not in JOBS:
            raise LaunchError(f"TFK8S_CLUSTER_SPEC has unknown job {job!r}; expected one of {', '.join(JOBS)}")
        if not isinstance(hosts, list) or not all(isinstance(h, str) and ":" in h for h in hosts):
            raise LaunchError(f"TFK8S_CLUSTER_SPEC[{job!r}] must be a list of 'host:port' strings")
        cluster[job] = tuple(hosts)
    return cluster


def _parse_int(name: str, raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise LaunchError(f"{name}={raw!r} is not an integer") from None


def _parse_float(environ: Mapping[str, str], name: str, default: float) -> float:
    raw = environ.get(name, "")
    try:
        return float(raw) if raw else default
    except ValueError:
        raise LaunchError(f"{name}={raw!r} is not a number") from None


def parse_env(environ: Mapping[str, str]) -> LaunchSpec:
    """Parse and validate the env contract; raise LaunchError naming the culprit."""
    cluster = _parse_cluster(environ.get("TFK8S_CLUSTER_SPEC"))
    job = environ.get("TFK8S_JOB_NAME", "")
    if job not in JOBS:
        raise LaunchError(f"TFK8S_JOB_NAME={job!r}: expected one of {', '.join(JOBS)}")
    if job not in cluster:
        raise LaunchError(f"TFK8S_JOB_NAME={job!r} is not a job of TFK8S_CLUSTER_SPEC ({', '.join(cluster)})")
    if environ.get("TFK8S_TASK_INDEX"):
        index = _parse_int("TFK8S_TASK_INDEX", environ["TFK8S_TASK_INDEX"])
    elif environ.get("JOB_COMPLETION_INDEX"):
        index = _parse_int("JOB_COMPLETION_INDEX", environ["JOB_COMPLETION_INDEX"])
    else:
        raise LaunchError("neither TFK8S_TASK_INDEX nor JOB_COMPLETION_INDEX is set: set one to this task's index")
    if not 0 <= index < len(cluster[job]):
        raise LaunchError(f"task index {index} is out of range: job {job!r} has {len(cluster[job])} task(s)")
    classic = environ.get("TFK8S_CLASSIC_FLAGS", "true").strip().lower()
    if classic not in ("true", "false"):
        raise LaunchError(f"TFK8S_CLASSIC_FLAGS={classic!r}: expected true or false")
    done_when = environ.get("TFK8S_DONE_WHEN") or ("chief" if "chief" in cluster else "workers")
    if done_when not in ("workers", "chief"):
        raise LaunchError(f"TFK8S_DONE_WHEN={done_when!r}: expected workers or chief")
    if done_when == "chief" and "chief" not in cluster:
        raise LaunchError("TFK8S_DONE_WHEN=chief but TFK8S_CLUSTER_SPEC has no chief")
    if done_when == "workers" and "worker" not in cluster:
        raise LaunchError("TFK8S_DONE_WHEN=workers but TFK8S_CLUSTER_SPEC has no worker")
    run_uid = environ.get("TFK8S_RUN_UID", "").strip()
    watch_job = environ.get("TFK8S_WATCH_JOB") or None
    watch_job_run = environ.get("TFK8S_WATCH_JOB_RUN", "").strip() or None
    if run_uid and watch_job_run:
        raise LaunchError("TFK8S_RUN_UID and TFK8S_WATCH_JOB_RUN are both set: give one, the uid or where to read it")
    if watch_job_run and not watch_job:
        raise LaunchError("TFK8S_WATCH_JOB_RUN is set without TFK8S_WATCH_JOB: name the Job to read the run's uid from")
    if not run_uid and not watch_job_run:
        raise LaunchError(
            "TFK8S_RUN_UID is not set (or empty): give every task of one run the same new value, "
            "e.g. the uid of the run's Job from its pods' controller-uid label (or, for a PS, "
            "TFK8S_WATCH_JOB_RUN with TFK8S_WATCH_JOB to read it from that Job)"
        )
    _check_run_uid(run_uid)
    return LaunchSpec(
        cluster=cluster,
        job=job,
        index=index,
        data_dir=environ.get("TFK8S_DATA_DIR") or "/data",
        log_dir=environ.get("TFK8S_LOG_DIR") or "/log",
        run_uid=run_uid,
        classic_flags=classic == "true",
        done_when=done_when,
        poll_seconds=_parse_float(environ, "TFK8S_POLL_SECONDS", 1.0),
        grace_seconds=_parse_float(environ, "TFK8S_GRACE_SECONDS", 10.0),
        ps_deployment=environ.get("TFK8S_PS_DEPLOYMENT") or None,
        namespace=environ.get("TFK8S_NAMESPACE") or None,
        watch_job=watch_job,
        watch_job_run=watch_job_run,
    )


def _check_run_uid(run_uid: str) -> None:
    if "/" in run_uid or run_uid.startswith("."):
        raise LaunchError(f"TFK8S_RUN_UID={run_uid!r} must not contain '/' or start with '.': it names a directory")


def resolve_run_uid(spec: LaunchSpec, environ: Mapping[str, str]) -> LaunchSpec:
    """The spec with its run uid: as given, or read from the watched Job once it is this run's.

    Waits as long as it takes: the Job is created beside the PS (or is an earlier run's, still
    being deleted). A PS whose Job never comes is deleted with its experiment."""
    if spec.run_uid or not spec.watch_job or not spec.watch_job_run:
        return spec
    if not (environ.get("TFK8S_KUBE_API") or api_server(environ)):
        raise LaunchError(
            "TFK8S_WATCH_JOB_RUN needs the Kubernetes API to read the Job's uid, and this is not a pod "
            "(no KUBERNETES_SERVICE_HOST): set TFK8S_KUBE_API, or give TFK8S_RUN_UID"
        )
    waited = False
    while True:
        uid = run_job_uid(spec.watch_job, spec.watch_job_run, spec.namespace, environ)
        if uid:
            _check_run_uid(uid)
            _log(f"{spec.task}: run {uid} (job {spec.watch_job}, run {spec.watch_job_run})")
            return spec._replace(run_uid=uid)
        if not waited:
            _log(f"{spec.task}: waiting for job {spec.watch_job} of run {spec.watch_job_run}")
            waited = True
        time.sleep(spec.poll_seconds)


def tf_config(spec: LaunchSpec) -> str:
    cluster = {job: list(hosts) for job, hosts in spec.cluster.items()}
    return json.dumps({"cluster": cluster, "task": {"type": spec.job, "index": spec.index}})


def classic_flags(spec: LaunchSpec) -> List[str]:
    """The flags of the seed era's mnist_replica.py convention."""
    return [
        f"--ps_hosts={','.join(spec.cluster.get('ps', ()))}",
        f"--worker_hosts={','.join(spec.cluster.get('worker', ()))}",
        f"--job_name={spec.job}",
        f"--task_index={spec.index}",
        f"--data_dir={spec.data_dir}",
        f"--log_path={spec.run_log_dir}",
    ]


def child_command(spec: LaunchSpec, cmd: Sequence[str]) -> List[str]:
    return [*cmd, *classic_flags(spec)] if spec.classic_flags else list(cmd)


# gRPC resolves a name again at most every 30 s by default (grpc.dns_min_time_between_resolutions_ms):
# a task whose peer came back at a new address (a worker's next pod behind its headless Service's
# name) kept dialing the old one that long. On the real node a lost worker trained again 31 s after
# its pod was deleted, every time, 8 s after its next pod served. TensorFlow hands
# TF_GRPC_DEFAULT_OPTIONS to every channel it makes; a value of the task's own environment stands.
GRPC_OPTIONS = "grpc.dns_min_time_between_resolutions_ms=1000"


def child_env(spec: LaunchSpec, environ: Mapping[str, str]) -> Dict[str, str]:
    return {"TF_GRPC_DEFAULT_OPTIONS": GRPC_OPTIONS, **environ, "TF_CONFIG": tf_config(spec), "TFK8S_LOG_DIR": spec.run_log_dir}


def run_log_dir(log_dir: Union[str, Path], run_uid: str) -> str:
    return os.path.join(str(log_dir), "run-" + run_uid)


def done_dir(run_dir: Union[str, Path]) -> Path:
    return Path(run_dir) / ".tfk8s" / "done"


def write_done_marker(run_dir: Union[str, Path], job: str, index: int) -> Path:
    """Atomically record that task job-index of the run in ``run_dir`` finished with exit code 0.

    Also usable from a notebook client, whose TFK8S_LOG_DIR is the run's directory:
    ``write_done_marker(os.environ["TFK8S_LOG_DIR"], "chief", 0)``.
    """
    body = json.dumps({"job": job, "index": index, "host": socket.gethostname(), "time": time.time()})
    return atomic_file.write_text(done_dir(run_dir) / f"{job}-{index}", body)


def expected_markers(spec: LaunchSpec) -> Set[str]:
    job = "chief" if spec.done_when == "chief" else "worker"
    return {f"{job}-{i}" for i in range(len(spec.cluster[job]))}


def barrier_met(spec: LaunchSpec) -> bool:
    directory = done_dir(spec.run_log_dir)
    present = {p.name for p in directory.iterdir()} if directory.is_dir() else set()
    return expected_markers(spec) <= present


def watch_run_end(spec: LaunchSpec, environ: Mapping[str, str], wake: threading.Event) -> Optional[RunEnd]:
    """A PS with TFK8S_WATCH_JOB: a thread that sets ``wake`` once the run's Job says the run is over
    (Failed, Complete, or gone: deleted, or replaced by a Job of another uid). The PS knows its
    run's uid before it watches (given, or read from the Job itself: resolve_run_uid), so a Job
    that is gone is never one that is yet to come."""
    if spec.job != "ps" or not spec.watch_job:
        return None
    return RunEnd(spec.watch_job, spec.run_uid, spec.namespace, environ, spec.poll_seconds, wake).start()


def _reap(child: "subprocess.Popen[bytes]", wake: threading.Event) -> None:
    """Wait for the child in a thread and set ``wake`` when it exits (Popen's wait is thread-safe)."""
    child.wait()
    wake.set()


def _retire(spec: LaunchSpec, environ: Mapping[str, str]) -> None:
    if spec.job == "ps" and spec.ps_deployment:
        retire_deployment(spec.ps_deployment, spec.namespace, environ)


def _stop(child: "subprocess.Popen[bytes]", grace: float) -> None:
    if child.poll() is not None:
        return
    child.terminate()
    try:
        child.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        _log(f"child {child.pid} ignored SIGTERM for {grace:.0f}s: SIGKILL")
        child.kill()
        child.wait()


# A child's word that it must start anew (EX_TEMPFAIL, sysexits.h): tfk8s_train.in_graph.PS_LOST_EXIT,
# and tfk8s.specs.run_policy.RESTART_EXIT_CODE, which the Job ignores. Started again here, a task
# costs its child's start; as a new pod, it would also wait for the Job's pod-failure backoff, 10 s
# doubling with each failure of its index, those its failure policy ignores included
# (kubernetes/kubernetes#119434): an in-graph run that lost its PS five times would wait 5 min.
RESTART_EXIT_CODE = 75
# Then the launcher exits with it, and the Job starts a new pod: a task that keeps asking may
# need what a new pod brings (another node, a fresh container).
MAX_STARTS_IN_PLACE = 10


class _Forward:
    """SIGTERM and SIGINT, for the child of the moment; once one came, no child starts again."""

    def __init__(self) -> None:
        self.child: Optional[subprocess.Popen[bytes]] = None
        self.received: Optional[int] = None
        signal.signal(signal.SIGTERM, self)
        signal.signal(signal.SIGINT, self)

    def __call__(self, signum: int, _frame: object) -> None:
        self.received = signum
        child = self.child
        if child is not None and child.poll() is None:
            child.send_signal(signum)


def _exit_code(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


def run(spec: LaunchSpec, cmd: Sequence[str], environ: Mapping[str, str]) -> int:
    """Run the child under the contract; return the launcher's exit code."""
    if spec.serves and barrier_met(spec):
        _log(f"{spec.task}: run {spec.run_uid} is already done; not starting the server")
        _retire(spec, environ)
        return 0
    argv = child_command(spec, cmd)
    os.makedirs(spec.run_log_dir, exist_ok=True)
    signals = _Forward()
    for start in range(1, MAX_STARTS_IN_PLACE + 1):
        # A TaskWatch per start: the task's log and progress file count it as one (`starts`).
        watch = TaskWatch(task=spec.task, run=spec.run_uid, run_dir=spec.run_log_dir, cmd=argv, environ=environ)
        _LOG_COPIES.append(watch)
        try:
            if start == 1:
                _continue_interrupted_run(spec, environ)
            code = _supervise(spec, argv, environ, watch, signals)
        finally:
            _LOG_COPIES.remove(watch)
        if code != RESTART_EXIT_CODE or spec.serves or signals.received is not None:
            return code
        if start < MAX_STARTS_IN_PLACE:
            _log(f"{spec.task}: its child asks to start anew ({code}): starting it again in this pod")
    _log(f"{spec.task}: started {MAX_STARTS_IN_PLACE} times in this pod; exiting with {code} for a new one")
    return code


def _continue_interrupted_run(spec: LaunchSpec, environ: Mapping[str, str]) -> None:
    """With TFK8S_LINEAGE: record the run's lineage, and as the task that checkpoints, start a new run
    from the newest checkpoint of an earlier run of the same training that did not end (an upgrade
    replaced its Job mid-run: run_lineage.py)."""
    lineage = environ.get("TFK8S_LINEAGE", "").strip()
    if not lineage:
        return
    run_lineage.record(spec.run_log_dir, lineage)
    task = run_lineage.checkpointing_task(dict(spec.cluster))
    if spec.task != task:
        return
    continued = run_lineage.continue_run(spec.run_log_dir, lineage, task)
    if continued is not None:
        earlier, checkpoint = continued["run"], continued["checkpoint"]
        _log(f"{spec.task}: run {spec.run_uid} continues {earlier}, which did not end: from its checkpoint {checkpoint}")


def _supervise(spec: LaunchSpec, argv: Sequence[str], environ: Mapping[str, str], watch: TaskWatch, signals: _Forward) -> int:
    """Start the child, copy its output, and stop it when its run is over (a server) or wait for it."""
    _log(f"{spec.task}: starting {' '.join(argv)}")
    # One stream, through the launcher (TaskWatch): the container's log and the log volume's file.
    # Unbuffered, so a line reaches both when it is printed, not when a buffer fills.
    env = {"PYTHONUNBUFFERED": "1", **child_env(spec, environ)}
    child = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert child.stdout is not None
    watch.attach(child.pid, child.stdout)
    signals.child = child
    if signals.received is not None:  # came while this child was starting
        signals(signals.received, None)
    if spec.serves:
        # Woken by the child's exit and by the run's end (the Job's watch), at once; the markers,
        # files on the log volume, are read every poll_seconds.
        wake = threading.Event()
        threading.Thread(target=_reap, args=(child, wake), name="tfk8s-child", daemon=True).start()
        run_end = watch_run_end(spec, environ, wake)
        while child.poll() is None:
            reason = None
            if barrier_met(spec):
                reason = f"all of {sorted(expected_markers(spec))} are done"
            elif run_end is not None:
                reason = run_end.reason
            if reason:
                _log(f"{spec.task}: {reason}; retiring")
                _retire(spec, environ)
                _stop(child, spec.grace_seconds)
                watch.finish("retired", 0)
                return 0
            wake.wait(spec.poll_seconds)
    code = _exit_code(child.wait())
    watch.drain()  # the child's last lines before the launcher's own
    if code == 0 and spec.job in ("worker", "chief"):
        marker = write_done_marker(spec.run_log_dir, spec.job, spec.index)
        _log(f"{spec.task}: finished; wrote {marker}")
    elif code != 0:
        _log(f"{spec.task}: child exited with {code}")
    watch.finish("succeeded" if code == 0 else "failed", code)
    return code


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    cmd = args[args.index("--") + 1 :] if "--" in args else args
    if not cmd:
        _log("usage: launch.py -- CMD [ARGS...]")
        return 2
    try:
        spec = resolve_run_uid(parse_env(os.environ), os.environ)
    except LaunchError as err:
        _log(f"error: {err}")
        return 2
    return run(spec, cmd, os.environ)


if __name__ == "__main__":
    sys.exit(main())
