//! kafkajs against the listener: its producer, plain and idempotent; `consumer.run` in a
//! group.

use crate::clients::{self, Client};
use crate::common::{
    args, assert_read_back_natively, next_offsets, script_commits, script_records, Broker, RUN,
    SESSION,
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

/// Two members with a custom partition assigner (unknown to the broker): the group elects
/// one of them leader, its assign() reads both members' subscription user data, and the
/// assignment it makes (every partition to one member, with user data) is what both get
/// and what DescribeGroups shows, byte for byte.
#[test]
fn a_custom_assigner_leads_the_group_and_its_user_data_is_relayed() {
    let Some(member) = clients::node("kafkajs_assignor.js") else {
        return;
    };
    let b = Broker::start();
    b.create("kja", 3);
    let spawned: Vec<_> = ["a", "b"]
        .map(|tag| {
            member.spawn(&args(
                &b.bootstrap,
                "kja",
                &["kja-group", "--tag", tag, "--members", "2"],
            ))
        })
        .into_iter()
        .collect();
    let docs: Vec<serde_json::Value> = spawned
        .iter()
        .map(|m| {
            let out = m.wait_for_stdout("the settled group", RUN, |out| out.ends_with('\n'));
            serde_json::from_str(out.trim()).unwrap()
        })
        .collect();
    for m in spawned {
        m.finish(RUN);
    }
    let leaders: Vec<&serde_json::Value> = docs.iter().filter(|d| d["is_leader"] == true).collect();
    assert_eq!(leaders.len(), 1, "one leader: {docs:?}");
    let leader = leaders[0];
    assert_eq!(
        leader["leader_saw"],
        serde_json::json!(["a", "b"]),
        "both members' user data"
    );
    let expected_user_data = format!("leader={};members=a,b", leader["tag"].as_str().unwrap());
    for doc in &docs {
        // The member tagged last gets every partition: no broker assignor deals so.
        let assigned = match doc["tag"].as_str() {
            Some("b") => serde_json::json!({"kja": [0, 1, 2]}),
            _ => serde_json::json!({}),
        };
        assert_eq!(doc["assigned"], assigned, "{doc}");
        assert_eq!(doc["group"]["protocol"], "nanokafka-tagged");
        let members = doc["group"]["members"].as_array().unwrap();
        assert_eq!(members.len(), 2);
        for m in members {
            assert_eq!(m["user_data"], expected_user_data.as_str(), "{m}");
        }
    }
}

/// A session timeout above the broker's is refused (INVALID_SESSION_TIMEOUT), and kafkajs
/// says so, rather than being served a shorter one.
#[test]
fn a_session_timeout_above_the_brokers_is_refused() {
    let Some(consume) = clients::node("kafkajs_consume.js") else {
        return;
    };
    let b = Broker::start();
    b.create("kjs", 1);
    let too_long = (SESSION.as_millis() + 1).to_string();
    let done = consume.run(
        &args(
            &b.bootstrap,
            "kjs",
            &["kjs-group", "--count", "1", "--session-timeout", &too_long],
        ),
        b"",
        RUN,
    );
    assert!(!done.status.success(), "{}", done.stdout);
    assert!(
        done.stderr
            .contains("session timeout is not within the range"),
        "{}",
        done.stderr
    );
}
