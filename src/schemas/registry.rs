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

use super::compat::{Compatibility, ParsedSchema, Referenced, SchemaType};
use super::log_format::{
    ConfigValue, DeleteSubjectValue, ModeValue, SchemaKey, SchemaReference, SchemaValue,
};
use super::mode::Mode;

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

    /// Confluent's 42205: the subject's mode does not permit it.
    fn not_permitted(why: impl Into<String>) -> Self {
        Self::new(42205, why)
    }
}

/// A schema as a client registers or looks it up.
#[derive(Debug, Clone, Default)]
pub struct SchemaInput {
    pub schema_type: SchemaType,
    pub schema: String,
    pub references: Vec<SchemaReference>,
    /// The id to register it with: only in `IMPORT` mode, where it is required.
    pub id: Option<u32>,
    /// The version to register it as: only in `IMPORT` mode (else the next one).
    pub version: Option<u32>,
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
    global_mode: Option<Mode>,
    modes: BTreeMap<String, Mode>,
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
            (SchemaKey::Mode { subject, .. }, value) => {
                let mode = value
                    .map(|v| {
                        let v: ModeValue = serde_json::from_slice(v)
                            .map_err(|e| format!("a MODE value that cannot be read: {e}"))?;
                        v.mode.parse::<Mode>()
                    })
                    .transpose()?;
                match (subject, mode) {
                    (None, mode) => self.global_mode = mode,
                    (Some(subject), Some(mode)) => {
                        self.modes.insert(subject, mode);
                    }
                    (Some(subject), None) => {
                        self.modes.remove(&subject);
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
            ..SchemaInput::default()
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

    /// A stored schema's text in `format` (Confluent's `format` query parameter: `serialized`
    /// for Protobuf); the text as stored for any other format or type.
    ///
    /// # Errors
    /// 42201 when the stored schema no longer parses (its references are gone).
    pub fn formatted(&self, input: &SchemaInput, format: &str) -> Result<String, RegistryError> {
        if input.schema_type != SchemaType::Protobuf {
            return Ok(input.schema.clone());
        }
        let parsed = self.parse(input)?;
        Ok(parsed
            .formatted(format)
            .unwrap_or_else(|| input.schema.clone()))
    }

    /// Parses `input` with its references resolved (each referenced version's text under the
    /// reference's name, in dependency order).
    fn parse(&self, input: &SchemaInput) -> Result<ParsedSchema, RegistryError> {
        if input.schema.len() > MAX_SCHEMA_BYTES {
            return Err(RegistryError::invalid_schema(format!(
                "a schema is at most {MAX_SCHEMA_BYTES} bytes"
            )));
        }
        let mut referenced = Vec::new();
        let mut seen = Vec::new();
        for reference in &input.references {
            self.resolve(reference, &mut referenced, &mut seen, 0)?;
        }
        ParsedSchema::parse(input.schema_type, &input.schema, &referenced)
            .map_err(RegistryError::invalid_schema)
    }

    /// Adds `reference`'s version, after those it refers to, to `referenced`.
    fn resolve(
        &self,
        reference: &SchemaReference,
        referenced: &mut Vec<Referenced>,
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
            self.resolve(nested, referenced, seen, depth + 1)?;
        }
        referenced.push(Referenced {
            name: reference.name.clone(),
            schema: version.schema,
        });
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
        let mode = self.writable(subject)?;
        let parsed = self.parse(input)?;
        match (mode, input.id) {
            (Mode::Import, Some(id)) => return self.import(subject, parsed, input, id),
            (Mode::Import, None) => {
                return Err(RegistryError::not_permitted(format!(
                    "Subject '{subject}' is in IMPORT mode: a schema is registered with its id"
                )))
            }
            (_, Some(_)) => {
                return Err(RegistryError::not_permitted(format!(
                    "Subject '{subject}' is not in IMPORT mode: a schema id cannot be given"
                )))
            }
            (_, None) if input.version.is_some() => {
                return Err(RegistryError::not_permitted(format!(
                    "Subject '{subject}' is not in IMPORT mode: a version cannot be given"
                )))
            }
            (_, None) => {}
        }
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
        let version = self.next_version(subject);
        Ok(Self::new_version(subject, version, id, parsed, input))
    }

    /// One above `subject`'s highest version (soft-deleted ones count), 1 for a new subject.
    fn next_version(&self, subject: &str) -> u32 {
        (self.subjects.get(subject))
            .and_then(|v| v.keys().next_back().copied())
            .unwrap_or(0)
            + 1
    }

    /// The record of a new version `version` of `subject`, with schema `id`.
    fn new_version(
        subject: &str,
        version: u32,
        id: u32,
        parsed: ParsedSchema,
        input: &SchemaInput,
    ) -> Planned<Registered> {
        let value = SchemaValue {
            subject: subject.to_owned(),
            version,
            id,
            schema_type: parsed.schema_type,
            references: input.references.clone(),
            schema: parsed.normalized,
            deleted: false,
        };
        Planned {
            records: vec![(
                SchemaKey::schema(subject, version).to_bytes(),
                Some(serde_json::to_vec(&value).expect("a value serializes")),
            )],
            answer: Registered { id, version },
        }
    }

    /// Registers `parsed` in `IMPORT` mode with the id (and version) it had elsewhere,
    /// unchecked for compatibility. The same schema already there under that id is answered
    /// as it is.
    fn import(
        &self,
        subject: &str,
        parsed: ParsedSchema,
        input: &SchemaInput,
        id: u32,
    ) -> Result<Planned<Registered>, RegistryError> {
        if let Some(stored) = self.schemas.get(&id) {
            let same = stored.schema_type == parsed.schema_type
                && stored.schema == parsed.normalized
                && stored.references == input.references;
            if !same {
                return Err(RegistryError::not_permitted(format!(
                    "Overwrite new schema with id {id} is not permitted: id {id} names another schema"
                )));
            }
        }
        if let Some((version, found)) = self.find(subject, &parsed, &input.references) {
            if found == id && input.version.is_none_or(|v| v == version) {
                return Ok(Planned::nothing(Registered { id, version }));
            }
        }
        let version = input.version.unwrap_or_else(|| self.next_version(subject));
        let taken = self
            .subjects
            .get(subject)
            .is_some_and(|v| v.contains_key(&version));
        if version == 0 || taken {
            return Err(RegistryError::not_permitted(format!(
                "Subject '{subject}' cannot take version {version}: it exists, or is not a version number"
            )));
        }
        Ok(Self::new_version(subject, version, id, parsed, input))
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
                ..SchemaInput::default()
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
        self.writable(subject)?;
        let found = match spec {
            // `latest` is the latest live version; a number may name a soft-deleted one.
            VersionSpec::Latest => self.version(subject, spec, false)?,
            VersionSpec::Number(_) => self.version(subject, spec, true)?,
        };
        self.unreferenced(subject, found.version, permanent)?;
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
        self.writable(subject)?;
        let all = self.versions(subject, true)?;
        let live = self.versions(subject, false).unwrap_or_default();
        for &version in &all {
            self.unreferenced(subject, version, permanent)?;
        }
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

    /// The mode `subject` is in: its own, else the global one.
    pub fn mode(&self, subject: Option<&str>) -> Mode {
        (subject.and_then(|s| self.modes.get(s).copied()))
            .or(self.global_mode)
            .unwrap_or_default()
    }

    /// `subject`'s own mode, if it has one.
    pub fn subject_mode(&self, subject: &str) -> Option<Mode> {
        self.modes.get(subject).copied()
    }

    /// `subject`'s mode, when it lets the subject change.
    fn writable(&self, subject: &str) -> Result<Mode, RegistryError> {
        let mode = self.mode(Some(subject));
        if mode.read_only() {
            return Err(RegistryError::not_permitted(format!(
                "Subject '{subject}' is in read-only mode ({mode})"
            )));
        }
        Ok(mode)
    }

    /// Sets the global mode (`subject` none) or a subject's (`PUT /mode[/{s}]`). `IMPORT`
    /// needs no subjects there (any subject for the global mode) unless `force`.
    ///
    /// # Errors
    /// 42205 (subjects there, for `IMPORT`), 42208 (an invalid subject name).
    pub fn set_mode(
        &self,
        subject: Option<&str>,
        mode: Mode,
        force: bool,
    ) -> Result<Planned<Mode>, RegistryError> {
        if let Some(subject) = subject {
            Self::check_subject(subject)?;
        }
        let found = match subject {
            Some(subject) => self.subjects.contains_key(subject),
            None => !self.subjects.is_empty(),
        };
        if mode == Mode::Import && found && !force {
            return Err(RegistryError::not_permitted(
                "Cannot import since found existing subjects (set force=true to import anyway)",
            ));
        }
        let value = ModeValue {
            mode: mode.name().to_owned(),
        };
        Ok(Planned {
            records: vec![(
                SchemaKey::mode(subject).to_bytes(),
                Some(serde_json::to_vec(&value).expect("a value serializes")),
            )],
            answer: mode,
        })
    }

    /// Removes a subject's own mode (`DELETE /mode/{s}`): answers the mode it had.
    ///
    /// # Errors
    /// 40401 for a subject without a mode of its own.
    pub fn delete_mode(&self, subject: &str) -> Result<Planned<Mode>, RegistryError> {
        let had = self
            .subject_mode(subject)
            .ok_or_else(|| RegistryError::subject_not_found(subject))?;
        Ok(Planned {
            records: vec![(SchemaKey::mode(Some(subject)).to_bytes(), None)],
            answer: had,
        })
    }

    /// The ids of the live versions whose schemas refer to version `spec` of `subject`
    /// (`GET /subjects/{s}/versions/{v}/referencedby`), ascending.
    ///
    /// # Errors
    /// 40401, 40402.
    pub fn referenced_by(
        &self,
        subject: &str,
        spec: VersionSpec,
    ) -> Result<Vec<u32>, RegistryError> {
        let found = self.version(subject, spec, false)?;
        Ok(self.referring(subject, found.version, false))
    }

    /// The ids of the versions (soft-deleted ones too with `deleted`) whose schemas refer to
    /// `version` of `subject`, ascending.
    fn referring(&self, subject: &str, version: u32, deleted: bool) -> Vec<u32> {
        let mut ids: Vec<u32> = (self.subjects.values())
            .flat_map(|versions| versions.values())
            .filter(|v| deleted || !v.deleted)
            .filter(|v| {
                self.schemas[&v.id]
                    .references
                    .iter()
                    .any(|r| r.subject == subject && r.version == version)
            })
            .map(|v| v.id)
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// Refuses to delete `version` of `subject` while a live version refers to it (or, for
    /// a `permanent` delete, any version, soft-deleted ones too), as Confluent does.
    fn unreferenced(
        &self,
        subject: &str,
        version: u32,
        permanent: bool,
    ) -> Result<(), RegistryError> {
        let ids = self.referring(subject, version, permanent);
        if ids.is_empty() {
            return Ok(());
        }
        Err(RegistryError::new(
            42206,
            format!("One or more references exist to the schema {{magic=1,keytype=SCHEMA,subject={subject},version={version}}}: schema ids {ids:?} refer to it"),
        ))
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
            ..avro(r#"{"type":"object","properties":5}"#)
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

    #[test]
    fn read_only_modes_refuse_changes_and_a_subjects_mode_wins_over_the_global_one() {
        let (mut r, mut log) = (Registry::default(), Vec::new());
        let planned = r.register("a", &user("")).unwrap();
        commit(&mut r, &mut log, planned);
        assert_eq!(r.mode(Some("a")), Mode::ReadWrite);
        let planned = r.set_mode(None, Mode::ReadOnly, false).unwrap();
        commit(&mut r, &mut log, planned);
        let refused = r.register("b", &user("")).unwrap_err();
        assert_eq!((refused.code, refused.http_status()), (42205, 422));
        assert!(refused.message.contains("read-only"), "{refused}");
        assert_eq!(
            r.delete_version("a", VersionSpec::Latest, false)
                .unwrap_err()
                .code,
            42205
        );
        assert_eq!(r.delete_subject("a", false).unwrap_err().code, 42205);
        // A subject's own mode wins; removing it brings the global one back.
        let planned = r.set_mode(Some("b"), Mode::ReadWrite, false).unwrap();
        commit(&mut r, &mut log, planned);
        assert!(r.register("b", &user("")).is_ok());
        assert_eq!(r.register("c", &user("")).unwrap_err().code, 42205);
        let planned = r.delete_mode("b").unwrap();
        assert_eq!(commit(&mut r, &mut log, planned), Mode::ReadWrite);
        assert_eq!(r.mode(Some("b")), Mode::ReadOnly);
        assert_eq!(r.delete_mode("b").unwrap_err().code, 40401);
        // Modes are records like the rest: a replay has them.
        assert_eq!(replay(&log).mode(None), Mode::ReadOnly);
    }

    #[test]
    fn import_mode_registers_with_the_given_ids_and_refuses_conflicts() {
        let (mut r, mut log) = (Registry::default(), Vec::new());
        let with_id = |id, version| SchemaInput {
            id: Some(id),
            version,
            ..user("")
        };
        // Ids are only given in IMPORT mode, and IMPORT mode needs them.
        assert_eq!(r.register("a", &with_id(40, None)).unwrap_err().code, 42205);
        let planned = r.set_mode(None, Mode::Import, false).unwrap();
        commit(&mut r, &mut log, planned);
        assert_eq!(r.register("a", &user("")).unwrap_err().code, 42205);
        let planned = r.register("a", &with_id(40, Some(3))).unwrap();
        assert_eq!(
            commit(&mut r, &mut log, planned),
            Registered { id: 40, version: 3 }
        );
        // Again: the same answer, nothing written.
        assert!(r
            .register("a", &with_id(40, Some(3)))
            .unwrap()
            .records
            .is_empty());
        // Another schema cannot take id 40; version 3 is taken.
        let other = SchemaInput {
            id: Some(40),
            ..user(r#",{"name":"age","type":"int"}"#)
        };
        assert_eq!(r.register("a", &other).unwrap_err().code, 42205);
        let other = SchemaInput {
            id: Some(41),
            version: Some(3),
            ..user(r#",{"name":"age","type":"int"}"#)
        };
        assert_eq!(r.register("a", &other).unwrap_err().code, 42205);
        // Not checked for compatibility (a new field without a default), next version.
        let planned = r
            .register(
                "a",
                &SchemaInput {
                    version: None,
                    ..other
                },
            )
            .unwrap();
        assert_eq!(
            commit(&mut r, &mut log, planned),
            Registered { id: 41, version: 4 }
        );
        // Back to READWRITE, new ids follow the highest imported one.
        let planned = r.set_mode(None, Mode::ReadWrite, false).unwrap();
        commit(&mut r, &mut log, planned);
        let planned = r.register("b", &avro(r#""string""#)).unwrap();
        assert_eq!(commit(&mut r, &mut log, planned).id, 42);
        // IMPORT over existing subjects needs force.
        assert_eq!(
            r.set_mode(None, Mode::Import, false).unwrap_err().code,
            42205
        );
        assert_eq!(
            r.set_mode(Some("b"), Mode::Import, false).unwrap_err().code,
            42205
        );
        assert!(r.set_mode(Some("new"), Mode::Import, false).is_ok());
        assert!(r.set_mode(None, Mode::Import, true).is_ok());
    }

    #[test]
    fn a_referenced_version_lists_its_referrers_and_cannot_be_deleted() {
        let (mut r, mut log) = (Registry::default(), Vec::new());
        let address = avro(
            r#"{"type":"record","name":"Address","fields":[{"name":"city","type":"string"}]}"#,
        );
        let planned = r.register("address", &address).unwrap();
        commit(&mut r, &mut log, planned);
        let person = SchemaInput {
            references: vec![SchemaReference {
                name: "Address".into(),
                subject: "address".into(),
                version: 1,
            }],
            ..avro(
                r#"{"type":"record","name":"Person","fields":[{"name":"home","type":"Address"}]}"#,
            )
        };
        let planned = r.register("person", &person).unwrap();
        let person_id = commit(&mut r, &mut log, planned).id;
        assert_eq!(
            r.referenced_by("address", VersionSpec::Number(1)).unwrap(),
            vec![person_id]
        );
        assert_eq!(
            r.referenced_by("person", VersionSpec::Latest).unwrap(),
            Vec::<u32>::new()
        );
        assert_eq!(
            r.referenced_by("address", VersionSpec::Number(2))
                .unwrap_err()
                .code,
            40402
        );
        let refused = r
            .delete_version("address", VersionSpec::Number(1), false)
            .unwrap_err();
        assert_eq!((refused.code, refused.http_status()), (42206, 422));
        assert_eq!(r.delete_subject("address", false).unwrap_err().code, 42206);
        // Once the referrer is soft-deleted, a soft delete may go on; a permanent one waits
        // until the referrer is permanently gone too.
        let planned = r.delete_subject("person", false).unwrap();
        commit(&mut r, &mut log, planned);
        let planned = r.delete_subject("address", false).unwrap();
        commit(&mut r, &mut log, planned);
        assert_eq!(r.delete_subject("address", true).unwrap_err().code, 42206);
        let planned = r.delete_subject("person", true).unwrap();
        commit(&mut r, &mut log, planned);
        assert!(r.delete_subject("address", true).is_ok());
    }
}
