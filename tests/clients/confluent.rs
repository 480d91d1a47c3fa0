//! confluent-kafka (librdkafka) against the listener: a producer reading its offsets from
//! delivery reports with every acks setting, idempotent or not.

use crate::clients::{self, Client};
use crate::common::{args, assert_read_back_natively, Broker, RUN};

fn producer() -> Option<Client> {
    clients::python("confluent_produce.py")
}

#[test]
fn producer_delivery_reports_with_each_acks() {
    let Some(produce) = producer() else { return };
    let b = Broker::start();
    let runs: [(&str, &[&str]); 4] = [
        (
            "all-idem",
            &["--acks", "all", "--idempotent", "--compression", "zstd"],
        ),
        ("all", &["--acks", "all", "--compression", "gzip"]),
        ("one", &["--acks", "1", "--compression", "lz4"]),
        ("zero", &["--acks", "0", "--compression", "snappy"]),
    ];
    std::thread::scope(|s| {
        for (topic, extra) in runs {
            let (b, produce) = (&b, &produce);
            s.spawn(move || {
                b.create(topic, 2);
                let mut more = vec!["--count", "25", "--partitioner", "murmur2_random"];
                more.extend_from_slice(extra);
                let produced = produce.run_json(&args(&b.bootstrap, topic, &more), RUN);
                let offsets_known = produced["records"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|r| r["offset"].as_i64() >= Some(0));
                assert_eq!(offsets_known, topic != "zero", "{produced}");
                assert_read_back_natively(b, topic, &produced, "r");
            });
        }
    });
}
