//! librdkafka plumbing shared by export and import: client configs, errors with context,
//! metadata, watermarks, and a record's headers read as bytes.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::bindings as rdsys;
use rdkafka::client::{Client, ClientContext};
use rdkafka::message::BorrowedMessage;
use rdkafka::ClientConfig;

use crate::error::{Error, Result};

/// A client config for `bootstrap` with the caller's settings on top of `own` (settings the
/// transfer needs but a caller may change), then `forced` (settings it cannot work without).
pub fn config(
    bootstrap: &str,
    own: &[(&str, &str)],
    settings: &[(String, String)],
    forced: &[(&str, &str)],
) -> ClientConfig {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", bootstrap);
    for (key, value) in own {
        config.set(*key, *value);
    }
    for (key, value) in settings {
        config.set(key, value);
    }
    for (key, value) in forced {
        config.set(*key, *value);
    }
    config
}

/// `Error::Kafka` for `op`, with what it was about.
pub fn kafka_error(
    op: &'static str,
    about: impl std::fmt::Display,
) -> impl FnOnce(rdkafka::error::KafkaError) -> Error {
    move |e| Error::Kafka {
        op,
        reason: format!("{about}: {e}"),
    }
}

/// Every topic of the cluster and its partition count, internal ones (`__...`) left out.
///
/// # Errors
/// `Kafka` when the metadata cannot be had, or names a topic with an error.
pub fn topics<C: ClientContext>(
    client: &Client<C>,
    timeout: Duration,
) -> Result<BTreeMap<String, u32>> {
    let metadata = client
        .fetch_metadata(None, timeout)
        .map_err(kafka_error("metadata", "listing the cluster's topics"))?;
    let mut topics = BTreeMap::new();
    for topic in metadata.topics() {
        if topic.name().starts_with("__") {
            continue;
        }
        if let Some(error) = topic.error() {
            return Err(Error::Kafka {
                op: "metadata",
                reason: format!("topic {}: {:?}", topic.name(), error),
            });
        }
        topics.insert(topic.name().to_owned(), topic.partitions().len() as u32);
    }
    Ok(topics)
}

/// The partition's `(low, high)` watermarks: its log start and end offsets.
///
/// # Errors
/// `Kafka` naming the partition.
pub fn watermarks<C: ClientContext>(
    client: &Client<C>,
    topic: &str,
    partition: u32,
    timeout: Duration,
) -> Result<(i64, i64)> {
    client
        .fetch_watermarks(topic, partition as i32, timeout)
        .map_err(kafka_error(
            "list offsets",
            format!("{topic}[{partition}]'s start and end offsets"),
        ))
}

/// The name the cluster goes by for the export's checkpoint: its cluster id, else the
/// bootstrap address (a broker too old to report an id).
pub fn cluster_key<C: ClientContext>(
    client: &Client<C>,
    bootstrap: &str,
    timeout: Duration,
) -> String {
    client
        .fetch_cluster_id(timeout)
        .filter(|id| !id.is_empty())
        .unwrap_or_else(|| bootstrap.to_owned())
}

/// A header as stored: key bytes and an optional value.
pub type OwnedHeader = (Vec<u8>, Option<Vec<u8>>);

/// `message`'s headers in order, keys as bytes. The binding's own accessor insists on UTF-8
/// keys and panics on others, which a broker may well hold (any client can send any bytes).
pub fn headers(message: &BorrowedMessage<'_>) -> Vec<OwnedHeader> {
    let mut native: *mut rdsys::rd_kafka_headers_t = std::ptr::null_mut();
    // SAFETY: `message.ptr()` is the live message `message` borrows; the headers librdkafka
    // returns belong to it and are only read below, while `message` is borrowed.
    let found = unsafe { rdsys::rd_kafka_message_headers(message.ptr(), &mut native) };
    if found != rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR || native.is_null() {
        return Vec::new(); // RD_KAFKA_RESP_ERR__NOENT: no headers
    }
    // SAFETY: `native` is the message's header list, valid while the message is.
    let count = unsafe { rdsys::rd_kafka_header_cnt(native) };
    (0..count)
        .filter_map(|index| {
            let mut name = std::ptr::null();
            let mut value = std::ptr::null();
            let mut size = 0usize;
            // SAFETY: `index` is below the count; the out-pointers are valid locals.
            let err = unsafe {
                rdsys::rd_kafka_header_get_all(native, index, &mut name, &mut value, &mut size)
            };
            if err != rdsys::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR || name.is_null() {
                return None;
            }
            // SAFETY: librdkafka keeps a header's name NUL-terminated and its value `size`
            // bytes long (or null), owned by the header list.
            let key = unsafe { std::ffi::CStr::from_ptr(name) }
                .to_bytes()
                .to_vec();
            let value = (!value.is_null()).then(|| {
                // SAFETY: as above.
                unsafe { std::slice::from_raw_parts(value.cast::<u8>(), size) }.to_vec()
            });
            Some((key, value))
        })
        .collect()
}
