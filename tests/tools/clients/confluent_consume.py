#!/usr/bin/env python3
"""Consume TOPIC as one member of GROUP with confluent-kafka (librdkafka), committing by hand;
run several at once to have a group of several members.

    python confluent_consume.py BOOTSTRAP TOPIC GROUP [--count N] [--until-stdin-closes]
        [--idle S] [--strategy range|roundrobin|cooperative-sticky] [--debug CONTEXTS]
        [--group-protocol classic|consumer [--remote-assignor uniform|range]]
        [--slow-partition P --slow-seconds S] [--instance-id ID] [--session-timeout-ms MS]
        [--timeout S]

Stops at the first of: COUNT records read by this member; standard input closed (with
--until-stdin-closes: how a test stops a member of a group at a moment of its choosing, with
the member still leaving the group cleanly); --idle S seconds without a record once the member
has an assignment; the timeout, which is a failure unless --until-stdin-closes or --idle was
given (a member of a group may legitimately get nothing). At least one condition other than the
timeout is required.

--slow-partition P makes the member slow on partition P: each of its records takes
--slow-seconds S to process (a blocking wait after the record's event is printed, in the thread
that serves the client's rebalance callbacks, as a slow application's would be).

--group-protocol consumer joins with the KIP-848 consumer group protocol (ConsumerGroupHeartbeat;
the broker assigns, with --remote-assignor if given; the session timeout and heartbeat interval
are the broker's). A fatal client error (such as a group of the other protocol) fails the run
at once, naming it.

Auto-commit is off: after each batch of records is collected its offsets are committed
synchronously (OffsetCommit). A group without committed offsets starts at the earliest offset.
The session timeout is 6 s (classic protocol), as in kafka_python_consume.py, unless
--session-timeout-ms. --instance-id makes the member static (group.instance.id): closing it
sends no LeaveGroup, and a member started again with the same id within the session timeout
takes its place.

Stdout is JSON lines, flushed one at a time, so a test can follow the member while it runs:
    {"event": "assigned" | "revoked", "partitions": [p...]}  at each rebalance (incremental
        with the cooperative-sticky strategy: only the partitions gained or lost)
    {"event": "record", ...record}                           for each record read
and last {"event": "done", "client", "version", "librdkafka", "assignment": [p...] (when it
stopped), "records": [record...], "committed": [{"partition", "offset"}...] (read back with
OffsetFetch for every partition the member ever had)}.
"""

import sys
import threading
import time

import confluent_kafka
from confluent_kafka import Consumer, KafkaException, TopicPartition

from clientlib import emit, fail, fail_on_authentication_error, librdkafka_security, parser, record_json, run, Deadline

CLIENT = "confluent-kafka"


def main():
    p = parser(__doc__.splitlines()[0], "consumer")
    p.add_argument("--until-stdin-closes", action="store_true")
    p.add_argument("--idle", type=float)
    p.add_argument("--strategy")
    p.add_argument("--debug")
    p.add_argument("--group-protocol", default="classic")
    p.add_argument("--remote-assignor")
    p.add_argument("--slow-partition", type=int)
    p.add_argument("--slow-seconds", type=float, default=0.0)
    p.add_argument("--instance-id")
    p.add_argument("--session-timeout-ms", type=int, default=6000)
    args = p.parse_args()
    if args.count is None and not args.until_stdin_closes and args.idle is None:
        fail("give --count, --until-stdin-closes or --idle")
    deadline = Deadline(args.timeout)
    config = {
        **librdkafka_security(args),
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "client.id": "nanokafka-test-confluent",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "group.protocol": args.group_protocol,
    }
    if args.group_protocol == "classic":
        config["session.timeout.ms"] = args.session_timeout_ms
        config["heartbeat.interval.ms"] = 1000
    if args.remote_assignor:
        config["group.remote.assignor"] = args.remote_assignor
    if args.strategy:
        config["partition.assignment.strategy"] = args.strategy
    if args.debug:
        config["debug"] = args.debug
    if args.instance_id:
        config["group.instance.id"] = args.instance_id

    stdin_closed = threading.Event()
    if args.until_stdin_closes:
        def watch_stdin():
            sys.stdin.buffer.read()
            stdin_closed.set()
        threading.Thread(target=watch_stdin, daemon=True).start()

    assignment = set()
    ever = set()
    errors = []

    def on_assign(consumer, partitions):
        gained = sorted(tp.partition for tp in partitions)
        assignment.update(gained)
        ever.update(gained)
        emit({"event": "assigned", "partitions": gained})

    def on_revoke(consumer, partitions):
        lost = sorted(tp.partition for tp in partitions)
        assignment.difference_update(lost)
        emit({"event": "revoked", "partitions": lost})

    def on_error(err):
        errors.append(str(err))
        fail_on_authentication_error(err)
        if err.fatal():
            fail(f"fatal error: {err.name()}: {err.str()}")

    config["error_cb"] = on_error
    consumer = Consumer(config)
    records = []
    try:
        consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke)
        idle_since = None
        while True:
            if args.count is not None and len(records) >= args.count:
                break
            if stdin_closed.is_set():
                break
            if deadline.expired():
                if args.until_stdin_closes or args.idle is not None:
                    break
                fail(f"read {len(records)} of {args.count} records before the timeout; errors: {errors}")
            want = 100 if args.count is None else args.count - len(records)
            batch = consumer.consume(num_messages=want, timeout=min(0.2, deadline.left()))
            batch = [m for m in batch if _check(m)]
            for m in batch:
                _, timestamp = m.timestamp()
                record = record_json(m.partition(), m.offset(), timestamp, m.key(), m.value(), m.headers())
                records.append(record)
                emit({"event": "record", **record})
                if m.partition() == args.slow_partition:
                    time.sleep(args.slow_seconds)
            if batch:
                consumer.commit(asynchronous=False)
                idle_since = None
            elif assignment and args.idle is not None:
                idle_since = idle_since or deadline.left()
                if idle_since - deadline.left() >= args.idle:
                    break
        committed = []
        if ever:
            asked = [TopicPartition(args.topic, p) for p in sorted(ever)]
            for tp in consumer.committed(asked, timeout=max(1.0, deadline.left())):
                if tp.offset >= 0:
                    committed.append({"partition": tp.partition, "offset": tp.offset})
        final = sorted(assignment)
    finally:
        consumer.close()
    emit({"event": "done", "client": CLIENT, "version": confluent_kafka.__version__,
          "librdkafka": confluent_kafka.libversion()[0], "assignment": final,
          "records": records, "committed": committed})


def _check(message):
    """Records pass; partition EOF events are skipped; any other error fails the run."""
    err = message.error()
    if err is None:
        return True
    if err.code() == confluent_kafka.KafkaError._PARTITION_EOF:
        return False
    raise KafkaException(err)


if __name__ == "__main__":
    run(main)
