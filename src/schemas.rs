//! The schema registry's model (`schema-registry` feature): Confluent's subjects, versions,
//! global schema ids and compatibility levels, kept as the replay of the compacted topic
//! [`SCHEMAS_TOPIC`] (Confluent's `_schemas`, in its record format, so an export carries the
//! schemas to a Kafka cluster's registry). Nothing here does I/O: a change is planned
//! ([`Registry::register`], [`Registry::delete_version`], ...) into the records that say it,
//! the caller appends them to the topic, then [`Registry::apply`]s each, exactly as a restart
//! replays the topic; so what is served is always what the log says.
//!
//! The parts: `registry` (the state and its operations, with Confluent's errors),
//! `log_format` (the records' keys and values), `compat` (the schema types, the
//! compatibility levels and the Avro check, on `apache-avro`'s schema resolution), `json`
//! (JSON Schema: parsing, references and payloads; its compatibility rules in
//! `json/compat.rs`), `protobuf` (Protobuf schemas, compiled by `protox`, and Confluent's
//! Protobuf compatibility rules), `mode` (read-only and import modes), `wire` (Confluent's
//! wire format of a value: magic byte, schema id, Avro datum).

mod compat;
mod json;
mod log_format;
mod mode;
mod protobuf;
mod registry;
pub mod wire;

pub use compat::{Compatibility, ParsedSchema, Referenced, SchemaType};
pub use log_format::{SchemaKey, SchemaReference, SchemaValue};
pub use mode::Mode;
pub use registry::{Registered, Registry, RegistryError, SchemaInput, SubjectVersion, VersionSpec};

/// The compacted topic the registry keeps its records in (Confluent's default name).
pub const SCHEMAS_TOPIC: &str = "_schemas";
