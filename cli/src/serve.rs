//! `nanokafka serve`: the broker on a data directory with the Kafka listener on, until SIGINT
//! or SIGTERM; with `--metrics ADDR`, the broker's metrics (`nanokafka::metrics`) served in
//! Prometheus's text format over HTTP; with `--console ADDR`, the web console
//! (docs/console.md), read-only unless `--console-writes`; with `--schema-registry ADDR`, a
//! schema registry compatible with Confluent's REST API (docs/schema-registry.md).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use nanokafka::AutoCreate;
use nanokafka::{FsyncPolicy, ListenerConfig, NanoKafka, TlsConfig};
use tokio::signal::unix::{signal, Signal, SignalKind};

/// The environment variable the SASL/PLAIN password may come from, when no file is given.
pub const PASSWORD_ENV: &str = "NANOKAFKA_SASL_PLAIN_PASSWORD";

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// The data directory: created if missing, locked while served.
    #[arg(long, value_name = "DIR")]
    data_dir: PathBuf,

    /// Log one JSON object per line on stderr (time, level, message, fields) instead of
    /// text, for log collectors and scripts (e.g. the `listening on ADDR` line).
    #[arg(long)]
    pub json: bool,

    /// Where the Kafka listener binds (host:port; port 0 picks a free one). Any address but
    /// loopback exposes every topic to the network.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9092")]
    listen: String,

    /// When appends reach the disk: `always` (fdatasync before acknowledging), `never`
    /// (leave it to the OS), or `interval-ms N` (every N ms; the default is 1000).
    #[arg(long, num_args = 1..=2, value_names = ["POLICY", "MS"])]
    fsync: Option<Vec<String>>,

    /// Require SASL/PLAIN with this user; the password comes from
    /// --sasl-plain-password-file or the NANOKAFKA_SASL_PLAIN_PASSWORD environment variable.
    #[arg(long, value_name = "USER")]
    sasl_plain_user: Option<String>,

    /// Require SASL with SCRAM-SHA-256 or SCRAM-SHA-512, with the users `nanokafka users`
    /// keeps in the data directory (none yet is fine: add them while serving). May combine
    /// with --sasl-plain-user.
    #[arg(long)]
    sasl_scram: bool,

    /// How long the answer to a failed SASL authentication waits (Kafka's
    /// connection.failed.authentication.delay.ms) [default: 100].
    #[arg(long, value_name = "MS")]
    failed_authentication_delay_ms: Option<u64>,

    /// A file holding the SASL/PLAIN password (one trailing newline is ignored).
    #[arg(long, value_name = "FILE", requires = "sasl_plain_user")]
    sasl_plain_password_file: Option<PathBuf>,

    /// The largest request frame read from a client before it has authenticated with
    /// SASL (Kafka's sasl.server.max.receive.size) [default: 524288].
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1..))]
    sasl_max_receive_bytes: Option<u64>,

    /// How long a client has, from connecting, to authenticate with SASL before its
    /// connection is closed [default: 10000].
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..))]
    sasl_authentication_timeout_ms: Option<u64>,

    /// Close a connection with no request read and none being answered for this long
    /// (Kafka's connections.max.idle.ms) [default: 600000].
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..))]
    connections_max_idle_ms: Option<u64>,

    /// The most bytes all connections together may hold in requests being read or waiting
    /// to be answered (Kafka's queued.max.request.bytes); a connection whose request does
    /// not fit waits, and a request larger than this is refused [default: 268435456].
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1..))]
    queued_max_request_bytes: Option<u64>,

    /// Enforce ACLs on every Kafka request (Kafka's StandardAuthorizer): a request is allowed
    /// when an ACL of DATA_DIR/security/acls allows it and none denies it (see `nanokafka
    /// acls`), or when it comes from a super user. Off by default: everything is allowed.
    #[arg(long)]
    authorizer: bool,

    /// A principal allowed everything when --authorizer is on (Kafka's super.users), as
    /// User:NAME; repeat for more.
    #[arg(long, value_name = "User:NAME", requires = "authorizer")]
    super_user: Vec<String>,

    /// Never create a topic because a Metadata request names it (Kafka's
    /// auto.create.topics.enable=false).
    #[arg(long)]
    no_auto_create_topics: bool,

    /// The partition count of topics created without one: those a client's Metadata request
    /// auto-creates and CreateTopics asking for -1 (Kafka's num.partitions); 1 to 10000
    /// [default: 1].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=nanokafka::MAX_PARTITIONS as i64))]
    num_partitions: Option<u32>,

    /// Connections served at once; one more is accepted and closed at once [default: 1024].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_connections: Option<u32>,

    /// The most bytes a client's compressed batch may decompress to; a batch past it is
    /// refused whole [default and maximum: 128 MiB].
    #[arg(long, value_name = "BYTES")]
    max_decompressed_batch_bytes: Option<usize>,

    /// How long a Kafka client group's first rebalance waits for more members to join
    /// (Kafka's group.initial.rebalance.delay.ms); 0 completes it at once, as tests and
    /// single-consumer setups want; at most 2147483647, Kafka's limit [default: 3000].
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(..=i32::MAX as u64))]
    initial_rebalance_delay_ms: Option<u64>,

    /// How often a consumer-protocol (KIP-848, group.protocol=consumer) member is told to
    /// heartbeat (Kafka's group.consumer.heartbeat.interval.ms): how soon it learns of a new
    /// assignment; below the session timeout [default: 5000, or a third of a shorter session
    /// timeout].
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..=i32::MAX as u64))]
    consumer_heartbeat_interval_ms: Option<u64>,

    /// Serve the broker's metrics in Prometheus's text format over HTTP at this address
    /// (ip:port, e.g. 127.0.0.1:9464; any path answers). Off by default.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<SocketAddr>,

    /// Serve the web console (pages and a JSON API over the topics, records and groups) on
    /// this address (host:port, e.g. 127.0.0.1:8080, or a bare port on loopback). With
    /// --sasl-plain-user it asks for the same user and password. Off unless given.
    #[arg(long, value_name = "ADDR")]
    console: Option<String>,

    /// Let the console create, alter and delete topics, produce test records, reset offsets
    /// and delete records (each after a confirmation, each logged).
    #[arg(long, requires = "console")]
    console_writes: bool,

    /// Serve a schema registry compatible with Confluent's REST API (subjects, versions,
    /// schemas by id, compatibility; kept in the compacted topic _schemas) on this address
    /// (host:port, e.g. 127.0.0.1:8081, or a bare port on loopback). No authentication: keep
    /// it on loopback. Off unless given.
    #[arg(long, value_name = "ADDR")]
    schema_registry: Option<String>,

    /// Serve TLS with this certificate (PEM; the server's certificate first, then its
    /// chain): on --listen, or on --tls-listen beside plaintext on --listen. The console, if
    /// on, serves HTTPS with it.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,

    /// The private key of --tls-cert (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,

    /// Mutual TLS: require a client certificate signed by a CA in this file (PEM); the
    /// client acts as User:<its subject DN> unless it authenticates with SASL.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_client_ca: Option<PathBuf>,

    /// Serve TLS on this address (host:port) beside plaintext on --listen; one broker to
    /// clients on either.
    #[arg(long, value_name = "ADDR", requires = "tls_cert")]
    tls_listen: Option<String>,
}

/// A command line that parses but does not make sense; reported like clap's own errors.
struct UsageError(String);

impl ServeArgs {
    fn fsync(&self) -> Result<FsyncPolicy, UsageError> {
        let Some(words) = &self.fsync else {
            return Ok(FsyncPolicy::default());
        };
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        let interval = |ms: &str| match ms.parse::<u64>() {
            Ok(ms) if ms > 0 => Ok(FsyncPolicy::Interval(Duration::from_millis(ms))),
            _ => Err(UsageError(format!(
                "--fsync interval-ms takes a whole number of milliseconds above 0, not '{ms}'"
            ))),
        };
        match words.as_slice() {
            ["always"] => Ok(FsyncPolicy::Always),
            ["never"] => Ok(FsyncPolicy::Never),
            ["interval-ms", ms] => interval(ms),
            [word] if word.starts_with("interval-ms=") => interval(&word["interval-ms=".len()..]),
            _ => Err(UsageError(format!(
                "--fsync takes 'always', 'never' or 'interval-ms N', not '{}'",
                words.join(" ")
            ))),
        }
    }

    /// The TLS settings, for the listener and the console.
    fn tls(&self) -> Option<TlsConfig> {
        let (cert, key) = (self.tls_cert.as_ref()?, self.tls_key.as_ref()?);
        let tls = TlsConfig::new(cert, key);
        Some(match &self.tls_client_ca {
            Some(ca) => tls.client_ca(ca),
            None => tls,
        })
    }

    fn listener(&self) -> Result<ListenerConfig, UsageError> {
        let mut config = ListenerConfig::new(self.listen.clone());
        if let Some(addr) = &self.tls_listen {
            config = config.tls_listen(addr.clone());
        }
        if self.no_auto_create_topics {
            config = config.auto_create_topics(AutoCreate::Off);
        }
        if let Some(max) = self.max_connections {
            config = config.max_connections(max as usize);
        }
        if let Some(ms) = self.initial_rebalance_delay_ms {
            config = config.initial_rebalance_delay(Duration::from_millis(ms));
        }
        if let Some(ms) = self.consumer_heartbeat_interval_ms {
            config = config.consumer_heartbeat_interval(Duration::from_millis(ms));
        }
        // Past what a usize holds is no bound at all, as `usize::MAX` is to the listener.
        let bytes = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        if let Some(n) = self.sasl_max_receive_bytes {
            config = config.sasl_max_receive_bytes(bytes(n));
        }
        if let Some(ms) = self.sasl_authentication_timeout_ms {
            config = config.sasl_authentication_timeout(Duration::from_millis(ms));
        }
        if let Some(ms) = self.connections_max_idle_ms {
            config = config.connections_max_idle(Duration::from_millis(ms));
        }
        if self.sasl_scram {
            config = config.sasl_scram();
        }
        if let Some(ms) = self.failed_authentication_delay_ms {
            config = config.failed_authentication_delay(Duration::from_millis(ms));
        }
        if let Some(n) = self.queued_max_request_bytes {
            config = config.queued_max_request_bytes(bytes(n));
        }
        if self.authorizer {
            if let Some(bad) = self
                .super_user
                .iter()
                .find(|u| !matches!(u.split_once(':'), Some(("User", name)) if !name.is_empty()))
            {
                return Err(UsageError(format!(
                    "--super-user takes a principal of the form User:NAME, not '{bad}'"
                )));
            }
            config = config.authorizer(self.super_user.clone());
        }
        if let Some(user) = &self.sasl_plain_user {
            let password = self.password()?;
            // PLAIN separates its fields with NUL: such a user could never authenticate.
            if user.is_empty() || user.contains('\0') {
                return Err(UsageError(
                    "--sasl-plain-user must be a non-empty name without NUL".into(),
                ));
            }
            config = config.sasl_plain(user.clone(), password);
        }
        Ok(config)
    }

    /// The password from the file, else from the environment; never from the command line,
    /// where any local user could read it in the process list.
    fn password(&self) -> Result<String, UsageError> {
        let password = match &self.sasl_plain_password_file {
            Some(file) => {
                let text = std::fs::read_to_string(file).map_err(|e| {
                    UsageError(format!(
                        "cannot read the SASL/PLAIN password file {}: {e}",
                        file.display()
                    ))
                })?;
                let line = text.strip_suffix('\n').unwrap_or(&text);
                line.strip_suffix('\r').unwrap_or(line).to_owned()
            }
            None => std::env::var(PASSWORD_ENV).map_err(|_| {
                UsageError(format!(
                    "--sasl-plain-user needs a password: --sasl-plain-password-file FILE or \
                     the {PASSWORD_ENV} environment variable"
                ))
            })?,
        };
        if password.is_empty() || password.contains('\0') {
            return Err(UsageError(
                "the SASL/PLAIN password must be non-empty and without NUL".into(),
            ));
        }
        Ok(password)
    }
}

pub fn run(args: ServeArgs) -> ExitCode {
    let settings = args.fsync().and_then(|fsync| Ok((fsync, args.listener()?)));
    let (fsync, listener) = match settings {
        Ok(settings) => settings,
        Err(UsageError(message)) => {
            eprintln!("error: {message}\n\nFor more information, try '--help'.");
            return ExitCode::from(2);
        }
    };
    // The signal handlers are installed before the broker starts, so a signal sent as soon
    // as the listener is up stops it cleanly rather than killing the process.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => return fail(format!("cannot start the signal runtime: {e}")),
    };
    let signals = {
        let _in_runtime = runtime.enter();
        signal(SignalKind::interrupt()).and_then(|int| Ok((int, signal(SignalKind::terminate())?)))
    };
    let (mut interrupt, mut terminate) = match signals {
        Ok(signals) => signals,
        Err(e) => return fail(format!("cannot handle SIGINT/SIGTERM: {e}")),
    };
    // Before the broker starts: its actors register their metrics' handles when created.
    if let Some(addr) = args.metrics {
        if let Err(e) = install_metrics(addr) {
            return fail(format!("cannot serve metrics on {addr}: {e}"));
        }
        tracing::info!("metrics on http://{addr}/metrics");
    }
    let sasl = args.sasl_plain_user.is_some();
    let scram = args.sasl_scram;
    let mut builder = NanoKafka::builder()
        .data_dir(&args.data_dir)
        .fsync(fsync)
        .listener(listener);
    if let Some(bytes) = args.max_decompressed_batch_bytes {
        builder = builder.max_decompressed_batch_bytes(bytes);
    }
    if let Some(partitions) = args.num_partitions {
        builder = builder.num_partitions(partitions);
    }
    if let Some(tls) = args.tls() {
        builder = builder.tls(tls);
    }
    if let Some(console) = &args.console {
        builder = builder
            .console(console.clone())
            .console_writes(args.console_writes);
    }
    if let Some(registry) = &args.schema_registry {
        builder = builder.schema_registry(registry.clone());
    }
    let broker = builder.build();
    let broker = match broker {
        Ok(broker) => broker,
        // DataDirLocked names the directory and its holder.
        Err(e) => return fail(format!("cannot start the broker: {e}")),
    };
    let Some(addr) = broker.listener_addr() else {
        return fail("the broker started without its listener".into());
    };
    tracing::info!(
        data_dir = %args.data_dir.display(),
        ?fsync,
        sasl_plain = sasl,
        tls = args.tls_cert.is_some() && args.tls_listen.is_none(),
        mutual_tls = args.tls_client_ca.is_some(),
        sasl_scram = scram,
        "listening on {addr}"
    );
    if let Some(tls_addr) = &args.tls_listen {
        tracing::info!("TLS listening on {tls_addr}");
    }
    if let Some(console) = broker.console_addr() {
        tracing::info!(
            writes = args.console_writes,
            "web console on {}://{console}/",
            if args.tls_cert.is_some() {
                "https"
            } else {
                "http"
            }
        );
    }
    if let Some(registry) = broker.schema_registry_addr() {
        tracing::info!("schema registry on http://{registry}/");
    }
    let name = runtime.block_on(wait_for_stop(&mut interrupt, &mut terminate));
    tracing::info!(signal = name, "shutting down");
    drop(runtime);
    match broker.shutdown() {
        Ok(()) => {
            tracing::info!("stopped cleanly");
            ExitCode::SUCCESS
        }
        Err(e) => fail(format!("the broker did not stop cleanly: {e}")),
    }
}

/// Latency buckets in seconds for the `*_seconds` histograms: 10 µs (a page-cache write) to
/// 2.5 s (a stalled disk).
const LATENCY_BUCKETS: [f64; 17] = [
    0.000_01, 0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025,
    0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

/// Installs the Prometheus recorder as the process's `metrics` recorder, with its HTTP
/// listener bound to `addr` (on its own thread) before this returns.
fn install_metrics(addr: SocketAddr) -> Result<(), String> {
    use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
    PrometheusBuilder::new()
        .with_http_listener(addr)
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &LATENCY_BUCKETS)
        .and_then(PrometheusBuilder::install)
        .map_err(|e| e.to_string())?;
    nanokafka::metrics::describe();
    Ok(())
}

/// Waits for SIGINT or SIGTERM; returns which.
async fn wait_for_stop(interrupt: &mut Signal, terminate: &mut Signal) -> &'static str {
    let interrupted = std::pin::pin!(interrupt.recv());
    let terminated = std::pin::pin!(terminate.recv());
    match futures::future::select(interrupted, terminated).await {
        futures::future::Either::Left(_) => "SIGINT",
        futures::future::Either::Right(_) => "SIGTERM",
    }
}

/// A plain `error:` line (not a log line), as for a usage error, then exit 1.
fn fail(message: String) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(1)
}
