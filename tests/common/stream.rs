//! What the `RecordStream` tests share: an actix System per test body within a patience
//! bound, and the next record of a stream.

use std::future::Future;
use std::time::Duration;

use actix::System;
use futures::StreamExt;
use nanokafka::{AsyncNanoKafka, Record, RecordStream};

#[path = "watchdog.rs"]
mod watchdog;

/// Bounds every wait of these tests; none is reached unless something is broken.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// Runs `body` on an actix System of its own, within the patience bound.
pub fn run<F, T>(bus: AsyncNanoKafka, body: impl FnOnce(AsyncNanoKafka) -> F + Send + 'static) -> T
where
    F: Future<Output = T>,
    T: Send + 'static,
{
    watchdog::within(PATIENCE, move || System::new().block_on(body(bus)))
}

/// The stream's next record, within the patience bound.
pub async fn next(stream: &mut RecordStream<u64>) -> Record<u64> {
    actix_rt::time::timeout(PATIENCE, stream.next())
        .await
        .expect("a record within the patience bound")
        .expect("the stream goes on")
        .expect("a record, not an error")
}
