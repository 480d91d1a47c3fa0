//! Push subscriptions on the actor face: [`Subscribe`] starts one, the subscriber receives
//! [`Delivered`] batches and answers each with an [`Ack`]; [`SubscribeOptions`] shape it and
//! [`Subscription`] ends it. The delivery rules are in `actors::subscription`.

use std::time::Duration;

use actix::{Message, MessageResponse, Recipient};
use serde::de::DeserializeOwned;

use crate::error::{Error, Result};
use crate::group::GroupOptions;
use crate::types::Record;

/// Subscribe an actor to a topic as member `member` of `group`: records are pushed to
/// `recipient` as [`Delivered<T>`] batches, at most `options.max_in_flight` unanswered, and
/// the subscriber's [`Ack`] commits them. Reply: a [`Subscription`] once the member joined.
/// Errors: as [`JoinGroup`]; `InvalidArgument` for a zero `max_in_flight`, `max_batch` or
/// `poll_wait`. See `actors::subscription` for the delivery rules.
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
#[derive(Debug)]
pub struct Delivered<T> {
    pub topic: String,
    pub group: String,
    /// The group generation the batch was read in; its commit is fenced by it.
    pub generation: u64,
    pub records: Vec<Record<T>>,
}

impl<T: 'static> Message for Delivered<T> {
    type Result = Ack;
}

/// The subscriber's answer to a [`Delivered`] batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, MessageResponse)]
pub enum Ack {
    /// The batch is processed: commit its last offset.
    Commit,
    /// Do not commit: the batch is re-delivered after the next rebalance or restart unless a
    /// later commit of the same partition covers it.
    Defer,
}

/// How a subscription behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubscribeOptions {
    /// The group's options, as for a join.
    pub group: GroupOptions,
    /// Batches delivered but not yet answered (default 4).
    pub max_in_flight: usize,
    /// Records per batch at most (default 100).
    pub max_batch: usize,
    /// How long one poll waits for data (default 1 s). The poll is a sign of life too, so
    /// keep it well below the session timeout.
    pub poll_wait: Duration,
}

impl Default for SubscribeOptions {
    fn default() -> Self {
        SubscribeOptions {
            group: GroupOptions::default(),
            max_in_flight: 4,
            max_batch: 100,
            poll_wait: Duration::from_secs(1),
        }
    }
}

impl SubscribeOptions {
    /// Checks the options a subscription cannot work with.
    ///
    /// # Errors
    /// `InvalidArgument` for a zero `max_in_flight`, `max_batch` or `poll_wait`.
    pub fn validate(&self) -> Result<()> {
        let zero = [
            ("max_in_flight", self.max_in_flight == 0),
            ("max_batch", self.max_batch == 0),
            ("poll_wait", self.poll_wait.is_zero()),
        ];
        match zero.iter().find(|(_, zero)| *zero) {
            Some(&(name, _)) => Err(Error::InvalidArgument {
                name,
                reason: format!("a subscription needs it above zero, got {self:?}"),
            }),
            None => Ok(()),
        }
    }
}

/// Ends a subscription: it leaves its group and stops. Fire-and-forget.
#[derive(Debug)]
pub struct Unsubscribe;

impl Message for Unsubscribe {
    type Result = ();
}

/// A running subscription. Dropping it does not end the subscription; the subscriber's
/// mailbox closing does, or [`Subscription::unsubscribe`].
#[derive(Debug, Clone)]
pub struct Subscription {
    stop: Recipient<Unsubscribe>,
}

impl Subscription {
    pub(crate) fn new(stop: Recipient<Unsubscribe>) -> Self {
        Subscription { stop }
    }

    /// Leaves the group and stops pushing.
    pub fn unsubscribe(&self) {
        self.stop.do_send(Unsubscribe);
    }
}
