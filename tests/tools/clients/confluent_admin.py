#!/usr/bin/env python3
"""Topic and group administration with confluent-kafka's AdminClient (librdkafka).

    python confluent_admin.py BOOTSTRAP create-topics NAME[:PARTITIONS] ... [--config KEY=VALUE ...] [--timeout S]
    python confluent_admin.py BOOTSTRAP delete-topics NAME ... [--timeout S]
    python confluent_admin.py BOOTSTRAP list-topics [--timeout S]
    python confluent_admin.py BOOTSTRAP list-groups [--timeout S]
    python confluent_admin.py BOOTSTRAP list-offsets TOPIC:PARTITION [--timeout S]
    python confluent_admin.py BOOTSTRAP delete-records TOPIC:PARTITION:OFFSET ... [--timeout S]
    python confluent_admin.py BOOTSTRAP describe-cluster [--timeout S]
    python confluent_admin.py BOOTSTRAP describe-topics NAME ... [--timeout S]
    python confluent_admin.py BOOTSTRAP delete-groups GROUP ... [--timeout S]
    python confluent_admin.py BOOTSTRAP alter-configs TOPIC --config KEY=VALUE ... [--timeout S]
    python confluent_admin.py BOOTSTRAP commit GROUP TOPIC:PARTITION:OFFSET[:METADATA] ... [--timeout S]
    python confluent_admin.py BOOTSTRAP create-acls ACL ... [--timeout S]
    python confluent_admin.py BOOTSTRAP describe-acls [FILTER] [--timeout S]
    python confluent_admin.py BOOTSTRAP delete-acls FILTER ... [--timeout S]
    python confluent_admin.py BOOTSTRAP alter-scram upsert:USER:MECHANISM:ITERATIONS:PASSWORD | delete:USER:MECHANISM ... [--timeout S]
    python confluent_admin.py BOOTSTRAP describe-scram [USER ...] [--timeout S]

Any command may log in with --sasl-mechanism M --sasl-user U (the password from
$NANOKAFKA_SASL_PASSWORD).

create-topics (CreateTopics) makes each topic with PARTITIONS partitions (default 1),
replication factor 1 and the topic configs given with --config; delete-topics sends DeleteTopics; list-topics reads Metadata for all
topics; list-groups sends ListGroups; list-offsets sends ListOffsets for the partition's
earliest, latest and max-timestamp (KIP-734) offsets, one request each; delete-records sends
DeleteRecords (OFFSET -1: the high watermark); describe-cluster sends DescribeCluster;
describe-topics describes the topics (describe_topics: their ids and partitions);
delete-groups sends DeleteGroups and reports each group's outcome;
alter-configs alters a topic's configs with the legacy, whole-set AlterConfigs as
librdkafka's own tests do (DescribeConfigs, every entry read back sent again, the --config
ones replacing theirs), then describes it again; commit commits the offsets (and metadata)
for GROUP from a consumer that never joins it (librdkafka's test 0099), then reads them back
with committed(). create-acls, describe-acls and delete-acls send CreateAcls, DescribeAcls and
DeleteAcls; an ACL is RESOURCE_TYPE,NAME,PATTERN_TYPE,PRINCIPAL,HOST,OPERATION,PERMISSION in
Kafka's names (TOPIC,orders,LITERAL,User:alice,*,READ,ALLOW), a filter the same with ANY
(MATCH for the pattern type) and `-` for a null name, principal or host (describe-acls without
one: every ACL); alter-scram sends AlterUserScramCredentials (librdkafka salts and hashes
the password) and describe-scram DescribeUserScramCredentials (all users without names). A
request that fails for any topic fails the run, but the ACL and SCRAM commands report each
entry's error.

Prints {"client", "version", "librdkafka", "command", and: "created" | "deleted": [name...];
"topics": [{"name", "partitions"}...] sorted by name; "groups": [{"group_id", "state",
"is_simple"}...] sorted by id; "offsets": {"earliest" | "latest" | "max_timestamp":
{"offset", "timestamp"}}, -1 where the broker answers none; "low_watermarks":
{"TOPIC:PARTITION": offset}; "cluster": {"cluster_id", "controller", "nodes": [{"id",
"host", "port"}...]}; "described": {name: {"topic_id", "partitions", "leaders"}} (the id's 16 bytes
in hex); "configs": {name: value} as described after the alter; "committed":
[{"topic", "partition", "offset", "metadata"}...] as read back; "group_results": {group:
"deleted" | error name}; "acl_results": {ACL: "created" | error name}; "acls": [ACL...]
sorted, or "error": the error name; "deleted_acls": {FILTER: [ACL...] sorted | error name};
"scram_results": {user: "ok" | error name}; "scram_users": {user: {mechanism: iterations} |
error name}}.
"""

import argparse
import warnings

import confluent_kafka
from confluent_kafka import Consumer, TopicCollection, TopicPartition
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                  ConfigResource, NewTopic, OffsetSpec, ResourcePatternType, ResourceType)

from clientlib import emit, fail, run, sasl_librdkafka, Deadline

CLIENT = "confluent-kafka"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("bootstrap", help="host:port of the broker")
    p.add_argument("command", choices=["create-topics", "delete-topics", "list-topics", "list-groups", "list-offsets",
                                              "delete-records", "describe-cluster", "alter-configs", "commit",
                                              "delete-groups", "describe-topics", "create-acls", "describe-acls",
                                              "delete-acls", "alter-scram", "describe-scram"])
    p.add_argument("names", nargs="*", help="topics, as NAME[:PARTITIONS] for create-topics")
    p.add_argument("--config", action="append", default=[], help="KEY=VALUE, a topic config for create-topics")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds the whole run may take (default 30)")
    p.add_argument("--sasl-mechanism")
    p.add_argument("--sasl-user")
    args = p.parse_args()
    if args.command in ("create-topics", "delete-topics", "list-offsets", "delete-records", "alter-configs",
                        "commit", "delete-groups", "describe-topics", "create-acls",
                        "delete-acls") and not args.names:
        fail(f"{args.command} needs at least one topic")
    deadline = Deadline(args.timeout)
    admin = AdminClient({"bootstrap.servers": args.bootstrap, "client.id": "nanokafka-test-confluent",
                         **sasl_librdkafka(args)})
    out = {"client": CLIENT, "version": confluent_kafka.__version__,
           "librdkafka": confluent_kafka.libversion()[0], "command": args.command}
    if args.command == "create-topics":
        topics = []
        for spec in args.names:
            name, _, partitions = spec.partition(":")
            config = dict(c.split("=", 1) for c in args.config)
            topics.append(NewTopic(name, num_partitions=int(partitions or 1), replication_factor=1, config=config))
        futures = admin.create_topics(topics, request_timeout=deadline.left())
        out["created"] = _wait_all(futures, deadline)
    elif args.command == "delete-topics":
        futures = admin.delete_topics(args.names, request_timeout=deadline.left())
        out["deleted"] = _wait_all(futures, deadline)
    elif args.command == "list-topics":
        metadata = admin.list_topics(timeout=deadline.left())
        out["topics"] = sorted(
            ({"name": t.topic, "partitions": len(t.partitions)} for t in metadata.topics.values()),
            key=lambda t: t["name"],
        )
    elif args.command == "delete-records":
        out["low_watermarks"] = _delete_records(admin, args.names, deadline)
    elif args.command == "delete-groups":
        futures = admin.delete_consumer_groups(args.names, request_timeout=deadline.left())
        results = {}
        for group, future in futures.items():
            try:
                future.result(timeout=deadline.left())
                results[group] = "deleted"
            except confluent_kafka.KafkaException as e:
                results[group] = e.args[0].name()
        out["group_results"] = results
    elif args.command == "describe-cluster":
        result = admin.describe_cluster(request_timeout=deadline.left()).result(timeout=deadline.left())
        out["cluster"] = {
            "cluster_id": result.cluster_id,
            "controller": result.controller.id if result.controller else None,
            "nodes": [{"id": n.id, "host": n.host, "port": n.port} for n in result.nodes],
        }
    elif args.command == "describe-topics":
        futures = admin.describe_topics(TopicCollection(args.names), request_timeout=deadline.left())
        out["described"] = {
            name: {
                # The 16 bytes as hex: librdkafka's str() of an id is standard base64, not
                # Kafka's base64url.
                "topic_id": "%016x%016x" % (d.topic_id.get_most_significant_bits() & (2**64 - 1),
                                            d.topic_id.get_least_significant_bits() & (2**64 - 1)),
                "partitions": len(d.partitions),
                "leaders": sorted({p.leader.id for p in d.partitions}),
            }
            for name, d in ((n, f.result(timeout=deadline.left())) for n, f in futures.items())
        }
    elif args.command == "alter-configs":
        out["configs"] = _alter_configs(admin, args.names[0], args.config, deadline)
    elif args.command == "alter-scram":
        out["scram_results"] = _alter_scram(admin, args.names, deadline)
    elif args.command == "describe-scram":
        out["scram_users"] = _describe_scram(admin, args.names, deadline)
    elif args.command == "commit":
        out["committed"] = _commit(args.bootstrap, args.names[0], args.names[1:], deadline)
    elif args.command == "create-acls":
        futures = admin.create_acls([_acl(spec, AclBinding) for spec in args.names],
                                    request_timeout=deadline.left())
        out["acl_results"] = {_spec(b): _outcome(f, deadline, "created") for b, f in futures.items()}
    elif args.command == "describe-acls":
        spec = args.names[0] if args.names else "ANY,-,ANY,-,-,ANY,ANY"
        try:
            found = admin.describe_acls(_acl(spec, AclBindingFilter),
                                        request_timeout=deadline.left()).result(timeout=deadline.left())
            out["acls"] = sorted(_spec(b) for b in found)
        except confluent_kafka.KafkaException as e:
            out["error"] = e.args[0].name()
    elif args.command == "delete-acls":
        filters = [_acl(spec, AclBindingFilter) for spec in args.names]
        futures = admin.delete_acls(filters, request_timeout=deadline.left())
        deleted = {}
        for spec, (f, future) in zip(args.names, futures.items()):
            try:
                deleted[spec] = sorted(_spec(b) for b in future.result(timeout=deadline.left()))
            except confluent_kafka.KafkaException as e:
                deleted[spec] = e.args[0].name()
        out["deleted_acls"] = deleted
    elif args.command == "list-offsets":
        topic, _, partition = args.names[0].rpartition(":")
        out["offsets"] = _list_offsets(admin, TopicPartition(topic, int(partition)), deadline)
    else:
        result = admin.list_consumer_groups(request_timeout=deadline.left()).result(timeout=deadline.left())
        if result.errors:
            fail(f"ListGroups errors: {[str(e) for e in result.errors]}")
        out["groups"] = sorted(
            ({"group_id": g.group_id, "state": g.state.name if g.state else None, "is_simple": g.is_simple_consumer_group}
             for g in result.valid),
            key=lambda g: g["group_id"],
        )
    emit(out)


def _acl(spec, kind):
    """An AclBinding or AclBindingFilter from RESOURCE_TYPE,NAME,PATTERN,PRINCIPAL,HOST,OP,PERM."""
    rtype, name, pattern, principal, host, operation, permission = spec.split(",")
    null = lambda v: None if v == "-" else v  # noqa: E731
    # confluent-kafka names Kafka's CLUSTER resource type BROKER (its code, 4, is the same).
    rtype = "BROKER" if rtype == "CLUSTER" else rtype
    return kind(ResourceType[rtype], null(name), ResourcePatternType[pattern], null(principal), null(host),
                AclOperation[operation], AclPermissionType[permission])


def _spec(b):
    """An ACL as the spec create-acls takes."""
    restype = "CLUSTER" if b.restype.name == "BROKER" else b.restype.name
    return ",".join([restype, b.name, b.resource_pattern_type.name, b.principal, b.host,
                     b.operation.name, b.permission_type.name])


def _outcome(future, deadline, done=None):
    """`done` (or the future's result without one), or the name of the Kafka error it failed
    with."""
    try:
        result = future.result(timeout=deadline.left())
        return result if done is None else done
    except confluent_kafka.KafkaException as e:
        return e.args[0].name()


def _alter_scram(admin, specs, deadline):
    from confluent_kafka.admin import (ScramCredentialInfo, ScramMechanism, UserScramCredentialDeletion,
                                       UserScramCredentialUpsertion)
    mechanism = lambda name: ScramMechanism[name.replace("-", "_")]  # noqa: E731
    alterations = []
    for spec in specs:
        kind, user, rest = spec.split(":", 2)
        if kind == "upsert":
            name, iterations, password = rest.split(":", 2)
            info = ScramCredentialInfo(mechanism(name), int(iterations))
            alterations.append(UserScramCredentialUpsertion(user, info, password.encode()))
        else:
            alterations.append(UserScramCredentialDeletion(user, mechanism(rest)))
    futures = admin.alter_user_scram_credentials(alterations, request_timeout=deadline.left())
    return {user: "ok" if (outcome := _outcome(f, deadline)) is None else outcome for user, f in futures.items()}


def _describe_scram(admin, users, deadline):
    def described(description):
        if isinstance(description, str):
            return description
        return {i.mechanism.name.replace("_", "-"): i.iterations for i in description.scram_credential_infos}
    if not users:
        future = admin.describe_user_scram_credentials(request_timeout=deadline.left())
        return {user: described(d) for user, d in future.result(timeout=deadline.left()).items()}
    futures = admin.describe_user_scram_credentials(users, request_timeout=deadline.left())
    return {user: described(_outcome(f, deadline)) for user, f in futures.items()}


def _list_offsets(admin, partition, deadline):
    """The partition's offset for each spec, one ListOffsets request per spec."""
    specs = {"earliest": OffsetSpec.earliest(), "latest": OffsetSpec.latest(),
             "max_timestamp": OffsetSpec.max_timestamp()}
    offsets = {}
    for name, spec in specs.items():
        futures = admin.list_offsets({partition: spec}, request_timeout=deadline.left())
        try:
            info = futures[partition].result(timeout=deadline.left())
        except Exception as e:  # noqa: BLE001 - reported with the spec it concerns
            fail(f"ListOffsets {name} of {partition.topic}:{partition.partition}: {e}")
        offsets[name] = {"offset": info.offset, "timestamp": info.timestamp}
    return offsets


def _delete_records(admin, specs, deadline):
    """Each TOPIC:PARTITION's low watermark after DeleteRecords below OFFSET."""
    partitions = []
    for spec in specs:
        topic, partition, offset = spec.rsplit(":", 2)
        partitions.append(TopicPartition(topic, int(partition), int(offset)))
    futures = admin.delete_records(partitions, request_timeout=deadline.left())
    lows = {}
    for partition, future in futures.items():
        key = f"{partition.topic}:{partition.partition}"
        try:
            lows[key] = future.result(timeout=deadline.left()).low_watermark
        except Exception as e:  # noqa: BLE001 - reported with the partition it concerns
            fail(f"DeleteRecords {key}: {e}")
    return lows


def _describe(admin, topic, deadline):
    resource = ConfigResource("topic", topic)
    futures = admin.describe_configs([resource], request_timeout=deadline.left())
    try:
        return futures[resource].result(timeout=deadline.left())
    except Exception as e:  # noqa: BLE001 - reported with the topic it concerns
        fail(f"DescribeConfigs {topic}: {e}")


def _alter_configs(admin, topic, configs, deadline):
    """librdkafka's test_AlterConfigs_simple: the described set sent back, changed."""
    changes = dict(c.split("=", 1) for c in configs)
    resource = ConfigResource("topic", topic)
    for name, entry in _describe(admin, topic, deadline).items():
        if name not in changes:
            resource.set_config(name, entry.value)
    for name, value in changes.items():
        resource.set_config(name, value)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the legacy call is the point
        futures = admin.alter_configs([resource], request_timeout=deadline.left())
    try:
        futures[resource].result(timeout=deadline.left())
    except Exception as e:  # noqa: BLE001 - reported with the topic it concerns
        fail(f"AlterConfigs {topic}: {e}")
    return {name: entry.value for name, entry in _describe(admin, topic, deadline).items()}


def _commit(bootstrap, group, specs, deadline):
    """Commits TOPIC:PARTITION:OFFSET[:METADATA] for group, then reads them back."""
    partitions = []
    for spec in specs:
        topic, partition, offset, *metadata = spec.split(":", 3)
        extra = {"metadata": metadata[0]} if metadata else {}
        partitions.append(TopicPartition(topic, int(partition), int(offset), **extra))
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False, "client.id": "nanokafka-test-confluent"})
    try:
        try:
            consumer.commit(offsets=partitions, asynchronous=False)
        except Exception as e:  # noqa: BLE001 - the broker's refusal is the result
            fail(f"commit: {e}")
        asked = [TopicPartition(tp.topic, tp.partition) for tp in partitions]
        read = consumer.committed(asked, timeout=deadline.left())
    finally:
        consumer.close()
    return [{"topic": tp.topic, "partition": tp.partition, "offset": tp.offset, "metadata": tp.metadata}
            for tp in read]


def _wait_all(futures, deadline):
    """Names whose request succeeded, in order; the first failure fails the run."""
    done = []
    for name, future in futures.items():
        try:
            future.result(timeout=deadline.left())
        except Exception as e:  # noqa: BLE001 - reported with the topic it concerns
            fail(f"{name}: {e}")
        done.append(name)
    return sorted(done)


if __name__ == "__main__":
    run(main)
