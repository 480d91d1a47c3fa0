//! The round trip against tansu, an independent Kafka broker (in-memory engine), when it is
//! installed (`benches/peers/tansu.sh install`); skipped with a message otherwise.
//!
//! A gap of tansu 0.6.0 keeps the resumed export out of this file: its ListOffsets answers
//! a partition's end offset with the number of batches, not of records (30 records produced
//! in one batch: end offset 1; its Fetch responses have the right high watermark). A rerun
//! of an export into tansu would resume at the wrong record; the delivery check stops it at
//! the first record that lands elsewhere, with an error. Import reads every partition to the
//! end its fetches report, so the round trip is unaffected.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;

use crate::harness::{
    after_round_trip, export_args, import_args, run, seed_source, snapshot, DEADLINE,
};

/// tansu's binary: `NANOKAFKA_TANSU`, else what `benches/peers/tansu.sh path` prints.
fn tansu_binary() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("NANOKAFKA_TANSU").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(path));
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/peers/tansu.sh");
    let out = Command::new("bash").arg(script).arg("path").output().ok()?;
    let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    (out.status.success() && path.is_file()).then_some(path)
}

/// An in-memory tansu on a free loopback port; killed on drop.
struct Tansu {
    child: Child,
    bootstrap: String,
}

impl Tansu {
    fn start(binary: PathBuf) -> Tansu {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("tcp://127.0.0.1:{port}");
        let mut child = Command::new(binary)
            .args([
                "broker",
                "--listener-url",
                &url,
                "--advertised-listener-url",
                &url,
            ])
            .args(["--storage-engine", "memory://tansu/"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        loop {
            let line = lines.recv_timeout(DEADLINE).expect("tansu's ready line");
            if line.contains("ready in") {
                break;
            }
        }
        Tansu {
            child,
            bootstrap: format!("127.0.0.1:{port}"),
        }
    }
}

impl Drop for Tansu {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn export_then_import_through_tansu_keeps_every_record() {
    let Some(binary) = tansu_binary() else {
        eprintln!("skipping: tansu is not installed (benches/peers/tansu.sh install)");
        return;
    };
    let tansu = Tansu::start(binary);
    let source = tempfile::tempdir().unwrap();
    seed_source(source.path());
    let (status, log) = run(&export_args(source.path(), &tansu.bootstrap, &[]));
    assert!(status.success(), "export to tansu: {log}");
    let imported = tempfile::tempdir().unwrap();
    let (status, log) = run(&import_args(&tansu.bootstrap, imported.path()));
    assert!(status.success(), "import from tansu: {log}");
    assert_eq!(
        snapshot(imported.path()),
        after_round_trip(&snapshot(source.path()))
    );
}
