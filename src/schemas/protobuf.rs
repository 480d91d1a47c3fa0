//! Protobuf schemas: `.proto` text (proto2 or proto3) compiled into descriptors by `protox`,
//! Confluent's compatibility rules over them, and the check that a payload decodes.
//!
//! A schema is the text of one `.proto` file, or, as Confluent's clients send it, the base64 of
//! its serialized `FileDescriptorProto`. Its imports resolve to the schemas its references name
//! (a reference's `name` is the import path, e.g. `address.proto`); the well-known
//! `google/protobuf/*.proto` files resolve without a reference. The normalized text is the text
//! as given, trimmed: nothing here re-prints a schema, so two registrations that differ in
//! whitespace or comments are two schemas (Confluent re-prints them into one).
//!
//! # Compatibility
//! `compare(writer, reader)` follows Confluent's Protobuf `SchemaDiff` (a BACKWARD check
//! compares the old schema with the new one, a FORWARD check the other way round). Messages are
//! matched by name (nested ones by their dotted path), fields by number. Refused:
//!
//! - the package changed;
//! - a message of the writer missing in the reader (removed or renamed);
//! - a field whose kind changed (scalar, message, map), or whose scalar type changed outside
//!   the wire-compatible groups {int32, int64, uint32, uint64, bool, enums}, {sint32, sint64},
//!   {fixed32, sfixed32}, {fixed64, sfixed64}, {string, bytes}; float and double stand alone;
//! - a message field whose type changed name (an imported message type is also compared field
//!   by field); a map's key or value type changed by the rules above;
//! - a numeric field changed between singular, `repeated` and `required`;
//! - a `required` field added or removed;
//! - a field removed from a oneof (and from the message), several fields moved into one oneof,
//!   or a field moved into a oneof that already had fields.
//!
//! Accepted, as Confluent does: fields added or removed (not `required`), renamed fields,
//! messages added or reordered, one field moved into a new oneof, a field moved out of a oneof
//! (under FORWARD the reverse move is refused), oneofs added or removed, any change to enums,
//! string/bytes fields changing cardinality, and a change of `syntax` alone. Options, services
//! and extensions are not compared.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use base64::Engine as _;
use prost_reflect::prost::Message as _;
use prost_reflect::prost_types::FileDescriptorProto;
use prost_reflect::{
    Cardinality, DynamicMessage, FieldDescriptor, FileDescriptor, Kind, MessageDescriptor,
};
use protox::file::{ChainFileResolver, File, FileResolver, GoogleFileResolver};

/// The name the registered schema's own file is compiled under; no import can name it (a
/// reference with this name is refused), so it never shadows one.
const MAIN_FILE: &str = "<registered schema>";

/// How many message indexes a payload's header may hold: one per nesting level, and
/// descriptors nest far less deeply than this.
const MAX_MESSAGE_INDEXES: u64 = 100;

/// A compiled Protobuf schema: its file, and the files it imports.
#[derive(Debug, Clone)]
pub struct ProtobufSchema {
    file: FileDescriptor,
}

impl ProtobufSchema {
    /// Compiles `text`, its imports resolved from `referenced` (import name, schema text).
    ///
    /// # Errors
    /// Why it does not compile: a syntax or type error, an import no reference names.
    pub fn parse(text: &str, referenced: &[(String, String)]) -> Result<Self, String> {
        if text.trim().is_empty() {
            return Err("Invalid schema: an empty Protobuf schema".into());
        }
        let mut imports = HashMap::new();
        for (name, source) in referenced {
            if name == MAIN_FILE {
                return Err(format!(
                    "Invalid schema: a reference may not be named '{name}'"
                ));
            }
            imports.insert(name.clone(), source.clone());
        }
        imports.insert(MAIN_FILE.to_owned(), text.to_owned());
        let mut resolver = ChainFileResolver::new();
        resolver.add(Sources(imports));
        resolver.add(GoogleFileResolver::new());
        let mut compiler = protox::Compiler::with_file_resolver(resolver);
        compiler
            .open_file(MAIN_FILE)
            .map_err(|e| format!("Invalid schema: {e}"))?;
        let file = (compiler.descriptor_pool())
            .get_file_by_name(MAIN_FILE)
            .ok_or("Invalid schema: the schema's file was not compiled")?;
        Ok(ProtobufSchema { file })
    }

    /// The text a schema is stored and compared as (see the module documentation).
    pub fn normalize(text: &str) -> String {
        text.trim().to_owned()
    }

    /// The schema as Confluent's `format=serialized` answers it: the base64 of its file's
    /// serialized `FileDescriptorProto` (what Confluent's clients build descriptors from).
    pub fn serialized(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(self.file.encode_to_vec())
    }

    /// Whether `payload` (what follows Confluent's 5-byte header: the message-index list, then
    /// the message) decodes as the message the indexes name.
    ///
    /// # Errors
    /// Why not: a bad index list, an index out of range, or bytes that are not that message.
    pub fn check_payload(&self, payload: &[u8]) -> Result<(), String> {
        let mut rest = payload;
        let indexes = message_indexes(&mut rest)?;
        let message = self.indexed_message(&indexes)?;
        DynamicMessage::decode(message.clone(), rest).map_err(|e| {
            format!(
                "the payload is not a valid {} message: {e}",
                message.full_name()
            )
        })?;
        Ok(())
    }

    /// The message a payload's index list names: the first index among the file's top-level
    /// messages, each next one among the previous message's nested messages.
    fn indexed_message(&self, indexes: &[u64]) -> Result<MessageDescriptor, String> {
        let pick = |candidates: Vec<MessageDescriptor>, index: u64, within: &str| {
            let count = candidates.len();
            (usize::try_from(index).ok())
                .and_then(|i| candidates.into_iter().nth(i))
                .ok_or_else(|| {
                    format!(
                        "message index {index} is out of range: {within} has {count} message(s)"
                    )
                })
        };
        let (first, nested) = indexes.split_first().ok_or("an empty message-index list")?;
        let mut message = pick(self.file.messages().collect(), *first, "the schema")?;
        for &index in nested {
            let within = format!("message {}", message.full_name());
            message = pick(message.child_messages().collect(), index, &within)?;
        }
        Ok(message)
    }
}

/// Reads Confluent's message-index list off the front of `payload`: a zigzag varint count, then
/// that many zigzag varint indexes; a count of 0 (the single byte 0) means `[0]`, the first
/// message.
fn message_indexes(payload: &mut &[u8]) -> Result<Vec<u64>, String> {
    let count = zigzag(payload)?;
    if count == 0 {
        return Ok(vec![0]);
    }
    if count > MAX_MESSAGE_INDEXES {
        return Err(format!(
            "the payload's message-index list claims {count} indexes (at most {MAX_MESSAGE_INDEXES})"
        ));
    }
    (0..count).map(|_| zigzag(payload)).collect()
}

/// One zigzag varint, which must not be negative.
fn zigzag(payload: &mut &[u8]) -> Result<u64, String> {
    let raw = prost_reflect::prost::encoding::decode_varint(payload)
        .map_err(|e| format!("the payload's message-index list is not valid: {e}"))?;
    let value = (raw >> 1) as i64 ^ -((raw & 1) as i64);
    u64::try_from(value).map_err(|_| format!("a negative message index ({value})"))
}

/// The schemas' own texts by import name, as protox opens files.
struct Sources(HashMap<String, String>);

impl FileResolver for Sources {
    fn resolve_path(&self, path: &std::path::Path) -> Option<String> {
        let name = path.to_str()?;
        self.0.contains_key(name).then(|| name.to_owned())
    }

    fn open_file(&self, name: &str) -> Result<File, protox::Error> {
        let text = self
            .0
            .get(name)
            .ok_or_else(|| protox::Error::file_not_found(name))?;
        match serialized_descriptor(text) {
            Some(mut descriptor) => {
                descriptor.name = Some(name.to_owned());
                Ok(File::from_file_descriptor_proto(descriptor))
            }
            None => File::from_source(name, text),
        }
    }
}

/// The `FileDescriptorProto` a schema holds when it is one in base64 (as Confluent's clients
/// register them), else `None` (it is `.proto` text).
fn serialized_descriptor(text: &str) -> Option<FileDescriptorProto> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .ok()?;
    FileDescriptorProto::decode(bytes.as_slice()).ok()
}

/// Why data written with `writer` cannot be read with `reader`: one message per difference
/// Confluent counts as incompatible; empty when it can.
pub fn compare(writer: &ProtobufSchema, reader: &ProtobufSchema) -> Vec<String> {
    let mut why = Vec::new();
    let (old, new) = (&writer.file, &reader.file);
    if old.package_name() != new.package_name() {
        why.push(format!(
            "the package changed from '{}' to '{}'",
            old.package_name(),
            new.package_name()
        ));
    }
    let new_messages = local_messages(new);
    let mut pending = Vec::new();
    for (name, message) in local_messages(old) {
        match new_messages.get(&name) {
            None => why.push(format!(
                "message {name} was removed or renamed (the reader has no message of that name)"
            )),
            Some(updated) => pending.push((message, updated.clone())),
        }
    }
    // A queue, not recursion: imported message types add pairs, however deep they chain.
    let mut compared = BTreeSet::new();
    while let Some((old, new)) = pending.pop() {
        let names = (old.full_name().to_owned(), new.full_name().to_owned());
        if compared.insert(names) {
            compare_messages(&old, &new, &mut pending, &mut why);
        }
    }
    why
}

/// Pairs of same-named messages still to compare.
type Pending = Vec<(MessageDescriptor, MessageDescriptor)>;

/// A file's messages, nested ones included, by their name within the package (map entries,
/// which `map<..>` fields declare, are compared as their fields' types instead).
fn local_messages(file: &FileDescriptor) -> BTreeMap<String, MessageDescriptor> {
    fn add(message: MessageDescriptor, into: &mut BTreeMap<String, MessageDescriptor>) {
        if message.is_map_entry() {
            return;
        }
        for child in message.child_messages() {
            add(child, into);
        }
        into.insert(local_name(&message), message);
    }
    let mut all = BTreeMap::new();
    for message in file.messages() {
        add(message, &mut all);
    }
    all
}

/// A message's name without its package: `User`, `User.Address`.
fn local_name(message: &MessageDescriptor) -> String {
    let full = message.full_name();
    let package = message.package_name();
    match full.strip_prefix(package).and_then(|s| s.strip_prefix('.')) {
        Some(local) if !package.is_empty() => local.to_owned(),
        _ => full.to_owned(),
    }
}

/// A field's place in its message: top level, or in the (real, not proto3-`optional`) oneof
/// of this name.
fn oneof_of(field: &FieldDescriptor) -> Option<String> {
    (field.containing_oneof())
        .filter(|oneof| !oneof.is_synthetic())
        .map(|oneof| oneof.name().to_owned())
}

fn describe(field: &FieldDescriptor) -> String {
    format!("field {} ({})", field.number(), field.name())
}

/// Compares two messages of the same name; message types its fields import join `pending`.
fn compare_messages(
    old: &MessageDescriptor,
    new: &MessageDescriptor,
    pending: &mut Pending,
    why: &mut Vec<String>,
) {
    let message = format!("message {}", local_name(old));
    let old_fields: BTreeMap<u32, FieldDescriptor> =
        old.fields().map(|f| (f.number(), f)).collect();
    let new_fields: BTreeMap<u32, FieldDescriptor> =
        new.fields().map(|f| (f.number(), f)).collect();
    let mut old_oneofs: BTreeMap<String, BTreeMap<u32, FieldDescriptor>> = BTreeMap::new();
    for field in old_fields.values() {
        if let Some(oneof) = oneof_of(field) {
            old_oneofs
                .entry(oneof)
                .or_default()
                .insert(field.number(), field.clone());
        }
    }
    let mut new_oneofs: BTreeMap<String, BTreeMap<u32, FieldDescriptor>> = BTreeMap::new();
    for field in new_fields.values() {
        if let Some(oneof) = oneof_of(field) {
            new_oneofs
                .entry(oneof)
                .or_default()
                .insert(field.number(), field.clone());
        }
    }

    // Fields moved into a oneof: one field into a new oneof reads the same on the wire; more,
    // or into a oneof that had fields, makes values that coexisted exclude each other.
    for (oneof, fields) in &new_oneofs {
        let was_top_level = |n: &u32| old_fields.get(n).is_some_and(|f| oneof_of(f).is_none());
        let moved: Vec<&u32> = fields.keys().filter(|n| was_top_level(n)).collect();
        let existing = (fields.keys())
            .filter(|n| old_fields.get(n).is_some_and(|f| oneof_of(f).is_some()))
            .count();
        if moved.len() > 1 {
            why.push(format!(
                "{message}: fields {moved:?} were moved into one oneof ({oneof})"
            ));
        } else if moved.len() == 1 && existing > 0 {
            why.push(format!(
                "{message}: field {} was moved into oneof {oneof}, which already had fields",
                moved[0]
            ));
        }
    }
    // A field gone from a oneof (and from the message): a writer's value is lost to a reader
    // that relied on the oneof telling which field was set.
    for (oneof, fields) in &old_oneofs {
        if !new_oneofs.contains_key(oneof) {
            continue;
        }
        for field in fields.values() {
            if !new_fields.contains_key(&field.number()) {
                why.push(format!(
                    "{message}: {} was removed from oneof {oneof}",
                    describe(field)
                ));
            }
        }
    }
    // Fields removed and added; a required one either way breaks the side that requires it.
    for (number, field) in &old_fields {
        let in_old_oneof = oneof_of(field).is_some();
        if !new_fields.contains_key(number)
            && !in_old_oneof
            && field.cardinality() == Cardinality::Required
        {
            why.push(format!(
                "{message}: required {} was removed",
                describe(field)
            ));
        }
    }
    for (number, field) in &new_fields {
        if !old_fields.contains_key(number) && field.cardinality() == Cardinality::Required {
            why.push(format!("{message}: required {} was added", describe(field)));
        }
    }
    // Fields kept: their types, wherever they moved.
    for (number, old_field) in &old_fields {
        if let Some(new_field) = new_fields.get(number) {
            compare_fields(&message, old_field, new_field, pending, why);
        }
    }
}

/// What a field's type is for compatibility.
#[derive(Debug, Clone, PartialEq, Eq)]
enum FieldType {
    Scalar(ScalarGroup),
    Message(MessageDescriptor),
    Map(FieldDescriptor, FieldDescriptor),
}

/// Scalar types that read each other's values on the wire (Confluent's grouping).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ScalarGroup {
    /// int32, int64, uint32, uint64, bool and enums: varints.
    Varint,
    /// sint32, sint64: zigzag varints.
    Zigzag,
    Fixed32,
    Fixed64,
    Float,
    Double,
    /// string and bytes: length-delimited.
    StringOrBytes,
}

fn field_type(field: &FieldDescriptor) -> FieldType {
    use ScalarGroup::*;
    match field.kind() {
        Kind::Message(m) if m.is_map_entry() => {
            FieldType::Map(m.map_entry_key_field(), m.map_entry_value_field())
        }
        Kind::Message(m) => FieldType::Message(m),
        Kind::Int32 | Kind::Int64 | Kind::Uint32 | Kind::Uint64 | Kind::Bool | Kind::Enum(_) => {
            FieldType::Scalar(Varint)
        }
        Kind::Sint32 | Kind::Sint64 => FieldType::Scalar(Zigzag),
        Kind::Fixed32 | Kind::Sfixed32 => FieldType::Scalar(Fixed32),
        Kind::Fixed64 | Kind::Sfixed64 => FieldType::Scalar(Fixed64),
        Kind::Float => FieldType::Scalar(Float),
        Kind::Double => FieldType::Scalar(Double),
        Kind::String | Kind::Bytes => FieldType::Scalar(StringOrBytes),
    }
}

/// A field's type as the `.proto` spells it.
fn type_name(field: &FieldDescriptor) -> String {
    match field.kind() {
        Kind::Message(m) if m.is_map_entry() => format!(
            "map<{}, {}>",
            type_name(&m.map_entry_key_field()),
            type_name(&m.map_entry_value_field())
        ),
        Kind::Message(m) if field.is_group() => format!("group {}", m.full_name()),
        Kind::Message(m) => m.full_name().to_owned(),
        Kind::Enum(e) => e.full_name().to_owned(),
        Kind::Double => "double".into(),
        Kind::Float => "float".into(),
        Kind::Int32 => "int32".into(),
        Kind::Int64 => "int64".into(),
        Kind::Uint32 => "uint32".into(),
        Kind::Uint64 => "uint64".into(),
        Kind::Sint32 => "sint32".into(),
        Kind::Sint64 => "sint64".into(),
        Kind::Fixed32 => "fixed32".into(),
        Kind::Fixed64 => "fixed64".into(),
        Kind::Sfixed32 => "sfixed32".into(),
        Kind::Sfixed64 => "sfixed64".into(),
        Kind::Bool => "bool".into(),
        Kind::String => "string".into(),
        Kind::Bytes => "bytes".into(),
    }
}

fn cardinality_name(field: &FieldDescriptor) -> &'static str {
    match field.cardinality() {
        Cardinality::Optional => "singular",
        Cardinality::Required => "required",
        Cardinality::Repeated => "repeated",
    }
}

/// Compares a field kept under the same number (`message` names the message for the reasons).
fn compare_fields(
    message: &str,
    old: &FieldDescriptor,
    new: &FieldDescriptor,
    pending: &mut Pending,
    why: &mut Vec<String>,
) {
    let changed_type = || {
        format!(
            "{message}: {} changed type from {} to {}",
            describe(old),
            type_name(old),
            type_name(new)
        )
    };
    match (field_type(old), field_type(new)) {
        (FieldType::Scalar(a), FieldType::Scalar(b)) if a != b => why.push(changed_type()),
        (FieldType::Scalar(group), FieldType::Scalar(_)) => {
            let numeric = group != ScalarGroup::StringOrBytes;
            if numeric && old.cardinality() != new.cardinality() {
                why.push(format!(
                    "{message}: {} changed from {} to {}",
                    describe(old),
                    cardinality_name(old),
                    cardinality_name(new)
                ));
            }
        }
        (FieldType::Message(a), FieldType::Message(b)) => {
            if local_name(&a) != local_name(&b) || old.is_group() != new.is_group() {
                why.push(changed_type());
            } else if a.parent_file().name() != MAIN_FILE || b.parent_file().name() != MAIN_FILE {
                // A message type from an import: the file-level walk does not reach it.
                pending.push((a, b));
            }
        }
        (FieldType::Map(old_key, old_value), FieldType::Map(new_key, new_value)) => {
            let before = why.len();
            let mut value_types = Vec::new();
            compare_fields(message, &old_key, &new_key, &mut value_types, why);
            compare_fields(message, &old_value, &new_value, &mut value_types, why);
            pending.extend(value_types);
            if why.len() > before {
                why.truncate(before);
                why.push(changed_type());
            }
        }
        _ => why.push(changed_type()),
    }
}

#[cfg(test)]
mod tests;
