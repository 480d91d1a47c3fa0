//! Confluent's wire format for a value written with a registered schema, the bytes every
//! Confluent serializer (Java, Python, Go, .NET) writes and reads:
//!
//! | bytes | what |
//! |-------|------|
//! | 0 | magic byte, always 0 |
//! | 1..5 | the schema's global id, `u32` big-endian |
//! | 5.. | the value as an Avro binary datum, written with that schema |
//!
//! A reader takes the writer's schema by the id and resolves it into its own (Avro's schema
//! resolution), so a consumer reads values written with any compatible version.

use apache_avro::reader::datum::GenericDatumReader;
use apache_avro::writer::datum::GenericDatumWriter;
use apache_avro::Schema;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// The first byte of every value in the format (Confluent's `MAGIC_BYTE`).
pub const MAGIC: u8 = 0;
/// The magic byte and the schema id.
pub const HEADER_LEN: usize = 5;

/// Why a value does not read or write in the format.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// Shorter than the header, or a first byte other than [`MAGIC`]: not written by a
    /// schema-aware serializer.
    #[error("not in Confluent's wire format (magic byte 0, then a 4-byte schema id)")]
    NoHeader,
    /// The id names no schema the registry has (or none Avro parses).
    #[error("schema id {0} is not in the registry")]
    UnknownId(u32),
    /// The datum does not match its schema, or does not resolve into the reader's; or a value
    /// that does not fit the schema.
    #[error("avro: {0}")]
    Avro(#[source] apache_avro::Error),
}

/// The schema id of `bytes`.
///
/// # Errors
/// `NoHeader`.
pub fn schema_id(bytes: &[u8]) -> Result<u32, WireError> {
    match bytes {
        [MAGIC, a, b, c, d, ..] => Ok(u32::from_be_bytes([*a, *b, *c, *d])),
        _ => Err(WireError::NoHeader),
    }
}

/// `value` in the format, written with `schema`, whose id is `id`.
///
/// # Errors
/// `Avro` when the value does not fit the schema.
pub fn encode<T: Serialize + ?Sized>(
    id: u32,
    schema: &Schema,
    value: &T,
) -> Result<Vec<u8>, WireError> {
    // `resolve` picks the union branch of an `Option` and checks the value against the schema.
    let value = apache_avro::to_value(value)
        .and_then(|v| v.resolve(schema))
        .map_err(WireError::Avro)?;
    let mut bytes = Vec::with_capacity(64);
    bytes.push(MAGIC);
    bytes.extend_from_slice(&id.to_be_bytes());
    GenericDatumWriter::builder(schema)
        .build()
        .and_then(|writer| writer.write_value_ref(&mut bytes, &value))
        .map_err(WireError::Avro)?;
    Ok(bytes)
}

/// The value of `bytes` (whose header was read already) as a `T`: the datum read with
/// `writer`, resolved into `reader` when given (`None`: the writer's schema is the reader's).
///
/// # Errors
/// `NoHeader`, `Avro`.
pub fn decode<T: DeserializeOwned>(
    bytes: &[u8],
    writer: &Schema,
    reader: Option<&Schema>,
) -> Result<T, WireError> {
    super::compat::cap_avro_allocations();
    let mut datum = bytes.get(HEADER_LEN..).ok_or(WireError::NoHeader)?;
    let value = GenericDatumReader::builder(writer)
        .maybe_reader_schema(reader)
        .build()
        .and_then(|datum_reader| datum_reader.read_value(&mut datum))
        .map_err(WireError::Avro)?;
    apache_avro::from_value(&value).map_err(WireError::Avro)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Order {
        id: i64,
        note: Option<String>,
    }

    const V1: &str = r#"{"type":"record","name":"Order","fields":[
        {"name":"id","type":"long"},{"name":"note","type":["null","string"],"default":null}]}"#;

    #[test]
    fn a_value_round_trips_behind_the_magic_byte_and_its_id() {
        let schema = Schema::parse_str(V1).unwrap();
        let order = Order {
            id: 7,
            note: Some("x".into()),
        };
        let bytes = encode(42, &schema, &order).unwrap();
        assert_eq!(&bytes[..HEADER_LEN], &[0, 0, 0, 0, 42]);
        assert_eq!(schema_id(&bytes).unwrap(), 42);
        assert_eq!(decode::<Order>(&bytes, &schema, None).unwrap(), order);
    }

    #[test]
    fn bytes_without_the_header_and_values_that_do_not_fit_are_errors() {
        let schema = Schema::parse_str(V1).unwrap();
        assert!(matches!(
            schema_id(&[1, 0, 0, 0, 1, 2]),
            Err(WireError::NoHeader)
        ));
        assert!(matches!(schema_id(&[0, 0, 1]), Err(WireError::NoHeader)));
        assert!(matches!(
            encode(1, &schema, &"text"),
            Err(WireError::Avro(_))
        ));
        assert!(matches!(
            decode::<Order>(&[0, 0, 0, 0, 1], &schema, None),
            Err(WireError::Avro(_))
        ));
    }
}
