"""In-graph replication with TF2: one client drives all PS and workers.

The client (job ``chief``, or a notebook) builds the model under ``ParameterServerStrategy``
so every variable lives on a PS; ``ClusterCoordinator`` ships step functions to whichever
worker is free. PS and worker processes only serve (``serve()``), and are retired by the
launcher's done-marker barrier.

- async (default): each scheduled step computes gradients on one worker and applies them to the
  PS variables at once; workers never wait for each other.
- sync (``--sync``): the classic in-graph replication. Each global step schedules one gradient
  computation per worker against the same variable values, the client averages them and
  applies the mean once, so every update sees ``num_workers`` batches.

The optimizer is a small hand-written Adam because Keras 3 optimizers do not support
ParameterServerStrategy; its slots are plain variables, placed on the PS like the weights.

A lost worker is the coordinator's to handle: it runs the worker's steps elsewhere and takes the
worker back when its pod returns. A lost PS is not: the coordinator raises, and the client must
start anew, with the PS back, from its checkpoint. The chief (``train_in_graph``) then exits with
``PS_LOST_EXIT``, and its launcher starts it again at once in the same pod (tfk8s_train.launch);
should the Job see it, it does not count it as a failure (tfk8s.specs.run_policy). A notebook
(``train_in_graph_here``) has no launcher, and its kernel holds the user's work: it starts anew
in its own process, with a new strategy and coordinator, once every PS answers again.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

import numpy as np
import tensorflow as tf

from tfk8s_train.config import TrainConfig
from tfk8s_train.launch import GRPC_OPTIONS
from tfk8s_train.model import create_variables, forward, init_params, loss_and_accuracy
from tfk8s_train.pipeline import TrainingData, make_dataset
from tfk8s_train.reporting import Progress, checkpoint_dir, phase, placement_line, run_result, tensorboard_dir, v2_scalar_writer
from tfk8s_train.role import ClusterRole

# The chief's exit status when its coordinator lost a parameter server: EX_TEMPFAIL (sysexits.h), a
# failure outside the task, worth a new start. Its launcher starts it again in place
# (launch.RESTART_EXIT_CODE); the chief's Job ignores it (podFailurePolicy), so a lost PS uses none
# of its retries; tfk8s.specs.run_policy.RESTART_EXIT_CODE says the same number.
PS_LOST_EXIT = 75


def lost_parameter_server(error: BaseException) -> bool:
    """Whether `error` is TensorFlow's word that a parameter server is gone, as ClusterCoordinator
    itself decides it (cluster_coordinator._is_ps_failure, private): an Unavailable or Aborted error
    from a remote /job:ps, possibly wrapped in a closure's error, or an unknown device or tensor on a
    PS that restarted before any RPC noticed."""
    if type(error).__name__ == "PSUnavailableError":  # the coordinator's own verdict
        return True
    error = getattr(error, "original_exception", None) or error
    said = str(error)
    if "/job:ps" not in said:
        return False
    if isinstance(error, (tf.errors.UnavailableError, tf.errors.AbortedError)):
        return True
    restarted = "unknown device" in said.lower() or "Unable to find the relevant tensor remote_handle" in said
    return isinstance(error, tf.errors.InvalidArgumentError) and restarted


def serve(role: ClusterRole) -> None:
    """Run this task's gRPC server until the process is stopped (PS, and in-graph workers)."""
    server = tf.distribute.Server(
        tf.train.ClusterSpec(role.cluster_dict()),
        job_name=role.job_name,
        task_index=role.task_index,
        protocol="grpc",
        start=True,
    )
    print(f"tfk8s: {role.task} serving at {server.target}", flush=True)
    server.join()


class Adam(tf.Module):
    """Adam (Kingma & Ba) over a dict of variables; create it inside the strategy scope."""

    def __init__(
        self,
        params: Mapping[str, tf.Variable],
        learning_rate: float,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-7,
    ) -> None:
        super().__init__()
        self.lr, self.beta1, self.beta2, self.epsilon = learning_rate, beta1, beta2, epsilon
        self.m = {
            k: tf.Variable(np.zeros(v.shape, np.float32), trainable=False, name=f"m_{i}")
            for i, (k, v) in enumerate(params.items())
        }
        self.v = {
            k: tf.Variable(np.zeros(v.shape, np.float32), trainable=False, name=f"v_{i}")
            for i, (k, v) in enumerate(params.items())
        }

    def apply(self, grads: Mapping[str, tf.Tensor], params: Mapping[str, tf.Variable], step: tf.Tensor) -> None:
        t = tf.cast(step, tf.float32)
        lr = self.lr * tf.sqrt(1.0 - self.beta2**t) / (1.0 - self.beta1**t)
        for name, grad in grads.items():
            m = self.m[name].assign(self.beta1 * self.m[name] + (1.0 - self.beta1) * grad)
            v = self.v[name].assign(self.beta2 * self.v[name] + (1.0 - self.beta2) * tf.square(grad))
            params[name].assign_sub(lr * m / (tf.sqrt(v) + self.epsilon))


def make_strategy(role: ClusterRole) -> tf.distribute.ParameterServerStrategy:
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(role.cluster_dict()), task_type="chief", task_id=0, rpc_layer="grpc"
    )
    return tf.distribute.ParameterServerStrategy(resolver)


# The client reads and writes the checkpoints itself, at its own path of the log directory. By
# default each PS would, for its own variables, at the client's path: a notebook's kernel sees the log
# volume where the PS pods do not (Jupyter at /logs/<experiment>/<cluster>, the PS at /log), and its
# first save failed on the PS with "ckpt-101_temp: No such file or directory" (test_real_notebook).
CLIENT_IO = tf.train.CheckpointOptions(experimental_io_device="/job:chief/replica:0/task:0/device:CPU:0")


@dataclass
class _Start:
    """One start of the client: the last global step it saw (what a PS lost then cost)."""

    step: int = 0


def train_in_graph(cfg: TrainConfig, role: ClusterRole, data: TrainingData) -> dict[str, Any]:
    """The chief's client: drive the cluster until the global step reaches ``cfg.steps``; with a
    PS lost at any point (its variables read, restored or trained), exit with PS_LOST_EXIT."""
    _check_client(role)
    try:
        return _drive(cfg, role, data, _Start(), recoveries=[])
    except Exception as error:
        if not lost_parameter_server(error):
            raise
        _start_anew(role, tf.train.latest_checkpoint(str(checkpoint_dir(cfg.log_dir))), error)


# How often the notebook's client starts anew after a lost PS before it gives up, and how long it
# waits for every PS to answer again each time (a PS's next pod imports TensorFlow first: 20-odd
# seconds on a small CPU limit; longer when its node must pull the image or is gone).
NOTEBOOK_STARTS = 10
PS_BACK_SECONDS = 600.0


def train_in_graph_here(
    cfg: TrainConfig,
    role: ClusterRole,
    data: TrainingData,
    *,
    starts: int = NOTEBOOK_STARTS,
    ps_back_seconds: float = PS_BACK_SECONDS,
) -> dict[str, Any]:
    """The notebook's client: as ``train_in_graph``, but a lost PS does not end this process (the
    user's kernel). Once every PS answers at its address again, a new strategy and coordinator
    restore the newest checkpoint and train on, up to ``starts`` times; each start anew is one of
    the result's ``recoveries``."""
    _check_client(role)
    # The peers' names resolve again within a second, as the launcher's tasks do (launch.GRPC_OPTIONS):
    # TensorFlow reads this when it makes its first channel, so it holds from this kernel's first run.
    os.environ.setdefault("TF_GRPC_DEFAULT_OPTIONS", GRPC_OPTIONS)
    recoveries: list[dict[str, Any]] = []
    while True:
        start = _Start()
        try:
            return _drive(cfg, role, data, start, recoveries)
        except Exception as error:
            if not lost_parameter_server(error) or len(recoveries) + 1 >= starts:
                raise
            lost_at = time.time()
            said = _first_line(error)
            print(f"tfk8s: {role.task} lost a parameter server ({said}); waiting for every PS to answer", flush=True)
            _wait_for_parameter_servers(role, ps_back_seconds)
            recoveries.append({"seen": start.step, "lost_at": lost_at, "ps_back_at": time.time()})


def _check_client(role: ClusterRole) -> None:
    if not role.has_chief or role.job_name != "chief":
        raise ValueError(f"in-graph training runs on the chief (the client); got {role.task}")


def _wait_for_parameter_servers(role: ClusterRole, within: float) -> None:
    """Until every PS accepts a connection at its address (its Service's name: the next pod's
    server listens only once its TensorFlow is loaded); TimeoutError after ``within`` seconds."""
    deadline = time.monotonic() + within
    for address in role.cluster_dict()["ps"]:
        host, _, port = address.rpartition(":")
        while True:
            try:
                socket.create_connection((host, int(port)), timeout=2).close()
                break
            except OSError as error:
                if time.monotonic() > deadline:
                    said = f"parameter server {address} did not answer again within {within:.0f} s: {error}"
                    raise TimeoutError(said) from error
                time.sleep(0.5)


def _drive(
    cfg: TrainConfig, role: ClusterRole, data: TrainingData, start: _Start, recoveries: list[dict[str, Any]]
) -> dict[str, Any]:
    """One start of the client; ``recoveries``: the earlier starts' losses, each completed by the
    next start with the step it resumed at and the checkpoint it restored."""
    strategy = make_strategy(role)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        params = create_variables(init_params(cfg.model, data.meta.height, data.meta.width, seed=cfg.seed))
        global_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
        adam = Adam(params, cfg.learning_rate)
    placement = {name: v.device for name, v in params.items()}
    checkpoint = tf.train.Checkpoint(global_step=global_step, params=params, adam=adam)
    manager = tf.train.CheckpointManager(checkpoint, str(checkpoint_dir(cfg.log_dir)), max_to_keep=3)
    restored = manager.latest_checkpoint
    if restored:
        checkpoint.restore(restored, options=CLIENT_IO)
    first_step = int(global_step.numpy())
    start.step = first_step
    if recoveries:
        recoveries[-1].update(resumed_at=first_step, checkpoint=restored)
    phase("cluster_ready")
    print(f"tfk8s: {role.task} starts at global step {first_step} (restored: {restored}); variables on {placement}", flush=True)
    placement_line(placement)

    def dataset_fn(_: tf.distribute.InputContext) -> tf.data.Dataset:
        # ParameterServerStrategy cannot tell a worker its index: workers read every shard,
        # each in its own random order (no fixed seed).
        return make_dataset(data, batch_size=cfg.batch_size)

    per_worker = coordinator.create_per_worker_dataset(lambda: strategy.distribute_datasets_from_function(dataset_fn))
    iterator = iter(per_worker)

    def batch_gradients(images: tf.Tensor, labels: tf.Tensor) -> tuple[list[tf.Tensor], tf.Tensor, tf.Tensor]:
        with tf.GradientTape() as tape:
            loss, accuracy = loss_and_accuracy(forward(params, images, cfg.model), labels)
        return tape.gradient(loss, list(params.values())), loss, accuracy

    @tf.function
    def async_step(it: Any) -> tuple[tf.Tensor, tf.Tensor]:
        def replica_fn(images: tf.Tensor, labels: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            grads, loss, accuracy = batch_gradients(images, labels)
            adam.apply(dict(zip(params, grads, strict=True)), params, global_step.assign_add(1))
            return loss, accuracy

        images, labels = next(it)
        return strategy.run(replica_fn, args=(images, labels))

    @tf.function
    def gradient_step(it: Any) -> tuple[list[tf.Tensor], tf.Tensor, tf.Tensor]:
        images, labels = next(it)
        return strategy.run(batch_gradients, args=(images, labels))

    @tf.function
    def apply_mean(per_worker: list[list[tf.Tensor]]) -> None:
        mean = [tf.add_n(list(grads)) / len(grads) for grads in zip(*per_worker, strict=True)]
        adam.apply(dict(zip(params, mean, strict=True)), params, global_step.assign_add(1))

    def sync_steps(count: int) -> tuple[float, float]:
        """``count`` synchronous global steps; the last step's mean loss and accuracy."""
        for _ in range(count):
            handles = [coordinator.schedule(gradient_step, args=(iterator,)) for _ in range(role.num_workers)]
            coordinator.join()
            results = [h.fetch() for h in handles]  # a worker lost mid-step: the coordinator re-runs its closure
            apply_mean([grads for grads, _, _ in results])
        return float(np.mean([r[1] for r in results])), float(np.mean([r[2] for r in results]))

    def async_steps(count: int) -> tuple[float, float]:
        handles = [coordinator.schedule(async_step, args=(iterator,)) for _ in range(count)]
        coordinator.join()
        loss_v, acc_v = handles[-1].fetch()
        return float(loss_v), float(acc_v)

    write, close = v2_scalar_writer(tensorboard_dir(cfg.log_dir, role.task))
    # Examples per global step: one batch async, one batch per worker sync.
    progress = Progress(role.task, cfg.batch_size * (role.num_workers if cfg.sync else 1), write, target=cfg.steps)
    step, last_saved, saved_at = first_step, first_step, time.monotonic()
    try:
        while step < cfg.steps:
            # One step first: when it happened is what the launcher reports (first_step_at).
            chunk = min(1 if step == first_step else cfg.log_every, cfg.steps - step)
            loss_v, acc_v = (sync_steps if cfg.sync else async_steps)(chunk)
            progress.steps_done(chunk)
            step = start.step = int(global_step.numpy())
            progress.report(step, loss_v, acc_v)
            # Every checkpoint_steps global steps, and at least every checkpoint_seconds: a lost PS or
            # chief costs at most that much training, however long a step takes.
            if step - last_saved >= cfg.checkpoint_steps or time.monotonic() - saved_at >= cfg.checkpoint_seconds:
                manager.save(checkpoint_number=step, options=CLIENT_IO)
                last_saved, saved_at = step, time.monotonic()
        if step != last_saved:
            manager.save(checkpoint_number=step, options=CLIENT_IO)
    finally:
        close()
    result = run_result(
        task=role.task,
        mode="in-graph",
        sync=cfg.sync,
        first_step=first_step,
        global_step=step,
        progress=progress,
        variable_devices=placement,
        recoveries=recoveries,
    )
    return {**result, "weights": {k: v.numpy() for k, v in params.items()}}


def _start_anew(role: ClusterRole, checkpoint: str | None, error: BaseException) -> NoReturn:
    """Exit with PS_LOST_EXIT, for the chief's launcher to start it again with the PS back."""
    print(
        f"tfk8s: {role.task} lost a parameter server ({_first_line(error)}); "
        f"exiting with {PS_LOST_EXIT} to start again from {checkpoint or 'step 0: no checkpoint yet'}",
        flush=True,
    )
    # Not sys.exit: the process ends here with this status whatever TensorFlow's clean-up at the
    # interpreter's exit would do with remote contexts that name a lost task. Nothing of it is left
    # to save: the checkpoints are on the log volume, the summary writer is closed.
    os._exit(PS_LOST_EXIT)


def _first_line(error: BaseException) -> str:
    """`Type: first line` of the error, the line of the one a closure's error wraps."""
    said = str(getattr(error, "original_exception", None) or error).strip().splitlines() or [""]
    return f"{type(error).__name__}: {said[0][:300]}"
