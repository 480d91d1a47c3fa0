//! The flat group calls (`join_group`, `poll`, `commit`, `heartbeat`, `leave_group`) on
//! the Kafka backend: the backend keeps one [`KafkaMember`] per (topic, group, member)
//! joined through this handle, and each call runs on it, on a blocking thread.
//!
//! The embedded `poll` reads from the committed offset until a commit moves it; a Kafka
//! member reads from its own position, which each poll advances. An uncommitted record is
//! read again after the member rejoins (a rebalance, a restart), not by the next poll.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use super::admin::partition_id;
use super::member::KafkaMember;
use super::{blocking, kafka_error, topic_error, KafkaBackend};
use crate::error::{Error, Result};
use crate::group::{Assignment, GroupOptions};
use crate::types::Record;

/// A member shared between the backend's map and the blocking thread running a call on it.
pub(crate) type SharedMember = Arc<Mutex<KafkaMember>>;

impl KafkaBackend {
    fn key(topic: &str, group: &str, member: &str) -> (String, String, String) {
        (topic.to_owned(), group.to_owned(), member.to_owned())
    }

    fn member(&self, topic: &str, group: &str, member: &str) -> Result<SharedMember> {
        let members = self.members.lock().map_err(|_| Error::BrokerStopped)?;
        members
            .get(&Self::key(topic, group, member))
            .cloned()
            .ok_or_else(|| Error::UnknownMember {
                topic: topic.to_owned(),
                group: group.to_owned(),
                member: member.to_owned(),
            })
    }

    /// Joins (or, when this handle already has the member, returns its assignment).
    ///
    /// # Errors
    /// As [`KafkaMember::join`].
    pub(crate) async fn join_group(
        &self,
        topic: &str,
        group: &str,
        member: &str,
        options: GroupOptions,
    ) -> Result<Assignment> {
        if let Ok(joined) = self.member(topic, group, member) {
            return blocking(move || lock(&joined)?.heartbeat()).await;
        }
        let (config, names) = (self.config.clone(), Self::key(topic, group, member));
        let joined = blocking(move || {
            let (topic, group, member) = &names;
            KafkaMember::join(&config, topic, group, member, options)
        })
        .await?;
        let assignment = joined.assignment();
        let shared = Arc::new(Mutex::new(joined));
        let replaced = self
            .members
            .lock()
            .map_err(|_| Error::BrokerStopped)?
            .insert(Self::key(topic, group, member), shared);
        if let Some(old) = replaced {
            // Two joins of one member raced: the first leaves.
            let _ = blocking(move || {
                drop(old);
                Ok(())
            })
            .await;
        }
        Ok(assignment)
    }

    /// Leaves the group: the member's consumer closes.
    ///
    /// # Errors
    /// `UnknownMember` when this handle has no such member.
    pub(crate) async fn leave_group(&self, topic: &str, group: &str, member: &str) -> Result<()> {
        let key = Self::key(topic, group, member);
        let left = self
            .members
            .lock()
            .map_err(|_| Error::BrokerStopped)?
            .remove(&key);
        let left = left.ok_or(Error::UnknownMember {
            topic: key.0,
            group: key.1,
            member: key.2,
        })?;
        blocking(move || {
            drop(left);
            Ok(())
        })
        .await
    }

    /// Serves the member's callbacks and returns its assignment.
    ///
    /// # Errors
    /// `UnknownMember`.
    pub(crate) async fn heartbeat(
        &self,
        topic: &str,
        group: &str,
        member: &str,
    ) -> Result<Assignment> {
        let joined = self.member(topic, group, member)?;
        blocking(move || lock(&joined)?.heartbeat()).await
    }

    /// Up to `max_records` records of one partition from the member's position.
    ///
    /// # Errors
    /// `UnknownMember`; as [`KafkaMember::poll_batch`].
    pub(crate) async fn poll_batch_raw(
        &self,
        (topic, group, member): (&str, &str, &str),
        max_records: usize,
        timeout: Duration,
    ) -> Result<Vec<Record<Vec<u8>>>> {
        let joined = self.member(topic, group, member)?;
        blocking(move || lock(&joined)?.poll_batch(max_records, timeout)).await
    }

    /// Commits `offset` of `partition` (and everything before it) for `group`: through a
    /// member of the group joined on this handle when there is one, else as a client
    /// outside the group (which Kafka accepts only while the group has no members).
    ///
    /// # Errors
    /// `Kafka` when the cluster refuses the commit.
    pub(crate) async fn commit(
        &self,
        topic: &str,
        group: &str,
        partition: u32,
        offset: u64,
    ) -> Result<()> {
        let through = self
            .members
            .lock()
            .map_err(|_| Error::BrokerStopped)?
            .iter()
            .find(|((t, g, _), _)| t == topic && g == group)
            .map(|(_, m)| m.clone());
        let mut list = TopicPartitionList::new();
        let next = i64::try_from(offset.saturating_add(1)).unwrap_or(i64::MAX);
        list.add_partition_offset(topic, partition_id(partition), Offset::Offset(next))
            .map_err(|e| kafka_error("commit", e))?;
        let topic = topic.to_owned();
        match through {
            Some(member) => blocking(move || lock(&member)?.commit_list(&list)).await,
            None => {
                let outsider = self.group_reader(group)?;
                blocking(move || {
                    outsider
                        .commit(&list, CommitMode::Sync)
                        .map_err(|e| topic_error("commit", &topic, e))
                })
                .await
            }
        }
    }
}

/// Locks a member; a poisoned lock (a panic mid-call) closes nothing and reports a bug.
pub(crate) fn lock(member: &SharedMember) -> Result<std::sync::MutexGuard<'_, KafkaMember>> {
    member.lock().map_err(|_| Error::Internal {
        actor: "kafka member".into(),
        reason: "a call on this member panicked".into(),
    })
}
