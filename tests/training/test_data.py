"""Data on disk and the tf.data pipeline: IDX files, TFRecord shards, per-worker file sharding."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np
import pytest
from tfk8s_train.data import load_digits_arrays, read_idx, read_meta, resize_nearest, shard_files
from tfk8s_train.pipeline import load_training_data, tfrecord_dataset


def _write_idx(path: Path, array: np.ndarray) -> None:
    header = b"\x00\x00\x08" + bytes([array.ndim]) + b"".join(struct.pack(">I", d) for d in array.shape)
    path.write_bytes(gzip.compress(header + array.astype(np.uint8).tobytes()))


def test_mnist_idx_files_are_preferred_over_sklearn(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    arrays = {
        "train-images-idx3-ubyte": rng.integers(0, 256, (5, 28, 28)),
        "train-labels-idx1-ubyte": np.arange(5),
        "t10k-images-idx3-ubyte": rng.integers(0, 256, (3, 28, 28)),
        "t10k-labels-idx1-ubyte": np.arange(3),
    }
    for name, array in arrays.items():
        _write_idx(tmp_path / f"{name}.gz", array)
    digits = load_digits_arrays(tmp_path)
    assert digits.source.startswith("mnist-idx") and (digits.height, digits.width) == (28, 28)
    np.testing.assert_array_equal(digits.x_train, arrays["train-images-idx3-ubyte"])
    np.testing.assert_array_equal(read_idx(tmp_path / "t10k-labels-idx1-ubyte.gz"), np.arange(3))


def test_without_files_the_shipped_sklearn_digits_are_used(tmp_path: Path) -> None:
    digits = load_digits_arrays(tmp_path / "missing")
    assert digits.source == "sklearn-digits"
    assert len(digits.x_train) + len(digits.x_test) == 1797 and digits.x_train.max() == 255


def test_resize_nearest_keeps_blocks() -> None:
    image = np.arange(4, dtype=np.uint8).reshape(1, 2, 2)
    assert resize_nearest(image, 4)[0].tolist() == [[0, 0, 1, 1], [0, 0, 1, 1], [2, 2, 3, 3], [2, 2, 3, 3]]


def test_prepared_shards_round_trip_and_workers_read_disjoint_files(digits_tfrecords: Path) -> None:
    meta = read_meta(digits_tfrecords)
    files = shard_files(digits_tfrecords)
    assert meta is not None and (meta.height, meta.width) == (8, 8) and len(files) == 4
    seen: list[set[bytes]] = []
    for worker in range(2):
        ds = tfrecord_dataset(files, meta, batch_size=1, num_shards=2, shard_index=worker, shuffle=False, repeat=False)
        images = np.concatenate([x.numpy() for x, _ in ds.unbatch().batch(4096)])
        seen.append({row.tobytes() for row in images.reshape(len(images), -1)})
        assert images.dtype == np.uint8  # scaled to 0..1 by the training step, not by the pipeline
    digits = load_digits_arrays()
    expected = {row.tobytes() for row in digits.x_train.reshape(len(digits.x_train), -1)}
    assert seen[0] | seen[1] == expected  # together the workers read the whole train split


@pytest.mark.parametrize("use_tfrecords", [True, False], ids=["tfrecords", "in-memory"])
def test_training_data_yields_uint8_batches_and_scaled_test_images(
    digits_tfrecords: Path, tmp_path: Path, use_tfrecords: bool
) -> None:
    from tfk8s_train.pipeline import make_dataset

    data = load_training_data(str(digits_tfrecords if use_tfrecords else tmp_path))
    assert bool(data.train_files) == use_tfrecords and len(data.x_test) == len(data.y_test) == 360
    images, labels = next(iter(make_dataset(data, batch_size=32, num_shards=2, shard_index=1)))
    assert images.shape == (32, 8, 8, 1) and images.numpy().dtype == np.uint8 and labels.shape == (32,)
    assert set(labels.numpy()) <= set(range(10))
    assert data.x_test.dtype == np.float32 and 0.0 <= data.x_test.min() and data.x_test.max() == 1.0


def test_blocked_records_yield_the_same_images_as_single_examples(tmp_path: Path) -> None:
    from tfk8s_train.data import write_tfrecords

    digits = load_digits_arrays()
    meta = write_tfrecords(digits, tmp_path, shards=3, replicate=2, examples_per_record=100)
    assert meta.examples_per_record == 100 and meta.train_examples == 2 * len(digits.x_train)
    ds = tfrecord_dataset(shard_files(tmp_path), meta, batch_size=16, repeat=False, seed=1)
    batches = list(ds)
    images = np.concatenate([x.numpy() for x, _ in batches])
    labels = np.concatenate([y.numpy() for _, y in batches])
    assert images.shape[1:] == (8, 8, 1) and len(images) == meta.train_examples - meta.train_examples % 16
    # every (image, label) pair is a real one: blocks keep rows and labels together through the shuffle
    truth = {x.tobytes(): y for x, y in zip(digits.x_train, digits.y_train, strict=True)}
    assert all(truth[x[..., 0].tobytes()] == y for x, y in zip(images, labels, strict=True))


def test_model_sees_uint8_batches_and_float_test_images_alike() -> None:
    """The pipeline hands the step uint8 pixels, evaluation and serving hand it floats in 0..1."""
    import tensorflow as tf
    from tfk8s_train.model import forward, init_params

    pixels = load_digits_arrays().x_test[:16, ..., None]
    params = {k: tf.constant(v) for k, v in init_params("cnn", 8, 8, seed=3).items()}
    from_uint8 = forward(params, tf.constant(pixels), "cnn").numpy()
    from_float = forward(params, tf.constant(pixels.astype(np.float32) / 255.0), "cnn").numpy()
    assert np.allclose(from_uint8, from_float, atol=1e-5) and not np.allclose(from_uint8, 0.0)
