//! The records of the `_schemas` topic, in Confluent Schema Registry's format: JSON keys and
//! values, so a Kafka cluster's registry reading the topic (after `nanokafka export`) finds
//! the same subjects, versions and ids. [`SchemaKey`] documents the records.
//!
//! Unknown key types are skipped, as Confluent skips them, so a topic written by a newer
//! registry still loads.

use serde::{Deserialize, Serialize};

use super::compat::SchemaType;

/// A record's key, by its `keytype`, and what each record means:
///
/// | key (`keytype`) | value | means |
/// | --- | --- | --- |
/// | `{"keytype":"SCHEMA","subject":S,"version":V,"magic":1}` | [`SchemaValue`] | version `V` of `S` (soft-deleted when `"deleted":true`) |
/// | same | none (a tombstone) | version `V` of `S` permanently deleted |
/// | `{"keytype":"CONFIG","subject":S or null,"magic":0}` | `{"compatibilityLevel":L}` | `S`'s level (null: the global one) |
/// | same | none | `S`'s level removed (it follows the global one again) |
/// | `{"keytype":"DELETE_SUBJECT","subject":S,"magic":0}` | `{"subject":S,"version":V}` | every version of `S` up to `V` soft-deleted |
/// | `{"keytype":"MODE","subject":S or null,"magic":0}` | `{"mode":M}` | `S`'s mode (null: the global one) |
/// | same | none | `S`'s mode removed (it follows the global one again) |
/// | `{"keytype":"NOOP","magic":0}` | anything | nothing (Confluent writes them to find the log end) |
///
/// Keys and values are JSON, as Confluent writes them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "keytype")]
pub enum SchemaKey {
    #[serde(rename = "SCHEMA")]
    Schema {
        subject: String,
        version: u32,
        magic: u8,
    },
    #[serde(rename = "CONFIG")]
    Config { subject: Option<String>, magic: u8 },
    #[serde(rename = "DELETE_SUBJECT")]
    DeleteSubject { subject: String, magic: u8 },
    #[serde(rename = "MODE")]
    Mode { subject: Option<String>, magic: u8 },
    #[serde(rename = "NOOP")]
    Noop { magic: u8 },
    /// A key type this registry does not know: skipped.
    #[serde(other)]
    Unknown,
}

impl SchemaKey {
    pub fn schema(subject: &str, version: u32) -> Self {
        SchemaKey::Schema {
            subject: subject.to_owned(),
            version,
            magic: 1,
        }
    }

    pub fn config(subject: Option<&str>) -> Self {
        SchemaKey::Config {
            subject: subject.map(str::to_owned),
            magic: 0,
        }
    }

    pub fn mode(subject: Option<&str>) -> Self {
        SchemaKey::Mode {
            subject: subject.map(str::to_owned),
            magic: 0,
        }
    }

    pub fn delete_subject(subject: &str) -> Self {
        SchemaKey::DeleteSubject {
            subject: subject.to_owned(),
            magic: 0,
        }
    }

    /// The key's bytes as written to the topic.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a key serializes")
    }
}

/// A reference from one schema to a version of another subject (an Avro named type, a JSON
/// `$ref`, a Protobuf import): `name` is how the referring schema names it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SchemaReference {
    pub name: String,
    pub subject: String,
    pub version: u32,
}

/// A `SCHEMA` record's value: one version of a subject.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SchemaValue {
    pub subject: String,
    pub version: u32,
    pub id: u32,
    /// Absent for AVRO, as Confluent writes it.
    #[serde(default, skip_serializing_if = "SchemaType::is_avro")]
    pub schema_type: SchemaType,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub references: Vec<SchemaReference>,
    pub schema: String,
    #[serde(default)]
    pub deleted: bool,
}

/// A `CONFIG` record's value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigValue {
    pub compatibility_level: String,
}

/// A `MODE` record's value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModeValue {
    pub mode: String,
}

/// A `DELETE_SUBJECT` record's value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteSubjectValue {
    pub subject: String,
    pub version: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_values_read_as_confluent_writes_them() {
        let key: SchemaKey = serde_json::from_str(
            r#"{"keytype":"SCHEMA","subject":"orders-value","version":2,"magic":1}"#,
        )
        .unwrap();
        assert_eq!(key, SchemaKey::schema("orders-value", 2));
        let key: SchemaKey =
            serde_json::from_str(r#"{"keytype":"CONFIG","subject":null,"magic":0}"#).unwrap();
        assert_eq!(key, SchemaKey::config(None));
        let key: SchemaKey =
            serde_json::from_str(r#"{"keytype":"MODE","subject":"s","magic":0}"#).unwrap();
        assert_eq!(key, SchemaKey::mode(Some("s")));
        let key: SchemaKey = serde_json::from_str(r#"{"keytype":"NOOP","magic":0}"#).unwrap();
        assert_eq!(key, SchemaKey::Noop { magic: 0 });
        let key: SchemaKey =
            serde_json::from_str(r#"{"keytype":"CLEAR_SUBJECT","subject":"x","magic":0}"#).unwrap();
        assert_eq!(key, SchemaKey::Unknown);

        let value: SchemaValue = serde_json::from_str(
            r#"{"subject":"s","version":1,"id":7,"schema":"\"string\"","deleted":false}"#,
        )
        .unwrap();
        assert_eq!(value.schema_type, SchemaType::Avro);
        let written = serde_json::to_string(&value).unwrap();
        assert_eq!(
            written,
            r#"{"subject":"s","version":1,"id":7,"schema":"\"string\"","deleted":false}"#
        );
        assert_eq!(
            String::from_utf8(SchemaKey::schema("s", 1).to_bytes()).unwrap(),
            r#"{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}"#
        );
    }
}
