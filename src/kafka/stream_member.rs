//! A [`crate::RecordStream`]'s member on the Kafka backend: a librdkafka group member
//! ([`KafkaMember`]), which keeps its own positions. Its calls block, so each runs on
//! tokio's blocking pool (as the Kafka subscription's do), and the member is shared with
//! the call in flight.

use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::group::{Assignment, GroupOptions};
use crate::kafka::member::KafkaMember;
use crate::kafka::{blocking, KafkaBackend};
use crate::types::Record;

/// The member, its names, and its assignment as of its last poll. Dropping it leaves the
/// group without blocking an actix/tokio thread.
pub(crate) struct KafkaSide {
    /// Always `Some` but in `drop`, which takes it.
    member: Option<Arc<Mutex<KafkaMember>>>,
    pub(crate) topic: String,
    group: String,
    member_id: String,
    assignment: Assignment,
}

impl std::fmt::Debug for KafkaSide {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaSide")
            .field("topic", &self.topic)
            .field("assignment", &self.assignment)
            .finish_non_exhaustive()
    }
}

type Shared = Arc<Mutex<KafkaMember>>;

fn lock(member: &Mutex<KafkaMember>) -> Result<MutexGuard<'_, KafkaMember>> {
    member.lock().map_err(|_| Error::Internal {
        actor: "kafka stream".into(),
        reason: "a call on this member panicked".into(),
    })
}

impl KafkaSide {
    /// The member, for a call on the blocking pool.
    fn shared(&self) -> Result<Shared> {
        self.member.clone().ok_or(Error::BrokerStopped)
    }
    /// Joins (waiting for the first assignment).
    ///
    /// # Errors
    /// As [`KafkaMember::join`].
    pub(crate) async fn join(
        backend: &KafkaBackend,
        (topic, group, member): (&str, &str, &str),
        options: GroupOptions,
    ) -> Result<Self> {
        let config = backend.config().clone();
        let names = (topic.to_owned(), group.to_owned(), member.to_owned());
        let joined = blocking(move || {
            let (topic, group, member) = &names;
            KafkaMember::join(&config, topic, group, member, options)
        })
        .await?;
        Ok(KafkaSide {
            assignment: joined.assignment(),
            member: Some(Arc::new(Mutex::new(joined))),
            topic: topic.to_owned(),
            group: group.to_owned(),
            member_id: member.to_owned(),
        })
    }

    pub(crate) fn assignment(&self) -> &Assignment {
        &self.assignment
    }

    /// One poll: up to `max_records` of one partition, waiting up to `wait`, and the
    /// assignment after it.
    pub(crate) fn poll(
        &self,
        max_records: usize,
        wait: Duration,
    ) -> impl std::future::Future<Output = Result<(Vec<Record<Vec<u8>>>, Assignment)>> + 'static
    {
        let member = self.shared();
        blocking(move || {
            let member = member?;
            let mut member = lock(&member)?;
            let records = member.poll_batch(max_records, wait)?;
            Ok((records, member.assignment()))
        })
    }

    /// A poll's assignment; returns whether its generation is a new one.
    pub(crate) fn assigned(&mut self, assignment: Assignment) -> bool {
        let changed = assignment.generation != self.assignment.generation;
        self.assignment = assignment;
        changed
    }

    /// Commits `offset` of `partition` if the member is still in `generation` (librdkafka's
    /// generation is checked when the commit runs, so a rebalance since the last poll is
    /// seen).
    ///
    /// # Errors
    /// `IllegalGeneration` when the member moved on since; as [`KafkaMember::commit`].
    pub(crate) async fn commit(&self, generation: u64, partition: u32, offset: u64) -> Result<()> {
        self.commits().commit(generation, partition, offset).await
    }

    /// A handle that commits for this member apart from it (a `StreamCommitter`'s). It holds
    /// the member weakly: dropping the stream still closes the member.
    pub(crate) fn commits(&self) -> KafkaCommits {
        KafkaCommits {
            member: self.member.as_ref().map_or_else(Weak::new, Arc::downgrade),
            topic: self.topic.clone(),
            group: self.group.clone(),
            member_id: self.member_id.clone(),
        }
    }

    /// Leaves the group and waits until librdkafka has.
    ///
    /// # Errors
    /// `Internal` when a call on the member panicked.
    pub(crate) async fn leave(&self) -> Result<()> {
        self.commits().leave().await
    }
}

impl Drop for KafkaSide {
    /// Leaves the group: librdkafka's close blocks until the group acknowledges it, so on
    /// an actix/tokio thread the member is dropped on a short-lived thread of its own (or,
    /// when a poll still holds it, on the blocking pool when that poll ends).
    fn drop(&mut self) {
        let Some(member) = self.member.take() else {
            return;
        };
        if crate::wait::refuse_actix_thread().is_ok() {
            return drop(member);
        }
        let _ = std::thread::Builder::new()
            .name("nanokafka-leave".into())
            .spawn(move || drop(member));
    }
}

/// Commits and leaves for a [`KafkaSide`]'s member, apart from it.
#[derive(Debug, Clone)]
pub(crate) struct KafkaCommits {
    member: Weak<Mutex<KafkaMember>>,
    topic: String,
    group: String,
    member_id: String,
}

impl KafkaCommits {
    /// The member, while its stream lives.
    fn shared(&self) -> Result<Shared> {
        self.member.upgrade().ok_or(Error::BrokerStopped)
    }

    /// Commits `offset` of `partition` when the member is still in `generation`.
    ///
    /// # Errors
    /// `IllegalGeneration` when the member was assigned again since; `BrokerStopped` when
    /// the stream is gone; librdkafka's commit errors.
    pub(crate) async fn commit(&self, generation: u64, partition: u32, offset: u64) -> Result<()> {
        let member = self.shared()?;
        let moved_on = blocking(move || commit_in(&member, generation, partition, offset)).await?;
        match moved_on {
            Some(current) => Err(Error::IllegalGeneration {
                topic: self.topic.clone(),
                group: self.group.clone(),
                member: self.member_id.clone(),
                generation,
                current,
            }),
            None => Ok(()),
        }
    }

    /// As [`KafkaCommits::commit`], on a thread of its own, its answer ignored (a dropped
    /// stream's pending commits: the member closes once this thread lets go of it).
    pub(crate) fn commit_detached(&self, generation: u64, partition: u32, offset: u64) {
        let Ok(member) = self.shared() else { return };
        let _ = std::thread::Builder::new()
            .name("nanokafka-commit".into())
            .spawn(move || commit_in(&member, generation, partition, offset));
    }

    /// Leaves the group and waits until librdkafka has.
    ///
    /// # Errors
    /// `BrokerStopped` when the stream is gone.
    pub(crate) async fn leave(&self) -> Result<()> {
        let member = self.shared()?;
        blocking(move || {
            lock(&member)?.leave();
            Ok(())
        })
        .await
    }
}

/// Commits unless the member moved on from `generation`: then its current one.
fn commit_in(member: &Shared, generation: u64, partition: u32, offset: u64) -> Result<Option<u64>> {
    let member = lock(member)?;
    let current = member.assignment().generation;
    if current != generation {
        return Ok(Some(current));
    }
    member.commit(partition, offset).map(|()| None)
}
