"""Handwritten digits on disk: MNIST IDX files, sharded TFRecords, or scikit-learn's digits.

Never downloads: without files in the data dir we use ``sklearn.datasets.load_digits`` (1,797
8x8 images shipped inside scikit-learn). ``prepare-data`` turns either source into sharded
TFRecords plus ``meta.json`` so that many workers can read the data set in parallel.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

TRAIN_GLOB = "train-*.tfrecord"
TEST_GLOB = "test-*.tfrecord"
IDX_FILES = {
    "x_train": "train-images-idx3-ubyte",
    "y_train": "train-labels-idx1-ubyte",
    "x_test": "t10k-images-idx3-ubyte",
    "y_test": "t10k-labels-idx1-ubyte",
}


@dataclass(frozen=True, kw_only=True)
class Digits:
    """uint8 images [N, H, W] in 0..255 and int64 labels [N]."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    source: str

    @property
    def height(self) -> int:
        return int(self.x_train.shape[1])

    @property
    def width(self) -> int:
        return int(self.x_train.shape[2])


@dataclass(frozen=True, kw_only=True)
class Meta:
    """What a reader of the TFRecords must know: the records are raw bytes of H x W."""

    height: int
    width: int
    num_classes: int = 10
    train_examples: int = 0
    source: str = ""
    # 1: one tf.train.Example per image (the usual MNIST TFRecords). N > 1: train records hold
    # blocks of N images ("images"/"labels" raw uint8 bytes), so tf.data's per-record cost is
    # paid once per N images: what lets the pipeline keep up with the disk (bench/input_pipeline.py).
    examples_per_record: int = 1


def read_idx(path: Path) -> np.ndarray:
    """Read one IDX file (optionally .gz): big-endian dims after a 4-byte magic."""
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    if raw[:2] != b"\x00\x00" or raw[2] != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def _find_idx(data_dir: Path) -> dict[str, Path] | None:
    found: dict[str, Path] = {}
    for key, stem in IDX_FILES.items():
        candidates = [data_dir / stem, data_dir / f"{stem}.gz"]
        path = next((p for p in candidates if p.is_file()), None)
        if path is None:
            return None
        found[key] = path
    return found


def load_digits_arrays(data_dir: str | Path | None = None, *, seed: int = 0) -> Digits:
    """MNIST IDX from data_dir when all four files are present, else scikit-learn's digits."""
    idx = _find_idx(Path(data_dir)) if data_dir else None
    if idx is not None:
        arrays = {key: read_idx(path) for key, path in idx.items()}
        return Digits(
            x_train=arrays["x_train"],
            y_train=arrays["y_train"].astype(np.int64),
            x_test=arrays["x_test"],
            y_test=arrays["y_test"].astype(np.int64),
            source=f"mnist-idx:{data_dir}",
        )
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    bunch = load_digits()
    images = np.clip(bunch.images * 16.0, 0, 255).astype(np.uint8)  # 0..16 -> 0..255
    x_train, x_test, y_train, y_test = train_test_split(
        images, bunch.target.astype(np.int64), test_size=0.2, random_state=seed, stratify=bunch.target
    )
    return Digits(x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test, source="sklearn-digits")


def resize_nearest(images: np.ndarray, size: int) -> np.ndarray:
    """Nearest-neighbour resize of [N, H, W] to [N, size, size] (e.g. 8x8 digits to MNIST's 28x28)."""
    rows = np.arange(size) * images.shape[1] // size
    cols = np.arange(size) * images.shape[2] // size
    return images[:, rows][:, :, cols]


def read_meta(data_dir: str | Path) -> Meta | None:
    path = Path(data_dir) / "meta.json"
    return Meta(**json.loads(path.read_text())) if path.is_file() else None


def shard_files(data_dir: str | Path, pattern: str = TRAIN_GLOB) -> list[str]:
    return sorted(str(p) for p in Path(data_dir).glob(pattern))


def _feature_bytes(value: bytes) -> Any:
    import tensorflow as tf

    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))


def _example(image: np.ndarray, label: int) -> bytes:
    import tensorflow as tf

    feature = {
        "image": _feature_bytes(image.tobytes()),
        "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)])),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def _block(images: np.ndarray, labels: np.ndarray) -> bytes:
    import tensorflow as tf

    feature = {"images": _feature_bytes(images.tobytes()), "labels": _feature_bytes(labels.astype(np.uint8).tobytes())}
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def write_tfrecords(
    digits: Digits,
    data_dir: str | Path,
    *,
    shards: int = 8,
    replicate: int = 1,
    image_size: int | None = None,
    examples_per_record: int = 1,
) -> Meta:
    """Train shards (the train split ``replicate`` times, round-robin), one test shard, meta.json."""
    import tensorflow as tf

    out = Path(data_dir)
    out.mkdir(parents=True, exist_ok=True)
    x_train, x_test = digits.x_train, digits.x_test
    if image_size:
        x_train, x_test = resize_nearest(x_train, image_size), resize_nearest(x_test, image_size)
    order = np.tile(np.arange(len(x_train)), replicate)  # example i of the whole stream -> source row
    singles = [_example(x, y) for x, y in zip(x_train, digits.y_train, strict=True)] if examples_per_record == 1 else []
    for shard in range(shards):
        rows = order[shard::shards]
        with tf.io.TFRecordWriter(str(out / f"train-{shard:05d}-of-{shards:05d}.tfrecord")) as writer:
            if examples_per_record == 1:
                for row in rows:
                    writer.write(singles[row])
                continue
            for start in range(0, len(rows), examples_per_record):
                block = rows[start : start + examples_per_record]
                writer.write(_block(x_train[block], digits.y_train[block]))
    with tf.io.TFRecordWriter(str(out / "test-00000-of-00001.tfrecord")) as writer:
        for x, y in zip(x_test, digits.y_test, strict=True):
            writer.write(_example(x, y))
    meta = Meta(
        height=int(x_train.shape[1]),
        width=int(x_train.shape[2]),
        train_examples=len(order),
        source=digits.source,
        examples_per_record=examples_per_record,
    )
    (out / "meta.json").write_text(json.dumps(meta.__dict__, indent=2) + "\n")
    return meta
