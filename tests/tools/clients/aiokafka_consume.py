#!/usr/bin/env python3
"""Read COUNT records of TOPIC as a member of GROUP with aiokafka, committing by hand.

    python aiokafka_consume.py BOOTSTRAP TOPIC GROUP --count N [--timeout S]

Auto-commit is off; each batch from getmany() is collected, then its offsets are committed
(OffsetCommit). A group without committed offsets starts at the earliest offset; the session
timeout is 6 s, as in kafka_python_consume.py. Fails when the deadline passes before COUNT
records are read.

Prints {"client", "version", "records": [record...] (in the order read),
"committed": [{"partition", "offset"}...] (read back with OffsetFetch after the run)}.
"""

import asyncio

import aiokafka
from aiokafka import AIOKafkaConsumer, TopicPartition

from clientlib import emit, fail, parser, record_json, run, sasl_kafka_python, Deadline

CLIENT = "aiokafka"


async def consume(args, deadline):
    consumer = AIOKafkaConsumer(
        args.topic,
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        client_id="nanokafka-test-aiokafka",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=6000,
        heartbeat_interval_ms=1000,
        request_timeout_ms=max(1000, deadline.left_ms()),
        **sasl_kafka_python(args),
    )
    await asyncio.wait_for(consumer.start(), deadline.left())
    try:
        records = []
        while len(records) < args.count:
            if deadline.expired():
                fail(f"read {len(records)} of {args.count} records before the timeout")
            polled = await consumer.getmany(timeout_ms=min(500, deadline.left_ms()), max_records=args.count - len(records))
            batch = [m for messages in polled.values() for m in messages]
            records += [record_json(m.partition, m.offset, m.timestamp, m.key, m.value, m.headers) for m in batch]
            if batch:
                await asyncio.wait_for(consumer.commit(), deadline.left())
        committed = []
        for p in sorted(consumer.partitions_for_topic(args.topic) or ()):
            offset = await asyncio.wait_for(consumer.committed(TopicPartition(args.topic, p)), max(1.0, deadline.left()))
            if offset is not None:
                committed.append({"partition": p, "offset": offset})
        return records, committed
    finally:
        await asyncio.wait_for(consumer.stop(), max(1.0, deadline.left()))


def main():
    args = parser(__doc__.splitlines()[0], "consumer").parse_args()
    if args.count is None:
        fail("--count is required")
    records, committed = asyncio.run(consume(args, Deadline(args.timeout)))
    emit({"client": CLIENT, "version": aiokafka.__version__, "records": records, "committed": committed})


if __name__ == "__main__":
    run(main)
