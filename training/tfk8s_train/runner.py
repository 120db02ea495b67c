"""Local runner: a real PS/worker cluster on loopback, started the way Kubernetes starts it.

    python -m tfk8s_train.runner --ps 2 --workers 2 --mode between-graph [--sync] \\
        --data-dir D --log-dir L [-- CMD...]

Without ``CMD`` every task runs ``python -m tfk8s_train train --mode MODE ...``; with it, CMD
runs unchanged in every task (e.g. a seed-era script that only knows ``--ps_hosts`` & co).
Each invocation is a new run: its tasks write under ``<log_dir>/run-<uid>/`` (checkpoints,
TensorBoard events, results, done markers; see ``launch.py``), so the same command runs again
with the same ``--log-dir``. Logs are streamed as ``[worker-1] ...`` and kept, by each task's
launcher, in ``<log_dir>/run-<uid>/logs/<task>.log``. Exit code
0 only if every task exited 0; on the first failure, a timeout or Ctrl-C every process group
is stopped. ``--no-client`` (in-graph) starts only PS and workers, writes the client's env to
``<log_dir>/cluster.json`` and waits for the client (e.g. ``master_client.ipynb``) to finish.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from tfk8s_train.cluster import LocalCluster, Task, make_spec


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m tfk8s_train.runner", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--ps", type=int, default=1, help="number of PS tasks")
    p.add_argument("--workers", type=int, default=2, help="number of worker tasks")
    p.add_argument(
        "--mode",
        choices=("between-graph", "in-graph"),
        default="between-graph",
        help="in-graph adds a chief task that is the client",
    )
    p.add_argument("--sync", action="store_true", help="synchronous training (both modes): one averaged update per step")
    p.add_argument("--model", choices=("mlp", "cnn"), default="mlp")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--checkpoint-steps", type=int, default=100)
    p.add_argument("--data-dir", required=True, help="TFRecords from prepare-data; a missing dir means sklearn digits")
    p.add_argument("--log-dir", required=True, help="shared 'volume': checkpoints, TensorBoard, done markers")
    p.add_argument("--no-classic-flags", action="store_true", help="TFK8S_CLASSIC_FLAGS=false: TF_CONFIG only")
    p.add_argument("--no-client", action="store_true", help="in-graph: start only PS and workers")
    p.add_argument("--timeout", type=float, default=900.0, help="stop everything after this many seconds")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD...: run instead of the built-in trainer")
    return p


def trainer_command(mode: str, model: str, steps: int, *extra: str) -> list[str]:
    """`python -m tfk8s_train train` with this interpreter: what every local task runs by default."""
    return [sys.executable, "-m", "tfk8s_train", "train", "--mode", mode, "--model", model, "--steps", str(steps), *extra]


def default_command(args: argparse.Namespace) -> list[str]:
    """Without classic flags the trainer finds its directories in TFK8S_DATA_DIR and TFK8S_LOG_DIR,
    which the launcher points at the run's own directory (as in a pod)."""
    cmd = trainer_command(args.mode, args.model, args.steps, "--checkpoint-steps", str(args.checkpoint_steps))
    return cmd + (["--sync"] if args.sync else [])


def client_env(cluster: LocalCluster) -> dict[str, str]:
    """What a notebook (or any in-graph client) needs to join the cluster as the chief."""
    tf_config = {"cluster": cluster.spec, "task": {"type": "chief", "index": 0}}
    return {
        "TF_CONFIG": json.dumps(tf_config),
        "TFK8S_CLUSTER_SPEC": json.dumps(cluster.spec),
        "TFK8S_JOB_NAME": "chief",
        "TFK8S_TASK_INDEX": "0",
        "TFK8S_DATA_DIR": cluster.data_dir,
        "TFK8S_LOG_DIR": str(cluster.run_log_dir),  # the run's own directory, as a task's child gets it
        "TFK8S_RUN_UID": cluster.run_uid,
    }


def _print_progress(task: Task) -> None:
    if task.progress is not None:
        step, loss, accuracy, rate = task.progress
        print(f"[runner] {task.name}: step {step}  loss {loss:.4f}  accuracy {accuracy:.3f}  {rate:,.0f} examples/s", flush=True)


def _summary(cluster: LocalCluster, codes: dict[str, int | None]) -> None:
    print("[runner] task        exit  restarts  last step", flush=True)
    for name, task in cluster.tasks.items():
        step = task.progress[0] if task.progress else "-"
        print(f"[runner] {name:<10} {codes[name]!s:>5}  {task.starts - 1:>8}  {step}", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.no_client and args.mode != "in-graph":
        print("error: --no-client needs --mode in-graph (between-graph clients are the workers)", file=sys.stderr)
        return 2
    chief = args.mode == "in-graph"
    spec = make_spec(args.ps, args.workers, chief)
    jobs = ["ps", "worker"] if args.no_client or not chief else ["ps", "worker", "chief"]
    cluster = LocalCluster(
        spec=spec,
        command=command or default_command(args),
        log_dir=str(Path(args.log_dir)),
        data_dir=str(Path(args.data_dir)),
        jobs=jobs,
        classic_flags=not args.no_classic_flags,
        on_progress=_print_progress,
    )

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_signal)
    print(f"[runner] cluster {json.dumps(spec)} run {cluster.run_uid} in {cluster.run_log_dir}", flush=True)
    try:
        cluster.start()
        if args.no_client:
            path = Path(args.log_dir) / "cluster.json"
            path.write_text(json.dumps({"client_env": client_env(cluster)}, indent=2) + "\n")
            print(f"[runner] servers up; client env in {path}; waiting for the chief's done marker", flush=True)
        codes = cluster.wait(args.timeout)
    except KeyboardInterrupt:
        print("[runner] interrupted: stopping every task", flush=True)
        cluster.stop()
        return 130
    _summary(cluster, codes)
    ok = all(code == 0 for code in codes.values())
    print(f"[runner] {'all tasks finished' if ok else 'FAILED'}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
