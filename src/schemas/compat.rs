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

use apache_avro::schema_compatibility::{Compatibility as AvroResolution, SchemaCompatibility};
use apache_avro::Schema as AvroSchema;
use serde::{Deserialize, Serialize};

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
    pub const SUPPORTED: &'static [SchemaType] = &[SchemaType::Avro];

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

/// A parsed schema, and its normalized text: the form versions are compared and stored in
/// (an Avro schema's full JSON, compact, defaults and docs kept), so two registrations that
/// differ only in whitespace or key order are the same schema.
#[derive(Debug, Clone)]
pub struct ParsedSchema {
    pub schema_type: SchemaType,
    pub normalized: String,
    avro: AvroSchema,
}

impl ParsedSchema {
    /// Parses `text` of `schema_type`; `referenced` are the texts of the schemas it refers
    /// to, in dependency order (each after those it refers to).
    ///
    /// # Errors
    /// Why it is not a valid schema (Confluent's 42201), or that the type is not supported.
    pub fn parse(
        schema_type: SchemaType,
        text: &str,
        referenced: &[String],
    ) -> Result<Self, String> {
        if schema_type != SchemaType::Avro {
            return Err(format!(
                "schema type {} is not supported by this registry (AVRO is)",
                schema_type.name()
            ));
        }
        let parsed = if referenced.is_empty() {
            AvroSchema::parse_str(text)
        } else {
            AvroSchema::parse_str_with_list(text, referenced).map(|(schema, _)| schema)
        };
        let avro = parsed.map_err(|e| format!("Invalid schema: {e}"))?;
        let normalized =
            serde_json::to_string(&avro).map_err(|e| format!("Invalid schema: {e}"))?;
        Ok(ParsedSchema {
            schema_type,
            normalized,
            avro,
        })
    }
}

impl ParsedSchema {
    /// Checks that `payload` (a record's bytes after Confluent's 5-byte header) is one whole
    /// value of this schema: an Avro datum that decodes, with no byte left over.
    ///
    /// # Errors
    /// Why it is not (the decoder's error, or the bytes left over); a schema type whose
    /// payloads this registry cannot read is refused as not supported.
    pub fn check_payload(&self, payload: &[u8]) -> Result<(), String> {
        self.decode(payload).map(drop)
    }

    /// `payload` decoded, as JSON (an Avro datum in Avro's JSON mapping of its values).
    ///
    /// # Errors
    /// As [`ParsedSchema::check_payload`], or a value JSON cannot hold (a NaN float).
    pub fn payload_to_json(&self, payload: &[u8]) -> Result<serde_json::Value, String> {
        serde_json::Value::try_from(self.decode(payload)?).map_err(|e| e.to_string())
    }

    fn decode(&self, payload: &[u8]) -> Result<apache_avro::types::Value, String> {
        match self.schema_type {
            SchemaType::Avro => {
                let mut rest = payload;
                let value = apache_avro::reader::datum::GenericDatumReader::builder(&self.avro)
                    .build()
                    .and_then(|reader| reader.read_value(&mut rest))
                    .map_err(|e| e.to_string())?;
                match rest.len() {
                    0 => Ok(value),
                    left => Err(format!("{left} bytes left after the Avro value")),
                }
            }
            other => Err(format!(
                "checking {} payloads is not supported",
                other.name()
            )),
        }
    }
}

/// Whether data written with `writer` can be read with `reader`, all of it.
fn can_read(writer: &ParsedSchema, reader: &ParsedSchema) -> Result<(), String> {
    match SchemaCompatibility::can_read(&writer.avro, &reader.avro) {
        Ok(AvroResolution::Full) => Ok(()),
        Ok(AvroResolution::Partial) => {
            Err("only part of the writer's values can be read (a union branch is missing)".into())
        }
        Err(e) => Err(e.to_string()),
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
        assert!(ParsedSchema::parse(SchemaType::Json, r#"{"type":"object"}"#, &[]).is_err());
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
            .contains("1 bytes left"));
        assert!(schema.check_payload(&[4, b'a']).is_err());
        assert!(schema.check_payload(&[]).is_err());
    }

    #[test]
    fn references_resolve_named_types() {
        let address =
            r#"{"type":"record","name":"Address","fields":[{"name":"city","type":"string"}]}"#;
        let user = r#"{"type":"record","name":"User","fields":[{"name":"home","type":"Address"}]}"#;
        assert!(ParsedSchema::parse(SchemaType::Avro, user, &[]).is_err());
        let parsed = ParsedSchema::parse(SchemaType::Avro, user, &[address.to_owned()]).unwrap();
        assert!(parsed.normalized.contains("Address"));
    }
}
