#!/usr/bin/env python3
"""Decode a NanoKafka data directory with kafka-python, an independent reader of Kafka's format.

    python kafka_segments.py DATA_DIR > segments.json

Every partition directory (`<topic>_<partition>`; the topic may itself contain `_`, the
partition is the number after the last one) has its `*.log` segments read in name order by
kafka-python's `MemoryRecords`, exactly as a Kafka consumer reads fetched bytes: a sequence of
RecordBatch v2 (magic 2). Anything else in DATA_DIR (`<topic>.json`, `.lock`, ...) is skipped.

One JSON document goes to stdout:

    {"partitions": [{"topic", "partition", "segments": [{"file", "trailing_bytes", "batches": [
        {"position", "size_in_bytes", "base_offset", "last_offset", "records_count",
         "crc_valid", "compression" ("none" | "gzip" | "snappy" | "lz4" | "zstd"),
         "timestamp_type" (0 CreateTime, 1 LogAppendTime), "first_timestamp", "max_timestamp",
         "partition_leader_epoch", "producer_id", "producer_epoch", "base_sequence",
         "is_transactional", "is_control",
         "records": [{"offset", "timestamp", "key", "value",
                      "headers": [[key, value], ...]}],
         "records_error" (only when the records of a batch with a bad CRC cannot be read;
                          "records" is then empty)}]}]}]}

"position" is the batch's byte offset in its file and "size_in_bytes" its length (batchLength
+ 12). Keys, values and header values are base64 (standard alphabet, padded) or null; header
keys are the strings kafka-python decodes. Record timestamps are what kafka-python returns:
base timestamp + delta for CreateTime, the batch's max_timestamp for every record of a
LogAppendTime batch. `trailing_bytes` counts the bytes after the last whole batch (a partial
batch at the end of a segment, which kafka-python silently does not yield).

A bad CRC does not stop the run: the batch is reported with "crc_valid": false and the next
batch is read (batch framing does not depend on the CRC). The exit status is 1, with the file
and byte position on stderr, when DATA_DIR is missing, a batch is not magic 2, a batch with a
valid CRC cannot be decoded, or kafka-python lacks a codec library.

Standard library and kafka-python only (codecs through its extras: lz4, snappy, zstd, crc32c).
"""

import base64
import json
import os
import re
import sys

from kafka import codec
from kafka.record import MemoryRecords

# `<topic>_<partition>`: greedy topic, so the partition is the digits after the last `_`.
PARTITION_DIR = re.compile(r"^(?P<topic>.+)_(?P<partition>[0-9]+)$")

# Attribute bits 0-2 of a RecordBatch v2, as kafka-python's `compression_type` returns them.
CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def missing_codecs():
    """Codec libraries kafka-python cannot find: checked up front, since a batch that fails
    to decompress for want of a library says nothing about the segment."""
    present = {"snappy": codec.has_snappy(), "lz4": codec.has_lz4(), "zstd": codec.has_zstd()}
    return [name for name, ok in present.items() if not ok]


class SegmentError(Exception):
    """A segment that kafka-python cannot read: the message says where."""


def b64(data):
    return None if data is None else base64.b64encode(data).decode("ascii")


def decode_records(batch):
    """The records of one batch as JSON objects; decompresses the batch."""
    return [
        {
            "offset": record.offset,
            "timestamp": record.timestamp,
            "key": b64(record.key),
            "value": b64(record.value),
            "headers": [[key, b64(value)] for key, value in record.headers],
        }
        for record in batch
    ]


def decode_batch(batch, position, where):
    if batch.magic != 2:
        raise SegmentError(f"{where}: magic {batch.magic}, expected 2 (RecordBatch v2)")
    # kafka-python asserts that the CRC is checked before the records are decompressed.
    crc_valid = batch.validate_crc()
    out = {
        "position": position,
        "size_in_bytes": batch.size_in_bytes,
        "base_offset": batch.base_offset,
        "last_offset": batch.last_offset,
        "records_count": batch.records_count,
        "crc_valid": crc_valid,
        "compression": CODECS.get(batch.compression_type, f"unknown({batch.compression_type})"),
        "timestamp_type": batch.timestamp_type,
        "first_timestamp": batch.first_timestamp,
        "max_timestamp": batch.max_timestamp,
        "partition_leader_epoch": batch.leader_epoch,
        "producer_id": batch.producer_id,
        "producer_epoch": batch.producer_epoch,
        "base_sequence": batch.base_sequence,
        "is_transactional": batch.is_transactional,
        "is_control": batch.is_control_batch,
    }
    try:
        out["records"] = decode_records(batch)
    except Exception as err:  # zlib, lz4, snappy and zstd each raise their own error types
        if crc_valid:
            raise SegmentError(f"{where}: CRC valid but records unreadable: {err!r}") from err
        # Damage the CRC already reports: keep going, as the run must not stop at a bad CRC.
        out["records"] = []
        out["records_error"] = repr(err)
    return out


def decode_segment(path):
    with open(path, "rb") as f:
        data = f.read()
    records = MemoryRecords(data)
    batches = []
    position = 0
    while records.has_next():
        where = f"{path}: batch at byte {position}"
        try:
            batch = records.next_batch()
        except Exception as err:  # a batch length too small for a header, or negative
            raise SegmentError(f"{where}: {err!r}") from err
        batches.append(decode_batch(batch, position, f"{where} (base offset {batch.base_offset})"))
        position += batch.size_in_bytes
    # Cheap once iteration has ended: MemoryRecords already knows where whole batches stop.
    trailing = len(data) - records.valid_bytes()
    return {"file": os.path.basename(path), "batches": batches, "trailing_bytes": trailing}


def decode_data_dir(data_dir):
    partitions = []
    for name in os.listdir(data_dir):
        match = PARTITION_DIR.match(name)
        if match is None or not os.path.isdir(os.path.join(data_dir, name)):
            continue
        partitions.append((match["topic"], int(match["partition"]), name))
    partitions.sort()

    out = []
    for topic, partition, name in partitions:
        part_dir = os.path.join(data_dir, name)
        logs = sorted(f for f in os.listdir(part_dir) if f.endswith(".log"))
        segments = [decode_segment(os.path.join(part_dir, f)) for f in logs]
        out.append({"topic": topic, "partition": partition, "segments": segments})
    return {"partitions": out}


def main(argv):
    if len(argv) != 2:
        print(f"usage: {os.path.basename(argv[0])} DATA_DIR", file=sys.stderr)
        return 2
    data_dir = argv[1]
    missing = missing_codecs()
    if missing:
        print(f"kafka_segments: kafka-python lacks the {', '.join(missing)} codec(s): "
              "pip install 'kafka-python[crc32c,lz4,snappy,zstd]'", file=sys.stderr)
        return 1
    if not os.path.isdir(data_dir):
        print(f"kafka_segments: {data_dir}: no such directory", file=sys.stderr)
        return 1
    try:
        result = decode_data_dir(data_dir)
    except (SegmentError, OSError) as err:
        print(f"kafka_segments: {err}", file=sys.stderr)
        return 1
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
