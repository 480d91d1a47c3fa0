//! aiokafka against the listener: a producer with acks 1 and all, a group consumer that
//! commits by hand and resumes at its commits.

use crate::clients::{self, Client};
use crate::common::{
    args, next_offsets, read_back_natively, script_commits, script_records, Broker, Stamps, RUN,
};

fn producer() -> Option<Client> {
    clients::python("aiokafka_produce.py")
}

#[test]
fn producer_acks_1_and_all_read_back_natively() {
    let Some(produce) = producer() else { return };
    let b = Broker::start();
    for (topic, acks, codec) in [("ak1", "1", "lz4"), ("akall", "all", "snappy")] {
        b.create(topic, 3);
        let produced = produce.run_json(
            &args(
                &b.bootstrap,
                topic,
                &["--count", "30", "--acks", acks, "--compression", codec],
            ),
            RUN,
        );
        read_back_natively(&b, topic, &produced, "r", Stamps::AtMost);
    }
}

#[test]
fn group_consumer_commits_what_it_read() {
    let (Some(produce), Some(consume)) = (producer(), clients::python("aiokafka_consume.py"))
    else {
        return;
    };
    let b = Broker::start();
    b.create("akg", 3);
    let produced = produce.run_json(
        &args(&b.bootstrap, "akg", &["--count", "30", "--acks", "all"]),
        RUN,
    );
    // Half now, the rest in a second run of the same group: it resumes at the commits.
    let first = consume.run_json(
        &args(&b.bootstrap, "akg", &["akg-group", "--count", "15"]),
        RUN,
    );
    let mut read = script_records(&first);
    assert_eq!(script_commits(&first), next_offsets(&read));
    let lag: u64 = b.broker.lag("akg", "akg-group").unwrap().values().sum();
    assert_eq!(lag, 15);
    let second = consume.run_json(
        &args(&b.bootstrap, "akg", &["akg-group", "--count", "15"]),
        RUN,
    );
    read.extend(script_records(&second));
    read.sort();
    assert_eq!(read, script_records(&produced));
    assert_eq!(script_commits(&second), next_offsets(&read));
    let lag = b.broker.lag("akg", "akg-group").unwrap();
    assert!(lag.values().all(|&l| l == 0), "{lag:?}");
}
