//! A child process of a test (a broker, a client script, the test binary re-run): its
//! stdout and stderr are read line by line as they come, so a test waits for a line (`ready
//! in`, `listening on ADDR`) rather than for a while, and a failure prints everything the
//! child said. The `nanokafka` binary's own constructors (`Process::serve`,
//! `Process::nanokafka`) are in `cli/tests/common/binary.rs`, beside the package that owns
//! the binary.
//!
//! A [`Process`] is killed when dropped. It is also started with `PR_SET_PDEATHSIG`, so the
//! kernel kills it when the thread that started it ends, even when the test body is stuck on
//! another thread (a watchdog gave up on it) or the test binary is killed: no child outlives
//! its test.

#![allow(dead_code)] // each test binary uses the part it needs

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// A running child and the lines it has printed.
pub struct Process {
    child: Child,
    output: Arc<Output>,
    /// How many lines the waits have looked at: each wait starts after the line the last
    /// one returned.
    read: usize,
}

/// The child's lines, stdout's and stderr's interleaved as they came, with a condition
/// variable signalled on every line.
#[derive(Default)]
struct Output {
    seen: Mutex<Seen>,
    changed: Condvar,
}

#[derive(Default)]
struct Seen {
    lines: Vec<String>,
    /// Pipes at end of file: both are once the child has exited.
    closed: usize,
}

impl Process {
    /// Starts `command` with stdin closed and both outputs read on threads of their own
    /// (drained to the end, so the child never blocks on a full pipe).
    ///
    /// # Panics
    /// When it cannot be started.
    pub fn spawn(mut command: Command) -> Process {
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // SAFETY: prctl is async-signal-safe and touches only the child being set up.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {command:?}: {e}"));
        let output = Arc::new(Output::default());
        collect(child.stdout.take().expect("piped"), Arc::clone(&output));
        collect(child.stderr.take().expect("piped"), Arc::clone(&output));
        Process {
            child,
            output,
            read: 0,
        }
    }

    /// Waits for a line `wanted` accepts, after those earlier waits returned, and returns it.
    ///
    /// # Panics
    /// When the child closes its outputs (exits) or `timeout` passes first; the message has
    /// every line.
    pub fn wait_for_line(
        &mut self,
        what: &str,
        timeout: Duration,
        mut wanted: impl FnMut(&str) -> bool,
    ) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let (fresh, closed) = {
                let mut seen = self.output.seen.lock().unwrap();
                while seen.lines.len() == self.read && seen.closed < 2 {
                    let left = deadline.saturating_duration_since(Instant::now());
                    assert!(
                        !left.is_zero(),
                        "no {what} within {timeout:?}:\n{}",
                        seen.lines.join("\n")
                    );
                    seen = self.output.changed.wait_timeout(seen, left).unwrap().0;
                }
                (seen.lines[self.read..].to_vec(), seen.closed == 2)
            };
            for line in fresh {
                self.read += 1;
                if wanted(&line) {
                    return line;
                }
            }
            assert!(
                !closed,
                "exited before {what}:\n{}",
                self.lines().join("\n")
            );
        }
    }

    /// Every line printed so far.
    pub fn lines(&self) -> Vec<String> {
        self.output.seen.lock().unwrap().lines.clone()
    }

    /// What the child has printed, as a handle that outlives it (a failed test prints it).
    pub fn log(&self) -> Log {
        Log(Arc::clone(&self.output))
    }

    pub fn signal(&self, signal: libc::c_int) {
        let pid = libc::pid_t::try_from(self.child.id()).unwrap();
        // SAFETY: kill(2) on our own child's pid; it has not been reaped yet (we hold it).
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
    }

    /// Waits for the exit; returns it with every line.
    ///
    /// # Panics
    /// When the child is still running after `timeout`.
    pub fn wait(mut self, timeout: Duration) -> (ExitStatus, Vec<String>) {
        let deadline = Instant::now() + timeout;
        let mut seen = self.output.seen.lock().unwrap();
        // Both pipes close at the exit (or earlier, when the child closed them itself).
        while seen.closed < 2 {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "still running after {timeout:?}:\n{}",
                seen.lines.join("\n")
            );
            seen = self.output.changed.wait_timeout(seen, left).unwrap().0;
        }
        let lines = std::mem::take(&mut seen.lines);
        drop(seen);
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "still running: {lines:#?}");
            thread::sleep(Duration::from_millis(10));
        };
        (status, lines)
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn collect(pipe: impl Read + Send + 'static, output: Arc<Output>) {
    thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            output.seen.lock().unwrap().lines.push(line);
            output.changed.notify_all();
        }
        output.seen.lock().unwrap().closed += 1;
        output.changed.notify_all();
    });
}

/// What a child has printed, readable after the child is gone.
#[derive(Clone)]
pub struct Log(Arc<Output>);

impl Log {
    /// The last `lines` lines printed.
    pub fn tail(&self, lines: usize) -> String {
        let seen = self.0.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.lines[seen.lines.len().saturating_sub(lines)..].join("\n")
    }
}
