#!/usr/bin/env python3
"""Produce COUNT generated records (see clientlib.py) with kafka-python's idempotent producer.

    python kafka_python_produce.py BOOTSTRAP TOPIC [--count N] [--prefix P] [--partition P]
        [--compression none|gzip|snappy|lz4|zstd] [--timeout S]

kafka-python 3.x enables idempotence by default (KIP-679) but silently turns it off when
another setting conflicts or the broker looks older than 0.11; it is set explicitly here so
that any such case raises instead, and acks is "all" as idempotence requires. The producer
therefore sends InitProducerId before its first Produce and stamps every batch with a
producer id, epoch and sequence.

Prints {"client", "version", "idempotent", "records": [record...]} where each record (in send
order) carries the partition and offset the broker assigned.
"""

import kafka
from kafka import KafkaProducer

from clientlib import emit, generated, parser, record_json, run, sasl_kafka_python, Deadline

CLIENT = "kafka-python"


def main():
    args = parser(__doc__.splitlines()[0], "producer").parse_args()
    deadline = Deadline(args.timeout)
    producer = KafkaProducer(
        bootstrap_servers=args.bootstrap,
        client_id="nanokafka-test-kafka-python",
        enable_idempotence=True,
        acks="all",
        compression_type=None if args.compression == "none" else args.compression,
        request_timeout_ms=max(1000, deadline.left_ms()),
        max_block_ms=max(1000, deadline.left_ms()),
        delivery_timeout_ms=max(1000, deadline.left_ms()),
        **sasl_kafka_python(args),
    )
    try:
        sent = []
        for i in range(args.count):
            key, value, headers = generated(args.prefix, i, CLIENT)
            future = producer.send(args.topic, key=key, value=value, headers=headers, partition=args.partition)
            sent.append((key, value, headers, future))
        producer.flush(timeout=deadline.left())
        records = []
        for key, value, headers, future in sent:
            meta = future.get(timeout=deadline.left())
            records.append(record_json(meta.partition, meta.offset, meta.timestamp, key, value, headers))
        idempotent = bool(producer.config["enable_idempotence"])
    finally:
        producer.close(timeout=deadline.left())
    emit({"client": CLIENT, "version": kafka.__version__, "idempotent": idempotent, "records": records})


if __name__ == "__main__":
    run(main)
