//! A broker with a Kafka listener for each test, native reads and writes to compare the
//! clients' records with, and the JSON record shape of the client scripts
//! (`tests/tools/clients/README.md`).

use std::collections::{BTreeMap, BTreeSet};
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use nanokafka::clock::ManualClock;
use nanokafka::security::acl::AclStore;
use nanokafka::{Header, ListenerConfig, NanoKafka, NanoKafkaBuilder, Record, TopicConfig};
use serde_json::Value;
use tempfile::TempDir;

/// The bound of one client run; every script also gets [`SCRIPT_TIMEOUT`] for its own waits,
/// so a script fails with its own message before the harness kills it.
pub const RUN: Duration = Duration::from_secs(60);
pub const SCRIPT_TIMEOUT: &str = "45";
/// The session timeout of native members; the scripts use 6 s too, the smallest a Kafka
/// broker accepts by default, so that a member that vanishes is evicted quickly.
pub const SESSION: Duration = Duration::from_secs(6);

/// A broker listening on loopback in a temp dir of its own; shut down on drop.
pub struct Broker {
    pub broker: NanoKafka,
    pub addr: SocketAddr,
    pub bootstrap: String,
    dir: TempDir,
}

impl Broker {
    /// A new broker on a free port.
    pub fn start() -> Broker {
        let dir = tempfile::tempdir().unwrap();
        Broker::open(dir, "127.0.0.1:0")
    }

    /// A new broker on a port picked now and kept across [`Broker::restart`], so that
    /// clients whose only address is the bootstrap find it again.
    pub fn start_on_fixed_port() -> Broker {
        let dir = tempfile::tempdir().unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port();
        Broker::open(dir, &format!("127.0.0.1:{port}"))
    }

    /// A new broker on a free port whose clock moves only when the test moves it.
    pub fn start_with_clock(clock: ManualClock) -> Broker {
        Broker::start_with(|builder| builder.clock(Arc::new(clock)))
    }

    /// A new broker whose builder `configure` sets more on (the listener is already set).
    pub fn start_with(configure: impl FnOnce(NanoKafkaBuilder) -> NanoKafkaBuilder) -> Broker {
        let dir = tempfile::tempdir().unwrap();
        let broker = configure(builder(dir.path(), "127.0.0.1:0"))
            .build()
            .unwrap();
        Broker::with(broker, dir)
    }

    /// A new broker on a free port whose listener enforces ACLs (`ListenerConfig::authorizer`)
    /// with these super users; [`Broker::acls`] changes them while it runs.
    pub fn start_authorized(super_users: &[&str]) -> Broker {
        let dir = tempfile::tempdir().unwrap();
        let listener = listener("127.0.0.1:0").authorizer(super_users.iter().copied());
        let broker = builder(dir.path(), "127.0.0.1:0")
            .listener(listener)
            .build()
            .unwrap();
        Broker::with(broker, dir)
    }

    /// The ACLs of the broker's data directory, as `nanokafka acls` would change them.
    pub fn acls(&self) -> AclStore {
        AclStore::open(self.dir.path()).unwrap()
    }

    fn open(dir: TempDir, addr: &str) -> Broker {
        let broker = builder(dir.path(), addr).build().unwrap();
        Broker::with(broker, dir)
    }

    fn with(broker: NanoKafka, dir: TempDir) -> Broker {
        let addr = broker.listener_addr().expect("the broker listens");
        Broker {
            broker,
            addr,
            bootstrap: addr.to_string(),
            dir,
        }
    }

    /// A new broker on a free port that requires SASL/SCRAM, with `users` (name, password)
    /// holding SCRAM-SHA-256 and SCRAM-SHA-512 credentials.
    pub fn start_scram(users: &[(&str, &str)]) -> Broker {
        let broker = Broker::start_with(|builder| {
            builder.listener(
                ListenerConfig::new("127.0.0.1:0")
                    .initial_rebalance_delay(Duration::ZERO)
                    .sasl_scram(),
            )
        });
        for (user, password) in users {
            broker.add_scram_user(user, password);
        }
        broker
    }

    /// Stores SCRAM-SHA-256 and SCRAM-SHA-512 credentials for `user` as `nanokafka users add`
    /// does: the running broker sees them at the next login.
    pub fn add_scram_user(&self, user: &str, password: &str) {
        use nanokafka::{ScramCredential, ScramMechanism, ScramStore};
        let path = ScramStore::path(self.dir.path());
        let mut store = ScramStore::load_or_new(&path).unwrap();
        for mechanism in ScramMechanism::ALL {
            let salt = ScramStore::random_salt().unwrap();
            let credential =
                ScramCredential::from_password(mechanism, password.as_bytes(), &salt, 4096);
            store.upsert(user, mechanism, credential).unwrap();
        }
        store.save(&path).unwrap();
    }

    /// Shuts the broker down cleanly and opens the same data dir on the same address.
    pub fn restart(self) -> Broker {
        let Broker {
            broker, addr, dir, ..
        } = self;
        broker.shutdown().unwrap();
        Broker::open(dir, &addr.to_string())
    }

    /// The broker's data directory.
    pub fn data_dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// The segment files of one partition, as a test checks the layout its case needs.
    pub fn segment_count(&self, topic: &str, partition: u32) -> usize {
        let dir = self.dir.path().join(format!("{topic}_{partition}"));
        std::fs::read_dir(dir)
            .unwrap()
            .filter(|e| e.as_ref().unwrap().path().extension() == Some("log".as_ref()))
            .count()
    }

    /// Records `key-i` / `value-i` for `i` in `range`, produced natively to `topic` (keyed:
    /// spread over its partitions).
    pub fn produce_keyed(&self, topic: &str, range: std::ops::Range<usize>) {
        for i in range {
            let key = format!("key-{i}");
            let value = format!("value-{i}").into_bytes();
            self.broker
                .produce_raw(topic, Some(key.as_bytes()), value)
                .unwrap();
        }
    }

    /// The codec of every batch stored in one partition, in order (`none`, `zstd`, ...).
    pub fn stored_codecs(&self, topic: &str, partition: u32) -> Vec<String> {
        let dir = self.dir.path().join(format!("{topic}_{partition}"));
        let mut segments: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension() == Some("log".as_ref()))
            .collect();
        segments.sort();
        segments
            .iter()
            .flat_map(|path| {
                let bytes = std::fs::read(path).unwrap();
                nanokafka::internals::inspect::scan_segment(path, &bytes).0
            })
            .map(|batch| batch.codec)
            .collect()
    }

    pub fn create(&self, topic: &str, partitions: u32) {
        self.broker
            .create_topic(topic, TopicConfig::default().partitions(partitions))
            .unwrap();
    }

    /// Every record of `topic` from the start, read natively in a group of its own, sorted by
    /// (partition, offset). Waits until `count` were read (a panic after [`RUN`]).
    pub fn read_all(&self, topic: &str, count: usize) -> Vec<Record<Vec<u8>>> {
        let group = format!("native-reader-{topic}-{}", unique());
        self.broker.join_group(topic, &group, "reader").unwrap();
        let deadline = Instant::now() + RUN;
        let mut read = Vec::new();
        while read.len() < count {
            assert!(
                Instant::now() < deadline,
                "read {} of {count} records of {topic}",
                read.len()
            );
            let batch = self
                .broker
                .poll_batch_raw(topic, &group, "reader", 500, Duration::from_millis(500))
                .unwrap();
            for r in &batch {
                self.broker
                    .commit(topic, &group, r.partition, r.offset)
                    .unwrap();
            }
            read.extend(batch);
        }
        self.broker.leave_group(topic, &group, "reader").unwrap();
        read.sort_by_key(|r| (r.partition, r.offset));
        read
    }
}

fn builder(dir: &Path, addr: &str) -> NanoKafkaBuilder {
    NanoKafka::builder()
        .data_dir(dir)
        .listener(listener(addr))
        .session_timeout(SESSION)
}

fn listener(addr: &str) -> ListenerConfig {
    ListenerConfig::new(addr)
        .initial_rebalance_delay(Duration::ZERO)
        // KIP-848 members learn of new assignments within half a second.
        .consumer_heartbeat_interval(Duration::from_millis(500))
}

/// A number no other call in this process returns: unique group and topic names.
pub fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// A record as compared across clients: partition, offset, key, value and headers.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Seen {
    pub partition: u32,
    pub offset: u64,
    pub key: Option<Vec<u8>>,
    pub value: Vec<u8>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

impl Seen {
    pub fn native(r: &Record<Vec<u8>>) -> Seen {
        Seen {
            partition: r.partition,
            offset: r.offset,
            key: r.key.clone(),
            value: r.value.clone(),
            headers: r
                .headers
                .iter()
                .map(|h| (h.key.clone(), h.value.clone()))
                .collect(),
        }
    }

    /// A record of a script's JSON (`clientlib.py`'s shape, base64 bytes).
    pub fn script(r: &Value) -> Seen {
        Seen {
            partition: r["partition"].as_u64().unwrap() as u32,
            // -1 or null where the producer could not know it (acks=0): u64::MAX.
            offset: r["offset"]
                .as_i64()
                .and_then(|o| u64::try_from(o).ok())
                .unwrap_or(u64::MAX),
            key: unbase64(&r["key"]),
            value: unbase64(&r["value"]).unwrap_or_default(),
            headers: r["headers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| (h[0].as_str().unwrap().to_string(), unbase64(&h[1])))
                .collect(),
        }
    }
}

/// Checks that a script read each partition's records in offset order, none skipped or
/// repeated (its result's records are in the order read).
pub fn assert_consecutive_per_partition(result: &Value) {
    let read: Vec<Seen> = result["records"]
        .as_array()
        .unwrap_or_else(|| panic!("no records in {result}"))
        .iter()
        .map(Seen::script)
        .collect();
    let partitions: BTreeSet<u32> = read.iter().map(|r| r.partition).collect();
    for p in partitions {
        let offsets: Vec<u64> = read
            .iter()
            .filter(|r| r.partition == p)
            .map(|r| r.offset)
            .collect();
        assert!(
            offsets.windows(2).all(|w| w[0] + 1 == w[1]),
            "partition {p}: {offsets:?}"
        );
    }
}

/// The records of a script's result document, sorted by (partition, offset).
pub fn script_records(result: &Value) -> Vec<Seen> {
    let mut seen: Vec<Seen> = result["records"]
        .as_array()
        .unwrap_or_else(|| panic!("no records in {result}"))
        .iter()
        .map(Seen::script)
        .collect();
    seen.sort();
    seen
}

pub fn native_records(records: &[Record<Vec<u8>>]) -> Vec<Seen> {
    let mut seen: Vec<Seen> = records.iter().map(Seen::native).collect();
    seen.sort();
    seen
}

pub fn unbase64(v: &Value) -> Option<Vec<u8>> {
    v.as_str().map(|s| {
        base64::engine::general_purpose::STANDARD
            .decode(s)
            .unwrap_or_else(|e| panic!("{s} is not base64: {e}"))
    })
}

/// Record i of a script's producer run (`clientlib.py`'s `generated`): key, value, headers.
pub fn generated(prefix: &str, i: usize, client: &str) -> (Vec<u8>, Vec<u8>, Vec<Header>) {
    (
        format!("{prefix}-key-{i}").into_bytes(),
        format!("{prefix}-value-{i}").into_bytes(),
        vec![
            Header::new("i", i.to_string()),
            Header::new("client", client),
        ],
    )
}

/// The committed offsets a script's result reports, per partition, but for zeros: a client
/// may commit its position 0 on a partition it read nothing of (kafka-python does).
pub fn script_commits(result: &Value) -> BTreeMap<u32, u64> {
    result["committed"]
        .as_array()
        .unwrap_or_else(|| panic!("no committed offsets in {result}"))
        .iter()
        .map(|c| {
            (
                c["partition"].as_u64().unwrap() as u32,
                c["offset"].as_u64().unwrap(),
            )
        })
        .filter(|&(_, offset)| offset > 0)
        .collect()
}

/// One past the last offset read per partition: what a consumer that read `records` and
/// committed each must have left.
pub fn next_offsets(records: &[Seen]) -> BTreeMap<u32, u64> {
    let mut next = BTreeMap::new();
    for r in records {
        let e = next.entry(r.partition).or_insert(0);
        *e = (*e).max(r.offset + 1);
    }
    next
}

/// The script arguments `BOOTSTRAP TOPIC --timeout T` followed by `more`.
pub fn args<'a>(bootstrap: &'a str, topic: &'a str, more: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![bootstrap, topic, "--timeout", SCRIPT_TIMEOUT];
    v.extend_from_slice(more);
    v
}

/// Checks that the records a producer script reported (`clientlib.py`'s generated records
/// `prefix`-0.. of `client`) are exactly what a native read of `topic` returns: the same
/// partitions and offsets (unless the producer could not know them: acks=0), keys, values,
/// headers, and the producer's timestamps where it reported them (CreateTime is kept).
pub fn assert_read_back_natively(b: &Broker, topic: &str, produced: &Value, prefix: &str) {
    read_back_natively(b, topic, produced, prefix, Stamps::Exact);
}

/// What a producer's reported timestamps say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stamps {
    /// Each record's own timestamp.
    Exact,
    /// A timestamp no later than the record's: aiokafka 0.14 reports the first record's
    /// timestamp of a batch for every record of it (`MessageBatch.done` overwrites the
    /// broker's -1 with the first record's timestamp inside its loop).
    AtMost,
}

/// [`assert_read_back_natively`] with the producer's timestamps read as `stamps` says.
pub fn read_back_natively(b: &Broker, topic: &str, produced: &Value, prefix: &str, stamps: Stamps) {
    let client = produced["client"].as_str().unwrap();
    let sent = script_records(produced);
    let expected: BTreeSet<_> = (0..sent.len())
        .map(|i| {
            let (key, value, headers) = generated(prefix, i, client);
            let headers: Vec<_> = headers.into_iter().map(|h| (h.key, h.value)).collect();
            (Some(key), value, headers)
        })
        .collect();
    let content = |r: &Seen| (r.key.clone(), r.value.clone(), r.headers.clone());
    assert_eq!(sent.iter().map(content).collect::<BTreeSet<_>>(), expected);
    let read = b.read_all(topic, sent.len());
    let seen = native_records(&read);
    assert_eq!(seen.iter().map(content).collect::<BTreeSet<_>>(), expected);
    if sent.iter().all(|r| r.offset != u64::MAX) {
        assert_eq!(
            seen, sent,
            "{client}: native records differ from those reported"
        );
    }
    let reported: BTreeMap<_, _> = produced["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| Some((unbase64(&r["key"]), r["timestamp"].as_u64()?)))
        .collect();
    for r in &read {
        match (reported.get(&r.key), stamps) {
            (Some(&ts), Stamps::Exact) => {
                assert_eq!(r.timestamp_ms, ts, "{client}: timestamp of {r:?}")
            }
            (Some(&ts), Stamps::AtMost) => {
                assert!(r.timestamp_ms >= ts, "{client}: timestamp of {r:?} < {ts}")
            }
            (None, _) => {}
        }
        assert!(r.timestamp_ms > 0, "{client}: no timestamp on {r:?}");
    }
}
