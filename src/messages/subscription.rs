//! Push subscriptions on the actor face: [`Subscribe`] starts one, the subscriber receives
//! [`Delivered`] batches and answers each with an [`Ack`]; [`SubscribeOptions`] shape it and
//! [`Subscription`] ends it; [`SubscriptionEvent`]s tell a recipient of the options what
//! happened (rebalances, records that do not decode, dead letters, refused commits, the end).
//! The delivery rules are on [`Ack`] (order, retries, attempts) and [`SubscribeOptions`] (dead
//! letters, decode errors); `docs/semantics.md` ("The group model") has them in one place.

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::time::Duration;

use actix::{Message, MessageResponse, Recipient};
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use crate::error::{Error, Result};
use crate::group::delivery::Answer;
use crate::group::GroupOptions;
use crate::types::{Header, Record};

/// Subscribe an actor to a topic as member `member` of `group`: records are pushed to
/// `recipient` as [`Delivered<T>`] batches, at most `options.max_in_flight` unanswered, and
/// the subscriber's [`Ack`] commits them. Reply: a [`Subscription`] once the member joined.
/// Errors: as [`JoinGroup`](super::JoinGroup); `InvalidArgument` for options [`SubscribeOptions::validate`]
/// refuses, and for a dead-letter topic named as the subscribed topic (nothing joined);
/// as [`CreateTopic`](super::CreateTopic) when the dead-letter topic is missing and cannot be
/// created. The delivery rules are on [`Ack`] and [`SubscribeOptions`].
///
/// Route: handled by the broker: it joins the group (as [`JoinGroup`](super::JoinGroup)),
/// creates the dead-letter topic when one is named and missing (leaving the group again if
/// that fails), learns the group's coordinator (`GetGroupRoute`), then starts a
/// `SubscriptionActor<T>` on the coordinator's I/O arbiter (on the broker's thread when the
/// coordinator is already gone, the topic deleted meanwhile). The actor polls the coordinator directly (through the broker once the
/// coordinator is gone, `SubscriptionPoll`) and commits with fenced commits. It is not
/// supervised: if it dies, the group evicts the member after the session timeout.
pub struct Subscribe<T: DeserializeOwned + Send + 'static> {
    pub topic: String,
    pub group: String,
    pub member: String,
    pub recipient: Recipient<Delivered<T>>,
    pub options: SubscribeOptions,
}

impl<T: DeserializeOwned + Send + 'static> std::fmt::Debug for Subscribe<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscribe")
            .field("topic", &self.topic)
            .field("group", &self.group)
            .field("member", &self.member)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl<T: DeserializeOwned + Send + 'static> Message for Subscribe<T> {
    type Result = Result<Subscription>;
}

/// A batch of consecutive records of one partition, pushed to a subscriber. Reply with an
/// [`Ack`] (return `Ack::Commit` from the handler, or a future that resolves to it).
///
/// Sent by the subscription's actor with `send` (never `do_send`): at most one unanswered
/// batch per partition and `SubscribeOptions::max_in_flight` in all. A subscriber whose
/// mailbox closed ends the subscription ([`SubscriptionEnd::SubscriberGone`]).
#[derive(Debug)]
pub struct Delivered<T> {
    pub topic: String,
    pub group: String,
    /// The group generation the batch was read in; its commit is fenced by it.
    pub generation: u64,
    /// Which delivery of its first record this is: 1 the first time, one more for each
    /// [`Ack::Retry`] of it, across members and restarts (see [`Ack::Retry`]). The records
    /// after it are on their first attempt (a retried record always starts its batch).
    pub attempt: u32,
    pub records: Vec<Record<T>>,
}

impl<T: 'static> Message for Delivered<T> {
    type Result = Ack;
}

/// The subscriber's answer to a [`Delivered`] batch.
///
/// Every commit is fenced by the generation the batch was read in: after a rebalance it is
/// refused ([`SubscriptionEvent::CommitRefused`]) and the partition's new owner reads from
/// the last commit.
#[derive(Debug, Clone, PartialEq, Eq, MessageResponse)]
pub enum Ack {
    /// The batch is processed: commit its last offset.
    Commit,
    /// Do not commit: the batch is re-delivered after the next rebalance or restart unless a
    /// later commit of the same partition covers it.
    Defer,
    /// The records up to and including this offset are processed: they are committed, and
    /// the rest of the batch is delivered again at once, in order, before anything after
    /// it. An offset at or past the batch's last commits the batch (as `Commit`); one below
    /// its first commits nothing and delivers the whole batch again.
    CommitUpTo(u64),
    /// The record at `offset` failed, retry it after `after`: the records before it are
    /// committed, and that record and everything after it on its partition are delivered
    /// again after the delay, in order.
    ///
    /// Order: the partition is held from then until the redelivery: none of its later
    /// records reaches the subscriber before the retried one, while the other partitions
    /// keep flowing (a subscription has at most one unanswered batch per partition).
    ///
    /// Attempts: each delivery of the record counts (the first is attempt 1), up to
    /// [`SubscribeOptions::max_attempts`]. A `Retry` of its last attempt sends it to the
    /// dead-letter topic ([`SubscribeOptions::dead_letter_topic`]; the records before it
    /// are committed with it) and commits past it, then reading goes on after it. Without a
    /// dead-letter topic the subscription ends instead
    /// ([`SubscriptionEnd::RetriesExhausted`]) with the record uncommitted. The count goes
    /// with the commit (the retry commits the offset of the record, with its count in the
    /// commit's metadata), so a member that takes the partition over after a rebalance, a
    /// rejoin or a restart delivers it as the next attempt ([`Delivered::attempt`]): a record
    /// is delivered at most `max_attempts` times in all, unless the process dies between a
    /// delivery and its answer's commit. On the Kafka backend counts live in the member's
    /// memory: after a rebalance a record starts again at attempt 1.
    ///
    /// An offset outside the batch is brought into it (below: its first record; above: its
    /// last).
    Retry { offset: u64, after: Duration },
    /// The record at `offset` cannot be processed, ever (a poison record): the records
    /// before it are committed, it goes to the dead-letter topic at once, whatever its
    /// attempt, with `nanokafka.dlq.reason` `rejected` and `reason` as
    /// `nanokafka.dlq.error`, and is committed past; then reading goes on after it
    /// ([`SubscriptionEvent::DeadLettered`] tells where it went). Without a dead-letter topic
    /// the subscription ends ([`SubscriptionEnd::DeadLetterFailed`]) with the record
    /// uncommitted. An offset outside the batch is brought into it, as for `Retry`.
    DeadLetter { offset: u64, reason: String },
}

/// The actor face's `Ack` as the delivery rules take it.
impl From<Ack> for Answer {
    fn from(ack: Ack) -> Self {
        match ack {
            Ack::Commit => Answer::Commit,
            Ack::Defer => Answer::Defer,
            Ack::CommitUpTo(offset) => Answer::CommitUpTo(offset),
            Ack::Retry { offset, after } => Answer::Retry { offset, after },
            Ack::DeadLetter { offset, reason } => Answer::DeadLetter { offset, reason },
        }
    }
}

/// What a subscription does with a record that does not decode as the subscriber's type.
/// Either way the records before it on its partition are delivered first, and
/// [`SubscriptionEvent::DecodeFailed`] says what happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnDecodeError {
    /// Send it, bytes unchanged, to the dead-letter topic and go on past it (it is
    /// committed). The default when a dead-letter topic is named; refused without one.
    DeadLetter,
    /// End the subscription ([`SubscriptionEnd::DecodeError`]); the record stays
    /// uncommitted. The default without a dead-letter topic.
    Stop,
}

/// How a subscription behaves. Build it with [`SubscribeOptions::default`] and the chainable
/// setters named as the fields:
///
/// ```
/// use std::time::Duration;
/// use nanokafka::messages::{OnDecodeError, SubscribeOptions};
///
/// let options = SubscribeOptions::default()
///     .max_in_flight(8)
///     .max_batch(50)
///     .poll_wait(Duration::from_millis(500))
///     .max_attempts(5)
///     .dead_letter_topic("orders.dlq")
///     .on_decode_error(OnDecodeError::DeadLetter);
/// assert!(options.validate().is_ok());
/// ```
#[derive(Clone)]
pub struct SubscribeOptions {
    /// The group's options, as for a join.
    pub group: GroupOptions,
    /// Batches delivered but not yet answered, over all partitions (default 4); one
    /// partition has at most one.
    pub max_in_flight: usize,
    /// Records per batch at most (default 100).
    pub max_batch: usize,
    /// How long one poll waits for data (default 1 s). The poll is a sign of life too, so
    /// keep it well below the session timeout.
    pub poll_wait: Duration,
    /// Deliveries of a record that the subscriber answers with [`Ack::Retry`], at most
    /// (default 3, at least 1).
    pub max_attempts: u32,
    /// Where records go after their last attempt, or when they do not decode (default
    /// none). Created at subscribe time when missing, with 1 partition (dead letters of
    /// every partition in one order); an existing topic is used as it is. A dead letter keeps
    /// the record's key, its value bytes unchanged (also when they do not decode) and its
    /// headers, followed by these (values UTF-8): `nanokafka.dlq.topic` (the source topic),
    /// `nanokafka.dlq.partition`, `nanokafka.dlq.offset` (decimal), `nanokafka.dlq.group`,
    /// `nanokafka.dlq.reason` (`decode`, `retries-exhausted` or `rejected`: an
    /// [`Ack::DeadLetter`]), `nanokafka.dlq.error` (the decode error's text, or the
    /// subscriber's reason; not for `retries-exhausted`) and `nanokafka.dlq.attempts`
    /// (deliveries of the record, decimal; 1 for `decode`). It is written before the source record is committed
    /// past: once, or twice if the process dies between the two.
    pub dead_letter_topic: Option<String>,
    /// What to do with a record that does not decode; `None`: [`OnDecodeError::DeadLetter`]
    /// with a dead-letter topic, [`OnDecodeError::Stop`] without.
    pub on_decode_error: Option<OnDecodeError>,
    /// Who receives the subscription's [`SubscriptionEvent`]s (default none: they are only
    /// logged).
    pub events: Option<Recipient<SubscriptionEvent>>,
}

impl std::fmt::Debug for SubscribeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubscribeOptions")
            .field("group", &self.group)
            .field("max_in_flight", &self.max_in_flight)
            .field("max_batch", &self.max_batch)
            .field("poll_wait", &self.poll_wait)
            .field("max_attempts", &self.max_attempts)
            .field("dead_letter_topic", &self.dead_letter_topic)
            .field("on_decode_error", &self.on_decode_error)
            .field("events", &self.events.is_some())
            .finish()
    }
}

impl Default for SubscribeOptions {
    fn default() -> Self {
        SubscribeOptions {
            group: GroupOptions::default(),
            max_in_flight: 4,
            max_batch: 100,
            poll_wait: Duration::from_secs(1),
            max_attempts: 3,
            dead_letter_topic: None,
            on_decode_error: None,
            events: None,
        }
    }
}

impl SubscribeOptions {
    /// Sets [`SubscribeOptions::group`].
    pub fn group(mut self, group: GroupOptions) -> Self {
        self.group = group;
        self
    }

    /// Sets [`SubscribeOptions::max_in_flight`].
    pub fn max_in_flight(mut self, batches: usize) -> Self {
        self.max_in_flight = batches;
        self
    }

    /// Sets [`SubscribeOptions::max_batch`].
    pub fn max_batch(mut self, records: usize) -> Self {
        self.max_batch = records;
        self
    }

    /// Sets [`SubscribeOptions::poll_wait`].
    pub fn poll_wait(mut self, wait: Duration) -> Self {
        self.poll_wait = wait;
        self
    }

    /// Sets [`SubscribeOptions::max_attempts`].
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts;
        self
    }

    /// Sets [`SubscribeOptions::dead_letter_topic`].
    pub fn dead_letter_topic(mut self, topic: impl Into<String>) -> Self {
        self.dead_letter_topic = Some(topic.into());
        self
    }

    /// Sets [`SubscribeOptions::on_decode_error`].
    pub fn on_decode_error(mut self, what: OnDecodeError) -> Self {
        self.on_decode_error = Some(what);
        self
    }

    /// Sets [`SubscribeOptions::events`]: `recipient` receives every [`SubscriptionEvent`]
    /// (the subscriber itself, if it handles them, or another actor).
    pub fn events(mut self, recipient: Recipient<SubscriptionEvent>) -> Self {
        self.events = Some(recipient);
        self
    }

    /// What a record that does not decode gets (see [`SubscribeOptions::on_decode_error`]).
    pub fn decode_error_policy(&self) -> OnDecodeError {
        match (self.on_decode_error, &self.dead_letter_topic) {
            (Some(what), _) => what,
            (None, Some(_)) => OnDecodeError::DeadLetter,
            (None, None) => OnDecodeError::Stop,
        }
    }

    /// Checks the options a subscription cannot work with.
    ///
    /// # Errors
    /// `InvalidArgument` for a zero `max_in_flight`, `max_batch`, `poll_wait` or
    /// `max_attempts`, a dead-letter topic name that is not a valid topic name, and
    /// [`OnDecodeError::DeadLetter`] without a dead-letter topic.
    pub fn validate(&self) -> Result<()> {
        let zero = [
            ("max_in_flight", self.max_in_flight == 0),
            ("max_batch", self.max_batch == 0),
            ("poll_wait", self.poll_wait.is_zero()),
            ("max_attempts", self.max_attempts == 0),
        ];
        if let Some(&(name, _)) = zero.iter().find(|(_, zero)| *zero) {
            return Err(Error::InvalidArgument {
                name,
                reason: format!("a subscription needs it above zero, got {self:?}"),
            });
        }
        if let Some(topic) = &self.dead_letter_topic {
            crate::storage::data_dir::validate_topic_name(topic).map_err(|e| {
                Error::InvalidArgument {
                    name: "dead_letter_topic",
                    reason: e.to_string(),
                }
            })?;
        }
        if self.on_decode_error == Some(OnDecodeError::DeadLetter)
            && self.dead_letter_topic.is_none()
        {
            return Err(Error::InvalidArgument {
                name: "on_decode_error",
                reason: "DeadLetter needs a dead_letter_topic".into(),
            });
        }
        Ok(())
    }

    /// [`SubscribeOptions::validate`] for a subscription to `topic`.
    ///
    /// # Errors
    /// As `validate`, and `InvalidArgument` for a dead-letter topic named as `topic`.
    pub(crate) fn validate_for(&self, topic: &str) -> Result<()> {
        self.validate()?;
        if self.dead_letter_topic.as_deref() == Some(topic) {
            return Err(Error::InvalidArgument {
                name: "dead_letter_topic",
                reason: format!("{topic:?} is the subscribed topic itself"),
            });
        }
        Ok(())
    }
}

/// Something a subscription reports to the recipient of [`SubscribeOptions::events`]
/// (and logs). Sent with `do_send` (fire-and-forget: the subscription never waits for the
/// recipient), in the order it happened; [`SubscriptionEvent::Ended`] is the last.
///
/// Non-exhaustive, as are its variants that may grow: match it with a wildcard arm, and
/// those variants with `..`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum SubscriptionEvent {
    /// The member was given `partitions` in `generation`. Differences, like Kafka's
    /// cooperative rebalance listener: only the partitions new to the member (the first
    /// one, sent as the subscription starts, names every partition it was assigned at
    /// subscribe time). Sent only when it names a partition, after the generation's
    /// `Revoked`: the partitions assigned so far minus those revoked are the member's
    /// assignment in the group's `stats()` for that generation. The subscription learns of
    /// rebalances from its polls (within `poll_wait`): when two happen between two polls
    /// only the later generation is told, with the differences from the last one told.
    Assigned {
        generation: u64,
        partitions: Vec<u32>,
    },
    /// The member lost `partitions` at `generation` (the generation that no longer has
    /// them; on an eviction and at the end, the last generation told); only sent when it
    /// lost some. Every partition a member loses is told: at a rebalance, when it was
    /// evicted (all of them, before it rejoins), and as the subscription ends, whatever the
    /// reason (all of them, before [`SubscriptionEvent::Ended`]). Their unanswered batches
    /// can no longer be committed.
    Revoked {
        generation: u64,
        partitions: Vec<u32>,
    },
    /// The record at `offset` of `partition` does not decode as the subscriber's type
    /// (`error`); `action` is what was done with it.
    DecodeFailed {
        partition: u32,
        offset: u64,
        error: String,
        action: DecodeAction,
    },
    /// The record at `offset` of `partition` (its `key` and `headers` as read) went to the
    /// dead-letter topic after `attempts` deliveries, at `dead_letter_partition` and
    /// `dead_letter_offset` there, and was committed past. `reason`: the subscriber's, for an
    /// [`Ack::DeadLetter`]; `None` for a record out of attempts.
    #[non_exhaustive]
    DeadLettered {
        partition: u32,
        offset: u64,
        attempts: u32,
        key: Option<Vec<u8>>,
        headers: Vec<Header>,
        reason: Option<String>,
        dead_letter_partition: u32,
        dead_letter_offset: u64,
    },
    /// A commit up to and including `offset` of `partition` was refused (`error`: the
    /// member was fenced by a rebalance, or evicted); the records are delivered again to
    /// the partition's owner from the last commit.
    CommitRefused {
        partition: u32,
        offset: u64,
        error: Error,
    },
    /// A request the subscription depends on failed with an error that does not end it (a
    /// partition restarting, a batch that cannot be read, a group coordinator restarting): it
    /// is sent again after `retry_in`, for as long as the error lasts, one event per failure.
    /// Reading stays where it was meanwhile: nothing is skipped.
    RequestFailed {
        request: SubscriptionRequest,
        error: Error,
        retry_in: Duration,
    },
    /// The subscription ended; nothing follows.
    Ended(SubscriptionEnd),
}

/// Which of a subscription's requests failed (see [`SubscriptionEvent::RequestFailed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubscriptionRequest {
    /// A poll for records (it doubles as the member's sign of life).
    Poll,
    /// Joining the group again after the member was evicted.
    Rejoin,
}

impl Message for SubscriptionEvent {
    type Result = ();
}

/// What happened to a record that does not decode (see [`OnDecodeError`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeAction {
    /// It went to the dead-letter topic and was committed past.
    DeadLettered,
    /// The subscription ended on it.
    Stopped,
}

/// Why a subscription ended: the output of [`Subscription::ended`].
#[derive(Debug, Clone)]
pub enum SubscriptionEnd {
    /// [`Subscription::unsubscribe`]: the member left its group.
    Unsubscribed,
    /// The subscriber's mailbox closed (it stopped); the member left its group.
    SubscriberGone,
    /// The broker stopped (or the subscription's system did).
    BrokerStopped,
    /// The topic was deleted.
    TopicDeleted,
    /// A record did not decode under [`OnDecodeError::Stop`]; the member left its group
    /// and the record is uncommitted.
    DecodeError {
        partition: u32,
        offset: u64,
        error: String,
    },
    /// A record had its last attempt and no dead-letter topic is named; the member left
    /// its group and the record is uncommitted.
    RetriesExhausted {
        partition: u32,
        offset: u64,
        attempts: u32,
    },
    /// A record could not be written to the dead-letter topic (`error`; `InvalidArgument`
    /// for an [`Ack::DeadLetter`] without a dead-letter topic); it is uncommitted and the
    /// member left its group.
    DeadLetterFailed {
        partition: u32,
        offset: u64,
        error: Error,
    },
}

/// Ends a subscription: it waits for the answers in flight (see
/// [`Subscription::unsubscribe`]), leaves its group and stops. Fire-and-forget: sent with `do_send`
/// by [`Subscription::unsubscribe`] to the subscription's actor; [`Subscription::ended`]
/// then resolves [`SubscriptionEnd::Unsubscribed`].
#[derive(Debug)]
pub struct Unsubscribe;

impl Message for Unsubscribe {
    type Result = ();
}

/// A running subscription. Dropping it does not end the subscription; the subscriber's
/// mailbox closing does, or [`Subscription::unsubscribe`]. Awaiting it (or
/// [`Subscription::ended`]) waits for its end:
///
/// ```no_run
/// # async fn run(subscription: nanokafka::messages::Subscription) {
/// let why = subscription.await; // a SubscriptionEnd
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Subscription {
    stop: Recipient<Unsubscribe>,
    end: watch::Receiver<Option<SubscriptionEnd>>,
}

impl Subscription {
    /// A subscription stopped by `stop`, whose actor sends its end on `end` (a sender
    /// dropped without a value reads as [`SubscriptionEnd::BrokerStopped`]: the actor's
    /// system went away under it).
    pub(crate) fn new(
        stop: Recipient<Unsubscribe>,
        end: watch::Receiver<Option<SubscriptionEnd>>,
    ) -> Self {
        Subscription { stop, end }
    }

    /// Stops pushing, waits for the answers to the batches with the subscriber and for the
    /// dead letters being written (acted on and committed as usual, for 10 s at most), then
    /// leaves the group: the partitions' next owner does not get those batches again.
    pub fn unsubscribe(&self) {
        self.stop.do_send(Unsubscribe);
    }

    /// Resolves when the subscription has ended, with why (at once if it already has).
    /// Every clone resolves with the same end.
    pub fn ended(&self) -> impl Future<Output = SubscriptionEnd> + Send + 'static {
        let mut end = self.end.clone();
        async move {
            match end.wait_for(Option::is_some).await {
                Ok(end) => end.clone().unwrap_or(SubscriptionEnd::BrokerStopped),
                Err(_) => SubscriptionEnd::BrokerStopped,
            }
        }
    }

    /// The end, if the subscription has ended.
    pub fn end(&self) -> Option<SubscriptionEnd> {
        self.end.borrow().clone()
    }
}

impl IntoFuture for Subscription {
    type Output = SubscriptionEnd;
    type IntoFuture = Pin<Box<dyn Future<Output = SubscriptionEnd> + Send + 'static>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.ended())
    }
}
