//! A watchdog that turns a hang into a test failure.

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

/// Runs `body` on its own thread and fails the test if it has not finished within `limit`
/// (a hang); a panic in `body` is passed on as it is.
pub fn within<T: Send + 'static>(limit: Duration, body: impl FnOnce() -> T + Send + 'static) -> T {
    let (done_tx, done_rx) = mpsc::channel();
    let worker = thread::spawn(move || {
        let value = body();
        let _ = done_tx.send(());
        value
    });
    match done_rx.recv_timeout(limit) {
        Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => match worker.join() {
            Ok(value) => value,
            Err(panic) => std::panic::resume_unwind(panic),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("test body still running after {limit:?}"),
    }
}
