//! `nanokafka users`: add (password from stdin, the environment or a file), list, delete, on
//! a data directory's SCRAM store; a running `nanokafka serve --sasl-scram` logs in a user
//! added after it started, and refuses one deleted, without a restart.

use std::process::{Command, Stdio};
use std::time::Duration;

use nanokafka::ScramMechanism;

use crate::process::Process;
use crate::scram_client::login;
use crate::{fails, json, ok, run_on, run_with_stdin, BIN};

const SASL_AUTHENTICATION_FAILED: i16 = 58;

fn list(dir: &std::path::Path) -> serde_json::Value {
    json(&run_on(dir, &["users", "list", "--json"]))
}

#[test]
fn add_list_delete_without_a_secret_on_the_command_line_or_in_the_output() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path();
    // An empty store lists nobody.
    assert_eq!(list(path), serde_json::json!([]));
    ok(&run_with_stdin(
        path,
        &["users", "add", "alice", "--mechanism", "SCRAM-SHA-256"],
        b"alice-secret\n",
    ));
    let by_env = Command::new(BIN)
        .args([
            "users",
            "add",
            "bob",
            "--mechanism",
            "SCRAM-SHA-512",
            "--iterations",
            "8192",
        ])
        .args(["--data-dir", path.to_str().unwrap()])
        .env("NANOKAFKA_SCRAM_PASSWORD", "bob-secret")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    ok(&by_env);
    let file = path.join("bob-password");
    std::fs::write(&file, "alice-512\n").unwrap();
    let file = file.to_str().unwrap();
    ok(&run_on(
        path,
        &[
            "users",
            "add",
            "alice",
            "--mechanism",
            "SCRAM-SHA-512",
            "--password-file",
            file,
        ],
    ));
    assert_eq!(
        list(path),
        serde_json::json!([
            {"user": "alice", "mechanisms": ["SCRAM-SHA-256", "SCRAM-SHA-512"]},
            {"user": "bob", "mechanisms": ["SCRAM-SHA-512"]},
        ])
    );
    let table = ok(&run_on(path, &["users", "list"]));
    assert!(
        table.contains("alice") && table.contains("SCRAM-SHA-256,SCRAM-SHA-512"),
        "{table}"
    );
    let stored = std::fs::read_to_string(path.join("security/scram-credentials")).unwrap();
    for secret in ["alice-secret", "bob-secret", "alice-512"] {
        assert!(
            !stored.contains(secret) && !table.contains(secret),
            "{secret} stored"
        );
    }
    ok(&run_on(
        path,
        &["users", "delete", "alice", "--mechanism", "SCRAM-SHA-256"],
    ));
    ok(&run_on(path, &["users", "delete", "bob"]));
    assert_eq!(
        list(path),
        serde_json::json!([{"user": "alice", "mechanisms": ["SCRAM-SHA-512"]}])
    );
    let err = fails(&run_on(path, &["users", "delete", "bob"]));
    assert!(err.contains("no SCRAM credential"), "{err}");
    // No password at all: refused, nothing stored.
    let err = fails(&run_with_stdin(
        path,
        &["users", "add", "carol", "--mechanism", "SCRAM-SHA-256"],
        b"",
    ));
    assert!(err.contains("no password"), "{err}");
    // A damaged store is refused with its name, and left as it is.
    std::fs::write(path.join("security/scram-credentials"), "damaged").unwrap();
    let err = fails(&run_on(path, &["users", "list"]));
    assert!(err.contains("scram-credentials"), "{err}");
}

#[test]
fn a_running_serve_logs_in_a_user_added_after_it_started() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path();
    let data_dir = path.to_str().unwrap();
    let mut serve = Process::serve(&[
        "--data-dir",
        data_dir,
        "--listen",
        "127.0.0.1:0",
        "--sasl-scram",
    ]);
    // With no users yet the listener starts, and says how to add them.
    serve.wait_for_line("the no-users warning", Duration::from_secs(30), |l| {
        l.contains("no user has credentials yet")
    });
    let addr = serve.listening_addr(Duration::from_secs(30));
    let m = ScramMechanism::ScramSha256;
    assert_eq!(
        login(addr, m, "alice", "alice-secret").err(),
        Some(SASL_AUTHENTICATION_FAILED)
    );
    ok(&run_with_stdin(
        path,
        &["users", "add", "alice", "--mechanism", "SCRAM-SHA-256"],
        b"alice-secret",
    ));
    assert!(login(addr, m, "alice", "alice-secret").is_ok());
    assert_eq!(
        login(addr, m, "alice", "wrong").err(),
        Some(SASL_AUTHENTICATION_FAILED)
    );
    ok(&run_on(path, &["users", "delete", "alice"]));
    assert_eq!(
        login(addr, m, "alice", "alice-secret").err(),
        Some(SASL_AUTHENTICATION_FAILED)
    );
}
