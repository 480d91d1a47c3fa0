//! What the offline subcommands share: opening a data directory they read (or, for the
//! write subcommands, change), the error that ends a subcommand, and the two output forms
//! (an aligned table for people, one JSON document for programs).
//!
//! A data directory has one user at a time (its `.lock`): a directory a running broker
//! holds is refused at once, naming the holder, because the running broker is the one to
//! ask, through its Kafka listener.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use nanokafka::{Error, NanoKafka};

/// The `--data-dir` and `--json` every offline subcommand takes.
#[derive(Debug, clap::Args)]
pub struct OfflineArgs {
    /// The data directory to inspect. It must not be open in a running broker (inspect
    /// that one through its Kafka listener); it is only read.
    #[arg(long, value_name = "DIR")]
    pub data_dir: PathBuf,

    /// Print one JSON document on stdout instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// The `--data-dir` and `--json` every offline write subcommand takes.
#[derive(Debug, clap::Args)]
pub struct WriteArgs {
    /// The data directory to change. It must not be open in a running broker (change that
    /// one through its Kafka listener, or stop it first).
    #[arg(long, value_name = "DIR")]
    pub data_dir: PathBuf,

    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Why a subcommand failed: printed as one `error:` line, exit 1.
#[derive(Debug)]
pub struct Failure(pub String);

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure(e.to_string())
    }
}

/// Ends a subcommand: exit 0, or the `error:` line on stderr and exit 1.
pub fn finish(result: Result<(), Failure>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure(message)) => {
            eprintln!("error: {message}");
            ExitCode::from(1)
        }
    }
}

/// Opens the data directory at `dir` with the embedded broker, for reading.
///
/// A path that is not a data directory is refused before anything is opened, so a mistyped
/// path is not created; a locked one is refused with its holder and where to look instead.
///
/// # Errors
/// Not a data directory; locked; the broker's own errors.
pub fn open(dir: &Path) -> Result<NanoKafka, Failure> {
    check_data_dir(dir)?;
    NanoKafka::builder()
        .data_dir(dir)
        .build()
        .map_err(open_error(dir))
}

/// Opens the data directory at `dir` with the embedded broker, to change it: as [`open`],
/// with a refusal that says to stop the holder or go through its listener.
///
/// # Errors
/// Not a data directory; locked; the broker's own errors.
pub fn open_for_write(dir: &Path) -> Result<NanoKafka, Failure> {
    check_data_dir(dir)?;
    NanoKafka::builder()
        .data_dir(dir)
        .build()
        .map_err(|e| match e {
            Error::DataDirLocked { path, holder } => Failure(format!(
                "data directory {} is locked by a running broker ({holder}); nothing was \
                 changed: stop that broker first, or make the change live through its Kafka \
                 listener (the address `nanokafka serve --listen` or the service was given) \
                 with any Kafka client",
                path.display()
            )),
            e => Failure(format!("cannot open {}: {e}", dir.display())),
        })
}

/// The error for a topic `dir` does not have, listing those it has.
pub fn no_such_topic<'a>(
    topic: &str,
    dir: &Path,
    known: impl IntoIterator<Item = &'a String>,
) -> Failure {
    let known: Vec<&str> = known.into_iter().map(String::as_str).collect();
    let known = if known.is_empty() {
        "it has none".to_owned()
    } else {
        format!("it has: {}", known.join(", "))
    };
    Failure(format!("no topic '{topic}' in {} ({known})", dir.display()))
}

/// How an error opening `dir` is reported: a lock names its holder and where to look
/// instead.
pub fn open_error(dir: &Path) -> impl Fn(Error) -> Failure + '_ {
    move |e| match e {
        Error::DataDirLocked { path, holder } => Failure(format!(
            "data directory {} is locked by a running broker ({holder}); it is only read \
             offline: inspect it live through that broker's Kafka listener (the address \
             `nanokafka serve --listen` or the service was given) with any Kafka client, \
             or stop it first",
            path.display()
        )),
        e => Failure(format!("cannot open {}: {e}", dir.display())),
    }
}

/// Refuses a path that is not a data directory (no `format` file in it).
pub fn check_data_dir(dir: &Path) -> Result<(), Failure> {
    if dir
        .join(nanokafka::internals::inspect::FORMAT_FILE)
        .is_file()
    {
        return Ok(());
    }
    Err(Failure(format!(
        "{} is not a NanoKafka data directory (it has no {} file)",
        dir.display(),
        nanokafka::internals::inspect::FORMAT_FILE
    )))
}

/// Closes the broker (releasing the lock), reporting a failure to close.
pub fn close(broker: NanoKafka) -> Result<(), Failure> {
    broker
        .shutdown()
        .map_err(|e| Failure(format!("the data directory did not close cleanly: {e}")))
}

/// Prints `value` as one JSON document on stdout.
pub fn print_json(value: &serde_json::Value) {
    // A Value always serializes.
    println!(
        "{}",
        serde_json::to_string_pretty(value).unwrap_or_default()
    );
}

/// Prints rows under a header, each column as wide as its widest cell, two spaces apart.
pub fn print_table(header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        println!("{}", padded.join("  ").trim_end());
    };
    line(header.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
}

/// `Some(n)` as `n`, `None` as `-`.
pub fn or_dash(value: Option<u64>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| v.to_string())
}
