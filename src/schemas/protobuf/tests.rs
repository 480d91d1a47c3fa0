//! The rules of `protobuf`, one test each, and its payload check.

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
        ProtobufSchema::parse("syntax = \"proto3\"; message A { Nope n = 1; }", &[]).unwrap_err();
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
    let as_proto2 = proto2("message User { optional string name = 1; optional int32 age = 2; }");
    assert!(backward(&proto3(USER), &as_proto2).is_empty());
}

#[test]
fn an_imported_message_type_is_compared_field_by_field() {
    let user = "syntax = \"proto3\"; import \"a.proto\"; message User { geo.Address home = 1; }";
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
