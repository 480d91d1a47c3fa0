//! kafkajs against the listener: its producer, plain and idempotent; `consumer.run` in a
//! group.

use crate::clients::{self, Client};
use crate::common::{
    args, assert_read_back_natively, next_offsets, script_commits, script_records, Broker, RUN,
};

fn producer() -> Option<Client> {
    clients::node("kafkajs_produce.js")
}

#[test]
fn producer_plain_and_idempotent_read_back_natively() {
    let Some(produce) = producer() else { return };
    let b = Broker::start();
    for (topic, extra) in [
        ("kj", &["--compression", "gzip"][..]),
        ("kjidem", &["--idempotent"][..]),
    ] {
        b.create(topic, 3);
        let mut more = vec!["--count", "30"];
        more.extend_from_slice(extra);
        let produced = produce.run_json(&args(&b.bootstrap, topic, &more), RUN);
        assert_read_back_natively(&b, topic, &produced, "r");
    }
}

/// `consumer.run` in a group, read_committed (kafkajs's default), committing each message.
#[test]
fn run_consumer_in_a_group_reads_committed_and_commits() {
    let (Some(produce), Some(consume)) = (producer(), clients::node("kafkajs_consume.js")) else {
        return;
    };
    let b = Broker::start();
    b.create("kjg", 3);
    let produced = produce.run_json(&args(&b.bootstrap, "kjg", &["--count", "24"]), RUN);
    let consumed = consume.run_json(
        &args(&b.bootstrap, "kjg", &["kjg-group", "--count", "24"]),
        RUN,
    );
    assert_eq!(consumed["isolation"], "read_committed");
    let read = script_records(&consumed);
    assert_eq!(read, script_records(&produced));
    assert_eq!(script_commits(&consumed), next_offsets(&read));
    let lag = b.broker.lag("kjg", "kjg-group").unwrap();
    assert!(lag.values().all(|&l| l == 0), "{lag:?}");
}
