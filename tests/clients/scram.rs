//! SASL/SCRAM-SHA-256 and SCRAM-SHA-512 with every client: each logs in with the right
//! password and produces and consumes, and is refused (authentication failed) with a wrong
//! password and as a user the broker does not know. The admin calls that manage the
//! credentials (confluent-kafka's AdminClient) change who may log in, at once.

use serde_json::Value;

use crate::clients::{self, Client};
use crate::common::{self, args, script_records, unique, Broker, Stamps, RUN};

const PASSWORD_ENV: &str = "NANOKAFKA_SASL_PASSWORD";
const MECHANISMS: [&str; 2] = ["SCRAM-SHA-256", "SCRAM-SHA-512"];
const USER: &str = "alice";
const PASSWORD: &str = "alice-secret";
/// The time bound of a run meant to be refused: clients that retry give up by then.
const REFUSED_TIMEOUT: &str = "5";

/// A login for a script: its SASL arguments and the password it reads from the environment.
struct Login<'a> {
    mechanism: &'a str,
    user: &'a str,
    password: &'a str,
}

impl Login<'_> {
    fn args(&self) -> [&str; 4] {
        ["--sasl-mechanism", self.mechanism, "--sasl-user", self.user]
    }

    fn client(&self, client: Client) -> Client {
        client.with_env(PASSWORD_ENV, self.password)
    }
}

/// The three logins of a mechanism: right, wrong password, unknown user.
fn logins(mechanism: &str) -> [Login<'_>; 3] {
    [
        Login {
            mechanism,
            user: USER,
            password: PASSWORD,
        },
        Login {
            mechanism,
            user: USER,
            password: "wrong",
        },
        Login {
            mechanism,
            user: "mallory",
            password: PASSWORD,
        },
    ]
}

/// Runs `script`'s producer and consumer with each login of each mechanism: the right one
/// delivers and reads its records (the producer's timestamps as `stamps` says), the others
/// fail saying authentication failed.
fn produce_consume_or_refused(
    (produce, consume): (&str, &str),
    stamps: Stamps,
    refused_says: &[&str],
) {
    let (Some(producer), Some(consumer)) = (script(produce), script(consume)) else {
        return;
    };
    let broker = Broker::start_scram(&[(USER, PASSWORD)]);
    for mechanism in MECHANISMS {
        let [right, wrong, unknown] = logins(mechanism);
        let topic = format!("scram-{}", unique());
        let group = format!("g-{}", unique());
        let mut run_args = args(&broker.bootstrap, &topic, &["--count", "5"]);
        run_args.extend(right.args());
        let produced = right.client(producer.clone()).run_json(&run_args, RUN);
        common::read_back_natively(&broker, &topic, &produced, "r", stamps);
        let mut run_args = args(&broker.bootstrap, &topic, &[&group, "--count", "5"]);
        run_args.extend(right.args());
        let consumed: Value = right.client(consumer.clone()).run_json(&run_args, RUN);
        assert_eq!(
            script_records(&consumed).len(),
            5,
            "{mechanism}: {consumed}"
        );
        for login in [wrong, unknown] {
            let run_args = [
                broker.bootstrap.as_str(),
                &topic,
                "--count",
                "1",
                "--timeout",
                REFUSED_TIMEOUT,
            ];
            let mut run_args = run_args.to_vec();
            run_args.extend(login.args());
            let done = login.client(producer.clone()).run(&run_args, b"", RUN);
            assert!(
                !done.status.success(),
                "{mechanism} {}: produced",
                login.user
            );
            let said = done.stderr.to_lowercase();
            assert!(
                refused_says.iter().any(|s| said.contains(s)),
                "{mechanism} {} refused without saying so:\n{}",
                login.user,
                done.stderr
            );
        }
    }
    // Only the right logins wrote: 5 records per mechanism's topic, nothing else.
}

fn script(name: &str) -> Option<Client> {
    match name.ends_with(".js") {
        true => clients::node(name),
        false => clients::python(name),
    }
}

#[test]
fn confluent_kafka_logs_in_with_scram_and_is_refused_otherwise() {
    produce_consume_or_refused(
        ("confluent_produce.py", "confluent_consume.py"),
        Stamps::Exact,
        &["authentication failed"],
    );
}

#[test]
fn kafka_python_logs_in_with_scram_and_is_refused_otherwise() {
    // kafka-python reads the broker's close before the error answer now and then (more so on
    // a loaded host), and then reports only that it could not bootstrap.
    produce_consume_or_refused(
        ("kafka_python_produce.py", "kafka_python_consume.py"),
        Stamps::Exact,
        &["authentication failed", "unable to bootstrap"],
    );
}

#[test]
fn aiokafka_logs_in_with_scram_and_is_refused_otherwise() {
    produce_consume_or_refused(
        ("aiokafka_produce.py", "aiokafka_consume.py"),
        Stamps::AtMost,
        &["authentication failed", "saslauthenticationfailed"],
    );
}

#[test]
fn kafkajs_logs_in_with_scram_and_is_refused_otherwise() {
    produce_consume_or_refused(
        ("kafkajs_produce.js", "kafkajs_consume.js"),
        Stamps::Exact,
        &["authentication failed", "saslauthenticationfailed"],
    );
}

/// kcat's `-X` settings for a login.
fn kcat_login(login: &Login<'_>) -> Vec<String> {
    [
        "security.protocol=SASL_PLAINTEXT".to_owned(),
        format!("sasl.mechanisms={}", login.mechanism),
        format!("sasl.username={}", login.user),
        format!("sasl.password={}", login.password),
    ]
    .into_iter()
    .flat_map(|x| ["-X".to_owned(), x])
    .collect()
}

#[test]
fn kcat_logs_in_with_scram_and_is_refused_otherwise() {
    let Some(kcat) = clients::kcat() else {
        return;
    };
    let broker = Broker::start_scram(&[(USER, PASSWORD)]);
    for mechanism in MECHANISMS {
        let [right, wrong, unknown] = logins(mechanism);
        let topic = format!("scram-{}", unique());
        let with = |login: &Login<'_>, more: &[&str]| {
            let mut all = vec!["-b".to_owned(), broker.bootstrap.clone()];
            all.extend(kcat_login(login));
            all.extend(more.iter().map(|s| s.to_string()));
            all
        };
        let produce = with(&right, &["-P", "-t", &topic, "-K:"]);
        let produce: Vec<&str> = produce.iter().map(String::as_str).collect();
        kcat.run_ok(&produce, b"k1:v1\nk2:v2\n", RUN);
        let consume = with(&right, &["-C", "-t", &topic, "-o", "beginning", "-e", "-J"]);
        let consume: Vec<&str> = consume.iter().map(String::as_str).collect();
        let out = kcat.run_ok(&consume, b"", RUN).stdout;
        assert_eq!(clients::json_lines(&out).len(), 2, "{mechanism}: {out}");
        for login in [wrong, unknown] {
            let metadata = with(&login, &["-L", "-m", "5"]);
            let metadata: Vec<&str> = metadata.iter().map(String::as_str).collect();
            let done = kcat.run(&metadata, b"", RUN);
            assert!(
                !done.status.success(),
                "{mechanism} {}: {}",
                login.user,
                done.stdout
            );
            assert!(
                done.stderr.contains("Authentication failed"),
                "{mechanism} {}:\n{}",
                login.user,
                done.stderr
            );
        }
    }
}

/// AlterUserScramCredentials and DescribeUserScramCredentials from confluent-kafka's
/// AdminClient, logged in as alice: bob is added (librdkafka salts and hashes his password),
/// described, then logs in with it; a credential out of Kafka's range is refused; a deleted
/// one no longer logs in.
#[test]
fn confluent_admin_manages_scram_credentials_that_log_in_at_once() {
    let (Some(admin), Some(producer)) = (
        clients::python("confluent_admin.py"),
        script("confluent_produce.py"),
    ) else {
        return;
    };
    let broker = Broker::start_scram(&[(USER, PASSWORD)]);
    let admin = admin.with_env(PASSWORD_ENV, PASSWORD);
    let as_alice = ["--sasl-mechanism", "SCRAM-SHA-256", "--sasl-user", USER];
    let run_admin = |more: &[&str]| {
        let mut all = vec![broker.bootstrap.as_str()];
        all.extend_from_slice(more);
        all.extend_from_slice(&as_alice);
        admin.run_json(&all, RUN)
    };
    let altered = run_admin(&[
        "alter-scram",
        "upsert:bob:SCRAM-SHA-512:8192:bob-secret",
        "upsert:carol:SCRAM-SHA-256:100:weak",
        "delete:nobody:SCRAM-SHA-256",
    ]);
    assert_eq!(
        altered["scram_results"],
        serde_json::json!({"bob": "ok", "carol": "UNACCEPTABLE_CREDENTIAL", "nobody": "RESOURCE_NOT_FOUND"}),
        "{altered}"
    );
    let described = run_admin(&["describe-scram"]);
    assert_eq!(
        described["scram_users"],
        serde_json::json!({
            "alice": {"SCRAM-SHA-256": 4096, "SCRAM-SHA-512": 4096},
            "bob": {"SCRAM-SHA-512": 8192},
        }),
        "{described}"
    );
    let described = run_admin(&["describe-scram", "bob", "carol"]);
    assert_eq!(
        described["scram_users"],
        serde_json::json!({"bob": {"SCRAM-SHA-512": 8192}, "carol": "RESOURCE_NOT_FOUND"}),
        "{described}"
    );
    let bob = Login {
        mechanism: "SCRAM-SHA-512",
        user: "bob",
        password: "bob-secret",
    };
    let topic = format!("scram-{}", unique());
    let mut run_args = args(&broker.bootstrap, &topic, &["--count", "3"]);
    run_args.extend(bob.args());
    let produced = bob.client(producer.clone()).run_json(&run_args, RUN);
    common::assert_read_back_natively(&broker, &topic, &produced, "r");
    let deleted = run_admin(&["alter-scram", "delete:bob:SCRAM-SHA-512"]);
    assert_eq!(deleted["scram_results"], serde_json::json!({"bob": "ok"}));
    let mut run_args = vec![
        broker.bootstrap.as_str(),
        &topic,
        "--timeout",
        REFUSED_TIMEOUT,
    ];
    run_args.extend(bob.args());
    let done = bob.client(producer).run(&run_args, b"", RUN);
    assert!(
        done.stderr.contains("authentication failed"),
        "{}",
        done.stderr
    );
}
