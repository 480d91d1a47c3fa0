//! JSON Schema: parsing (a schema is checked against its draft's meta-schema and compiled by
//! the `jsonschema` crate; draft 7 when it names none, as Confluent), the normalized text
//! (compact, keys sorted), references, payload validation, and the compatibility check.
//!
//! # References
//!
//! Confluent passes a JSON schema's references as `{name, subject, version}`, `name` being
//! the URL the schema's `$ref`s use (`"address.json"`, `"address.json#/definitions/zip"`).
//! Each referenced schema is known under its name resolved against the referring schema's
//! `$id` (or, without one, as it is), so `$ref`s reach it and nothing is fetched.
//!
//! The compatibility check, and the subset of JSON Schema it reasons about, are in `compat`.

mod compat;

use jsonschema::{uri, Draft, Registry, Validator};
use serde_json::{Map, Value};

/// A parsed JSON Schema, with the schemas it refers to.
#[derive(Debug, Clone)]
pub struct JsonSchema {
    root: Value,
    /// The referenced schemas by the name the references give them.
    referenced: Vec<(String, Value)>,
    /// The schema compiled with its references, for payloads.
    validator: Validator,
}

impl JsonSchema {
    /// Parses `text` with the schemas it refers to, `(name, text)` in dependency order: the
    /// schema and its normalized text.
    ///
    /// # Errors
    /// Not JSON, not a valid JSON Schema, or a `$ref` that resolves to nothing.
    pub fn parse<'t>(
        text: &str,
        referenced: impl IntoIterator<Item = (&'t str, &'t str)>,
    ) -> Result<(Self, String), String> {
        let root: Value =
            serde_json::from_str(text).map_err(|e| format!("Invalid schema: not JSON: {e}"))?;
        if !root.is_object() && !root.is_boolean() {
            return Err("Invalid schema: a JSON Schema is an object or a boolean".into());
        }
        let mut documents = Vec::new();
        for (name, text) in referenced {
            let doc: Value = serde_json::from_str(text)
                .map_err(|e| format!("Invalid schema: reference '{name}' is not JSON: {e}"))?;
            documents.push((name.to_owned(), doc));
        }
        let validator = compile(&root, &documents)?;
        let normalized = sorted(&root).to_string();
        let schema = JsonSchema {
            root,
            referenced: documents,
            validator,
        };
        Ok((schema, normalized))
    }

    /// Whether every document `writer` accepts is accepted by `reader` (the rules are in
    /// `compat`).
    ///
    /// # Errors
    /// Each difference that breaks it (or that the check cannot prove harmless), by path.
    pub fn can_read(writer: &JsonSchema, reader: &JsonSchema) -> Result<(), String> {
        compat::can_read(writer, reader)
    }

    /// Whether `payload` is a JSON document this schema accepts.
    ///
    /// # Errors
    /// Not JSON, or why the schema refuses it (the first few violations, by instance path).
    pub fn check_payload(&self, payload: &[u8]) -> Result<(), String> {
        const SHOWN: usize = 5;
        let instance: Value =
            serde_json::from_slice(payload).map_err(|e| format!("not JSON: {e}"))?;
        let why: Vec<String> = (self.validator.iter_errors(&instance))
            .take(SHOWN)
            .map(|e| format!("#{}: {e}", e.instance_path().as_str()))
            .collect();
        if why.is_empty() {
            Ok(())
        } else {
            Err(why.join("; "))
        }
    }
}

/// Compiles `root` against its draft's meta-schema, the referenced `documents` registered
/// under their names resolved against `root`'s `$id`.
fn compile(root: &Value, documents: &[(String, Value)]) -> Result<Validator, String> {
    let base = root
        .get("$id")
        .and_then(Value::as_str)
        .map(uri::from_str)
        .transpose()
        .map_err(|e| format!("Invalid schema: $id: {e}"))?;
    let mut registry = Registry::new();
    for (name, doc) in documents {
        let at = match &base {
            Some(base) => uri::resolve_against(&base.borrow(), name),
            None => uri::from_str(name),
        }
        .map_err(|e| format!("Invalid schema: reference name '{name}': {e}"))?;
        registry = registry
            .add(at.as_str(), doc.clone())
            .map_err(|e| format!("Invalid schema: reference '{name}': {e}"))?;
    }
    let registry = registry
        .prepare()
        .map_err(|e| format!("Invalid schema: {e}"))?;
    let mut options = jsonschema::options().with_registry(&registry);
    if root.get("$schema").is_none() {
        // The draft Confluent assumes; a set draft would override `$schema`.
        options = options.with_draft(Draft::Draft7);
    }
    options
        .build(root)
        .map_err(|e| format!("Invalid schema: {e}"))
}

/// `value` with every object's keys sorted (whatever order `serde_json`'s map keeps).
fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by_key(|(k, _)| *k);
            let map: Map<String, Value> = entries
                .into_iter()
                .map(|(k, v)| (k.clone(), sorted(v)))
                .collect();
            Value::Object(map)
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(text: &str) -> JsonSchema {
        JsonSchema::parse(text, []).unwrap().0
    }

    /// An object schema with these properties (JSON of the `properties` map's entries) and
    /// extra keywords.
    fn object(properties: &str, extra: &str) -> String {
        format!(r#"{{"type":"object","properties":{{{properties}}}{extra}}}"#)
    }

    const NAME: &str = r#""name":{"type":"string"}"#;
    const AGE: &str = r#""age":{"type":"integer"}"#;

    fn refused(result: Result<(), String>, expected: &str) {
        let why = result.expect_err("refused");
        assert!(why.contains(expected), "{why:?} lacks {expected:?}");
    }

    #[test]
    fn parsing_refuses_what_is_not_a_schema_and_normalizes_layout() {
        assert!(JsonSchema::parse("{not json", []).is_err());
        assert!(JsonSchema::parse("42", []).is_err());
        assert!(JsonSchema::parse(r#"{"type":"whole"}"#, []).is_err());
        assert!(JsonSchema::parse(r#"{"minLength":-1}"#, []).is_err());
        // Draft 7 unless `$schema` names another draft: draft 4's boolean exclusiveMinimum.
        let draft4 = r#"{"minimum":0,"exclusiveMinimum":true}"#;
        assert!(JsonSchema::parse(draft4, []).is_err());
        let draft4 = format!(
            r#"{{"$schema":"http://json-schema.org/draft-04/schema#",{}"#,
            &draft4[1..]
        );
        let (draft4, _) = JsonSchema::parse(&draft4, []).unwrap();
        assert!(draft4.check_payload(b"0").is_err());
        assert!(draft4.check_payload(b"1").is_ok());
        let (_, a) = JsonSchema::parse("{ \"type\": \"object\",\n \"title\": \"T\" }", []).unwrap();
        let (_, b) = JsonSchema::parse(r#"{"title":"T","type":"object"}"#, []).unwrap();
        assert_eq!(a, b);
        assert_eq!(a, r#"{"title":"T","type":"object"}"#);
    }

    #[test]
    fn a_payload_is_checked_against_the_schema() {
        let schema = json(&object(&format!("{NAME},{AGE}"), r#","required":["name"]"#));
        assert!(schema.check_payload(br#"{"name":"a","age":3}"#).is_ok());
        refused(schema.check_payload(br#"{"age":3}"#), "name");
        refused(schema.check_payload(br#"{"name":"a","age":"3"}"#), "#/age");
        refused(schema.check_payload(b"{"), "not JSON");
    }
}
