//! The listener's counters: lock-free, bumped by connections, read by `stats()`. The
//! connection counts are also recorded through the `metrics` facade (see
//! [`crate::metrics`]), for a service's exporter.

use std::sync::atomic::{AtomicU64, Ordering};

use kafka_protocol::messages::ApiKey;

use crate::types::ListenerStats;

/// Kafka's API keys run from 0 to under 100; a key outside is never counted (it closes its
/// connection before a request is answered).
const API_KEYS: usize = 100;

/// Counters shared by the accept loop and every connection.
#[derive(Debug)]
pub struct ListenerMetrics {
    open: AtomicU64,
    accepted: AtomicU64,
    refused: AtomicU64,
    closed_bad_request: AtomicU64,
    closed_idle: AtomicU64,
    /// Bytes of the request memory budget reserved now (`memory::Reservation`).
    request_bytes_held: AtomicU64,
    fetch_sessions_opened: AtomicU64,
    incremental_fetches: AtomicU64,
    requests: [AtomicU64; API_KEYS],
}

impl Default for ListenerMetrics {
    fn default() -> Self {
        ListenerMetrics {
            open: AtomicU64::new(0),
            accepted: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            closed_bad_request: AtomicU64::new(0),
            closed_idle: AtomicU64::new(0),
            request_bytes_held: AtomicU64::new(0),
            fetch_sessions_opened: AtomicU64::new(0),
            incremental_fetches: AtomicU64::new(0),
            requests: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl ListenerMetrics {
    pub fn accepted(&self) {
        self.accepted.fetch_add(1, Ordering::Relaxed);
        crate::metrics::connection_accepted();
    }

    pub fn refused(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
    }

    pub fn closed_bad_request(&self) {
        self.closed_bad_request.fetch_add(1, Ordering::Relaxed);
    }

    pub fn closed_idle(&self) {
        self.closed_idle.fetch_add(1, Ordering::Relaxed);
    }

    pub fn fetch_session_opened(&self) {
        self.fetch_sessions_opened.fetch_add(1, Ordering::Relaxed);
    }

    pub fn incremental_fetch(&self) {
        self.incremental_fetches.fetch_add(1, Ordering::Relaxed);
    }

    pub fn request_bytes_reserved(&self, bytes: u64) {
        self.request_bytes_held.fetch_add(bytes, Ordering::Relaxed);
    }

    pub fn request_bytes_released(&self, bytes: u64) {
        self.request_bytes_held.fetch_sub(bytes, Ordering::Relaxed);
    }

    /// Counts a connection as open until the returned guard drops.
    pub fn open_connection(self: &std::sync::Arc<Self>) -> OpenConnection {
        self.open.fetch_add(1, Ordering::Relaxed);
        crate::metrics::connections_open_changed(1.0);
        OpenConnection(self.clone())
    }

    pub fn open_connections(&self) -> u64 {
        self.open.load(Ordering::Relaxed)
    }

    pub fn request(&self, api_key: ApiKey) {
        if let Some(counter) = self.requests.get(api_key as usize) {
            counter.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn snapshot(&self) -> ListenerStats {
        let requests = self
            .requests
            .iter()
            .enumerate()
            .filter_map(|(key, count)| {
                let count = count.load(Ordering::Relaxed);
                let api = ApiKey::try_from(key as i16).ok()?;
                (count > 0).then(|| (format!("{api:?}"), count))
            })
            .collect();
        ListenerStats {
            connections: self.open.load(Ordering::Relaxed),
            connections_accepted: self.accepted.load(Ordering::Relaxed),
            connections_refused: self.refused.load(Ordering::Relaxed),
            connections_closed_bad_request: self.closed_bad_request.load(Ordering::Relaxed),
            connections_closed_idle: self.closed_idle.load(Ordering::Relaxed),
            request_bytes_held: self.request_bytes_held.load(Ordering::Relaxed),
            fetch_sessions_opened: self.fetch_sessions_opened.load(Ordering::Relaxed),
            incremental_fetches: self.incremental_fetches.load(Ordering::Relaxed),
            requests,
        }
    }
}

/// One open connection, counted while it lives.
#[derive(Debug)]
pub struct OpenConnection(std::sync::Arc<ListenerMetrics>);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
        crate::metrics::connections_open_changed(-1.0);
    }
}
