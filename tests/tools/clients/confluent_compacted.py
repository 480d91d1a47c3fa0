#!/usr/bin/env python3
"""A compacted topic through confluent-kafka (librdkafka): create it, read its configs back,
produce a record without a key, then keyed records and a tombstone, and read the topic.

    python confluent_compacted.py BOOTSTRAP TOPIC [--timeout S]

Creates TOPIC (one partition) with cleanup.policy=compact (CreateTopics); reads its configs
(DescribeConfigs); produces one record with a value and no key, and reports its delivery
error; produces record "k"="v1", then the tombstone "k"=null, and reports their offsets;
then reads the partition from offset 0 (assigned, no group commits) until it has read the
two records or the timeout passes.

Prints {"client", "version", "librdkafka", "configs": {name: value} (every config DescribeConfigs
reports), "keyless": {"code", "name", "reason"} (null when it was delivered), "keyed":
[record...], "read": [record...]} (records as clientlib.py describes).
"""

import argparse

import confluent_kafka
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from clientlib import emit, fail, record_json, run, Deadline

CLIENT = "confluent-kafka"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("bootstrap", help="host:port of the broker")
    p.add_argument("topic")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds the whole run may take (default 30)")
    args = p.parse_args()
    deadline = Deadline(args.timeout)
    common = {"bootstrap.servers": args.bootstrap, "client.id": "nanokafka-test-confluent"}
    admin = AdminClient(common)
    new = NewTopic(args.topic, num_partitions=1, replication_factor=1, config={"cleanup.policy": "compact"})
    admin.create_topics([new], request_timeout=deadline.left())[args.topic].result(timeout=deadline.left())
    resource = ConfigResource(ResourceType.TOPIC, args.topic)
    described = admin.describe_configs([resource], request_timeout=deadline.left())[resource]
    configs = {name: entry.value for name, entry in described.result(timeout=deadline.left()).items()}

    producer = Producer({**common, "acks": "all", "message.timeout.ms": max(1000, deadline.left_ms())})
    reports = []

    def report(err, msg):
        reports.append((err, msg))

    producer.produce(args.topic, value=b"no key", partition=0, on_delivery=report)
    _flush(producer, deadline)
    err, _ = reports.pop()
    keyless = None if err is None else {"code": err.code(), "name": err.name(), "reason": err.str()}
    sent = [(b"k", b"v1"), (b"k", None)]
    for key, value in sent:
        producer.produce(args.topic, key=key, value=value, partition=0, on_delivery=report)
    _flush(producer, deadline)
    keyed = []
    for err, msg in reports:
        if err is not None:
            fail(f"a keyed record was not delivered: {err}")
        keyed.append(record_json(msg.partition(), msg.offset(), msg.timestamp()[1], msg.key(), msg.value(), msg.headers()))

    consumer = Consumer({**common, "group.id": "nanokafka-test-compacted", "enable.auto.commit": False})
    consumer.assign([TopicPartition(args.topic, 0, 0)])
    read = []
    while len(read) < len(sent) and not deadline.expired():
        msg = consumer.poll(min(1.0, deadline.left()))
        if msg is None:
            continue
        if msg.error():
            fail(f"fetch: {msg.error()}")
        read.append(record_json(msg.partition(), msg.offset(), msg.timestamp()[1], msg.key(), msg.value(), msg.headers()))
    consumer.close()
    emit({"client": CLIENT, "version": confluent_kafka.__version__, "librdkafka": confluent_kafka.libversion()[0],
          "configs": configs, "keyless": keyless, "keyed": keyed, "read": read})


def _flush(producer, deadline):
    if producer.flush(deadline.left()):
        fail("records still undelivered at the timeout")


if __name__ == "__main__":
    run(main)
