#!/usr/bin/env python3
"""Orders in Confluent's Avro wire format, read from and written for another client.

    python confluent_avro_orders.py REGISTRY_URL BOOTSTRAP TOPIC SCHEMA_FILE --count N [--timeout S]

Reads the N records at offsets 0..N of TOPIC's partition 0 with AvroDeserializer (the writer
schema taken from REGISTRY_URL by each value's id), then produces three orders to partition 0
with AvroSerializer: two with the schema in SCHEMA_FILE (an .avsc; the serializer registers it
under TOPIC-value, or finds it there), and one with that schema plus a "coupon" field with a
default (a second version, which BACKWARD accepts), registered explicitly. Order i is
{"id": 100 + i, "customer": "py-i", "total_cents": 500 * i, "note": null, or "coupon" for the
third} and the third has "coupon": "SAVE5".

Prints {"client", "version", "read": [{"offset", "value"}], "produced": [offsets],
"ids": [the two schemas' ids]}.
"""

import argparse
import json

import confluent_kafka
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from clientlib import Deadline, emit, fail, run

CLIENT = "confluent-kafka"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("registry", help="the schema registry's URL")
    p.add_argument("bootstrap", help="host:port of the broker")
    p.add_argument("topic")
    p.add_argument("schema_file", help="the orders' Avro schema (.avsc)")
    p.add_argument("--count", type=int, required=True, help="records to read first")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds the whole run may take (default 30)")
    args = p.parse_args()
    deadline = Deadline(args.timeout)
    registry = SchemaRegistryClient({"url": args.registry})
    context = SerializationContext(args.topic, MessageField.VALUE)
    with open(args.schema_file) as f:
        v1 = f.read()
    v2_doc = json.loads(v1)
    v2_doc["fields"].append({"name": "coupon", "type": "string", "default": ""})
    v2 = json.dumps(v2_doc)

    deserialize = AvroDeserializer(registry)
    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": "nanokafka-test-orders",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(args.topic, 0, 0)])
    read = []
    while len(read) < args.count and not deadline.expired():
        msg = consumer.poll(min(1.0, deadline.left()))
        if msg is None:
            continue
        if msg.error():
            fail(f"fetch: {msg.error()}")
        read.append({"offset": msg.offset(), "value": deserialize(msg.value(), context)})
    consumer.close()
    if len(read) < args.count:
        fail(f"read {len(read)} of {args.count} records by the timeout")

    produced = []

    def delivered(err, msg):
        if err is not None:
            fail(f"delivery: {err}")
        produced.append(msg.offset())

    producer = Producer({"bootstrap.servers": args.bootstrap, "acks": "all",
                         "message.timeout.ms": max(1000, deadline.left_ms())})
    serialize_v1 = AvroSerializer(registry, v1)
    for i in range(2):
        order = {"id": 100 + i, "customer": f"py-{i}", "total_cents": 500 * i, "note": None}
        producer.produce(args.topic, partition=0, value=serialize_v1(order, context), on_delivery=delivered)
    v2_id = registry.register_schema(f"{args.topic}-value", Schema(v2, "AVRO"))
    serialize_v2 = AvroSerializer(registry, v2, conf={"auto.register.schemas": False, "use.latest.version": True})
    order = {"id": 102, "customer": "py-2", "total_cents": 1000, "note": "coupon", "coupon": "SAVE5"}
    producer.produce(args.topic, partition=0, value=serialize_v2(order, context), on_delivery=delivered)
    if producer.flush(deadline.left()):
        fail("records still undelivered at the timeout")
    v1_id = registry.lookup_schema(f"{args.topic}-value", Schema(v1, "AVRO")).schema_id

    emit({"client": CLIENT, "version": confluent_kafka.__version__, "read": read,
          "produced": sorted(produced), "ids": [v1_id, v2_id]})


if __name__ == "__main__":
    run(main)
