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
mod tests {
    use super::*;

    fn proto(text: &str) -> ProtobufSchema {
        ProtobufSchema::parse(text, &[]).unwrap()
    }

    fn proto3(body: &str) -> ProtobufSchema {
        proto(&format!("syntax = \"proto3\";\npackage shop;\n{body}"))
    }

    fn proto2(body: &str) -> ProtobufSchema {
        proto(&format!("syntax = \"proto2\";\npackage shop;\n{body}"))
    }

    /// Confluent's BACKWARD check: the new schema reads the old one's data.
    fn backward(old: &ProtobufSchema, new: &ProtobufSchema) -> Vec<String> {
        compare(old, new)
    }

    /// Confluent's FORWARD check: the old schema reads the new one's data.
    fn forward(old: &ProtobufSchema, new: &ProtobufSchema) -> Vec<String> {
        compare(new, old)
    }

    const USER: &str = "message User { string name = 1; int32 age = 2; }";

    #[test]
    fn proto_text_compiles_and_bad_text_is_refused_with_why() {
        let user = proto3(USER);
        assert_eq!(
            user.file.messages().next().unwrap().full_name(),
            "shop.User"
        );
        let bad = ProtobufSchema::parse("syntax = \"proto3\"; message { }", &[]).unwrap_err();
        assert!(bad.starts_with("Invalid schema:"), "{bad}");
        let unknown_type =
            ProtobufSchema::parse("syntax = \"proto3\"; message A { Nope n = 1; }", &[])
                .unwrap_err();
        assert!(unknown_type.contains("Nope"), "{unknown_type}");
        assert!(ProtobufSchema::parse("  \n", &[]).is_err());
        assert_eq!(ProtobufSchema::normalize("  a \n"), "a");
    }

    #[test]
    fn imports_resolve_by_reference_name_and_well_known_ones_without() {
        let address = "syntax = \"proto3\"; package geo; message Address { string city = 1; }";
        let user = "syntax = \"proto3\"; import \"address.proto\"; \
                    import \"google/protobuf/timestamp.proto\"; \
                    message User { geo.Address home = 1; google.protobuf.Timestamp born = 2; }";
        let missing = ProtobufSchema::parse(user, &[]).unwrap_err();
        assert!(missing.contains("address.proto"), "{missing}");
        let refs = [("address.proto".to_owned(), address.to_owned())];
        let parsed = ProtobufSchema::parse(user, &refs).unwrap();
        assert_eq!(parsed.file.messages().next().unwrap().name(), "User");
        let clash = [(MAIN_FILE.to_owned(), address.to_owned())];
        assert!(ProtobufSchema::parse(user, &clash).is_err());
    }

    #[test]
    fn a_serialized_descriptor_in_base64_is_a_schema_too() {
        let text = proto3(USER);
        let encoded = base64::engine::general_purpose::STANDARD
            .encode(text.file.file_descriptor_proto().encode_to_vec());
        let parsed = ProtobufSchema::parse(&encoded, &[]).unwrap();
        assert!(compare(&text, &parsed).is_empty());
        assert!(compare(&parsed, &text).is_empty());
        let again = ProtobufSchema::parse(&parsed.serialized(), &[]).unwrap();
        assert!(compare(&again, &text).is_empty());
    }

    #[test]
    fn a_removed_or_renamed_message_is_incompatible() {
        let v1 = proto3(&format!("{USER} message Order {{ int64 id = 1; }}"));
        let renamed = proto3(&format!("{USER} message Purchase {{ int64 id = 1; }}"));
        let why = backward(&v1, &renamed);
        assert_eq!(why.len(), 1, "{why:?}");
        assert!(why[0].contains("message Order was removed"), "{why:?}");
        // Adding a message reads the old data; the old schema lacks it under FORWARD.
        assert!(backward(&proto3(USER), &v1).is_empty());
        assert!(!forward(&proto3(USER), &v1).is_empty());
        // Reordering messages is fine: payloads name messages by index in their own schema.
        let reordered = proto3(&format!("message Order {{ int64 id = 1; }} {USER}"));
        assert!(backward(&v1, &reordered).is_empty());
        // A nested message counts too.
        let nested = proto3("message User { message Address { string city = 1; } }");
        let gone = proto3("message User { }");
        assert!(backward(&nested, &gone)[0].contains("message User.Address"));
    }

    #[test]
    fn a_field_type_change_is_incompatible_outside_the_wire_compatible_groups() {
        let v1 = proto3(USER);
        let why = backward(
            &v1,
            &proto3("message User { string name = 1; string age = 2; }"),
        );
        assert_eq!(
            why,
            ["message User: field 2 (age) changed type from int32 to string"]
        );
        for compatible in ["int64", "uint32", "uint64", "bool"] {
            let new = proto3(&format!(
                "message User {{ string name = 1; {compatible} age = 2; }}"
            ));
            assert!(backward(&v1, &new).is_empty(), "int32 -> {compatible}");
        }
        let pairs = [
            ("sint32", "sint64", true),
            ("fixed32", "sfixed32", true),
            ("fixed64", "sfixed64", true),
            ("string", "bytes", true),
            ("int32", "sint32", false),
            ("fixed32", "fixed64", false),
            ("float", "double", false),
            ("int64", "double", false),
        ];
        for (from, to, ok) in pairs {
            let old = proto3(&format!("message M {{ {from} f = 1; }}"));
            let new = proto3(&format!("message M {{ {to} f = 1; }}"));
            assert_eq!(backward(&old, &new).is_empty(), ok, "{from} -> {to}");
        }
        // An enum is a varint; a message is not a scalar.
        let with_enum = proto3("enum Level { LOW = 0; } message M { Level f = 1; }");
        assert!(backward(&proto3("message M { int32 f = 1; }"), &with_enum).is_empty());
        let with_message = proto3("message N { } message M { N f = 1; }");
        let why = backward(
            &proto3("message N { } message M { int32 f = 1; }"),
            &with_message,
        );
        assert_eq!(
            why,
            ["message M: field 1 (f) changed type from int32 to shop.N"]
        );
        // A map's value type follows the same rules.
        let map = |v: &str| proto3(&format!("message M {{ map<string, {v}> f = 1; }}"));
        assert!(backward(&map("int32"), &map("int64")).is_empty());
        assert!(!backward(&map("int32"), &map("string")).is_empty());
    }

    #[test]
    fn a_renamed_field_keeps_its_number_and_is_compatible() {
        let renamed = proto3("message User { string full_name = 1; int32 age = 2; }");
        assert!(backward(&proto3(USER), &renamed).is_empty());
    }

    #[test]
    fn a_removed_or_added_field_is_compatible_both_ways_in_proto3() {
        let fewer = proto3("message User { string name = 1; }");
        assert!(backward(&proto3(USER), &fewer).is_empty());
        assert!(forward(&proto3(USER), &fewer).is_empty());
        assert!(backward(&fewer, &proto3(USER)).is_empty());
        assert!(forward(&fewer, &proto3(USER)).is_empty());
    }

    #[test]
    fn a_required_field_added_or_removed_is_incompatible_in_proto2() {
        let v1 = proto2("message User { required string name = 1; }");
        let added = proto2("message User { required string name = 1; required int32 age = 2; }");
        let why = backward(&v1, &added);
        assert_eq!(why, ["message User: required field 2 (age) was added"]);
        let removed = proto2("message User { optional int32 age = 2; }");
        let why = backward(&v1, &removed);
        assert_eq!(why, ["message User: required field 1 (name) was removed"]);
        // An optional field comes and goes freely.
        let optional = proto2("message User { required string name = 1; optional int32 age = 2; }");
        assert!(backward(&v1, &optional).is_empty());
        assert!(forward(&v1, &optional).is_empty());
        // A numeric field may not change between required, optional and repeated.
        let repeated = proto2("message User { required string name = 1; repeated int32 age = 2; }");
        let why = backward(&optional, &repeated);
        assert_eq!(
            why,
            ["message User: field 2 (age) changed from singular to repeated"]
        );
    }

    #[test]
    fn fields_moved_into_or_out_of_a_oneof_are_checked_as_confluent_does() {
        let flat = proto3("message M { string a = 1; string b = 2; }");
        let both_in_oneof = proto3("message M { oneof choice { string a = 1; string b = 2; } }");
        let why = backward(&flat, &both_in_oneof);
        assert!(
            why.len() == 1 && why[0].contains("oneof (choice)"),
            "{why:?}"
        );
        // One field into a new oneof reads the same.
        let one_in_oneof = proto3("message M { oneof choice { string a = 1; } string b = 2; }");
        assert!(backward(&flat, &one_in_oneof).is_empty());
        // Into a oneof that already had a field.
        let why = backward(&one_in_oneof, &both_in_oneof);
        assert_eq!(
            why,
            ["message M: field 2 was moved into oneof choice, which already had fields"]
        );
        // Out of a oneof: the new schema reads old data, the old one cannot read new data.
        assert!(backward(&both_in_oneof, &one_in_oneof).is_empty());
        assert!(!forward(&both_in_oneof, &one_in_oneof).is_empty());
        // A field removed from a oneof.
        let fewer = proto3("message M { oneof choice { string a = 1; } }");
        let why = backward(&both_in_oneof, &fewer);
        assert_eq!(
            why,
            ["message M: field 2 (b) was removed from oneof choice"]
        );
        // A proto3 `optional` field is no oneof.
        let optional = proto3("message M { optional string a = 1; string b = 2; }");
        assert!(backward(&flat, &optional).is_empty());
    }

    #[test]
    fn a_changed_package_is_incompatible_and_a_changed_syntax_alone_is_not() {
        let other = proto(
            "syntax = \"proto3\"; package store; message User { string name = 1; int32 age = 2; }",
        );
        let why = backward(&proto3(USER), &other);
        assert!(why
            .iter()
            .any(|w| w.contains("package changed from 'shop' to 'store'")));
        let as_proto2 =
            proto2("message User { optional string name = 1; optional int32 age = 2; }");
        assert!(backward(&proto3(USER), &as_proto2).is_empty());
    }

    #[test]
    fn an_imported_message_type_is_compared_field_by_field() {
        let user =
            "syntax = \"proto3\"; import \"a.proto\"; message User { geo.Address home = 1; }";
        let address = |field: &str| {
            vec![(
                "a.proto".to_owned(),
                format!("syntax = \"proto3\"; package geo; message Address {{ {field} }}"),
            )]
        };
        let v1 = ProtobufSchema::parse(user, &address("string city = 1;")).unwrap();
        let v2 = ProtobufSchema::parse(user, &address("int32 city = 1;")).unwrap();
        let why = backward(&v1, &v2);
        assert_eq!(
            why,
            ["message Address: field 1 (city) changed type from string to int32"]
        );
    }

    /// Confluent's framing of a message: the index list, then the message's bytes.
    fn framed(indexes: &[u8], message: &[u8]) -> Vec<u8> {
        [indexes, message].concat()
    }

    #[test]
    fn a_payload_decodes_against_the_message_its_indexes_name() {
        let schema = proto3("message User { string name = 1; message Tag { int32 id = 1; } } message Order { int64 id = 1; }");
        // name = "ab": field 1, length-delimited.
        let user = [0x0a, 0x02, b'a', b'b'];
        assert!(schema.check_payload(&framed(&[0], &user)).is_ok());
        // [1] (count 1, index 1; zigzag doubles them): Order, whose field 1 is a varint.
        assert!(schema
            .check_payload(&framed(&[2, 2], &[0x08, 0x05]))
            .is_ok());
        // [0, 0]: User.Tag.
        assert!(schema
            .check_payload(&framed(&[4, 0, 0], &[0x08, 0x07]))
            .is_ok());
        // Order's field 1 as a string: the wire type does not match.
        let why = schema.check_payload(&framed(&[2, 2], &user)).unwrap_err();
        assert!(why.contains("shop.Order"), "{why}");
        // Out of range, truncated, negative.
        let why = schema.check_payload(&framed(&[2, 6], &[])).unwrap_err();
        assert!(why.contains("out of range"), "{why}");
        assert!(schema.check_payload(&[]).is_err());
        assert!(schema.check_payload(&[2, 1]).is_err());
        assert!(schema
            .check_payload(&framed(&[0], &[0x0a, 0x09, b'a']))
            .is_err());
        // Not UTF-8 in a proto3 string.
        assert!(schema
            .check_payload(&framed(&[0], &[0x0a, 0x01, 0xff]))
            .is_err());
    }
}
