//! Kafka clients' groups as the console shows them: a confluent-kafka (librdkafka) member
//! joined through the listener, with the classic protocol and with KIP-848's
//! (`group.protocol=consumer`), and a kafkajs member of a group its leader assigns, seen in
//! `/api/groups/{group}` with its client id, host, instance id and partitions, the group's
//! state, protocol and generation; a reset refused while it is a member; the group `Empty`
//! once it closed.

use std::time::{Duration, Instant};

use nanokafka::{ListenerConfig, NanoKafka};
use serde_json::{json, Value};

use super::clients::{self, Running};
use super::http::{get, request};
use super::{topic, with_console};

/// The broker's session timeout, the longest a member may ask for: kafkajs asks for 30 s.
const SESSION: Duration = Duration::from_secs(30);
/// The classic member's session timeout: a static member that closed (it sends no
/// LeaveGroup) is gone after it.
const MEMBER_SESSION: &str = "3000";
/// The longest wait for the group to reach a state.
const WAIT: Duration = Duration::from_secs(60);

/// Asks for the group until `done` holds for its JSON (or panics after [`WAIT`], with what
/// `member` wrote).
fn group_until(
    addr: std::net::SocketAddr,
    group: &str,
    what: &str,
    member: impl Fn() -> String,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let answer = get(addr, &format!("/api/groups/{group}"));
        if answer.status == 200 && done(&answer.json()) {
            return answer.json();
        }
        assert!(
            Instant::now() < deadline,
            "the group never showed {what}: {} {}\nthe member wrote:\n{}",
            answer.status,
            String::from_utf8_lossy(&answer.body),
            member()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A broker with a listener and a console with writes, with the topic `orders` (2
/// partitions); its data dir, broker, console address and bootstrap address.
fn broker() -> (tempfile::TempDir, NanoKafka, std::net::SocketAddr, String) {
    let dir = tempfile::tempdir().unwrap();
    let builder = NanoKafka::builder()
        .listener(
            ListenerConfig::new("127.0.0.1:0")
                .initial_rebalance_delay(Duration::ZERO)
                .consumer_heartbeat_interval(Duration::from_millis(250)),
        )
        .session_timeout(SESSION)
        .console_writes(true);
    let (broker, addr) = with_console(dir.path(), builder);
    broker.create_topic("orders", topic(2)).unwrap();
    let bootstrap = broker.listener_addr().unwrap().to_string();
    (dir, broker, addr, bootstrap)
}

/// The group as the console shows it while its one `member` holds both partitions (a reset
/// refused meanwhile), then once the member closed.
fn held_then_left(addr: std::net::SocketAddr, group: &str, member: Running) -> (Value, Value) {
    let output = || format!("{}\n{}", member.stdout(), member.stderr());
    let held = group_until(addr, group, "a member with both partitions", output, |g| {
        g["state"] == "Stable"
            && g["members"].as_array().is_some_and(|m| m.len() == 1)
            && g["members"][0]["partitions"]
                .as_array()
                .is_some_and(|p| p.len() == 2)
    });
    let listed = get(addr, "/api/groups").json();
    assert_eq!(listed[0]["group"], group, "{listed}");
    assert_eq!(listed[0]["members"], 1, "{listed}");
    let reset = json!({"topic": "orders", "to": "earliest", "confirm": true});
    let answer = request(
        addr,
        "POST",
        &format!("/api/groups/{group}/reset"),
        Some(&reset.to_string()),
        &[],
    );
    assert_eq!(
        answer.status,
        409,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
    let done = member.finish(WAIT);
    assert!(done.status.success(), "{}", done.stderr);
    let left = group_until(
        addr,
        group,
        "Empty",
        || done.stderr.clone(),
        |g| g["state"] == "Empty",
    );
    assert_eq!(left["members"], json!([]), "{left}");
    (held, left)
}

/// A confluent-kafka member of `group` on `orders` with `protocol` (`classic` or
/// `consumer`), static as `instance` when given: [`held_then_left`]'s view of its group.
fn one_member(protocol: &str, group: &str, instance: Option<&str>) -> Option<(Value, Value)> {
    let consume = clients::python("confluent_consume.py")?;
    let (_dir, _broker, addr, bootstrap) = broker();
    let mut args = vec![
        bootstrap.as_str(),
        "orders",
        group,
        "--until-stdin-closes",
        "--group-protocol",
        protocol,
        "--timeout",
        "50",
    ];
    if protocol == "classic" {
        args.extend(["--session-timeout-ms", MEMBER_SESSION]);
    }
    if let Some(instance) = instance {
        args.extend(["--instance-id", instance]);
    }
    Some(held_then_left(addr, group, consume.spawn(&args)))
}

/// Asserts that the group `held` shows one confluent-kafka member holding both partitions,
/// static as `instance` when given.
fn assert_member(held: &Value, instance: Option<&str>) {
    let mut member = held["members"][0].clone();
    let id = member.as_object_mut().unwrap().remove("member_id");
    assert!(
        id.is_some_and(|id| id.as_str().is_some_and(|s| !s.is_empty())),
        "{held}"
    );
    assert_eq!(
        member,
        json!({
            "client_id": "nanokafka-test-confluent",
            "host": "/127.0.0.1",
            "group_instance_id": instance,
            "partitions": [
                {"topic": "orders", "partition": 0},
                {"topic": "orders", "partition": 1},
            ],
        })
    );
    assert!(
        held["generation"].as_u64().is_some_and(|g| g >= 1),
        "{held}"
    );
}

#[test]
fn a_classic_kafka_clients_group_shows_its_member_protocol_and_state() {
    let Some((held, left)) = one_member("classic", "classic-group", Some("instance-1")) else {
        return;
    };
    assert_eq!(held["protocol"], "consumer/range", "{held}");
    assert_member(&held, Some("instance-1"));
    assert_eq!(left["protocol"], Value::Null, "{left}");
}

#[test]
fn a_kip848_kafka_clients_group_shows_its_member_epoch_and_state() {
    let Some((held, left)) = one_member("consumer", "kip848-group", None) else {
        return;
    };
    assert_eq!(held["protocol"], "consumer", "{held}");
    assert_member(&held, None);
    assert_eq!(left["protocol"], "consumer", "{left}");
}

/// A group whose leader assigns (a kafkajs assigner the broker does not know) has no native
/// groups: the listener alone knows its member, and a reset is refused all the same.
#[test]
fn a_leader_assigned_kafka_clients_group_shows_its_member_and_refuses_a_reset() {
    let Some(assignor) = clients::node("kafkajs_assignor.js") else {
        return;
    };
    let (_dir, _broker, addr, bootstrap) = broker();
    let member = assignor.spawn(&[
        &bootstrap,
        "orders",
        "tagged",
        "--tag",
        "a",
        "--members",
        "1",
    ]);
    let (held, _) = held_then_left(addr, "tagged", member);
    assert_eq!(held["protocol"], "consumer/nanokafka-tagged", "{held}");
    let m = &held["members"][0];
    assert_eq!(m["client_id"], "nanokafka-test-kafkajs-a", "{held}");
    assert_eq!(m["host"], "/127.0.0.1", "{held}");
}
