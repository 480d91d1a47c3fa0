//! The registry's state: subjects and their versions, schemas by global id, compatibility
//! levels. Every change is planned into `_schemas` records ([`Planned`]) and takes effect
//! only when the caller [`Registry::apply`]s them after appending them, so the state is
//! always the replay of the topic. The caller plans, appends and applies one change at a
//! time (ids are taken from the state when planned).
//!
//! Ids and versions follow Confluent: an id names a schema (its type, normalized text and
//! references) across subjects, so the same schema registered under two subjects has one id;
//! versions count up per subject from 1 and a soft-deleted version keeps its number; a new
//! id is one above the highest id the replay has seen.

use std::collections::BTreeMap;

use super::compat::{Compatibility, ParsedSchema, SchemaType};
use super::log_format::{ConfigValue, DeleteSubjectValue, SchemaKey, SchemaReference, SchemaValue};

/// A refusal, with Confluent's error code (`40401`, `42201`, ...; `409` for an incompatible
/// schema) and message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} (error {code})")]
pub struct RegistryError {
    pub code: u32,
    pub message: String,
}

impl RegistryError {
    fn new(code: u32, message: impl Into<String>) -> Self {
        RegistryError {
            code,
            message: message.into(),
        }
    }

    /// The HTTP status Confluent answers it with: the code's first three digits.
    pub fn http_status(&self) -> u16 {
        let mut code = self.code;
        while code >= 1000 {
            code /= 10;
        }
        u16::try_from(code).unwrap_or(500)
    }

    fn subject_not_found(subject: &str) -> Self {
        Self::new(40401, format!("Subject '{subject}' not found."))
    }

    fn version_not_found(subject: &str, version: u32) -> Self {
        Self::new(
            40402,
            format!("Version {version} not found for subject '{subject}'."),
        )
    }

    fn invalid_schema(why: impl Into<String>) -> Self {
        Self::new(42201, why)
    }
}

/// A schema as a client registers or looks it up.
#[derive(Debug, Clone, Default)]
pub struct SchemaInput {
    pub schema_type: SchemaType,
    pub schema: String,
    pub references: Vec<SchemaReference>,
}

/// Which version of a subject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VersionSpec {
    Latest,
    Number(u32),
}

impl VersionSpec {
    /// `latest`, `-1` or a version number from 1.
    ///
    /// # Errors
    /// Confluent's 42202.
    pub fn parse(text: &str) -> Result<Self, RegistryError> {
        if text == "latest" || text == "-1" {
            return Ok(VersionSpec::Latest);
        }
        match text.parse::<u32>() {
            Ok(n) if n > 0 => Ok(VersionSpec::Number(n)),
            _ => Err(RegistryError::new(
                42202,
                format!(
                    "The specified version '{text}' is not a valid version id. Allowed values are between [1, 2^31-1] and the string \"latest\""
                ),
            )),
        }
    }
}

/// One version of a subject, as `GET /subjects/{s}/versions/{v}` answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubjectVersion {
    pub subject: String,
    pub version: u32,
    pub id: u32,
    pub schema_type: SchemaType,
    pub schema: String,
    pub references: Vec<SchemaReference>,
    pub deleted: bool,
}

/// A registration's result: the schema's id, and its version in the subject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Registered {
    pub id: u32,
    pub version: u32,
}

/// A change: the records to append to `_schemas` (key, value or a tombstone), then apply, and
/// what the client is answered once they are.
#[derive(Debug)]
pub struct Planned<T> {
    pub records: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    pub answer: T,
}

impl<T> Planned<T> {
    fn nothing(answer: T) -> Self {
        Planned {
            records: Vec::new(),
            answer,
        }
    }
}

#[derive(Debug, Clone)]
struct Version {
    id: u32,
    deleted: bool,
}

/// What an id names.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stored {
    schema_type: SchemaType,
    schema: String,
    references: Vec<SchemaReference>,
}

/// The registry's state; see the module documentation.
#[derive(Debug, Default)]
pub struct Registry {
    subjects: BTreeMap<String, BTreeMap<u32, Version>>,
    schemas: BTreeMap<u32, Stored>,
    max_id: u32,
    global: Option<Compatibility>,
    levels: BTreeMap<String, Compatibility>,
}

/// The longest subject name accepted.
pub const MAX_SUBJECT_BYTES: usize = 1024;
/// The largest schema text accepted.
pub const MAX_SCHEMA_BYTES: usize = 1 << 20;

impl Registry {
    /// Applies one record of `_schemas`, as read back or just appended. A record this
    /// registry cannot read is refused with why; the caller logs and skips it.
    ///
    /// # Errors
    /// The key or value is not a record of the format.
    pub fn apply(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<(), String> {
        let key: SchemaKey = serde_json::from_slice(key)
            .map_err(|e| format!("a key that is not JSON of the format: {e}"))?;
        match (key, value) {
            (
                SchemaKey::Schema {
                    subject, version, ..
                },
                Some(value),
            ) => {
                let value: SchemaValue = serde_json::from_slice(value)
                    .map_err(|e| format!("a SCHEMA value that cannot be read: {e}"))?;
                let stored = Stored {
                    schema_type: value.schema_type,
                    schema: value.schema,
                    references: value.references,
                };
                self.schemas.entry(value.id).or_insert(stored);
                self.max_id = self.max_id.max(value.id);
                let entry = Version {
                    id: value.id,
                    deleted: value.deleted,
                };
                self.subjects
                    .entry(subject)
                    .or_default()
                    .insert(version, entry);
            }
            (
                SchemaKey::Schema {
                    subject, version, ..
                },
                None,
            ) => {
                if let Some(versions) = self.subjects.get_mut(&subject) {
                    versions.remove(&version);
                    if versions.is_empty() {
                        self.subjects.remove(&subject);
                    }
                }
            }
            (SchemaKey::Config { subject, .. }, value) => {
                let level = value
                    .map(|v| {
                        let v: ConfigValue = serde_json::from_slice(v)
                            .map_err(|e| format!("a CONFIG value that cannot be read: {e}"))?;
                        v.compatibility_level.parse::<Compatibility>()
                    })
                    .transpose()?;
                match (subject, level) {
                    (None, level) => self.global = level,
                    (Some(subject), Some(level)) => {
                        self.levels.insert(subject, level);
                    }
                    (Some(subject), None) => {
                        self.levels.remove(&subject);
                    }
                }
            }
            (SchemaKey::DeleteSubject { subject, .. }, Some(value)) => {
                let value: DeleteSubjectValue = serde_json::from_slice(value)
                    .map_err(|e| format!("a DELETE_SUBJECT value that cannot be read: {e}"))?;
                if let Some(versions) = self.subjects.get_mut(&subject) {
                    for (_, v) in versions.range_mut(..=value.version) {
                        v.deleted = true;
                    }
                }
            }
            (SchemaKey::DeleteSubject { .. } | SchemaKey::Noop { .. } | SchemaKey::Unknown, _) => {}
        }
        Ok(())
    }

    /// The subjects with a live version (and, with `deleted`, those with only soft-deleted ones).
    pub fn subjects(&self, deleted: bool) -> Vec<String> {
        (self.subjects.iter())
            .filter(|(_, versions)| deleted || versions.values().any(|v| !v.deleted))
            .map(|(subject, _)| subject.clone())
            .collect()
    }

    /// `subject`'s version numbers, live ones (or all, with `deleted`).
    ///
    /// # Errors
    /// 40401 when it has none.
    pub fn versions(&self, subject: &str, deleted: bool) -> Result<Vec<u32>, RegistryError> {
        let versions: Vec<u32> = (self.subjects.get(subject).into_iter().flatten())
            .filter(|(_, v)| deleted || !v.deleted)
            .map(|(&n, _)| n)
            .collect();
        if versions.is_empty() {
            return Err(RegistryError::subject_not_found(subject));
        }
        Ok(versions)
    }

    /// A version of `subject`; a soft-deleted one only with `deleted` (and `latest` is the
    /// latest live one).
    ///
    /// # Errors
    /// 40401, 40402.
    pub fn version(
        &self,
        subject: &str,
        spec: VersionSpec,
        deleted: bool,
    ) -> Result<SubjectVersion, RegistryError> {
        let versions = (self.subjects.get(subject))
            .filter(|versions| deleted || versions.values().any(|v| !v.deleted))
            .ok_or_else(|| RegistryError::subject_not_found(subject))?;
        let found = match spec {
            VersionSpec::Latest => versions.iter().rev().find(|(_, v)| deleted || !v.deleted),
            VersionSpec::Number(n) => versions
                .get_key_value(&n)
                .filter(|(_, v)| deleted || !v.deleted),
        };
        let (&version, entry) = found.ok_or_else(|| match spec {
            VersionSpec::Number(n) => RegistryError::version_not_found(subject, n),
            VersionSpec::Latest => RegistryError::subject_not_found(subject),
        })?;
        let stored = &self.schemas[&entry.id];
        Ok(SubjectVersion {
            subject: subject.to_owned(),
            version,
            id: entry.id,
            schema_type: stored.schema_type,
            schema: stored.schema.clone(),
            references: stored.references.clone(),
            deleted: entry.deleted,
        })
    }

    /// The schema an id names: its type, text and references.
    ///
    /// # Errors
    /// 40403 when no version (live or soft-deleted) has it.
    pub fn schema_by_id(
        &self,
        id: u32,
    ) -> Result<(SchemaType, &str, &[SchemaReference]), RegistryError> {
        match self.schemas.get(&id) {
            Some(s) if !self.id_versions(id).is_empty() => {
                Ok((s.schema_type, s.schema.as_str(), s.references.as_slice()))
            }
            _ => Err(RegistryError::new(40403, "Schema not found")),
        }
    }

    /// The schema an id names, parsed with its references resolved: what the payload of a
    /// record carrying the id is checked or decoded with.
    ///
    /// # Errors
    /// 40403 when no version has the id; 42201 when its text does not parse.
    pub fn parse_id(&self, id: u32) -> Result<ParsedSchema, RegistryError> {
        let (schema_type, schema, references) = self.schema_by_id(id)?;
        self.parse(&SchemaInput {
            schema_type,
            schema: schema.to_owned(),
            references: references.to_vec(),
        })
    }

    /// The `(subject, version)`s with schema `id`, soft-deleted ones included.
    pub fn id_versions(&self, id: u32) -> Vec<(String, u32)> {
        let mut found = Vec::new();
        for (subject, versions) in &self.subjects {
            for (&version, v) in versions {
                if v.id == id {
                    found.push((subject.clone(), version));
                }
            }
        }
        found
    }

    /// The level `subject` is checked by: its own, else the global one.
    pub fn level(&self, subject: Option<&str>) -> Compatibility {
        (subject.and_then(|s| self.levels.get(s).copied()))
            .or(self.global)
            .unwrap_or_default()
    }

    /// `subject`'s own level, if it has one.
    pub fn subject_level(&self, subject: &str) -> Option<Compatibility> {
        self.levels.get(subject).copied()
    }

    /// Parses `input` with its references resolved (each referenced version's text, in
    /// dependency order).
    fn parse(&self, input: &SchemaInput) -> Result<ParsedSchema, RegistryError> {
        if input.schema.len() > MAX_SCHEMA_BYTES {
            return Err(RegistryError::invalid_schema(format!(
                "a schema is at most {MAX_SCHEMA_BYTES} bytes"
            )));
        }
        let mut texts = Vec::new();
        let mut seen = Vec::new();
        for reference in &input.references {
            self.resolve(reference, &mut texts, &mut seen, 0)?;
        }
        ParsedSchema::parse(input.schema_type, &input.schema, &texts)
            .map_err(RegistryError::invalid_schema)
    }

    /// Adds the text of `reference`'s version, after those it refers to, to `texts`.
    fn resolve(
        &self,
        reference: &SchemaReference,
        texts: &mut Vec<String>,
        seen: &mut Vec<(String, u32)>,
        depth: usize,
    ) -> Result<(), RegistryError> {
        const MAX_DEPTH: usize = 32;
        let at = (reference.subject.clone(), reference.version);
        if seen.contains(&at) {
            return Ok(());
        }
        if depth == MAX_DEPTH {
            return Err(RegistryError::invalid_schema(format!(
                "references nest deeper than {MAX_DEPTH}"
            )));
        }
        let version = self
            .version(&reference.subject, VersionSpec::Number(reference.version), true)
            .map_err(|_| {
                RegistryError::invalid_schema(format!(
                    "Invalid schema: reference '{}' names subject '{}' version {}, which does not exist",
                    reference.name, reference.subject, reference.version
                ))
            })?;
        seen.push(at);
        for nested in &version.references {
            self.resolve(nested, texts, seen, depth + 1)?;
        }
        texts.push(version.schema);
        Ok(())
    }

    fn check_subject(subject: &str) -> Result<(), RegistryError> {
        let valid = !subject.is_empty()
            && subject.len() <= MAX_SUBJECT_BYTES
            && !subject.chars().any(char::is_control);
        if valid {
            Ok(())
        } else {
            Err(RegistryError::new(
                42208,
                format!("Invalid subject: a subject name has 1 to {MAX_SUBJECT_BYTES} bytes and no control characters"),
            ))
        }
    }

    /// The live version of `subject` that has `parsed` (with these references), if any.
    fn find(
        &self,
        subject: &str,
        parsed: &ParsedSchema,
        references: &[SchemaReference],
    ) -> Option<(u32, u32)> {
        let versions = self.subjects.get(subject)?;
        versions.iter().find_map(|(&version, v)| {
            let stored = &self.schemas[&v.id];
            let same = !v.deleted
                && stored.schema_type == parsed.schema_type
                && stored.schema == parsed.normalized
                && stored.references == references;
            same.then_some((version, v.id))
        })
    }

    /// Registers `input` under `subject` (`POST /subjects/{s}/versions`): the existing version
    /// when the subject already has this schema, else a new version checked by the subject's
    /// level against its live versions.
    ///
    /// # Errors
    /// 42201 (invalid schema), 42208 (invalid subject), 409 (incompatible: every failed check
    /// in the message).
    pub fn register(
        &self,
        subject: &str,
        input: &SchemaInput,
    ) -> Result<Planned<Registered>, RegistryError> {
        Self::check_subject(subject)?;
        let parsed = self.parse(input)?;
        if let Some((version, id)) = self.find(subject, &parsed, &input.references) {
            return Ok(Planned::nothing(Registered { id, version }));
        }
        let level = self.level(Some(subject));
        let live = self.live(subject)?;
        let previous: Vec<(u32, &ParsedSchema)> = live.iter().map(|(n, s)| (*n, s)).collect();
        let why = level.check(&parsed, &previous);
        if !why.is_empty() {
            return Err(RegistryError::new(
                409,
                format!(
                    "Schema being registered is incompatible with an earlier schema for subject \"{subject}\" ({level}): {}",
                    why.join("; ")
                ),
            ));
        }
        let id = (self.schemas.iter())
            .find(|(_, s)| {
                s.schema_type == parsed.schema_type
                    && s.schema == parsed.normalized
                    && s.references == input.references
            })
            .map(|(&id, _)| id)
            .unwrap_or(self.max_id + 1);
        let version = (self.subjects.get(subject))
            .and_then(|v| v.keys().next_back().copied())
            .unwrap_or(0)
            + 1;
        let value = SchemaValue {
            subject: subject.to_owned(),
            version,
            id,
            schema_type: parsed.schema_type,
            references: input.references.clone(),
            schema: parsed.normalized,
            deleted: false,
        };
        Ok(Planned {
            records: vec![(
                SchemaKey::schema(subject, version).to_bytes(),
                Some(serde_json::to_vec(&value).expect("a value serializes")),
            )],
            answer: Registered { id, version },
        })
    }

    /// `subject`'s live versions, parsed, oldest first.
    fn live(&self, subject: &str) -> Result<Vec<(u32, ParsedSchema)>, RegistryError> {
        let mut live = Vec::new();
        for (&version, v) in self.subjects.get(subject).into_iter().flatten() {
            if v.deleted {
                continue;
            }
            let stored = &self.schemas[&v.id];
            let input = SchemaInput {
                schema_type: stored.schema_type,
                schema: stored.schema.clone(),
                references: stored.references.clone(),
            };
            live.push((version, self.parse(&input)?));
        }
        Ok(live)
    }

    /// The version of `subject` that has `input` (`POST /subjects/{s}`).
    ///
    /// # Errors
    /// 40401 (no such subject), 40403 (not registered there), 42201.
    pub fn lookup(
        &self,
        subject: &str,
        input: &SchemaInput,
    ) -> Result<SubjectVersion, RegistryError> {
        self.versions(subject, false)?;
        let parsed = self.parse(input)?;
        let (version, _) = self
            .find(subject, &parsed, &input.references)
            .ok_or_else(|| RegistryError::new(40403, "Schema not found"))?;
        self.version(subject, VersionSpec::Number(version), false)
    }

    /// Whether `input` may join `subject` by its level, checked against `spec` (`latest`: the
    /// versions its level checks; a number: that version alone): why not, empty when it may.
    ///
    /// # Errors
    /// 40401, 40402, 42201.
    pub fn test_compatibility(
        &self,
        subject: &str,
        spec: VersionSpec,
        input: &SchemaInput,
    ) -> Result<Vec<String>, RegistryError> {
        let parsed = self.parse(input)?;
        let level = self.level(Some(subject));
        let live = self.live(subject)?;
        if live.is_empty() {
            return Err(RegistryError::subject_not_found(subject));
        }
        let previous: Vec<(u32, &ParsedSchema)> = match spec {
            VersionSpec::Latest => live.iter().map(|(n, s)| (*n, s)).collect(),
            VersionSpec::Number(n) => {
                let one = live.iter().find(|(v, _)| *v == n);
                let (v, s) = one.ok_or_else(|| RegistryError::version_not_found(subject, n))?;
                vec![(*v, s)]
            }
        };
        Ok(level.check(&parsed, &previous))
    }

    /// Deletes one version (`DELETE /subjects/{s}/versions/{v}`): soft (it stays readable with
    /// `deleted=true` and keeps its number), or, once soft-deleted, `permanent`.
    ///
    /// # Errors
    /// 40401, 40402, 40406 (already soft-deleted), 40407 (permanent before soft).
    pub fn delete_version(
        &self,
        subject: &str,
        spec: VersionSpec,
        permanent: bool,
    ) -> Result<Planned<u32>, RegistryError> {
        let found = match spec {
            // `latest` is the latest live version; a number may name a soft-deleted one.
            VersionSpec::Latest => self.version(subject, spec, false)?,
            VersionSpec::Number(_) => self.version(subject, spec, true)?,
        };
        let key = SchemaKey::schema(subject, found.version).to_bytes();
        if permanent {
            if !found.deleted {
                return Err(RegistryError::new(
                    40407,
                    format!("Subject '{subject}' Version {} was not deleted first before being permanently deleted", found.version),
                ));
            }
            return Ok(Planned {
                records: vec![(key, None)],
                answer: found.version,
            });
        }
        if found.deleted {
            return Err(RegistryError::new(
                40406,
                format!("Subject '{subject}' Version {} was soft deleted. Set permanent=true to delete permanently", found.version),
            ));
        }
        let value = SchemaValue {
            subject: subject.to_owned(),
            version: found.version,
            id: found.id,
            schema_type: found.schema_type,
            references: found.references,
            schema: found.schema,
            deleted: true,
        };
        Ok(Planned {
            records: vec![(
                key,
                Some(serde_json::to_vec(&value).expect("a value serializes")),
            )],
            answer: found.version,
        })
    }

    /// Deletes a subject (`DELETE /subjects/{s}`): soft (every version), or, once soft-deleted,
    /// `permanent` (every version and its own level gone). Answers the versions deleted.
    ///
    /// # Errors
    /// 40401, 40404 (already soft-deleted), 40405 (permanent before soft).
    pub fn delete_subject(
        &self,
        subject: &str,
        permanent: bool,
    ) -> Result<Planned<Vec<u32>>, RegistryError> {
        let all = self.versions(subject, true)?;
        let live = self.versions(subject, false).unwrap_or_default();
        if permanent {
            if !live.is_empty() {
                return Err(RegistryError::new(
                    40405,
                    format!("Subject '{subject}' was not deleted first before being permanently deleted"),
                ));
            }
            let mut records: Vec<_> = (all.iter())
                .map(|&v| (SchemaKey::schema(subject, v).to_bytes(), None))
                .collect();
            if self.levels.contains_key(subject) {
                records.push((SchemaKey::config(Some(subject)).to_bytes(), None));
            }
            return Ok(Planned {
                records,
                answer: all,
            });
        }
        let Some(&last) = live.last() else {
            return Err(RegistryError::new(
                40404,
                format!("Subject '{subject}' was soft deleted. Set permanent=true to delete permanently"),
            ));
        };
        let value = DeleteSubjectValue {
            subject: subject.to_owned(),
            version: last,
        };
        Ok(Planned {
            records: vec![(
                SchemaKey::delete_subject(subject).to_bytes(),
                Some(serde_json::to_vec(&value).expect("a value serializes")),
            )],
            answer: live,
        })
    }

    /// Sets the global level (`subject` none) or a subject's (`PUT /config[/{s}]`).
    ///
    /// # Errors
    /// 42208 for an invalid subject name.
    pub fn set_level(
        &self,
        subject: Option<&str>,
        level: Compatibility,
    ) -> Result<Planned<Compatibility>, RegistryError> {
        if let Some(subject) = subject {
            Self::check_subject(subject)?;
        }
        let value = ConfigValue {
            compatibility_level: level.name().to_owned(),
        };
        Ok(Planned {
            records: vec![(
                SchemaKey::config(subject).to_bytes(),
                Some(serde_json::to_vec(&value).expect("a value serializes")),
            )],
            answer: level,
        })
    }

    /// Removes a subject's own level, or resets the global one (`DELETE /config[/{s}]`):
    /// answers the level it had.
    ///
    /// # Errors
    /// 40401 for a subject with neither versions nor a level of its own.
    pub fn delete_level(
        &self,
        subject: Option<&str>,
    ) -> Result<Planned<Compatibility>, RegistryError> {
        let had = self.level(subject);
        if let Some(subject) = subject {
            if !self.levels.contains_key(subject) && !self.subjects.contains_key(subject) {
                return Err(RegistryError::subject_not_found(subject));
            }
        }
        Ok(Planned {
            records: vec![(SchemaKey::config(subject).to_bytes(), None)],
            answer: had,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn avro(text: &str) -> SchemaInput {
        SchemaInput {
            schema: text.to_owned(),
            ..SchemaInput::default()
        }
    }

    fn user(extra: &str) -> SchemaInput {
        avro(&format!(
            r#"{{"type":"record","name":"User","fields":[{{"name":"name","type":"string"}}{extra}]}}"#
        ))
    }

    /// Applies a plan as the caller does, and keeps its records as the topic would.
    fn commit<T>(
        registry: &mut Registry,
        log: &mut Vec<(Vec<u8>, Option<Vec<u8>>)>,
        planned: Planned<T>,
    ) -> T {
        for (key, value) in &planned.records {
            registry.apply(key, value.as_deref()).unwrap();
        }
        log.extend(planned.records);
        planned.answer
    }

    fn replay(log: &[(Vec<u8>, Option<Vec<u8>>)]) -> Registry {
        let mut registry = Registry::default();
        for (key, value) in log {
            registry.apply(key, value.as_deref()).unwrap();
        }
        registry
    }

    #[test]
    fn ids_are_global_versions_per_subject_and_a_replay_gives_the_same_state() {
        let (mut r, mut log) = (Registry::default(), Vec::new());
        let v1 = r.register("a-value", &user("")).unwrap();
        let first = commit(&mut r, &mut log, v1);
        assert_eq!(first, Registered { id: 1, version: 1 });
        // The same schema again, laid out otherwise: no new version, no record.
        let again = r
            .register(
                "a-value",
                &avro(
                    r#"{"name":"User","type":"record","fields":[{"type":"string","name":"name"}]}"#,
                ),
            )
            .unwrap();
        assert!(again.records.is_empty());
        assert_eq!(again.answer, first);
        // The same schema under another subject: the same id, its own version 1.
        let other = r.register("b-value", &user("")).unwrap();
        assert_eq!(
            commit(&mut r, &mut log, other),
            Registered { id: 1, version: 1 }
        );
        let v2 = r
            .register(
                "a-value",
                &user(r#",{"name":"age","type":"int","default":0}"#),
            )
            .unwrap();
        assert_eq!(
            commit(&mut r, &mut log, v2),
            Registered { id: 2, version: 2 }
        );

        let replayed = replay(&log);
        assert_eq!(replayed.subjects(false), ["a-value", "b-value"]);
        assert_eq!(replayed.versions("a-value", false).unwrap(), [1, 2]);
        assert_eq!(
            replayed
                .version("a-value", VersionSpec::Latest, false)
                .unwrap(),
            r.version("a-value", VersionSpec::Latest, false).unwrap()
        );
        assert_eq!(
            replayed.id_versions(1),
            [("a-value".into(), 1), ("b-value".into(), 1)]
        );
        let next = replayed.register("c", &avro(r#""string""#)).unwrap();
        assert_eq!(next.answer.id, 3);
    }

    #[test]
    fn an_incompatible_schema_is_refused_with_409_and_nothing_planned() {
        let (mut r, mut log) = (Registry::default(), Vec::new());
        let v1 = r.register("s", &user("")).unwrap();
        commit(&mut r, &mut log, v1);
        let refused = r
            .register("s", &user(r#",{"name":"age","type":"int"}"#))
            .unwrap_err();
        assert_eq!((refused.code, refused.http_status()), (409, 409));
        assert!(
            refused.message.contains("BACKWARD") && refused.message.contains("age"),
            "{refused}"
        );
        // Under NONE it goes in.
        let none = r.set_level(Some("s"), Compatibility::None).unwrap();
        commit(&mut r, &mut log, none);
        let v2 = r
            .register("s", &user(r#",{"name":"age","type":"int"}"#))
            .unwrap();
        assert_eq!(commit(&mut r, &mut log, v2).version, 2);
        assert_eq!(replay(&log).level(Some("s")), Compatibility::None);
        assert_eq!(replay(&log).level(None), Compatibility::Backward);
    }

    #[test]
    fn deletes_are_soft_then_permanent_as_in_confluent() {
        let (mut r, mut log) = (Registry::default(), Vec::new());
        for extra in ["", r#",{"name":"age","type":"int","default":0}"#] {
            let planned = r.register("s", &user(extra)).unwrap();
            commit(&mut r, &mut log, planned);
        }
        let code = |e: RegistryError| e.code;
        assert_eq!(
            r.delete_version("s", VersionSpec::Number(1), true)
                .map_err(code)
                .unwrap_err(),
            40407
        );
        let soft = r
            .delete_version("s", VersionSpec::Number(1), false)
            .unwrap();
        commit(&mut r, &mut log, soft);
        assert_eq!(r.versions("s", false).unwrap(), [2]);
        assert_eq!(r.versions("s", true).unwrap(), [1, 2]);
        assert!(
            r.version("s", VersionSpec::Number(1), true)
                .unwrap()
                .deleted
        );
        assert_eq!(
            r.version("s", VersionSpec::Number(1), false)
                .map_err(code)
                .unwrap_err(),
            40402
        );
        assert_eq!(
            r.delete_version("s", VersionSpec::Number(1), false)
                .map_err(code)
                .unwrap_err(),
            40406
        );
        // A soft-deleted version still names its id.
        assert!(r.schema_by_id(1).is_ok());

        assert_eq!(
            r.delete_subject("s", true).map_err(code).unwrap_err(),
            40405
        );
        let soft = r.delete_subject("s", false).unwrap();
        assert_eq!(commit(&mut r, &mut log, soft), [2]);
        assert!(r.subjects(false).is_empty());
        assert_eq!(r.subjects(true), ["s"]);
        assert_eq!(
            r.delete_subject("s", false).map_err(code).unwrap_err(),
            40404
        );
        let hard = r.delete_subject("s", true).unwrap();
        assert_eq!(commit(&mut r, &mut log, hard), [1, 2]);
        assert!(r.subjects(true).is_empty());
        assert_eq!(r.schema_by_id(1).map_err(code).unwrap_err(), 40403);
        let replayed = replay(&log);
        assert!(replayed.subjects(true).is_empty());
        // Ids are not reused while the replay has seen them.
        let next = replayed.register("s", &avro(r#""int""#)).unwrap();
        assert_eq!(next.answer, Registered { id: 3, version: 1 });
    }

    #[test]
    fn lookups_references_and_bad_input_answer_confluents_codes() {
        let (mut r, mut log) = (Registry::default(), Vec::new());
        let address = avro(
            r#"{"type":"record","name":"Address","fields":[{"name":"city","type":"string"}]}"#,
        );
        let planned = r.register("address", &address).unwrap();
        commit(&mut r, &mut log, planned);
        let mut person = avro(
            r#"{"type":"record","name":"Person","fields":[{"name":"home","type":"Address"}]}"#,
        );
        assert_eq!(r.register("person", &person).unwrap_err().code, 42201);
        person.references = vec![SchemaReference {
            name: "Address".into(),
            subject: "address".into(),
            version: 1,
        }];
        let planned = r.register("person", &person).unwrap();
        assert_eq!(
            commit(&mut r, &mut log, planned),
            Registered { id: 2, version: 1 }
        );
        assert_eq!(
            replay(&log)
                .version("person", VersionSpec::Latest, false)
                .unwrap()
                .references,
            person.references
        );
        person.references[0].version = 9;
        assert_eq!(r.register("person2", &person).unwrap_err().code, 42201);

        assert_eq!(r.lookup("address", &address).unwrap().id, 1);
        assert_eq!(r.lookup("nobody", &address).unwrap_err().code, 40401);
        assert_eq!(
            r.lookup("address", &avro(r#""string""#)).unwrap_err().code,
            40403
        );
        assert_eq!(r.register("", &address).unwrap_err().code, 42208);
        assert_eq!(r.register("s", &avro("{not json")).unwrap_err().code, 42201);
        let json = SchemaInput {
            schema_type: SchemaType::Json,
            ..avro("{}")
        };
        assert_eq!(r.register("s", &json).unwrap_err().code, 42201);
        assert_eq!(VersionSpec::parse("0").unwrap_err().code, 42202);
        assert_eq!(VersionSpec::parse("latest").unwrap(), VersionSpec::Latest);
        assert_eq!(RegistryError::new(40401, "").http_status(), 404);
        assert_eq!(RegistryError::new(42201, "").http_status(), 422);
        assert!(r.apply(b"not json", None).is_err());
        assert!(r
            .apply(
                br#"{"keytype":"SCHEMA","subject":"x","version":1,"magic":1}"#,
                Some(b"[]")
            )
            .is_err());
    }

    #[test]
    fn compatibility_is_tested_against_a_version_or_the_levels_versions() {
        let (mut r, mut log) = (Registry::default(), Vec::new());
        let planned = r.register("s", &user("")).unwrap();
        commit(&mut r, &mut log, planned);
        let ok = r.test_compatibility(
            "s",
            VersionSpec::Latest,
            &user(r#",{"name":"age","type":"int","default":1}"#),
        );
        assert!(ok.unwrap().is_empty());
        let bad = r.test_compatibility(
            "s",
            VersionSpec::Number(1),
            &user(r#",{"name":"age","type":"int"}"#),
        );
        assert_eq!(bad.unwrap().len(), 1);
        assert_eq!(
            r.test_compatibility("s", VersionSpec::Number(2), &user(""))
                .unwrap_err()
                .code,
            40402
        );
        assert_eq!(
            r.test_compatibility("t", VersionSpec::Latest, &user(""))
                .unwrap_err()
                .code,
            40401
        );
    }
}
