"""The models (an MLP and a small CNN) as plain parameters plus a pure forward function.

Why not Keras layers: with Keras 3, ``tf.compat.v1.layers`` is gone and Keras models do not
build inside a ``tf.compat.v1`` graph, and Keras 3 optimizers do not support
ParameterServerStrategy. Plain ``tf.Variable`` + ``tf.nn`` ops run unchanged in a v1
between-graph session (placed by ``replica_device_setter``), under ParameterServerStrategy
(placed on the PS by the strategy) and eagerly (evaluation and export).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import tensorflow as tf

KINDS = ("mlp", "cnn")
HIDDEN = 128


def _glorot(rng: np.random.Generator, shape: tuple[int, ...], fan_in: int, fan_out: int) -> np.ndarray:
    limit = np.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-limit, limit, size=shape).astype(np.float32)


def init_params(kind: str, height: int, width: int, *, classes: int = 10, seed: int = 0) -> dict[str, np.ndarray]:
    """Initial values, deterministic in ``seed``; every task of a run builds the same ones."""
    rng = np.random.default_rng(seed)
    if kind == "mlp":
        inputs = height * width
        return {
            "dense1/kernel": _glorot(rng, (inputs, HIDDEN), inputs, HIDDEN),
            "dense1/bias": np.zeros(HIDDEN, np.float32),
            "logits/kernel": _glorot(rng, (HIDDEN, classes), HIDDEN, classes),
            "logits/bias": np.zeros(classes, np.float32),
        }
    if kind == "cnn":
        flat = ((height + 3) // 4) * ((width + 3) // 4) * 32  # two SAME 2x2 pools
        return {
            "conv1/kernel": _glorot(rng, (3, 3, 1, 16), 9, 9 * 16),
            "conv1/bias": np.zeros(16, np.float32),
            "conv2/kernel": _glorot(rng, (3, 3, 16, 32), 9 * 16, 9 * 32),
            "conv2/bias": np.zeros(32, np.float32),
            "logits/kernel": _glorot(rng, (flat, classes), flat, classes),
            "logits/bias": np.zeros(classes, np.float32),
        }
    raise ValueError(f"model kind {kind!r}: expected one of {', '.join(KINDS)}")


def create_variables(initial: Mapping[str, np.ndarray]) -> dict[str, tf.Variable]:
    """Variables in the current context: a v1 graph, a strategy scope, or eager."""
    return {name: tf.Variable(value, name=name.replace("/", "_")) for name, value in initial.items()}


def as_float_images(images: tf.Tensor) -> tf.Tensor:
    """uint8 pixels (what the input pipeline delivers) -> float32 in 0..1; float input is already scaled."""
    if images.dtype == tf.uint8:
        return tf.cast(images, tf.float32) * (1.0 / 255.0)
    return tf.cast(images, tf.float32)


def forward(params: Mapping[str, tf.Tensor | tf.Variable], images: tf.Tensor, kind: str) -> tf.Tensor:
    """Logits for images [B, H, W, 1]: uint8 pixels, or floats already in 0..1."""
    images = as_float_images(images)
    if kind == "mlp":
        flat = tf.reshape(images, [-1, params["dense1/kernel"].shape[0]])
        hidden = tf.nn.relu(tf.matmul(flat, params["dense1/kernel"]) + params["dense1/bias"])
        return tf.matmul(hidden, params["logits/kernel"]) + params["logits/bias"]
    x = images
    for layer in ("conv1", "conv2"):
        x = tf.nn.conv2d(x, params[f"{layer}/kernel"], strides=1, padding="SAME") + params[f"{layer}/bias"]
        x = tf.nn.max_pool2d(tf.nn.relu(x), ksize=2, strides=2, padding="SAME")
    flat = tf.reshape(x, [-1, params["logits/kernel"].shape[0]])
    return tf.matmul(flat, params["logits/kernel"]) + params["logits/bias"]


def loss_and_accuracy(logits: tf.Tensor, labels: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    labels = tf.cast(labels, tf.int64)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
    accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, axis=1), labels), tf.float32))
    return loss, accuracy


def evaluate(weights: Mapping[str, np.ndarray], kind: str, images: np.ndarray, labels: np.ndarray) -> float:
    """Test accuracy of fetched weights, computed eagerly in this process."""
    logits = forward({k: tf.constant(v) for k, v in weights.items()}, tf.constant(images, tf.float32), kind)
    return float(np.mean(np.argmax(logits.numpy(), axis=1) == labels))


class _Exported(tf.Module):
    def __init__(self, weights: Mapping[str, np.ndarray], kind: str, height: int, width: int) -> None:
        super().__init__()
        self.params = {k: tf.Variable(v, trainable=False, name=k.replace("/", "_")) for k, v in weights.items()}
        self.kind = kind
        self.serve = tf.function(self._serve, input_signature=[tf.TensorSpec([None, height, width], tf.float32)])

    def _serve(self, images: tf.Tensor) -> dict[str, tf.Tensor]:
        logits = forward(self.params, images[..., None], self.kind)
        return {"probabilities": tf.nn.softmax(logits), "classes": tf.argmax(logits, axis=1)}


def export_saved_model(weights: Mapping[str, np.ndarray], kind: str, height: int, width: int, path: str | Path) -> Path:
    """SavedModel with a ``serving_default`` signature: images [B, H, W] in 0..1 -> classes."""
    module = _Exported(weights, kind, height, width)
    tf.saved_model.save(module, str(path), signatures={"serving_default": module.serve})
    return Path(path)
