//! ACLs as real clients meet them (`ListenerConfig::authorizer`): the principal of a listener
//! without SASL is `User:ANONYMOUS`; it is allowed WRITE and READ on topic `a` and READ on
//! group `g`, and nothing else. confluent-kafka, kafka-python and kcat produce and consume
//! `a`; producing to `b` fails with TOPIC_AUTHORIZATION_FAILED and writes nothing; a group it
//! may not read fails with GROUP_AUTHORIZATION_FAILED; Metadata lists only `a`; aiokafka and
//! kafkajs produce to `a` and are refused `b`. A super user
//! does everything. confluent-kafka's AdminClient manages the ACLs.

use nanokafka::security::acl::{
    AclBinding, Operation, PatternType, Permission, ResourceType, WILDCARD,
};
use serde_json::json;

use crate::clients::{self, Client};
use crate::common::{args, assert_read_back_natively, read_back_natively, Broker, Stamps, RUN};
use crate::confluent::producer;

const ANONYMOUS: &str = "User:ANONYMOUS";

/// A broker enforcing ACLs, with topics `a` and `b`, and ANONYMOUS allowed `grants`.
fn broker_allowing(grants: &[(ResourceType, &str, Operation)]) -> Broker {
    let b = Broker::start_authorized(&[]);
    b.create("a", 1);
    b.create("b", 1);
    let bindings: Vec<AclBinding> = grants
        .iter()
        .map(|&(resource_type, name, operation)| AclBinding {
            resource_type,
            pattern_type: PatternType::Literal,
            name: name.into(),
            principal: ANONYMOUS.into(),
            host: WILDCARD.into(),
            operation,
            permission: Permission::Allow,
        })
        .collect();
    b.acls()
        .update(|acls| {
            for binding in bindings {
                acls.add(binding);
            }
            (true, ())
        })
        .unwrap();
    b
}

/// WRITE and READ on `a`, READ on group `g`.
fn producer_and_consumer_of_a() -> Broker {
    broker_allowing(&[
        (ResourceType::Topic, "a", Operation::Write),
        (ResourceType::Topic, "a", Operation::Read),
        (ResourceType::Group, "g", Operation::Read),
    ])
}

fn log_end(b: &Broker, topic: &str) -> u64 {
    b.broker.stats().unwrap().topics[topic].partitions[0].log_end_offset
}

/// Runs `client`, which must fail saying `error`.
fn refused(client: &Client, args: &[&str], error: &str) {
    let run = client.run(args, b"", RUN);
    assert!(!run.status.success(), "{}", run.stdout);
    assert!(run.stderr.contains(error), "{}", run.stderr);
}

#[test]
fn confluent_kafka_produces_and_consumes_only_what_its_acls_allow() {
    let (Some(produce), Some(consume), Some(admin)) = (
        producer(),
        clients::python("confluent_consume.py"),
        clients::python("confluent_admin.py"),
    ) else {
        return;
    };
    let b = producer_and_consumer_of_a();
    let bs = b.bootstrap.as_str();
    let produced = produce.run_json(&args(bs, "a", &["--count", "5"]), RUN);
    assert_read_back_natively(&b, "a", &produced, "r");

    let to_b = args(bs, "b", &["--count", "1", "--timeout", "10"]);
    refused(&produce, &to_b, "TOPIC_AUTHORIZATION_FAILED");
    assert_eq!(
        log_end(&b, "b"),
        0,
        "nothing of the refused produce is written"
    );

    let consumed = consume.run_json(&args(bs, "a", &["g", "--count", "5"]), RUN);
    assert_eq!(
        consumed["records"].as_array().unwrap().len(),
        5,
        "{consumed}"
    );
    let other_group = args(bs, "a", &["h", "--count", "1", "--timeout", "10"]);
    refused(&consume, &other_group, "GROUP_AUTHORIZATION_FAILED");

    let listed = admin.run_json(&[bs, "list-topics"], RUN);
    assert_eq!(listed["topics"], json!([{"name": "a", "partitions": 1}]));
}

#[test]
fn kafka_python_and_kcat_meet_the_same_acls() {
    let (Some(produce), Some(kcat)) = (clients::python("kafka_python_produce.py"), clients::kcat())
    else {
        return;
    };
    let b = producer_and_consumer_of_a();
    let bs = b.bootstrap.as_str();
    // Idempotent: its InitProducerId is allowed by WRITE on a topic, as Kafka 3.x allows it.
    let produced = produce.run_json(&args(bs, "a", &["--count", "3"]), RUN);
    assert_read_back_natively(&b, "a", &produced, "r");
    let to_b = args(bs, "b", &["--count", "1", "--timeout", "10"]);
    refused(&produce, &to_b, "TopicAuthorizationFailedError");
    assert_eq!(log_end(&b, "b"), 0);

    let metadata = kcat.run_ok(&["-b", bs, "-L", "-J"], b"", RUN).json();
    let topics: Vec<&str> = metadata["topics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["topic"].as_str().unwrap())
        .collect();
    assert_eq!(topics, ["a"], "{metadata}");
    let read = kcat.run_ok(
        &["-b", bs, "-C", "-t", "a", "-o", "beginning", "-e", "-J"],
        b"",
        RUN,
    );
    assert_eq!(read.json_lines().len(), 3, "{}", read.stdout);
    let to_b = kcat.run(
        &["-b", bs, "-P", "-t", "b", "-X", "message.timeout.ms=5000"],
        b"x\n",
        RUN,
    );
    assert!(!to_b.status.success(), "{}", to_b.stderr);
    let said = to_b.stderr.to_lowercase();
    assert!(said.contains("authorization failed"), "{}", to_b.stderr);
    assert_eq!(log_end(&b, "b"), 0);
}

#[test]
fn aiokafka_and_kafkajs_write_only_where_allowed() {
    let (Some(aiokafka), Some(kafkajs)) = (
        clients::python("aiokafka_produce.py"),
        clients::node("kafkajs_produce.js"),
    ) else {
        return;
    };
    let b = producer_and_consumer_of_a();
    let bs = b.bootstrap.as_str();
    let produced = aiokafka.run_json(&args(bs, "a", &["--count", "2"]), RUN);
    // aiokafka reports a batch's first timestamp for each of its records.
    read_back_natively(&b, "a", &produced, "r", Stamps::AtMost);
    let to_b = args(bs, "b", &["--count", "1", "--timeout", "10"]);
    refused(&aiokafka, &to_b, "TopicAuthorizationFailedError");
    assert_eq!(log_end(&b, "b"), 0);
    // A broker of its own: the read-back compares the whole topic.
    let b = producer_and_consumer_of_a();
    let bs = b.bootstrap.as_str();
    let produced = kafkajs.run_json(&args(bs, "a", &["--count", "2"]), RUN);
    assert_read_back_natively(&b, "a", &produced, "r");
    let to_b = args(bs, "b", &["--count", "1", "--timeout", "10"]);
    refused(&kafkajs, &to_b, "Not authorized to access topics");
    assert_eq!(log_end(&b, "b"), 0);
}

#[test]
fn a_super_user_does_everything_with_no_acl() {
    let (Some(produce), Some(admin)) = (producer(), clients::python("confluent_admin.py")) else {
        return;
    };
    let b = Broker::start_authorized(&[ANONYMOUS]);
    let bs = b.bootstrap.as_str();
    let created = admin.run_json(&[bs, "create-topics", "b:2"], RUN);
    assert_eq!(created["created"], json!(["b"]));
    let produced = produce.run_json(&args(bs, "b", &["--count", "4", "--idempotent"]), RUN);
    assert_read_back_natively(&b, "b", &produced, "r");
    let deleted = admin.run_json(&[bs, "delete-topics", "b"], RUN);
    assert_eq!(deleted["deleted"], json!(["b"]));
}

#[test]
fn confluent_admin_creates_describes_and_deletes_acls() {
    let Some(admin) = clients::python("confluent_admin.py") else {
        return;
    };
    let b = Broker::start_authorized(&[ANONYMOUS]);
    let bs = b.bootstrap.as_str();
    let read_a = "TOPIC,a,LITERAL,User:alice,*,READ,ALLOW";
    let team = "GROUP,team-,PREFIXED,User:*,*,ALL,DENY";
    let bad_cluster = "CLUSTER,other,LITERAL,User:alice,*,ALTER,ALLOW";
    let created = admin.run_json(&[bs, "create-acls", read_a, team, bad_cluster], RUN);
    assert_eq!(
        created["acl_results"],
        json!({read_a: "created", team: "created", bad_cluster: "INVALID_REQUEST"})
    );
    let all = admin.run_json(&[bs, "describe-acls"], RUN);
    let mut both = vec![read_a, team];
    both.sort_unstable();
    assert_eq!(all["acls"], json!(both));
    // MATCH: every ACL that applies to group team-blue, the prefixed one.
    let matching = admin.run_json(
        &[bs, "describe-acls", "GROUP,team-blue,MATCH,-,-,ANY,ANY"],
        RUN,
    );
    assert_eq!(matching["acls"], json!([team]));

    // The ACLs created are those of the file the broker enforces and `nanokafka acls` edits.
    let stored: Vec<String> = b.acls().current().iter().map(ToString::to_string).collect();
    assert_eq!(stored.len(), 2, "{stored:?}");

    let filter = "TOPIC,a,ANY,-,-,ANY,ANY";
    let deleted = admin.run_json(&[bs, "delete-acls", filter], RUN);
    assert_eq!(deleted["deleted_acls"], json!({filter: [read_a]}));
    let left = admin.run_json(&[bs, "describe-acls"], RUN);
    assert_eq!(left["acls"], json!([team]));
}

#[test]
fn acl_requests_need_an_authorizer_and_alter_on_the_cluster() {
    let Some(admin) = clients::python("confluent_admin.py") else {
        return;
    };
    let read_a = "TOPIC,a,LITERAL,User:alice,*,READ,ALLOW";
    let open = Broker::start();
    let off = admin.run_json(&[open.bootstrap.as_str(), "create-acls", read_a], RUN);
    assert_eq!(off["acl_results"], json!({read_a: "SECURITY_DISABLED"}));

    let b = broker_allowing(&[(ResourceType::Cluster, "kafka-cluster", Operation::Describe)]);
    let bs = b.bootstrap.as_str();
    let denied = admin.run_json(&[bs, "create-acls", read_a], RUN);
    assert_eq!(
        denied["acl_results"],
        json!({read_a: "CLUSTER_AUTHORIZATION_FAILED"})
    );
    let filter = "ANY,-,ANY,-,-,ANY,ANY";
    let denied = admin.run_json(&[bs, "delete-acls", filter], RUN);
    assert_eq!(
        denied["deleted_acls"],
        json!({filter: "CLUSTER_AUTHORIZATION_FAILED"})
    );
    let listed = admin.run_json(&[bs, "describe-acls"], RUN);
    let own = "CLUSTER,kafka-cluster,LITERAL,User:ANONYMOUS,*,DESCRIBE,ALLOW";
    assert_eq!(listed["acls"], json!([own]), "{listed}");
}
