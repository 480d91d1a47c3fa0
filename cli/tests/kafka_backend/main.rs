//! The Kafka backend against the embedded broker: the behaviour users rely on, each test body
//! written once and run against three targets (`target.rs`): the embedded broker, the Kafka
//! backend on `nanokafka serve`, and the Kafka backend on tansu. Where the backends differ by
//! design, a `difference_*` test asserts each side's documented behaviour
//! (`differences.rs`). Needs the `kafka` feature:
//! `cargo test --features kafka --test kafka_backend`.

#![cfg(feature = "kafka")]

#[path = "../common/binary.rs"]
mod binary;
#[path = "../../../tests/common/client_batch.rs"]
mod client_batch;
#[path = "../../../tests/common/process.rs"]
mod process;
#[path = "../../../tests/common/tansu.rs"]
mod tansu;
#[path = "../../../tests/common/watchdog.rs"]
mod watchdog;

mod brokers;
mod target;
mod wait;

mod admin;
mod consumers;
mod delete_records;
mod differences;
mod embedded_only;
mod flat;
mod groups;
mod lifecycle;
mod produce;
mod records;
mod stream;
mod subscribe;
mod tables;
