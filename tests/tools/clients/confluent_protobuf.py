#!/usr/bin/env python3
"""Protobuf records through confluent-kafka's Schema Registry client and serializers.

    python confluent_protobuf.py REGISTRY_URL BOOTSTRAP TOPIC [--timeout S]

Builds two .proto files at run time (no protoc): address.proto (package geo, message Address)
and user.proto (package shop, message User {name, age, home: geo.Address}, importing
address.proto). With SchemaRegistryClient on REGISTRY_URL: produces three User records to
TOPIC (partition 0) with ProtobufSerializer, which registers address.proto under the subject
"address.proto" and user.proto, referring to it, under TOPIC-value; reads the partition from
offset 0 with ProtobufDeserializer (which fetches the writer's schema and its reference as
serialized descriptors); then asks to register, as .proto text, a User whose field 2 is a
string, which BACKWARD refuses, and reports the refusal.

Prints {"client", "version", "id", "read": [{"offset", "value"}], "refused": {"status",
"code", "message"} (null if it was registered), "subjects": [...], "versions": [...],
"schemas": {"address.proto": text, "user": text} (as registered)}.
"""

import argparse

import confluent_kafka
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory

from clientlib import Deadline, emit, fail, run

CLIENT = "confluent-kafka"

FIELD = descriptor_pb2.FieldDescriptorProto

REFUSED = """syntax = "proto3";
package shop;
import "address.proto";
message User {
  string name = 1;
  string age = 2;
  geo.Address home = 3;
}
"""


def proto_file(name, package, message, fields, dependencies=()):
    """A proto3 FileDescriptorProto with one message; fields are (name, number, type, type_name)."""
    file = descriptor_pb2.FileDescriptorProto(name=name, package=package, syntax="proto3",
                                              dependency=list(dependencies))
    msg = file.message_type.add(name=message)
    for field_name, number, field_type, type_name in fields:
        msg.field.add(name=field_name, number=number, type=field_type, type_name=type_name,
                      label=FIELD.LABEL_OPTIONAL)
    return file


def user_class():
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto_file("address.proto", "geo", "Address", [("city", 1, FIELD.TYPE_STRING, None)]))
    pool.Add(proto_file("user.proto", "shop", "User", [
        ("name", 1, FIELD.TYPE_STRING, None),
        ("age", 2, FIELD.TYPE_INT32, None),
        ("home", 3, FIELD.TYPE_MESSAGE, ".geo.Address"),
    ], dependencies=["address.proto"]))
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.User"))


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
    User = user_class()

    producer = Producer({"bootstrap.servers": args.bootstrap, "acks": "all",
                         "message.timeout.ms": max(1000, deadline.left_ms())})
    serialize = ProtobufSerializer(User, registry)
    for i in range(3):
        user = User(name=f"user-{i}", age=20 + i)
        user.home.city = f"city-{i}"
        producer.produce(args.topic, partition=0, value=serialize(user, value_context))
    if producer.flush(deadline.left()):
        fail("records still undelivered at the timeout")

    deserialize = ProtobufDeserializer(User, {}, registry)
    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": "nanokafka-test-protobuf",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(args.topic, 0, 0)])
    read = []
    while len(read) < 3 and not deadline.expired():
        msg = consumer.poll(min(1.0, deadline.left()))
        if msg is None:
            continue
        if msg.error():
            fail(f"fetch: {msg.error()}")
        value = deserialize(msg.value(), value_context)
        read.append({"offset": msg.offset(), "value": json_format.MessageToDict(value)})
    consumer.close()

    latest = registry.get_latest_version(subject)
    address = registry.get_latest_version("address.proto")
    reference = SchemaReference("address.proto", "address.proto", address.version)
    try:
        registry.register_schema(subject, Schema(REFUSED, "PROTOBUF", [reference]))
        refused = None
    except SchemaRegistryError as e:
        refused = {"status": e.http_status_code, "code": e.error_code, "message": e.error_message}

    emit({"client": CLIENT, "version": confluent_kafka.__version__, "id": latest.schema_id,
          "read": read, "refused": refused, "subjects": registry.get_subjects(),
          "versions": registry.get_versions(subject),
          "schemas": {"address.proto": address.schema.schema_str, "user": latest.schema.schema_str}})


if __name__ == "__main__":
    run(main)
