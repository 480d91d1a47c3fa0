//! `BrokerActor`: the root. Holds the data-directory lock, the topic registry and the I/O
//! arbiters; creates topics; forwards every topic message to its `TopicActor`. Runs on the
//! broker's own System thread.

use std::collections::BTreeMap;
use std::sync::Arc;

use actix::dev::ToEnvelope;
use actix::prelude::*;
use futures::future::join_all;
use serde::de::DeserializeOwned;

use super::io_thread::{IoThread, IoThreadHandle};
use super::subscription::{subscribe, BrokerRequests};
use super::supervise::{catch_future_panic, guarded, guarded_future, guarded_reply};
use super::topic::{
    AlterTopicActors, CloseTopic, CrashCoordinator, DeleteTopicActors, DescribeTopic, TopicActor,
};
use super::{BrokerSettings, MAILBOX_CAPACITY};
use crate::config::TopicConfig;
use crate::error::{Error, Result};
use crate::messages::{
    AllocateProducerId, AlterTopic, BrokerDescription, CrashBroker, CrashGroupCoordinator,
    CreateTopic, DeleteTopic, DescribeBroker, GetStats, GetTopicConfig, JoinGroup, ListTopics,
    Shutdown, Subscribe, Subscription, TopicIds, TopicMessage,
};
use crate::storage::data_dir::DeleteError;
use crate::storage::producer_ids::ProducerIdBlocks;
use crate::storage::DataDir;
use crate::types::{BrokerStats, TopicId};

/// See the module docs.
#[derive(Debug)]
pub struct BrokerActor {
    /// Parent of every handler's span: names the actor in every event.
    span: tracing::Span,
    /// "broker", for errors (shared, not allocated per request).
    label: Arc<str>,
    settings: Arc<BrokerSettings>,
    /// `None` after shutdown: the lock is released.
    data_dir: Option<DataDir>,
    /// Topics found on disk at start, started in `started`.
    initial_topics: Vec<(String, TopicConfig)>,
    topics: BTreeMap<String, Addr<TopicActor>>,
    /// Each topic's config as created (for `ListTopics`; a topic's actors keep their own).
    configs: BTreeMap<String, TopicConfig>,
    /// Topic ids read or made so far (each read from disk on first use; see `TopicIds`).
    ids: BTreeMap<String, TopicId>,
    /// Partition actors run here, spread so that one partition's fsync never stalls the rest.
    arbiters: Vec<IoThread>,
    /// Where the next topic's partition 0 goes, so small topics spread over the arbiters.
    next_arbiter: usize,
    restarts: u64,
    /// Kafka producer ids (InitProducerId), loaded on the first request.
    producer_ids: Option<ProducerIdBlocks>,
    /// A shutdown has begun: topics are closing, requests meet `BrokerStopped` (not
    /// `UnknownTopic`, which would read as a deleted topic).
    stopping: bool,
}

impl BrokerActor {
    pub(crate) fn new(
        settings: Arc<BrokerSettings>,
        data_dir: DataDir,
        initial_topics: Vec<(String, TopicConfig)>,
        arbiters: Vec<IoThread>,
    ) -> Self {
        BrokerActor {
            span: tracing::info_span!("broker", data_dir = %settings.data_dir.display()),
            label: Arc::from("broker"),
            settings,
            data_dir: Some(data_dir),
            initial_topics,
            topics: BTreeMap::new(),
            configs: BTreeMap::new(),
            ids: BTreeMap::new(),
            arbiters,
            next_arbiter: 0,
            restarts: 0,
            producer_ids: None,
            stopping: false,
        }
    }

    fn start_topic(&mut self, name: &str, config: &TopicConfig) {
        let handles: Vec<IoThreadHandle> = self.arbiters.iter().map(IoThread::handle).collect();
        let topic = TopicActor::new(
            name,
            config,
            self.settings.clone(),
            &handles,
            self.next_arbiter,
        );
        self.next_arbiter = (self.next_arbiter + config.partitions as usize) % handles.len().max(1);
        self.configs.insert(name.to_owned(), config.clone());
        self.topics.insert(
            name.to_owned(),
            Supervisor::start(move |ctx: &mut Context<TopicActor>| {
                ctx.set_mailbox_capacity(MAILBOX_CAPACITY);
                topic
            }),
        );
    }

    fn topic(&self, name: &str) -> Result<Addr<TopicActor>> {
        if self.data_dir.is_none() || self.stopping {
            return Err(Error::BrokerStopped);
        }
        self.topics
            .get(name)
            .cloned()
            .ok_or_else(|| Error::UnknownTopic {
                topic: name.to_owned(),
            })
    }
}

impl Actor for BrokerActor {
    type Context = Context<Self>;

    fn started(&mut self, _: &mut Context<Self>) {
        let _span = self.span.clone().entered();
        for (name, config) in std::mem::take(&mut self.initial_topics) {
            tracing::info!(topic = %name, partitions = config.partitions, "loading topic");
            self.start_topic(&name, &config);
        }
    }
}

impl Supervised for BrokerActor {
    fn restarting(&mut self, _: &mut Context<Self>) {
        let _span = self.span.clone().entered();
        self.restarts += 1;
        tracing::warn!(restarts = self.restarts, "broker actor restarted");
        crate::metrics::actor_restarted("broker");
    }
}

impl Handler<CrashBroker> for BrokerActor {
    type Result = Result<()>;

    fn handle(&mut self, _: CrashBroker, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "CrashBroker").entered();
        guarded(self, ctx, "broker", |_, _| {
            panic!("injected fault (CrashBroker)")
        });
        Ok(())
    }
}

impl Handler<CreateTopic> for BrokerActor {
    type Result = Result<()>;

    fn handle(&mut self, msg: CreateTopic, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "CreateTopic").entered();
        let name = self.label.clone();
        guarded_reply(self, ctx, &name, |act, _| {
            let data_dir = act.data_dir.as_ref().ok_or(Error::BrokerStopped)?;
            let id = crate::config::create_topic(data_dir, &msg.topic, &msg.config)?;
            tracing::info!(topic = %msg.topic, %id, config = ?msg.config, "created topic");
            act.ids.insert(msg.topic.clone(), id);
            act.start_topic(&msg.topic, &msg.config);
            Ok(())
        })
    }
}

/// Runs a task of a handle on the broker's thread, as a task of its own (a panic in it ends
/// that task only), until it ends or the broker's system stops: a [`crate::Table`]'s
/// follower, which a blocking handle's caller has no runtime to run.
pub(crate) struct RunTask(pub std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>);

impl Message for RunTask {
    type Result = ();
}

impl Handler<RunTask> for BrokerActor {
    type Result = ();

    fn handle(&mut self, task: RunTask, _: &mut Context<Self>) {
        actix::spawn(task.0);
    }
}

impl Handler<AllocateProducerId> for BrokerActor {
    type Result = Result<i64>;

    fn handle(&mut self, _: AllocateProducerId, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "AllocateProducerId").entered();
        let name = self.label.clone();
        guarded_reply(self, ctx, &name, |act, _| {
            let data_dir = act.data_dir.as_ref().ok_or(Error::BrokerStopped)?;
            let fs = act.settings.fs.clone();
            let blocks = match &mut act.producer_ids {
                Some(blocks) => blocks,
                None => act
                    .producer_ids
                    .insert(ProducerIdBlocks::open(fs.as_ref(), data_dir.path())?),
            };
            Ok(blocks.allocate(fs.as_ref())?)
        })
    }
}

/// Atomic: the broker serves nothing else until the topic's actors are stopped and its
/// files removed, so no request can reach a half-deleted topic and no create of the same
/// name can meet its files.
impl Handler<DeleteTopic> for BrokerActor {
    type Result = AtomicResponse<Self, Result<()>>;

    fn handle(&mut self, msg: DeleteTopic, _: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "DeleteTopic").entered();
        let topic = msg.topic;
        let (addr, config) = match self.topic(&topic) {
            Ok(addr) => (addr, self.configs.remove(&topic).unwrap_or_default()),
            Err(e) => return AtomicResponse::new(Box::pin(fut::ready(Err(e)))),
        };
        self.topics.remove(&topic);
        self.ids.remove(&topic);
        let stopped = addr.send(DeleteTopicActors);
        let stopped = async move {
            // A topic actor that is gone has no partitions left open either.
            let _ = stopped.await;
        };
        AtomicResponse::new(Box::pin(stopped.into_actor(self).map(move |(), act, _| {
            let _span = act.span.clone().entered();
            let data_dir = act.data_dir.as_ref().ok_or(Error::BrokerStopped)?;
            match data_dir.delete_topic(&topic) {
                Ok(()) => tracing::info!(%topic, "deleted topic"),
                Err(DeleteError::Leftovers(e)) => {
                    tracing::warn!(%topic, error = %e, "deleted topic; its files are removed later")
                }
                Err(DeleteError::NotDeleted(e)) => {
                    tracing::error!(%topic, error = %e, "cannot delete topic; it stays");
                    act.start_topic(&topic, &config);
                    return Err(e.into());
                }
            }
            Ok(())
        })))
    }
}

impl BrokerActor {
    /// Checks and persists an alter: the new config, with the topic's address when the
    /// running topic must apply it (not for `validate_only` or a change to the same values).
    fn alter_topic(&mut self, msg: &AlterTopic) -> Result<(Option<Addr<TopicActor>>, TopicConfig)> {
        let addr = self.topic(&msg.topic)?;
        let data_dir = self.data_dir.as_ref().ok_or(Error::BrokerStopped)?;
        let current = self.configs.get(&msg.topic).cloned().unwrap_or_default();
        let next = msg.changes.apply_to(&current)?;
        if msg.validate_only || next == current {
            return Ok((None, next));
        }
        crate::config::alter_topic(data_dir, &msg.topic, &current, &next)?;
        tracing::info!(topic = %msg.topic, from = ?current, to = ?next, "altered topic");
        self.configs.insert(msg.topic.clone(), next.clone());
        Ok((Some(addr), next))
    }
}

/// The config is checked and persisted here, in the broker's order, so alters of a topic
/// apply one after another; the topic actor then applies it before any request the broker
/// forwards afterwards.
impl Handler<AlterTopic> for BrokerActor {
    type Result = ResponseFuture<Result<TopicConfig>>;

    fn handle(&mut self, msg: AlterTopic, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "AlterTopic").entered();
        let name = self.label.clone();
        guarded_future(self, ctx, &name, |act, _| match act.alter_topic(&msg) {
            Ok((None, next)) => Box::pin(async move { Ok(next) }),
            Ok((Some(addr), next)) => {
                let applied = addr.send(AlterTopicActors {
                    config: next.clone(),
                });
                Box::pin(async move {
                    applied.await.map_err(|_| Error::BrokerStopped)?;
                    Ok(next)
                })
            }
            Err(e) => Box::pin(async { Err(e) }),
        })
    }
}

impl Handler<DescribeBroker> for BrokerActor {
    type Result = Result<BrokerDescription>;

    fn handle(&mut self, _: DescribeBroker, _: &mut Context<Self>) -> Self::Result {
        if self.data_dir.is_none() {
            return Err(Error::BrokerStopped);
        }
        Ok(BrokerDescription {
            data_dir: self.settings.data_dir.clone(),
            max_record_bytes: self.settings.max_record_bytes,
            max_request_bytes: self.settings.max_request_bytes,
        })
    }
}

impl Handler<ListTopics> for BrokerActor {
    type Result = Result<BTreeMap<String, TopicConfig>>;

    fn handle(&mut self, _: ListTopics, _: &mut Context<Self>) -> Self::Result {
        if self.data_dir.is_none() {
            return Err(Error::BrokerStopped);
        }
        Ok(self.configs.clone())
    }
}

impl Handler<TopicIds> for BrokerActor {
    type Result = Result<BTreeMap<String, TopicId>>;

    fn handle(&mut self, _: TopicIds, _: &mut Context<Self>) -> Self::Result {
        let data_dir = self.data_dir.as_ref().ok_or(Error::BrokerStopped)?;
        for topic in self.configs.keys() {
            if self.ids.contains_key(topic) {
                continue;
            }
            match data_dir.topic_id(topic) {
                Ok(id) => {
                    self.ids.insert(topic.clone(), id);
                }
                Err(e) => tracing::warn!(topic, error = %e, "topic id unreadable; left out"),
            }
        }
        Ok(self.ids.clone())
    }
}

impl Handler<GetTopicConfig> for BrokerActor {
    type Result = Result<TopicConfig>;

    fn handle(&mut self, msg: GetTopicConfig, _: &mut Context<Self>) -> Self::Result {
        if self.data_dir.is_none() {
            return Err(Error::BrokerStopped);
        }
        self.configs
            .get(&msg.topic)
            .cloned()
            .ok_or(Error::UnknownTopic { topic: msg.topic })
    }
}

/// Every topic message is forwarded to its topic's actor.
impl<M> Handler<M> for BrokerActor
where
    M: TopicMessage,
    TopicActor: Handler<M>,
    <TopicActor as Actor>::Context: ToEnvelope<TopicActor, M>,
{
    type Result = ResponseFuture<Result<M::Reply>>;

    fn handle(&mut self, msg: M, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "forward").entered();
        let name = self.label.clone();
        guarded_future(self, ctx, &name, |act, _| {
            match act.topic(msg.topic()) {
                Ok(addr) => {
                    // Enqueued here, in this mailbox's order, so a caller's requests reach the
                    // topic in the order they were sent however the futures are polled.
                    let request = addr.send(msg);
                    Box::pin(async move { request.await.map_err(|_| Error::BrokerStopped)? })
                }
                Err(e) => Box::pin(async { Err(e) }),
            }
        })
    }
}

impl<T: DeserializeOwned + Send + 'static> Handler<Subscribe<T>> for BrokerActor {
    type Result = ResponseFuture<Result<Subscription>>;

    fn handle(&mut self, msg: Subscribe<T>, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "Subscribe").entered();
        let options = msg.options;
        if let Err(e) = options.validate() {
            return Box::pin(async move { Err(e) });
        }
        let address = ctx.address();
        let broker = BrokerRequests {
            poll: Arc::new(address.clone().recipient()),
            commit: Arc::new(address.clone().recipient()),
            join: address.clone().recipient(),
            leave: address.clone().recipient(),
            produce: address.clone().recipient(),
            create: address.clone().recipient(),
            group_route: address.recipient(),
            coordinator: None,
        };
        let join = JoinGroup {
            topic: msg.topic,
            group: msg.group,
            member: msg.member,
            options: options.group,
        };
        let subscribed = subscribe(broker, join, msg.recipient, options);
        Box::pin(catch_future_panic(self.label.clone(), subscribed))
    }
}

/// What a group's liveness runs on: the session timeout and the clock, for groups kept
/// outside the broker (the Kafka listener's `KafkaGroupActor`s). Sent through
/// `AsyncNanoKafka` by the listener's group registry (`listener::groups::KafkaGroups`) once,
/// before it starts its first group actor. Answered by the broker from its settings. Never
/// fails.
#[derive(Debug)]
pub struct GetGroupSettings;
impl Message for GetGroupSettings {
    type Result = (std::time::Duration, crate::clock::SharedClock);
}

impl Handler<GetGroupSettings> for BrokerActor {
    type Result = MessageResult<GetGroupSettings>;

    fn handle(&mut self, _: GetGroupSettings, _: &mut Context<Self>) -> Self::Result {
        MessageResult((self.settings.session_timeout, self.settings.clock.clone()))
    }
}

impl Handler<CrashGroupCoordinator> for BrokerActor {
    type Result = ResponseFuture<Result<()>>;

    fn handle(&mut self, msg: CrashGroupCoordinator, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "CrashGroupCoordinator").entered();
        let name = self.label.clone();
        guarded_future(self, ctx, &name, |act, _| match act.topic(&msg.topic) {
            Ok(addr) => Box::pin(async move {
                let crash = CrashCoordinator { group: msg.group };
                addr.send(crash).await.map_err(|_| Error::BrokerStopped)?
            }),
            Err(e) => Box::pin(async { Err(e) }),
        })
    }
}

impl Handler<GetStats> for BrokerActor {
    type Result = ResponseFuture<Result<BrokerStats>>;

    fn handle(&mut self, _: GetStats, ctx: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "GetStats").entered();
        let name = self.label.clone();
        guarded_future(self, ctx, &name, |act, _| {
            let topics = act.topics.clone();
            let restarts = act.restarts;
            Box::pin(async move {
                let mut stats = BrokerStats {
                    restarts,
                    ..BrokerStats::default()
                };
                for (name, addr) in topics {
                    if let Ok(topic) = addr.send(DescribeTopic).await {
                        stats.topics.insert(name, topic);
                    }
                }
                Ok(stats)
            })
        })
    }
}

impl Handler<Shutdown> for BrokerActor {
    type Result = ResponseActFuture<Self, Result<()>>;

    fn handle(&mut self, _: Shutdown, _: &mut Context<Self>) -> Self::Result {
        let _span = tracing::debug_span!(parent: &self.span, "Shutdown").entered();
        self.stopping = true;
        let topics: Vec<Addr<TopicActor>> =
            std::mem::take(&mut self.topics).into_values().collect();
        let close_all = async move {
            let closes = join_all(topics.iter().map(|t| t.send(CloseTopic))).await;
            closes
                .into_iter()
                .map(|r| r.unwrap_or(Err(Error::BrokerStopped)))
                .collect::<Result<Vec<()>>>()
                .map(|_| ())
        };
        Box::pin(close_all.into_actor(self).map(|result, act, _| {
            // Partitions are closed: release the lock and the I/O threads.
            act.data_dir = None;
            for io in act.arbiters.drain(..) {
                io.arbiter.stop();
                let _ = io.arbiter.join();
            }
            result
        }))
    }
}
