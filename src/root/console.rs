//! The web console as the composition root starts and stops it: with the `console` feature
//! the console module's own types; without it, types with no value, so the root's code is
//! the same either way and a build without the feature has no console to start.

use std::net::SocketAddr;

use actix::Addr;

use super::schema_registry;
use crate::actors::broker::BrokerActor;
use crate::actors::BrokerSettings;
use crate::error::Result;
use crate::listener::{ListenerConfig, ListenerHandle};

/// What the console is told of the broker: its settings and the listener's config.
pub(crate) type Facts = Option<(BrokerSettings, Option<ListenerConfig>)>;

#[cfg(feature = "console")]
mod enabled {
    use super::*;
    use crate::async_handle::AsyncNanoKafka;

    pub(crate) type Config = crate::console::ConsoleConfig;
    pub(crate) type Bound = crate::console::BoundConsole;
    pub(crate) type Handle = crate::console::ConsoleHandle;

    pub(crate) fn bind(config: Option<Config>) -> Result<Option<Bound>> {
        config.as_ref().map(crate::console::bind).transpose()
    }

    /// Starts the console `bound` on the running System, reading `broker` through a handle
    /// of its own that reports the `listener`'s connections and reaches the broker's
    /// `schemas`.
    pub(crate) fn start(
        bound: Option<Bound>,
        facts: Facts,
        broker: &Addr<BrokerActor>,
        (listener, schemas): (Option<&ListenerHandle>, Option<&schema_registry::Store>),
    ) -> Result<Option<Handle>> {
        let (Some(bound), Some((settings, config))) = (bound, facts) else {
            return Ok(None);
        };
        let handle = AsyncNanoKafka::from(broker.clone())
            .with_listener_metrics(listener.map(ListenerHandle::metrics));
        let handle = schema_registry::with_store(handle, schemas);
        let facts = crate::console::BrokerFacts {
            data_dir: settings.data_dir.clone(),
            fsync: settings.fsync.to_string(),
            listener: listener.map(ListenerHandle::addr),
            credentials: config.and_then(|l| l.sasl_plain),
            scram: listener.and_then(ListenerHandle::scram_users),
            clock: settings.clock.clone(),
            started_ms: settings.clock.now_ms(),
            kafka_groups: listener.map(ListenerHandle::kafka_groups),
        };
        bound.start(handle, facts).map(Some)
    }

    pub(crate) fn addr(handle: &Handle) -> SocketAddr {
        handle.addr()
    }

    pub(crate) fn stop(handle: Handle) {
        handle.stop();
    }
}

#[cfg(not(feature = "console"))]
mod enabled {
    use super::*;

    pub(crate) type Config = std::convert::Infallible;
    pub(crate) type Bound = std::convert::Infallible;
    pub(crate) type Handle = std::convert::Infallible;

    pub(crate) fn bind(config: Option<Config>) -> Result<Option<Bound>> {
        Ok(config.map(|c| match c {}))
    }
    pub(crate) fn start(
        bound: Option<Bound>,
        _: Facts,
        _: &Addr<BrokerActor>,
        _: (Option<&ListenerHandle>, Option<&schema_registry::Store>),
    ) -> Result<Option<Handle>> {
        Ok(bound.map(|b| match b {}))
    }
    pub(crate) fn addr(handle: &Handle) -> SocketAddr {
        match *handle {}
    }
    pub(crate) fn stop(handle: Handle) {
        match handle {}
    }
}

pub(crate) use enabled::*;
