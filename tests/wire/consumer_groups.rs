//! The KIP-848 consumer group protocol over the wire: ConsumerGroupHeartbeat's joins, epochs
//! and refusals, the rebalance timeout, ConsumerGroupDescribe, the fencing of OffsetCommit and
//! OffsetFetch v9 by member epoch, and the refusal to mix protocols in one group.

use std::time::{Duration, Instant};

use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse,
    GroupId, MetadataRequest, OffsetFetchRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use nanokafka::{ListenerConfig, NanoKafka, TopicConfig, TopicId};

use crate::client::WireClient;
use crate::groups_common::*;
use crate::groups_offsets::commit_request;

const INTERVAL_MS: i32 = 250;

fn code(e: ResponseError) -> i16 {
    e.code()
}

/// A broker telling members to heartbeat every [`INTERVAL_MS`], with topic `t` of 4
/// partitions.
fn broker(dir: &std::path::Path) -> (NanoKafka, WireClient) {
    let config = ListenerConfig::new("127.0.0.1:0")
        .initial_rebalance_delay(Duration::ZERO)
        .consumer_heartbeat_interval(Duration::from_millis(INTERVAL_MS as u64));
    let broker = NanoKafka::builder()
        .data_dir(dir)
        .listener(config)
        .build()
        .unwrap();
    broker
        .create_topic("t", TopicConfig::default().partitions(4))
        .unwrap();
    let client = WireClient::connect(broker.listener_addr().unwrap());
    (broker, client)
}

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

/// `t`'s topic id, as Metadata v12 reports it.
fn topic_id(client: &mut WireClient) -> TopicId {
    let response = client.call(&MetadataRequest::default().with_topics(None), 12);
    let topic = response
        .topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.as_str() == "t"));
    TopicId::from_bytes(*topic.expect("t is listed").topic_id.as_bytes())
}

fn uuid(id: TopicId) -> uuid::Uuid {
    uuid::Uuid::from_bytes(*id.as_bytes())
}

/// A v1 join of `member` to `group`, subscribing to `t`.
fn join(group: &str, member: &str) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_member_id(s(member))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(vec![TopicName(s("t"))]))
        .with_topic_partitions(Some(vec![]))
}

fn beat(group: &str, member: &str, epoch: i32) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_member_id(s(member))
        .with_member_epoch(epoch)
        .with_rebalance_timeout_ms(-1)
}

fn call(
    client: &mut WireClient,
    request: ConsumerGroupHeartbeatRequest,
) -> ConsumerGroupHeartbeatResponse {
    client.call(&request, 1)
}

/// The partitions of the answer's assignment, by topic id.
fn assigned(response: &ConsumerGroupHeartbeatResponse) -> Vec<(TopicId, Vec<i32>)> {
    let assignment = response.assignment.as_ref().expect("an assignment");
    assignment
        .topic_partitions
        .iter()
        .map(|tp| {
            (
                TopicId::from_bytes(*tp.topic_id.as_bytes()),
                tp.partitions.clone(),
            )
        })
        .collect()
}

#[test]
fn a_member_joins_gets_every_partition_by_topic_id_and_is_fenced_on_a_wrong_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let (_broker, mut client) = broker(dir.path());
    let id = topic_id(&mut client);
    let joined = call(&mut client, join("g", "m1"));
    assert_eq!(joined.error_code, 0, "{:?}", joined.error_message);
    assert_eq!(joined.member_id.as_deref(), Some("m1"));
    assert_eq!(joined.member_epoch, 1);
    assert_eq!(joined.heartbeat_interval_ms, INTERVAL_MS);
    assert_eq!(assigned(&joined), vec![(id, vec![0, 1, 2, 3])]);
    let fenced = call(&mut client, beat("g", "m1", 2));
    assert_eq!(fenced.error_code, code(ResponseError::FencedMemberEpoch));
    let owned = TopicPartitions::default()
        .with_topic_id(uuid(id))
        .with_partitions(vec![0, 1, 2, 3]);
    let steady = call(
        &mut client,
        beat("g", "m1", 1).with_topic_partitions(Some(vec![owned])),
    );
    assert_eq!((steady.error_code, steady.member_epoch), (0, 1));
    let left = call(&mut client, beat("g", "m1", -1));
    assert_eq!((left.error_code, left.member_epoch), (0, -1));
    let gone = call(&mut client, beat("g", "m1", 1));
    assert_eq!(gone.error_code, code(ResponseError::UnknownMemberId));
}

#[test]
fn bad_heartbeats_are_refused_with_kafkas_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (_broker, mut client) = broker(dir.path());
    let cases = [
        (join("", "m1"), ResponseError::InvalidRequest),
        (join("g", ""), ResponseError::InvalidRequest),
        (
            join("g", "m1").with_subscribed_topic_names(None),
            ResponseError::InvalidRequest,
        ),
        (
            join("g", "m1").with_rebalance_timeout_ms(-1),
            ResponseError::InvalidRequest,
        ),
        (beat("g", "m1", -3), ResponseError::InvalidRequest),
        (
            join("g", "m1").with_server_assignor(Some(s("sticky"))),
            ResponseError::UnsupportedAssignor,
        ),
        (
            join("g", "m1").with_subscribed_topic_regex(Some(s("t("))),
            ResponseError::InvalidRegularExpression,
        ),
        (beat("g", "m1", 3), ResponseError::UnknownMemberId),
    ];
    for (request, expected) in cases {
        let answer = call(&mut client, request.clone());
        assert_eq!(answer.error_code, code(expected), "{request:?}");
    }
    // None of them made a member.
    let described = client.call(
        &ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(s("g"))]),
        1,
    );
    assert!(described.groups[0].members.is_empty());
}

#[test]
fn a_partition_reaches_a_new_member_only_after_its_owner_gave_it_up() {
    let dir = tempfile::tempdir().unwrap();
    let (_broker, mut client) = broker(dir.path());
    let id = topic_id(&mut client);
    call(&mut client, join("g", "a"));
    let b = call(&mut client, join("g", "b"));
    assert_eq!((b.member_epoch, assigned(&b)), (2, vec![]));
    let a = call(&mut client, beat("g", "a", 1));
    assert_eq!(a.member_epoch, 1, "a keeps its epoch until it revoked");
    let kept = assigned(&a)[0].1.clone();
    assert_eq!(kept.len(), 2);
    assert_eq!(call(&mut client, beat("g", "b", 2)).assignment, None);
    let owned = TopicPartitions::default()
        .with_topic_id(uuid(id))
        .with_partitions(kept.clone());
    let a = call(
        &mut client,
        beat("g", "a", 1).with_topic_partitions(Some(vec![owned])),
    );
    assert_eq!(a.member_epoch, 2);
    let b = call(&mut client, beat("g", "b", 2));
    let given: Vec<i32> = (0..4).filter(|p| !kept.contains(p)).collect();
    assert_eq!(assigned(&b), vec![(id, given)]);
    // ConsumerGroupDescribe tells the same.
    let described = client.call(
        &ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(s("g"))]),
        1,
    );
    let group = &described.groups[0];
    assert_eq!(group.error_code, 0);
    assert_eq!((group.group_epoch, &*group.group_state), (2, "Stable"));
    assert_eq!(&*group.assignor_name, "uniform");
    let epochs: Vec<(String, i32, usize)> = group
        .members
        .iter()
        .map(|m| {
            let count = m.assignment.topic_partitions[0].partitions.len();
            (m.member_id.to_string(), m.member_epoch, count)
        })
        .collect();
    assert_eq!(epochs, [("a".into(), 2, 2), ("b".into(), 2, 2)]);
}

/// Kafka fences a member that does not revoke within its rebalance timeout: `a` holds on to
/// the partitions it was asked to give up, heartbeating all along; at its timeout, counted
/// from the answer that asked, it is removed with no request of its doing it, `b` gets them,
/// and `a`'s next heartbeat is UNKNOWN_MEMBER_ID.
#[test]
fn a_member_holding_on_past_its_rebalance_timeout_is_fenced_and_its_partitions_move() {
    const REBALANCE: Duration = Duration::from_millis(300);
    let dir = tempfile::tempdir().unwrap();
    let (_broker, mut client) = broker(dir.path());
    let id = topic_id(&mut client);
    let holding_all = || {
        let all = TopicPartitions::default()
            .with_topic_id(uuid(id))
            .with_partitions(vec![0, 1, 2, 3]);
        beat("g", "a", 1).with_topic_partitions(Some(vec![all]))
    };
    let a = join("g", "a").with_rebalance_timeout_ms(REBALANCE.as_millis() as i32);
    call(&mut client, a);
    call(&mut client, join("g", "b"));
    let asked = Instant::now();
    let a = call(&mut client, holding_all());
    assert_eq!(
        (a.member_epoch, assigned(&a)[0].1.len()),
        (1, 2),
        "asked to revoke two"
    );
    let (mut a_fenced, mut b_given, mut b_epoch) = (None, None, 2);
    while a_fenced.is_none() || b_given.is_none() {
        assert!(
            asked.elapsed() < Duration::from_secs(10),
            "a fenced after {a_fenced:?}, b given after {b_given:?}"
        );
        if a_fenced.is_none() {
            let a = call(&mut client, holding_all());
            match a.error_code {
                0 => assert_eq!(a.member_epoch, 1),
                e if e == code(ResponseError::UnknownMemberId) => a_fenced = Some(asked.elapsed()),
                e => panic!("a's heartbeat: error {e}"),
            }
        }
        let b = call(&mut client, beat("g", "b", b_epoch));
        assert_eq!(b.error_code, 0);
        b_epoch = b.member_epoch;
        if b.assignment.is_some() && assigned(&b) == vec![(id, vec![0, 1, 2, 3])] {
            b_given = Some(asked.elapsed());
        }
        std::thread::sleep(Duration::from_millis(20)); // a heartbeat interval
    }
    let (a_fenced, b_given) = (a_fenced.unwrap(), b_given.unwrap());
    assert!(a_fenced >= REBALANCE, "a fenced after {a_fenced:?}");
    assert!(
        b_given >= REBALANCE,
        "b given the partitions after {b_given:?}"
    );
    assert_eq!(b_epoch, 3, "the fence bumped the group epoch");
}

/// A static member (`group.instance.id`) leaving with epoch -2 keeps its partitions, with no
/// rebalance, for its instance's next member, which takes them back under a new member id;
/// the old id is then FENCED_INSTANCE_ID, and an instance id in use is UNRELEASED_INSTANCE_ID.
#[test]
fn a_static_member_leaving_for_a_while_gets_its_partitions_back() {
    let dir = tempfile::tempdir().unwrap();
    let (_broker, mut client) = broker(dir.path());
    let id = topic_id(&mut client);
    let instance =
        |request: ConsumerGroupHeartbeatRequest| request.with_instance_id(Some(s("instance")));
    call(&mut client, instance(join("g", "a")));
    call(&mut client, join("g", "b"));
    let kept = assigned(&call(&mut client, instance(beat("g", "a", 1))))[0]
        .1
        .clone();
    let owned = TopicPartitions::default()
        .with_topic_id(uuid(id))
        .with_partitions(kept.clone());
    let a = instance(beat("g", "a", 1)).with_topic_partitions(Some(vec![owned]));
    assert_eq!(call(&mut client, a).member_epoch, 2);
    assert_eq!(
        assigned(&call(&mut client, beat("g", "b", 2)))[0].1.len(),
        2
    );
    let left = call(&mut client, instance(beat("g", "a", -2)));
    assert_eq!((left.error_code, left.member_epoch), (0, -2));
    let b = call(&mut client, beat("g", "b", 2));
    assert_eq!((b.member_epoch, b.assignment), (2, None), "no rebalance");
    let again = call(&mut client, instance(join("g", "a2")));
    assert_eq!(again.error_code, 0, "{:?}", again.error_message);
    assert_eq!(assigned(&again), vec![(id, kept)]);
    let fenced = call(&mut client, instance(beat("g", "a", 2)));
    assert_eq!(fenced.error_code, code(ResponseError::FencedInstanceId));
    let taken = call(&mut client, instance(join("g", "x")));
    assert_eq!(taken.error_code, code(ResponseError::UnreleasedInstanceId));
}

#[test]
fn commits_and_offset_fetches_are_fenced_by_member_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let (_broker, mut client) = broker(dir.path());
    let errors = |client: &mut WireClient, member: &str, epoch: i32, version: i16| {
        let response = client.call(&commit_request("g", member, epoch, &[(0, 5)]), version);
        response.topics[0].partitions[0].error_code
    };
    // A KIP-848 client reading by assign() commits with the member id it made itself and
    // epoch -1: taken while the group has no members.
    assert_eq!(errors(&mut client, "made-by-the-client", -1, 9), 0);
    call(&mut client, join("g", "m1"));
    assert_eq!(errors(&mut client, "m1", 1, 9), 0);
    assert_eq!(
        errors(&mut client, "m1", 0, 9),
        code(ResponseError::StaleMemberEpoch)
    );
    assert_eq!(
        errors(&mut client, "other", 1, 9),
        code(ResponseError::UnknownMemberId)
    );
    assert_eq!(
        errors(&mut client, "made-by-the-client", -1, 9),
        code(ResponseError::UnknownMemberId)
    );
    assert_eq!(
        errors(&mut client, "m1", 1, 8),
        code(ResponseError::UnsupportedVersion)
    );
    let fetch = |client: &mut WireClient, member: Option<&str>, epoch: i32| {
        let group = OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(s("g")))
            .with_member_id(member.map(s))
            .with_member_epoch(epoch)
            .with_topics(None);
        let response = client.call(&OffsetFetchRequest::default().with_groups(vec![group]), 9);
        response.groups[0].error_code
    };
    assert_eq!(fetch(&mut client, Some("m1"), 1), 0);
    assert_eq!(fetch(&mut client, None, -1), 0);
    assert_eq!(
        fetch(&mut client, Some("m1"), 3),
        code(ResponseError::StaleMemberEpoch)
    );
    assert_eq!(
        fetch(&mut client, Some("other"), 1),
        code(ResponseError::UnknownMemberId)
    );
    // A group that never existed: v9 says so.
    assert_eq!(
        client
            .call(&commit_request("never", "m", 3, &[(0, 5)]), 9)
            .topics[0]
            .partitions[0]
            .error_code,
        code(ResponseError::GroupIdNotFound)
    );
}

#[test]
fn the_protocols_do_not_mix_in_one_group() {
    let dir = tempfile::tempdir().unwrap();
    let (_broker, mut client) = broker(dir.path());
    // A classic group with a member refuses a consumer-protocol member...
    let (classic, generation, _) = join_and_sync(&mut client, "classic", &["t"]);
    let refused = call(&mut client, join("classic", "m1"));
    assert_eq!(refused.error_code, code(ResponseError::GroupIdNotFound));
    // ... and a consumer-protocol group with a member refuses a classic one.
    call(&mut client, join("modern", "m1"));
    let refused = client.call(&join_request("modern", "", &["t"], &["range"]), 5);
    assert_eq!(
        refused.error_code,
        code(ResponseError::InconsistentGroupProtocol)
    );
    let described = client.call(
        &ConsumerGroupDescribeRequest::default()
            .with_group_ids(vec![GroupId(s("classic")), GroupId(s("missing"))]),
        1,
    );
    let codes: Vec<i16> = described.groups.iter().map(|g| g.error_code).collect();
    assert_eq!(codes, [code(ResponseError::GroupIdNotFound); 2]);
    // Once the classic member left, the name takes consumer-protocol members.
    assert_eq!(heartbeat(&mut client, "classic", &classic, generation), 0);
    let leave = kafka_protocol::messages::LeaveGroupRequest::default()
        .with_group_id(GroupId(s("classic")))
        .with_member_id(s(&classic));
    assert_eq!(client.call(&leave, 1).error_code, 0);
    let joined = call(&mut client, join("classic", "m1"));
    assert_eq!((joined.error_code, joined.member_epoch), (0, 1));
}

/// A heartbeat interval not below the session timeout would have every member evicted
/// between two heartbeats: the build refuses one set so, as Kafka's config check does, and
/// touches nothing; left unset, the interval members are told is Kafka's 5 s, or a third of
/// a shorter session timeout.
#[test]
fn the_heartbeat_interval_stays_below_the_session_timeout() {
    let build = |dir: &std::path::Path, session: Duration, interval: Option<Duration>| {
        let mut config = ListenerConfig::new("127.0.0.1:0");
        if let Some(interval) = interval {
            config = config.consumer_heartbeat_interval(interval);
        }
        NanoKafka::builder()
            .data_dir(dir)
            .session_timeout(session)
            .listener(config)
            .build()
    };
    for interval in [Duration::from_secs(10), Duration::from_secs(60)] {
        let dir = tempfile::tempdir().unwrap();
        match build(dir.path(), Duration::from_secs(10), Some(interval)) {
            Err(nanokafka::Error::InvalidArgument { name, reason }) => {
                assert_eq!(name, "consumer_heartbeat_interval");
                assert!(reason.contains("session timeout"), "{reason}");
            }
            other => panic!("{interval:?} was not refused: {:?}", other.is_ok()),
        }
        assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none());
    }
    for (session, interval, told_ms) in [
        (Duration::from_secs(10), Some(Duration::from_secs(9)), 9_000),
        (Duration::from_secs(45), None, 5_000),
        (Duration::from_millis(600), None, 200),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let broker = build(dir.path(), session, interval).unwrap();
        broker.create_topic("t", TopicConfig::default()).unwrap();
        let mut client = WireClient::connect(broker.listener_addr().unwrap());
        let joined = call(&mut client, join("g", "m"));
        assert_eq!(joined.error_code, 0);
        assert_eq!(
            joined.heartbeat_interval_ms, told_ms,
            "{session:?}, {interval:?}"
        );
    }
}
