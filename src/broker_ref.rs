//! `BrokerRef`: the actor face with one `Result`.
//!
//! `Addr<BrokerActor>::send(msg).await` answers `Result<Result<T, Error>, MailboxError>`: the
//! outer error only ever means that the broker's mailbox is closed (actix's `send` without
//! a timeout cannot time out), which NanoKafka calls `Error::BrokerStopped`. [`BrokerRef`]
//! and [`RequestExt`] fold it in, so an actor writes `broker.request(msg).await?`. There is
//! deliberately no fire-and-forget: every message of [`crate::messages`] answers, and an
//! unread answer would hide its error.

use std::future::Future;

use actix::{Addr, Handler, Message};

use crate::actors::broker::BrokerActor;
use crate::error::{Error, Result};

/// A cheap, cloneable reference to the broker actor whose [`BrokerRef::request`] answers one
/// flat `Result`. Get one from [`crate::NanoKafka::broker_ref`],
/// [`crate::AsyncNanoKafka::broker_ref`], or `BrokerRef::from(addr)`.
///
/// Embedded backend only, as [`crate::AsyncNanoKafka::addr`]: on the Kafka backend no broker
/// actor runs, and every request answers `BrokerStopped` (use the handles' methods, which
/// both backends serve).
///
/// # Example
/// ```no_run
/// # async fn run(broker: nanokafka::BrokerRef) -> nanokafka::Result<()> {
/// use nanokafka::messages::{CreateTopic, Lag};
/// use nanokafka::TopicConfig;
/// broker
///     .request(CreateTopic { topic: "orders".into(), config: TopicConfig::default() })
///     .await?;
/// let lag = broker
///     .request(Lag { topic: "orders".into(), group: "billing".into() })
///     .await?;
/// # let _ = lag;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct BrokerRef {
    addr: Addr<BrokerActor>,
}

impl BrokerRef {
    /// Wraps the broker actor's address.
    pub fn new(addr: Addr<BrokerActor>) -> Self {
        BrokerRef { addr }
    }

    /// Sends `msg` (any message of [`crate::messages`] the broker answers) and awaits its
    /// answer. The message is queued when this is called, not when the future is first
    /// polled, so requests made in order reach the broker in that order.
    ///
    /// # Errors
    /// The message's own errors (see each message), unchanged; `BrokerStopped` when the
    /// broker's mailbox is closed (it was shut down, or this is the Kafka backend).
    pub fn request<M, T>(&self, msg: M) -> impl Future<Output = Result<T>> + Send + 'static
    where
        M: Message<Result = Result<T>> + Send + 'static,
        T: Send + 'static,
        BrokerActor: Handler<M>,
    {
        self.addr.request(msg)
    }

    /// The broker actor's address, for what `request` does not cover (`Recipient`s, watching
    /// `connected`).
    pub fn addr(&self) -> &Addr<BrokerActor> {
        &self.addr
    }

    /// Whether the broker actor still runs (its mailbox is open). A request may still answer
    /// `BrokerStopped` if it stops in between.
    pub fn connected(&self) -> bool {
        self.addr.connected()
    }
}

impl From<Addr<BrokerActor>> for BrokerRef {
    fn from(addr: Addr<BrokerActor>) -> Self {
        BrokerRef::new(addr)
    }
}

/// [`BrokerRef::request`] on an `Addr<BrokerActor>`: `addr.request(msg).await?` instead of
/// `addr.send(msg).await` and its nested results.
///
/// # Example
/// ```no_run
/// # async fn run(addr: actix::Addr<nanokafka::BrokerActor>) -> nanokafka::Result<()> {
/// use nanokafka::messages::GetStats;
/// use nanokafka::RequestExt;
/// let stats = addr.request(GetStats).await?;
/// # let _ = stats;
/// # Ok(())
/// # }
/// ```
pub trait RequestExt {
    /// Sends `msg` and awaits its answer as one `Result`.
    ///
    /// # Errors
    /// As [`BrokerRef::request`]: the message's own errors, or `BrokerStopped`.
    fn request<M, T>(
        &self,
        msg: M,
    ) -> impl Future<Output = Result<T>> + Send + 'static + use<Self, M, T>
    where
        M: Message<Result = Result<T>> + Send + 'static,
        T: Send + 'static,
        BrokerActor: Handler<M>;
}

impl RequestExt for Addr<BrokerActor> {
    fn request<M, T>(&self, msg: M) -> impl Future<Output = Result<T>> + Send + 'static + use<M, T>
    where
        M: Message<Result = Result<T>> + Send + 'static,
        T: Send + 'static,
        BrokerActor: Handler<M>,
    {
        let sent = self.send(msg);
        async move { sent.await.map_err(|_| Error::BrokerStopped)? }
    }
}
