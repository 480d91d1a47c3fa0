//! Real Kafka clients against the embedded listener: kcat (librdkafka), kafka-python,
//! confluent-kafka (librdkafka), aiokafka, Quix Streams (on confluent-kafka) and kafkajs, each run by `tests/common/clients.rs`
//! (a missing client is skipped with a message, except under `CI`) against a broker of its
//! own in a temp dir. Where a client and the listener disagree, the client is right: the fix
//! goes into the listener with a raw-wire test in `tests/wire`.

#[path = "../common/clients.rs"]
mod clients;
mod common;
#[path = "../common/tls.rs"]
mod tls_certs;

mod acls;
mod aiokafka;
mod compacted;
mod confluent;
mod consumer_protocol;
mod cross;
mod kafka_python;
mod kafkajs;
mod kcat;
mod quix;
mod schema_registry;
mod scram;
mod tls;
