//! Trace context in record headers: the span a record was produced in, carried to the span
//! that handles it.
//!
//! # What happens
//! **Produce.** A record produced by one of the single-record produce methods of
//! [`AsyncNanoKafka`](crate::AsyncNanoKafka) ([`produce`](crate::AsyncNanoKafka::produce),
//! [`produce_keyed`](crate::AsyncNanoKafka::produce_keyed),
//! [`produce_raw`](crate::AsyncNanoKafka::produce_raw),
//! [`produce_with_headers`](crate::AsyncNanoKafka::produce_with_headers),
//! [`produce_raw_with_headers`](crate::AsyncNanoKafka::produce_raw_with_headers)) or of the
//! blocking [`NanoKafka`](crate::NanoKafka), which wraps them, while a `tracing` span is
//! current gets one more header naming that span (the format is below). The header is added
//! where the record is laid out, before the produce picks its route, so the broker's direct
//! route, the route through the broker actor and the Kafka backend all store it. A caller's
//! own header under one of this module's keys wins: nothing is added then, so a record that
//! is forwarded keeps its original context. Outside any span nothing is added, and the
//! produce allocates nothing more than it would without this module.
//!
//! The span is the one current where the produce runs: for the blocking handle the caller's
//! thread; for the async handle, where its future is first polled, so an async caller awaits
//! the produce inside the span or instruments the future
//! (`bus.produce(..).instrument(span)`); a future spawned elsewhere does not inherit the span
//! that was current when it was created.
//!
//! Not injected: [`produce_batch`](crate::AsyncNanoKafka::produce_batch) and
//! [`produce_batch_raw`](crate::AsyncNanoKafka::produce_batch_raw) store the records as the
//! caller laid them out (add [`current_headers`] to a record's headers there), and
//! [`produce_kafka_batch`](crate::AsyncNanoKafka::produce_kafka_batch) stores a Kafka
//! client's batch byte for byte (the client writes its own `traceparent`).
//!
//! **Handle.** [`Record::handler_span`] and [`Delivered::handler_span`] create the
//! `nanokafka.handle` span a subscriber handles a record or a pushed batch in, already linked
//! to the producers' spans; [`link`] links any span to the context in a record's headers.
//!
//! # The headers
//! - Without the `otel` feature: [`SPAN_HEADER`] (`nanokafka-span`), the producer's `tracing`
//!   span within this process (see [`SPAN_HEADER`] for the format). The handler's span
//!   *follows from* it (`Span::follows_from`): a `tracing` layer sees
//!   `on_follows_from(handler, producer)`. Linking is best effort: a `tracing` registry reuses
//!   the id of a closed span, so a record handled after its producer's span closed may be
//!   linked to whichever span has that id now, or to none; the same holds when the producer
//!   and the handler run under two different subscribers of one process. A header written by
//!   another process, or by this program before a restart, names another process's spans: it
//!   is recognised by its process nonce and ignored.
//! - With the `otel` feature, and an OpenTelemetry layer (`tracing_opentelemetry`) on the
//!   producer's subscriber: W3C Trace Context, [`TRACEPARENT_HEADER`] (and
//!   [`TRACESTATE_HEADER`] when the span's trace state is not empty), written by
//!   OpenTelemetry's `TraceContextPropagator` from the span's OpenTelemetry context. It means
//!   the same in every process and to every OpenTelemetry-aware Kafka client. A span without
//!   an OpenTelemetry context (no such layer) gets the in-process header instead. Reading, a
//!   valid `traceparent` is used first, then the in-process header.
//!
//! # Links or parent (with `otel`)
//! Following OpenTelemetry's messaging conventions, a span handling **one** record
//! ([`Record::handler_span`]) takes the producer's context as its remote parent, so it
//! continues the producer's trace; a span handling a **batch** ([`Delivered::handler_span`],
//! and any span given to [`link`]) keeps its own trace and gets one span link per distinct
//! producer context of its records.
//!
//! # On the Kafka backend
//! Headers travel through Kafka unchanged, so the same code works there. Only `traceparent`
//! means anything to another process, though: a record produced by one process and handled by
//! another is linked only with the `otel` feature on both sides (the in-process header is
//! ignored there, as it names the producer process's spans).
//!
//! # Example
//! ```
//! use nanokafka::messages::{Ack, Delivered};
//! use nanokafka::{NanoKafka, TopicConfig};
//!
//! // The subscriber actor's `Handler<Delivered<String>>` body:
//! fn handle(batch: Delivered<String>) -> Ack {
//!     let _span = batch.handler_span().entered(); // follows from each producer's span
//!     for record in &batch.records {
//!         tracing::info!(order = %record.value, "handled");
//!     }
//!     Ack::Commit
//! }
//!
//! # fn main() -> nanokafka::Result<()> {
//! # let dir = tempfile::tempdir().unwrap();
//! let broker = NanoKafka::open(dir.path())?;
//! broker.create_topic("orders", TopicConfig::default())?;
//!
//! // The producer: inside a span, the record carries that span's context.
//! let checkout = tracing::info_span!("checkout");
//! checkout.in_scope(|| broker.produce("orders", &"order-1"))?;
//!
//! // A polling consumer: one record, one span.
//! broker.join_group("orders", "billing", "worker-1")?;
//! if let Some(record) = broker.poll::<String>("orders", "billing", "worker-1")? {
//!     let _span = record.handler_span("orders").entered();
//!     tracing::info!(order = %record.value, "handled");
//! }
//! # Ok(())
//! # }
//! ```

use std::collections::HashSet;
use std::num::NonZeroU64;
use std::sync::OnceLock;

use serde::Serialize;
use tracing::Span;

use crate::error::{Error, Result};
use crate::messages::Delivered;
use crate::storage::batch::HeaderRef;
use crate::storage::RecordBatch;
use crate::types::{Header, Record};

/// The key of the in-process trace header: the producer's `tracing` span, within the process
/// that produced the record.
///
/// # Format
/// The value is ASCII: `<nonce>-<span id>`, where `<nonce>` is this process's nonce, 16
/// lowercase hex digits drawn at random once per process (so that a record read by another
/// process, or by this program after a restart, is not linked to an unrelated span), and
/// `<span id>` is the span's `tracing::Id` as lowercase hex without leading zeros (1 to 16
/// digits, never 0). For example `9f3c0a51d2e47b86-2a`. A value of any other shape, or with
/// another nonce, is ignored when read.
///
/// A `tracing` span id is unique only among the spans alive at one time (the registry
/// reuses the ids of closed spans), so the link it makes is best effort; see the
/// [module docs](self).
pub const SPAN_HEADER: &str = "nanokafka-span";

/// The W3C Trace Context header (`version-traceid-spanid-flags`, e.g.
/// `00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01`), written and read with the
/// `otel` feature.
pub const TRACEPARENT_HEADER: &str = "traceparent";

/// The W3C Trace Context vendor-specific trace state, written with the `otel` feature beside
/// [`TRACEPARENT_HEADER`] when the span's trace state is not empty.
pub const TRACESTATE_HEADER: &str = "tracestate";

/// The length of an in-process header's value at most: 16 + `-` + 16.
const SPAN_VALUE_MAX: usize = 33;

/// The headers this module writes, for the current span.
enum Injected {
    /// No span is current, or the caller already set a trace header.
    Nothing,
    /// [`SPAN_HEADER`]'s value, in `bytes[..len]`.
    Span {
        bytes: [u8; SPAN_VALUE_MAX],
        len: usize,
    },
    /// `traceparent` and, when not empty, `tracestate`.
    #[cfg(feature = "otel")]
    Otel {
        traceparent: String,
        tracestate: Option<String>,
    },
}

impl Injected {
    /// The trace headers for a record produced now with `caller`'s headers.
    fn current(caller: &[Header]) -> Injected {
        let Some(id) = current_span_id() else {
            return Injected::Nothing;
        };
        if caller.iter().any(|h| is_trace_key(&h.key)) {
            return Injected::Nothing;
        }
        #[cfg(feature = "otel")]
        if let Some((traceparent, tracestate)) = otel::current_headers() {
            return Injected::Otel {
                traceparent,
                tracestate,
            };
        }
        let (bytes, len) = span_value(id);
        Injected::Span { bytes, len }
    }

    /// Writes the headers into `out` and returns how many.
    fn refs<'a>(&'a self, out: &mut [HeaderRef<'a>; 2]) -> usize {
        match self {
            Injected::Nothing => 0,
            Injected::Span { bytes, len } => {
                out[0] = (SPAN_HEADER.as_bytes(), Some(&bytes[..*len]));
                1
            }
            #[cfg(feature = "otel")]
            Injected::Otel {
                traceparent,
                tracestate,
            } => {
                out[0] = (TRACEPARENT_HEADER.as_bytes(), Some(traceparent.as_bytes()));
                match tracestate {
                    Some(state) => {
                        out[1] = (TRACESTATE_HEADER.as_bytes(), Some(state.as_bytes()));
                        2
                    }
                    None => 1,
                }
            }
        }
    }
}

/// Whether `key` is one of the headers this module writes (Kafka header keys are
/// case-sensitive, but HTTP's, where `traceparent` comes from, are not).
fn is_trace_key(key: &str) -> bool {
    [SPAN_HEADER, TRACEPARENT_HEADER, TRACESTATE_HEADER]
        .iter()
        .any(|k| key.eq_ignore_ascii_case(k))
}

/// The id of the span current on this thread, without cloning a `Span` handle (this runs on
/// every produce).
fn current_span_id() -> Option<NonZeroU64> {
    tracing::dispatcher::get_default(|dispatch| {
        dispatch
            .current_span()
            .id()
            .map(tracing::Id::into_non_zero_u64)
    })
}

/// Calls `f` with `caller`'s headers and the trace headers of the current span, borrowed as
/// the storage layer writes them. With no caller headers and no span, `f` gets an empty
/// slice and nothing is allocated.
fn with_headers<R>(caller: &[Header], f: impl FnOnce(&[HeaderRef<'_>]) -> R) -> R {
    let injected = Injected::current(caller);
    let mut extra: [HeaderRef<'_>; 2] = [(&[], None); 2];
    let added = injected.refs(&mut extra);
    if caller.is_empty() {
        return f(&extra[..added]);
    }
    let mut refs: Vec<HeaderRef<'_>> = Vec::with_capacity(caller.len() + added);
    refs.extend(
        caller
            .iter()
            .map(|h| (h.key.as_bytes(), h.value.as_deref())),
    );
    refs.extend_from_slice(&extra[..added]);
    f(&refs)
}

/// Adds a typed record (MessagePack, as [`RecordBatch::push`]) with `headers` and the current
/// span's trace headers.
///
/// # Errors
/// `Encode`; the batch is then unchanged.
pub(crate) fn push_typed<T: Serialize + ?Sized>(
    batch: &mut RecordBatch,
    key: Option<&[u8]>,
    value: &T,
    headers: &[Header],
) -> Result<()> {
    with_headers(headers, |refs| {
        batch.push_with(key, refs, |buf| rmp_serde::encode::write_named(buf, value))
    })
    .map_err(|e| Error::Encode(std::sync::Arc::new(e)))
}

/// Adds a record of raw bytes with `headers` and the current span's trace headers.
pub(crate) fn push_raw(
    batch: &mut RecordBatch,
    key: Option<&[u8]>,
    value: &[u8],
    headers: &[Header],
) {
    with_headers(headers, |refs| batch.push_header_refs(key, value, refs));
}

/// The trace headers a record produced now would get: the current span's context as
/// described in the [module docs](self), or nothing outside a span. For the batch produces,
/// which do not add them: push a record with `current_headers()` among its headers.
///
/// ```
/// let span = tracing::info_span!("import");
/// let headers = span.in_scope(nanokafka::trace::current_headers);
/// // Empty here: no subscriber is installed, so the span is disabled.
/// assert!(headers.is_empty());
/// ```
pub fn current_headers() -> Vec<Header> {
    let injected = Injected::current(&[]);
    let mut refs: [HeaderRef<'_>; 2] = [(&[], None); 2];
    let n = injected.refs(&mut refs);
    refs[..n]
        .iter()
        .map(|(key, value)| Header {
            key: String::from_utf8_lossy(key).into_owned(),
            value: value.map(<[u8]>::to_vec),
        })
        .collect()
}

// ---- the in-process header ----

/// This process's nonce, as 16 lowercase hex digits.
fn process_nonce() -> &'static [u8; 16] {
    static NONCE: OnceLock<[u8; 16]> = OnceLock::new();
    NONCE.get_or_init(|| hex16(random_u64()))
}

/// 64 random bits without a dependency: std's `RandomState` keys its hasher from the
/// operating system's random source; the process id and the clock are mixed in as well.
fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    hasher.write_u128(now.map_or(0, |d| d.as_nanos()));
    hasher.finish()
}

fn hex16(n: u64) -> [u8; 16] {
    let mut out = [0; 16];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = b"0123456789abcdef"[((n >> (60 - 4 * i)) & 0xf) as usize];
    }
    out
}

/// [`SPAN_HEADER`]'s value for span `id`, in a fixed buffer (no allocation on the produce
/// path).
fn span_value(id: NonZeroU64) -> ([u8; SPAN_VALUE_MAX], usize) {
    let mut bytes = [0; SPAN_VALUE_MAX];
    bytes[..16].copy_from_slice(process_nonce());
    bytes[16] = b'-';
    let hex = hex16(id.get());
    let digits = 16 - (id.get().leading_zeros() as usize / 4);
    bytes[17..17 + digits].copy_from_slice(&hex[16 - digits..]);
    (bytes, 17 + digits)
}

/// The span a [`SPAN_HEADER`] value names, if it was written by this process and is well
/// formed.
fn parse_span_value(value: &[u8]) -> Option<NonZeroU64> {
    let (nonce, rest) = value.split_at_checked(16)?;
    let id = rest.strip_prefix(b"-")?;
    if nonce != process_nonce() || id.is_empty() || id.len() > 16 {
        return None;
    }
    // Checked by hand: `from_str_radix` would also take a leading `+` or uppercase.
    if !id.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    let id = u64::from_str_radix(std::str::from_utf8(id).ok()?, 16).ok()?;
    NonZeroU64::new(id)
}

/// The first value of header `key` (a null value counts as absent).
fn header_value<'a>(headers: &'a [Header], key: &str) -> Option<&'a [u8]> {
    headers
        .iter()
        .find(|h| h.key == key)
        .and_then(|h| h.value.as_deref())
}

/// The producer span a record's [`SPAN_HEADER`] names, when this process wrote it: the id
/// the span had (it may since have closed, and the id be reused; see [`SPAN_HEADER`]).
/// `None` without the header, or with one from another process or malformed.
///
/// ```
/// use nanokafka::{trace, Header};
/// let foreign = [Header::new(trace::SPAN_HEADER, "0123456789abcdef-2a")];
/// assert_eq!(trace::producer_span(&foreign), None);
/// ```
pub fn producer_span(headers: &[Header]) -> Option<tracing::Id> {
    header_value(headers, SPAN_HEADER)
        .and_then(parse_span_value)
        .map(tracing::Id::from_non_zero_u64)
}

// ---- linking ----

/// A producer's context read from a record's headers.
#[derive(Clone, PartialEq, Eq, Hash)]
enum Producer {
    Span(tracing::Id),
    #[cfg(feature = "otel")]
    Otel(opentelemetry::trace::SpanContext),
}

impl Producer {
    /// A valid `traceparent` first (with `otel`), then this process's span header.
    fn read(headers: &[Header]) -> Option<Producer> {
        #[cfg(feature = "otel")]
        if let Some(context) = otel::remote_context(headers) {
            return Some(Producer::Otel(context));
        }
        producer_span(headers).map(Producer::Span)
    }

    /// Links `span` to this producer: follows-from, or an OpenTelemetry span link.
    fn link(self, span: &Span) {
        match self {
            Producer::Span(id) => {
                span.follows_from(id);
            }
            #[cfg(feature = "otel")]
            Producer::Otel(context) => {
                use tracing_opentelemetry::OpenTelemetrySpanExt;
                span.add_link(context);
            }
        }
    }

    /// Makes this producer the parent of `span` (with `otel`: a remote parent, so `span`
    /// continues the producer's trace; without it, follows-from, as `tracing` has no remote
    /// parents). Call before `span` is entered.
    fn adopt(self, span: &Span) {
        match self {
            #[cfg(feature = "otel")]
            Producer::Otel(context) => {
                use opentelemetry::trace::TraceContextExt;
                use tracing_opentelemetry::OpenTelemetrySpanExt;
                let parent = opentelemetry::Context::new().with_remote_span_context(context);
                // Fails only without an OpenTelemetry layer, where there is nothing to link.
                let _ = span.set_parent(parent);
            }
            other => other.link(span),
        }
    }
}

/// Links `span` to the producer context in a record's `headers`: `span` follows from the
/// producer's span (in-process header), or, with the `otel` feature, gets an OpenTelemetry
/// span link to the `traceparent`'s span. Call it before `span` is entered (an
/// OpenTelemetry link added later may not be exported).
///
/// Returns whether the headers carried a context this process can link to (the link is
/// made only where `span` is enabled). Headers from another process without `otel`, and
/// malformed ones, are ignored.
///
/// ```
/// use nanokafka::{trace, Header};
/// let span = tracing::info_span!("handle");
/// assert!(!trace::link(&span, &[Header::new("traceparent", "garbage")]));
/// ```
pub fn link(span: &Span, headers: &[Header]) -> bool {
    match Producer::read(headers) {
        Some(producer) => {
            producer.link(span);
            true
        }
        None => false,
    }
}

impl<T> Record<T> {
    /// A `nanokafka.handle` span (INFO) to handle this record in, linked to the span it was
    /// produced in: it follows from it, or with `otel` has it as remote parent (see the
    /// [module docs](crate::trace)). Its fields follow OpenTelemetry's messaging conventions
    /// (`messaging.destination.name` is `topic`, the partition and offset are this
    /// record's). Enter it: `let _span = record.handler_span("orders").entered();`.
    pub fn handler_span(&self, topic: &str) -> Span {
        let span = tracing::info_span!(
            "nanokafka.handle",
            otel.kind = "consumer",
            messaging.system = "kafka",
            messaging.operation.type = "process",
            messaging.destination.name = topic,
            messaging.destination.partition.id = self.partition,
            messaging.kafka.offset = self.offset,
        );
        if span.is_disabled() {
            return span;
        }
        if let Some(producer) = Producer::read(&self.headers) {
            producer.adopt(&span);
        }
        span
    }
}

impl<T> Delivered<T> {
    /// A `nanokafka.handle` span (INFO) to handle this pushed batch in, linked to the span
    /// each record was produced in (once per distinct producer): it follows from them, or
    /// with `otel` has a span link to each (see the [module docs](crate::trace)). Its fields
    /// follow OpenTelemetry's messaging conventions: topic, group, partition, the batch's
    /// first offset and record count.
    ///
    /// In the subscriber's handler: `let _span = batch.handler_span().entered();`.
    pub fn handler_span(&self) -> Span {
        let first = self.records.first();
        let span = tracing::info_span!(
            "nanokafka.handle",
            otel.kind = "consumer",
            messaging.system = "kafka",
            messaging.operation.type = "process",
            messaging.destination.name = %self.topic,
            messaging.consumer.group.name = %self.group,
            messaging.destination.partition.id = first.map(|r| r.partition),
            messaging.kafka.offset = first.map(|r| r.offset),
            messaging.batch.message_count = self.records.len(),
        );
        if span.is_disabled() {
            return span;
        }
        let mut seen = HashSet::new();
        for producer in self
            .records
            .iter()
            .filter_map(|r| Producer::read(&r.headers))
        {
            if seen.insert(producer.clone()) {
                producer.link(&span);
            }
        }
        span
    }
}

// ---- OpenTelemetry ----

#[cfg(feature = "otel")]
mod otel {
    use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
    use opentelemetry::trace::{SpanContext, TraceContextExt};
    use opentelemetry_sdk::propagation::TraceContextPropagator;
    use tracing_opentelemetry::OpenTelemetrySpanExt;

    use super::{header_value, TRACEPARENT_HEADER, TRACESTATE_HEADER};
    use crate::types::Header;

    /// `traceparent` and a non-empty `tracestate` of the current span's OpenTelemetry
    /// context; `None` when it has none (no OpenTelemetry layer).
    pub(super) fn current_headers() -> Option<(String, Option<String>)> {
        let context = tracing::Span::current().context();
        if !context.span().span_context().is_valid() {
            return None;
        }
        let mut out = Written::default();
        TraceContextPropagator::new().inject_context(&context, &mut out);
        Some((out.traceparent?, out.tracestate.filter(|s| !s.is_empty())))
    }

    #[derive(Default)]
    struct Written {
        traceparent: Option<String>,
        tracestate: Option<String>,
    }

    impl Injector for Written {
        fn set(&mut self, key: &str, value: String) {
            match key {
                TRACEPARENT_HEADER => self.traceparent = Some(value),
                TRACESTATE_HEADER => self.tracestate = Some(value),
                _ => {}
            }
        }
    }

    /// A record's headers as the propagator reads them: the first UTF-8 value of a key.
    struct Headers<'a>(&'a [Header]);

    impl Extractor for Headers<'_> {
        fn get(&self, key: &str) -> Option<&str> {
            header_value(self.0, key).and_then(|v| std::str::from_utf8(v).ok())
        }

        fn keys(&self) -> Vec<&str> {
            self.0.iter().map(|h| h.key.as_str()).collect()
        }
    }

    /// The valid remote span context of a record's `traceparent` (and `tracestate`).
    pub(super) fn remote_context(headers: &[Header]) -> Option<SpanContext> {
        header_value(headers, TRACEPARENT_HEADER)?;
        let context = TraceContextPropagator::new().extract(&Headers(headers));
        let span = context.span();
        let span_context = span.span_context();
        span_context.is_valid().then(|| span_context.clone())
    }
}

/// The OpenTelemetry span context a record's [`TRACEPARENT_HEADER`] (and
/// [`TRACESTATE_HEADER`]) carry, parsed by OpenTelemetry's `TraceContextPropagator` (`otel`
/// feature). `None` without a `traceparent`, or with an invalid one.
#[cfg(feature = "otel")]
pub fn producer_context(headers: &[Header]) -> Option<opentelemetry::trace::SpanContext> {
    otel::remote_context(headers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn span_value_round_trips_and_rejects_others() {
        for id in [1, 0x2a, u64::MAX, 1 << 60] {
            let id = NonZeroU64::new(id).unwrap();
            let (bytes, len) = span_value(id);
            assert_eq!(parse_span_value(&bytes[..len]), Some(id));
        }
        let nonce = std::str::from_utf8(process_nonce()).unwrap();
        for bad in [
            String::new(),
            nonce.to_owned(),
            format!("{nonce}-"),
            format!("{nonce}-0"),
            format!("{nonce}-+1"),
            format!("{nonce}-2A"),
            format!("{nonce}-12345678901234567"),
            format!("{nonce}_1"),
            format!("{}-1", "0".repeat(16)),
        ] {
            assert_eq!(parse_span_value(bad.as_bytes()), None, "{bad:?}");
        }
        assert_eq!(parse_span_value(&[0xff; 20]), None);
    }

    #[test]
    fn span_value_is_the_documented_format() {
        let (bytes, len) = span_value(NonZeroU64::new(0x2a).unwrap());
        let value = std::str::from_utf8(&bytes[..len]).unwrap();
        let (nonce, id) = value.split_once('-').unwrap();
        assert_eq!(nonce.len(), 16);
        assert!(nonce
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
        assert_eq!(id, "2a");
    }
}
