//! Starting a broker with a listener on a free loopback port.

use std::net::SocketAddr;
use std::path::Path;

use nanokafka::{ListenerConfig, NanoKafka};

/// A broker in `dir` listening on a free loopback port, with rebalances that do not wait for
/// more members.
pub fn listening_broker(dir: &Path) -> (NanoKafka, SocketAddr) {
    listening_broker_with(dir, ListenerConfig::new("127.0.0.1:0"))
}

pub fn listening_broker_with(dir: &Path, config: ListenerConfig) -> (NanoKafka, SocketAddr) {
    let config = config.initial_rebalance_delay(std::time::Duration::ZERO);
    let broker = NanoKafka::builder()
        .data_dir(dir)
        .listener(config)
        .build()
        .unwrap();
    let addr = broker.listener_addr().expect("the broker listens");
    (broker, addr)
}
