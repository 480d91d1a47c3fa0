//! The request memory: one bound, shared by every connection, on the bytes held in request
//! frames being read or waiting to be answered (Kafka's `queued.max.request.bytes`, which
//! Kafka enforces with its `MemoryPool`).
//!
//! A frame reserves its whole size as soon as its size prefix has been read, before its body,
//! as Kafka's pool does. So a reservation never grows, and connections part-way through
//! frames never wait on each other: every frame that holds its reservation can be read to its
//! end. A connection whose frame does not fit reads nothing more until answered requests free
//! enough. Reservations are granted in the order asked, so small frames do not starve a
//! large one. A frame keeps its reservation until its request has been answered: the decoded
//! request (a produce's records) shares the frame's bytes.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::ListenerMetrics;

/// The bound, and what is reserved of it (counted in [`ListenerMetrics`]).
#[derive(Debug)]
pub struct RequestMemory {
    /// One permit per byte.
    budget: Arc<Semaphore>,
    metrics: Arc<ListenerMetrics>,
}

/// Bytes of the bound held by one frame, given back when dropped.
#[derive(Debug)]
pub struct Reservation {
    _permits: OwnedSemaphorePermit,
    bytes: u32,
    metrics: Arc<ListenerMetrics>,
}

impl RequestMemory {
    /// A bound of `bytes`; one past what a semaphore can count (2^61) is no bound at all.
    pub fn new(bytes: usize, metrics: Arc<ListenerMetrics>) -> Self {
        RequestMemory {
            budget: Arc::new(Semaphore::new(bytes.min(Semaphore::MAX_PERMITS))),
            metrics,
        }
    }

    /// Waits until `bytes` fit in the bound, and holds them. Frames larger than the whole
    /// bound are refused before they ask (`ListenerConfig::frame_limit`), so every
    /// reservation is eventually granted.
    pub async fn reserve(&self, bytes: u32) -> Reservation {
        let permits = self
            .budget
            .clone()
            .acquire_many_owned(bytes)
            .await
            .expect("the request memory's semaphore is never closed");
        self.metrics.request_bytes_reserved(u64::from(bytes));
        Reservation {
            _permits: permits,
            bytes,
            metrics: self.metrics.clone(),
        }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.metrics.request_bytes_released(u64::from(self.bytes));
    }
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;

    use super::*;

    #[test]
    fn a_reservation_that_does_not_fit_waits_until_bytes_are_given_back() {
        let metrics = Arc::new(ListenerMetrics::default());
        let memory = RequestMemory::new(100, metrics.clone());
        let first = memory.reserve(60).now_or_never().expect("fits");
        assert_eq!(metrics.snapshot().request_bytes_held, 60);
        assert!(memory.reserve(60).now_or_never().is_none(), "120 > 100");
        let small = memory.reserve(40).now_or_never().expect("fits beside it");
        assert_eq!(metrics.snapshot().request_bytes_held, 100);
        drop(first);
        assert_eq!(metrics.snapshot().request_bytes_held, 40);
        let second = memory.reserve(60).now_or_never().expect("fits now");
        drop((small, second));
        assert_eq!(metrics.snapshot().request_bytes_held, 0);
    }

    #[test]
    fn a_bound_past_what_a_semaphore_counts_is_no_bound() {
        let metrics = Arc::new(ListenerMetrics::default());
        let memory = RequestMemory::new(usize::MAX, metrics.clone());
        let held: Vec<_> = (0..8)
            .map(|_| memory.reserve(u32::MAX).now_or_never().expect("fits"))
            .collect();
        assert_eq!(
            metrics.snapshot().request_bytes_held,
            8 * u64::from(u32::MAX)
        );
        drop(held);
    }
}
