//! Schema types, their parsing, and the compatibility levels a subject's new version is
//! checked by, as Confluent defines them:
//!
//! | level | the new schema must |
//! | --- | --- |
//! | `BACKWARD` (the default) | read data written with the latest version |
//! | `BACKWARD_TRANSITIVE` | read data written with every version |
//! | `FORWARD` | be readable by the latest version |
//! | `FORWARD_TRANSITIVE` | be readable by every version |
//! | `FULL` / `FULL_TRANSITIVE` | both, with the latest / every version |
//! | `NONE` | nothing |
//!
//! Soft-deleted versions take no part. Avro's reading rules are Avro's schema resolution, as
//! `apache-avro`'s `SchemaCompatibility` implements it; a resolution that works only for some
//! of the writer's data (a union branch the reader lacks) counts as incompatible, as in
//! Confluent (Java's `SchemaCompatibility`).

use std::fmt;
use std::str::FromStr;

use apache_avro::reader::datum::GenericDatumReader;
use apache_avro::schema::ResolvedSchema;
use apache_avro::schema_compatibility::{Compatibility as AvroResolution, SchemaCompatibility};
use apache_avro::Schema as AvroSchema;
use serde::{Deserialize, Serialize};

use super::json::JsonSchema;
use super::protobuf::{self, ProtobufSchema};
use crate::storage::format::MAX_DECOMPRESSED_BYTES;

/// A schema's language.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum SchemaType {
    #[default]
    Avro,
    Json,
    Protobuf,
}

impl SchemaType {
    pub fn is_avro(&self) -> bool {
        *self == SchemaType::Avro
    }

    /// The types the registry accepts (`GET /schemas/types`).
    pub const SUPPORTED: &'static [SchemaType] =
        &[SchemaType::Avro, SchemaType::Json, SchemaType::Protobuf];

    pub fn name(self) -> &'static str {
        match self {
            SchemaType::Avro => "AVRO",
            SchemaType::Json => "JSON",
            SchemaType::Protobuf => "PROTOBUF",
        }
    }
}

/// A compatibility level.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Compatibility {
    None,
    #[default]
    Backward,
    BackwardTransitive,
    Forward,
    ForwardTransitive,
    Full,
    FullTransitive,
}

impl Compatibility {
    pub fn name(self) -> &'static str {
        match self {
            Compatibility::None => "NONE",
            Compatibility::Backward => "BACKWARD",
            Compatibility::BackwardTransitive => "BACKWARD_TRANSITIVE",
            Compatibility::Forward => "FORWARD",
            Compatibility::ForwardTransitive => "FORWARD_TRANSITIVE",
            Compatibility::Full => "FULL",
            Compatibility::FullTransitive => "FULL_TRANSITIVE",
        }
    }

    fn transitive(self) -> bool {
        matches!(
            self,
            Compatibility::BackwardTransitive
                | Compatibility::ForwardTransitive
                | Compatibility::FullTransitive
        )
    }

    /// Whether the new schema must read the old ones' data, and be read by them.
    fn directions(self) -> (bool, bool) {
        match self {
            Compatibility::None => (false, false),
            Compatibility::Backward | Compatibility::BackwardTransitive => (true, false),
            Compatibility::Forward | Compatibility::ForwardTransitive => (false, true),
            Compatibility::Full | Compatibility::FullTransitive => (true, true),
        }
    }

    /// Why `new` cannot join a subject whose live versions are `previous` (oldest first)
    /// under this level: one message per failed check, naming the version; empty when it can.
    pub fn check(self, new: &ParsedSchema, previous: &[(u32, &ParsedSchema)]) -> Vec<String> {
        let (reads_old, read_by_old) = self.directions();
        let checked = if self.transitive() {
            previous
        } else {
            &previous[previous.len().saturating_sub(1)..]
        };
        let mut why = Vec::new();
        for (version, old) in checked {
            if reads_old {
                if let Err(e) = can_read(old, new) {
                    why.push(format!(
                        "the new schema cannot read data written with version {version}: {e}"
                    ));
                }
            }
            if read_by_old {
                if let Err(e) = can_read(new, old) {
                    why.push(format!(
                        "version {version} cannot read data written with the new schema: {e}"
                    ));
                }
            }
        }
        why
    }
}

impl fmt::Display for Compatibility {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Compatibility {
    type Err = String;

    /// A level by its name, in any case.
    fn from_str(name: &str) -> Result<Self, String> {
        let all = [
            Compatibility::None,
            Compatibility::Backward,
            Compatibility::BackwardTransitive,
            Compatibility::Forward,
            Compatibility::ForwardTransitive,
            Compatibility::Full,
            Compatibility::FullTransitive,
        ];
        all.into_iter()
            .find(|level| level.name().eq_ignore_ascii_case(name))
            .ok_or_else(|| format!("Invalid compatibility level: {name}"))
    }
}

/// A schema another one refers to: the name the referring schema uses for it (an Avro
/// type's full name, a JSON `$ref` URL), and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Referenced {
    pub name: String,
    pub schema: String,
}

/// A parsed schema, and its normalized text: the form versions are compared and stored in
/// (an Avro schema's full JSON, compact, defaults and docs kept; a JSON Schema compact with
/// its keys sorted), so two registrations that differ only in whitespace or key order are
/// the same schema; a Protobuf schema's text is kept as given, trimmed.
#[derive(Debug, Clone)]
pub struct ParsedSchema {
    pub schema_type: SchemaType,
    pub normalized: String,
    form: Form,
}

/// The parsed schema in its language.
#[derive(Debug, Clone)]
enum Form {
    /// The schema, and the referenced ones it was parsed with (dependency order).
    Avro(AvroSchema, Vec<AvroSchema>),
    Json(JsonSchema),
    Protobuf(ProtobufSchema),
}

impl ParsedSchema {
    /// Parses `text` of `schema_type`; `referenced` are the schemas it refers to, in
    /// dependency order (each after those it refers to).
    ///
    /// # Errors
    /// Why it is not a valid schema (Confluent's 42201), or that the type is not supported.
    pub fn parse(
        schema_type: SchemaType,
        text: &str,
        referenced: &[Referenced],
    ) -> Result<Self, String> {
        let (form, normalized) = match schema_type {
            SchemaType::Avro => parse_avro(text, referenced)?,
            SchemaType::Json => {
                let named = referenced
                    .iter()
                    .map(|r| (r.name.as_str(), r.schema.as_str()));
                let (json, normalized) = JsonSchema::parse(text, named)?;
                (Form::Json(json), normalized)
            }
            SchemaType::Protobuf => {
                let imports: Vec<(String, String)> = (referenced.iter())
                    .map(|r| (r.name.clone(), r.schema.clone()))
                    .collect();
                let parsed = ProtobufSchema::parse(text, &imports)?;
                (Form::Protobuf(parsed), ProtobufSchema::normalize(text))
            }
        };
        Ok(ParsedSchema {
            schema_type,
            normalized,
            form,
        })
    }

    /// The schema in a format Confluent's `format` query parameter names, where this type has
    /// it: `serialized` for Protobuf (see [`ProtobufSchema::serialized`]); `None` otherwise.
    pub fn formatted(&self, format: &str) -> Option<String> {
        match (&self.form, format) {
            (Form::Protobuf(schema), "serialized") => Some(schema.serialized()),
            _ => None,
        }
    }

    /// Whether `payload` (a record's bytes after Confluent's 5-byte header) is a value of this
    /// schema: one Avro datum and nothing after it; a JSON document the schema accepts;
    /// Protobuf's message-index list and a message that decodes as the message it names.
    ///
    /// # Errors
    /// Why it is not.
    pub fn check_payload(&self, payload: &[u8]) -> Result<(), String> {
        match &self.form {
            Form::Avro(schema, referenced) => {
                decode_avro_payload(schema, referenced, payload).map(drop)
            }
            Form::Json(json) => json.check_payload(payload),
            Form::Protobuf(schema) => schema.check_payload(payload),
        }
    }

    /// `payload` decoded as JSON, once checked as [`ParsedSchema::check_payload`] does: an
    /// Avro datum in Avro's JSON mapping of its values, a JSON document as it is. Protobuf
    /// payloads are not decoded to JSON.
    ///
    /// # Errors
    /// As [`ParsedSchema::check_payload`]; a value JSON cannot hold (a NaN float); Protobuf.
    pub fn payload_to_json(&self, payload: &[u8]) -> Result<serde_json::Value, String> {
        match &self.form {
            Form::Avro(schema, referenced) => {
                let value = decode_avro_payload(schema, referenced, payload)?;
                serde_json::Value::try_from(value).map_err(|e| e.to_string())
            }
            Form::Json(json) => {
                json.check_payload(payload)?;
                serde_json::from_slice(payload).map_err(|e| e.to_string())
            }
            Form::Protobuf(_) => Err("Protobuf payloads are not shown as JSON".into()),
        }
    }
}

fn parse_avro(text: &str, referenced: &[Referenced]) -> Result<(Form, String), String> {
    cap_avro_allocations();
    let parsed = if referenced.is_empty() {
        AvroSchema::parse_str(text).map(|schema| (schema, Vec::new()))
    } else {
        let texts: Vec<&str> = referenced.iter().map(|r| r.schema.as_str()).collect();
        AvroSchema::parse_str_with_list(text, &texts)
    };
    let (schema, referenced) = parsed.map_err(|e| format!("Invalid schema: {e}"))?;
    let normalized = serde_json::to_string(&schema).map_err(|e| format!("Invalid schema: {e}"))?;
    Ok((Form::Avro(schema, referenced), normalized))
}

/// `payload` decoded as one Avro datum of `schema` and nothing after it.
fn decode_avro_payload(
    schema: &AvroSchema,
    referenced: &[AvroSchema],
    payload: &[u8],
) -> Result<apache_avro::types::Value, String> {
    let schemata: Vec<&AvroSchema> = referenced.iter().chain([schema]).collect();
    let reader = GenericDatumReader::builder(schema)
        .writer_schemata(schemata)
        .and_then(|builder| builder.build())
        .map_err(|e| format!("the schema cannot decode: {e}"))?;
    let mut rest = payload;
    let value = reader
        .read_value(&mut rest)
        .map_err(|e| format!("not a value of the schema: {e}"))?;
    // The decoder answers a string or bytes cut short with a null rather than an error.
    let names = ResolvedSchema::new_with_schemata(referenced.iter().chain([schema]).collect())
        .map_err(|e| format!("the schema cannot decode: {e}"))?;
    if !value.validate_with_names(schema, names.get_names()) {
        return Err("not a value of the schema: the payload ends inside it".into());
    }
    if rest.is_empty() {
        Ok(value)
    } else {
        Err(format!(
            "{} bytes follow the value ({} read)",
            rest.len(),
            payload.len() - rest.len()
        ))
    }
}

/// Caps what apache-avro allocates for one string, bytes value or array it decodes, before it
/// reads them, at the largest record NanoKafka stores ([`MAX_DECOMPRESSED_BYTES`]) instead
/// of its 512 MiB default: a payload that declares a huge length (a hostile producer's, on a
/// topic validated against its schema) is refused without reserving more. apache-avro keeps
/// one cap per process, set by its first caller: an application that sets its own first
/// keeps it.
pub(crate) fn cap_avro_allocations() {
    apache_avro::util::max_allocation_bytes(MAX_DECOMPRESSED_BYTES);
}

/// Whether data written with `writer` can be read with `reader`, all of it.
fn can_read(writer: &ParsedSchema, reader: &ParsedSchema) -> Result<(), String> {
    match (&writer.form, &reader.form) {
        (Form::Avro(writer, _), Form::Avro(reader, _)) => {
            match SchemaCompatibility::can_read(writer, reader) {
                Ok(AvroResolution::Full) => Ok(()),
                Ok(AvroResolution::Partial) => Err(
                    "only part of the writer's values can be read (a union branch is missing)"
                        .into(),
                ),
                Err(e) => Err(e.to_string()),
            }
        }
        (Form::Json(writer), Form::Json(reader)) => JsonSchema::can_read(writer, reader),
        (Form::Protobuf(writer), Form::Protobuf(reader)) => {
            let why = protobuf::compare(writer, reader);
            if why.is_empty() {
                Ok(())
            } else {
                Err(why.join("; "))
            }
        }
        _ => Err(format!(
            "the schema type changed from {} to {}",
            writer.schema_type.name(),
            reader.schema_type.name()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn avro(text: &str) -> ParsedSchema {
        ParsedSchema::parse(SchemaType::Avro, text, &[]).unwrap()
    }

    /// A record `User` with these fields (JSON of each field).
    fn user(fields: &[&str]) -> ParsedSchema {
        avro(&format!(
            r#"{{"type":"record","name":"User","fields":[{}]}}"#,
            fields.join(",")
        ))
    }

    const NAME: &str = r#"{"name":"name","type":"string"}"#;
    const AGE: &str = r#"{"name":"age","type":"int"}"#;
    const AGE_DEFAULT: &str = r#"{"name":"age","type":"int","default":0}"#;

    fn ok(level: Compatibility, new: &ParsedSchema, previous: &[&ParsedSchema]) -> bool {
        let numbered: Vec<(u32, &ParsedSchema)> = previous
            .iter()
            .enumerate()
            .map(|(i, s)| (i as u32 + 1, *s))
            .collect();
        level.check(new, &numbered).is_empty()
    }

    #[test]
    fn backward_lets_a_new_schema_add_a_field_only_with_a_default() {
        let v1 = user(&[NAME]);
        assert!(ok(
            Compatibility::Backward,
            &user(&[NAME, AGE_DEFAULT]),
            &[&v1]
        ));
        let why = Compatibility::Backward.check(&user(&[NAME, AGE]), &[(1, &v1)]);
        assert_eq!(why.len(), 1);
        assert!(
            why[0].contains("version 1") && why[0].contains("age"),
            "{why:?}"
        );
        // Removing a field: the new reader ignores it.
        assert!(ok(Compatibility::Backward, &user(&[]), &[&v1]));
    }

    #[test]
    fn forward_lets_a_new_schema_remove_a_field_only_if_the_old_one_has_a_default() {
        let with_default = user(&[NAME, AGE_DEFAULT]);
        assert!(ok(Compatibility::Forward, &user(&[NAME]), &[&with_default]));
        let without_default = user(&[NAME, AGE]);
        assert!(!ok(
            Compatibility::Forward,
            &user(&[NAME]),
            &[&without_default]
        ));
        // Adding a field: the old reader ignores it.
        assert!(ok(
            Compatibility::Forward,
            &user(&[NAME, AGE]),
            &[&user(&[NAME])]
        ));
    }

    #[test]
    fn full_needs_both_directions() {
        let v1 = user(&[NAME]);
        assert!(ok(Compatibility::Full, &user(&[NAME, AGE_DEFAULT]), &[&v1]));
        assert!(!ok(Compatibility::Full, &user(&[NAME, AGE]), &[&v1]));
        let v1 = user(&[NAME, AGE]);
        assert!(!ok(Compatibility::Full, &user(&[NAME]), &[&v1]));
    }

    #[test]
    fn a_plain_level_checks_the_latest_version_and_a_transitive_one_every_version() {
        // v1 has no age, v2 adds it with a default, v3 drops the default: v3 reads v2's data
        // (which has age) but not v1's.
        let v1 = user(&[NAME]);
        let v2 = user(&[NAME, AGE_DEFAULT]);
        let v3 = user(&[NAME, AGE]);
        assert!(ok(Compatibility::Backward, &v3, &[&v1, &v2]));
        assert!(!ok(Compatibility::BackwardTransitive, &v3, &[&v1, &v2]));
        // Forward: v1 (no age) reads anything; v0 demands a field without default.
        let v0 = user(&[NAME, r#"{"name":"email","type":"string"}"#]);
        let v1 = user(&[NAME, r#"{"name":"email","type":"string","default":""}"#]);
        let v2 = user(&[NAME]);
        assert!(ok(Compatibility::Forward, &v2, &[&v0, &v1]));
        assert!(!ok(Compatibility::ForwardTransitive, &v2, &[&v0, &v1]));
        assert!(ok(Compatibility::Full, &v2, &[&v0, &v1]));
        assert!(!ok(Compatibility::FullTransitive, &v2, &[&v0, &v1]));
    }

    #[test]
    fn none_accepts_anything_and_types_change_only_where_avro_promotes() {
        assert!(ok(
            Compatibility::None,
            &avro(r#""string""#),
            &[&avro(r#""int""#)]
        ));
        assert!(ok(
            Compatibility::Backward,
            &avro(r#""long""#),
            &[&avro(r#""int""#)]
        ));
        assert!(!ok(
            Compatibility::Backward,
            &avro(r#""int""#),
            &[&avro(r#""long""#)]
        ));
        // A union the reader lacks a branch of is refused.
        let union = avro(r#"["int","string"]"#);
        assert!(!ok(Compatibility::Backward, &avro(r#""int""#), &[&union]));
    }

    #[test]
    fn levels_parse_by_name_and_normalizing_ignores_layout() {
        assert_eq!("full_transitive".parse(), Ok(Compatibility::FullTransitive));
        assert!("SIDEWAYS".parse::<Compatibility>().is_err());
        let a = avro(
            r#"{"type": "record", "name": "U", "fields": [ {"name": "n", "type": "string"} ]}"#,
        );
        let b = avro(r#"{"fields":[{"type":"string","name":"n"}],"name":"U","type":"record"}"#);
        assert_eq!(a.normalized, b.normalized);
        assert!(ParsedSchema::parse(SchemaType::Avro, r#"{"type":"record"}"#, &[]).is_err());
    }

    #[test]
    fn an_avro_payload_declaring_a_huge_string_is_refused_without_reserving_it() {
        let schema = avro(r#""string""#);
        // A string of 2^30 bytes (zigzag varint 2^31), then one byte of it.
        let payload = [0x80, 0x80, 0x80, 0x80, 0x08, b'x'];
        let why = schema.check_payload(&payload).unwrap_err();
        assert!(why.contains("not a value of the schema"), "{why}");
        assert_eq!(
            apache_avro::util::max_allocation_bytes(0),
            MAX_DECOMPRESSED_BYTES
        );
    }

    #[test]
    fn a_subject_cannot_change_its_schema_type() {
        let json = ParsedSchema::parse(SchemaType::Json, r#"{"type":"string"}"#, &[]).unwrap();
        let why = Compatibility::Backward.check(&json, &[(1, &avro(r#""string""#))]);
        assert!(
            why[0].contains("schema type changed from AVRO to JSON"),
            "{why:?}"
        );
    }

    #[test]
    fn a_payload_checks_only_when_it_is_one_whole_value() {
        let schema = user(&[NAME, AGE]);
        // "ab" (length 2 zigzag = 4), then 21 (zigzag 42).
        let datum = [4, b'a', b'b', 42];
        assert_eq!(schema.check_payload(&datum), Ok(()));
        assert_eq!(
            schema.payload_to_json(&datum),
            Ok(serde_json::json!({"name": "ab", "age": 21}))
        );
        let trailing = [4, b'a', b'b', 42, 0];
        assert!(schema
            .check_payload(&trailing)
            .unwrap_err()
            .contains("1 bytes follow"));
        assert!(schema.check_payload(&[4, b'a']).is_err());
        assert!(schema.check_payload(&[]).is_err());
        let json = ParsedSchema::parse(SchemaType::Json, r#"{"type":"integer"}"#, &[]).unwrap();
        assert_eq!(json.payload_to_json(b"7"), Ok(serde_json::json!(7)));
        assert!(json.payload_to_json(b"\"seven\"").is_err());
    }

    #[test]
    fn references_resolve_named_types() {
        let address =
            r#"{"type":"record","name":"Address","fields":[{"name":"city","type":"string"}]}"#;
        let user = r#"{"type":"record","name":"User","fields":[{"name":"home","type":"Address"}]}"#;
        assert!(ParsedSchema::parse(SchemaType::Avro, user, &[]).is_err());
        let address = Referenced {
            name: "Address".into(),
            schema: address.into(),
        };
        let parsed = ParsedSchema::parse(SchemaType::Avro, user, &[address]).unwrap();
        assert!(parsed.normalized.contains("Address"));
        assert!(parsed.check_payload(&[2, b'x']).is_ok());
    }
}
