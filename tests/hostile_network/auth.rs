//! A flood of failed authentications from one address (many connections: wrong passwords,
//! unknown users, garbage SCRAM messages) beside a well-behaved SCRAM client that produces
//! and consumes. Each failure is answered no sooner than the failed-authentication delay,
//! the broker spends little CPU per failed attempt (its threads' CPU time over the flood,
//! divided by the attempts), and the good client delivers and reads every record.

use std::net::SocketAddr;
use std::thread;
use std::time::{Duration, Instant};

use kafka_protocol::messages::SaslHandshakeRequest;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use nanokafka::{ListenerConfig, NanoKafka, ScramCredential, ScramMechanism, ScramStore};

use crate::client::WireClient;
use crate::clients;
use crate::scram_client::{authenticate, client_final, login};

const DELAY: Duration = Duration::from_millis(100);
const FLOODERS: usize = 8;
const ATTEMPTS_PER_FLOODER: usize = 20;
/// CPU the broker may spend on one failed attempt (connection, handshake, one or two SCRAM
/// messages, the timer). A login that ran PBKDF2 at 4096 iterations would cost about a
/// millisecond in a release build and many in this debug one; the exchange costs far less.
const CPU_PER_ATTEMPT: Duration = Duration::from_millis(2);
const USER: &str = "alice";
const PASSWORD: &str = "alice-secret";

fn add_user(dir: &std::path::Path) {
    let path = ScramStore::path(dir);
    let mut store = ScramStore::load_or_new(&path).unwrap();
    let m = ScramMechanism::ScramSha256;
    let salt = ScramStore::random_salt().unwrap();
    let credential = ScramCredential::from_password(m, PASSWORD.as_bytes(), &salt, 4096);
    store.upsert(USER, m, credential).unwrap();
    store.save(&path).unwrap();
}

/// One failed attempt of kind `n % 4`; how long its failing message took to be answered.
fn failed_attempt(addr: SocketAddr, n: usize) -> Duration {
    let mut client = WireClient::connect(addr);
    let handshake =
        SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("SCRAM-SHA-256"));
    assert_eq!(client.call(&handshake, 1).error_code, 0);
    let user = if n % 4 == 1 { "mallory" } else { USER };
    let client_first = format!("n,,n={user},r=flood{n}");
    let first = match n % 4 {
        2 => vec![0xff, b',', 0, b'='],
        _ => client_first.clone().into_bytes(),
    };
    let started = Instant::now();
    let answer = client.call(&authenticate(first), 2);
    let failing_started;
    let failed = if answer.error_code != 0 {
        failing_started = started;
        answer
    } else {
        let server_first = String::from_utf8(answer.auth_bytes.to_vec()).unwrap();
        let last = match n % 4 {
            3 => b"c=biws,p=garbage".to_vec(),
            _ => client_final(
                ScramMechanism::ScramSha256,
                "guess",
                &client_first[3..],
                &server_first,
            )
            .into_bytes(),
        };
        failing_started = Instant::now();
        client.call(&authenticate(last), 2)
    };
    let waited = failing_started.elapsed();
    assert_eq!(
        failed.error_code,
        ResponseError::SaslAuthenticationFailed.code(),
        "attempt {n}"
    );
    assert!(
        client.closed_by_broker(),
        "attempt {n}: the connection stays open"
    );
    waited
}

/// CPU time (user + system) of this process's threads but the flood's own (named `flood-*`),
/// from /proc: the broker's threads (actors, I/O, the listener's arbiter) and the test's, which
/// only waits. The good client runs in a process of its own.
fn broker_cpu() -> Duration {
    let ticks_per_second = 100; // USER_HZ on Linux
    let mut ticks = 0u64;
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.starts_with("flood-") {
            continue;
        }
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        // The fields after the command's closing parenthesis: utime and stime are the 12th
        // and 13th of them.
        let after = &stat[stat.rfind(')').map_or(0, |i| i + 2)..];
        let fields: Vec<&str> = after.split(' ').collect();
        ticks += fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    }
    Duration::from_millis(ticks * 1000 / ticks_per_second)
}

#[test]
fn a_flood_of_failed_logins_is_slowed_cheaply_and_a_good_client_is_served() {
    let _alone = crate::measuring_alone();
    let dir = tempfile::tempdir().unwrap();
    let broker = NanoKafka::builder()
        .data_dir(dir.path())
        .listener(
            ListenerConfig::new("127.0.0.1:0")
                .sasl_scram()
                .failed_authentication_delay(DELAY)
                .initial_rebalance_delay(Duration::ZERO),
        )
        .build()
        .unwrap();
    add_user(dir.path());
    let addr = broker.listener_addr().unwrap();
    let good = clients::python("confluent_produce.py").zip(clients::python("confluent_consume.py"));

    let cpu_before = broker_cpu();
    let flooders: Vec<_> = (0..FLOODERS)
        .map(|f| {
            thread::Builder::new()
                .name(format!("flood-{f}"))
                .spawn(move || {
                    (0..ATTEMPTS_PER_FLOODER)
                        .map(|i| failed_attempt(addr, f * ATTEMPTS_PER_FLOODER + i))
                        .collect::<Vec<_>>()
                })
                .unwrap()
        })
        .collect();
    // The good client logs in, produces and consumes while the flood goes on.
    if let Some((producer, consumer)) = &good {
        let login = ["--sasl-mechanism", "SCRAM-SHA-256", "--sasl-user", USER];
        let bootstrap = addr.to_string();
        let mut args = vec![
            bootstrap.as_str(),
            "good",
            "--count",
            "200",
            "--timeout",
            "45",
        ];
        args.extend(login);
        let producer = producer
            .clone()
            .with_env("NANOKAFKA_SASL_PASSWORD", PASSWORD);
        let produced = producer.run_json(&args, Duration::from_secs(60));
        assert_eq!(produced["records"].as_array().unwrap().len(), 200);
        let mut args = vec![
            bootstrap.as_str(),
            "good",
            "g",
            "--count",
            "200",
            "--timeout",
            "45",
        ];
        args.extend(login);
        let consumer = consumer
            .clone()
            .with_env("NANOKAFKA_SASL_PASSWORD", PASSWORD);
        let consumed =
            clients::json_lines(&consumer.run_ok(&args, b"", Duration::from_secs(60)).stdout);
        let done = consumed.last().unwrap();
        assert_eq!(done["records"].as_array().unwrap().len(), 200, "{done}");
    }
    let waits: Vec<Duration> = flooders
        .into_iter()
        .flat_map(|f| f.join().unwrap())
        .collect();
    let cpu = broker_cpu().saturating_sub(cpu_before);
    // The one right password still logs in, at once.
    let started = Instant::now();
    assert!(login(addr, ScramMechanism::ScramSha256, USER, PASSWORD).is_ok());
    assert!(
        started.elapsed() < DELAY,
        "a good login took {:?}",
        started.elapsed()
    );
    let attempts = waits.len();
    assert_eq!(attempts, FLOODERS * ATTEMPTS_PER_FLOODER);
    let fastest = waits.iter().min().unwrap();
    assert!(
        *fastest >= DELAY,
        "a failure was answered after {fastest:?}"
    );
    // The good client's own work is in the CPU time too: the bound is per failed attempt,
    // generous, and still far below what a PBKDF2 per login would cost.
    let per_attempt = cpu / attempts as u32;
    eprintln!("{attempts} failed attempts: broker CPU {cpu:?}, {per_attempt:?} each; fastest answer {fastest:?}");
    assert!(cpu > Duration::ZERO, "the measure saw no broker thread");
    assert!(
        per_attempt <= CPU_PER_ATTEMPT,
        "the broker spent {cpu:?} on {attempts} failed attempts ({per_attempt:?} each)"
    );
}

mod fuzz {
    //! Arbitrary bytes as the SaslHandshake mechanism and as the SaslAuthenticate payloads
    //! (SCRAM's two messages) over the wire: each exchange ends refused with the connection
    //! closed, never authenticated, and the listener goes on serving.

    use super::*;
    use kafka_protocol::messages::ApiVersionsRequest;
    use proptest::prelude::*;

    fn payload() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..200),
            "n,,n=(alice|mallory),r=[ -~]{0,10}(,[ -~]{0,6})?".prop_map(String::into_bytes),
            "c=biws,r=[ -~]{0,60},p=[A-Za-z0-9+/=]{0,44}".prop_map(String::into_bytes),
        ]
    }

    fn mechanism() -> impl Strategy<Value = String> {
        prop_oneof![
            3 => Just("SCRAM-SHA-256".to_owned()),
            1 => Just("SCRAM-SHA-512".to_owned()),
            1 => "[ -~]{0,20}",
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn arbitrary_sasl_payloads_are_refused_and_the_listener_serves_on(
            mechanism in mechanism(),
            first in payload(),
            last in payload(),
        ) {
            use std::sync::OnceLock;
            static BROKER: OnceLock<(NanoKafka, SocketAddr, tempfile::TempDir)> = OnceLock::new();
            let (_, addr, _) = BROKER.get_or_init(|| {
                let dir = tempfile::tempdir().unwrap();
                let broker = NanoKafka::builder()
                    .data_dir(dir.path())
                    .listener(
                        ListenerConfig::new("127.0.0.1:0")
                            .sasl_scram()
                            .failed_authentication_delay(Duration::ZERO),
                    )
                    .build()
                    .unwrap();
                add_user(dir.path());
                let addr = broker.listener_addr().unwrap();
                (broker, addr, dir)
            });
            let mut client = WireClient::connect(*addr);
            let handshake = SaslHandshakeRequest::default()
                .with_mechanism(StrBytes::from(mechanism));
            if client.call(&handshake, 1).error_code == 0 {
                let answer = client.call(&authenticate(first), 2);
                let answer = match answer.error_code {
                    0 => client.call(&authenticate(last), 2),
                    _ => answer,
                };
                prop_assert_eq!(answer.error_code, ResponseError::SaslAuthenticationFailed.code());
                prop_assert!(client.closed_by_broker());
            }
            let mut next = WireClient::connect(*addr);
            prop_assert_eq!(next.call(&ApiVersionsRequest::default(), 3).error_code, 0);
        }
    }
}
