#!/usr/bin/env python3
"""Produce COUNT generated records (see clientlib.py) with confluent-kafka (librdkafka),
reading the partition and offset of each from its delivery report.

    python confluent_produce.py BOOTSTRAP TOPIC [--count N] [--prefix P] [--partition P]
        [--compression none|gzip|snappy|lz4|zstd] [--acks all|1|0] [--idempotent]
        [--partitioner NAME] [--debug CONTEXTS] [--timestamp-ms MS] [--until-disconnected]
        [--client-id ID] [--pad BYTES] [--timeout S]

librdkafka's default is acks=all without idempotence; --idempotent turns it on (InitProducerId,
then sequenced batches). --partitioner is librdkafka's `partitioner` (consistent_random by
default; murmur2_random is the Java client's). --debug passes librdkafka's `debug` (e.g.
"protocol" logs every request with its API version) to stderr. --timestamp-ms gives every
record that creation time (ms since the epoch) and sends them in one batch (linger.ms
until the flush). --until-disconnected then waits (up to the timeout) until
librdkafka logs a broker connection closed by the broker, and adds "disconnects" (how many it
logged).

--client-id sets `client.id` (quotas key on it); --pad appends BYTES bytes to each value, for
a producer that must send a lot. Every throttle the broker reports (librdkafka's
`throttle_cb`) is listed in "throttles", in milliseconds.

Prints {"client", "version", "librdkafka", "records": [record...], "throttles"} in send order; with
acks=0 the broker sends no reply, so the offsets are -1.
"""

import logging

import confluent_kafka
from confluent_kafka import Producer

from clientlib import emit, fail, fail_on_authentication_error, generated, librdkafka_security, parser, record_json, run, Deadline

CLIENT = "confluent-kafka"


class Disconnects(logging.Handler):
    """Counts librdkafka's log lines for a connection the broker closed (logged since
    `log.connection.close` is on by default; delivered to the logger by `poll`)."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def emit(self, record):
        if "connection closed by peer" in record.getMessage():
            self.count += 1


def main():
    p = parser(__doc__.splitlines()[0], "producer")
    p.add_argument("--acks", default="all", choices=["all", "1", "0"])
    p.add_argument("--idempotent", action="store_true")
    p.add_argument("--partitioner")
    p.add_argument("--debug")
    p.add_argument("--timestamp-ms", type=int)
    p.add_argument("--until-disconnected", action="store_true")
    p.add_argument("--client-id", default="nanokafka-test-confluent")
    p.add_argument("--pad", type=int, default=0)
    args = p.parse_args()
    throttles = []
    deadline = Deadline(args.timeout)
    config = {
        "error_cb": fail_on_authentication_error,
        **librdkafka_security(args),
        "bootstrap.servers": args.bootstrap,
        "client.id": args.client_id,
        "throttle_cb": lambda event: throttles.append(round(event.throttle_time * 1000)),
        "acks": args.acks,
        "enable.idempotence": args.idempotent,
        "compression.type": args.compression,
        "message.timeout.ms": max(1000, deadline.left_ms()),
    }
    if args.partitioner:
        config["partitioner"] = args.partitioner
    if args.timestamp_ms is not None:
        # One batch: only the flush sends it. With a linger of one second, a CI run on a
        # loaded machine once found one record of a 100-record batch written alone, most
        # likely sent when that linger ran out. librdkafka wants message.timeout.ms above
        # linger.ms, and at most 900 s of linger.
        config["message.timeout.ms"] = max(2000, deadline.left_ms())
        config["linger.ms"] = min(config["message.timeout.ms"] - 1000, 900_000)
    if args.debug:
        config["debug"] = args.debug
    disconnects = Disconnects()
    if args.until_disconnected:
        logger = logging.getLogger("librdkafka")
        logger.addHandler(disconnects)
        logger.setLevel(logging.DEBUG)
        config["logger"] = logger
    producer = Producer(config)
    reports = {}

    def delivered(i):
        def report(err, msg):
            reports[i] = (err, msg)
        return report

    sent = []
    for i in range(args.count):
        key, value, headers = generated(args.prefix, i, CLIENT)
        value += b"." * args.pad
        extra = {} if args.partition is None else {"partition": args.partition}
        if args.timestamp_ms is not None:
            extra["timestamp"] = args.timestamp_ms
        producer.produce(args.topic, key=key, value=value, headers=headers, on_delivery=delivered(i), **extra)
        producer.poll(0)
        sent.append((key, value, headers))
    remaining = producer.flush(deadline.left())
    if remaining:
        fail(f"{remaining} records still undelivered at the timeout")
    # A throttle reported with the last response is served by the next poll.
    producer.poll(0)
    records = []
    for i, (key, value, headers) in enumerate(sent):
        err, msg = reports[i]
        if err is not None:
            fail(f"record {i} was not delivered: {err}")
        _, timestamp = msg.timestamp()
        records.append(record_json(msg.partition(), msg.offset(), timestamp, key, value, headers))
    result = {"client": CLIENT, "version": confluent_kafka.__version__, "librdkafka": confluent_kafka.libversion()[0], "records": records, "throttles": throttles}
    if args.until_disconnected:
        while disconnects.count == 0 and deadline.left() > 0:
            producer.poll(0.1)
        result["disconnects"] = disconnects.count
    emit(result)


if __name__ == "__main__":
    run(main)
