//! [`TableKey`]: how a table's keys become a record's key bytes and back.

/// A key of a [`crate::Table`]: the bytes of a record's key, as a type. Kafka's tools and
/// clients mostly use UTF-8 strings, so `String` reads the keys they write; `Vec<u8>` reads
/// any key. A record whose key is not a `K` (a `String` table reading a key that is not
/// UTF-8) is skipped and counted ([`crate::Table::skipped`]).
pub trait TableKey: Clone + Ord + Send + Sync + 'static {
    /// The record key's bytes.
    fn to_key_bytes(&self) -> Vec<u8>;
    /// The key these bytes are, or `None` when they are no `Self`.
    fn from_key_bytes(bytes: &[u8]) -> Option<Self>;
}

impl TableKey for String {
    fn to_key_bytes(&self) -> Vec<u8> {
        self.as_bytes().to_vec()
    }

    fn from_key_bytes(bytes: &[u8]) -> Option<Self> {
        std::str::from_utf8(bytes).ok().map(str::to_owned)
    }
}

impl TableKey for Vec<u8> {
    fn to_key_bytes(&self) -> Vec<u8> {
        self.clone()
    }

    fn from_key_bytes(bytes: &[u8]) -> Option<Self> {
        Some(bytes.to_vec())
    }
}
