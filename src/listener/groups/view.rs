//! A read-only view of the Kafka clients' groups for the web console (`console` feature):
//! each group's state, protocol, generation and members as `kafka-consumer-groups
//! --describe` shows them. Taken by a message to each group's actor (the `Describe` that
//! DescribeGroups sends), so the console never blocks the listener: an actor answers between
//! two requests, and one whose listener stopped is left out.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::actor::{Describe, Described};
use super::consumer_actor::{ConsumerDescribed, DescribeConsumer};
use super::protocol::assigned_partitions;
use crate::group::classic::ClassicState;
use crate::listener::Shared;

/// One Kafka client group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KafkaGroupView {
    /// Kafka's state name: `Empty`, `PreparingRebalance`, `CompletingRebalance`, `Stable`
    /// (classic); `Empty`, `Reconciling`, `Stable` (KIP-848).
    pub state: &'static str,
    /// `consumer` for a KIP-848 group; else the classic protocol type and the assignor the
    /// members chose, `consumer/range`; `None` while a classic group has no protocol (empty).
    pub protocol: Option<String>,
    /// The classic generation, or a KIP-848 group's epoch.
    pub generation: u64,
    pub members: Vec<KafkaMemberView>,
}

/// One member of a [`KafkaGroupView`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KafkaMemberView {
    pub member_id: String,
    /// Its id in the native groups (see `actor`): how the native groups' stats name it.
    pub native_id: String,
    pub client_id: String,
    /// Its address as Kafka shows it (`/127.0.0.1`).
    pub host: String,
    /// A static member's `group.instance.id`.
    pub instance_id: Option<String>,
    /// (topic, partition), as its last assignment gave them (empty when the assignment is
    /// not the consumer protocol's: another protocol type's leader wrote it).
    pub partitions: Vec<(String, u32)>,
}

/// The listener's Kafka groups, read for the console; cheap to clone. It outlives the
/// listener harmlessly: once the listener stopped every group is left out.
#[derive(Debug, Clone)]
pub(crate) struct KafkaGroupsReader(pub(crate) Arc<Shared>);

impl KafkaGroupsReader {
    /// The group named `name`, `None` when no Kafka client used it. A name with a classic
    /// and a KIP-848 group is shown by the one with members (the classic when neither has).
    pub async fn group(&self, name: &str) -> Option<KafkaGroupView> {
        let groups = &self.0.groups;
        let consumer = match groups.consumer(name) {
            Some(addr) => addr.send(DescribeConsumer).await.ok(),
            None => None,
        };
        let classic = match groups.get(name) {
            Some(addr) => addr.send(Describe).await.ok(),
            None => None,
        };
        choose(classic, consumer)
    }

    /// Every Kafka client group, by name.
    pub async fn groups(&self) -> BTreeMap<String, KafkaGroupView> {
        let mut names: Vec<String> = self.0.groups.all().into_iter().map(|(n, _)| n).collect();
        names.extend(self.0.groups.all_consumer().into_iter().map(|(n, _)| n));
        names.sort();
        names.dedup();
        let mut views = BTreeMap::new();
        for name in names {
            if let Some(view) = self.group(&name).await {
                views.insert(name, view);
            }
        }
        views
    }
}

fn choose(
    classic: Option<Described>,
    consumer: Option<ConsumerDescribed>,
) -> Option<KafkaGroupView> {
    match (classic, consumer) {
        (_, Some(c)) if !c.members.is_empty() => Some(of_consumer(c)),
        (Some(c), _) => Some(of_classic(c)),
        (None, c) => c.map(of_consumer),
    }
}

fn of_classic(c: Described) -> KafkaGroupView {
    let protocol = match (c.state, c.protocol_type.as_str(), c.protocol.as_str()) {
        (ClassicState::Empty, ..) | (_, "", _) => None,
        (_, kind, "") => Some(kind.to_owned()),
        (_, kind, assignor) => Some(format!("{kind}/{assignor}")),
    };
    let members = c
        .members
        .into_iter()
        .map(|m| KafkaMemberView {
            partitions: assigned_partitions(&m.assignment).unwrap_or_default(),
            member_id: m.id,
            native_id: m.native_id,
            client_id: m.client_id,
            host: m.client_host,
            instance_id: m.instance_id,
        })
        .collect();
    KafkaGroupView {
        state: c.state.kafka_name(),
        protocol,
        generation: u64::try_from(c.generation).unwrap_or(0),
        members,
    }
}

fn of_consumer(c: ConsumerDescribed) -> KafkaGroupView {
    let members = c
        .members
        .into_iter()
        .map(|m| KafkaMemberView {
            partitions: m
                .assigned
                .iter()
                .flat_map(|(t, ps)| ps.iter().map(move |p| (t.clone(), *p)))
                .collect(),
            native_id: m.native_id().to_owned(),
            member_id: m.id,
            client_id: m.client_id,
            host: m.client_host,
            instance_id: m.instance_id,
        })
        .collect();
    KafkaGroupView {
        state: c.state.kafka_name(),
        protocol: Some("consumer".to_owned()),
        generation: u64::try_from(c.group_epoch).unwrap_or(0),
        members,
    }
}
