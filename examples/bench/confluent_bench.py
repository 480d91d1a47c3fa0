"""confluent-kafka (librdkafka) load for examples/bench: run by the bench, one role per run.

    confluent_bench.py BOOTSTRAP TOPIC produce --count N [--create]
    confluent_bench.py BOOTSTRAP TOPIC consume --count N [--group G] [--budget S]
    confluent_bench.py BOOTSTRAP TOPIC latency --rate R --seconds S [--create]

Prints one JSON object on the last line of stdout and exits 0, or exits 1 with one line on
stderr. Every wait is bounded by --timeout (default 120 s).

- produce: N keyless 100-byte values to partition 0, acks=all, librdkafka's batching defaults
  (linger.ms 5, batch.size 1 MB), a delivery report per record; the clock runs from the first
  produce() to the end of flush(), after a metadata request has opened the connection.
  {"records", "seconds", "failed"}.
- consume: partition 0 from its first offset, `consume(num_messages=10000)` in a loop, until N
  records or --budget seconds (default 10) of reading. Without --group: assign() (no group
  traffic; auto-commit off). With --group: subscribe() as the one member of a fresh group
  (session.timeout.ms 6 s). fetch.queue.backoff.ms is 10 ms, not 1 s (see consume()). The
  clock starts when the first batch is handed over and that batch is not counted; the time
  to it (connection, join, first fetch) is reported apart.
  {"records" (counted), "seconds", "join_seconds"}.
- latency: a producer thread sends R records a second (linger.ms 0, so the client sends each
  at once) whose first 8 bytes are time.monotonic_ns(); the main thread consumes with assign()
  and a long-poll fetch (fetch.wait.max.ms 100, fetch.min.bytes 1: the broker answers as soon
  as a record arrives) and records, per record, now - stamp. A first record, sent and read
  back before the clock starts, proves the consumer is fetching. {"samples", "p50_us",
  "p99_us", "p999_us", "max_us"}.

--create first creates TOPIC with one partition through the AdminClient (for a broker that
does not create topics on demand); an existing topic is fine.
"""

import argparse
import json
import struct
import sys
import threading
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

VALUE_LEN = 100
BATCH = 10_000


def fail(message):
    sys.stderr.write(f"{sys.argv[0]}: {message}\n")
    sys.exit(1)


def emit(doc):
    sys.stdout.write(json.dumps(doc, sort_keys=True) + "\n")
    sys.stdout.flush()


class Deadline:
    def __init__(self, seconds):
        self.end = time.monotonic() + seconds

    def left(self):
        return max(0.0, self.end - time.monotonic())


def create(bootstrap, topic, deadline):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    try:
        futures[topic].result(timeout=deadline.left())
    except KafkaException as e:
        if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise


def producer(bootstrap, extra):
    config = {"bootstrap.servers": bootstrap, "acks": "all"}
    config.update(extra)
    return Producer(config)


def produce(args, deadline):
    p = producer(args.bootstrap, {})
    p.list_topics(args.topic, timeout=deadline.left())
    value = b"\xa5" * VALUE_LEN
    failed = []

    def report(err, _msg):
        if err is not None:
            failed.append(err)

    start = time.perf_counter()
    for i in range(args.count):
        while True:
            try:
                p.produce(args.topic, value, partition=0, on_delivery=report)
                break
            except BufferError:
                # The client's queue is full (100,000 records): serve delivery reports.
                p.poll(0.01)
                if deadline.left() == 0:
                    fail("timed out producing")
        if i % 1000 == 0:
            p.poll(0)
    left = p.flush(deadline.left())
    seconds = time.perf_counter() - start
    if left:
        fail(f"{left} records undelivered at the timeout")
    if failed:
        fail(f"{len(failed)} records failed, the first: {failed[0]}")
    emit({"records": args.count, "seconds": seconds, "failed": 0})


def consumer(bootstrap, group, extra):
    config = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }
    config.update(extra)
    return Consumer(config)


def consume(args, deadline):
    started = time.perf_counter()
    # librdkafka stops fetching while it holds queued.min.messages (100,000) that the
    # application has not taken, and looks again only after fetch.queue.backoff.ms (default
    # 1 s). A broker that fetches faster than this loop consumes fills that queue within a
    # second, and the default then idles the client for most of every second; 10 ms lets it
    # fetch again as soon as the loop has made room.
    tuned = {"fetch.queue.backoff.ms": 10}
    if args.group:
        # tansu holds a first JoinGroup for half the session timeout: Kafka's smallest allowed
        # (6 s) rather than librdkafka's 45 s default, for both brokers alike.
        c = consumer(args.bootstrap, args.group, dict(tuned, **{"session.timeout.ms": 6000}))
        c.subscribe([args.topic])
    else:
        # assign() never talks to a group coordinator; the group id is only the client's
        # required setting.
        c = consumer(args.bootstrap, "bench-assign", tuned)
        c.assign([TopicPartition(args.topic, 0, OFFSET_BEGINNING)])
    # The clock starts when the first batch is handed over, and that batch is not counted:
    # what is measured is the steady stream, not the connection, the join or the first fetch.
    records = 0
    first = None
    counted = 0
    while records < args.count and deadline.left() > 0:
        if first is not None and time.perf_counter() - first >= args.budget:
            break
        # Never ask for more than is left: consume() waits for its count or its timeout.
        want = min(BATCH, args.count - records)
        batch = c.consume(num_messages=want, timeout=min(1.0, deadline.left()))
        for m in batch:
            if m.error() is not None:
                fail(f"consume: {m.error()}")
        records += len(batch)
        if first is None and batch:
            first = time.perf_counter()
        elif batch:
            counted += len(batch)
    end = time.perf_counter()
    c.close()
    if first is None:
        fail("no record consumed before the timeout")
    emit({
        "records": counted,
        "seconds": end - first,
        "join_seconds": first - started,
    })


def percentile(sorted_values, q):
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def latency(args, deadline):
    p = producer(args.bootstrap, {"linger.ms": 0})
    c = consumer(args.bootstrap, "bench-latency", {"fetch.wait.max.ms": 100, "fetch.min.bytes": 1})
    c.assign([TopicPartition(args.topic, 0, OFFSET_BEGINNING)])
    pad = b"\x00" * (VALUE_LEN - 8)

    def send():
        p.produce(args.topic, struct.pack("<q", time.monotonic_ns()) + pad, partition=0)
        p.poll(0)

    # Warm up: one record through, so the consumer is fetching before the clock starts.
    send()
    warm = None
    while warm is None and deadline.left() > 0:
        warm = c.poll(min(1.0, deadline.left()))
    if warm is None or warm.error() is not None:
        fail("the warm-up record never came back")
    total = int(args.rate * args.seconds)
    interval = 1e9 / args.rate

    def paced():
        start = time.monotonic_ns()
        for i in range(total):
            due = start + int(i * interval)
            wait = due - time.monotonic_ns()
            if wait > 0:
                time.sleep(wait / 1e9)
            send()
        p.flush(deadline.left())

    sender = threading.Thread(target=paced)
    sender.start()
    samples = []
    while len(samples) < total and deadline.left() > 0:
        # poll(), not consume(num_messages=...): the latter waits for its count or timeout.
        m = c.poll(0.1)
        now = time.monotonic_ns()
        if m is None:
            continue
        if m.error() is not None:
            fail(f"consume: {m.error()}")
        (stamp,) = struct.unpack_from("<q", m.value())
        samples.append(now - stamp)
    sender.join()
    c.close()
    if len(samples) < total:
        fail(f"{len(samples)} of {total} records came back before the timeout")
    samples.sort()
    us = lambda ns: ns / 1e3  # noqa: E731
    emit({
        "samples": len(samples),
        "p50_us": us(percentile(samples, 0.50)),
        "p99_us": us(percentile(samples, 0.99)),
        "p999_us": us(percentile(samples, 0.999)),
        "max_us": us(samples[-1]),
    })


def main():
    a = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    a.add_argument("bootstrap")
    a.add_argument("topic")
    a.add_argument("role", choices=["produce", "consume", "latency"])
    a.add_argument("--count", type=int, default=1_000_000)
    a.add_argument("--group")
    a.add_argument("--budget", type=float, default=10.0)
    a.add_argument("--rate", type=float, default=2000.0)
    a.add_argument("--seconds", type=float, default=5.0)
    a.add_argument("--create", action="store_true")
    a.add_argument("--timeout", type=float, default=120.0)
    args = a.parse_args()
    deadline = Deadline(args.timeout)
    if args.create:
        create(args.bootstrap, args.topic, deadline)
    {"produce": produce, "consume": consume, "latency": latency}[args.role](args, deadline)


if __name__ == "__main__":
    try:
        main()
    except SystemExit:
        raise
    except BaseException as e:  # noqa: BLE001 - report whatever went wrong, in one line
        fail(f"{type(e).__name__}: {e}")
