//! Kafka's client quotas: how many bytes a client may produce and fetch per second, and how
//! much of the broker's request-handling time it may take, before the broker throttles it.
//!
//! A quota is set on an entity: a `user` (the principal's name), a `client-id`, or both, each
//! either named or the default (`<default>`, every user or client-id without its own). A
//! request is measured against the first of these that has a value for the key (Kafka's
//! order, most specific first):
//!
//! 1. `user=<user>, client-id=<client-id>`
//! 2. `user=<user>, client-id=<default>`
//! 3. `user=<user>`
//! 4. `user=<default>, client-id=<client-id>`
//! 5. `user=<default>, client-id=<default>`
//! 6. `user=<default>`
//! 7. `client-id=<client-id>`
//! 8. `client-id=<default>`
//!
//! The rate is shared by everything that entity covers: a `user` quota is one rate for all
//! of that user's clients, a `client-id` quota one rate for every connection using that
//! client id ([`SensorKey`]). Rates are Kafka's windowed rates ([`rate`]); over the bound, the
//! throttle time is Kafka's: how long the client must stay quiet for its rate to come back
//! to the bound.
//!
//! Quotas are off until one is set: with none, nothing is measured.

pub mod admin;
mod rate;
mod store;

use std::collections::{BTreeMap, HashMap};
use std::fmt;

pub use rate::{Rate, WINDOW_NUM, WINDOW_SIZE_MS};
pub use store::ClientQuotas;

/// A quota's key, as Kafka names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QuotaKey {
    /// `producer_byte_rate`: bytes of Produce requests per second.
    ProducerByteRate,
    /// `consumer_byte_rate`: bytes of Fetch responses per second.
    ConsumerByteRate,
    /// `request_percentage`: handler time per second, in percent of one thread
    /// (`200` is two threads' worth).
    RequestPercentage,
}

impl QuotaKey {
    pub const ALL: [QuotaKey; 3] = [
        QuotaKey::ProducerByteRate,
        QuotaKey::ConsumerByteRate,
        QuotaKey::RequestPercentage,
    ];

    pub fn name(self) -> &'static str {
        match self {
            QuotaKey::ProducerByteRate => "producer_byte_rate",
            QuotaKey::ConsumerByteRate => "consumer_byte_rate",
            QuotaKey::RequestPercentage => "request_percentage",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        QuotaKey::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The longest throttle: one window for request time (Kafka caps it there), the whole
    /// measured span for bytes, so one huge request cannot mute a client for minutes.
    pub fn max_throttle_ms(self) -> u64 {
        match self {
            QuotaKey::RequestPercentage => WINDOW_SIZE_MS,
            _ => WINDOW_NUM * WINDOW_SIZE_MS,
        }
    }

    /// Checks a value as Kafka's controller does: positive, and whole for the byte rates
    /// (Kafka types them as longs).
    ///
    /// # Errors
    /// Why the value is refused, in Kafka's words.
    pub fn validate(self, value: f64) -> Result<(), String> {
        let name = self.name();
        if value.is_nan() || value <= 0.0 {
            return Err(format!("Quota {name} must be greater than 0"));
        }
        if self != QuotaKey::RequestPercentage {
            if value > i64::MAX as f64 {
                return Err(format!(
                    "Proposed value for {name} is too large for a LONG."
                ));
            }
            if value.fract() != 0.0 {
                return Err(format!("{name} must be a whole number, not {value}"));
            }
        } else if value.is_infinite() {
            return Err(format!("Quota {name} must be finite"));
        }
        Ok(())
    }
}

impl fmt::Display for QuotaKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Kafka's entity types for client quotas.
pub const USER: &str = "user";
pub const CLIENT_ID: &str = "client-id";
/// Kafka's entity type for connection-rate quotas, which this broker does not enforce.
pub const IP: &str = "ip";

/// One side of an entity: a name, or the default for every name without its own quota.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EntityName {
    Default,
    Named(String),
}

impl EntityName {
    /// Kafka's wire form: `None` is the default.
    pub fn from_wire(name: Option<&str>) -> Self {
        name.map_or(EntityName::Default, |n| EntityName::Named(n.to_owned()))
    }

    pub fn to_wire(&self) -> Option<&str> {
        match self {
            EntityName::Default => None,
            EntityName::Named(n) => Some(n),
        }
    }
}

impl fmt::Display for EntityName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.to_wire().unwrap_or("<default>"))
    }
}

/// What a quota is set on: a user, a client id, or both.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct QuotaEntity {
    pub user: Option<EntityName>,
    pub client_id: Option<EntityName>,
}

impl QuotaEntity {
    pub fn new(user: Option<EntityName>, client_id: Option<EntityName>) -> Self {
        QuotaEntity { user, client_id }
    }

    /// The entity from Kafka's (type, name) pairs, validated as Kafka's controller does.
    ///
    /// # Errors
    /// Why the entity is refused, in Kafka's words (INVALID_REQUEST on the wire).
    pub fn from_parts<'a>(
        parts: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
    ) -> Result<Self, String> {
        let mut entity = QuotaEntity::default();
        let mut any = false;
        for (entity_type, name) in parts {
            any = true;
            let slot = match entity_type {
                USER => &mut entity.user,
                CLIENT_ID => &mut entity.client_id,
                IP => return Err("ip quotas (connection_creation_rate) are not supported".into()),
                other => return Err(format!("Unhandled client quota entity type: {other}")),
            };
            if slot.is_some() {
                return Err(format!(
                    "Invalid client quota entity, duplicate entity entry {entity_type}"
                ));
            }
            if name == Some("") {
                return Err(format!("Empty {entity_type} not supported"));
            }
            *slot = Some(EntityName::from_wire(name));
        }
        if !any {
            return Err("Invalid empty client quota entity".into());
        }
        Ok(entity)
    }

    /// Kafka's (type, name) pairs, user first.
    pub fn parts(&self) -> Vec<(&'static str, Option<&str>)> {
        let user = self.user.as_ref().map(|n| (USER, n.to_wire()));
        let client = self.client_id.as_ref().map(|n| (CLIENT_ID, n.to_wire()));
        user.into_iter().chain(client).collect()
    }
}

impl fmt::Display for QuotaEntity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = [(USER, &self.user), (CLIENT_ID, &self.client_id)]
            .into_iter()
            .filter_map(|(t, n)| n.as_ref().map(|n| format!("{t}={n}")))
            .collect();
        f.write_str(&parts.join(","))
    }
}

/// Whose rate a request counts against: Kafka's quota metric tags, `(user, client-id)` with
/// an empty side for an entity without it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SensorKey {
    pub user: String,
    pub client_id: String,
}

/// Every quota set, by entity.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QuotaConfig {
    entries: BTreeMap<QuotaEntity, BTreeMap<QuotaKey, f64>>,
}

impl QuotaConfig {
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn entries(&self) -> impl Iterator<Item = (&QuotaEntity, &BTreeMap<QuotaKey, f64>)> {
        self.entries.iter()
    }

    pub fn get(&self, entity: &QuotaEntity, key: QuotaKey) -> Option<f64> {
        self.entries.get(entity)?.get(&key).copied()
    }

    /// Sets `key` on `entity`, or removes it (`None`); an entity left without quotas goes.
    pub fn set(&mut self, entity: &QuotaEntity, key: QuotaKey, value: Option<f64>) {
        match value {
            Some(v) => {
                self.entries
                    .entry(entity.clone())
                    .or_default()
                    .insert(key, v);
            }
            None => {
                if let Some(values) = self.entries.get_mut(entity) {
                    values.remove(&key);
                    if values.is_empty() {
                        self.entries.remove(entity);
                    }
                }
            }
        }
    }

    fn has(&self, key: QuotaKey, user: Option<EntityName>, client: Option<EntityName>) -> bool {
        self.get(&QuotaEntity::new(user, client), key).is_some()
    }

    /// The rate `user`'s client `client_id` counts against for `key`, and its bound; `None`
    /// when no quota covers it. Kafka's `quotaMetricTags` then `quotaLimit`: the first entity
    /// in the module's order decides whose rate it is.
    pub fn resolve(&self, key: QuotaKey, user: &str, client_id: &str) -> Option<(SensorKey, f64)> {
        use EntityName::{Default, Named};
        let (u, c) = (Named(user.to_owned()), Named(client_id.to_owned()));
        let both = SensorKey {
            user: user.to_owned(),
            client_id: client_id.to_owned(),
        };
        let user_only = SensorKey {
            user: user.to_owned(),
            client_id: String::new(),
        };
        let client_only = SensorKey {
            user: String::new(),
            client_id: client_id.to_owned(),
        };
        let levels = [
            (Some(u.clone()), Some(c.clone()), &both),
            (Some(u.clone()), Some(Default), &both),
            (Some(u.clone()), None, &user_only),
            (Some(Default), Some(c.clone()), &both),
            (Some(Default), Some(Default), &both),
            (Some(Default), None, &user_only),
        ];
        let tags = levels
            .iter()
            .find(|(user, client, _)| self.has(key, user.clone(), client.clone()))
            .map_or(&client_only, |(_, _, tags)| *tags);
        let bound = self.limit(key, tags)?;
        Some((tags.clone(), bound))
    }

    /// Kafka's `quotaLimit`: the bound for a rate's tags.
    fn limit(&self, key: QuotaKey, tags: &SensorKey) -> Option<f64> {
        use EntityName::{Default, Named};
        let (u, c) = (Named(tags.user.clone()), Named(tags.client_id.clone()));
        let candidates: Vec<(Option<EntityName>, Option<EntityName>)> =
            match (tags.user.is_empty(), tags.client_id.is_empty()) {
                (false, false) => vec![
                    (Some(u.clone()), Some(c.clone())),
                    (Some(u), Some(Default)),
                    (Some(Default), Some(c)),
                    (Some(Default), Some(Default)),
                ],
                (false, true) => vec![(Some(u), None), (Some(Default), None)],
                (true, false) => vec![(None, Some(c)), (None, Some(Default))],
                (true, true) => vec![],
            };
        candidates
            .into_iter()
            .find_map(|(user, client)| self.get(&QuotaEntity::new(user, client), key))
    }
}

/// The measured rates: one per quota key and [`SensorKey`].
#[derive(Debug, Default)]
pub struct Sensors {
    rates: HashMap<(QuotaKey, SensorKey), Rate>,
}

/// Past this many rates, idle ones are forgotten before another is added: client ids come
/// from clients, so their number must not grow the broker's memory without bound.
const SWEEP_ABOVE: usize = 1_024;

impl Sensors {
    /// Records `value` for `user`'s client `client_id` against `key`'s quota, and returns the
    /// throttle time in milliseconds (0 when within it, or when no quota covers the client).
    pub fn record(
        &mut self,
        config: &QuotaConfig,
        key: QuotaKey,
        (user, client_id): (&str, &str),
        value: f64,
        now_ms: u64,
    ) -> u64 {
        let Some((tags, bound)) = config.resolve(key, user, client_id) else {
            return 0;
        };
        if self.rates.len() >= SWEEP_ABOVE && !self.rates.contains_key(&(key, tags.clone())) {
            self.rates.retain(|_, rate| !rate.is_idle(now_ms));
        }
        let rate = self.rates.entry((key, tags)).or_default();
        rate.record(value, now_ms);
        rate.throttle_ms(bound, now_ms, key.max_throttle_ms())
    }

    #[cfg(test)]
    pub fn rate_count(&self) -> usize {
        self.rates.len()
    }
}

#[cfg(test)]
mod tests;
