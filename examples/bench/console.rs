//! The web console's speed (`NANOKAFKA_BENCH_ONLY=console`; the `console` feature, which
//! the workspace's `nanokafka` binary turns on): what a page waits for, over HTTP on
//! loopback, each the median of [`TRIES`] requests, beside the broker calls it is made of,
//! timed in the same run.
//!
//! - the overview with 1,000 topics (one record each) against `stats()`, which it calls;
//! - a page of 50 records opened at the middle offset of a partition of 10 M records
//!   (`NANOKAFKA_BENCH_CONSOLE_RECORDS`), against a plain 1 MiB batch fetch there;
//! - the same page opened at the middle record's timestamp, against `offset_for_timestamp`
//!   and that fetch.
//!
//! The partition is built with `produce_batch_raw` in batches of 10,000 records of 60 bytes
//! (about 0.8 GB on disk for 10 M), in a temp dir removed at the end.

#[cfg(feature = "console")]
pub use enabled::only;

#[cfg(not(feature = "console"))]
pub fn only() {
    eprintln!("console rows: skipped (built without the `console` feature)");
}

#[cfg(feature = "console")]
mod enabled {
    use std::io::{Read, Write};
    use std::net::{SocketAddr, TcpStream};
    use std::time::{Duration, Instant};

    use nanokafka::{FsyncPolicy, NanoKafka, ProduceRecord, TopicConfig};
    use serde_json::{json, Value};

    use crate::harness::env_number;
    use crate::report::{self, Figure, Row, Target};

    /// Requests (and baseline calls) per figure; the median is reported.
    const TRIES: usize = 21;
    const TOPICS: usize = 1_000;
    const BATCH: usize = 10_000;
    const VALUE_LEN: usize = 60;

    fn broker(dir: &std::path::Path) -> (NanoKafka, SocketAddr) {
        let broker = NanoKafka::builder()
            .data_dir(dir)
            .fsync(FsyncPolicy::Never)
            .console("127.0.0.1:0")
            .build()
            .expect("start broker");
        let addr = broker.console_addr().expect("console address");
        (broker, addr)
    }

    /// `GET path`: the body as JSON (one connection per request, as a page's fetch may).
    fn get(addr: SocketAddr, path: &str) -> Value {
        let mut stream = TcpStream::connect(addr).expect("connect");
        let head = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        stream.write_all(head.as_bytes()).expect("write");
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).expect("read");
        let start = answer
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("an HTTP head")
            + 4;
        assert!(answer.starts_with(b"HTTP/1.1 200"), "{path}");
        serde_json::from_slice(&answer[start..]).expect("a JSON body")
    }

    /// The median time of `TRIES` runs of `f`, after one warm-up, in milliseconds.
    fn median_ms(mut f: impl FnMut()) -> f64 {
        f();
        let mut times: Vec<Duration> = (0..TRIES)
            .map(|_| {
                let start = Instant::now();
                f();
                start.elapsed()
            })
            .collect();
        times.sort_unstable();
        times[TRIES / 2].as_secs_f64() * 1e3
    }

    fn overview_row() -> Figure {
        let dir = tempfile::tempdir().expect("temp dir");
        let (broker, addr) = broker(dir.path());
        for i in 0..TOPICS {
            let name = format!("topic-{i:04}");
            broker
                .create_topic(&name, TopicConfig::default())
                .expect("create");
            broker
                .produce_raw(&name, None, b"x".to_vec())
                .expect("produce");
        }
        let overview = get(addr, "/api/overview");
        assert_eq!(overview["topics"].as_array().map(Vec::len), Some(TOPICS));
        let stats = median_ms(|| {
            broker.stats().expect("stats");
        });
        let page = median_ms(|| {
            get(addr, "/api/overview");
        });
        broker.shutdown().expect("shutdown");
        Figure::new(
            "console_overview_1000_topics_ms",
            "console: overview, 1,000 topics (HTTP)",
            page,
            "ms",
        )
        .vs("stats() of the same broker", stats)
        .target(Target::AtMost(300.0))
    }

    /// Fills partition 0 of `topic` with `records` records; returns the middle offset.
    fn fill(broker: &NanoKafka, topic: &str, records: u64) -> u64 {
        let value = vec![0xa5u8; VALUE_LEN];
        let mut written = 0u64;
        while written < records {
            let n = (records - written).min(BATCH as u64) as usize;
            let batch: Vec<ProduceRecord> = (0..n)
                .map(|_| ProduceRecord {
                    key: None,
                    value: value.clone(),
                })
                .collect();
            broker
                .produce_batch_raw(topic, Some(0), batch)
                .expect("produce");
            written += n as u64;
        }
        records / 2
    }

    fn partition_rows(records: u64) -> Vec<Figure> {
        let dir = tempfile::tempdir().expect("temp dir");
        let (broker, addr) = broker(dir.path());
        broker
            .create_topic("big", TopicConfig::default())
            .expect("create");
        let started = Instant::now();
        let middle = fill(&broker, "big", records);
        eprintln!(
            "console rows: {records} records written in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        let base = "/api/topics/big/partitions/0/records";
        let page = get(addr, &format!("{base}?offset={middle}&limit=1"));
        let timestamp = page["records"][0]["timestamp"]
            .as_u64()
            .expect("a timestamp");
        let handle = broker.async_handle();
        let fetch = || {
            futures::executor::block_on(handle.fetch_kafka_batches(
                "big",
                0,
                middle,
                1 << 20,
                true,
            ))
            .expect("fetch");
        };
        let fetch_ms = median_ms(fetch);
        let at_offset = median_ms(|| {
            let page = get(addr, &format!("{base}?offset={middle}&limit=50"));
            assert_eq!(page["records"][0]["offset"], json!(middle));
        });
        let lookup_ms = median_ms(|| {
            let found = broker
                .offset_for_timestamp("big", 0, timestamp)
                .expect("offset for timestamp")
                .expect("an offset");
            futures::executor::block_on(handle.fetch_kafka_batches("big", 0, found, 1 << 20, true))
                .expect("fetch");
        });
        let at_timestamp = median_ms(|| {
            let page = get(addr, &format!("{base}?timestamp={timestamp}&limit=50"));
            assert_eq!(page["records"][0]["timestamp"], json!(timestamp));
        });
        broker.shutdown().expect("shutdown");
        let millions = records as f64 / 1e6;
        vec![
            Figure::new(
                "console_open_middle_offset_ms",
                format!("console: 50 records at the middle offset of {millions} M (HTTP)"),
                at_offset,
                "ms",
            )
            .vs("a 1 MiB batch fetch there", fetch_ms)
            .target(Target::AtMost(100.0)),
            Figure::new(
                "console_open_timestamp_ms",
                format!("console: 50 records at a timestamp, {millions} M (HTTP)"),
                at_timestamp,
                "ms",
            )
            .vs("offset_for_timestamp + fetch", lookup_ms)
            .target(Target::AtMost(100.0)),
        ]
    }

    pub fn only() {
        let records = env_number("NANOKAFKA_BENCH_CONSOLE_RECORDS", 1e7, 1e3..=1e8) as u64;
        let mut figures = vec![overview_row()];
        figures.extend(partition_rows(records));
        let rows: Vec<Row> = figures.into_iter().map(Row::Figure).collect();
        report::print_table(&rows);
        println!(
            "{}",
            report::json_line(&rows, json!({ "console_records": records }))
        );
    }
}
