#!/usr/bin/env python3
"""Checks kafka_segments.py against segments that NanoKafka did not write.

The batches come from kafka-python's own `MemoryRecordsBuilder` (a Kafka producer's encoder),
with the base offset then assigned the way a broker assigns it, so what the script reports can
be compared with what went in. Run with the interpreter that has kafka-python:

    python tests/tools/test_kafka_segments.py
"""

import base64
import json
import os
import struct
import subprocess
import sys
import tempfile
import unittest

from kafka.record import MemoryRecordsBuilder
from kafka.record.util import calc_crc32c

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kafka_segments.py")

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

# RecordBatch v2 header fields the tests patch (big-endian; see the script's docstring).
BASE_OFFSET_AT = 0  # int64, outside the CRC: the broker assigns it
ATTRIBUTES_AT = 21  # int16, first byte under the CRC
CRC_AT = 17  # uint32, CRC-32C of bytes [21, end)
MAX_TIMESTAMP_AT = 35  # int64
RECORDS_COUNT_AT = 57  # int32
LOG_APPEND_TIME = 0x08  # attribute bit 3

T0 = 1_700_000_000_000  # a fixed CreateTime, in ms


def build_batch(base_offset, codec, records, producer=(-1, -1, -1)):
    """One batch as a producer encodes it, then stamped with `base_offset` as a broker does.

    kafka-python writes base offset 0 and offset deltas from the `offset` given to the
    builder, so deltas start at 0 and the real offsets come from the patched base offset.
    """
    producer_id, producer_epoch, base_sequence = producer
    builder = MemoryRecordsBuilder(
        magic=2, compression_type=CODECS[codec], batch_size=1 << 20, offset=0,
        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence)
    for timestamp, key, value, headers in records:
        builder.append(timestamp, key, value, headers)
    builder.close()
    batch = bytearray(builder.buffer())
    struct.pack_into(">q", batch, BASE_OFFSET_AT, base_offset)
    return batch


def reseal(batch):
    """Recomputes the CRC after a header change, as Kafka's broker does for LogAppendTime."""
    struct.pack_into(">I", batch, CRC_AT, calc_crc32c(memoryview(batch)[ATTRIBUTES_AT:]))


def b64(data):
    return None if data is None else base64.b64encode(data).decode("ascii")


def expected_records(base_offset, records):
    return [
        {"offset": base_offset + i, "timestamp": ts, "key": b64(key), "value": b64(value),
         "headers": [[k, b64(v)] for k, v in headers]}
        for i, (ts, key, value, headers) in enumerate(records)
    ]


def sample_records(codec, count):
    """Records with keys, a null value, a null key, headers and a null header value.

    Values repeat so that every codec actually compresses: kafka-python's builder writes a
    batch uncompressed when compression would not make it smaller.
    """
    out = []
    for i in range(count):
        key = None if i == 1 else f"key-{i}".encode()
        value = None if i == 2 else (f"{codec} value {i} " * 20).encode()
        headers = [("trace", f"id-{i}".encode()), ("empty", b""), ("gone", None)] if i % 2 else []
        # A timestamp before the first record's: a negative delta, which Kafka allows.
        ts = T0 - 5 if i == 3 else T0 + i
        out.append((ts, key, value, headers))
    return out


class KafkaSegmentsTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="kafka_segments_")
        self.data_dir = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def write(self, relative, data):
        path = os.path.join(self.data_dir, relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)

    def run_script(self, data_dir=None):
        return subprocess.run(
            [sys.executable, SCRIPT, data_dir or self.data_dir],
            capture_output=True, text=True, check=False)

    def decode(self):
        done = self.run_script()
        self.assertEqual(done.returncode, 0, done.stderr)
        return json.loads(done.stdout)

    def only_segment(self, decoded):
        [partition] = decoded["partitions"]
        [segment] = partition["segments"]
        return segment

    def test_every_codec_with_contiguous_offsets(self):
        sent, segment, base = [], bytearray(), 0
        for codec in CODECS:
            records = sample_records(codec, 5)
            sent.append((codec, base, records))
            segment += build_batch(base, codec, records)
            base += len(records)
        self.write("t_0/00000000000000000000.log", segment)

        segment_out = self.only_segment(self.decode())
        self.assertEqual(segment_out["file"], "00000000000000000000.log")
        self.assertEqual(segment_out["trailing_bytes"], 0)
        self.assertEqual(len(segment_out["batches"]), len(sent))
        position = 0
        for batch, (codec, base, records) in zip(segment_out["batches"], sent):
            with self.subTest(codec=codec):
                self.assertTrue(batch["crc_valid"])
                self.assertEqual(batch["compression"], codec)
                self.assertEqual(batch["position"], position)
                self.assertEqual(batch["base_offset"], base)
                self.assertEqual(batch["last_offset"], base + len(records) - 1)
                self.assertEqual(batch["records_count"], len(records))
                self.assertEqual(batch["timestamp_type"], 0)
                self.assertEqual(batch["first_timestamp"], T0)
                self.assertEqual(batch["max_timestamp"], T0 + len(records) - 1)
                self.assertEqual(
                    (batch["producer_id"], batch["producer_epoch"], batch["base_sequence"]),
                    (-1, -1, -1))
                self.assertFalse(batch["is_transactional"])
                self.assertFalse(batch["is_control"])
                self.assertEqual(batch["records"], expected_records(base, records))
                self.assertNotIn("records_error", batch)
            position += batch["size_in_bytes"]
        self.assertEqual(position, len(segment))

    def test_producer_fields(self):
        records = sample_records("none", 3)
        self.write("t_0/00000000000000000000.log",
                   build_batch(0, "none", records, producer=(4242, 3, 17)))
        [batch] = self.only_segment(self.decode())["batches"]
        self.assertEqual(
            (batch["producer_id"], batch["producer_epoch"], batch["base_sequence"]), (4242, 3, 17))

    def test_log_append_time_gives_every_record_the_max_timestamp(self):
        batch = build_batch(0, "lz4", sample_records("lz4", 4))
        struct.pack_into(">h", batch, ATTRIBUTES_AT,
                         struct.unpack_from(">h", batch, ATTRIBUTES_AT)[0] | LOG_APPEND_TIME)
        struct.pack_into(">q", batch, MAX_TIMESTAMP_AT, T0 + 1000)
        reseal(batch)
        self.write("t_0/00000000000000000000.log", batch)

        [out] = self.only_segment(self.decode())["batches"]
        self.assertTrue(out["crc_valid"])
        self.assertEqual(out["timestamp_type"], 1)
        self.assertEqual(out["max_timestamp"], T0 + 1000)
        self.assertEqual([r["timestamp"] for r in out["records"]], [T0 + 1000] * 4)

    def test_directory_layout(self):
        one = build_batch(0, "none", sample_records("none", 2))
        two = build_batch(2, "gzip", sample_records("gzip", 3))
        # Segments are read in name order; the topic keeps its own underscores.
        self.write("my_topic_10/00000000000000000002.log", two)
        self.write("my_topic_10/00000000000000000000.log", one)
        self.write("my_topic_10/00000000000000000000.index", b"\0" * 8)
        self.write("my_topic_2/00000000000000000000.log", b"")
        # Not partitions: configs, the lock, a directory without a partition number, a file.
        self.write("my_topic.json", b"{}")
        self.write(".lock", b"")
        self.write("scratch/00000000000000000000.log", b"junk")
        self.write("t_3", b"a file, not a directory")

        decoded = self.decode()
        self.assertEqual(
            [(p["topic"], p["partition"]) for p in decoded["partitions"]],
            [("my_topic", 2), ("my_topic", 10)])
        empty, ten = decoded["partitions"]
        self.assertEqual(empty["segments"],
                         [{"file": "00000000000000000000.log", "batches": [], "trailing_bytes": 0}])
        self.assertEqual([s["file"] for s in ten["segments"]],
                         ["00000000000000000000.log", "00000000000000000002.log"])
        self.assertEqual([b["base_offset"] for s in ten["segments"] for b in s["batches"]], [0, 2])

    def test_partial_trailing_batch_is_counted_not_decoded(self):
        whole = build_batch(0, "none", sample_records("none", 2))
        cut = build_batch(2, "none", sample_records("none", 2))[:40]
        self.write("t_0/00000000000000000000.log", whole + cut)
        segment = self.only_segment(self.decode())
        self.assertEqual(len(segment["batches"]), 1)
        self.assertEqual(segment["trailing_bytes"], 40)

    def test_corrupted_byte_is_reported_and_decoding_goes_on(self):
        first = build_batch(0, "none", sample_records("none", 3))
        second = build_batch(3, "gzip", sample_records("gzip", 3))
        third = build_batch(6, "none", sample_records("none", 3))
        first[-3] ^= 0xFF  # inside the last record's key: still readable, CRC wrong
        second[len(second) // 2] ^= 0xFF  # inside the gzip stream, whose own CRC then fails
        self.write("t_0/00000000000000000000.log", first + second + third)

        batches = self.only_segment(self.decode())["batches"]
        self.assertEqual([b["crc_valid"] for b in batches], [False, False, True])
        self.assertEqual(len(batches[0]["records"]), 3)
        self.assertNotEqual(batches[0]["records"], expected_records(0, sample_records("none", 3)))
        self.assertIn("records_error", batches[1])
        self.assertEqual(batches[1]["records"], [])
        self.assertEqual(batches[2]["records"], expected_records(6, sample_records("none", 3)))

    def test_missing_directory_fails(self):
        done = self.run_script(os.path.join(self.data_dir, "absent"))
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("absent", done.stderr)
        self.assertEqual(done.stdout, "")

    def test_unparseable_batch_fails_and_says_where(self):
        good = build_batch(0, "none", sample_records("none", 2))
        bad = build_batch(2, "none", sample_records("none", 2))
        struct.pack_into(">i", bad, 8, 5)  # batch length too small to hold a header
        self.write("t_0/00000000000000000000.log", good + bad)
        done = self.run_script()
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("00000000000000000000.log", done.stderr)
        self.assertIn(f"batch at byte {len(good)}", done.stderr)

    def test_valid_crc_over_unreadable_records_fails(self):
        bad = build_batch(0, "none", sample_records("none", 2))
        struct.pack_into(">i", bad, RECORDS_COUNT_AT, 3)  # one record more than the batch holds
        reseal(bad)
        self.write("t_0/00000000000000000000.log", bad)
        done = self.run_script()
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("CRC valid but records unreadable", done.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
