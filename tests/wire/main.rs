//! The Kafka listener through its socket: requests encoded by an independent codec
//! (kafka-protocol), bad and hostile requests, and the protocol's known pitfalls.

mod client;
mod common;

mod basics;
mod hostile;
mod sasl;
