//! Typed topics bound to a schema-registry subject (`schema-registry` feature): the values
//! are Confluent's wire format with an Avro schema, not MessagePack; see
//! [`Topic::with_avro_schema`].

use std::sync::Arc;
use std::time::Duration;

use super::{BlockingTopic, Topic};
use crate::async_handle::{AsyncNanoKafka, AvroBinding, ValueCodec};
use crate::error::Result;
use crate::schemas::Registered;

impl<T> Topic<T> {
    /// The same topic bound to the subject `<topic>-value` (Confluent's TopicNameStrategy)
    /// with the Avro schema `schema` (its JSON text; an `.avsc` file shared with the other
    /// languages' clients, `include_str!`ed, say). Binding registers the schema under the
    /// subject, or finds it there: a schema the subject's compatibility level refuses fails
    /// here, before anything is written.
    ///
    /// The bound topic writes every value as Confluent's serializers do: the byte 0, the
    /// schema's id (4 bytes, big-endian), then the value as an Avro binary datum (`T`
    /// through apache-avro's serde support). Its readers ([`Topic::poll_batch`],
    /// [`Topic::stream`], [`BlockingTopic::consumer`]) read a value's id, take that writer
    /// schema from the registry (once per id) and resolve it into the bound one, so values
    /// written with any compatible version, in any language, read as `T`. A value without
    /// the header, or with an id the registry does not have, does not decode (`Decode`,
    /// handled as any record that is not a `T`). [`Topic::subscribe`] is not available on a
    /// bound topic. The unbound topic (MessagePack) is unchanged.
    ///
    /// The schema is text the caller gives, not derived from `T`: the `.avsc` shared with the
    /// other languages is the contract, and `T` follows it (serde's field names are Avro's;
    /// `Option<X>` for `["null", X]`). To derive it instead, apache-avro's `AvroSchema` derive
    /// (its `derive` feature) gives the text: `serde_json::to_string(&T::get_schema())`.
    ///
    /// ```no_run
    /// # async fn run(bus: nanokafka::AsyncNanoKafka) -> nanokafka::Result<()> {
    /// #[derive(serde::Serialize, serde::Deserialize)]
    /// struct Order { id: i64, total_cents: i64 }
    /// const ORDER: &str = r#"{"type":"record","name":"Order","fields":[
    ///     {"name":"id","type":"long"},{"name":"total_cents","type":"long"}]}"#;
    /// let orders = bus.topic::<Order>("orders").with_avro_schema(ORDER).await?;
    /// orders.produce(&Order { id: 1, total_cents: 1250 }).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// `Schema`: 409 when the subject's level refuses the schema (the message names the
    /// level and each failed check: the field, the version), 42201 when it is not valid Avro,
    /// 50001; `Unsupported` on the Kafka backend (its schema registry is a service of its
    /// own: produce Confluent's format with its clients).
    pub async fn with_avro_schema(self, schema: &str) -> Result<Self> {
        let codec = bind(&self.handle, &self.name, schema).await?;
        Ok(Topic { codec, ..self })
    }

    /// The subject the topic is bound to, and its schema's id and version there; `None`
    /// when it is not bound.
    pub fn schema(&self) -> Option<(&str, Registered)> {
        self.codec.binding()
    }
}

impl<T> BlockingTopic<T> {
    /// [`Topic::with_avro_schema`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`Topic::with_avro_schema`].
    pub fn with_avro_schema(self, schema: &str) -> Result<Self> {
        let name = &self.name;
        let codec = (self.handle).call_async(|h| bind(h, name, schema), Duration::ZERO)?;
        Ok(BlockingTopic { codec, ..self })
    }

    /// As [`Topic::schema`].
    pub fn schema(&self) -> Option<(&str, Registered)> {
        self.codec.binding()
    }
}

/// The codec of `topic` bound to `<topic>-value` with `schema`.
async fn bind(handle: &AsyncNanoKafka, topic: &str, schema: &str) -> Result<ValueCodec> {
    let store = handle.require_schema_store("bind a topic to a schema")?;
    let binding = AvroBinding::bind(store.clone(), format!("{topic}-value"), schema).await?;
    Ok(ValueCodec::Avro(Arc::new(binding)))
}
