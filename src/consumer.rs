//! `Consumer<T>`: a Kafka-style consumer handle beside the flat `poll` / `commit` calls.
//!
//! The flat `poll` re-delivers from the committed offset until a commit. A `Consumer`
//! instead keeps an in-memory position per partition, like Kafka's `KafkaConsumer`:
//! `poll_batch` advances it, so nothing is re-delivered inside a generation. Reading resumes
//! from the committed offsets after a rebalance (a new generation), after the member was
//! evicted or its coordinator restarted (it rejoins by itself), and a `seek` moves one
//! partition's position. Commits are fenced: one made with an older generation, or for a
//! partition the member no longer owns, is refused (`IllegalGeneration`,
//! `PartitionNotAssigned`) and changes nothing, so a consumer that lost a partition in a
//! rebalance cannot overwrite its new owner's progress. Dropping the handle leaves the group.
//!
//! On the Kafka backend the consumer is a librdkafka group member (`kafka::member`), with the
//! same calls; its generations count the assignments it received.

use std::marker::PhantomData;
use std::time::Duration;

use serde::de::DeserializeOwned;

use crate::actors::coordinator::FetchedBatch;
use crate::error::{Error, Result};
use crate::group::{Assignment, GroupOptions, Positions};
use crate::handle::NanoKafka;
use crate::messages::{ConsumerPoll, FencedCommit, LeaveGroup};
use crate::types::Record;

/// A group member with its own positions. See the module docs.
#[derive(Debug)]
pub struct Consumer<T> {
    broker: NanoKafka,
    topic: String,
    group: String,
    member: String,
    options: GroupOptions,
    assignment: Assignment,
    /// The next offset to read per partition read in this generation.
    positions: Positions,
    /// The Kafka backend's member, which keeps its own positions; `None` when embedded.
    #[cfg(feature = "kafka")]
    kafka: Option<crate::kafka::member::KafkaMember>,
    payload: PhantomData<fn() -> T>,
}

impl NanoKafka {
    /// Joins `group` as `member` and returns a [`Consumer`] of `T` payloads.
    ///
    /// # Errors
    /// As [`NanoKafka::join_group`].
    pub fn consumer<T: DeserializeOwned>(
        &self,
        topic: &str,
        group: &str,
        member: &str,
    ) -> Result<Consumer<T>> {
        self.consumer_with(topic, group, member, GroupOptions::default())
    }

    /// As [`NanoKafka::consumer`], with the group's options (assignor, start position).
    ///
    /// # Errors
    /// As [`NanoKafka::join_group_with`].
    pub fn consumer_with<T: DeserializeOwned>(
        &self,
        topic: &str,
        group: &str,
        member: &str,
        options: impl Into<GroupOptions>,
    ) -> Result<Consumer<T>> {
        let options = options.into();
        #[cfg(feature = "kafka")]
        let kafka = self.join_kafka_member(topic, group, member, options)?;
        #[cfg(feature = "kafka")]
        let assignment = match &kafka {
            Some(joined) => joined.assignment(),
            None => self.join_group_with(topic, group, member, options)?,
        };
        #[cfg(not(feature = "kafka"))]
        let assignment = self.join_group_with(topic, group, member, options)?;
        Ok(Consumer {
            broker: self.clone(),
            topic: topic.to_owned(),
            group: group.to_owned(),
            member: member.to_owned(),
            options,
            positions: Positions::new(assignment.generation),
            assignment,
            #[cfg(feature = "kafka")]
            kafka,
            payload: PhantomData,
        })
    }

    /// On the Kafka backend, joins a librdkafka member on this thread; `None` when embedded.
    #[cfg(feature = "kafka")]
    fn join_kafka_member(
        &self,
        topic: &str,
        group: &str,
        member: &str,
        options: GroupOptions,
    ) -> Result<Option<crate::kafka::member::KafkaMember>> {
        let Some(backend) = self.async_handle().kafka_backend().cloned() else {
            return Ok(None);
        };
        crate::handle::refuse_actix_thread()?;
        backend.check_open()?;
        let joined = crate::kafka::member::KafkaMember::join(
            backend.config(),
            topic,
            group,
            member,
            options,
        )?;
        Ok(Some(joined))
    }
}

impl<T: DeserializeOwned> Consumer<T> {
    /// The member's assignment as of its last poll, heartbeat or join.
    pub fn assignment(&self) -> &Assignment {
        &self.assignment
    }

    /// The next offset this consumer reads in `partition`, if it has read there in this
    /// generation (otherwise it reads from the committed offset).
    pub fn position(&self, partition: u32) -> Option<u64> {
        #[cfg(feature = "kafka")]
        if let Some(member) = &self.kafka {
            return member.position(partition);
        }
        self.positions.get(partition)
    }

    /// Up to `max_records` consecutive records of one assigned partition from this
    /// consumer's position, waiting up to `timeout` for the first. Advances the position.
    ///
    /// # Errors
    /// As [`NanoKafka::poll_batch`]; on `Decode` the position stays before the bad record
    /// (commit it with [`Consumer::commit_offset`] to skip it).
    pub fn poll_batch(&mut self, max_records: usize, timeout: Duration) -> Result<Vec<Record<T>>> {
        #[cfg(feature = "kafka")]
        if let Some(member) = &mut self.kafka {
            crate::handle::refuse_actix_thread()?;
            let records = member.poll_batch(max_records, timeout)?;
            self.assignment = member.assignment();
            return records.into_iter().map(|r| r.decode(&self.topic)).collect();
        }
        let batch = match self.fetch(max_records, timeout) {
            Err(Error::UnknownMember { .. }) => {
                // Evicted, or the coordinator restarted: join again, read from the commits.
                self.rejoin()?;
                self.fetch(max_records, timeout)?
            }
            other => other?,
        };
        self.positions.enter(batch.assignment.generation);
        self.assignment = batch.assignment;
        // Decoded straight from the read buffer, on this thread.
        let records = match batch.fetched {
            Some(fetched) => fetched.decode::<T>(&self.topic)?,
            None => Vec::new(),
        };
        if let Some(last) = records.last() {
            self.positions.delivered(last.partition, last.offset);
        }
        Ok(records)
    }

    fn fetch(&self, max_records: usize, timeout: Duration) -> Result<FetchedBatch> {
        let poll = ConsumerPoll {
            topic: self.topic.clone(),
            group: self.group.clone(),
            member: self.member.clone(),
            generation: self.positions.generation(),
            positions: self.positions.all().clone(),
            max_records,
            wait: (!timeout.is_zero()).then_some(timeout),
        };
        self.broker
            .call_async(|h| h.consumer_poll_fetched(poll), timeout)
    }

    fn rejoin(&mut self) -> Result<()> {
        self.assignment =
            self.broker
                .join_group_with(&self.topic, &self.group, &self.member, self.options)?;
        self.positions = Positions::new(self.assignment.generation);
        Ok(())
    }

    /// Commits `record` and everything before it in its partition, fenced by this
    /// consumer's generation.
    ///
    /// # Errors
    /// `IllegalGeneration` (the group rebalanced: poll again and re-process from the
    /// committed offset), `PartitionNotAssigned`, `UnknownMember`, `OffsetOutOfRange`, `Io`.
    pub fn commit(&mut self, record: &Record<T>) -> Result<()> {
        self.commit_offset(record.partition, record.offset)
    }

    /// Commits `offset` of `partition`, fenced by this consumer's generation.
    ///
    /// # Errors
    /// As [`Consumer::commit`].
    pub fn commit_offset(&mut self, partition: u32, offset: u64) -> Result<()> {
        #[cfg(feature = "kafka")]
        if let Some(member) = &self.kafka {
            crate::handle::refuse_actix_thread()?;
            return member.commit(partition, offset);
        }
        let commit = FencedCommit {
            topic: self.topic.clone(),
            group: self.group.clone(),
            member: self.member.clone(),
            generation: self.assignment.generation,
            partition,
            offset,
        };
        self.broker
            .call_async(|h| h.fenced_commit(commit), Duration::ZERO)?;
        self.positions.committed(partition, offset);
        Ok(())
    }

    /// Moves this consumer's position in `partition` to `offset` (the next record read).
    /// Positions belong to a generation: if the group rebalanced since this consumer last
    /// polled or sent a heartbeat, its next poll drops them, this seek included, and reads
    /// from the committed offsets (Kafka's eager rebalance). A position past the log end makes
    /// polls fail with `OffsetOutOfRange` until the consumer seeks back.
    ///
    /// # Errors
    /// `PartitionNotAssigned` when the partition is not in the current assignment.
    pub fn seek(&mut self, partition: u32, offset: u64) -> Result<()> {
        #[cfg(feature = "kafka")]
        if let Some(member) = &mut self.kafka {
            crate::handle::refuse_actix_thread()?;
            return member.seek(partition, offset);
        }
        if !self.assignment.partitions.contains(&partition) {
            return Err(Error::PartitionNotAssigned {
                topic: self.topic.clone(),
                group: self.group.clone(),
                member: self.member.clone(),
                partition,
                generation: self.assignment.generation,
            });
        }
        self.positions.seek(partition, offset);
        Ok(())
    }

    /// A sign of life; refreshes the assignment (positions are dropped on a new generation).
    ///
    /// # Errors
    /// `UnknownMember` when evicted (the next poll rejoins).
    pub fn heartbeat(&mut self) -> Result<&Assignment> {
        #[cfg(feature = "kafka")]
        if let Some(member) = &mut self.kafka {
            crate::handle::refuse_actix_thread()?;
            self.assignment = member.heartbeat()?;
            return Ok(&self.assignment);
        }
        let assignment = self
            .broker
            .heartbeat(&self.topic, &self.group, &self.member)?;
        self.positions.enter(assignment.generation);
        self.assignment = assignment;
        Ok(&self.assignment)
    }
}

impl<T> Drop for Consumer<T> {
    /// Leaves the group, so its partitions go to the other members at once instead of after
    /// the session timeout.
    /// Dropped on an actix/tokio thread, where it must not block, it sends the leave without
    /// waiting for the answer (it is still handled before any later request of this thread).
    fn drop(&mut self) {
        #[cfg(feature = "kafka")]
        if let Some(member) = self.kafka.take() {
            // librdkafka's close blocks until the group acknowledges the leave: off an
            // actix/tokio thread, it runs on a short-lived thread of its own.
            if crate::handle::refuse_actix_thread().is_err() {
                let _ = std::thread::Builder::new()
                    .name("nanokafka-leave".into())
                    .spawn(move || drop(member));
            }
            return;
        }
        let left = self
            .broker
            .leave_group(&self.topic, &self.group, &self.member);
        if let Err(Error::BlockingInActorContext) = left {
            self.broker.addr().do_send(LeaveGroup {
                topic: std::mem::take(&mut self.topic),
                group: std::mem::take(&mut self.group),
                member: std::mem::take(&mut self.member),
            });
        }
    }
}
