"""Input pipeline throughput: the trainer's tf.data pipeline vs a raw sequential read of the same files.

    .venv/bin/python bench/input_pipeline.py [--size-mb 150] [--workdir /tmp/tfk8s-bench-input]

Writes scikit-learn's digits, resized to MNIST's 28x28 (records of ~830 bytes, the size real
MNIST records have), replicated into ~SIZE MB of TFRecord shards with ``prepare-data``'s writer.
Then it measures, side by side, each with a warm page cache and (where the kernel honours
``posix_fadvise(DONTNEED)``) a cold one:

- raw: Python ``readinto`` of every shard in 1 MiB chunks: the ceiling for any reader;
- tfrecord framing: ``TFRecordDataset`` alone (length + CRC framing, no parsing);
- training pipeline: ``tfk8s_train.pipeline.tfrecord_dataset`` exactly as a worker runs it
  (parallel interleave, shuffle, batch, parallel vectorised parse to uint8 images, prefetch),
  iterated in a ``tf.function`` loop so Python per-batch overhead does not count.

Each case runs ``--repeat`` times (a fresh pipeline each time, the cache re-warmed or re-dropped
before each) and reports the median; graph tracing is done before the clock starts.

Goal: the training pipeline delivers >= 80% of the raw read rate (MB/s of the same files).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "training"))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
from tfk8s_train.data import Meta, load_digits_arrays, read_meta, shard_files, write_tfrecords  # noqa: E402
from tfk8s_train.pipeline import tfrecord_dataset  # noqa: E402

RECORD_BYTES_28 = 830  # approximate serialized Example for a 28x28 image + label


def prepare(workdir: Path, size_mb: int, shards: int, per_record: int) -> tuple[list[str], Meta]:
    """(Re)write the shards unless workdir already holds this layout at about this size."""
    meta = read_meta(workdir)
    files = shard_files(workdir)
    size = sum(map(os.path.getsize, files)) / 1e6
    if meta is None or meta.examples_per_record != per_record or abs(size - size_mb) > 0.2 * size_mb:
        digits = load_digits_arrays()
        replicate = max(1, round(size_mb * 1e6 / (RECORD_BYTES_28 * len(digits.x_train))))
        for old in workdir.glob("*.tfrecord"):
            old.unlink()
        meta = write_tfrecords(digits, workdir, shards=shards, replicate=replicate, image_size=28, examples_per_record=per_record)
        files = shard_files(workdir)
        for name in files:  # make the pages clean, so that DONTNEED can drop them
            with open(name, "rb+") as handle:
                os.fsync(handle.fileno())
    return files, meta


def drop_cache(files: list[str]) -> bool:
    """Ask the kernel to forget the files' pages; False where that is not possible."""
    if not hasattr(os, "posix_fadvise"):
        return False
    for name in files:
        fd = os.open(name, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    return True


def raw_read(files: list[str]) -> int:
    buffer = bytearray(1 << 20)
    total = 0
    for name in files:
        with open(name, "rb", buffering=0) as handle:
            while n := handle.readinto(buffer):
                total += n
    return total


def drainer(dataset: tf.data.Dataset) -> Callable[[], int]:
    """A traced loop that iterates ``dataset`` inside TensorFlow and returns its element count.

    Tracing happens here, outside the timed call: it is a one-off cost of building the graph,
    not of reading data, and the raw reader pays nothing like it.
    """

    @tf.function
    def count() -> tf.Tensor:
        return dataset.reduce(tf.constant(0, tf.int64), lambda n, _: n + 1)

    concrete = count.get_concrete_function()
    return lambda: int(concrete())


def framing(files: list[str], per_record: int) -> Callable[[], Callable[[], int]]:
    # Small records are batched before counting: tf.data's reduce costs ~20 us per element,
    # more than the framing itself. Blocks are few and large: batching would only add a copy.
    def build() -> Callable[[], int]:
        ds = tf.data.TFRecordDataset(files, buffer_size=1 << 20)
        return drainer(ds.batch(1024) if per_record == 1 else ds)

    return build


def training_pipeline(files: list[str], meta: Meta, batch: int) -> Callable[[], Callable[[], int]]:
    def build() -> Callable[[], int]:
        count = drainer(tfrecord_dataset(files, meta, batch_size=batch, repeat=False, seed=0))
        return lambda: count() * batch

    return build


def measure(build: Callable[[], Callable[[], int]], files: list[str], cache: str, repeat: int) -> tuple[float, int] | None:
    """Median seconds of ``repeat`` runs, each with the page cache as asked; None if it can't be made cold."""
    times = []
    for _ in range(repeat):
        run = build()  # a fresh pipeline each time: no state carried from the last pass
        if cache == "warm":
            raw_read(files)  # every page resident
        elif not drop_cache(files):
            return None
        start = time.perf_counter()
        n = run()
        times.append(time.perf_counter() - start)
    return statistics.median(times), n


def bench_layout(
    files: list[str], meta: Meta, batch: int, layout: str, repeat: int
) -> list[tuple[str, str, float, float, float]]:
    total_bytes = sum(map(os.path.getsize, files))
    records = meta.train_examples
    cases: list[tuple[str, Callable[[], Callable[[], int]], int]] = [
        ("raw Python read, 1 MiB chunks", lambda: lambda: raw_read(files), total_bytes),
        ("TFRecordDataset framing only", framing(files, meta.examples_per_record), 0),  # counts batches of records, not checked
        (f"training pipeline, batch {batch}", training_pipeline(files, meta, batch), records - records % batch),
    ]
    rows = []
    for cache in ("warm", "cold"):
        raw_rate = 0.0
        for name, build, expected in cases:
            measured = measure(build, files, cache, repeat)
            if measured is None:
                continue
            seconds, n = measured
            if expected:
                assert n == expected, f"{name}: got {n}, expected {expected}"
            mb_s = total_bytes / 1e6 / seconds
            raw_rate = raw_rate or mb_s
            rows.append((f"{layout}: {name}", cache, records / seconds, mb_s, 100 * mb_s / raw_rate))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=int, default=150)
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--block", type=int, default=1024, help="images per record of the blocked layout")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/tfk8s-bench-input"))
    parser.add_argument("--repeat", type=int, default=3, help="runs per case; the median is reported")
    args = parser.parse_args()
    rows = []
    for layout, per_record in (("one Example per image", 1), (f"blocks of {args.block}", args.block)):
        workdir = args.workdir / f"per-record-{per_record}"
        workdir.mkdir(parents=True, exist_ok=True)
        files, meta = prepare(workdir, args.size_mb, args.shards, per_record)
        total = sum(map(os.path.getsize, files))
        print(
            f"{layout}: {len(files)} shards, {total / 1e6:.1f} MB, {meta.train_examples:,} images of "
            f"{meta.height}x{meta.width} ({total / meta.train_examples:.0f} B per image)"
        )
        rows += bench_layout(files, meta, args.batch, layout, args.repeat)
    print(f"{os.cpu_count()} CPUs; TensorFlow {tf.__version__}\n")
    print("| layout: reader | page cache | images/s | MB/s | % of raw read (same files, same cache) |")
    print("|---|---|---:|---:|---:|")
    for name, cache, rec_s, mb_s, pct in rows:
        print(f"| {name} | {cache} | {rec_s:,.0f} | {mb_s:,.1f} | {pct:.0f}% |")


if __name__ == "__main__":
    main()
