//! The Kafka side of NanoKafka (`kafka` feature): moving a data directory to a Kafka cluster
//! and back ([`transfer`]).

pub mod transfer;
