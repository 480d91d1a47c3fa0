#!/usr/bin/env python3
"""Produces to a topic whose broker checks values against the schema registry.

    python confluent_validation.py REGISTRY_URL BOOTSTRAP TOPIC [--timeout S]

With confluent-kafka's Producer (acks=all) to TOPIC partition 0, one record at a time (each
flushed before the next, so each is its own batch): a User (name, age) serialized by
AvroSerializer (its schema registered under TOPIC-value on first use), then the raw bytes
b"not avro", then the User again.

Prints {"client", "version", "delivered": [{"error": the KafkaError's name or null,
"offset"}]}, in the order produced.
"""

import argparse

import confluent_kafka
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from clientlib import Deadline, emit, fail, run

CLIENT = "confluent-kafka"

USER = """{"type": "record", "name": "User", "namespace": "test",
  "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}]}"""


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("registry", help="the schema registry's URL")
    p.add_argument("bootstrap", help="host:port of the broker")
    p.add_argument("topic")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds the whole run may take (default 30)")
    args = p.parse_args()
    deadline = Deadline(args.timeout)
    registry = SchemaRegistryClient({"url": args.registry})
    serialize = AvroSerializer(registry, USER)
    context = SerializationContext(args.topic, MessageField.VALUE)
    producer = Producer({"bootstrap.servers": args.bootstrap, "acks": "all",
                         "message.timeout.ms": max(1000, deadline.left_ms())})
    delivered = []

    def report(err, msg):
        delivered.append({"error": err.name() if err else None,
                          "offset": None if err else msg.offset()})

    for value in [serialize({"name": "ab", "age": 21}, context), b"not avro",
                  serialize({"name": "cd", "age": 22}, context)]:
        producer.produce(args.topic, partition=0, value=value, on_delivery=report)
        if producer.flush(deadline.left()):
            fail("a record still undelivered at the timeout")
    emit({"client": CLIENT, "version": confluent_kafka.__version__, "delivered": delivered})


if __name__ == "__main__":
    run(main)
