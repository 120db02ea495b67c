"""Command line: ``python -m tfk8s_train train|prepare-data ...``.

``train`` accepts the seed era's flags (``--ps_hosts --worker_hosts --job_name --task_index
--data_dir --log_path``, appended by the launcher) as well as TF_CONFIG, and decides from the
role what this process does: serve (PS; workers in in-graph mode), run a between-graph
client (workers), or drive the cluster in-graph (chief).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tfk8s_train.config import MODES, TrainConfig, default_checkpoint_seconds, default_data_dir, default_log_dir
from tfk8s_train.role import ClusterRole, RoleError, parse_role

DEFAULTS = TrainConfig()


def _train_parser(sub: Any) -> None:
    p = sub.add_parser("train", help="train (or serve) as the role from flags / TF_CONFIG")
    p.add_argument(
        "--mode",
        choices=MODES,
        default=DEFAULTS.mode,
        help="auto: in-graph if the cluster has a chief, else between-graph, else local",
    )
    p.add_argument(
        "--sync",
        action="store_true",
        help="synchronous: one averaged update per step from every worker (between-graph: SyncReplicasOptimizer)",
    )
    p.add_argument("--model", choices=("mlp", "cnn"), default=DEFAULTS.model)
    p.add_argument("--steps", type=int, default=DEFAULTS.steps, help="global steps to train to")
    p.add_argument("--batch-size", type=int, default=DEFAULTS.batch_size, help="per worker and step")
    p.add_argument("--learning-rate", type=float, default=DEFAULTS.learning_rate)
    p.add_argument("--checkpoint-steps", type=int, default=DEFAULTS.checkpoint_steps)
    p.add_argument(
        "--checkpoint-seconds",
        type=float,
        default=None,
        help="the chief also checkpoints at least this often; default $TFK8S_CHECKPOINT_SECONDS or 60",
    )
    p.add_argument("--log-every", type=int, default=DEFAULTS.log_every)
    p.add_argument("--seed", type=int, default=DEFAULTS.seed)
    p.add_argument("--no-export", action="store_true", help="skip the chief's SavedModel export")
    p.add_argument(
        "--data_dir",
        "--data-dir",
        dest="data_dir",
        default=None,
        help="TFRecords from prepare-data, or MNIST IDX files; default $TFK8S_DATA_DIR or /data",
    )
    p.add_argument(
        "--log_path",
        "--log-dir",
        dest="log_dir",
        default=None,
        help="checkpoints, TensorBoard events, results; default $TFK8S_LOG_DIR or /log",
    )
    p.add_argument("--ps_hosts", default=None, help="classic: comma-separated PS host:port list")
    p.add_argument("--worker_hosts", default=None, help="classic: comma-separated worker host:port list")
    p.add_argument("--job_name", default=None, help="classic: ps | worker | chief")
    p.add_argument("--task_index", type=int, default=None, help="classic: index within the job")


def _prepare_parser(sub: Any) -> None:
    p = sub.add_parser("prepare-data", help="write the digits as sharded TFRecords + meta.json")
    p.add_argument("--data-dir", "--data_dir", dest="data_dir", required=True, help="output directory")
    p.add_argument("--source-dir", default=None, help="directory with MNIST IDX files; default: sklearn digits")
    p.add_argument("--shards", type=int, default=8)
    p.add_argument("--replicate", type=int, default=1, help="write the train split N times (for benchmarks)")
    p.add_argument("--image-size", type=int, default=None, help="nearest-resize images to N x N (e.g. 28)")
    p.add_argument(
        "--examples-per-record", type=int, default=1, help="1: one tf.train.Example per image; N: blocks of N (faster reads)"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tfk8s_train", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    _train_parser(sub)
    _prepare_parser(sub)
    return parser


def config_from_args(args: argparse.Namespace, environ: Mapping[str, str]) -> TrainConfig:
    return TrainConfig(
        mode=args.mode,
        sync=args.sync,
        model=args.model,
        steps=args.steps,
        batch_size=args.batch_size,
        learning_rate=args.learning_rate,
        checkpoint_steps=args.checkpoint_steps,
        checkpoint_seconds=default_checkpoint_seconds(environ) if args.checkpoint_seconds is None else args.checkpoint_seconds,
        log_every=args.log_every,
        data_dir=args.data_dir or default_data_dir(environ),
        log_dir=args.log_dir or default_log_dir(environ),
        seed=args.seed,
        export=not args.no_export,
    )


def resolve_mode(cfg: TrainConfig, role: ClusterRole, environ: Mapping[str, str]) -> str:
    """--mode, else the infra's TFK8S_REPLICATION, else in-graph iff the cluster has a chief."""
    if cfg.mode != "auto":
        return cfg.mode
    if role.is_local:
        return "local"
    replication = environ.get("TFK8S_REPLICATION", "")
    if replication in ("between-graph", "in-graph"):
        return replication
    return "in-graph" if role.has_chief else "between-graph"


def finish(cfg: TrainConfig, role: ClusterRole, result: dict[str, Any], data: Any) -> dict[str, Any]:
    """Chief: test accuracy and SavedModel; everyone: the result file."""
    from tfk8s_train.model import evaluate, export_saved_model
    from tfk8s_train.reporting import write_result

    weights = result.pop("weights", None)
    if weights is not None and role.is_chief:
        result["test_accuracy"] = evaluate(weights, cfg.model, data.x_test, data.y_test)
        if cfg.export:
            path = Path(cfg.log_dir) / "saved_model"
            result["saved_model"] = str(export_saved_model(weights, cfg.model, data.meta.height, data.meta.width, path))
    result["data"] = data.source
    write_result(cfg.log_dir, role.task, result)
    return result


def check_mode(mode: str, role: ClusterRole) -> None:
    """Reject mode/role combinations before any TensorFlow work, naming the fix."""
    if mode == "local" and not role.is_local:
        raise RoleError(f"--mode local, but this process has a cluster role ({role.task})")
    if mode != "local" and role.is_local:
        raise RoleError(f"--mode {mode} needs a cluster: set TF_CONFIG or --ps_hosts/--worker_hosts/--job_name")
    if mode == "between-graph" and role.job_name == "chief":
        raise RoleError("between-graph mode has no chief job: worker 0 is the chief; use --mode in-graph")


def train(cfg: TrainConfig, role: ClusterRole, environ: Mapping[str, str]) -> dict[str, Any] | None:
    mode = resolve_mode(cfg, role, environ)
    check_mode(mode, role)
    from tfk8s_train.reporting import phase  # imports TensorFlow: seconds of a task's start

    phase("tensorflow_imported")
    if role.job_name == "ps" or (mode == "in-graph" and role.job_name == "worker"):
        from tfk8s_train.in_graph import serve

        serve(role)  # returns only if the server is stopped
        return None
    from tfk8s_train.pipeline import load_training_data

    data = load_training_data(cfg.data_dir)
    if mode == "in-graph":
        from tfk8s_train.in_graph import train_in_graph

        return finish(cfg, role, train_in_graph(cfg, role, data), data)
    from tfk8s_train.between_graph import train_between_graph

    return finish(cfg, role, train_between_graph(cfg, role, data), data)


def prepare_data(args: argparse.Namespace) -> None:
    from tfk8s_train.data import load_digits_arrays, write_tfrecords

    meta = write_tfrecords(
        load_digits_arrays(args.source_dir),
        args.data_dir,
        shards=args.shards,
        replicate=args.replicate,
        image_size=args.image_size,
        examples_per_record=args.examples_per_record,
    )
    print(
        f"wrote {meta.train_examples} train examples ({meta.height}x{meta.width}, {meta.source}) "
        f"in {args.shards} shards to {args.data_dir}"
    )


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    env = os.environ if environ is None else environ
    args = build_parser().parse_args(argv)
    try:
        if args.command == "prepare-data":
            prepare_data(args)
            return 0
        cfg = config_from_args(args, env)
        role = parse_role(
            ps_hosts=args.ps_hosts,
            worker_hosts=args.worker_hosts,
            job_name=args.job_name,
            task_index=args.task_index,
            environ=env,
        )
        check_mode(resolve_mode(cfg, role, env), role)
    except (RoleError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    train(cfg, role, env)
    return 0
