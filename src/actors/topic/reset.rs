//! The operator's offset reset (`ResetOffset`, `nanokafka groups reset-offsets`): three
//! steps the topic already answers (is the group empty? the partition's bounds; the write),
//! composed by messages to the topic itself so that it keeps serving meanwhile.

use actix::prelude::*;

use super::{ask, DescribeGroups, SetCommittedOffset, TopicActor};
use crate::config::validate_id;
use crate::error::{Error, Result};
use crate::messages::{ListKafkaOffset, OffsetSpec, ResetOffset};

impl Handler<ResetOffset> for TopicActor {
    type Result = ResponseFuture<Result<()>>;

    fn handle(&mut self, msg: ResetOffset, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "ResetOffset").entered();
        Box::pin(reset(ctx.address(), msg))
    }
}

async fn reset(topic: Addr<TopicActor>, msg: ResetOffset) -> Result<()> {
    let ResetOffset {
        topic: name,
        group,
        partition,
        offset,
    } = msg;
    validate_id("group", &group)?;
    let mut described = ask(
        topic.clone(),
        DescribeGroups {
            topic: name.clone(),
            groups: Some(vec![group.clone()]),
        },
    )
    .await?;
    if let Some(live) = described.remove(&group) {
        if !live.assignment.is_empty() {
            return Err(Error::GroupNotEmpty {
                topic: name,
                group,
                members: live.assignment.into_keys().collect(),
            });
        }
    }
    let bound = |spec| {
        let listed = ask(
            topic.clone(),
            ListKafkaOffset {
                topic: name.clone(),
                partition,
                spec,
            },
        );
        async move { Ok::<_, Error>(listed.await?.map_or(0, |l| l.offset)) }
    };
    let (start, end) = (
        bound(OffsetSpec::Earliest).await?,
        bound(OffsetSpec::Latest).await?,
    );
    if !(start..=end).contains(&offset) {
        return Err(Error::InvalidArgument {
            name: "offset",
            reason: format!(
                "{offset} is outside {name}/{partition}, which holds offsets {start} to \
                 {end} (the log end)"
            ),
        });
    }
    let set = SetCommittedOffset {
        topic: name,
        group,
        partition,
        offset,
        // As Kafka's reset: the offset alone.
        metadata: String::new(),
    };
    ask(topic, set).await
}
