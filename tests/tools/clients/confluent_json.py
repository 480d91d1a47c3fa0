#!/usr/bin/env python3
"""JSON Schema records through confluent-kafka's Schema Registry client and serializers.

    python confluent_json.py REGISTRY_URL BOOTSTRAP TOPIC [--timeout S]

With SchemaRegistryClient on REGISTRY_URL: produces three Order records (id, item) to TOPIC
(partition 0) with JSONSerializer (its schema, a closed content model, registered under the
subject TOPIC-value on first use), then one record of a second version of the schema (an
optional "note" property), registered explicitly; reads the partition from offset 0 with
JSONDeserializer (which fetches each record's schema by id and validates the record); then
asks to register a schema that BACKWARD refuses (the closed model drops "item") and reports
the refusal.

Prints {"client", "version", "ids": [the two schema ids], "read": [{"offset", "value"}],
"refused": {"status", "code", "message"} (null if it was registered), "subjects": [...],
"versions": [...], "schema_type": the latest version's type}.
"""

import argparse
import json

import confluent_kafka
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from clientlib import Deadline, emit, fail, run

CLIENT = "confluent-kafka"


def order_schema(properties, required):
    return json.dumps({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Order",
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }, indent=2)


ID = {"type": "integer"}
ITEM = {"type": "string", "maxLength": 40}
NOTE = {"type": "string"}
V1 = order_schema({"id": ID, "item": ITEM}, ["id", "item"])
V2 = order_schema({"id": ID, "item": ITEM, "note": NOTE}, ["id", "item"])
REFUSED = order_schema({"id": ID, "note": NOTE}, ["id"])


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
    v1 = JSONSerializer(V1, registry)
    for i in range(3):
        producer.produce(args.topic, partition=0, value=v1({"id": i, "item": f"item-{i}"}, value_context))
    registered = registry.register_schema(subject, Schema(V2, "JSON"))
    v2 = JSONSerializer(V2, registry, conf={"auto.register.schemas": False, "use.latest.version": True})
    producer.produce(args.topic, partition=0,
                     value=v2({"id": 3, "item": "item-3", "note": "gift"}, value_context))
    if producer.flush(deadline.left()):
        fail("records still undelivered at the timeout")
    first = registry.lookup_schema(subject, Schema(V1, "JSON"))

    deserialize = JSONDeserializer(None, schema_registry_client=registry)
    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": "nanokafka-test-json",
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
        registry.register_schema(subject, Schema(REFUSED, "JSON"))
        refused = None
    except SchemaRegistryError as e:
        refused = {"status": e.http_status_code, "code": e.error_code, "message": e.error_message}

    emit({"client": CLIENT, "version": confluent_kafka.__version__, "ids": [first.schema_id, registered],
          "read": read, "refused": refused, "subjects": registry.get_subjects(),
          "versions": registry.get_versions(subject),
          "schema_type": registry.get_latest_version(subject).schema.schema_type})


if __name__ == "__main__":
    run(main)
