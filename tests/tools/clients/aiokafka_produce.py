#!/usr/bin/env python3
"""Produce COUNT generated records (see clientlib.py) with aiokafka (asyncio).

    python aiokafka_produce.py BOOTSTRAP TOPIC [--count N] [--prefix P] [--partition P]
        [--compression none|gzip|snappy|lz4|zstd] [--acks 1|all] [--timeout S]

aiokafka defaults to acks=1 without idempotence; --acks all asks for the in-sync replicas'
acknowledgement, still without idempotence (aiokafka only enables it when told), so both
modes send plain (producer id -1) batches. Every record is sent before any is awaited, so
aiokafka batches them.

Prints {"client", "version", "acks", "records": [record...]} in send order.
"""

import asyncio

import aiokafka
from aiokafka import AIOKafkaProducer

from clientlib import emit, generated, parser, record_json, run, sasl_kafka_python, Deadline

CLIENT = "aiokafka"


async def produce(args, deadline):
    producer = AIOKafkaProducer(
        bootstrap_servers=args.bootstrap,
        client_id="nanokafka-test-aiokafka",
        acks=1 if args.acks == "1" else "all",
        compression_type=None if args.compression == "none" else args.compression,
        request_timeout_ms=max(1000, deadline.left_ms()),
        **sasl_kafka_python(args),
    )
    await asyncio.wait_for(producer.start(), deadline.left())
    try:
        sent = []
        for i in range(args.count):
            key, value, headers = generated(args.prefix, i, CLIENT)
            future = await producer.send(args.topic, value=value, key=key, headers=headers, partition=args.partition)
            sent.append((key, value, headers, future))
        records = []
        for key, value, headers, future in sent:
            meta = await asyncio.wait_for(future, deadline.left())
            records.append(record_json(meta.partition, meta.offset, meta.timestamp, key, value, headers))
        return records
    finally:
        await asyncio.wait_for(producer.stop(), max(1.0, deadline.left()))


def main():
    p = parser(__doc__.splitlines()[0], "producer")
    p.add_argument("--acks", default="1", choices=["1", "all"])
    args = p.parse_args()
    deadline = Deadline(args.timeout)
    records = asyncio.run(produce(args, deadline))
    emit({"client": CLIENT, "version": aiokafka.__version__, "acks": args.acks, "records": records})


if __name__ == "__main__":
    run(main)
