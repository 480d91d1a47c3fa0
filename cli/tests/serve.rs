//! The `nanokafka serve` binary as an operator runs it: it logs the address it bound, serves
//! Kafka clients, stops cleanly on SIGTERM or SIGINT (exit 0, lock released, data intact),
//! refuses a locked data directory (exit 1, naming it) and a bad command line (exit 2).

#[path = "common/binary.rs"]
mod binary;
#[path = "../../tests/wire/client.rs"]
#[allow(dead_code)] // the protocol tests use more of it than this binary does
mod client;
#[path = "../../tests/common/process.rs"]
mod process;

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

use binary::BIN;
use client::WireClient;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{DescribeConfigsRequest, MetadataRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use nanokafka::{NanoKafka, TopicConfig};
use process::Process;

/// How long the binary may take to start or stop before the test fails.
const DEADLINE: Duration = Duration::from_secs(30);

fn run(args: &[&str]) -> (ExitStatus, String) {
    let out = Command::new(BIN).args(args).output().unwrap();
    (
        out.status,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn ask_for(topic: &str) -> MetadataRequest {
    let name = TopicName(StrBytes::from_string(topic.into()));
    MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(name))
        ]))
        .with_allow_auto_topic_creation(true)
}

/// Records written through the library before the binary serves the directory.
fn seed(dir: &Path) {
    let broker = NanoKafka::open(dir).unwrap();
    broker
        .create_topic("before", TopicConfig::default().partitions(2))
        .unwrap();
    for i in 0..10u64 {
        broker.produce_keyed("before", i.to_be_bytes(), &i).unwrap();
    }
    broker.shutdown().unwrap();
}

fn serve_then_stop(signal: libc::c_int) {
    let dir = tempfile::tempdir().unwrap();
    seed(dir.path());
    let data_dir = dir.path().to_str().unwrap();
    let mut served = Process::serve(&["--data-dir", data_dir, "--listen", "127.0.0.1:0"]);
    let addr = served.listening_addr(DEADLINE);
    assert!(addr.ip().is_loopback() && addr.port() != 0, "{addr}");

    let mut client = WireClient::connect(addr);
    let response = client.call(&ask_for("made-by-a-client"), 9);
    assert_eq!(response.topics[0].error_code, 0);
    let everything = client.call(&MetadataRequest::default().with_topics(None), 12);
    let mut names: Vec<&str> = everything
        .topics
        .iter()
        .filter_map(|t| t.name.as_ref().map(|n| n.0.as_str()))
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["before", "made-by-a-client"]);

    served.signal(signal);
    let (status, log) = served.wait(DEADLINE);
    assert_eq!(status.code(), Some(0), "{log:#?}");
    assert!(
        log.iter().any(|l| l.contains("stopped cleanly")),
        "{log:#?}"
    );
    assert!(
        client.closed_by_broker(),
        "the listener closed its connections"
    );

    // The lock is released, the records and the topic made over the wire are there.
    let broker = NanoKafka::open(dir.path()).expect("the data dir opens again");
    let stats = broker.stats().unwrap();
    let ends: u64 = stats.topics["before"]
        .partitions
        .iter()
        .map(|p| p.log_end_offset)
        .sum();
    assert_eq!(ends, 10);
    assert!(stats.topics.contains_key("made-by-a-client"));
    broker.join_group("before", "g", "m").unwrap();
    // A poll answers from one partition; poll until both have given their records.
    let mut values: Vec<u64> = Vec::new();
    let until = Instant::now() + DEADLINE;
    while values.len() < 10 && Instant::now() < until {
        let batch = broker
            .poll_batch::<u64>("before", "g", "m", 100, Duration::from_secs(1))
            .unwrap();
        values.extend(batch.into_iter().map(|r| r.value));
    }
    values.sort_unstable();
    assert_eq!(values, (0..10).collect::<Vec<u64>>());
    broker.shutdown().unwrap();
}

#[test]
fn serve_logs_its_address_serves_and_stops_cleanly_on_sigterm() {
    serve_then_stop(libc::SIGTERM);
}

#[test]
fn serve_stops_cleanly_on_sigint() {
    serve_then_stop(libc::SIGINT);
}

/// The broker's config `key` as DescribeConfigs reports it.
fn broker_config(addr: SocketAddr, key: &str) -> String {
    let broker = DescribeConfigsResource::default()
        .with_resource_type(4)
        .with_resource_name(StrBytes::from_static_str("0"))
        .with_configuration_keys(Some(vec![StrBytes::from_string(key.to_owned())]));
    let request = DescribeConfigsRequest::default().with_resources(vec![broker]);
    let response = WireClient::connect(addr).call(&request, 4);
    let result = &response.results[0];
    assert_eq!(result.error_code, 0);
    let value = result.configs[0].value.as_ref().expect("a value");
    value.as_str().to_owned()
}

/// Starts serve with `args` and checks the broker config `key` is `expected`.
fn serve_reports(args: &[&str], key: &str, expected: &str) {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().to_str().unwrap();
    let mut served =
        Process::serve(&[&["--data-dir", data_dir, "--listen", "127.0.0.1:0"], args].concat());
    let addr = served.listening_addr(DEADLINE);
    assert_eq!(broker_config(addr, key), expected, "{args:?}");
    served.signal(libc::SIGTERM);
    let (status, log) = served.wait(DEADLINE);
    assert_eq!(status.code(), Some(0), "{log:#?}");
}

#[test]
fn initial_rebalance_delay_ms_sets_how_long_a_new_group_waits() {
    let key = "group.initial.rebalance.delay.ms";
    serve_reports(&[], key, "3000");
    serve_reports(&["--initial-rebalance-delay-ms", "0"], key, "0");
}

#[test]
fn consumer_heartbeat_interval_ms_sets_what_consumer_protocol_members_are_told() {
    let key = "group.consumer.heartbeat.interval.ms";
    serve_reports(&[], key, "5000");
    serve_reports(&["--consumer-heartbeat-interval-ms", "250"], key, "250");
}

#[test]
fn num_partitions_sizes_auto_created_topics() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().to_str().unwrap();
    let mut served = Process::serve(&[
        "--data-dir",
        data_dir,
        "--listen",
        "127.0.0.1:0",
        "--num-partitions",
        "4",
    ]);
    let addr = served.listening_addr(DEADLINE);
    let response = WireClient::connect(addr).call(&ask_for("auto"), 9);
    assert_eq!(response.topics[0].error_code, 0);
    assert_eq!(response.topics[0].partitions.len(), 4);
    served.signal(libc::SIGTERM);
    let (status, log) = served.wait(DEADLINE);
    assert_eq!(status.code(), Some(0), "{log:#?}");
    let broker = NanoKafka::open(dir.path()).unwrap();
    assert_eq!(broker.list_topics().unwrap()["auto"].partitions, 4);
    broker.shutdown().unwrap();
}

#[test]
fn connection_limits_are_set_by_flags() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let password = dir.path().join("password");
    std::fs::write(&password, "s3cret\n").unwrap();
    let mut served = Process::serve(&[
        "--data-dir",
        data_dir.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--sasl-plain-user",
        "alice",
        "--sasl-plain-password-file",
        password.to_str().unwrap(),
        "--sasl-max-receive-bytes",
        "1024",
        "--sasl-authentication-timeout-ms",
        "200",
    ]);
    let addr = served.listening_addr(DEADLINE);
    // A 2 KiB frame before authenticating is over the cap: closed before it is read.
    let mut client = WireClient::connect(addr);
    client.send_bytes(&2048i32.to_be_bytes());
    assert!(client.closed_within(DEADLINE));
    // Silence past the authentication deadline: closed.
    let mut client = WireClient::connect(addr);
    assert!(client.closed_within(DEADLINE));
    served.signal(libc::SIGTERM);
    let (status, log) = served.wait(DEADLINE);
    assert_eq!(status.code(), Some(0), "{log:#?}");

    let mut served = Process::serve(&[
        "--data-dir",
        data_dir.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--connections-max-idle-ms",
        "200",
        "--queued-max-request-bytes",
        "1024",
    ]);
    let addr = served.listening_addr(DEADLINE);
    let mut client = WireClient::connect(addr);
    assert!(client
        .call(&MetadataRequest::default(), 12)
        .topics
        .is_empty());
    assert!(client.closed_within(DEADLINE), "idle past the limit");
    // A frame larger than the whole request memory could never be read.
    let mut client = WireClient::connect(addr);
    client.send_bytes(&2048i32.to_be_bytes());
    assert!(client.closed_within(DEADLINE));
    served.signal(libc::SIGTERM);
    let (status, log) = served.wait(DEADLINE);
    assert_eq!(status.code(), Some(0), "{log:#?}");
}

#[test]
fn a_locked_data_dir_exits_1_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let holder = NanoKafka::open(dir.path()).unwrap();
    let data_dir = dir.path().to_str().unwrap();
    let (status, stderr) = run(&["serve", "--data-dir", data_dir, "--listen", "127.0.0.1:0"]);
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("locked"), "{stderr}");
    assert!(stderr.contains(data_dir), "{stderr}");
    holder.shutdown().unwrap();
}

#[test]
fn bad_command_lines_exit_2_with_a_reason_and_start_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("never-made");
    let data_dir = data_dir.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["serve"], "--data-dir"),
        (&["serve", "--data-dir", data_dir, "--bogus"], "--bogus"),
        (
            &["serve", "--data-dir", data_dir, "--fsync", "sometimes"],
            "--fsync",
        ),
        (
            &[
                "serve",
                "--data-dir",
                data_dir,
                "--fsync",
                "interval-ms",
                "0",
            ],
            "interval-ms",
        ),
        (
            &["serve", "--data-dir", data_dir, "--max-connections", "0"],
            "max-connections",
        ),
        (
            &[
                "serve",
                "--data-dir",
                data_dir,
                "--sasl-plain-password-file",
                "/nonexistent",
            ],
            "--sasl-plain-user",
        ),
        (
            &[
                "serve",
                "--data-dir",
                data_dir,
                "--sasl-plain-user",
                "alice",
            ],
            "NANOKAFKA_SASL_PLAIN_PASSWORD",
        ),
        (
            &[
                "serve",
                "--data-dir",
                data_dir,
                "--initial-rebalance-delay-ms",
                "soon",
            ],
            "initial-rebalance-delay-ms",
        ),
        (
            &[
                "serve",
                "--data-dir",
                data_dir,
                "--initial-rebalance-delay-ms",
                "2147483648",
            ],
            "initial-rebalance-delay-ms",
        ),
        (&["frobnicate"], "frobnicate"),
    ];
    let partition_counts = ["0", "10001", "four"];
    let partition_counts: Vec<[&str; 5]> = partition_counts
        .iter()
        .map(|n| ["serve", "--data-dir", data_dir, "--num-partitions", n])
        .collect();
    let zero_flags = [
        "--sasl-max-receive-bytes",
        "--sasl-authentication-timeout-ms",
        "--connections-max-idle-ms",
        "--queued-max-request-bytes",
    ];
    let zeros: Vec<[&str; 5]> = zero_flags
        .iter()
        .map(|flag| ["serve", "--data-dir", data_dir, flag, "0"])
        .collect();
    let cases: Vec<(&[&str], &str)> = cases
        .iter()
        .copied()
        .chain(
            zeros
                .iter()
                .zip(zero_flags)
                .map(|(args, flag)| (&args[..], flag)),
        )
        .chain(
            partition_counts
                .iter()
                .map(|args| (&args[..], "num-partitions")),
        )
        .collect();
    for (args, mention) in cases {
        let mut command = Command::new(BIN);
        command
            .args(args)
            .env_remove("NANOKAFKA_SASL_PLAIN_PASSWORD");
        let out = command.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(mention), "{args:?}: {stderr}");
    }
    assert!(
        !dir.path().join("never-made").exists(),
        "nothing was started"
    );
}

/// TLS files that cannot be used stop `serve` before it serves, naming the file; a key
/// without its certificate is a usage error.
#[test]
fn serve_refuses_unusable_tls_files_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let data_dir = data_dir.to_str().unwrap();
    let not_pem = dir.path().join("not-pem.pem");
    std::fs::write(&not_pem, "not a certificate").unwrap();
    let not_pem = not_pem.to_str().unwrap();
    let serve = ["serve", "--data-dir", data_dir, "--listen", "127.0.0.1:0"];
    let (status, stderr) =
        run(&[&serve[..], &["--tls-cert", not_pem, "--tls-key", not_pem]].concat());
    assert!(!status.success(), "{stderr}");
    assert!(stderr.contains(not_pem), "{stderr}");
    assert!(!stderr.contains("listening on"), "{stderr}");
    let (status, stderr) = run(&[&serve[..], &["--tls-key", not_pem]].concat());
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--tls-cert"), "{stderr}");
}

/// A binary built without the `kafka` feature lists export and import, and running either
/// exits 2 saying how to get them, touching nothing.
#[cfg(not(feature = "kafka"))]
#[test]
fn export_and_import_without_the_kafka_feature_exit_2_saying_how_to_get_them() {
    let (status, help) = {
        let out = Command::new(BIN).arg("--help").output().unwrap();
        (
            out.status,
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    assert!(status.success());
    assert!(help.contains("export") && help.contains("import"), "{help}");
    assert!(help.contains("--features kafka"), "{help}");
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("never-made");
    let data_dir = data_dir.to_str().unwrap();
    for args in [
        ["export", "--data-dir", data_dir, "--to", "127.0.0.1:9"],
        ["import", "--from", "127.0.0.1:9", "--data-dir", data_dir],
    ] {
        let (status, stderr) = run(&args);
        assert_eq!(status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("--features kafka"), "{stderr}");
        assert!(!Path::new(data_dir).exists());
    }
}

/// `serve --json`: every log line is one JSON object (level, message, fields), the
/// `listening on ADDR` line included, so a script can find the address.
#[test]
fn json_logs_one_object_per_line_with_the_listening_address() {
    let dir = tempfile::tempdir().unwrap();
    let dir_arg = dir.path().to_str().unwrap();
    let mut served = Process::serve(&["--json", "--data-dir", dir_arg, "--listen", "127.0.0.1:0"]);
    let line = served.wait_for_line("a JSON 'listening on' line", DEADLINE, |line| {
        let object: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        let message = object["fields"]["message"].as_str().unwrap_or_default();
        message.starts_with("listening on ")
    });
    let object: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(object["level"], "INFO");
    let message = object["fields"]["message"].as_str().unwrap_or_default();
    let addr: SocketAddr = message
        .strip_prefix("listening on ")
        .unwrap()
        .parse()
        .unwrap();
    assert_ne!(addr.port(), 0);
    served.signal(libc::SIGTERM);
    let (status, log) = served.wait(DEADLINE);
    assert!(status.success(), "{status:?}");
    for line in &log {
        serde_json::from_str::<serde_json::Value>(line)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
    }
}

/// `method path` at `addr` with `body` of `content_type`: the status and the body.
fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    content_type: &str,
    body: &str,
) -> (u16, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         Content-Type: {content_type}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let status = answer.split(' ').nth(1).unwrap().parse().unwrap();
    let body = answer.split_once("\r\n\r\n").unwrap().1.to_owned();
    (status, body)
}

/// `GET`/`POST path` on the console at `addr`: the status and the body.
fn console_http(addr: SocketAddr, method: &str, path: &str) -> (u16, String) {
    let body = r#"{"name": "x", "partitions": 1, "confirm": true}"#;
    http(addr, method, path, "application/json", body)
}

#[test]
fn serve_with_console_serves_the_api_and_its_writes_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    seed(dir.path());
    let data_dir = dir.path().to_str().unwrap();
    let mut served = Process::serve(&[
        "--data-dir",
        data_dir,
        "--listen",
        "127.0.0.1:0",
        "--console",
        "127.0.0.1:0",
    ]);
    let listener = served.listening_addr(DEADLINE);
    let line = served.wait_for_line("the console's address", DEADLINE, |l| {
        l.contains("web console on")
    });
    let addr: SocketAddr = line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap()
        .parse()
        .unwrap();
    let (status, overview) = console_http(addr, "GET", "/api/overview");
    assert_eq!(status, 200, "{overview}");
    assert!(overview.contains(r#""name":"before""#), "{overview}");
    assert!(
        overview.contains(&format!(r#""listener":"{listener}""#)),
        "{overview}"
    );
    let (status, refused) = console_http(addr, "POST", "/api/topics");
    assert_eq!(status, 403, "{refused}");
    served.signal(libc::SIGTERM);
    let (status, log) = served.wait(DEADLINE);
    assert_eq!(status.code(), Some(0), "{log:#?}");

    let (status, stderr) = run(&["serve", "--data-dir", data_dir, "--console-writes"]);
    assert_eq!(status.code(), Some(2), "{stderr}");
    let (status, stderr) = run(&[
        "serve",
        "--data-dir",
        data_dir,
        "--listen",
        "127.0.0.1:0",
        "--console",
        "localhost:",
    ]);
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("127.0.0.1:8080"), "{stderr}");
}

/// `nanokafka acls` run while `serve --authorizer` serves the same directory: the next request
/// sees the change.
fn acls(data_dir: &str, args: &[&str]) -> String {
    let out = Command::new(BIN)
        .args(["acls"])
        .args(args)
        .args(["--data-dir", data_dir])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn serve_with_the_authorizer_honours_acls_the_cli_adds_and_removes_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    seed(dir.path());
    let data_dir = dir.path().to_str().unwrap();
    let mut served = Process::serve(&[
        "--data-dir",
        data_dir,
        "--listen",
        "127.0.0.1:0",
        "--authorizer",
        "--super-user",
        "User:admin",
    ]);
    let addr = served.listening_addr(DEADLINE);
    let mut client = WireClient::connect(addr);
    const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
    let error_of =
        |client: &mut WireClient| client.call(&ask_for("before"), 9).topics[0].error_code;
    assert_eq!(error_of(&mut client), TOPIC_AUTHORIZATION_FAILED);
    let everything = client.call(&MetadataRequest::default().with_topics(None), 12);
    assert!(everything.topics.is_empty(), "{everything:?}");

    let added = acls(
        data_dir,
        &[
            "add",
            "--allow-principal",
            "User:ANONYMOUS",
            "--operation",
            "Describe",
            "--topic",
            "bef",
            "--resource-pattern-type",
            "prefixed",
        ],
    );
    assert!(
        added.contains("operation=DESCRIBE, permissionType=ALLOW"),
        "{added}"
    );
    assert_eq!(
        error_of(&mut client),
        0,
        "the running broker read the new ACL"
    );
    let listed = acls(
        data_dir,
        &[
            "list",
            "--topic",
            "before",
            "--resource-pattern-type",
            "match",
        ],
    );
    assert!(
        listed.contains("name=bef, patternType=PREFIXED"),
        "{listed}"
    );

    let removed = acls(
        data_dir,
        &[
            "remove",
            "--topic",
            "bef",
            "--resource-pattern-type",
            "prefixed",
        ],
    );
    assert!(removed.contains("Removed 1 ACLs"), "{removed}");
    assert_eq!(error_of(&mut client), TOPIC_AUTHORIZATION_FAILED);

    served.signal(libc::SIGTERM);
    let (status, log) = served.wait(DEADLINE);
    assert_eq!(status.code(), Some(0), "{log:#?}");
    let (status, stderr) = run(&["serve", "--data-dir", data_dir, "--super-user", "User:x"]);
    assert_eq!(
        status.code(),
        Some(2),
        "--super-user needs --authorizer: {stderr}"
    );
    let (status, stderr) = run(&[
        "serve",
        "--data-dir",
        data_dir,
        "--authorizer",
        "--super-user",
        "x",
    ]);
    assert_eq!(status.code(), Some(2), "{stderr}");
}

/// `method path` with a JSON `body` on the schema registry at `addr`: the status and body.
fn registry_http(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, String) {
    http(
        addr,
        method,
        path,
        "application/vnd.schemaregistry.v1+json",
        body,
    )
}

/// `serve --schema-registry` on `data_dir`, and the registry's address from its log.
fn serve_registry(data_dir: &str) -> (Process, SocketAddr) {
    let mut served = Process::serve(&[
        "--data-dir",
        data_dir,
        "--listen",
        "127.0.0.1:0",
        "--schema-registry",
        "127.0.0.1:0",
    ]);
    let line = served.wait_for_line("the registry's address", DEADLINE, |l| {
        l.contains("schema registry on")
    });
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap()
        .parse()
        .unwrap();
    (served, addr)
}

#[test]
fn schema_registry_ids_and_versions_survive_a_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().to_str().unwrap();
    let schema = |fields: &str| {
        let avro = format!(r#"{{"type":"record","name":"U","fields":[{fields}]}}"#);
        serde_json::json!({ "schema": avro }).to_string()
    };
    let name = r#"{"name":"name","type":"string"}"#;
    let age = r#",{"name":"age","type":"int","default":0}"#;
    let (served, addr) = serve_registry(data_dir);
    let register = |addr, subject: &str, body: &str| {
        registry_http(addr, "POST", &format!("/subjects/{subject}/versions"), body)
    };
    assert_eq!(
        register(addr, "a", &schema(name)),
        (200, r#"{"id":1}"#.into())
    );
    assert_eq!(
        register(addr, "a", &schema(&format!("{name}{age}"))),
        (200, r#"{"id":2}"#.into())
    );
    assert_eq!(
        register(addr, "b", r#"{"schema":"\"int\""}"#),
        (200, r#"{"id":3}"#.into())
    );
    served.signal(libc::SIGKILL);
    served.wait(DEADLINE);

    let (served, addr) = serve_registry(data_dir);
    assert_eq!(
        registry_http(addr, "GET", "/subjects/a/versions", ""),
        (200, "[1,2]".into())
    );
    let (status, by_id) = registry_http(addr, "GET", "/schemas/ids/3", "");
    assert_eq!((status, by_id.as_str()), (200, r#"{"schema":"\"int\""}"#));
    assert_eq!(
        register(addr, "c", r#"{"schema":"\"long\""}"#),
        (200, r#"{"id":4}"#.into())
    );
    served.signal(libc::SIGTERM);
    let (status, log) = served.wait(DEADLINE);
    assert_eq!(status.code(), Some(0), "{log:#?}");
}
