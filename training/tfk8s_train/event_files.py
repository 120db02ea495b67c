"""The step and the scalars of TensorBoard event files, read with the standard library alone.

The launcher learns an unmodified script's progress from what the script already writes: its
TensorBoard events (`events.out.tfevents.*`) under the run's log directory. It runs in stock
images that may not have TensorFlow importable in the launcher's own interpreter (and importing
it would cost seconds and memory), so the two formats are read by hand:

* TFRecord framing: uint64 length (little endian), uint32 masked CRC of the length, the record,
  uint32 masked CRC of the record. A file being written ends in half a record: reading stops
  there and resumes from the same offset next time. CRCs are not checked (CRC-32C is not in the
  standard library); a length that cannot be right ends the file's reading for good.
* The `Event` protobuf (tensorflow/core/util/event.proto): wall_time = 1 (double), step = 2
  (int64), summary = 5; `Summary.value` = 1, each `tag` = 1 and either `simple_value` = 2 (TF1
  summaries) or `tensor` = 8 (TF2 `tf.summary.scalar`): `TensorProto` float_val = 5, double_val = 6
  (packed), or tensor_content = 4 with dtype = 1 (DT_FLOAT 1, DT_DOUBLE 2).

Runs on Python 3.6 and newer, like launch.py (`make lint` checks it with vermin).
"""

import os
import struct
from typing import Dict, Iterator, List, NamedTuple, Optional, Tuple

EVENT_FILE_MARK = "events.out.tfevents."
# A record longer than this is not an event this reader wants (graph defs, images): skipped.
MAX_RECORD = 16 * 1024 * 1024
DT_FLOAT, DT_DOUBLE = 1, 2


class Event(NamedTuple):
    wall_time: float
    step: int
    scalars: Dict[str, float]


def _varint(data: bytes, pos: int) -> Tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(data: bytes) -> Iterator[Tuple[int, int, object]]:
    """(field number, wire type, value) of one message: int for varint/fixed, bytes for lengths."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        value: object = b""
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 1:
            value, pos = data[pos : pos + 8], pos + 8
        elif wire == 2:
            size, pos = _varint(data, pos)
            value, pos = data[pos : pos + size], pos + size
        elif wire == 5:
            value, pos = data[pos : pos + 4], pos + 4
        else:  # groups (3, 4) are not in these messages
            raise ValueError(f"wire type {wire}")
        yield number, wire, value


def _tensor_scalar(data: bytes) -> Optional[float]:
    dtype, content = 0, b""
    values: List[float] = []
    for number, wire, value in _fields(data):
        if number == 1 and wire == 0:
            dtype = int(value)  # type: ignore[call-overload]
        elif number == 4 and wire == 2:
            content = bytes(value)  # type: ignore[call-overload]
        elif number == 5:
            raw = bytes(value)  # type: ignore[call-overload]
            values += list(struct.unpack(f"<{len(raw) // 4}f", raw))
        elif number == 6:
            raw = bytes(value)  # type: ignore[call-overload]
            values += list(struct.unpack(f"<{len(raw) // 8}d", raw))
    if values:
        return values[0]
    if dtype == DT_FLOAT and len(content) == 4:
        return float(struct.unpack("<f", content)[0])
    if dtype == DT_DOUBLE and len(content) == 8:
        return float(struct.unpack("<d", content)[0])
    return None


def _summary_scalars(data: bytes) -> Dict[str, float]:
    scalars: Dict[str, float] = {}
    for number, _wire, value in _fields(data):
        if number != 1:
            continue
        tag = ""
        scalar: Optional[float] = None
        for field, wire, item in _fields(bytes(value)):  # type: ignore[call-overload]
            if field == 1 and wire == 2:
                tag = bytes(item).decode("utf-8", "replace")  # type: ignore[call-overload]
            elif field == 2 and wire == 5:
                scalar = float(struct.unpack("<f", bytes(item))[0])  # type: ignore[call-overload]
            elif field == 8 and wire == 2:
                scalar = _tensor_scalar(bytes(item))  # type: ignore[call-overload]
        if tag and scalar is not None:
            scalars[tag] = scalar
    return scalars


def parse_event(data: bytes) -> Optional[Event]:
    """One serialized Event, or None if it is not one."""
    wall_time, step = 0.0, 0
    scalars: Dict[str, float] = {}
    try:
        for number, wire, value in _fields(data):
            if number == 1 and wire == 1:
                wall_time = struct.unpack("<d", bytes(value))[0]  # type: ignore[call-overload]
            elif number == 2 and wire == 0:
                step = int(value)  # type: ignore[call-overload]
            elif number == 5 and wire == 2:
                scalars = _summary_scalars(bytes(value))  # type: ignore[call-overload]
    except (IndexError, ValueError, struct.error):
        return None
    return Event(wall_time, step, scalars)


class EventFile:
    """One event file, read incrementally: each `read_new` returns the events appended since."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.offset = 0
        self.broken = False

    def read_new(self) -> List[Event]:
        if self.broken:
            return []
        events: List[Event] = []
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                while True:
                    header = handle.read(12)
                    if len(header) < 12:
                        break
                    (length,) = struct.unpack("<Q", header[:8])
                    if length > MAX_RECORD:
                        if length > 1 << 40:  # no writer writes this: not a TFRecord file
                            self.broken = True
                            break
                        handle.seek(length + 4, os.SEEK_CUR)
                        if handle.tell() > os.fstat(handle.fileno()).st_size:
                            break  # the big record is not all there yet
                        self.offset = handle.tell()
                        continue
                    body = handle.read(length + 4)
                    if len(body) < length + 4:
                        break  # half a record: the writer is still at it
                    self.offset += 12 + length + 4
                    event = parse_event(body[:length])
                    if event is not None:
                        events.append(event)
        except OSError:
            return events
        return events


class EventDirectory:
    """Every event file under a directory (recursively), each read from where it was left."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.files: Dict[str, EventFile] = {}

    def read_new(self) -> List[Event]:
        for directory, _dirs, names in os.walk(self.root):
            for name in names:
                if EVENT_FILE_MARK in name:
                    path = os.path.join(directory, name)
                    self.files.setdefault(path, EventFile(path))
        events: List[Event] = []
        for handle in self.files.values():
            events += handle.read_new()
        return events
