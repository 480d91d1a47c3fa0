//! The listener's settings: where it binds, what it lets a client send, who may talk to it.

use std::time::Duration;

use super::fetch_session::SessionLimits;

/// Kafka's `socket.request.max.bytes`: the largest request frame read.
pub const DEFAULT_MAX_FRAME_BYTES: usize = 100 << 20;
/// Connections served at once; one more is accepted and closed at once (logged).
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// Requests read ahead of the one being answered on a connection. Kafka answers one request
/// per connection at a time and so do we; this only bounds how many pipelined requests wait,
/// decoded, behind it. A client that sends more is simply not read until they are answered.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 16;
/// The most [`ListenerConfig::max_in_flight`] may be: each connection's queue is sized by it,
/// and no client pipelines anywhere near this many requests.
pub const MAX_IN_FLIGHT: usize = 1 << 16;
/// Kafka's `sasl.server.max.receive.size`: the largest frame read before a connection has
/// authenticated. Only ApiVersions and the SASL exchange are allowed then, and none of them
/// needs more, so an unauthenticated client cannot make the listener hold a large frame.
pub const DEFAULT_SASL_MAX_RECEIVE_BYTES: usize = 512 << 10;
/// How long a connection has, from its accept, to complete SASL authentication. Kafka has no
/// separate setting (its idle limit covers a stalled exchange); clients authenticate as soon
/// as they connect, so ten seconds is ample and keeps a silent connection from holding a
/// slot of `max_connections` for long.
pub const DEFAULT_SASL_AUTHENTICATION_TIMEOUT: Duration = Duration::from_secs(10);
/// Kafka's `connection.failed.authentication.delay.ms`: how long the answer to a failed SASL
/// authentication waits (on a timer, holding only its connection), so a client guessing
/// passwords gets one answer per delay per connection.
pub const DEFAULT_FAILED_AUTHENTICATION_DELAY: Duration = Duration::from_millis(100);
/// Kafka's `connections.max.idle.ms`: a connection with no request read and none being
/// answered for this long is closed.
pub const DEFAULT_CONNECTIONS_MAX_IDLE: Duration = Duration::from_secs(10 * 60);
/// Kafka's `queued.max.request.bytes` (unbounded in Kafka by default): the most bytes all
/// connections together may hold in request frames being read or waiting to be answered.
/// Two and a half of the largest frames: big produces still overlap, and no mix of clients
/// makes the listener hold more.
pub const DEFAULT_QUEUED_MAX_REQUEST_BYTES: usize = 256 << 20;
/// Kafka's `group.initial.rebalance.delay.ms`: how long a new group's first rebalance waits
/// for more members before it completes.
pub const DEFAULT_INITIAL_REBALANCE_DELAY: Duration = Duration::from_secs(3);
/// How often a consumer-protocol (KIP-848) member is told to heartbeat: Kafka's
/// `group.consumer.heartbeat.interval.ms` default (lowered to a third of a shorter session
/// timeout, see [`ListenerConfig::consumer_heartbeat_interval`]).
pub const DEFAULT_CONSUMER_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(5);

/// Kafka's `num.partitions` default: the partition count of a topic the listener creates
/// without being told one (see [`crate::NanoKafkaBuilder::num_partitions`]).
pub const DEFAULT_NUM_PARTITIONS: u32 = 1;

/// How the Kafka listener runs. Built with [`ListenerConfig::new`] and given to
/// [`crate::NanoKafkaBuilder::listener`], or implied by [`crate::NanoKafkaBuilder::listen`].
///
/// The listener binds loopback unless told otherwise: binding any other address exposes the
/// broker to the network and is logged as a warning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerConfig {
    pub(crate) addr: String,
    pub(crate) max_frame_bytes: usize,
    pub(crate) max_connections: usize,
    pub(crate) max_in_flight: usize,
    pub(crate) auto_create_topics: bool,
    /// The builder's `num_partitions`: the partition count of a topic created without one.
    pub(crate) num_partitions: u32,
    pub(crate) initial_rebalance_delay: Duration,
    pub(crate) consumer_heartbeat_interval: Option<Duration>,
    pub(crate) sasl_plain: Option<PlainCredentials>,
    pub(crate) sasl_scram: bool,
    pub(crate) failed_authentication_delay: Duration,
    pub(crate) sasl_max_receive_bytes: usize,
    pub(crate) sasl_authentication_timeout: Duration,
    pub(crate) connections_max_idle: Duration,
    pub(crate) queued_max_request_bytes: usize,
    pub(crate) fetch_sessions: SessionLimits,
    pub(crate) tls: Option<super::TlsConfig>,
    pub(crate) tls_addr: Option<String>,
    /// The super users when ACLs are enforced ([`ListenerConfig::authorizer`]); `None`:
    /// every request is allowed.
    pub(crate) authorizer: Option<Vec<String>>,
}

/// The one user SASL/PLAIN accepts.
#[derive(Clone, PartialEq, Eq)]
pub struct PlainCredentials {
    pub(crate) username: String,
    pub(crate) password: String,
}

impl std::fmt::Debug for PlainCredentials {
    /// The password never reaches a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlainCredentials")
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

impl ListenerConfig {
    /// Listen on `addr` (`host:port`; port 0 picks a free one, see
    /// [`crate::NanoKafka::listener_addr`]) with Kafka's defaults.
    pub fn new(addr: impl Into<String>) -> Self {
        ListenerConfig {
            addr: addr.into(),
            max_frame_bytes: DEFAULT_MAX_FRAME_BYTES,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            auto_create_topics: true,
            num_partitions: DEFAULT_NUM_PARTITIONS,
            initial_rebalance_delay: DEFAULT_INITIAL_REBALANCE_DELAY,
            consumer_heartbeat_interval: None,
            sasl_plain: None,
            sasl_scram: false,
            failed_authentication_delay: DEFAULT_FAILED_AUTHENTICATION_DELAY,
            sasl_max_receive_bytes: DEFAULT_SASL_MAX_RECEIVE_BYTES,
            sasl_authentication_timeout: DEFAULT_SASL_AUTHENTICATION_TIMEOUT,
            connections_max_idle: DEFAULT_CONNECTIONS_MAX_IDLE,
            queued_max_request_bytes: DEFAULT_QUEUED_MAX_REQUEST_BYTES,
            fetch_sessions: SessionLimits::default(),
            tls: None,
            tls_addr: None,
            authorizer: None,
        }
    }

    /// The largest request frame accepted (Kafka's `socket.request.max.bytes`, default 100
    /// MiB). A larger frame closes its connection before its body is read.
    pub fn max_frame_bytes(mut self, bytes: usize) -> Self {
        self.max_frame_bytes = bytes;
        self
    }

    /// Connections served at once (default 1024).
    pub fn max_connections(mut self, connections: usize) -> Self {
        self.max_connections = connections;
        self
    }

    /// Pipelined requests read ahead of the one being answered, per connection (default 16,
    /// at most [`MAX_IN_FLIGHT`]).
    pub fn max_in_flight(mut self, requests: usize) -> Self {
        self.max_in_flight = requests;
        self
    }

    /// Whether a Metadata request naming an unknown topic creates it (with the default topic
    /// config and the builder's `num_partitions`) when the client allows it (Kafka's `auto.create.topics.enable`, default on).
    pub fn auto_create_topics(mut self, enabled: AutoCreate) -> Self {
        self.auto_create_topics = enabled == AutoCreate::On;
        self
    }

    /// How long a group's first rebalance waits for more members (Kafka's
    /// `group.initial.rebalance.delay.ms`, default 3 s; 0 completes it at once).
    pub fn initial_rebalance_delay(mut self, delay: Duration) -> Self {
        self.initial_rebalance_delay = delay;
        self
    }

    /// The heartbeat interval a consumer-protocol (KIP-848) member is told (Kafka's
    /// `group.consumer.heartbeat.interval.ms`, default 5 s): how soon it learns of a new
    /// assignment, and so how long a partition moving between members takes. At least 1 ms,
    /// and below the broker's session timeout (the build refuses it otherwise). Unset, it is
    /// [`DEFAULT_CONSUMER_HEARTBEAT_INTERVAL`], or a third of the session timeout when that
    /// is shorter, so that a short session timeout alone never evicts members between
    /// heartbeats.
    pub fn consumer_heartbeat_interval(mut self, interval: Duration) -> Self {
        self.consumer_heartbeat_interval = Some(interval.max(Duration::from_millis(1)));
        self
    }

    /// The heartbeat interval members are told (the build has set it from the session
    /// timeout when it was left unset).
    pub(crate) fn heartbeat_interval(&self) -> Duration {
        self.consumer_heartbeat_interval
            .unwrap_or(DEFAULT_CONSUMER_HEARTBEAT_INTERVAL)
    }

    /// The heartbeat interval members are told under this session timeout (see
    /// [`ListenerConfig::consumer_heartbeat_interval`]).
    pub(crate) fn heartbeat_interval_within(&self, session_timeout: Duration) -> Duration {
        self.consumer_heartbeat_interval.unwrap_or(
            DEFAULT_CONSUMER_HEARTBEAT_INTERVAL
                .min(session_timeout / 3)
                .max(Duration::from_millis(1)),
        )
    }

    /// Require SASL/PLAIN with this user: until a client authenticates, it may send only
    /// ApiVersions and the SASL handshake; anything else closes its connection.
    pub fn sasl_plain(mut self, username: impl Into<String>, password: impl Into<String>) -> Self {
        self.sasl_plain = Some(PlainCredentials {
            username: username.into(),
            password: password.into(),
        });
        self
    }

    /// Serve TLS with these certificates (mutual TLS when it names a client CA): on the
    /// address of [`ListenerConfig::new`] alone, or, with [`ListenerConfig::tls_listen`], on
    /// that second address beside plaintext on the first. Files that cannot be used fail
    /// the build, naming the file.
    pub fn tls(mut self, tls: super::TlsConfig) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Serve TLS on `addr` as well as plaintext on the first address (needs
    /// [`ListenerConfig::tls`]). Both are one broker to clients: the same groups, fetch
    /// sessions, request memory and connection cap; each advertises its own address, so a
    /// client stays on the one it came through.
    pub fn tls_listen(mut self, addr: impl Into<String>) -> Self {
        self.tls_addr = Some(addr.into());
        self
    }

    /// Enforce ACLs on every request (Kafka's `StandardAuthorizer`, with
    /// `allow.everyone.if.no.acl.found=false`): a request is allowed when an ACL of
    /// `<data_dir>/security/acls` allows it and none denies it, or when its principal is one
    /// of `super_users` (`User:<name>`, Kafka's `super.users`). Off by default: every
    /// request is allowed. The embedded API is never subject to ACLs.
    pub fn authorizer<S: Into<String>>(mut self, super_users: impl IntoIterator<Item = S>) -> Self {
        self.authorizer = Some(super_users.into_iter().map(Into::into).collect());
        self
    }

    /// Require SASL with SCRAM-SHA-256 or SCRAM-SHA-512, with the users of the data
    /// directory's credential store (`<data_dir>/security/scram-credentials`, kept by
    /// `nanokafka users` and AlterUserScramCredentials; created empty when missing, so the
    /// listener starts with no users yet). With [`ListenerConfig::sasl_plain`] too, a client
    /// may use either. Changes to the store apply to the next login, without a restart.
    pub fn sasl_scram(mut self) -> Self {
        self.sasl_scram = true;
        self
    }

    /// How long the answer to a failed SASL authentication waits before it is sent and the
    /// connection closed (Kafka's `connection.failed.authentication.delay.ms`, default
    /// 100 ms). The wait is a timer on that connection alone: a client guessing passwords is
    /// slowed, the broker's other clients are not. Zero answers at once.
    pub fn failed_authentication_delay(mut self, delay: Duration) -> Self {
        self.failed_authentication_delay = delay;
        self
    }

    /// Whether clients must authenticate with SASL (PLAIN, SCRAM or both).
    pub(crate) fn sasl_required(&self) -> bool {
        self.sasl_plain.is_some() || self.sasl_scram
    }

    /// The largest frame read before a connection has authenticated, when SASL is required
    /// (Kafka's `sasl.server.max.receive.size`, default 512 KiB). A larger one closes the
    /// connection before its body is read. Above `max_frame_bytes` it changes nothing.
    pub fn sasl_max_receive_bytes(mut self, bytes: usize) -> Self {
        self.sasl_max_receive_bytes = bytes;
        self
    }

    /// How long a connection has, from its accept, to complete its TLS handshake, and then
    /// SASL authentication when SASL is required (default 10 s each); then it is closed. [`Duration::MAX`] never closes it for
    /// this (the idle limit still applies).
    pub fn sasl_authentication_timeout(mut self, timeout: Duration) -> Self {
        self.sasl_authentication_timeout = timeout;
        self
    }

    /// How long a connection may go with no request read and none being answered before it is
    /// closed (Kafka's `connections.max.idle.ms`, default 10 minutes). A request counts once
    /// it has been read whole, so a frame trickled in over longer than this is cut off too.
    /// [`Duration::MAX`] never closes a connection for being idle.
    pub fn connections_max_idle(mut self, idle: Duration) -> Self {
        self.connections_max_idle = idle;
        self
    }

    /// The most bytes all connections together may hold in request frames being read or
    /// waiting to be answered (Kafka's `queued.max.request.bytes`; default 256 MiB). A
    /// frame's whole size is reserved when its size has been read, before its body; a
    /// connection whose frame does not fit waits, unread, until answered requests free enough
    /// (as Kafka mutes such a connection), and is closed if that takes longer than the idle
    /// limit. A frame larger than the whole bound could never fit: it closes its connection
    /// like one over `max_frame_bytes`. [`usize::MAX`] is as good as no bound.
    pub fn queued_max_request_bytes(mut self, bytes: usize) -> Self {
        self.queued_max_request_bytes = bytes;
        self
    }

    /// How many fetch sessions (KIP-227) the listener keeps at most (Kafka's
    /// `max.incremental.fetch.session.cache.slots`, default 1000). When all are taken, a new
    /// session takes the slot of one unused for the eviction time, or of a smaller one older
    /// than it, or is not opened (its client fetches without one). 0 opens none.
    pub fn fetch_session_cache_slots(mut self, slots: usize) -> Self {
        self.fetch_sessions.slots = slots;
        self
    }

    /// The most partitions one fetch session holds (default 1000): a full fetch of more
    /// opens none, an incremental one that grows its session past it closes the session.
    pub fn fetch_session_max_partitions(mut self, partitions: usize) -> Self {
        self.fetch_sessions.max_partitions = partitions;
        self
    }

    /// How long a fetch session lives unused, and how old it must be before a larger session
    /// may take its slot (Kafka's `min.incremental.fetch.session.eviction.ms`, default 2
    /// minutes).
    pub fn fetch_session_eviction(mut self, eviction: Duration) -> Self {
        self.fetch_sessions.eviction_ms = u64::try_from(eviction.as_millis()).unwrap_or(u64::MAX);
        self
    }

    /// Takes the builder's `num_partitions` (checked there).
    pub(crate) fn with_num_partitions(mut self, partitions: u32) -> Self {
        self.num_partitions = partitions;
        self
    }

    /// The largest frame read from an authenticated connection: `max_frame_bytes`, but no
    /// more than the request memory holds.
    pub(crate) fn frame_limit(&self) -> usize {
        self.max_frame_bytes.min(self.queued_max_request_bytes)
    }

    /// The largest frame read before SASL authentication: [`Self::frame_limit`], but no more
    /// than `sasl_max_receive_bytes`.
    pub(crate) fn frame_limit_before_authentication(&self) -> usize {
        self.frame_limit().min(self.sasl_max_receive_bytes)
    }

    /// The address as given.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// # Errors
    /// `InvalidArgument` for a zero cap or timeout, or `max_in_flight` above
    /// [`MAX_IN_FLIGHT`].
    pub(crate) fn validate(&self) -> crate::Result<()> {
        let above_zero = || "must be above zero".to_owned();
        for (name, value) in [
            ("max_frame_bytes", self.max_frame_bytes),
            ("max_connections", self.max_connections),
            ("max_in_flight", self.max_in_flight),
            ("sasl_max_receive_bytes", self.sasl_max_receive_bytes),
            ("queued_max_request_bytes", self.queued_max_request_bytes),
        ] {
            if value == 0 {
                let reason = above_zero();
                return Err(crate::Error::InvalidArgument { name, reason });
            }
        }
        for (name, value) in [
            (
                "sasl_authentication_timeout",
                self.sasl_authentication_timeout,
            ),
            ("connections_max_idle", self.connections_max_idle),
        ] {
            if value.is_zero() {
                let reason = above_zero();
                return Err(crate::Error::InvalidArgument { name, reason });
            }
        }
        if self.tls_addr.is_some() && self.tls.is_none() {
            return Err(crate::Error::InvalidArgument {
                name: "tls_listen",
                reason: "a TLS address needs certificates (ListenerConfig::tls)".to_owned(),
            });
        }
        for user in self.authorizer.iter().flatten() {
            if !matches!(user.split_once(':'), Some(("User", name)) if !name.is_empty()) {
                return Err(crate::Error::InvalidArgument {
                    name: "super_users",
                    reason: format!("'{user}' is not a principal of the form User:<name>"),
                });
            }
        }
        if self.max_in_flight > MAX_IN_FLIGHT {
            return Err(crate::Error::InvalidArgument {
                name: "max_in_flight",
                reason: format!(
                    "must be at most {MAX_IN_FLIGHT}, got {}",
                    self.max_in_flight
                ),
            });
        }
        Ok(())
    }
}

/// Whether Metadata requests may create topics ([`ListenerConfig::auto_create_topics`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutoCreate {
    On,
    Off,
}

/// The address an HTTP service (the console, the schema registry) binds for `addr`: as
/// given when it is `host:port`, on `127.0.0.1` when it is a bare port (`8080` or `:8080`);
/// `None` for anything else.
#[cfg(any(feature = "console", feature = "schema-registry"))]
pub(crate) fn http_bind_addr(addr: &str) -> Option<String> {
    let port = addr.strip_prefix(':').unwrap_or(addr);
    if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) {
        return Some(format!("127.0.0.1:{port}"));
    }
    match addr.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && !port.is_empty() => Some(addr.to_owned()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(config: ListenerConfig) -> &'static str {
        match config.validate() {
            Err(crate::Error::InvalidArgument { name, .. }) => name,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_defaults_are_valid_and_the_connection_limits_are_kafkas() {
        let config = ListenerConfig::new("127.0.0.1:0");
        assert!(config.validate().is_ok());
        assert_eq!(config.sasl_max_receive_bytes, 512 * 1024);
        assert_eq!(config.connections_max_idle, Duration::from_millis(600_000));
        assert!(config.queued_max_request_bytes >= 2 * config.max_frame_bytes);
    }

    #[test]
    fn zero_limits_are_refused_and_the_largest_mean_no_limit() {
        let config = || ListenerConfig::new("127.0.0.1:0");
        assert_eq!(
            refused(config().sasl_max_receive_bytes(0)),
            "sasl_max_receive_bytes"
        );
        assert_eq!(
            refused(config().sasl_authentication_timeout(Duration::ZERO)),
            "sasl_authentication_timeout"
        );
        assert_eq!(
            refused(config().connections_max_idle(Duration::ZERO)),
            "connections_max_idle"
        );
        assert_eq!(
            refused(config().queued_max_request_bytes(0)),
            "queued_max_request_bytes"
        );
        let unlimited = config()
            .sasl_max_receive_bytes(usize::MAX)
            .sasl_authentication_timeout(Duration::MAX)
            .connections_max_idle(Duration::MAX)
            .queued_max_request_bytes(usize::MAX);
        assert!(unlimited.validate().is_ok());
    }

    #[test]
    fn no_frame_larger_than_the_request_memory_or_before_authentication_the_sasl_cap_is_read() {
        let config = ListenerConfig::new("127.0.0.1:0");
        assert_eq!(config.frame_limit(), DEFAULT_MAX_FRAME_BYTES);
        assert_eq!(
            config.frame_limit_before_authentication(),
            DEFAULT_SASL_MAX_RECEIVE_BYTES
        );
        let config = config.queued_max_request_bytes(1000);
        assert_eq!(config.frame_limit(), 1000);
        assert_eq!(config.frame_limit_before_authentication(), 1000);
    }
}
