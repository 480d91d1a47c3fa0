//! Record validation against the schema registry, as Confluent Server's broker does it: a
//! topic with `confluent.value.schema.validation` (or `confluent.key.schema.validation`) on
//! takes through this listener only records whose value (key) is in Confluent's framing and
//! decodes with the schema it names:
//!
//! | bytes | what |
//! | --- | --- |
//! | 0 | magic byte, 0 |
//! | 1..5 | the schema id, big-endian, one the registry has under the topic's subject |
//! | 5.. | the payload, one whole value of that schema (`ParsedSchema::check_payload`) |
//!
//! The subject is the topic's under Confluent's default `TopicNameStrategy`: `<topic>-value`
//! for values, `<topic>-key` for keys; the id must be a version of it (soft-deleted versions
//! count). A null value (a tombstone) or null key passes. Every batch of the partition is
//! checked before any is appended: one failing record refuses the partition's records whole
//! (`INVALID_RECORD`, one `record_errors` entry per failing record). Schemas are looked up
//! in the broker's `SchemaStore` (never through the REST API) and parsed once per id.
//!
//! Only the Kafka listener checks: the embedded API is trusted, as it is by the ACLs. Without
//! the `schema-registry` feature no topic can have validation on (setting it is refused), and
//! a stored config that has it (from a build with the registry) is not enforced.

pub(super) use enabled::Checks;

/// Why a partition's records were refused: Kafka's error, its message, and the records it
/// names (`record_errors`: the index in the batch, and why).
#[derive(Debug)]
pub(super) struct Refusal {
    pub error: kafka_protocol::ResponseError,
    pub message: String,
    pub records: Vec<(u32, String)>,
}

#[cfg(feature = "schema-registry")]
mod enabled {
    use std::collections::{HashMap, HashSet};
    use std::sync::Arc;

    use bytes::Bytes;
    use kafka_protocol::ResponseError;

    use super::super::request::RequestContext;
    use super::Refusal;
    use crate::async_handle::SchemaStore;
    use crate::schemas::ParsedSchema;
    use crate::storage::format::{self, Decoded, MAX_DECOMPRESSED_BYTES};

    /// Confluent's framing: the magic byte, then the 4-byte schema id.
    const MAGIC_BYTE: u8 = 0;
    const HEADER_LEN: usize = 5;

    /// Which part of a record is checked.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    enum Part {
        Key,
        Value,
    }

    impl Part {
        fn name(self) -> &'static str {
            match self {
                Part::Key => "key",
                Part::Value => "value",
            }
        }

        /// The part's subject for `topic` under Confluent's `TopicNameStrategy`.
        fn subject(self, topic: &str) -> String {
            format!("{topic}-{}", self.name())
        }
    }

    /// A framed part, read before anything is looked up.
    struct Framed {
        record: u32,
        part: Part,
        id: u32,
        payload: Vec<u8>,
    }

    /// The checks a Produce request's topics ask for: the parts each topic with validation
    /// on checks (read from each topic's cached route, and not at all on a broker without
    /// schemas).
    pub(in crate::listener) struct Checks<'a> {
        store: Option<&'a Arc<SchemaStore>>,
        topics: HashMap<String, Vec<Part>>,
    }

    impl<'a> Checks<'a> {
        pub async fn for_topics(
            ctx: &RequestContext<'a>,
            topics: impl IntoIterator<Item = &str>,
        ) -> Checks<'a> {
            let store = ctx.broker.schema_store();
            let mut checked = HashMap::new();
            if store.is_some() {
                for topic in topics {
                    if checked.contains_key(topic) {
                        continue;
                    }
                    // An unknown topic is the append's to answer.
                    let Ok(validation) = ctx.broker.schema_validation(topic).await else {
                        continue;
                    };
                    let mut parts = Vec::new();
                    if validation.key {
                        parts.push(Part::Key);
                    }
                    if validation.value {
                        parts.push(Part::Value);
                    }
                    checked.insert(topic.to_owned(), parts);
                }
            }
            Checks {
                store,
                topics: checked,
            }
        }

        /// Checks the records of `batches`, bound for `topic`'s `partition`, when the topic
        /// has validation on.
        ///
        /// # Errors
        /// `INVALID_RECORD` naming each record that fails and why; `CORRUPT_MESSAGE` for a
        /// batch whose records cannot be read; `UNKNOWN_SERVER_ERROR` when the registry's
        /// topic cannot be read.
        pub async fn check(
            &self,
            topic: &str,
            partition: u32,
            batches: &[Bytes],
        ) -> Result<(), Refusal> {
            match (self.store, self.topics.get(topic)) {
                (Some(store), Some(parts)) if !parts.is_empty() => {
                    check(store, parts, (topic, partition), batches).await
                }
                _ => Ok(()),
            }
        }
    }

    async fn check(
        store: &SchemaStore,
        parts: &[Part],
        (topic, partition): (&str, u32),
        batches: &[Bytes],
    ) -> Result<(), Refusal> {
        let mut failed = Vec::new();
        let mut framed = Vec::new();
        for batch in batches {
            read_batch(batch, parts, &mut framed, &mut failed)?;
        }
        let mut schemas: HashMap<u32, Option<Arc<ParsedSchema>>> = HashMap::new();
        let subjects = HashMap::from([Part::Key, Part::Value].map(|p| (p, p.subject(topic))));
        // The (id, part)s found under their subject in this request.
        let mut registered = HashSet::new();
        let unreadable = |e: crate::schemas::RegistryError| Refusal {
            error: ResponseError::UnknownServerError,
            message: format!("the schema registry cannot be read: {}", e.message),
            records: Vec::new(),
        };
        for Framed {
            record,
            part,
            id,
            payload,
        } in framed
        {
            let schema = match schemas.get(&id) {
                Some(schema) => schema.clone(),
                None => {
                    let found = store.schema_by_id(id).await.map_err(unreadable)?;
                    schemas.insert(id, found.clone());
                    found
                }
            };
            let why = match schema {
                None => format!("unknown schema id {id}"),
                Some(schema) => {
                    let subject = &subjects[&part];
                    let under = registered.contains(&(id, part))
                        || store
                            .registered_under(id, subject)
                            .await
                            .map_err(unreadable)?;
                    if !under {
                        format!("schema id {id} is not registered under the subject {subject}")
                    } else {
                        registered.insert((id, part));
                        match schema.check_payload(&payload) {
                            Ok(()) => continue,
                            Err(e) => format!("does not decode with schema id {id}: {e}"),
                        }
                    }
                }
            };
            failed.push((
                record,
                format!("record {record}: the {}: {why}", part.name()),
            ));
        }
        if failed.is_empty() {
            return Ok(());
        }
        failed.sort_by_key(|(record, _)| *record);
        let message = format!(
            "{} record(s) for {topic}-{partition} fail schema validation; first, {}",
            failed.len(),
            failed[0].1
        );
        Err(Refusal {
            error: ResponseError::InvalidRecord,
            message,
            records: failed,
        })
    }

    /// Adds the framed `parts` of `batch`'s records to `framed`, and those not framed to
    /// `failed`.
    fn read_batch(
        batch: &[u8],
        parts: &[Part],
        framed: &mut Vec<Framed>,
        failed: &mut Vec<(u32, String)>,
    ) -> Result<(), Refusal> {
        let corrupt = |why: String| Refusal {
            error: ResponseError::CorruptMessage,
            message: why,
            records: Vec::new(),
        };
        let header = match format::decode(batch) {
            Decoded::Batch(header) => header,
            Decoded::Incomplete { .. } => return Err(corrupt("a truncated batch".to_owned())),
            Decoded::Invalid { reason } => return Err(corrupt(reason)),
        };
        let mut scratch = Vec::new();
        let section = format::records_section(batch, &header, MAX_DECOMPRESSED_BYTES, &mut scratch)
            .map_err(corrupt)?;
        let mut record = 0u32;
        format::walk_records(section, &header, 0..header.records_count, |r, _| {
            for &part in parts {
                let bytes = match part {
                    Part::Key => r.key,
                    Part::Value => r.value,
                };
                let Some(bytes) = bytes else { continue };
                match frame(bytes) {
                    Ok((id, payload)) => framed.push(Framed {
                        record,
                        part,
                        id,
                        payload: payload.to_vec(),
                    }),
                    Err(why) => failed.push((
                        record,
                        format!("record {record}: the {}: {why}", part.name()),
                    )),
                }
            }
            record += 1;
            true
        })
        .map_err(corrupt)
    }

    /// The schema id and payload of Confluent-framed `bytes`.
    fn frame(bytes: &[u8]) -> Result<(u32, &[u8]), &'static str> {
        match bytes {
            [MAGIC_BYTE, id @ ..] if id.len() >= HEADER_LEN - 1 => {
                let id = u32::from_be_bytes([id[0], id[1], id[2], id[3]]);
                Ok((id, &bytes[HEADER_LEN..]))
            }
            [MAGIC_BYTE, ..] => Err("shorter than the 5 bytes of magic byte and schema id"),
            _ => Err("no magic byte (Confluent's framing: byte 0, then a 4-byte schema id)"),
        }
    }

    #[cfg(test)]
    mod tests {
        use super::frame;

        #[test]
        fn framing_is_magic_byte_then_a_big_endian_id() {
            assert_eq!(frame(&[0, 0, 0, 1, 2, 9]), Ok((258, &[9u8][..])));
            assert_eq!(frame(&[0, 0, 0, 0, 7]), Ok((7, &[][..])));
            assert!(frame(&[0, 0, 0, 7]).unwrap_err().contains("shorter"));
            assert!(frame(&[1, 0, 0, 0, 7])
                .unwrap_err()
                .contains("no magic byte"));
            assert!(frame(&[]).unwrap_err().contains("no magic byte"));
        }
    }
}

#[cfg(not(feature = "schema-registry"))]
mod enabled {
    use bytes::Bytes;

    use super::super::request::RequestContext;
    use super::Refusal;

    /// Nothing to check against: no topic can turn validation on in this build.
    pub(in crate::listener) struct Checks<'a>(std::marker::PhantomData<&'a ()>);

    impl<'a> Checks<'a> {
        #[allow(clippy::unused_async)]
        pub async fn for_topics(
            _: &RequestContext<'a>,
            _: impl IntoIterator<Item = &str>,
        ) -> Checks<'a> {
            Checks(std::marker::PhantomData)
        }

        #[allow(clippy::unused_async)]
        pub async fn check(&self, _: &str, _: u32, _: &[Bytes]) -> Result<(), Refusal> {
            Ok(())
        }
    }
}
