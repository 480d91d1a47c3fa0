//! A [`crate::Consumer`]'s member on the Kafka backend: a librdkafka group member
//! ([`KafkaMember`]), which keeps its own positions, and its assignment as of its last poll
//! or heartbeat. Its calls block the caller's thread, as the blocking `Consumer`'s do.

use std::time::Duration;

use serde::de::DeserializeOwned;

use super::member::KafkaMember;
use super::KafkaBackend;
use crate::error::{Error, Result};
use crate::group::{Assignment, GroupOptions};
use crate::types::Record;

/// The member and its last assignment. Dropping it leaves the group without blocking an
/// actix/tokio thread.
#[derive(Debug)]
pub(crate) struct KafkaConsumer {
    /// Always `Some` but in `drop`, which takes it.
    member: Option<KafkaMember>,
    topic: String,
    assignment: Assignment,
}

impl KafkaConsumer {
    /// Joins `group` as `member` on `topic`, on this thread. Blocking.
    ///
    /// # Errors
    /// As [`KafkaMember::join`]; `BlockingInActorContext` on an actix/tokio thread.
    pub(crate) fn join(
        backend: &KafkaBackend,
        (topic, group, member): (&str, &str, &str),
        options: GroupOptions,
    ) -> Result<Self> {
        crate::wait::refuse_actix_thread()?;
        let joined = KafkaMember::join(backend.config(), topic, group, member, options)?;
        Ok(KafkaConsumer {
            assignment: joined.assignment(),
            member: Some(joined),
            topic: topic.to_owned(),
        })
    }

    fn member(&mut self) -> Result<&mut KafkaMember> {
        crate::wait::refuse_actix_thread()?;
        // Only `drop` takes it.
        self.member.as_mut().ok_or(Error::BrokerStopped)
    }

    pub(crate) fn assignment(&self) -> &Assignment {
        &self.assignment
    }

    pub(crate) fn position(&self, partition: u32) -> Option<u64> {
        self.member.as_ref()?.position(partition)
    }

    /// Up to `max_records` records of one assigned partition, decoded as `T`.
    ///
    /// # Errors
    /// As [`KafkaMember::poll_batch`], plus `Decode`.
    pub(crate) fn poll_batch<T: DeserializeOwned>(
        &mut self,
        max_records: usize,
        timeout: Duration,
    ) -> Result<Vec<Record<T>>> {
        let member = self.member()?;
        let records = member.poll_batch(max_records, timeout)?;
        self.assignment = member.assignment();
        let topic = &self.topic;
        records.into_iter().map(|r| r.decode(topic)).collect()
    }

    pub(crate) fn commit_offset(&mut self, partition: u32, offset: u64) -> Result<()> {
        self.member()?.commit(partition, offset)
    }

    pub(crate) fn seek(&mut self, partition: u32, offset: u64) -> Result<()> {
        self.member()?.seek(partition, offset)
    }

    pub(crate) fn heartbeat(&mut self) -> Result<&Assignment> {
        self.assignment = self.member()?.heartbeat()?;
        Ok(&self.assignment)
    }
}

impl Drop for KafkaConsumer {
    /// librdkafka's close blocks until the group acknowledges the leave: on an actix/tokio
    /// thread, it runs on a short-lived thread of its own.
    fn drop(&mut self) {
        let Some(member) = self.member.take() else {
            return;
        };
        if crate::wait::refuse_actix_thread().is_err() {
            let _ = std::thread::Builder::new()
                .name("nanokafka-leave".into())
                .spawn(move || drop(member));
        }
    }
}
