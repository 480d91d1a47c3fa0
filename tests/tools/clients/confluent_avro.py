#!/usr/bin/env python3
"""Avro records through confluent-kafka's Schema Registry client and serializers.

    python confluent_avro.py REGISTRY_URL BOOTSTRAP TOPIC [--timeout S]

With SchemaRegistryClient on REGISTRY_URL: produces three User records (name, age) to TOPIC
(partition 0) with AvroSerializer (its schema registered under the subject TOPIC-value on
first use), then one record of a second version of the schema (an "email" field with a
default), registered explicitly; reads the partition from offset 0 with AvroDeserializer;
then asks to register a schema that BACKWARD refuses (a field without a default) and reports
the refusal.

Prints {"client", "version", "ids": [the two schema ids], "read": [{"offset", "value"}],
"refused": {"status", "code", "message"} (null if it was registered), "subjects": [...],
"versions": [...]}.
"""

import argparse

import confluent_kafka
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from clientlib import Deadline, emit, fail, run

CLIENT = "confluent-kafka"

V1 = """{"type": "record", "name": "User", "namespace": "test",
  "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}]}"""
V2 = """{"type": "record", "name": "User", "namespace": "test",
  "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"},
             {"name": "email", "type": "string", "default": ""}]}"""
REFUSED = """{"type": "record", "name": "User", "namespace": "test",
  "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"},
             {"name": "phone", "type": "string"}]}"""


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("registry", help="the schema registry's URL")
    p.add_argument("bootstrap", help="host:port of the broker")
    p.add_argument("topic")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds the whole run may take (default 30)")
    args = p.parse_args()
    deadline = Deadline(args.timeout)
    registry = SchemaRegistryClient({"url": args.registry})
    subject = f"{args.topic}-value"
    value_context = SerializationContext(args.topic, MessageField.VALUE)

    producer = Producer({"bootstrap.servers": args.bootstrap, "acks": "all",
                         "message.timeout.ms": max(1000, deadline.left_ms())})
    v1 = AvroSerializer(registry, V1)
    for i in range(3):
        producer.produce(args.topic, partition=0, value=v1({"name": f"user-{i}", "age": 20 + i}, value_context))
    registered = registry.register_schema(subject, Schema(V2, "AVRO"))
    v2 = AvroSerializer(registry, V2, conf={"auto.register.schemas": False, "use.latest.version": True})
    producer.produce(args.topic, partition=0,
                     value=v2({"name": "user-3", "age": 23, "email": "u3@example.com"}, value_context))
    if producer.flush(deadline.left()):
        fail("records still undelivered at the timeout")
    first = registry.lookup_schema(subject, Schema(V1, "AVRO"))

    deserialize = AvroDeserializer(registry)
    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": "nanokafka-test-avro",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(args.topic, 0, 0)])
    read = []
    while len(read) < 4 and not deadline.expired():
        msg = consumer.poll(min(1.0, deadline.left()))
        if msg is None:
            continue
        if msg.error():
            fail(f"fetch: {msg.error()}")
        read.append({"offset": msg.offset(), "value": deserialize(msg.value(), value_context)})
    consumer.close()

    try:
        registry.register_schema(subject, Schema(REFUSED, "AVRO"))
        refused = None
    except SchemaRegistryError as e:
        refused = {"status": e.http_status_code, "code": e.error_code, "message": e.error_message}

    emit({"client": CLIENT, "version": confluent_kafka.__version__, "ids": [first.schema_id, registered],
          "read": read, "refused": refused, "subjects": registry.get_subjects(),
          "versions": registry.get_versions(subject)})


if __name__ == "__main__":
    run(main)
