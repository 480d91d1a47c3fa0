//! What reaches a TLS port that is not a TLS client: garbage bytes, a plaintext Kafka request,
//! ClientHellos cut mid-handshake, connections that stop mid-handshake (the handshake deadline
//! closes them) — hundreds of each while confluent-kafka produces and consumes over TLS, every
//! record delivered; afterwards no connection is left open.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use nanokafka::{ListenerConfig, NanoKafka};

use crate::clients;
use crate::tls_certs::{client_hello, Certs};

/// The handshake deadline of the broker under test (its authentication timeout).
const HANDSHAKE_DEADLINE: Duration = Duration::from_secs(1);
/// Hostile connections of each kind.
const EACH: usize = 100;
const RUN: Duration = Duration::from_secs(90);

/// Bytes no client sends: a fixed pseudo-random sequence (xorshift), so a failure repeats.
fn garbage(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// An ApiVersions v0 request frame, as a plaintext client opens with.
const PLAINTEXT_API_VERSIONS: [u8; 14] = [0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 0, 0];

/// What the broker did with a connection: waits (at most `within`) for it to close the
/// connection, and says whether it did; anything it sent first is read and dropped.
fn closed_by_broker(mut socket: TcpStream, within: Duration) -> bool {
    socket.set_read_timeout(Some(within)).unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match socket.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

/// One hostile connection of `kind`; whether the broker closed it in time.
fn hostile(addr: SocketAddr, kind: usize, i: usize, hello: &[u8]) -> bool {
    let mut socket = TcpStream::connect(addr).unwrap();
    let quick = Duration::from_secs(10);
    match kind {
        0 => {
            let _ = socket.write_all(&garbage(i as u64, 1 + i * 37 % 4096));
            closed_by_broker(socket, quick)
        }
        1 => {
            let _ = socket.write_all(&PLAINTEXT_API_VERSIONS);
            closed_by_broker(socket, quick)
        }
        2 => {
            // A ClientHello cut short, then the client's end of the stream.
            let _ = socket.write_all(&hello[..1 + i % (hello.len() - 1)]);
            let _ = socket.shutdown(Shutdown::Write);
            closed_by_broker(socket, quick)
        }
        _ => {
            // Part of a ClientHello (or nothing), then silence with the connection held open:
            // only the handshake deadline ends it.
            let _ = socket.write_all(&hello[..i % (hello.len() - 1)]);
            let started = Instant::now();
            let closed = closed_by_broker(socket, HANDSHAKE_DEADLINE * 10);
            closed && started.elapsed() >= HANDSHAKE_DEADLINE / 2
        }
    }
}

fn open_connections(broker: &NanoKafka) -> u64 {
    broker.stats().unwrap().listener.unwrap().connections
}

#[test]
fn hostile_connections_on_the_tls_port_cost_only_themselves() {
    let _alone = crate::measuring_alone();
    let (Some(produce), Some(consume)) = (
        clients::python("confluent_produce.py"),
        clients::python("confluent_consume.py"),
    ) else {
        return;
    };
    let certs = Certs::new();
    let dir = tempfile::tempdir().unwrap();
    let config = ListenerConfig::new("127.0.0.1:0")
        .sasl_authentication_timeout(HANDSHAKE_DEADLINE)
        .initial_rebalance_delay(Duration::ZERO);
    let broker = NanoKafka::builder()
        .data_dir(dir.path())
        .listener(config)
        .tls(certs.server(false))
        .build()
        .unwrap();
    let addr = broker.listener_addr().unwrap();
    let bootstrap = addr.to_string();
    broker
        .create_topic("steady", nanokafka::TopicConfig::default().partitions(2))
        .unwrap();
    let before = open_connections(&broker);
    let hello = client_hello(&certs);
    let ca = certs.ca.to_str().unwrap();
    let security = ["--tls-ca", ca, "--timeout", "80"];

    let good = produce.spawn(
        &[
            &[bootstrap.as_str(), "steady", "--count", "500"][..],
            &security,
        ]
        .concat(),
    );
    let refused: usize = std::thread::scope(|s| {
        let hello = &hello;
        let workers: Vec<_> = (0..4)
            .map(|kind| {
                s.spawn(move || {
                    // Eight at a time per kind, so stalled handshakes overlap.
                    let mut refused = 0;
                    for chunk in (0..EACH).collect::<Vec<_>>().chunks(8) {
                        let held: Vec<_> = chunk
                            .iter()
                            .map(|&i| s.spawn(move || hostile(addr, kind, i, hello)))
                            .collect();
                        refused += held
                            .into_iter()
                            .map(|h| h.join().unwrap())
                            .filter(|&closed| !closed)
                            .count();
                    }
                    refused
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).sum()
    });
    assert_eq!(
        refused, 0,
        "hostile connections the broker did not close in time"
    );
    let produced = good.finish(RUN).json();
    let consumed = consume.run_json(
        &[
            &[
                bootstrap.as_str(),
                "steady",
                "steady-group",
                "--count",
                "500",
            ][..],
            &security,
        ]
        .concat(),
        RUN,
    );
    let keys = |run: &serde_json::Value| {
        let mut keys: Vec<String> = run["records"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["key"].as_str().unwrap().to_owned())
            .collect();
        keys.sort();
        keys
    };
    assert_eq!(keys(&produced).len(), 500);
    assert_eq!(
        keys(&consumed),
        keys(&produced),
        "every record delivered once"
    );

    let stats = broker.stats().unwrap().listener.unwrap();
    // Garbage that reads as the start of a TLS record waits for the rest, so some of it ends
    // at the deadline too: every hostile connection is counted as one or the other.
    let closed = stats.connections_closed_bad_request + stats.connections_closed_idle;
    assert!(closed >= 4 * EACH as u64, "{stats:?}");
    assert!(stats.connections_closed_idle >= EACH as u64, "{stats:?}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while open_connections(&broker) != before && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(open_connections(&broker), before, "connections left open");
}
