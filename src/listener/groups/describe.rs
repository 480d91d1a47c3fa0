//! FindCoordinator, DescribeGroups and ListGroups: what a client (or an admin tool) sees of
//! groups. Kafka client groups and native groups are listed alike: a group name with a
//! classic group shows its Kafka members and, beside them, the native members of its
//! topics' native groups; a name with only native groups shows `Stable` with their members
//! (each with a subscription to the topics it is a member of and its partitions), or
//! `Empty`. A consumer-protocol (KIP-848) group with members shows them as a classic
//! consumer group's would be shown (subscription and assignment in the consumer protocol's
//! encoding, its assignor as the protocol), with its Kafka state name (`Stable`,
//! `Reconciling`). ListGroups also lists, `Empty`, the groups known only by committed
//! offsets; from v5 it tells each group's type (`classic`, `consumer`) and filters by it.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{
    BrokerId, DescribeGroupsRequest, DescribeGroupsResponse, FindCoordinatorRequest,
    FindCoordinatorResponse, GroupId, ListGroupsRequest, ListGroupsResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::actor::{Describe, Described};
use super::consumer_actor::{ConsumerDescribed, DescribeConsumer};
use super::protocol::{encode_assignment, encode_subscription};
use super::string;
use crate::group::classic::ClassicState;
use crate::listener::request::RequestContext;
use crate::listener::NODE_ID;
use crate::security::acl::Operation;
use crate::types::GroupStats;

/// Kafka's "authorized operations were not asked for".
const OPERATIONS_NOT_REQUESTED: i32 = i32::MIN;
/// FindCoordinator's key types.
const KEY_GROUP: i8 = 0;
const KEY_TRANSACTION: i8 = 1;

pub fn find_coordinator(
    ctx: &RequestContext<'_>,
    request: FindCoordinatorRequest,
) -> FindCoordinatorResponse {
    // The answer for one key: this broker's endpoint, or an error and its message.
    let answer = |key: &str| {
        let error = match request.key_type {
            KEY_GROUP => ctx.check_group(Operation::Describe, key).err(),
            // No transactions: no transaction coordinator, as a Kafka cluster whose
            // transaction state log cannot be created answers.
            KEY_TRANSACTION => Some(ResponseError::CoordinatorNotAvailable),
            _ => Some(ResponseError::InvalidRequest),
        };
        match error {
            None => (
                NODE_ID,
                0,
                None,
                string(&ctx.shared.advertised_host),
                ctx.shared.advertised_port,
            ),
            Some(e) => (
                -1,
                e.code(),
                Some(string(&format!("{e}"))),
                StrBytes::default(),
                -1,
            ),
        }
    };
    if ctx.version >= 4 {
        // v4 batches keys; each gets its own answer.
        let coordinators = request
            .coordinator_keys
            .into_iter()
            .map(|key| {
                let (node, code, message, host, port) = answer(&key);
                Coordinator::default()
                    .with_key(key)
                    .with_node_id(BrokerId(node))
                    .with_host(host)
                    .with_port(port)
                    .with_error_code(code)
                    .with_error_message(message)
            })
            .collect();
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    let (node, code, message, host, port) = answer(&request.key);
    FindCoordinatorResponse::default()
        .with_error_code(code)
        .with_error_message(message)
        .with_node_id(BrokerId(node))
        .with_host(host)
        .with_port(port)
}

/// A native group's members: member → (topics, partitions by topic).
type NativeMembers = BTreeMap<String, BTreeMap<String, Vec<u32>>>;

fn native_members(by_topic: &BTreeMap<String, GroupStats>) -> NativeMembers {
    let mut members: NativeMembers = BTreeMap::new();
    for (topic, stats) in by_topic {
        for (member, partitions) in &stats.assignment {
            members
                .entry(member.clone())
                .or_default()
                .insert(topic.clone(), partitions.clone());
        }
    }
    members
}

pub async fn describe_groups(
    ctx: &RequestContext<'_>,
    request: DescribeGroupsRequest,
) -> DescribeGroupsResponse {
    let names: Vec<String> = request.groups.iter().map(|g| g.to_string()).collect();
    let native = ctx
        .broker
        .describe_native_groups(Some(&names))
        .await
        .unwrap_or_default();
    let mut described = Vec::with_capacity(names.len());
    for name in names {
        if let Err(e) = ctx.check_group(Operation::Describe, &name) {
            described.push(
                DescribedGroup::default()
                    .with_group_id(GroupId(string(&name)))
                    .with_error_code(e.code()),
            );
            continue;
        }
        let classic = match ctx.shared.groups.get(&name) {
            Some(addr) => addr.send(Describe).await.ok(),
            None => None,
        };
        let consumer = match ctx.shared.groups.consumer(&name) {
            Some(addr) => addr.send(DescribeConsumer).await.ok(),
            None => None,
        };
        let natives = native.get(&name).map(native_members).unwrap_or_default();
        described.push(match consumer.filter(|c| !c.members.is_empty()) {
            Some(consumer) => describe_consumer(&name, consumer, natives),
            None => describe_one(&name, classic, natives),
        });
    }
    DescribeGroupsResponse::default().with_groups(described)
}

fn describe_one(name: &str, classic: Option<Described>, natives: NativeMembers) -> DescribedGroup {
    let group = DescribedGroup::default()
        .with_group_id(GroupId(string(name)))
        .with_authorized_operations(OPERATIONS_NOT_REQUESTED);
    let classic = classic.filter(|c| c.state != ClassicState::Empty);
    if classic.is_none() && natives.is_empty() {
        // Kafka's answer up to v5 for a group it does not know.
        return group.with_group_state(string("Dead"));
    }
    let mut members = Vec::new();
    let mut kafka_ids = BTreeSet::new();
    let (state, protocol) = match &classic {
        Some(c) => {
            for m in &c.members {
                // A static member's native memberships may have the id it first joined with.
                kafka_ids.insert(m.native_id.clone());
                members.push(
                    DescribedGroupMember::default()
                        .with_member_id(string(&m.id))
                        .with_group_instance_id(m.instance_id.as_deref().map(string))
                        .with_client_id(string(&m.client_id))
                        .with_client_host(string(&m.client_host))
                        .with_member_metadata(m.metadata(&c.protocol).to_vec().into())
                        .with_member_assignment(m.assignment.clone().into()),
                );
            }
            (c.state.kafka_name(), c.protocol.clone())
        }
        None => ("Stable", String::new()),
    };
    add_natives(&mut members, &kafka_ids, natives);
    let state = match (state, members.is_empty()) {
        (_, true) => "Empty",
        (state, false) => state,
    };
    group
        .with_group_state(string(state))
        .with_protocol_type(string("consumer"))
        .with_protocol_data(string(&protocol))
        .with_members(members)
}

/// The native members of a group's topics that are not Kafka members, as DescribeGroups
/// shows them: a subscription to the topics they are members of, and their partitions.
fn add_natives(
    members: &mut Vec<DescribedGroupMember>,
    kafka_ids: &BTreeSet<String>,
    natives: NativeMembers,
) {
    for (member, topics) in natives.into_iter().filter(|(m, _)| !kafka_ids.contains(m)) {
        let subscription = encode_subscription(topics.keys().map(String::as_str));
        let assignment = encode_assignment(topics.iter().map(|(t, ps)| (t.as_str(), ps.clone())));
        members.push(
            DescribedGroupMember::default()
                .with_member_id(StrBytes::from_string(member))
                .with_client_id(string("nanokafka"))
                .with_member_metadata(subscription.into())
                .with_member_assignment(assignment.into()),
        );
    }
}

/// A consumer-protocol group as DescribeGroups shows it: each member with its subscription
/// and assignment encoded as a classic consumer's would be, the assignor as the protocol.
fn describe_consumer(name: &str, c: ConsumerDescribed, natives: NativeMembers) -> DescribedGroup {
    let kafka_ids: BTreeSet<String> = c.members.iter().map(|m| m.id.clone()).collect();
    let mut members: Vec<DescribedGroupMember> = c
        .members
        .iter()
        .map(|m| {
            let subscription = encode_subscription(m.topics.iter().map(String::as_str));
            let assignment = encode_assignment(
                m.assigned
                    .iter()
                    .map(|(t, ps)| (t.as_str(), ps.iter().copied().collect())),
            );
            DescribedGroupMember::default()
                .with_member_id(string(&m.id))
                .with_group_instance_id(m.instance_id.as_deref().map(string))
                .with_client_id(string(&m.client_id))
                .with_client_host(string(&m.client_host))
                .with_member_metadata(subscription.into())
                .with_member_assignment(assignment.into())
        })
        .collect();
    add_natives(&mut members, &kafka_ids, natives);
    DescribedGroup::default()
        .with_group_id(GroupId(string(name)))
        .with_authorized_operations(OPERATIONS_NOT_REQUESTED)
        .with_group_state(string(c.state.kafka_name()))
        .with_protocol_type(string("consumer"))
        .with_protocol_data(string(c.assignor))
        .with_members(members)
}

pub async fn list_groups(
    ctx: &RequestContext<'_>,
    request: ListGroupsRequest,
) -> ListGroupsResponse {
    // Group → (protocol type, state, group type).
    let mut states: BTreeMap<String, (String, &'static str, &'static str)> = BTreeMap::new();
    if let Ok(native) = ctx.broker.describe_native_groups(None).await {
        for (name, by_topic) in native {
            let active = by_topic.values().any(|s| !s.assignment.is_empty());
            let state = if active { "Stable" } else { "Empty" };
            states.insert(name, ("consumer".to_owned(), state, "classic"));
        }
    }
    // A group known only by its committed offsets (its members gone, or it never had any:
    // standalone commits) is listed `Empty`, as Kafka lists it, so that tools find its
    // offsets.
    if let Ok(stats) = ctx.broker.stats().await {
        let partitions = stats.topics.into_values().flat_map(|t| t.partitions);
        for group in partitions.flat_map(|p| p.committed.into_keys()) {
            states
                .entry(group)
                .or_insert_with(|| ("consumer".to_owned(), "Empty", "classic"));
        }
    }
    for (name, addr) in ctx.shared.groups.all() {
        let Ok(described) = addr.send(Describe).await else {
            continue;
        };
        if described.state == ClassicState::Empty && states.contains_key(&name) {
            continue; // its native groups tell more
        }
        let protocol_type = match described.protocol_type.as_str() {
            "" => "consumer".to_owned(),
            other => other.to_owned(),
        };
        states.insert(
            name,
            (protocol_type, described.state.kafka_name(), "classic"),
        );
    }
    for (name, addr) in ctx.shared.groups.all_consumer() {
        let Ok(described) = addr.send(DescribeConsumer).await else {
            continue;
        };
        if described.members.is_empty() && states.contains_key(&name) {
            continue; // a classic group of the name, or its native groups, tell more
        }
        let state = described.state.kafka_name();
        states.insert(name, ("consumer".to_owned(), state, "consumer"));
    }
    let wanted: Vec<String> = request
        .states_filter
        .iter()
        .map(|s| s.to_lowercase())
        .collect();
    // v5: Kafka's group types, matched as it matches them (case-insensitively).
    let types: Vec<String> = request
        .types_filter
        .iter()
        .map(|s| s.to_lowercase())
        .collect();
    let every = ctx.may_cluster(Operation::Describe);
    let groups = states
        .into_iter()
        .filter(|(name, _)| every || ctx.may_group(Operation::Describe, name))
        .filter(|(_, (_, state, _))| wanted.is_empty() || wanted.contains(&state.to_lowercase()))
        .filter(|(_, (_, _, kind))| types.is_empty() || types.iter().any(|t| t == kind))
        .map(|(name, (protocol_type, state, kind))| {
            ListedGroup::default()
                .with_group_id(GroupId(StrBytes::from_string(name)))
                .with_protocol_type(StrBytes::from_string(protocol_type))
                .with_group_state(string(state))
                .with_group_type(string(kind))
        })
        .collect();
    ListGroupsResponse::default().with_groups(groups)
}
