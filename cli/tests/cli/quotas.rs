//! `nanokafka quotas`: set, list and remove client quotas in a data directory's quotas file,
//! and bad input refused with nothing changed.

use std::process::Output;

use crate::{run, stdout};

/// Runs `nanokafka quotas COMMAND --data-dir DIR REST` (`rest` split on spaces).
fn quotas(dir: &str, command: &str, rest: &str) -> Output {
    let mut args = vec!["quotas", command, "--data-dir", dir];
    args.extend(rest.split_whitespace());
    run(&args)
}

#[test]
fn quotas_are_set_listed_and_removed_and_bad_input_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let broker = nanokafka::NanoKafka::builder()
        .data_dir(dir.path())
        .build()
        .unwrap();
    broker.shutdown().unwrap();
    let d = dir.path().to_str().unwrap();
    for set in [
        "--client-id app producer_byte_rate=1048576 request_percentage=12.5",
        "--user alice --default-client-id consumer_byte_rate=2048",
    ] {
        let out = quotas(d, "set", set);
        assert!(out.status.success(), "{out:?}");
    }
    let listed = "client-id=app\tproducer_byte_rate\t1048576\n\
                  client-id=app\trequest_percentage\t12.5\n\
                  user=alice,client-id=<default>\tconsumer_byte_rate\t2048\n";
    assert_eq!(stdout(&quotas(d, "list", "")), listed);
    for (command, bad) in [
        ("set", "--client-id app producer_byte_rate=0"),
        ("set", "--client-id app producer_byte_rate=1.5"),
        ("set", "--client-id app byte_rate=1"),
        ("set", "producer_byte_rate=1"),
        ("remove", "--client-id app nope"),
    ] {
        let out = quotas(d, command, bad);
        assert_eq!(out.status.code(), Some(1), "{bad}");
        assert!(String::from_utf8_lossy(&out.stderr).starts_with("error: "));
    }
    assert_eq!(stdout(&quotas(d, "list", "")), listed);
    let removed = quotas(
        d,
        "remove",
        "--client-id app producer_byte_rate request_percentage",
    );
    assert!(removed.status.success(), "{removed:?}");
    assert_eq!(
        stdout(&quotas(d, "list", "")),
        "user=alice,client-id=<default>\tconsumer_byte_rate\t2048\n"
    );
}
