//! [`Schemas`]: the embedded broker's schema registry from Rust, without HTTP (the
//! `schema-registry` feature). The same [`SchemaStore`] the REST API serves, so ids,
//! versions and compatibility checks are the ones an HTTP client sees.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::{AsyncNanoKafka, SchemaStore};
use crate::error::{Error, Result};
use crate::schemas::wire::{self, WireError};
use crate::schemas::{Registered, SchemaInput, SchemaType, SubjectVersion, VersionSpec};

/// The broker's schema registry: [`AsyncNanoKafka::schemas`]. Cheap to clone; no I/O until
/// a call. Refusals are [`Error::Schema`] with Confluent's code and message.
#[derive(Debug, Clone)]
pub struct Schemas {
    handle: AsyncNanoKafka,
}

impl AsyncNanoKafka {
    /// The broker's schema registry, as the REST API serves it (no HTTP listener needed).
    pub fn schemas(&self) -> Schemas {
        Schemas {
            handle: self.clone(),
        }
    }

    /// The schema store, for a call that needs it.
    ///
    /// # Errors
    /// `Unsupported` on the Kafka backend (its registry is a separate service: use its REST
    /// API); `Schema` 50001 on a handle wrapped from a bare `Addr<BrokerActor>`, which does not
    /// reach the store.
    pub(crate) fn require_schema_store(&self, op: &'static str) -> Result<&Arc<SchemaStore>> {
        self.embedded(op)?;
        self.schema_store().ok_or_else(|| Error::Schema {
            code: 50001,
            message: format!(
                "{op}: this handle does not reach the broker's schema store (a handle wrapped \
                 from a bare Addr<BrokerActor>); use a handle of the broker"
            ),
        })
    }
}

impl Schemas {
    /// Registers `schema` under `subject` (Confluent's `POST /subjects/{subject}/versions`):
    /// its id and version, the existing ones when the subject has it already.
    ///
    /// # Errors
    /// `Schema`: 42201 (invalid schema), 42208 (invalid subject), 409 (refused by the
    /// subject's compatibility level: the level and every failed check in the message),
    /// 50001; `Unsupported` on the Kafka backend.
    pub async fn register(&self, subject: &str, schema: &SchemaInput) -> Result<Registered> {
        register(
            self.handle.require_schema_store("register a schema")?,
            subject,
            schema,
        )
        .await
    }

    /// The latest live version of `subject`.
    ///
    /// # Errors
    /// `Schema`: 40401 (no such subject), 50001; `Unsupported` on the Kafka backend.
    pub async fn latest(&self, subject: &str) -> Result<SubjectVersion> {
        let store = self.handle.require_schema_store("read a subject")?;
        let state = store.current().await?;
        Ok(state
            .registry
            .version(subject, VersionSpec::Latest, false)?)
    }

    /// The schema with global id `id`: its type, text and references.
    ///
    /// # Errors
    /// `Schema`: 40403 (no such id), 50001; `Unsupported` on the Kafka backend.
    pub async fn schema_by_id(&self, id: u32) -> Result<SchemaInput> {
        let store = self.handle.require_schema_store("read a schema")?;
        let state = store.current().await?;
        let (schema_type, schema, references) = state.registry.schema_by_id(id)?;
        Ok(SchemaInput {
            schema_type,
            schema: schema.to_owned(),
            references: references.to_vec(),
            ..SchemaInput::default()
        })
    }
}

/// Registers `schema` under `subject` in `store`, as the REST API does.
pub(crate) async fn register(
    store: &SchemaStore,
    subject: &str,
    schema: &SchemaInput,
) -> Result<Registered> {
    let mut state = store.current().await?;
    let planned = state.registry.register(subject, schema)?;
    let registered = planned.answer;
    store.write(&mut state, planned.records).await?;
    Ok(registered)
}

/// A typed topic's binding to a subject: the schema its values are written with (and read
/// into), and the writer schemas met so far, by id. Shared by the topic's clones and readers.
#[derive(Debug)]
pub(crate) struct AvroBinding {
    store: Arc<SchemaStore>,
    subject: String,
    registered: Registered,
    schema: apache_avro::Schema,
    /// Writer schemas by id, the bound one included, parsed once: filled after each poll by
    /// [`AvroBinding::load`] for the ids it saw first, before its records are decoded.
    writers: RwLock<HashMap<u32, apache_avro::Schema>>,
}

impl AvroBinding {
    /// Registers `schema` (Avro text) under `subject`, or finds it there.
    ///
    /// # Errors
    /// As [`Schemas::register`]: the subject's level refusing it is `Schema` 409.
    pub async fn bind(store: Arc<SchemaStore>, subject: String, schema: &str) -> Result<Self> {
        let input = SchemaInput {
            schema_type: SchemaType::Avro,
            schema: schema.to_owned(),
            ..SchemaInput::default()
        };
        let registered = register(&store, &subject, &input).await?;
        // The registry parsed the same text: an error here would be apache-avro's own.
        let schema = apache_avro::Schema::parse_str(schema).map_err(|e| Error::Schema {
            code: 42201,
            message: format!("Invalid schema: {e}"),
        })?;
        let writers = HashMap::from([(registered.id, schema.clone())]);
        Ok(AvroBinding {
            store,
            subject,
            registered,
            schema,
            writers: RwLock::new(writers),
        })
    }

    /// The subject (`<topic>-value`).
    pub fn subject(&self) -> &str {
        &self.subject
    }

    /// The bound schema's id and version in the subject.
    pub fn registered(&self) -> Registered {
        self.registered
    }

    /// `value` in Confluent's wire format with the bound schema.
    ///
    /// # Errors
    /// `Encode` when it does not fit the schema.
    pub fn encode<T: Serialize + ?Sized>(&self, value: &T) -> Result<Vec<u8>> {
        wire::encode(self.registered.id, &self.schema, value)
            .map_err(|e| Error::Encode(Arc::new(e)))
    }

    /// `bytes` (Confluent's wire format) as a `T`, resolved from its writer schema into the
    /// bound one.
    ///
    /// # Errors
    /// `NoHeader`; `UnknownId` for an id [`AvroBinding::load`] did not find; `Avro`.
    pub fn decode<T: DeserializeOwned>(&self, bytes: &[u8]) -> std::result::Result<T, WireError> {
        let id = wire::schema_id(bytes)?;
        let writers = self.writers.read().unwrap_or_else(PoisonError::into_inner);
        let writer = writers.get(&id).ok_or(WireError::UnknownId(id))?;
        // The bound schema is its own reader: no resolution to run.
        let reader = (id != self.registered.id).then_some(&self.schema);
        wire::decode(bytes, writer, reader)
    }

    /// Loads the writer schemas of `values` not met yet. An id the registry does not have
    /// (or that is no Avro schema this crate parses) stays unknown: its records fail to
    /// decode, as any record that is not a `T`. A store that fails is logged, and the same.
    pub async fn load<'a>(&self, values: impl Iterator<Item = &'a [u8]>) {
        let mut missing: Vec<u32> = {
            let writers = self.writers.read().unwrap_or_else(PoisonError::into_inner);
            values
                .filter_map(|v| wire::schema_id(v).ok())
                .filter(|id| !writers.contains_key(id))
                .collect()
        };
        if missing.is_empty() {
            return;
        }
        missing.sort_unstable();
        missing.dedup();
        let state = match self.store.current().await {
            Ok(state) => state,
            Err(e) => {
                tracing::warn!(subject = %self.subject, %e, "writer schemas not loaded");
                return;
            }
        };
        let mut writers = self.writers.write().unwrap_or_else(PoisonError::into_inner);
        for id in missing {
            if let Ok((SchemaType::Avro, text, _)) = state.registry.schema_by_id(id) {
                if let Ok(schema) = apache_avro::Schema::parse_str(text) {
                    writers.insert(id, schema);
                }
            }
        }
    }
}
