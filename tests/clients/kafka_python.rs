//! kafka-python against the listener: its default (idempotent) producer, and a group
//! consumer committing by hand that resumes from its commits after the broker restarts.

use crate::clients::{self, Client};
use crate::common::{args, assert_read_back_natively, Broker, RUN};

fn producer() -> Option<Client> {
    clients::python("kafka_python_produce.py")
}

#[test]
fn idempotent_producer_reads_back_natively() {
    let Some(produce) = producer() else { return };
    let b = Broker::start();
    b.create("kp", 3);
    let produced = produce.run_json(
        &args(
            &b.bootstrap,
            "kp",
            &["--count", "30", "--compression", "gzip"],
        ),
        RUN,
    );
    assert_eq!(produced["idempotent"], true, "{produced}");
    assert_read_back_natively(&b, "kp", &produced, "r");
}
