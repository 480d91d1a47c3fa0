//! `nanokafka export` and `nanokafka import`: a data directory to a Kafka cluster and back
//! (`nanokafka::transfer`). Built with the `kafka` feature only; without it both
//! subcommands are still listed, and exit 2 saying how to get them.

use std::path::PathBuf;
use std::process::ExitCode;

/// What both subcommands say when the binary was built without the feature.
#[cfg(not(feature = "kafka"))]
const NEEDS_FEATURE: &str = "this nanokafka was built without the `kafka` feature: rebuild it \
     with `--features kafka` (e.g. `cargo install --path cli --features kafka` in a checkout)";

#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// The data directory to export. Nothing else may have it open: export takes its lock.
    #[arg(long, value_name = "DIR")]
    data_dir: PathBuf,

    /// The Kafka cluster to export to (host:port, or a comma-separated list).
    #[arg(long, value_name = "HOST:PORT")]
    to: String,

    /// A librdkafka setting for every client, e.g. `-X security.protocol=SASL_SSL`
    /// (repeatable).
    #[arg(short = 'X', long = "kafka-setting", value_name = "KEY=VALUE")]
    settings: Vec<String>,

    /// The replication factor of the topics export creates [default: the cluster's].
    #[arg(long, value_name = "N")]
    replication_factor: Option<i32>,

    /// Stop after N records, as a crash would (testing the resume rule).
    #[arg(long, value_name = "N", hide = true)]
    max_records: Option<u64>,

    /// Also print the final count as one JSON document on stdout (progress stays on
    /// stderr).
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// The Kafka cluster to import from (host:port, or a comma-separated list).
    #[arg(long, value_name = "HOST:PORT")]
    from: String,

    /// The data directory to import into: created if missing, and without any of the
    /// cluster's topics. Nothing else may have it open.
    #[arg(long, value_name = "DIR")]
    data_dir: PathBuf,

    /// A librdkafka setting for every client, e.g. `-X security.protocol=SASL_SSL`
    /// (repeatable).
    #[arg(short = 'X', long = "kafka-setting", value_name = "KEY=VALUE")]
    settings: Vec<String>,

    /// Also print the final count as one JSON document on stdout (progress stays on
    /// stderr).
    #[arg(long)]
    json: bool,
}

/// `KEY=VALUE` pairs, or the usage error.
#[cfg(feature = "kafka")]
fn settings(words: &[String]) -> Result<Vec<(String, String)>, String> {
    words
        .iter()
        .map(|word| match word.split_once('=') {
            Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
            _ => Err(format!("-X takes KEY=VALUE, not '{word}'")),
        })
        .collect()
}

fn usage(message: &str) -> ExitCode {
    eprintln!("error: {message}\n\nFor more information, try '--help'.");
    ExitCode::from(2)
}

#[cfg(not(feature = "kafka"))]
pub fn export(_: ExportArgs) -> ExitCode {
    usage(NEEDS_FEATURE)
}

#[cfg(not(feature = "kafka"))]
pub fn import(_: ImportArgs) -> ExitCode {
    usage(NEEDS_FEATURE)
}

#[cfg(feature = "kafka")]
pub fn export(args: ExportArgs) -> ExitCode {
    use nanokafka::transfer::{export, ExportOptions};
    let settings = match settings(&args.settings) {
        Ok(settings) => settings,
        Err(message) => return usage(&message),
    };
    let mut options = ExportOptions::new(&args.data_dir, &args.to);
    for (key, value) in settings {
        options = options.kafka_setting(key, value);
    }
    if let Some(factor) = args.replication_factor {
        options = options.replication_factor(factor);
    }
    if let Some(records) = args.max_records {
        options = options.max_records(records);
    }
    let mut shown = progress::Shown::new("exported", args.json);
    let summary = export(&options, |p| shown.show(p));
    shown.finish(summary, "exported", &args.to)
}

#[cfg(feature = "kafka")]
pub fn import(args: ImportArgs) -> ExitCode {
    use nanokafka::transfer::{import, ImportOptions};
    let settings = match settings(&args.settings) {
        Ok(settings) => settings,
        Err(message) => return usage(&message),
    };
    let mut options = ImportOptions::new(&args.from, &args.data_dir);
    for (key, value) in settings {
        options = options.kafka_setting(key, value);
    }
    let mut shown = progress::Shown::new("imported", args.json);
    let summary = import(&options, |p| shown.show(p));
    let into = args.data_dir.display().to_string();
    shown.finish(summary, "imported", &into)
}

/// Progress on stderr: a line per partition and per note; on a terminal, also a line that
/// counts a partition's records as they go, rewritten in place.
#[cfg(feature = "kafka")]
mod progress {
    use std::io::{IsTerminal, Write};
    use std::process::ExitCode;
    use std::time::{Duration, Instant};

    use nanokafka::transfer::{Progress, TransferSummary};

    /// How often the terminal's counting line is rewritten.
    const REDRAW: Duration = Duration::from_millis(200);

    pub struct Shown {
        verb: &'static str,
        terminal: bool,
        drawn: Option<Instant>,
        /// `--json`: the final count also goes to stdout as a JSON document.
        json: bool,
    }

    impl Shown {
        pub fn new(verb: &'static str, json: bool) -> Self {
            Shown {
                verb,
                terminal: std::io::stderr().is_terminal(),
                drawn: None,
                json,
            }
        }

        pub fn show(&mut self, progress: &Progress<'_>) {
            match *progress {
                Progress::Records {
                    topic,
                    partition,
                    copied,
                    total,
                } if self.terminal && self.drawn.is_none_or(|at| at.elapsed() >= REDRAW) => {
                    eprint!("\r\x1b[K{topic}[{partition}] {copied}/{total} records");
                    let _ = std::io::stderr().flush();
                    self.drawn = Some(Instant::now());
                }
                Progress::Records { .. } => {}
                Progress::PartitionDone {
                    topic,
                    partition,
                    copied,
                    already,
                } => {
                    self.clear();
                    let earlier = match already {
                        0 => String::new(),
                        n => format!(" ({n} by an earlier run)"),
                    };
                    eprintln!(
                        "{} {topic}[{partition}]: {copied} records{earlier}",
                        self.verb
                    );
                }
                Progress::TopicCreated { topic, partitions } => {
                    self.clear();
                    eprintln!("created topic {topic} ({partitions} partitions)");
                }
                Progress::Groups { groups, offsets } => {
                    eprintln!("committed offsets of {groups} groups ({offsets} partitions)");
                }
                Progress::Note(note) => {
                    self.clear();
                    eprintln!("note: {note}");
                }
                _ => {}
            }
        }

        fn clear(&mut self) {
            if self.drawn.take().is_some() {
                eprint!("\r\x1b[K");
            }
        }

        /// The final count, or the error; the exit code.
        pub fn finish(
            mut self,
            summary: nanokafka::Result<TransferSummary>,
            verb: &str,
            place: &str,
        ) -> ExitCode {
            self.clear();
            if let (true, Ok(s)) = (self.json, &summary) {
                let document = serde_json::json!({
                    verb: place,
                    "complete": s.complete,
                    "records": s.records,
                    "already_copied": s.already_copied,
                    "topics": s.topics,
                    "partitions": s.partitions,
                    "topics_created": s.topics_created,
                    "groups": s.groups,
                    "offsets": s.offsets,
                });
                println!("{document}");
            }
            match summary {
                Ok(s) if s.complete => {
                    eprintln!(
                        "{verb} {} records of {} partitions in {} topics ({} created), offsets \
                         of {} groups: {place}",
                        s.records, s.partitions, s.topics, s.topics_created, s.groups
                    );
                    ExitCode::SUCCESS
                }
                Ok(s) => {
                    eprintln!(
                        "error: stopped after {} records as --max-records asked; run the same \
                         command again to finish",
                        s.records
                    );
                    ExitCode::from(1)
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::from(1)
                }
            }
        }
    }
}
