//! JSON Schema compatibility.
//!
//! As in Confluent, the reader must accept every document the writer accepts. The check
//! walks both schemas side by side (following `$ref`s, local or to a reference by name) and
//! knows these rules, each reported with the JSON pointer of the subschema
//! (`#/properties/age: type changed from integer to string`):
//!
//! | keyword | the reader may | it may not |
//! | --- | --- | --- |
//! | `type` | accept more types (`integer` → `number`) | accept fewer (`number` → `integer`) |
//! | `properties` (open model: `additionalProperties` absent or `true`) | drop a property; add one whose schema accepts anything | add a property with a schema |
//! | `properties` (closed model: `additionalProperties: false`) | add a property | drop one |
//! | `properties` (partly open: a schema) | add or drop one whose schema reads / is read by that schema | otherwise |
//! | `additionalProperties` | open up | close (`false`), narrow the schema |
//! | `required` | drop a name | add one |
//! | `enum`, `const` | add values, drop the keyword | drop values, add the keyword |
//! | `minimum`, `exclusiveMinimum`, `minLength`, `minItems`, `minProperties` | lower or drop it | raise or add it |
//! | `maximum`, `exclusiveMaximum`, `maxLength`, `maxItems`, `maxProperties` | raise or drop it | lower or add it |
//! | `multipleOf` | divide the writer's, drop it | anything else |
//! | `uniqueItems` | drop it | add it |
//! | `pattern`, `format` | drop it | add or change it |
//! | `items` (one schema), properties' schemas | by these rules, recursively | |
//!
//! Keywords of a kind of value (`maxLength`, `items`, ...) are checked only where the writer
//! can produce that kind. Any other validation keyword (`allOf`, `anyOf`, `oneOf`, `not`,
//! `if`, `patternProperties`, tuple `items`, `$ref` beside other keywords, ...) the check
//! does not reason about: the reader may drop it, and otherwise it must be unchanged, else
//! "cannot prove compatible: <keyword> changed". Annotations (`title`, `description`,
//! `default`, ...) and keywords JSON Schema does not define are ignored, as validators
//! ignore them.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::JsonSchema;

/// Whether every document `writer` accepts is accepted by `reader`.
///
/// # Errors
/// Each difference that breaks it (or that the check cannot prove harmless), by path.
pub(super) fn can_read(writer: &JsonSchema, reader: &JsonSchema) -> Result<(), String> {
    let mut check = Check::default();
    let w = At::root(writer);
    let r = At::root(reader);
    check.compare("#", w, r);
    if check.problems.is_empty() {
        Ok(())
    } else {
        Err(check.problems.join("; "))
    }
}

/// The schema `true`, standing for an absent `items` or `additionalProperties`.
static EVERYTHING: Value = Value::Bool(true);

/// How deep `$ref`s are followed in a row before the check gives up (a `$ref` to a `$ref`...).
const MAX_REF_CHAIN: usize = 32;

/// Keywords that say nothing about which documents are valid.
const ANNOTATIONS: &[&str] = &[
    "$schema",
    "$id",
    "id",
    "$comment",
    "$anchor",
    "$defs",
    "definitions",
    "title",
    "description",
    "default",
    "examples",
    "readOnly",
    "writeOnly",
    "deprecated",
    "contentEncoding",
    "contentMediaType",
];

/// Validation keywords the check does not reason about: the reader may drop one, otherwise it
/// must be the writer's.
const OPAQUE: &[&str] = &[
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "propertyNames",
    "dependencies",
    "dependentRequired",
    "dependentSchemas",
    "unevaluatedProperties",
    "additionalItems",
    "prefixItems",
    "contains",
    "minContains",
    "maxContains",
    "unevaluatedItems",
    "$ref",
    "$dynamicRef",
    "$recursiveRef",
];

/// The JSON types, as `type` names them (`integer` is a `number`).
const ALL_TYPES: &[&str] = &[
    "null", "boolean", "object", "array", "number", "integer", "string",
];

/// A subschema, the document its local `$ref`s point into, and the schema that document
/// belongs to (whose references name the others).
#[derive(Clone, Copy)]
struct At<'a> {
    schema: &'a JsonSchema,
    document: &'a Value,
    value: &'a Value,
}

impl<'a> At<'a> {
    fn root(schema: &'a JsonSchema) -> Self {
        At {
            schema,
            document: &schema.root,
            value: &schema.root,
        }
    }

    fn with(self, value: &'a Value) -> Self {
        At { value, ..self }
    }

    fn keyword(self, name: &str) -> Option<At<'a>> {
        self.value.get(name).map(|v| self.with(v))
    }

    /// Follows a `$ref` that stands alone (beside annotations only), as long as there is one.
    fn resolve(self) -> Result<At<'a>, String> {
        let mut at = self;
        for _ in 0..MAX_REF_CHAIN {
            let Some(target) = at.value.get("$ref").and_then(Value::as_str) else {
                return Ok(at);
            };
            let alone = (at.value.as_object().into_iter().flatten())
                .all(|(k, _)| k == "$ref" || ANNOTATIONS.contains(&k.as_str()));
            if !alone {
                return Ok(at);
            }
            at = at.follow(target)?;
        }
        Err(format!("$ref chain longer than {MAX_REF_CHAIN}"))
    }

    fn follow(self, target: &str) -> Result<At<'a>, String> {
        let (name, fragment) = target.split_once('#').unwrap_or((target, ""));
        let document = if name.is_empty() {
            self.document
        } else {
            let by_id = |doc: &Value| doc.get("$id").and_then(Value::as_str) == Some(name);
            (self.schema.referenced.iter())
                .find(|(n, doc)| n == name || by_id(doc))
                .map(|(_, doc)| doc)
                .or_else(|| by_id(&self.schema.root).then_some(&self.schema.root))
                .ok_or_else(|| format!("$ref '{target}' names no reference"))?
        };
        let value = if fragment.is_empty() {
            document
        } else if fragment.starts_with('/') {
            (document.pointer(fragment)).ok_or_else(|| format!("$ref '{target}' points nowhere"))?
        } else {
            return Err(format!("$ref '{target}' uses an anchor"));
        };
        Ok(At {
            schema: self.schema,
            document,
            value,
        })
    }

    fn accepts_everything(self) -> bool {
        match self.value {
            Value::Bool(b) => *b,
            Value::Object(map) => map.keys().all(|k| !validates(k)),
            _ => false,
        }
    }

    fn accepts_nothing(self) -> bool {
        match self.value {
            Value::Bool(b) => !*b,
            Value::Object(map) => map
                .get("not")
                .is_some_and(|n| self.with(n).accepts_everything()),
            _ => false,
        }
    }

    /// The types `type` allows (without it, those of the `enum` or `const` values); `None`
    /// for any.
    fn types(self) -> Option<Vec<&'a str>> {
        match self.value.get("type") {
            Some(Value::String(t)) => return Some(vec![t.as_str()]),
            Some(Value::Array(ts)) => return Some(ts.iter().filter_map(Value::as_str).collect()),
            _ => {}
        }
        let values = match (self.value.get("const"), self.value.get("enum")) {
            (Some(c), _) => std::slice::from_ref(c),
            (None, Some(Value::Array(e))) => e.as_slice(),
            _ => return None,
        };
        let mut types: Vec<&str> = values.iter().map(type_of).collect();
        types.sort_unstable();
        types.dedup();
        Some(types)
    }
}

/// Whether `keyword` constrains documents (the check must consider it).
fn validates(keyword: &str) -> bool {
    !ANNOTATIONS.contains(&keyword)
        && (OPAQUE.contains(&keyword)
            || matches!(
                keyword,
                "type"
                    | "enum"
                    | "const"
                    | "properties"
                    | "additionalProperties"
                    | "patternProperties"
                    | "required"
                    | "minProperties"
                    | "maxProperties"
                    | "items"
                    | "minItems"
                    | "maxItems"
                    | "uniqueItems"
                    | "minLength"
                    | "maxLength"
                    | "pattern"
                    | "format"
                    | "minimum"
                    | "maximum"
                    | "exclusiveMinimum"
                    | "exclusiveMaximum"
                    | "multipleOf"
            ))
}

/// A value's type, as `type` names it (the narrowest).
fn type_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn accepts_type(types: &[&str], t: &str) -> bool {
    types.contains(&t) || (t == "integer" && types.contains(&"number"))
}

fn describe(types: &Option<Vec<&str>>) -> String {
    match types {
        None => "any".into(),
        Some(ts) if ts.len() == 1 => ts[0].to_owned(),
        Some(ts) => format!("[{}]", ts.join(", ")),
    }
}

/// A JSON pointer segment for a property name.
fn segment(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

/// Whether a bound keyword is a lower one (the reader may lower it) or an upper one.
#[derive(Clone, Copy, PartialEq)]
enum Bound {
    Lower,
    Upper,
}

/// The walk over a writer and a reader schema, and what it found.
#[derive(Default)]
struct Check {
    /// Pairs (writer, reader) already being compared: a recursive schema meets them again.
    seen: HashSet<(usize, usize)>,
    problems: Vec<String>,
}

impl Check {
    fn problem(&mut self, path: &str, what: impl std::fmt::Display) {
        self.problems.push(format!("{path}: {what}"));
    }

    fn compare(&mut self, path: &str, w: At<'_>, r: At<'_>) {
        let (w, r) = match (w.resolve(), r.resolve()) {
            (Ok(w), Ok(r)) => (w, r),
            (Err(e), _) | (_, Err(e)) => {
                return self.problem(path, format!("cannot prove compatible: {e}"));
            }
        };
        let pair = (
            std::ptr::from_ref(w.value) as usize,
            std::ptr::from_ref(r.value) as usize,
        );
        if !self.seen.insert(pair) || r.accepts_everything() || w.accepts_nothing() {
            return;
        }
        if r.accepts_nothing() {
            return self.problem(path, "the reader accepts nothing here");
        }
        let (wt, rt) = (w.types(), r.types());
        if let Some(rt) = &rt {
            let narrowed = match &wt {
                None => !ALL_TYPES.iter().all(|t| accepts_type(rt, t)),
                Some(wt) => !wt.iter().all(|t| accepts_type(rt, t)),
            };
            if narrowed {
                self.problem(
                    path,
                    format!(
                        "type changed from {} to {}",
                        describe(&wt),
                        describe(&Some(rt.clone()))
                    ),
                );
            }
        }
        let writes = |kind: &str| match &wt {
            None => true,
            Some(wt) => wt
                .iter()
                .any(|t| *t == kind || (kind == "number" && *t == "integer")),
        };
        self.values(path, w, r);
        if writes("number") {
            for k in ["minimum", "exclusiveMinimum"] {
                self.bound(path, k, Bound::Lower, w, r);
            }
            for k in ["maximum", "exclusiveMaximum"] {
                self.bound(path, k, Bound::Upper, w, r);
            }
            self.multiple_of(path, w, r);
        }
        if writes("string") {
            self.bound(path, "minLength", Bound::Lower, w, r);
            self.bound(path, "maxLength", Bound::Upper, w, r);
            self.same_or_dropped(path, "pattern", w, r);
            self.same_or_dropped(path, "format", w, r);
        }
        if writes("array") {
            self.bound(path, "minItems", Bound::Lower, w, r);
            self.bound(path, "maxItems", Bound::Upper, w, r);
            let unique = |at: At<'_>| at.value.get("uniqueItems") == Some(&Value::Bool(true));
            if unique(r) && !unique(w) {
                self.problem(path, "uniqueItems added");
            }
            self.items(path, w, r);
        }
        if writes("object") {
            self.bound(path, "minProperties", Bound::Lower, w, r);
            self.bound(path, "maxProperties", Bound::Upper, w, r);
            self.object(path, w, r);
        }
        for k in OPAQUE {
            // A standalone `$ref` was followed above; beside other keywords it is opaque.
            self.same_or_dropped(path, k, w, r);
        }
    }

    /// `enum` and `const`: the reader's values must include the writer's.
    fn values(&mut self, path: &str, w: At<'_>, r: At<'_>) {
        let values = |at: At<'_>| -> Option<Vec<Value>> {
            match (at.value.get("enum"), at.value.get("const")) {
                (_, Some(c)) => Some(vec![c.clone()]),
                (Some(Value::Array(e)), None) => Some(e.clone()),
                _ => None,
            }
        };
        let Some(allowed) = values(r) else { return };
        match values(w) {
            None => self.problem(path, "enum added (the writer allows any value)"),
            Some(written) => {
                let missing: Vec<String> = (written.iter())
                    .filter(|v| !allowed.contains(v))
                    .map(Value::to_string)
                    .collect();
                if !missing.is_empty() {
                    self.problem(path, format!("enum values removed: {}", missing.join(", ")));
                }
            }
        }
    }

    fn bound(&mut self, path: &str, keyword: &str, bound: Bound, w: At<'_>, r: At<'_>) {
        let Some(rv) = r.value.get(keyword) else {
            return;
        };
        let wv = w.value.get(keyword);
        if wv == Some(rv) {
            return;
        }
        // Draft 4's boolean exclusiveMinimum/Maximum modify the bound: only unchanged is known.
        let (Some(rn), wn) = (rv.as_f64(), wv.map(Value::as_f64)) else {
            return self.problem(path, format!("cannot prove compatible: {keyword} changed"));
        };
        match wn {
            None => self.problem(path, format!("{keyword} added ({rv})")),
            Some(None) => self.problem(path, format!("cannot prove compatible: {keyword} changed")),
            Some(Some(wn)) => {
                let tighter = match bound {
                    Bound::Lower => rn > wn,
                    Bound::Upper => rn < wn,
                };
                if tighter {
                    let verb = if bound == Bound::Lower {
                        "increased"
                    } else {
                        "decreased"
                    };
                    self.problem(
                        path,
                        format!(
                            "{keyword} {verb} from {} to {rv}",
                            wv.unwrap_or(&Value::Null)
                        ),
                    );
                }
            }
        }
    }

    fn multiple_of(&mut self, path: &str, w: At<'_>, r: At<'_>) {
        let Some(rv) = r.value.get("multipleOf") else {
            return;
        };
        let wv = w.value.get("multipleOf");
        let divides = match (rv.as_f64(), wv.and_then(Value::as_f64)) {
            (Some(rn), Some(wn)) if rn > 0.0 => {
                let ratio = wn / rn;
                (ratio - ratio.round()).abs() < 1e-9
            }
            _ => false,
        };
        if !divides {
            let from = wv.map_or("none".to_owned(), Value::to_string);
            self.problem(path, format!("multipleOf changed from {from} to {rv}"));
        }
    }

    /// A keyword the check compares only for equality; the reader may drop it.
    fn same_or_dropped(&mut self, path: &str, keyword: &str, w: At<'_>, r: At<'_>) {
        if let Some(rv) = r.value.get(keyword) {
            if w.value.get(keyword) != Some(rv) {
                let verb = if w.value.get(keyword).is_some() {
                    "changed"
                } else {
                    "added"
                };
                let what = if OPAQUE.contains(&keyword) {
                    format!("cannot prove compatible: {keyword} {verb}")
                } else {
                    format!("{keyword} {verb}")
                };
                self.problem(path, what);
            }
        }
    }

    fn items(&mut self, path: &str, w: At<'_>, r: At<'_>) {
        let (wi, ri) = (w.keyword("items"), r.keyword("items"));
        let tuple = |i: Option<At<'_>>| i.is_some_and(|i| i.value.is_array());
        if tuple(wi) || tuple(ri) {
            if ri.is_some() && wi.map(|i| i.value) != ri.map(|i| i.value) {
                self.problem(path, "cannot prove compatible: items changed");
            }
            return;
        }
        let wi = wi.unwrap_or(w.with(&EVERYTHING));
        let ri = ri.unwrap_or(r.with(&EVERYTHING));
        self.compare(&format!("{path}/items"), wi, ri);
    }

    /// `properties`, `additionalProperties`, `patternProperties` and `required`.
    fn object<'a>(&mut self, path: &str, w: At<'a>, r: At<'a>) {
        let empty = Map::new();
        let props = |at: At<'a>| at.value.get("properties").and_then(Value::as_object);
        let (wp, rp) = (props(w).unwrap_or(&empty), props(r).unwrap_or(&empty));
        let (wpp, rpp) = (
            w.value.get("patternProperties"),
            r.value.get("patternProperties"),
        );
        if wpp.is_some() || rpp.is_some() {
            // Undeclared names may fall under a pattern rather than additionalProperties.
            let same_names = wp.keys().eq(rp.keys());
            if wpp != rpp || !same_names {
                self.problem(path, "cannot prove compatible: properties or patternProperties changed beside patternProperties");
                return;
            }
        }
        let wa = w
            .keyword("additionalProperties")
            .unwrap_or(w.with(&EVERYTHING));
        let ra = r
            .keyword("additionalProperties")
            .unwrap_or(r.with(&EVERYTHING));
        let mut names: Vec<&String> = wp.keys().chain(rp.keys()).collect();
        names.sort();
        names.dedup();
        for name in names {
            let at = format!("{path}/properties/{}", segment(name));
            match (wp.get(name), rp.get(name)) {
                (Some(ws), Some(rs)) => self.compare(&at, w.with(ws), r.with(rs)),
                (None, Some(rs)) => {
                    if wa.accepts_everything() && !r.with(rs).accepts_everything() {
                        self.problem(&at, "property added to an open content model (the writer allowed any value there)");
                    } else {
                        self.compare(&at, wa, r.with(rs));
                    }
                }
                (Some(ws), None) => {
                    if ra.value == &Value::Bool(false) && !w.with(ws).accepts_nothing() {
                        self.problem(&at, "property removed from a closed content model");
                    } else {
                        self.compare(&at, w.with(ws), ra);
                    }
                }
                (None, None) => {}
            }
        }
        if ra.accepts_nothing() && !wa.accepts_nothing() {
            self.problem(
                path,
                "additionalProperties closed (the content model was open)",
            );
        } else {
            self.compare(&format!("{path}/additionalProperties"), wa, ra);
        }
        let required = |at: At<'_>| -> Vec<String> {
            (at.value
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten())
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect()
        };
        let written = required(w);
        for name in required(r) {
            if !written.contains(&name) {
                self.problem(path, format!("required property '{name}' added"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(text: &str) -> JsonSchema {
        JsonSchema::parse(text, []).unwrap().0
    }

    /// Whether a reader `new` accepts all that a writer `old` does (BACKWARD), and why not.
    fn backward(old: &str, new: &str) -> Result<(), String> {
        JsonSchema::can_read(&json(old), &json(new))
    }

    /// An object schema with these properties (JSON of the `properties` map's entries) and
    /// extra keywords.
    fn object(properties: &str, extra: &str) -> String {
        format!(r#"{{"type":"object","properties":{{{properties}}}{extra}}}"#)
    }

    const NAME: &str = r#""name":{"type":"string"}"#;
    const AGE: &str = r#""age":{"type":"integer"}"#;
    const CLOSED: &str = r#","additionalProperties":false"#;

    fn refused(result: Result<(), String>, expected: &str) {
        let why = result.expect_err("refused");
        assert!(why.contains(expected), "{why:?} lacks {expected:?}");
    }

    #[test]
    fn a_type_may_widen_but_not_narrow_and_the_message_names_the_path() {
        assert!(backward(r#"{"type":"integer"}"#, r#"{"type":"number"}"#).is_ok());
        assert!(backward(r#"{"type":"string"}"#, r#"{"type":["string","null"]}"#).is_ok());
        refused(
            backward(r#"{"type":"number"}"#, r#"{"type":"integer"}"#),
            "#: type changed from number to integer",
        );
        refused(
            backward(
                &object(&format!("{NAME},{AGE}"), ""),
                &object(&format!(r#"{NAME},"age":{{"type":"string"}}"#), ""),
            ),
            "#/properties/age: type changed from integer to string",
        );
        refused(
            backward("{}", r#"{"type":"string"}"#),
            "type changed from any to string",
        );
    }

    #[test]
    fn an_open_model_may_drop_a_property_but_not_add_one_with_a_schema() {
        let v1 = object(NAME, "");
        let v2 = object(&format!("{NAME},{AGE}"), "");
        refused(
            backward(&v1, &v2),
            "#/properties/age: property added to an open content model",
        );
        assert!(backward(&v2, &v1).is_ok());
        // A property whose schema accepts anything adds no constraint.
        assert!(backward(&v1, &object(&format!(r#"{NAME},"age":{{}}"#), "")).is_ok());
        // Forward (the old schema reads the new one's data) is the other way round.
        assert!(JsonSchema::can_read(&json(&v2), &json(&v1)).is_ok());
    }

    #[test]
    fn a_closed_model_may_add_an_optional_property_but_not_drop_one() {
        let v1 = object(NAME, CLOSED);
        let v2 = object(&format!("{NAME},{AGE}"), CLOSED);
        assert!(backward(&v1, &v2).is_ok());
        refused(
            backward(&v2, &v1),
            "#/properties/age: property removed from a closed content model",
        );
        // Closing an open model refuses what the writer let through.
        refused(
            backward(&object(NAME, ""), &v1),
            "#: additionalProperties closed",
        );
        assert!(backward(&v1, &object(NAME, "")).is_ok());
    }

    #[test]
    fn a_partly_open_model_checks_properties_against_additional_properties() {
        let strings = r#","additionalProperties":{"type":"string"}"#;
        let v1 = object(NAME, strings);
        assert!(backward(
            &v1,
            &object(&format!(r#"{NAME},"nick":{{"type":"string"}}"#), strings)
        )
        .is_ok());
        refused(
            backward(&v1, &object(&format!("{NAME},{AGE}"), strings)),
            "#/properties/age: type changed from string to integer",
        );
    }

    #[test]
    fn a_required_name_may_be_dropped_but_not_added() {
        let optional = object(&format!("{NAME},{AGE}"), "");
        let required = object(&format!("{NAME},{AGE}"), r#","required":["age"]"#);
        refused(
            backward(&optional, &required),
            "#: required property 'age' added",
        );
        assert!(backward(&required, &optional).is_ok());
    }

    #[test]
    fn enum_values_may_be_added_but_not_removed() {
        let ab = r#"{"enum":["a","b"]}"#;
        let abc = r#"{"enum":["a","b","c"]}"#;
        assert!(backward(ab, abc).is_ok());
        refused(backward(abc, ab), "#: enum values removed: \"c\"");
        refused(backward(r#"{"type":"string"}"#, ab), "enum added");
        assert!(backward(ab, r#"{"type":"string"}"#).is_ok());
        assert!(backward(r#"{"const":"a"}"#, ab).is_ok());
    }

    #[test]
    fn items_are_checked_recursively() {
        let numbers = r#"{"type":"array","items":{"type":"number"}}"#;
        let integers = r#"{"type":"array","items":{"type":"integer"}}"#;
        assert!(backward(integers, numbers).is_ok());
        refused(
            backward(numbers, integers),
            "#/items: type changed from number to integer",
        );
        refused(
            backward(
                r#"{"type":"array"}"#,
                r#"{"type":"array","uniqueItems":true}"#,
            ),
            "#: uniqueItems added",
        );
    }

    #[test]
    fn bounds_may_loosen_but_not_tighten() {
        let s = |extra: &str| format!(r#"{{"type":"string"{extra}}}"#);
        assert!(backward(&s(r#","maxLength":5"#), &s(r#","maxLength":10"#)).is_ok());
        assert!(backward(&s(r#","maxLength":5"#), &s("")).is_ok());
        refused(
            backward(&s(r#","maxLength":10"#), &s(r#","maxLength":5"#)),
            "#: maxLength decreased from 10 to 5",
        );
        refused(
            backward(&s(""), &s(r#","minLength":1"#)),
            "#: minLength added (1)",
        );
        refused(
            backward(&s(""), &s(r#","pattern":"^a""#)),
            "#: pattern added",
        );
        let n = |extra: &str| format!(r#"{{"type":"integer"{extra}}}"#);
        assert!(backward(&n(r#","minimum":1"#), &n(r#","minimum":0"#)).is_ok());
        refused(
            backward(&n(r#","minimum":0"#), &n(r#","minimum":1"#)),
            "#: minimum increased from 0 to 1",
        );
        refused(
            backward(&n(r#","maximum":10"#), &n(r#","exclusiveMaximum":10"#)),
            "#: exclusiveMaximum added (10)",
        );
        assert!(backward(&n(r#","multipleOf":4"#), &n(r#","multipleOf":2"#)).is_ok());
        refused(
            backward(&n(r#","multipleOf":2"#), &n(r#","multipleOf":4"#)),
            "#: multipleOf changed from 2 to 4",
        );
        // A string bound says nothing of a number the writer writes.
        assert!(backward(&n(""), &n(r#","maxLength":3"#)).is_ok());
    }

    #[test]
    fn nested_objects_are_checked_recursively() {
        let address = |zip: &str| {
            object(
                &format!(
                    r#""address":{}"#,
                    object(&format!(r#""zip":{zip}"#), CLOSED)
                ),
                "",
            )
        };
        assert!(backward(
            &address(r#"{"type":"integer"}"#),
            &address(r#"{"type":"number"}"#)
        )
        .is_ok());
        refused(
            backward(
                &address(r#"{"type":"string"}"#),
                &address(r#"{"type":"string","maxLength":5}"#),
            ),
            "#/properties/address/properties/zip: maxLength added (5)",
        );
    }

    #[test]
    fn what_the_check_does_not_understand_must_stay_unchanged() {
        let one = r#"{"oneOf":[{"type":"string"},{"type":"integer"}]}"#;
        let other = r#"{"oneOf":[{"type":"string"},{"type":"boolean"}]}"#;
        assert!(backward(one, one).is_ok());
        refused(
            backward(one, other),
            "#: cannot prove compatible: oneOf changed",
        );
        // Dropping a keyword only loosens the reader.
        assert!(backward(one, "{}").is_ok());
        // Annotations and keywords JSON Schema does not define do not count.
        assert!(backward(
            r#"{"type":"string","title":"a","x-origin":1}"#,
            r#"{"type":"string","description":"b"}"#
        )
        .is_ok());
    }

    #[test]
    fn refs_are_followed_locally_and_to_references_by_name() {
        let local = |t: &str| {
            format!(
                r##"{{"definitions":{{"n":{{"type":"{t}"}}}},"type":"object","properties":{{"n":{{"$ref":"#/definitions/n"}}}}}}"##
            )
        };
        assert!(backward(&local("integer"), &local("number")).is_ok());
        refused(
            backward(&local("number"), &local("integer")),
            "#/properties/n: type changed from number to integer",
        );
        // A recursive schema compared with itself ends.
        let tree = r##"{"type":"object","properties":{"children":{"type":"array","items":{"$ref":"#"}}}}"##;
        assert!(backward(tree, tree).is_ok());

        let address = |zip: &str| object(&format!(r#""zip":{{"type":"{zip}"}}"#), "");
        let person = object(r#""home":{"$ref":"address.json"}"#, "");
        let with = |zip: &str| {
            let address = address(zip);
            JsonSchema::parse(&person, [("address.json", address.as_str())])
                .unwrap()
                .0
        };
        assert!(JsonSchema::can_read(&with("integer"), &with("number")).is_ok());
        refused(
            JsonSchema::can_read(&with("number"), &with("integer")),
            "#/properties/home/properties/zip: type changed from number to integer",
        );
        // Without the reference the $ref resolves to nothing: not a schema.
        assert!(JsonSchema::parse(&person, []).is_err());
        let home = with("integer");
        assert!(home.check_payload(br#"{"home":{"zip":1}}"#).is_ok());
        refused(home.check_payload(br#"{"home":{"zip":"x"}}"#), "#/home/zip");
    }
}
