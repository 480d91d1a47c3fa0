//! The brokers a Kafka target runs against, each a child process of the test
//! ([`crate::process::Process`]: killed when dropped or when the test thread that started it
//! ends): `nanokafka serve` on a temporary data directory, or tansu with its in-memory engine.

use std::path::Path;
use std::time::Duration;

use crate::process::{Log, Process};
use crate::tansu::Tansu;

/// How long a broker may take to say it is ready.
const STARTUP: Duration = Duration::from_secs(30);

/// A running broker process.
pub struct Broker {
    process: Process,
    /// `host:port`, for `bootstrap.servers`.
    pub bootstrap: String,
}

impl Broker {
    /// Its output, as a handle that outlives it.
    pub fn log(&self) -> Log {
        self.process.log()
    }
}

/// `nanokafka serve` on `data_dir`, on a port it picks. New groups rebalance at once
/// (`--initial-rebalance-delay-ms 0`) instead of waiting Kafka's 3 s for more members.
pub fn serve(data_dir: &Path) -> Broker {
    let mut process = Process::serve(&[
        "--data-dir",
        data_dir.to_str().expect("a UTF-8 temporary path"),
        "--listen",
        "127.0.0.1:0",
        "--initial-rebalance-delay-ms",
        "0",
        "--fsync",
        "never",
    ]);
    let bootstrap = process.listening_addr(STARTUP).to_string();
    Broker { process, bootstrap }
}

/// tansu 0.6.0 with its in-memory engine on a free loopback port.
pub fn tansu(binary: &Path) -> Broker {
    let Tansu { process, bootstrap } = Tansu::start(binary, STARTUP);
    Broker { process, bootstrap }
}
