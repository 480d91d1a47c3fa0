//! A broker with the Kafka listener for trying consumer groups with real Kafka clients: it
//! creates topic `orders` (4 partitions) with a few records and commits for groups `grp` and
//! `pygrp`, prints the listener's address,
//! then prints every group's assignment whenever it changes, for `NANOKAFKA_SECS` seconds
//! (default 30).
//!
//! ```sh
//! cargo run --example groups_interop
//! kcat -b <addr> -G grp orders     # twice, in two terminals
//! ```

use std::time::{Duration, Instant};

use nanokafka::{ListenerConfig, NanoKafka, TopicConfig};

fn main() -> nanokafka::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let dir = tempfile_dir();
    let broker = NanoKafka::builder()
        .data_dir(&dir)
        .listener(ListenerConfig::new("127.0.0.1:0"))
        .build()?;
    broker.create_topic("orders", TopicConfig::default().partitions(4))?;
    for i in 0..20u32 {
        broker.produce_raw(
            "orders",
            Some(format!("k{i}").as_bytes()),
            format!("v{i}").into_bytes(),
        )?;
    }
    // Groups `grp` and `pygrp` start with a committed offset on every partition, so a client
    // resumes there instead of asking ListOffsets where to start.
    for group in ["grp", "pygrp"] {
        broker.join_group("orders", group, "setup")?;
        for p in 0..4 {
            broker.commit("orders", group, p, 0)?;
        }
        broker.leave_group("orders", group, "setup")?;
    }
    println!(
        "listening on {}",
        broker.listener_addr().expect("a listener")
    );
    let secs = std::env::var("NANOKAFKA_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(30);
    let end = Instant::now() + Duration::from_secs(secs);
    let mut last = String::new();
    while Instant::now() < end {
        let stats = broker.stats()?;
        let now = format!(
            "{:?}",
            stats.topics["orders"]
                .groups
                .iter()
                .map(|(g, s)| (g, s.generation, &s.assignment, &s.lag))
                .collect::<Vec<_>>()
        );
        if now != last {
            println!("groups: {now}");
            last = now;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    broker.shutdown()?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn tempfile_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("nanokafka-groups-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}
