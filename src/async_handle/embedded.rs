//! The embedded backend of an [`AsyncNanoKafka`](super::AsyncNanoKafka): the broker actor's
//! address, and the direct routes the handle learns to its partitions and group coordinators
//! (see the handle's docs). The requests here are the ones with more to them than one
//! message to the broker: produces, polls and commits take the direct route when they can.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;

use super::routes::{ProducePath, RouteCache};
use crate::actors::broker::BrokerActor;
use crate::actors::coordinator::{
    Chain, CommitAsMember, ConsumerPollGroup, FetchedBatch, PollGroup, PollPause,
};
use crate::actors::lane::{append_routed, Placed};
use crate::actors::partition::CommitOffset;
use crate::actors::topic::{
    check_max_records, ConsumerPollFetched, GetGroupRoute, GetRoute, PollFetched,
};
use crate::config::SchemaValidation;
use crate::error::{Error, Result};
use crate::messages::{Commit, ConsumerPoll, FencedCommit, Poll, ProduceBatch};
use crate::metrics::listener::ListenerMetrics;
use crate::partition::Fetched;
use crate::routing::{check_keys, route as route_batch};
use crate::storage::RecordBatch;
use crate::types::Delivery;

/// The embedded broker as one handle (and its clones) reaches it.
#[derive(Debug, Clone)]
pub(crate) struct Embedded {
    pub(super) addr: Addr<BrokerActor>,
    /// Topic → how its produces travel; shared by clones.
    pub(super) routes: RouteCache,
    /// Each caller of this handle waits for a produce's answer before its next produce (the
    /// blocking handle's): a known route is used at once, as no earlier produce of the same
    /// caller can still be on its way through the broker.
    pub(super) sequential: bool,
    /// The Kafka listener's counters, for `stats()`, when the broker was built with one.
    pub(super) listener_metrics: Option<Arc<ListenerMetrics>>,
}

impl Embedded {
    pub(super) fn new(addr: Addr<BrokerActor>) -> Self {
        Embedded {
            addr,
            routes: RouteCache::default(),
            sequential: false,
            listener_metrics: None,
        }
    }

    /// Sends `msg` to the broker actor; `BrokerStopped` when it is gone.
    pub(super) async fn ask<M, T>(&self, msg: M) -> Result<T>
    where
        M: Message<Result = Result<T>> + Send + 'static,
        T: Send + 'static,
        BrokerActor: Handler<M>,
    {
        self.addr
            .send(msg)
            .await
            .map_err(|_| Error::BrokerStopped)?
    }

    /// Learns `topic`'s direct route (a no-op when it is known or a produce of this handle
    /// is on its way through the broker).
    pub(super) async fn learn_route(&self, topic: &str) {
        let Ok(route) = self
            .ask(GetRoute {
                topic: topic.to_owned(),
            })
            .await
        else {
            return;
        };
        self.routes.learn(topic, route);
    }

    /// `topic`'s schema validation, from its cached route (learned first when missing): no
    /// message to the broker while the route is live, and an alter that changes it makes
    /// the route stale.
    ///
    /// # Errors
    /// `UnknownTopic`, `BrokerStopped`.
    pub(super) async fn schema_validation(&self, topic: &str) -> Result<SchemaValidation> {
        if let Some(known) = self.routes.schema_validation(topic) {
            return Ok(known);
        }
        let route = self
            .ask(GetRoute {
                topic: topic.to_owned(),
            })
            .await?;
        let validation = route.schema_validation;
        self.routes.learn(topic, route);
        Ok(validation)
    }

    /// Learns `group`'s coordinator on `topic` once the group is known to exist there (a
    /// request for it through the broker succeeded), so that its next polls and commits
    /// take the direct route. A no-op when it is known or the topic's route is not.
    async fn learn_group(&self, topic: &str, group: &str) {
        let Some(route) = self.routes.lacking_group(topic, group) else {
            return;
        };
        let asked = self.ask(GetGroupRoute {
            topic: topic.to_owned(),
            group: group.to_owned(),
        });
        if let Ok(coordinator) = asked.await {
            route.learn_group(group, coordinator);
        }
    }

    /// A produce, answered with where the records went.
    ///
    /// Its future is small, and the direct route allocates nothing past the batch and the
    /// lane's answer: a caller with hundreds of produces in flight moves and keeps each of
    /// them. So the rare path (a route not learned yet) is boxed.
    pub(super) async fn produce_placed(
        &self,
        topic: &str,
        partition: Option<u32>,
        batch: RecordBatch,
    ) -> Result<Placed> {
        // Nothing is awaited before the records are enqueued: that keeps the call order.
        match self.routes.path(topic, self.sequential) {
            ProducePath::Direct(route) => {
                let limits = (route.lanes.len() as u32, route.limits);
                check_keys((topic, partition), route.cleanup_policy, &batch)?;
                let next = || route.next_keyless.fetch_add(1, Ordering::Relaxed);
                let routes = route_batch(topic, limits, partition, &batch, next)?;
                let appended = append_routed(&route.lanes, batch, routes);
                // The blocking handle spins in its own wait; an async caller's task is kept
                // awake for a quick answer (see `Hurry`).
                match self.sequential {
                    true => appended.await,
                    false => crate::spin::Hurry::new(appended).await,
                }
            }
            ProducePath::ViaBroker { ask_route } => {
                let via_broker = self.produce_via_broker(topic, partition, batch, ask_route);
                Box::pin(via_broker).await.map(Placed::Each)
            }
        }
    }

    /// A produce sent to the broker's actor, for a topic whose route this handle has not
    /// learned yet (it asks for it afterwards when `ask_route`).
    async fn produce_via_broker(
        &self,
        topic: &str,
        partition: Option<u32>,
        batch: RecordBatch,
        ask_route: bool,
    ) -> Result<Vec<Delivery>> {
        let produce = ProduceBatch {
            topic: topic.to_owned(),
            partition,
            batch,
        };
        let result = self
            .addr
            .send(produce)
            .await
            .map_err(|_| Error::BrokerStopped)
            .and_then(|r| r);
        let learned = match ask_route {
            true => self
                .ask(GetRoute {
                    topic: topic.to_owned(),
                })
                .await
                .ok(),
            false => None,
        };
        self.routes.finish_via_broker(topic, ask_route, learned);
        result
    }

    /// The `Consumer` handle's poll, the records left in their read buffer.
    pub(super) async fn consumer_poll_fetched(
        &self,
        poll: ConsumerPoll,
        (wait_first, chain): (bool, bool),
    ) -> Result<FetchedBatch> {
        if let Some((route, coordinator)) = self.routes.poll_target(&poll.topic, &poll.group) {
            check_max_records(poll.max_records)?;
            let request = coordinator.send(ConsumerPollGroup {
                member: poll.member.clone(),
                generation: poll.generation,
                positions: poll.positions.clone(),
                max_records: poll.max_records,
                wait: poll.wait,
                // A blocking `Consumer`'s long poll: woken early, as in `poll_fetched`.
                pause: PollPause {
                    early_wake: poll.wait.and_then(|_| crate::wait::long_poll_waker()),
                    wait_first,
                    ..PollPause::default()
                },
                chain: if chain { Chain::Ask } else { Chain::Off },
            });
            match request.await {
                Ok(batch) => return batch,
                // As in `poll_fetched`.
                Err(_) if route.is_live() => return Err(Error::BrokerStopped),
                Err(_) => {}
            }
        }
        // Boxed: the polls that take the route above do not carry this path's state in
        // theirs (see `consumer::poll_prepared`).
        Box::pin(self.consumer_poll_via_broker(poll)).await
    }

    /// [`Embedded::consumer_poll_fetched`] when the group's coordinator is not known yet:
    /// through the broker, which tells it.
    async fn consumer_poll_via_broker(&self, poll: ConsumerPoll) -> Result<FetchedBatch> {
        let (topic, group) = (poll.topic.clone(), poll.group.clone());
        let batch = self.ask(ConsumerPollFetched(poll)).await?;
        self.learn_group(&topic, &group).await;
        Ok(batch)
    }

    /// A group poll answered with the records in their read buffer: the records are copied
    /// or decoded by the caller, on its thread, not on the partition's.
    pub(super) async fn poll_fetched(
        &self,
        (topic, group, member): (&str, &str, &str),
        max_records: usize,
        timeout: Duration,
    ) -> Result<Option<Fetched>> {
        let wait = (!timeout.is_zero()).then_some(timeout);
        if let Some((route, coordinator)) = self.routes.poll_target(topic, group) {
            check_max_records(max_records)?;
            let poll = coordinator.send(PollGroup {
                member: member.to_owned(),
                max_records,
                wait,
                // A blocking caller's long poll: its thread is woken as soon as an append
                // reaches one of its partitions.
                early_wake: wait.and_then(|_| crate::wait::long_poll_waker()),
            });
            match poll.await {
                Ok(fetched) => return fetched,
                // The coordinator stopped: its topic was deleted (the route is stale now, and
                // the broker answers for the topic's successor) or the broker stopped.
                Err(_) if route.is_live() => return Err(Error::BrokerStopped),
                Err(_) => {}
            }
        }
        let fetched = self
            .ask(PollFetched(Poll {
                topic: topic.to_owned(),
                group: group.to_owned(),
                member: member.to_owned(),
                max_records,
                wait,
            }))
            .await?;
        self.learn_group(topic, group).await;
        Ok(fetched)
    }

    /// A commit fenced by generation and ownership, straight to the group's coordinator (which
    /// fences it: `CommitAsMember`) when the group's route is known: no broker hop, so a
    /// stream committing each record does not wake the broker thread twice per commit.
    pub(super) async fn fenced_commit(&self, commit: FencedCommit) -> Result<()> {
        let direct = self
            .routes
            .poll_target(&commit.topic, &commit.group)
            .filter(|(route, _)| (commit.partition as usize) < route.partitions.len());
        if let Some((route, coordinator)) = direct {
            let request = coordinator.send(CommitAsMember {
                member: commit.member.clone(),
                generation: commit.generation,
                partition: commit.partition,
                offset: commit.offset,
            });
            match request.await {
                Ok(result) => return result,
                // As in `poll_fetched`.
                Err(_) if route.is_live() => return Err(Error::BrokerStopped),
                Err(_) => {}
            }
        }
        let (topic, group) = (commit.topic.clone(), commit.group.clone());
        self.ask(commit).await?;
        self.learn_group(&topic, &group).await;
        Ok(())
    }

    /// Commits `offset` of `partition` for `group`, straight to the partition when the
    /// group's route is known.
    pub(super) async fn commit(
        &self,
        topic: &str,
        group: &str,
        partition: u32,
        offset: u64,
    ) -> Result<()> {
        if let Some((route, target)) = self.routes.commit_target(topic, group, partition) {
            let commit = target.send(CommitOffset {
                group: group.into(),
                offset,
            });
            match commit.await {
                Ok(result) => return result,
                // The partition closed: the topic was deleted (the route is stale now, and
                // the broker answers `UnknownTopic`) or the broker stopped.
                Err(_) if route.is_live() => return Err(Error::BrokerStopped),
                Err(_) => {}
            }
        }
        self.ask(Commit {
            topic: topic.to_owned(),
            group: group.to_owned(),
            partition,
            offset,
        })
        .await?;
        self.learn_group(topic, group).await;
        Ok(())
    }
}
