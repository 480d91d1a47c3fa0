//! `nanokafka export` and `nanokafka import` (the `kafka` feature) against a Kafka cluster
//! that is a `nanokafka serve` process of its own (and tansu, when installed): a data
//! directory exported and imported back keeps every record and committed offset byte for
//! byte; an interrupted export resumes without duplicating a record; targets an export cannot
//! account for are refused with nothing changed.
//!
//! `cargo test --features kafka --test kafka_transfer`

#![cfg(feature = "kafka")]

#[path = "../common/binary.rs"]
mod binary;
#[path = "../../../tests/common/client_batch.rs"]
mod client_batch;
#[path = "../../../tests/common/process.rs"]
mod process;
/// tansu, the second Kafka cluster (`tansu.rs` is the test module).
#[path = "../../../tests/common/tansu.rs"]
mod tansu_broker;

mod harness;

mod refusals;
mod resume;
mod round_trip;
mod tansu;
