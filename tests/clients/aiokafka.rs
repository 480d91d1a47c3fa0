//! aiokafka against the listener: a producer with acks 1 and all.

use crate::clients::{self, Client};
use crate::common::{args, read_back_natively, Broker, Stamps, RUN};

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
