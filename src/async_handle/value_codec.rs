//! How a typed topic's values become bytes and back: MessagePack, as every typed call
//! writes unless told otherwise, or (`schema-registry` feature) Confluent's Avro wire format,
//! for a [`crate::Topic`] bound to a subject. The one seam for the choice: readers hold a
//! `ValueCodec` and decode each record through it (one `match`).

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::Result;
use crate::partition::Fetched;
use crate::types::Record;

/// A typed topic's value format.
#[derive(Debug, Clone, Default)]
pub(crate) enum ValueCodec {
    /// MessagePack with field names (`crate::types::encode`).
    #[default]
    MessagePack,
    /// Confluent's wire format with the bound subject's schema.
    #[cfg(feature = "schema-registry")]
    Avro(std::sync::Arc<super::schemas::AvroBinding>),
}

impl ValueCodec {
    /// Whether values are MessagePack (the typed calls' own path).
    pub fn is_message_pack(&self) -> bool {
        matches!(self, ValueCodec::MessagePack)
    }

    /// `value` as the format writes it.
    ///
    /// # Errors
    /// `Encode`.
    pub fn encode<T: Serialize + ?Sized>(&self, value: &T) -> Result<Vec<u8>> {
        match self {
            ValueCodec::MessagePack => crate::types::encode(value),
            #[cfg(feature = "schema-registry")]
            ValueCodec::Avro(binding) => binding.encode(value),
        }
    }

    /// The subject a bound topic's codec writes with, and its schema's id and version.
    #[cfg(feature = "schema-registry")]
    pub fn binding(&self) -> Option<(&str, crate::schemas::Registered)> {
        match self {
            ValueCodec::Avro(binding) => Some((binding.subject(), binding.registered())),
            ValueCodec::MessagePack => None,
        }
    }

    /// The records of `fetched` decoded as `T`, as [`Fetched::decode_each`] (one `match` per
    /// batch: MessagePack's path is exactly the untyped readers').
    ///
    /// # Errors
    /// As [`Fetched::decode_each`].
    pub fn decode_each<T: DeserializeOwned>(
        &self,
        fetched: &Fetched,
        topic: &str,
        take: impl FnMut(Record<T>),
    ) -> Result<()> {
        match self {
            ValueCodec::MessagePack => fetched.decode_each(topic, take),
            #[cfg(feature = "schema-registry")]
            ValueCodec::Avro(binding) => {
                fetched.decode_each_with(topic, |bytes| binding.decode(bytes), take)
            }
        }
    }

    /// Makes ready to decode what a poll `fetched`: the writer schemas of ids met first are
    /// loaded from the registry (nothing to do for MessagePack). Run after each poll, before
    /// its records are decoded, on the task that polled.
    pub async fn prepare(&self, fetched: Option<&Fetched>) {
        match (self, fetched) {
            #[cfg(feature = "schema-registry")]
            (ValueCodec::Avro(binding), Some(fetched)) => {
                // Boxed: a MessagePack poll does not carry the registry lookup's state in its
                // own (see `consumer::poll_prepared`).
                Box::pin(binding.load(fetched.records.iter().map(|r| r.value))).await;
            }
            _ => {}
        }
    }
}
