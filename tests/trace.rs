//! Trace context in record headers (`nanokafka::trace`): a record produced inside a span
//! carries it, and the span that handles the record links back to it.
//!
//! Each test installs its own subscriber for its thread (`with_default`): a registry and a
//! layer that records span names and follows-from edges. The blocking handle produces on the
//! caller's thread, and the subscription test's actors run on the thread that runs its
//! `System`, so both see that subscriber. With the `otel` feature the tests without an
//! OpenTelemetry layer still pass (a span without an OpenTelemetry context gets the
//! in-process header), and the `otel` module adds an OpenTelemetry layer that exports into
//! memory.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix::prelude::*;
use futures::channel::mpsc;
use futures::StreamExt;
use nanokafka::messages::{Ack, Delivered, SubscribeOptions};
use nanokafka::{trace, Header, NanoKafka, Record, TopicConfig};
use tracing::span::{Attributes, Id};
use tracing::{Instrument, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

const TOPIC: &str = "orders";
/// Bounds every wait; none is reached unless something is broken.
const PATIENCE: Duration = Duration::from_secs(20);

/// What the subscriber saw: each span's name, and every follows-from edge (span, follows).
#[derive(Clone, Default)]
struct Seen {
    names: Arc<Mutex<HashMap<u64, &'static str>>>,
    follows: Arc<Mutex<Vec<(u64, u64)>>>,
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Seen {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _: Context<'_, S>) {
        let name = attrs.metadata().name();
        self.names.lock().unwrap().insert(id.into_u64(), name);
    }

    fn on_follows_from(&self, span: &Id, follows: &Id, _: Context<'_, S>) {
        let edge = (span.into_u64(), follows.into_u64());
        self.follows.lock().unwrap().push(edge);
    }
}

impl Seen {
    /// The spans `span` follows from.
    fn followed_by(&self, span: &tracing::Span) -> Vec<u64> {
        let id = span.id().expect("an enabled span").into_u64();
        let follows = self.follows.lock().unwrap();
        follows
            .iter()
            .filter(|(s, _)| *s == id)
            .map(|(_, f)| *f)
            .collect()
    }

    fn name(&self, span: &tracing::Span) -> &'static str {
        let id = span.id().expect("an enabled span").into_u64();
        self.names.lock().unwrap()[&id]
    }
}

/// Runs `f` with a registry and a [`Seen`] layer as this thread's subscriber.
fn traced<R>(f: impl FnOnce(&Seen) -> R) -> R {
    let seen = Seen::default();
    let subscriber = tracing_subscriber::registry().with(seen.clone());
    tracing::subscriber::with_default(subscriber, || f(&seen))
}

fn broker() -> (tempfile::TempDir, NanoKafka) {
    let dir = tempfile::tempdir().unwrap();
    let broker = NanoKafka::open(dir.path()).unwrap();
    broker.create_topic(TOPIC, TopicConfig::default()).unwrap();
    broker.join_group(TOPIC, "g", "m").unwrap();
    (dir, broker)
}

/// Every record of the topic (one partition), in offset order.
fn read_all(broker: &NanoKafka) -> Vec<Record<Vec<u8>>> {
    broker
        .poll_batch_raw(TOPIC, "g", "m", 1000, Duration::ZERO)
        .unwrap()
}

fn id_of(span: &tracing::Span) -> u64 {
    span.id().expect("an enabled span").into_u64()
}

fn with_key<'a>(record: &'a Record<Vec<u8>>, key: &str) -> Vec<&'a Header> {
    record.headers.iter().filter(|h| h.key == key).collect()
}

#[test]
fn a_record_produced_in_a_span_names_it_and_its_handler_follows_from_it() {
    let (_dir, broker) = broker();
    traced(|seen| {
        let checkout = tracing::info_span!("checkout");
        checkout.in_scope(|| broker.produce(TOPIC, &"inside").unwrap());
        broker.produce(TOPIC, &"outside").unwrap();

        let records = read_all(&broker);
        let [inside, outside] = &records[..] else {
            panic!("two records, got {records:?}")
        };
        let header = with_key(inside, trace::SPAN_HEADER);
        assert_eq!(header.len(), 1, "{:?}", inside.headers);
        assert_eq!(inside.headers.len(), 1);
        let value = String::from_utf8(header[0].value.clone().unwrap()).unwrap();
        assert!(
            value.ends_with(&format!("-{:x}", id_of(&checkout))),
            "{value}"
        );
        assert_eq!(trace::producer_span(&inside.headers), checkout.id());
        assert!(outside.headers.is_empty(), "{:?}", outside.headers);

        let handler = inside.handler_span(TOPIC);
        assert_eq!(seen.name(&handler), "nanokafka.handle");
        assert_eq!(seen.followed_by(&handler), vec![id_of(&checkout)]);
        let unlinked = outside.handler_span(TOPIC);
        assert!(seen.followed_by(&unlinked).is_empty());
    });
}

#[test]
fn every_single_record_produce_of_both_handles_carries_the_span() {
    let (_dir, broker) = broker();
    let bus = broker.async_handle();
    traced(|_| {
        let span = tracing::info_span!("producer");
        span.in_scope(|| {
            broker.produce(TOPIC, &1u64).unwrap();
            broker.produce_keyed(TOPIC, "k", &2u64).unwrap();
            broker.produce_raw(TOPIC, None, b"3".to_vec()).unwrap();
            let own = [Header::new("app", "x")];
            broker
                .produce_with_headers(TOPIC, None, &4u64, &own)
                .unwrap();
            broker
                .produce_raw_with_headers(TOPIC, Some(b"k"), b"5", &own)
                .unwrap();
        });
        // The async handle, in a future instrumented with the span (as an actor or a task
        // would be): the span is current when the produce runs.
        System::new().block_on(
            async {
                bus.produce(TOPIC, &6u64).await.unwrap();
                bus.produce_raw(TOPIC, None, b"7".to_vec()).await.unwrap();
                bus.produce_with_headers(TOPIC, None, &8u64, &[])
                    .await
                    .unwrap();
            }
            .instrument(span.clone()),
        );

        let records = read_all(&broker);
        assert_eq!(records.len(), 8);
        for record in &records {
            assert_eq!(
                trace::producer_span(&record.headers),
                span.id(),
                "record {}: {:?}",
                record.offset,
                record.headers
            );
            assert_eq!(with_key(record, trace::SPAN_HEADER).len(), 1);
        }
        // The caller's headers come first, unchanged.
        assert_eq!(records[3].headers[0], Header::new("app", "x"));
        assert_eq!(records[4].headers[0], Header::new("app", "x"));
        assert_eq!(records[4].key.as_deref(), Some(&b"k"[..]));
        assert_eq!(records[4].value, b"5");
    });
}

#[test]
fn outside_any_span_or_without_a_subscriber_nothing_is_added() {
    let (_dir, broker) = broker();
    // No subscriber: every span is disabled.
    let disabled = tracing::info_span!("not recorded");
    disabled.in_scope(|| broker.produce(TOPIC, &1u64).unwrap());
    traced(|_| {
        broker.produce(TOPIC, &2u64).unwrap();
        let own = [Header::new("app", "x")];
        broker
            .produce_raw_with_headers(TOPIC, None, b"3", &own)
            .unwrap();
        // Entered and exited again: no longer current.
        let span = tracing::info_span!("done");
        span.in_scope(|| {});
        broker.produce(TOPIC, &4u64).unwrap();
        assert!(trace::current_headers().is_empty());
    });
    let records = read_all(&broker);
    let headers: Vec<_> = records.iter().map(|r| r.headers.clone()).collect();
    assert_eq!(
        headers,
        vec![vec![], vec![], vec![Header::new("app", "x")], vec![]]
    );
}

#[test]
fn a_callers_own_trace_header_is_kept_once() {
    let (_dir, broker) = broker();
    traced(|seen| {
        let span = tracing::info_span!("forwarder");
        let upstream = tracing::info_span!("upstream");
        // A forwarded record keeps its original context: the caller's header wins.
        let forwarded = upstream.in_scope(trace::current_headers);
        span.in_scope(|| {
            broker
                .produce_with_headers(TOPIC, None, &1u64, &forwarded)
                .unwrap();
            let traceparent = [Header::new(
                trace::TRACEPARENT_HEADER,
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            )];
            broker
                .produce_raw_with_headers(TOPIC, None, b"2", &traceparent)
                .unwrap();
        });
        let records = read_all(&broker);
        assert_eq!(records[0].headers, forwarded);
        assert_eq!(trace::producer_span(&records[0].headers), upstream.id());
        assert_eq!(records[1].headers.len(), 1, "{:?}", records[1].headers);
        assert_eq!(records[1].headers[0].key, trace::TRACEPARENT_HEADER);

        let handler = records[0].handler_span(TOPIC);
        assert_eq!(seen.followed_by(&handler), vec![id_of(&upstream)]);
    });
}

#[test]
fn a_header_from_another_process_or_malformed_is_ignored() {
    let (_dir, broker) = broker();
    traced(|seen| {
        let live = tracing::info_span!("live");
        let id = id_of(&live);
        let foreign: [&[u8]; 9] = [
            // Another process's nonce, naming a span id that is live here.
            format!("0123456789abcdef-{id:x}").leak().as_bytes(),
            b"",
            b"-",
            b"not a trace header",
            b"0123456789abcdef0123456789abcdef0123456789",
            &[0xff, 0xfe, 0x00, b'-', b'1'],
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            b"\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac-1",
            b"0123456789abcdef-0",
        ];
        for value in foreign {
            broker
                .produce_raw_with_headers(
                    TOPIC,
                    None,
                    b"v",
                    &[Header::new(trace::SPAN_HEADER, value)],
                )
                .unwrap();
        }
        broker
            .produce_raw_with_headers(TOPIC, None, b"v", &[Header::null(trace::SPAN_HEADER)])
            .unwrap();
        let bad_traceparent = Header::new(trace::TRACEPARENT_HEADER, "00-zz-zz-01");
        broker
            .produce_raw_with_headers(TOPIC, None, b"v", &[bad_traceparent])
            .unwrap();

        let records = read_all(&broker);
        assert_eq!(records.len(), foreign.len() + 2);
        for record in &records {
            assert_eq!(trace::producer_span(&record.headers), None, "{record:?}");
            let handler = record.handler_span(TOPIC);
            assert!(seen.followed_by(&handler).is_empty(), "{record:?}");
            let other = tracing::info_span!("other");
            assert!(!trace::link(&other, &record.headers));
            assert!(seen.followed_by(&other).is_empty());
        }
        let batch = Delivered {
            topic: TOPIC.to_owned(),
            group: "g".to_owned(),
            generation: 1,
            attempt: 1,
            records,
        };
        assert!(seen.followed_by(&batch.handler_span()).is_empty());
    });
}

#[test]
fn a_batch_produce_carries_the_context_the_caller_adds() {
    let (_dir, broker) = broker();
    traced(|seen| {
        let import = tracing::info_span!("import");
        import.in_scope(|| {
            let mut batch = nanokafka::RecordBatch::new();
            batch
                .push_with_headers(None, &1u64, &trace::current_headers())
                .unwrap();
            broker.produce_batch(TOPIC, None, batch).unwrap();
        });
        let records = read_all(&broker);
        let handler = tracing::info_span!("handler");
        assert!(trace::link(&handler, &records[0].headers));
        assert_eq!(seen.followed_by(&handler), vec![id_of(&import)]);
    });
}

/// A subscriber that enters its batch's handler span and reports which spans it follows.
struct Handler {
    seen: Seen,
    report: mpsc::UnboundedSender<(usize, Vec<u64>)>,
}

impl Actor for Handler {
    type Context = actix::Context<Self>;
}

impl actix::Handler<Delivered<u64>> for Handler {
    type Result = Ack;

    fn handle(&mut self, batch: Delivered<u64>, _: &mut Self::Context) -> Ack {
        let span = batch.handler_span();
        let followed = self.seen.followed_by(&span);
        let _entered = span.entered();
        let _ = self.report.unbounded_send((batch.records.len(), followed));
        Ack::Commit
    }
}

#[test]
fn a_pushed_batch_handler_span_follows_from_each_producer_once() {
    let (_dir, broker) = broker();
    let bus = broker.async_handle();
    traced(|seen| {
        let a = tracing::info_span!("a");
        let b = tracing::info_span!("b");
        a.in_scope(|| {
            broker.produce(TOPIC, &1u64).unwrap();
            broker.produce(TOPIC, &2u64).unwrap();
        });
        b.in_scope(|| broker.produce(TOPIC, &3u64).unwrap());
        broker.produce(TOPIC, &4u64).unwrap();

        let followed = System::new().block_on(async {
            let (report, mut reports) = mpsc::unbounded();
            let handler = Handler {
                seen: seen.clone(),
                report,
            }
            .start();
            let options = SubscribeOptions {
                max_batch: 100,
                poll_wait: Duration::from_millis(200),
                ..SubscribeOptions::default()
            };
            let _sub = bus
                .subscribe(TOPIC, "pushed", "m", handler.recipient(), options)
                .await
                .unwrap();
            let (mut records, mut followed) = (0, Vec::new());
            while records < 4 {
                let (n, f) = actix_rt::time::timeout(PATIENCE, reports.next())
                    .await
                    .expect("a batch within the patience bound")
                    .expect("the handler is alive");
                records += n;
                followed.push(f);
            }
            followed
        });
        // However the records were split into batches, each batch's span follows from each
        // producer of its records once, and together they cover both producers.
        for f in &followed {
            let mut sorted = f.clone();
            sorted.dedup();
            assert_eq!(sorted.len(), f.len(), "a producer linked twice: {f:?}");
        }
        let mut all: Vec<u64> = followed.concat();
        all.sort_unstable();
        all.dedup();
        let mut expected = vec![id_of(&a), id_of(&b)];
        expected.sort_unstable();
        assert_eq!(all, expected);
    });
}

#[cfg(feature = "otel")]
mod otel {
    //! With an OpenTelemetry layer: W3C `traceparent` headers and OpenTelemetry links.

    use std::future::Future;

    use opentelemetry::trace::{
        SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState, TracerProvider,
    };
    use opentelemetry_sdk::error::OTelSdkResult;
    use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
    use tracing_opentelemetry::OpenTelemetrySpanExt;

    use super::*;

    /// Finished spans, kept in memory.
    #[derive(Clone, Debug, Default)]
    struct Memory(Arc<Mutex<Vec<SpanData>>>);

    impl SpanExporter for Memory {
        fn export(&self, batch: Vec<SpanData>) -> impl Future<Output = OTelSdkResult> + Send {
            self.0.lock().unwrap().extend(batch);
            std::future::ready(Ok(()))
        }
    }

    impl Memory {
        fn named(&self, name: &str) -> Vec<SpanData> {
            let spans = self.0.lock().unwrap();
            spans.iter().filter(|s| s.name == name).cloned().collect()
        }
    }

    /// Runs `f` with a registry, an OpenTelemetry layer exporting into memory (each span as
    /// it ends) and a [`Seen`] layer.
    fn otel_traced<R>(f: impl FnOnce(&Memory, &Seen) -> R) -> R {
        let memory = Memory::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(memory.clone())
            .build();
        let seen = Seen::default();
        let subscriber = tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")))
            .with(seen.clone());
        tracing::subscriber::with_default(subscriber, || f(&memory, &seen))
    }

    fn context_of(span: &tracing::Span) -> SpanContext {
        span.context().span().span_context().clone()
    }

    #[test]
    fn the_header_is_a_traceparent_of_the_producer_span_and_the_handler_continues_its_trace() {
        let (_dir, broker) = broker();
        otel_traced(|memory, seen| {
            let checkout = tracing::info_span!("checkout");
            checkout.in_scope(|| broker.produce(TOPIC, &1u64).unwrap());
            let producer = context_of(&checkout);
            assert!(producer.is_valid());

            let records = read_all(&broker);
            let record = &records[0];
            let expected = format!(
                "00-{}-{}-{:02x}",
                producer.trace_id(),
                producer.span_id(),
                producer.trace_flags().to_u8()
            );
            assert_eq!(
                record.headers,
                vec![Header::new(trace::TRACEPARENT_HEADER, expected)],
                "one traceparent, no tracestate (empty) and no in-process header"
            );
            let read = trace::producer_context(&record.headers).unwrap();
            assert!(read.is_remote());
            assert_eq!(
                (read.trace_id(), read.span_id()),
                (producer.trace_id(), producer.span_id())
            );

            // One record: the handler's span has the producer as its remote parent.
            let handler = record.handler_span(TOPIC);
            assert!(seen.followed_by(&handler).is_empty());
            let handled = context_of(&handler);
            assert_eq!(handled.trace_id(), producer.trace_id());
            drop(handler);
            let exported = memory.named("nanokafka.handle");
            assert_eq!(exported.len(), 1);
            assert_eq!(exported[0].parent_span_id, producer.span_id());
            assert!(exported[0].parent_span_is_remote);
        });
    }

    #[test]
    fn a_batch_handler_span_links_each_producer_once() {
        let (_dir, broker) = broker();
        otel_traced(|memory, _| {
            let a = tracing::info_span!("a");
            let b = tracing::info_span!("b");
            a.in_scope(|| {
                broker.produce(TOPIC, &1u64).unwrap();
                broker.produce(TOPIC, &2u64).unwrap();
            });
            b.in_scope(|| broker.produce(TOPIC, &3u64).unwrap());
            let batch = Delivered {
                topic: TOPIC.to_owned(),
                group: "g".to_owned(),
                generation: 1,
                attempt: 1,
                records: read_all(&broker),
            };
            let (a, b) = (context_of(&a), context_of(&b));
            let span = batch.handler_span();
            let own_trace = context_of(&span).trace_id();
            assert_ne!(own_trace, a.trace_id(), "a batch keeps a trace of its own");
            drop(span);

            let exported = memory.named("nanokafka.handle");
            let linked: Vec<(TraceId, SpanId)> = exported[0]
                .links
                .iter()
                .map(|l| (l.span_context.trace_id(), l.span_context.span_id()))
                .collect();
            assert_eq!(
                linked,
                vec![(a.trace_id(), a.span_id()), (b.trace_id(), b.span_id())]
            );
        });
    }

    #[test]
    fn tracestate_travels_with_traceparent() {
        let (_dir, broker) = broker();
        otel_traced(|_, _| {
            let upstream = SpanContext::new(
                TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap(),
                SpanId::from_hex("00f067aa0ba902b7").unwrap(),
                TraceFlags::SAMPLED,
                true,
                "vendor=value".parse::<TraceState>().unwrap(),
            );
            let span = tracing::info_span!("continued");
            span.set_parent(opentelemetry::Context::new().with_remote_span_context(upstream))
                .unwrap();
            span.in_scope(|| broker.produce(TOPIC, &1u64).unwrap());

            let records = read_all(&broker);
            let headers = &records[0].headers;
            assert_eq!(
                headers[1],
                Header::new(trace::TRACESTATE_HEADER, "vendor=value")
            );
            let read = trace::producer_context(headers).unwrap();
            assert_eq!(
                read.trace_id(),
                TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap()
            );
            assert_eq!(read.trace_state().get("vendor"), Some("value"));
        });
    }

    #[test]
    fn malformed_traceparents_are_ignored() {
        otel_traced(|_, _| {
            for value in [
                "",
                "00-00000000000000000000000000000000-0000000000000000-01",
                "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
                "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            ] {
                let headers = [Header::new(trace::TRACEPARENT_HEADER, value)];
                assert!(trace::producer_context(&headers).is_none(), "{value:?}");
                let span = tracing::info_span!("h");
                assert!(!trace::link(&span, &headers), "{value:?}");
            }
            let not_utf8 = [Header::new(trace::TRACEPARENT_HEADER, vec![0xff, 0xfe])];
            assert!(trace::producer_context(&not_utf8).is_none());
        });
    }
}
