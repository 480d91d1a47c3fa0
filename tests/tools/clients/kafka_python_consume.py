#!/usr/bin/env python3
"""Read COUNT records of TOPIC as a member of GROUP with kafka-python, committing by hand.

    python kafka_python_consume.py BOOTSTRAP TOPIC GROUP --count N [--instance-id ID]
        [--session-timeout-ms MS] [--timeout S]

Auto-commit is off; after each poll's records are processed (collected) their offsets are
committed synchronously (OffsetCommit), so the committed offsets are exactly what was read. A
group without committed offsets starts at the earliest offset. The session timeout is 6 s
(the smallest a Kafka broker accepts by default): a broker may hold the first JoinGroup of
a new member for up to a session timeout, and the client default (45 s) makes that slow;
--session-timeout-ms sets another. --instance-id makes the member static
(group_instance_id): it sends no LeaveGroup when it closes. Stops after COUNT records, or
fails when the deadline passes first.

Prints {"client", "version", "records": [record...] (in the order read),
"committed": [{"partition", "offset"}...] (as OffsetFetch reads them back after the run)}.
"""

import kafka
from kafka import KafkaConsumer, TopicPartition

from clientlib import emit, fail, parser, record_json, run, sasl_kafka_python, Deadline

CLIENT = "kafka-python"


def main():
    p = parser(__doc__.splitlines()[0], "consumer")
    p.add_argument("--instance-id")
    p.add_argument("--session-timeout-ms", type=int, default=6000)
    args = p.parse_args()
    if args.count is None:
        fail("--count is required")
    deadline = Deadline(args.timeout)
    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        client_id="nanokafka-test-kafka-python",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=args.session_timeout_ms,
        group_instance_id=args.instance_id,
        heartbeat_interval_ms=1000,
        request_timeout_ms=max(1000, deadline.left_ms()),
        **sasl_kafka_python(args),
    )
    try:
        consumer.subscribe([args.topic])
        records = []
        while len(records) < args.count:
            if deadline.expired():
                fail(f"read {len(records)} of {args.count} records before the timeout")
            polled = consumer.poll(timeout_ms=min(500, deadline.left_ms()), max_records=args.count - len(records))
            batch = [m for messages in polled.values() for m in messages]
            records += [record_json(m.partition, m.offset, m.timestamp, m.key, m.value, m.headers) for m in batch]
            if batch:
                consumer.commit()
        partitions = consumer.partitions_for_topic(args.topic) or set()
        committed = []
        for p in sorted(partitions):
            offset = consumer.committed(TopicPartition(args.topic, p))
            if offset is not None:
                committed.append({"partition": p, "offset": offset})
    finally:
        consumer.close(autocommit=False)
    emit({"client": CLIENT, "version": kafka.__version__, "records": records, "committed": committed})


if __name__ == "__main__":
    run(main)
