//! The schema registry as the composition root starts and stops it: with the
//! `schema-registry` feature the registry's own types; without it, types with no value, so
//! the root's code is the same either way.

use std::net::SocketAddr;

use actix::Addr;

use crate::actors::broker::BrokerActor;
use crate::error::Result;

#[cfg(feature = "schema-registry")]
mod enabled {
    use super::*;
    use crate::async_handle::AsyncNanoKafka;

    pub(crate) type Config = crate::schema_api::SchemaRegistryConfig;
    pub(crate) type Bound = crate::schema_api::BoundRegistry;
    pub(crate) type Handle = crate::schema_api::RegistryHandle;
    /// The broker's schemas, shared by all that read or change them.
    pub(crate) type Store = std::sync::Arc<crate::async_handle::SchemaStore>;

    /// The store of the broker at `broker` (reading `_schemas` only once first used).
    pub(crate) fn store(broker: &Addr<BrokerActor>) -> Option<Store> {
        let handle = AsyncNanoKafka::from(broker.clone());
        Some(Store::new(crate::async_handle::SchemaStore::new(handle)))
    }

    /// `handle` reaching the broker's `store` (see `AsyncNanoKafka::schema_store`).
    pub(crate) fn with_store(handle: AsyncNanoKafka, store: Option<&Store>) -> AsyncNanoKafka {
        handle.with_schema_store(store.cloned())
    }

    pub(crate) fn bind(config: Option<Config>) -> Result<Option<Bound>> {
        config.as_ref().map(crate::schema_api::bind).transpose()
    }

    /// Starts the registry `bound` on the running System, on the broker's `store`.
    pub(crate) fn start(bound: Option<Bound>, store: Option<&Store>) -> Result<Option<Handle>> {
        match (bound, store) {
            (Some(bound), Some(store)) => bound.start(store.clone()).map(Some),
            _ => Ok(None),
        }
    }

    pub(crate) fn addr(handle: &Handle) -> SocketAddr {
        handle.addr()
    }

    pub(crate) fn stop(handle: Handle) {
        handle.stop();
    }
}

#[cfg(not(feature = "schema-registry"))]
mod enabled {
    use super::*;

    pub(crate) type Config = std::convert::Infallible;
    pub(crate) type Bound = std::convert::Infallible;
    pub(crate) type Handle = std::convert::Infallible;
    pub(crate) type Store = std::convert::Infallible;

    pub(crate) fn store(_: &Addr<BrokerActor>) -> Option<Store> {
        None
    }
    pub(crate) fn with_store(
        handle: crate::async_handle::AsyncNanoKafka,
        _: Option<&Store>,
    ) -> crate::async_handle::AsyncNanoKafka {
        handle
    }
    pub(crate) fn bind(config: Option<Config>) -> Result<Option<Bound>> {
        Ok(config.map(|c| match c {}))
    }
    pub(crate) fn start(bound: Option<Bound>, _: Option<&Store>) -> Result<Option<Handle>> {
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
