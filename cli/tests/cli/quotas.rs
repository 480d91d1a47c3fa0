//! `nanokafka quotas`: set, list and remove client quotas in a data directory's quotas file,
//! and bad input refused with nothing changed.

use crate::{run, stdout};

#[test]
fn quotas_are_set_listed_and_removed_and_bad_input_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    nanokafka::NanoKafka::builder()
        .data_dir(dir.path())
        .build()
        .unwrap()
        .shutdown()
        .unwrap();
    let d = dir.path().to_str().unwrap();
    let set = run(&[
        "quotas",
        "set",
        "--data-dir",
        d,
        "--client-id",
        "app",
        "producer_byte_rate=1048576",
        "request_percentage=12.5",
    ]);
    assert!(set.status.success(), "{set:?}");
    let set = run(&[
        "quotas",
        "set",
        "--data-dir",
        d,
        "--user",
        "alice",
        "--default-client-id",
        "consumer_byte_rate=2048",
    ]);
    assert!(set.status.success(), "{set:?}");
    let listed = "client-id=app\tproducer_byte_rate\t1048576\n\
                  client-id=app\trequest_percentage\t12.5\n\
                  user=alice,client-id=<default>\tconsumer_byte_rate\t2048\n";
    assert_eq!(stdout(&run(&["quotas", "list", "--data-dir", d])), listed);
    for bad in [
        vec![
            "quotas",
            "set",
            "--data-dir",
            d,
            "--client-id",
            "app",
            "producer_byte_rate=0",
        ],
        vec![
            "quotas",
            "set",
            "--data-dir",
            d,
            "--client-id",
            "app",
            "producer_byte_rate=1.5",
        ],
        vec![
            "quotas",
            "set",
            "--data-dir",
            d,
            "--client-id",
            "app",
            "byte_rate=1",
        ],
        vec!["quotas", "set", "--data-dir", d, "producer_byte_rate=1"],
        vec![
            "quotas",
            "remove",
            "--data-dir",
            d,
            "--client-id",
            "app",
            "nope",
        ],
    ] {
        let out = run(&bad);
        assert_eq!(out.status.code(), Some(1), "{bad:?}");
        assert!(String::from_utf8_lossy(&out.stderr).starts_with("error: "));
    }
    assert_eq!(stdout(&run(&["quotas", "list", "--data-dir", d])), listed);
    let removed = run(&[
        "quotas",
        "remove",
        "--data-dir",
        d,
        "--client-id",
        "app",
        "producer_byte_rate",
        "request_percentage",
    ]);
    assert!(removed.status.success(), "{removed:?}");
    assert_eq!(
        stdout(&run(&["quotas", "list", "--data-dir", d])),
        "user=alice,client-id=<default>\tconsumer_byte_rate\t2048\n"
    );
}
