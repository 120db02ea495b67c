"""Training throughput: one process vs 1 PS x 2 workers (between-graph and in-graph, async and sync), on loopback.

    .venv/bin/python bench/training_throughput.py [--steps 600] [--models mlp cnn]

Every configuration trains the same model on the same TFRecord shards (scikit-learn digits,
written by ``prepare-data``) with the same per-worker batch, through the real launcher and
local runner. Throughput is the steady state: the median of each task's per-interval
``examples_per_sec`` progress reports (the first interval, which includes start-up, is
dropped), summed over the workers of a between-graph run. Ratios are against one process.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "training"))

from tfk8s_train.cluster import PROGRESS, LocalCluster, make_spec  # noqa: E402
from tfk8s_train.runner import trainer_command  # noqa: E402

BATCH = 64  # the trainer's default --batch-size, per worker step
NOTE = """\
Where the time goes (between-graph, per worker step): the worker's session fetches every variable
from the PS and sends every gradient back, two loopback gRPC round trips plus (de)serialisation,
then runs the forward/backward pass that takes all of 1-3 ms per step in one process (the
single-process rows, input pipeline included). So distributed steps are dominated by RPC and Python session
overhead, not by math (compare the ms per worker step column); the MLP feels it most, the CNN's
heavier compute hides more of it. Sync adds the gradient-accumulator barrier and a token queue: each
step waits for the slowest worker. In-graph (ParameterServerStrategy) dispatches one tf.function per
step from the client to a free worker, so per-step RPC latency from the chief adds on top; it
overlaps work by scheduling asynchronously, but the closure queue and remote-value bookkeeping cost
per step, and the client joins every 50 steps to report progress and checkpoint. In-graph sync
joins every step instead, and its gradients travel worker -> client -> PS, so it pays the most
round trips per example. On this 2-core
machine all tasks share the same two cores, so a distributed run cannot be faster than one process:
the ratios show the price of distribution, not its scaling on real nodes."""


def steady_rate(lines: list[str]) -> float:
    rates = [float(m[5]) for m in map(PROGRESS.search, lines) if m]
    return statistics.median(rates[1:] if len(rates) > 2 else rates) if rates else 0.0


def run_local(model: str, steps: int, data_dir: Path, log_dir: Path) -> float:
    env_cmd = trainer_command(
        "local", model, steps, "--log-every", "50", "--data-dir", str(data_dir), "--log-dir", str(log_dir), "--no-export"
    )
    from tfk8s_train.cluster import TRAINING_DIR

    out = subprocess.run(
        env_cmd,
        capture_output=True,
        text=True,
        check=True,
        cwd=TRAINING_DIR,
        env={"PYTHONPATH": str(TRAINING_DIR), "TF_CPP_MIN_LOG_LEVEL": "2", "PATH": "/usr/bin:/bin"},
    )
    return steady_rate(out.stdout.splitlines())


def run_cluster(mode: str, sync: bool, model: str, steps: int, data_dir: Path, log_dir: Path) -> float:
    cmd = trainer_command(mode, model, steps, "--log-every", "50", "--no-export", *(["--sync"] if sync else []))
    cluster = LocalCluster(
        spec=make_spec(1, 2, mode == "in-graph"), command=cmd, log_dir=str(log_dir), data_dir=str(data_dir), output=None
    )
    with cluster:
        codes = cluster.wait(300)
    if any(codes.values()):
        raise RuntimeError(f"{mode} sync={sync}: {codes}")
    clients = [t for t in cluster.tasks.values() if t.job == ("chief" if mode == "in-graph" else "worker")]
    return sum(steady_rate(list(t.lines)) for t in clients)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--models", nargs="+", default=["mlp", "cnn"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tfk8s-bench-train-") as tmp:
        data_dir = Path(tmp) / "data"
        from tfk8s_train.cluster import TRAINING_DIR

        subprocess.run(
            [
                sys.executable,
                "-m",
                "tfk8s_train",
                "prepare-data",
                "--data-dir",
                str(data_dir),
                "--shards",
                "8",
                "--replicate",
                "4",
            ],
            check=True,
            capture_output=True,
            cwd=TRAINING_DIR,
            env={"PYTHONPATH": str(TRAINING_DIR), "TF_CPP_MIN_LOG_LEVEL": "2", "PATH": "/usr/bin:/bin"},
        )
        rows = []
        for model in args.models:
            configs = [
                ("single process", lambda m=model: run_local(m, args.steps, data_dir, Path(tmp) / f"local-{m}")),
                (
                    "1 PS x 2 workers, between-graph async",
                    lambda m=model: run_cluster("between-graph", False, m, args.steps, data_dir, Path(tmp) / f"async-{m}"),
                ),
                (
                    "1 PS x 2 workers, between-graph sync",
                    lambda m=model: run_cluster("between-graph", True, m, args.steps, data_dir, Path(tmp) / f"sync-{m}"),
                ),
                (
                    "1 PS x 2 workers + chief, in-graph async",
                    lambda m=model: run_cluster("in-graph", False, m, args.steps, data_dir, Path(tmp) / f"ig-{m}"),
                ),
                (
                    "1 PS x 2 workers + chief, in-graph sync",
                    lambda m=model: run_cluster("in-graph", True, m, args.steps, data_dir, Path(tmp) / f"ig-sync-{m}"),
                ),
            ]
            base = None
            for name, fn in configs:
                start = time.perf_counter()
                rate = fn()
                base = base or rate
                workers = 1 if name == "single process" else 2
                rows.append((model, name, rate, rate / base, 1000 * BATCH * workers / rate, time.perf_counter() - start))
                print(f"  {model} {name}: {rate:,.0f} examples/s", file=sys.stderr, flush=True)
    print("| model | configuration | examples/s (steady) | vs one process | ms per worker step | wall time of the run |")
    print("|---|---|---:|---:|---:|---:|")
    for model, name, rate, ratio, step_ms, wall in rows:
        print(f"| {model} | {name} | {rate:,.0f} | {ratio:.2f}x | {step_ms:.1f} | {wall:.1f} s |")
    print()
    print(re.sub(r"\n(?=\S)", " ", NOTE))


if __name__ == "__main__":
    main()
