//! What the Kafka listener's groups need of the broker: membership of native groups with
//! the group's own options, committed offsets in Kafka's meaning, and group descriptions;
//! and the operator's offset reset built on them (`nanokafka groups reset-offsets`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures::future::join_all;

use super::AsyncNanoKafka;
use crate::actors::broker::GetGroupSettings;
use crate::actors::topic::{
    CommittedOffsets, DescribeGroups, JoinAsKafkaMember, SetCommittedOffset,
};
use crate::clock::SharedClock;
use crate::error::{Error, Result};
use crate::group::{Assignment, GroupOptions};
use crate::messages::ResetOffset;
use crate::types::GroupStats;

impl AsyncNanoKafka {
    /// Joins `group` on `topic` as `member` with the group's options, or `options` when the
    /// group is new; its client still holds `holding`. See [`JoinAsKafkaMember`].
    ///
    /// # Errors
    /// `InvalidId`, `UnknownTopic`, `BrokerStopped`.
    pub(crate) async fn join_group_as_kafka_member(
        &self,
        topic: &str,
        group: &str,
        member: &str,
        options: GroupOptions,
        holding: BTreeSet<u32>,
    ) -> Result<Assignment> {
        self.ask(JoinAsKafkaMember {
            topic: topic.to_owned(),
            group: group.to_owned(),
            member: member.to_owned(),
            options,
            holding,
        })
        .await
    }

    /// Sets `group`'s committed offset of `partition` to `offset`, the next offset to read
    /// (Kafka's meaning, any offset; [`AsyncNanoKafka::commit`] of `o` stores `o + 1`), with
    /// `metadata`.
    ///
    /// # Errors
    /// As [`SetCommittedOffset`], plus `UnknownTopic`, `BrokerStopped`.
    pub(crate) async fn set_committed_offset(
        &self,
        topic: &str,
        group: &str,
        partition: u32,
        (offset, metadata): (u64, &str),
    ) -> Result<()> {
        self.ask(SetCommittedOffset {
            topic: topic.to_owned(),
            group: group.to_owned(),
            partition,
            offset,
            metadata: metadata.to_owned(),
        })
        .await
    }

    /// Moves `group`'s committed offset of `partition` of `topic` to `offset`, the next
    /// offset the group reads (Kafka's `kafka-consumer-groups --reset-offsets`): `offset`
    /// must be within the partition's `[log start, log end]` (the log end: nothing left to
    /// read). The group need not exist yet.
    ///
    /// Refused while the group has live members on `topic`, as Kafka refuses a group that
    /// is not empty: they would read on from their position and their next commit would
    /// undo the reset. Membership lives in memory only, so a broker just opened on a data
    /// directory has no live members. The check and the write are two steps: a member that
    /// joins between them is not seen.
    ///
    /// # Errors
    /// `GroupNotEmpty`, `InvalidArgument` (offset outside the partition), `InvalidId`,
    /// `UnknownTopic`, `UnknownPartition`, `Io`, `PartitionRestarted`, `PartitionFailed`,
    /// `BrokerStopped`; `Unsupported` on the Kafka backend.
    pub async fn reset_offset(
        &self,
        topic: &str,
        group: &str,
        partition: u32,
        offset: u64,
    ) -> Result<()> {
        self.embedded("reset_offset")?;
        // Checked here too, so a bad group id is named before the topic is looked up.
        crate::config::validate_id("group", group)?;
        self.ask(ResetOffset {
            topic: topic.to_owned(),
            group: group.to_owned(),
            partition,
            offset,
        })
        .await
    }

    /// `group`'s committed offset and its metadata on each partition of `topic`, in
    /// partition order (`None`: no commit there; a partition that cannot answer has its
    /// error).
    ///
    /// # Errors
    /// `UnknownTopic`, `BrokerStopped`.
    pub(crate) async fn committed_offsets(
        &self,
        topic: &str,
        group: &str,
    ) -> Result<Vec<Result<Option<crate::storage::Committed>>>> {
        self.ask(CommittedOffsets {
            topic: topic.to_owned(),
            group: group.to_owned(),
        })
        .await
    }

    /// `group`'s native group on `topic`: generation and assignment, `None` when it has no
    /// member ever.
    ///
    /// # Errors
    /// `UnknownTopic`, `BrokerStopped`.
    pub(crate) async fn describe_native_group(
        &self,
        topic: &str,
        group: &str,
    ) -> Result<Option<GroupStats>> {
        let mut described = self
            .ask(DescribeGroups {
                topic: topic.to_owned(),
                groups: Some(vec![group.to_owned()]),
            })
            .await?;
        Ok(described.remove(group))
    }

    /// Every topic's native groups (or those named `groups`): group → topic → its
    /// generation and assignment (no lag). One message per topic and group, no partition
    /// is asked.
    ///
    /// # Errors
    /// `BrokerStopped`.
    pub(crate) async fn describe_native_groups(
        &self,
        groups: Option<&[String]>,
    ) -> Result<BTreeMap<String, BTreeMap<String, GroupStats>>> {
        let topics = self.list_topics().await?;
        let asks = topics.keys().map(|topic| {
            self.ask(DescribeGroups {
                topic: topic.clone(),
                groups: groups.map(<[String]>::to_vec),
            })
        });
        let mut by_group: BTreeMap<String, BTreeMap<String, GroupStats>> = BTreeMap::new();
        for (topic, described) in topics.keys().zip(join_all(asks).await) {
            match described {
                Ok(described) => {
                    for (group, stats) in described {
                        by_group
                            .entry(group)
                            .or_default()
                            .insert(topic.clone(), stats);
                    }
                }
                // A topic is never deleted: only a stopping broker fails here.
                Err(Error::UnknownTopic { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(by_group)
    }

    /// The session timeout and clock the broker's groups run on.
    ///
    /// # Errors
    /// `BrokerStopped`.
    pub(crate) async fn group_settings(&self) -> Result<(Duration, SharedClock)> {
        self.addr()?
            .send(GetGroupSettings)
            .await
            .map_err(|_| Error::BrokerStopped)
    }
}
