//! `nanokafka`: the broker as a program of its own.
//!
//! `nanokafka serve` runs the broker on a data directory with the Kafka listener on, until
//! SIGINT or SIGTERM, then shuts it down cleanly (listener stopped, partitions synced and
//! closed, data-directory lock released) and exits 0.
//!
//! `nanokafka export` copies a data directory to a Kafka cluster (resumable), `nanokafka
//! import` a cluster's topics into a data directory: built with the `kafka` feature; without
//! it they exit 2 saying so.
//!
//! The inspection subcommands read a stopped data directory, one module per group: `topics`
//! (list, describe), `groups` (list, describe, lag), `consume`, `verify` (all with
//! `--data-dir`, refused at once when a running broker holds the directory's lock), and
//! `dump` (one segment file, no lock). Each prints a table, or with `--json` one JSON
//! document (`consume`: one per record); `offline` holds what they share.
//!
//! The write subcommands change a stopped data directory the same way (its lock taken,
//! refused at once when a running broker holds it): `topics create|delete`, `produce`
//! (stdin lines) and `groups reset-offsets`. `quotas list|set|remove` changes the client
//! quotas file without the lock: a running `serve` of the directory rereads it.
//!
//! `users` adds, deletes and lists the SCRAM users of a data directory; it edits only their
//! credential store, so it works beside a running serve.
//!
//! Exit codes: 0 after a clean shutdown, a complete transfer or an inspection; 1 when the
//! broker cannot start or stop cleanly (the data directory locked by another broker, a port
//! taken, an unreadable directory), a transfer failed, an inspection failed (a locked
//! directory, an unknown topic or group), a write was refused (the topic exists, the group
//! has live members, an offset out of range, a bad input line) or `verify`/`dump` found
//! damage; 2 for a bad command
//! line (and for a transfer in a binary built without the `kafka` feature).

mod acls;
mod consume;
mod dump;
mod groups;
mod offline;
mod produce;
mod quotas;
mod reset;
mod serve;
mod time;
mod topics;
mod transfer;
mod users;
mod verify;

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
    // Boxed: its flags (TLS among them) make it far larger than the other commands' args.
    Serve(Box<serve::ServeArgs>),
    /// Copy a data directory's topics and group offsets to a Kafka cluster; stopped, it
    /// resumes without duplicates when run again (needs a build with `--features kafka`).
    Export(transfer::ExportArgs),
    /// Copy a Kafka cluster's topics and group offsets into a data directory (needs a build
    /// with `--features kafka`).
    Import(transfer::ImportArgs),
    /// Inspect a stopped data directory's topics, or create and delete them.
    #[command(subcommand)]
    Topics(topics::TopicsCommand),
    /// Inspect a stopped data directory's consumer groups and their lag, or reset their
    /// offsets.
    #[command(subcommand)]
    Groups(groups::GroupsCommand),
    /// List, add and remove the ACLs a `serve --authorizer` enforces (kafka-acls'
    /// vocabulary); a running serve sees a change at its next request.
    #[command(subcommand)]
    Acls(acls::AclsCommand),
    /// Print a stopped data directory's records, without committing or joining a group.
    Consume(consume::ConsumeArgs),
    /// Write stdin's lines to a topic of a stopped data directory, one record per line.
    Produce(produce::ProduceArgs),
    /// Show the batches of one segment file, like Kafka's kafka-dump-log (no lock needed).
    Dump(dump::DumpArgs),
    /// Check every segment and index of a stopped data directory; exit 1 when damaged.
    Verify(offline::OfflineArgs),
    /// List, set or remove the Kafka listener's client quotas (a running `serve` of the
    /// same data directory applies a change within a second).
    #[command(subcommand)]
    Quotas(quotas::QuotasCommand),
    /// Add, delete and list the SCRAM users of a data directory (works beside a running
    /// serve, which applies changes to the next login).
    #[command(subcommand)]
    Users(users::UsersCommand),
}

fn main() -> ExitCode {
    // Usage errors exit 2 (clap's convention); `--help` and `--version` exit 0.
    let cli = Cli::parse();
    // A transfer reports on stderr itself: the embedded broker's routine lines (partitions
    // opened, topics created) would drown it.
    let json_log = matches!(&cli.command, Command::Serve(args) if args.json);
    init_logging(
        match cli.command {
            Command::Serve(_) => "info",
            _ => "warn",
        },
        json_log,
    );
    match cli.command {
        Command::Serve(args) => serve::run(*args),
        Command::Export(args) => transfer::export(args),
        Command::Import(args) => transfer::import(args),
        Command::Topics(command) => topics::run(command),
        Command::Groups(command) => groups::run(command),
        Command::Acls(command) => acls::run(command),
        Command::Consume(args) => consume::run(args),
        Command::Produce(args) => produce::run(args),
        Command::Dump(args) => dump::run(args),
        Command::Verify(args) => verify::run(args),
        Command::Quotas(command) => quotas::run(command),
        Command::Users(command) => users::run(command),
    }
}

/// Log lines on stderr, `default` and up unless RUST_LOG says otherwise; colours only on a
/// terminal, so that a supervisor's log file gets plain text; JSON objects with `json`.
fn init_logging(default: &str, json: bool) {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let log = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match json {
        true => log.json().init(),
        false => log.with_ansi(std::io::stderr().is_terminal()).init(),
    }
}
