"""tf.data input pipelines: the seeds' first complaint was slow training-data reads.

Shape of the TFRecord pipeline, and why:
- shard the *file list* per worker, so each worker opens only its own files (no double reads);
- interleave several files in parallel (hides per-file latency on network volumes);
- batch first, then one vectorised ``parse_example`` per batch in a parallel map (per-record
  parsing costs more than the parse itself for 100-byte records);
- images stay uint8 all the way to the training step, which scales them to 0..1 as its first op
  (``model.as_float_images``): a float32 pipeline moves 4x the bytes through every copy (shuffle,
  rebatch, prefetch, and in in-graph mode the gRPC hop from worker to step) for nothing;
- prefetch, so the input pipeline overlaps the training step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from tfk8s_train.data import Digits, Meta, load_digits_arrays, read_meta, shard_files

AUTOTUNE = tf.data.AUTOTUNE
FEATURES = {
    "image": tf.io.FixedLenFeature([], tf.string),
    "label": tf.io.FixedLenFeature([], tf.int64),
}


@dataclass(frozen=True, kw_only=True)
class TrainingData:
    """Where a worker's batches come from, plus the held-out test split (float images)."""

    meta: Meta
    train_files: tuple[str, ...]
    arrays: Digits | None
    x_test: np.ndarray
    y_test: np.ndarray

    @property
    def source(self) -> str:
        return f"tfrecords ({len(self.train_files)} shards)" if self.train_files else self.meta.source


def parse_batch(serialized: tf.Tensor, meta: Meta) -> tuple[tf.Tensor, tf.Tensor]:
    """Serialized Examples [B] -> (uint8 images [B, H, W, 1], int64 labels [B])."""
    parsed = tf.io.parse_example(serialized, FEATURES)
    pixels = tf.io.decode_raw(parsed["image"], tf.uint8)
    return tf.reshape(pixels, [-1, meta.height, meta.width, 1]), parsed["label"]


BLOCK_FEATURES = {
    "images": tf.io.FixedLenFeature([], tf.string),
    "labels": tf.io.FixedLenFeature([], tf.string),
}


def parse_block(serialized: tf.Tensor, meta: Meta, shuffle: bool) -> tuple[tf.Tensor, tf.Tensor]:
    """One record holding N images -> (uint8 images [N, H, W, 1], int64 labels [N]), rows shuffled."""
    parsed = tf.io.parse_single_example(serialized, BLOCK_FEATURES)
    images = tf.reshape(tf.io.decode_raw(parsed["images"], tf.uint8), [-1, meta.height, meta.width, 1])
    labels = tf.cast(tf.io.decode_raw(parsed["labels"], tf.uint8), tf.int64)
    if shuffle:  # blocks are shuffled by the record shuffle buffer, rows here
        order = tf.random.shuffle(tf.range(tf.shape(labels)[0]))
        images, labels = tf.gather(images, order), tf.gather(labels, order)
    return images, labels


def tfrecord_dataset(
    files: Sequence[str],
    meta: Meta,
    *,
    batch_size: int,
    num_shards: int = 1,
    shard_index: int = 0,
    shuffle: bool = True,
    repeat: bool = True,
    seed: int | None = None,
    cycle_length: int = 4,
) -> tf.data.Dataset:
    files_ds = tf.data.Dataset.from_tensor_slices(list(files))
    by_file = len(files) >= num_shards
    if by_file:
        files_ds = files_ds.shard(num_shards, shard_index)
    if repeat:
        files_ds = files_ds.repeat()
    if shuffle:
        files_ds = files_ds.shuffle(len(files), seed=seed)
    records = files_ds.interleave(
        lambda f: tf.data.TFRecordDataset(f, buffer_size=1 << 20),
        cycle_length=max(1, min(cycle_length, len(files))),
        num_parallel_calls=AUTOTUNE,
        deterministic=False,
    )
    if not by_file:  # fewer files than workers: fall back to every n-th record
        records = records.shard(num_shards, shard_index)
    if meta.examples_per_record > 1:  # blocks: parse whole blocks, then cut them into batches
        if shuffle:
            records = records.shuffle(max(2, 10_000 // meta.examples_per_record), seed=seed)
        blocks = records.map(lambda s: parse_block(s, meta, shuffle), num_parallel_calls=AUTOTUNE, deterministic=False)
        return blocks.rebatch(batch_size, drop_remainder=True).prefetch(AUTOTUNE)
    if shuffle:
        records = records.shuffle(10_000, seed=seed)
    batches = records.batch(batch_size, drop_remainder=True)
    return batches.map(lambda s: parse_batch(s, meta), num_parallel_calls=AUTOTUNE, deterministic=False).prefetch(AUTOTUNE)


def array_dataset(
    digits: Digits,
    *,
    batch_size: int,
    num_shards: int = 1,
    shard_index: int = 0,
    seed: int | None = None,
) -> tf.data.Dataset:
    """In-memory fallback when the data dir holds no TFRecords (sklearn digits or IDX)."""
    ds = tf.data.Dataset.from_tensor_slices((digits.x_train, digits.y_train)).shard(num_shards, shard_index)
    ds = ds.shuffle(len(digits.x_train), seed=seed).repeat().batch(batch_size, drop_remainder=True)
    return ds.map(lambda x, y: (x[..., None], y), num_parallel_calls=AUTOTUNE).prefetch(AUTOTUNE)


def make_dataset(
    data: TrainingData, *, batch_size: int, num_shards: int = 1, shard_index: int = 0, seed: int | None = None
) -> tf.data.Dataset:
    if data.train_files:
        return tfrecord_dataset(
            data.train_files, data.meta, batch_size=batch_size, num_shards=num_shards, shard_index=shard_index, seed=seed
        )
    assert data.arrays is not None
    return array_dataset(data.arrays, batch_size=batch_size, num_shards=num_shards, shard_index=shard_index, seed=seed)


def read_test_split(files: Sequence[str], meta: Meta) -> tuple[np.ndarray, np.ndarray]:
    ds = tf.data.TFRecordDataset(list(files)).batch(4096).map(lambda s: parse_batch(s, meta))
    xs, ys = zip(*[(x.numpy(), y.numpy()) for x, y in ds], strict=True)
    return np.concatenate(xs).astype(np.float32) / 255.0, np.concatenate(ys)


def load_training_data(data_dir: str | None) -> TrainingData:
    """TFRecords (from ``prepare-data``) if the data dir has them, else IDX or sklearn digits."""
    meta = read_meta(data_dir) if data_dir else None
    files = shard_files(data_dir) if data_dir and meta else []
    if data_dir and meta and files:
        x_test, y_test = read_test_split(shard_files(data_dir, "test-*.tfrecord"), meta)
        return TrainingData(meta=meta, train_files=tuple(files), arrays=None, x_test=x_test, y_test=y_test)
    digits = load_digits_arrays(data_dir)
    meta = Meta(height=digits.height, width=digits.width, train_examples=len(digits.x_train), source=digits.source)
    x_test = digits.x_test.astype(np.float32)[..., None] / 255.0
    return TrainingData(meta=meta, train_files=(), arrays=digits, x_test=x_test, y_test=digits.y_test)
