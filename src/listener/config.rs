//! The listener's settings: where it binds, what it lets a client send, who may talk to it.

use std::time::Duration;

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
/// Kafka's `group.initial.rebalance.delay.ms`: how long a new group's first rebalance waits
/// for more members before it completes.
pub const DEFAULT_INITIAL_REBALANCE_DELAY: Duration = Duration::from_secs(3);

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
    pub(crate) initial_rebalance_delay: Duration,
    pub(crate) sasl_plain: Option<PlainCredentials>,
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
            initial_rebalance_delay: DEFAULT_INITIAL_REBALANCE_DELAY,
            sasl_plain: None,
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

    /// Whether a Metadata request naming an unknown topic creates it with the default topic
    /// config when the client allows it (Kafka's `auto.create.topics.enable`, default on).
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

    /// Require SASL/PLAIN with this user: until a client authenticates, it may send only
    /// ApiVersions and the SASL handshake; anything else closes its connection.
    pub fn sasl_plain(mut self, username: impl Into<String>, password: impl Into<String>) -> Self {
        self.sasl_plain = Some(PlainCredentials {
            username: username.into(),
            password: password.into(),
        });
        self
    }

    /// The address as given.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// # Errors
    /// `InvalidArgument` for a zero cap, or `max_in_flight` above [`MAX_IN_FLIGHT`].
    pub(crate) fn validate(&self) -> crate::Result<()> {
        for (name, value) in [
            ("max_frame_bytes", self.max_frame_bytes),
            ("max_connections", self.max_connections),
            ("max_in_flight", self.max_in_flight),
        ] {
            if value == 0 {
                return Err(crate::Error::InvalidArgument {
                    name,
                    reason: "must be above zero".into(),
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
