//! `nanokafka`: the broker as a program of its own.
//!
//! `nanokafka serve` runs the broker on a data directory with the Kafka listener on, until
//! SIGINT or SIGTERM, then shuts it down cleanly (listener stopped, partitions synced and
//! closed, data-directory lock released) and exits 0.
//!
//! Exit codes: 0 after a clean shutdown; 1 when the broker cannot start or stop cleanly (the
//! data directory locked by another broker, a port taken, an unreadable directory); 2 for a
//! bad command line.

mod serve;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "nanokafka",
    version,
    about = "An embedded, single-process, Kafka-style log broker"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve a data directory to Kafka clients until SIGINT or SIGTERM.
    Serve(serve::ServeArgs),
}

fn main() -> ExitCode {
    // Usage errors exit 2 (clap's convention); `--help` and `--version` exit 0.
    let cli = Cli::parse();
    init_logging();
    match cli.command {
        Command::Serve(args) => serve::run(args),
    }
}

/// Log lines on stderr, `info` and up unless RUST_LOG says otherwise; colours only on a
/// terminal, so that a supervisor's log file gets plain text.
fn init_logging() {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}
