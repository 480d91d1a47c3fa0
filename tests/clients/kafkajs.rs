//! kafkajs against the listener: its producer, plain and idempotent.

use crate::clients::{self, Client};
use crate::common::{args, assert_read_back_natively, Broker, RUN};

fn producer() -> Option<Client> {
    clients::node("kafkajs_produce.js")
}

#[test]
fn producer_plain_and_idempotent_read_back_natively() {
    let Some(produce) = producer() else { return };
    let b = Broker::start();
    for (topic, extra) in [
        ("kj", &["--compression", "gzip"][..]),
        ("kjidem", &["--idempotent"][..]),
    ] {
        b.create(topic, 3);
        let mut more = vec!["--count", "30"];
        more.extend_from_slice(extra);
        let produced = produce.run_json(&args(&b.bootstrap, topic, &more), RUN);
        assert_read_back_natively(&b, topic, &produced, "r");
    }
}
