//! A watchdog that turns a hang into a test failure, with the evidence: where every thread
//! of the test process waits.

use std::process::Command;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

/// Runs `body` on its own thread and fails the test if it has not finished within `limit`
/// (a hang); a panic in `body` is passed on as it is. Before failing, it prints every
/// thread's stack (see [`thread_stacks`]).
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
        Err(mpsc::RecvTimeoutError::Timeout) => {
            eprintln!(
                "--- every thread's stack at the hang ---\n{}\n---",
                thread_stacks()
            );
            panic!("test body still running after {limit:?}")
        }
    }
}

/// Every thread's stack in this process, from gdb (`thread apply all bt`) when it is
/// installed and may attach, within a minute; otherwise why not. A hang that happens once in
/// hundreds of runs under load is diagnosed from this or not at all.
fn thread_stacks() -> String {
    let pid = std::process::id().to_string();
    let gdb = Command::new("timeout")
        .args(["60", "gdb", "-batch", "-nx", "-p", &pid])
        .args(["-ex", "thread apply all bt"])
        .output();
    match gdb {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).into_owned(),
        Ok(out) => format!(
            "(gdb gave no stacks: {}; {})",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(e) => format!("(no stacks: timeout or gdb did not run: {e})"),
    }
}
