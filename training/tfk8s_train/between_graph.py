"""Between-graph replication: every worker runs its own client (tf.compat.v1 graph + session).

Variables live on the PS tasks (``replica_device_setter`` spreads them round-robin), each
worker computes gradients on its own shard of the data. Async by default; ``sync`` wraps the
optimizer in ``SyncReplicasOptimizer`` so one update averages one gradient from every worker.

Two seed-era traps handled here:
- ``device_filters=["/job:ps", "/job:worker/task:<i>"]``: without it a non-chief worker hangs
  for good in session creation once the chief is gone ("only one worker finishes");
- ``MonitoredTrainingSession`` recreates its session when a PS dies and comes back
  (Aborted/Unavailable); the chief then restores the last checkpoint, so a restarted PS
  costs at most ``checkpoint_steps`` steps and the global step never goes back further.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from tfk8s_train.config import TrainConfig
from tfk8s_train.model import create_variables, forward, init_params, loss_and_accuracy
from tfk8s_train.pipeline import TrainingData, make_dataset
from tfk8s_train.reporting import Progress, checkpoint_dir, phase, placement_line, run_result, tensorboard_dir, v1_scalar_writer
from tfk8s_train.role import ClusterRole


def _cluster_setup(role: ClusterRole) -> tuple[str, str, Any, tf.compat.v1.ConfigProto | None]:
    """(master target, worker device, device function, session config) for this task."""
    if role.is_local:
        return "", "/job:localhost/replica:0/task:0", None, None
    cluster = tf.train.ClusterSpec(role.cluster_dict())
    server = tf.distribute.Server(cluster, job_name="worker", task_index=role.task_index, protocol="grpc")
    worker_device = f"/job:worker/task:{role.task_index}"
    device_fn = tf.compat.v1.train.replica_device_setter(ps_tasks=role.num_ps, worker_device=worker_device, cluster=cluster)
    config = tf.compat.v1.ConfigProto(device_filters=["/job:ps", worker_device])
    return server.target, worker_device, device_fn, config


class _WorkerSessionCreator(tf.compat.v1.train.SessionCreator):
    """``WorkerSessionCreator`` that checks for the chief's initialisation every ``poll`` seconds.

    The stock one polls every 30 s: a non-chief that starts a moment before the chief idles
    for 30 s, and in a short sync run the chief does all the work alone.
    """

    def __init__(self, master: str, config: tf.compat.v1.ConfigProto | None, poll: float = 0.5) -> None:
        self.scaffold = tf.compat.v1.train.Scaffold()
        self.master, self.config, self.poll = master, config, poll

    def create_session(self) -> tf.compat.v1.Session:
        self.scaffold.finalize()
        manager = tf.compat.v1.train.SessionManager(
            local_init_op=self.scaffold.local_init_op,
            ready_op=self.scaffold.ready_op,
            ready_for_local_init_op=self.scaffold.ready_for_local_init_op,
            graph=tf.compat.v1.get_default_graph(),
            recovery_wait_secs=self.poll,
        )
        return manager.wait_for_session(self.master, config=self.config, max_wait_secs=30 * 60)


class _SessionStarts(tf.compat.v1.train.SessionRunHook):
    """Records every (re)creation of the session: a recreation means a PS died and came back."""

    def __init__(self, global_step: tf.Variable, checkpoints: str | None) -> None:
        self.global_step, self.checkpoints = global_step, checkpoints
        self.last_seen = -1  # updated by the training loop
        self.starts: list[dict[str, Any]] = []

    def after_create_session(self, session: tf.compat.v1.Session, coord: Any) -> None:
        step = int(session.run(self.global_step))
        restored = tf.train.latest_checkpoint(self.checkpoints) if self.checkpoints else None
        self.starts.append({"resumed_at": step, "seen": self.last_seen, "checkpoint": restored})
        if self.starts[1:]:
            print(
                f"tfk8s: session recreated at global step {step} (had seen {self.last_seen}; chief restores {restored})",
                flush=True,
            )


def _session(
    cfg: TrainConfig,
    role: ClusterRole,
    master: str,
    config: Any,
    starts: _SessionStarts,
    hooks: list[tf.compat.v1.train.SessionRunHook],
) -> tf.compat.v1.train.MonitoredSession:
    # Short grace: at the end of a sync run the chief's token queue runner may block on a
    # gradient that never comes; closing the session cancels it instead of waiting 120 s.
    if not role.is_chief:
        creator = _WorkerSessionCreator(master, config)
        return tf.compat.v1.train.MonitoredSession(session_creator=creator, hooks=[*hooks, starts], stop_grace_period_secs=2)
    # Every checkpoint_steps global steps (MonitoredTrainingSession's own saver hook) and at least
    # every checkpoint_seconds (a second one: a hook's timer counts steps or seconds, not both), so
    # that a lost task costs at most that much training however long a step takes. Both save
    # through the scaffold's one Saver, into the same directory.
    timed = tf.compat.v1.train.CheckpointSaverHook(str(checkpoint_dir(cfg.log_dir)), save_secs=cfg.checkpoint_seconds)
    return tf.compat.v1.train.MonitoredTrainingSession(
        master=master,
        is_chief=True,
        checkpoint_dir=str(checkpoint_dir(cfg.log_dir)),
        save_checkpoint_steps=cfg.checkpoint_steps,
        save_checkpoint_secs=None,
        save_summaries_steps=None,
        save_summaries_secs=None,
        log_step_count_steps=None,
        hooks=[*hooks, timed],
        # `starts` sees a new session before the saver hooks do: theirs saves a checkpoint at the
        # step the session starts at, and `starts` names the one the session restored.
        chief_only_hooks=[starts],
        config=config,
        stop_grace_period_secs=2,
    )


def train_between_graph(cfg: TrainConfig, role: ClusterRole, data: TrainingData) -> dict[str, Any]:
    """Train until the global step reaches ``cfg.steps``; the chief returns the weights too."""
    if role.job_name not in ("worker", "local"):
        raise ValueError(f"between-graph clients are workers; got {role.task}")
    master, worker_device, device_fn, config = _cluster_setup(role)
    num_workers = max(role.num_workers, 1)
    index = 0 if role.is_local else role.task_index
    initial = init_params(cfg.model, data.meta.height, data.meta.width, seed=cfg.seed)
    hooks: list[tf.compat.v1.train.SessionRunHook] = []
    graph = tf.Graph()
    with graph.as_default():
        with tf.device(f"{worker_device}/cpu:0"):
            dataset = make_dataset(
                data, batch_size=cfg.batch_size, num_shards=num_workers, shard_index=index, seed=cfg.seed + index
            )
            images, labels = tf.compat.v1.data.make_one_shot_iterator(dataset).get_next()
        with tf.compat.v1.device(device_fn):
            global_step = tf.compat.v1.train.get_or_create_global_step()
            params = create_variables(initial)
            loss, accuracy = loss_and_accuracy(forward(params, images, cfg.model), labels)
            optimizer = tf.compat.v1.train.AdamOptimizer(cfg.learning_rate)
            if cfg.sync and not role.is_local:
                optimizer = tf.compat.v1.train.SyncReplicasOptimizer(
                    optimizer, replicas_to_aggregate=num_workers, total_num_replicas=num_workers
                )
                hooks.append(optimizer.make_session_run_hook(role.is_chief))
            train_op = optimizer.minimize(loss, global_step=global_step)
            starts = _SessionStarts(global_step, str(checkpoint_dir(cfg.log_dir)) if role.is_chief else None)
            with tf.control_dependencies([train_op]):
                step_after = tf.identity(global_step.read_value())
        placement = {name: v.device for name, v in params.items()}
        write, close = v1_scalar_writer(tensorboard_dir(cfg.log_dir, role.task))
        progress = Progress(role.task, cfg.batch_size, write, target=cfg.steps)
        with _session(cfg, role, master, config, starts, hooks) as sess:
            step = first_step = int(sess.run(global_step))
            phase("cluster_ready")
            # A chief that replaces a lost one says which checkpoint it restored (None: a new run).
            restored = f" (restored: {starts.starts[0]['checkpoint']})" if role.is_chief else ""
            print(f"tfk8s: {role.task} starts at global step {step}{restored}; variables on {placement}", flush=True)
            placement_line(placement)
            while step < cfg.steps:
                _, step, loss_v, acc_v = sess.run([train_op, step_after, loss, accuracy])
                step = starts.last_seen = int(step)
                progress.steps_done(1)
                # The first step too (when it happened is the launcher's first_step_at), and the
                # last (the step the run ended at, not the last multiple of log_every before it).
                if progress.local_steps % cfg.log_every == 0 or progress.local_steps == 1 or step >= cfg.steps:
                    progress.report(step, float(loss_v), float(acc_v))
            weights = sess.run(params) if role.is_chief else None
        close()
    result = run_result(
        task=role.task,
        mode="local" if role.is_local else "between-graph",
        sync=cfg.sync,
        first_step=first_step,
        global_step=step,
        progress=progress,
        variable_devices=placement,
        recoveries=starts.starts[1:],
    )
    if weights is not None:
        result["weights"] = {k: np.asarray(v) for k, v in weights.items()}
    return result
