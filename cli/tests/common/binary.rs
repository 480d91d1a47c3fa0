//! The `nanokafka` binary under test, run through the generic child-process runner of the
//! repository's `tests/common/process.rs` (mounted as the test crate's `process` module).
//! Cargo names a binary's path (`CARGO_BIN_EXE_nanokafka`) only to the tests of the package
//! that owns it, which is why this part lives here.

#![allow(dead_code)] // each test binary uses the part it needs

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use crate::process::Process;

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_nanokafka");

impl Process {
    /// `nanokafka serve ARGS` at its default log level (`info`, whatever `RUST_LOG` the test
    /// runs under): its log names the address it bound ([`Process::listening_addr`]).
    pub fn serve(args: &[&str]) -> Process {
        let mut command = Command::new(BIN);
        command.arg("serve").args(args).env("RUST_LOG", "info");
        Process::spawn(command)
    }

    /// `nanokafka ARGS` at the subcommand's own log level (`RUST_LOG` removed).
    pub fn nanokafka(args: &[&str]) -> Process {
        let mut command = Command::new(BIN);
        command.args(args).env_remove("RUST_LOG");
        Process::spawn(command)
    }

    /// The address of `nanokafka serve`'s Kafka listener, from its `listening on ADDR` line.
    pub fn listening_addr(&mut self, timeout: Duration) -> SocketAddr {
        let line = self.wait_for_line("'listening on ADDR' line", timeout, |l| {
            l.contains("listening on ")
        });
        let rest = line.split("listening on ").nth(1).unwrap_or_default();
        let addr = rest.split_whitespace().next().unwrap_or_default();
        addr.parse()
            .unwrap_or_else(|e| panic!("{line}: {e}:\n{}", self.lines().join("\n")))
    }
}
