//! `nanokafka consume --bootstrap ADDR --follow` (`kafka` feature): tails a running
//! `nanokafka serve` through its Kafka listener, printing records produced after it started,
//! and stops at `--max`; without the feature it is a usage error.

use std::process::Command;

use crate::BIN;

/// The live test: a `nanokafka serve` child, a Kafka-backend producer and the follower.
#[cfg(feature = "kafka")]
mod live {
    use std::io::{BufRead, BufReader};
    use std::process::{Child, Command, Stdio};
    use std::sync::mpsc;
    use std::time::Duration;

    use crate::process::Process;
    use crate::BIN;

    /// Kills the child if the test fails before it ends.
    struct KillOnDrop(Child);

    impl Drop for KillOnDrop {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    /// The lines a child prints on `stream`, as they come.
    fn lines(stream: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        rx
    }

    const PATIENCE: Duration = Duration::from_secs(60);

    #[test]
    fn follow_prints_records_as_they_are_produced_and_stops_at_max() {
        let dir = tempfile::tempdir().unwrap();
        let mut serve = Process::serve(&[
            "--listen",
            "127.0.0.1:0",
            "--initial-rebalance-delay-ms",
            "0",
            "--data-dir",
            dir.path().to_str().unwrap(),
        ]);
        let addr = serve.listening_addr(PATIENCE).to_string();
        let producer = nanokafka::NanoKafka::builder()
            .kafka_bootstrap(&addr)
            .build()
            .unwrap();
        producer
            .create_topic("tail", nanokafka::TopicConfig::default())
            .unwrap();
        for i in 0..3u64 {
            producer.produce("tail", &i).unwrap();
        }

        let mut follow = KillOnDrop(
            Command::new(BIN)
                .args([
                    "consume",
                    "tail",
                    "--bootstrap",
                    &addr,
                    "--follow",
                    "--max",
                    "5",
                    "--json",
                ])
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let printed = lines(follow.0.stdout.take().unwrap());
        let value = |line: String| -> u64 {
            let record: serde_json::Value = serde_json::from_str(&line).unwrap();
            record["value"]
                .as_u64()
                .unwrap_or_else(|| panic!("{record}"))
        };
        let first: Vec<u64> = (0..3)
            .map(|_| value(printed.recv_timeout(PATIENCE).expect("a record")))
            .collect();
        assert_eq!(first, [0, 1, 2]);
        // Still running: the next records are printed as they come.
        assert!(
            follow.0.try_wait().unwrap().is_none(),
            "it stopped at the end"
        );
        for i in 3..5u64 {
            producer.produce("tail", &i).unwrap();
        }
        let next: Vec<u64> = (0..2)
            .map(|_| value(printed.recv_timeout(PATIENCE).expect("a followed record")))
            .collect();
        assert_eq!(next, [3, 4]);
        let status = follow.0.wait().unwrap();
        assert!(status.success(), "{status:?}");
        producer.shutdown().unwrap();
    }
}

#[cfg(not(feature = "kafka"))]
#[test]
fn follow_without_the_kafka_feature_is_a_usage_error() {
    let output = Command::new(BIN)
        .args(["consume", "t", "--bootstrap", "127.0.0.1:9", "--follow"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--features kafka"), "{stderr}");
}

#[test]
fn follow_needs_bootstrap_and_bootstrap_needs_follow() {
    for args in [
        &["consume", "t", "--follow", "--data-dir", "x"][..],
        &["consume", "t", "--bootstrap", "127.0.0.1:9"][..],
    ] {
        let output = Command::new(BIN).args(args).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
    }
}
