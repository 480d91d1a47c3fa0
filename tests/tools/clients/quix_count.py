#!/usr/bin/env python3
"""A Quix Streams stateful application: counts the records of each key, its counts kept in a
state store backed by a compacted changelog topic.

    python quix_count.py BOOTSTRAP INPUT OUTPUT GROUP --state-dir DIR --count N [--timeout S]

An `Application` in consumer group GROUP, its local state (RocksDB) under DIR, reads INPUT
from the earliest offset its group has not committed. For each record it adds one to its key's
count in the state (`apply(..., stateful=True)`) and writes {"count": COUNT} under the same key
to OUTPUT (JSON). Quix creates the topics that are missing, among them the changelog topic
of the state store (cleanup.policy=compact, as many partitions as INPUT), and restores any
partition whose local state is missing or behind by reading that changelog from its start.
The app stops after processing N records (`Application.run(count=N)`), commits (input
offsets, changelog, local state) and exits; fewer than N with none for S seconds is a
failure. It commits after every record (`commit_every=1`), so the changelog gets a record for
every count, and most of them are superseded by the next. The session timeout is 6 s, as in
kafka_python_consume.py.

Prints {"client", "version", "librdkafka", "changelog": the changelog topic's name (Quix's
`changelog__GROUP--INPUT--default`, as the broker lists it), "counts": [{"partition", "offset"
(of the input record), "key", "count"}...] in processing order}.
"""

import argparse

import confluent_kafka
import quixstreams
from confluent_kafka.admin import AdminClient
from quixstreams import Application

from clientlib import emit, fail, run

CLIENT = "quixstreams"


def count(value, state):
    """The record's key's count, one more than before (the state is the key's own)."""
    seen = state.get("count", 0) + 1
    state.set("count", seen)
    return {"count": seen}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("bootstrap", help="host:port of the broker")
    p.add_argument("input", help="the topic of keyed records to count")
    p.add_argument("output", help="the topic the counts are written to")
    p.add_argument("group", help="the application's consumer group")
    p.add_argument("--state-dir", required=True, help="where the application keeps its local state")
    p.add_argument("--count", type=int, required=True, help="records to process, then commit and stop")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds with no new record before giving up (default 30)")
    args = p.parse_args()

    app = Application(
        broker_address=args.bootstrap,
        consumer_group=args.group,
        auto_offset_reset="earliest",
        commit_every=1,
        consumer_extra_config={"session.timeout.ms": 6000},
        state_dir=args.state_dir,
        loglevel="WARNING",
        request_timeout=args.timeout,
        topic_create_timeout=args.timeout,
    )
    source = app.topic(args.input, key_deserializer="str", value_deserializer="str")
    sink = app.topic(args.output, key_serializer="str", value_serializer="json")
    sdf = app.dataframe(source)
    sdf = sdf.apply(count, stateful=True)
    sdf.to_topic(sink)
    outputs = app.run(count=args.count, timeout=args.timeout, metadata=True)
    if len(outputs) < args.count:
        fail(f"processed {len(outputs)} of {args.count} records before {args.timeout} s passed without one")
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    prefix = f"changelog__{args.group}--"
    changelogs = [t for t in admin.list_topics(timeout=args.timeout).topics if t.startswith(prefix)]
    if len(changelogs) != 1:
        fail(f"expected one topic named {prefix}..., found {changelogs}")
    counts = [
        {"partition": o["_partition"], "offset": o["_offset"], "key": o["_key"], "count": o["count"]}
        for o in outputs
    ]
    emit({"client": CLIENT, "version": quixstreams.__version__, "librdkafka": confluent_kafka.libversion()[0],
          "changelog": changelogs[0], "counts": counts})


if __name__ == "__main__":
    run(main)
