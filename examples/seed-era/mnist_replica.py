"""A training script of the seeds' era (2016-2018), as teams ran them on Kubernetes before tfk8s:
between-graph replication from the classic flags (--ps_hosts, --worker_hosts, --job_name,
--task_index, --data_dir, --log_path), a `tf.train.Server` per task, variables on the parameter
servers through `replica_device_setter`, and `MonitoredTrainingSession`, whose chief initialises,
checkpoints and restores. TensorFlow 1's graph API, here through `tf.compat.v1` (TensorFlow 2).

Two lines make it survive a lost task under tfk8s (docs/guide/faults.md): checkpoints on the log
volume (`<log_path>/checkpoints`, which outlives every pod) and as often as the experiment's
`run.checkpointSeconds` says (`TFK8S_CHECKPOINT_SECONDS`; TensorFlow 1's own default is 600 s).
A parameter server lost mid-run comes back empty; the workers' sessions fail, `MonitoredSession`
recreates them, and the chief restores the newest checkpoint. Nothing else is tfk8s's: the
launcher gives the flags, and retires the parameter servers (which `server.join()` forever) when
the workers are done.

Data: MNIST's IDX files in --data_dir if all four are there, else scikit-learn's 8x8 digits.

    python mnist_replica.py --ps_hosts=... --worker_hosts=... --job_name=worker --task_index=0 \\
        --data_dir=/data --log_path=/log --train_steps=3000
"""

from __future__ import annotations

import argparse
import gzip
import os
from pathlib import Path

import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_v2_behavior()

IDX = {
    "x_train": "train-images-idx3-ubyte",
    "y_train": "train-labels-idx1-ubyte",
    "x_test": "t10k-images-idx3-ubyte",
    "y_test": "t10k-labels-idx1-ubyte",
}


def parse_flags() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ps_hosts", required=True)
    parser.add_argument("--worker_hosts", required=True)
    parser.add_argument("--job_name", choices=["ps", "worker"], required=True)
    parser.add_argument("--task_index", type=int, required=True)
    parser.add_argument("--data_dir", default="/data")
    parser.add_argument("--log_path", default="/log")
    parser.add_argument("--train_steps", type=int, default=3000)
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--learning_rate", type=float, default=0.001)
    return parser.parse_args()


def read_idx(path: Path) -> np.ndarray:
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    dims = raw[3]
    shape = [int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * dims).reshape(shape)


def load_data(data_dir: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x_train, y_train, x_test, y_test): images flattened to [0, 1], labels as int64."""
    found = {}
    for key, name in IDX.items():
        paths = [p for p in (Path(data_dir) / name, Path(data_dir) / f"{name}.gz") if p.is_file()]
        if paths:
            found[key] = read_idx(paths[0])
    if len(found) == len(IDX):
        x_train, y_train, x_test, y_test = (found[key] for key in IDX)
    else:
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split

        digits = load_digits()
        x_train, x_test, y_train, y_test = train_test_split(
            digits.images * 16.0, digits.target, test_size=0.2, random_state=0, stratify=digits.target
        )
    flat = lambda x: np.asarray(x, np.float32).reshape(len(x), -1) / 255.0  # noqa: E731
    return flat(x_train), np.asarray(y_train, np.int64), flat(x_test), np.asarray(y_test, np.int64)


def main() -> None:
    flags = parse_flags()
    tf.logging.set_verbosity(tf.logging.INFO)  # "Restoring parameters from ...", as the seeds' logs had
    cluster = tf.train.ClusterSpec({"ps": flags.ps_hosts.split(","), "worker": flags.worker_hosts.split(",")})
    server = tf.train.Server(cluster, job_name=flags.job_name, task_index=flags.task_index)
    if flags.job_name == "ps":
        server.join()
        return

    x_train, y_train, x_test, y_test = load_data(flags.data_dir)
    worker = f"/job:worker/task:{flags.task_index}"
    with tf.device(tf.train.replica_device_setter(worker_device=worker, cluster=cluster)):
        images = tf.placeholder(tf.float32, [None, x_train.shape[1]])
        labels = tf.placeholder(tf.int64, [None])
        hidden_w = tf.get_variable("hidden_w", [x_train.shape[1], 128], initializer=tf.truncated_normal_initializer(stddev=0.1))
        hidden_b = tf.get_variable("hidden_b", [128], initializer=tf.zeros_initializer())
        out_w = tf.get_variable("out_w", [128, 10], initializer=tf.truncated_normal_initializer(stddev=0.1))
        out_b = tf.get_variable("out_b", [10], initializer=tf.zeros_initializer())
        logits = tf.matmul(tf.nn.relu(tf.matmul(images, hidden_w) + hidden_b), out_w) + out_b
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
        accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), labels), tf.float32))
        global_step = tf.train.get_or_create_global_step()
        train_op = tf.train.AdamOptimizer(flags.learning_rate).minimize(loss, global_step=global_step)

    every = float(os.environ.get("TFK8S_CHECKPOINT_SECONDS", "60"))
    rng = np.random.default_rng(flags.task_index)
    step, local_steps, is_chief = 0, 0, flags.task_index == 0
    with tf.train.MonitoredTrainingSession(
        master=server.target,
        is_chief=is_chief,
        checkpoint_dir=os.path.join(flags.log_path, "checkpoints"),
        save_checkpoint_secs=every,
        hooks=[tf.train.StopAtStepHook(last_step=flags.train_steps)],
        config=tf.ConfigProto(allow_soft_placement=True),
    ) as session:
        while not session.should_stop():
            batch = rng.integers(0, len(x_train), flags.batch_size)
            _, step, trained = session.run([train_op, global_step, accuracy], {images: x_train[batch], labels: y_train[batch]})
            local_steps += 1
            if local_steps % 50 == 0:
                print(f"job : worker/{flags.task_index} step : {step} ,training accuracy : {trained:.2f}", flush=True)
    # The session ends at the target step: measure the test split on the parameter servers' variables.
    with tf.Session(server.target, config=tf.ConfigProto(allow_soft_placement=True)) as session:
        tested = session.run(accuracy, {images: x_test, labels: y_test})
    print(f"job : worker/{flags.task_index} done at step {step}, test accuracy : {tested:.3f}", flush=True)


if __name__ == "__main__":
    main()
