//! Every client over TLS: it produces and consumes trusting the broker's CA and cannot connect
//! trusting another; under mutual TLS it is refused without a certificate or with one from
//! another CA, and served with a good one. SASL/PLAIN over TLS (SASL_SSL) with
//! confluent-kafka; plaintext and TLS at once, one broker and one group to clients on both.

use std::collections::BTreeSet;
use std::net::TcpListener;

use nanokafka::ListenerConfig;

use crate::clients::{self, Client};
use crate::common::{
    args, assert_read_back_natively, read_back_natively, script_records, Broker, Stamps, RUN,
};
use crate::confluent::assignment;
use crate::tls_certs::Certs;

/// How long a run that must fail may try: clients retry a refused handshake until then.
const REFUSED_WITHIN: &str = "8";

/// A producer and a consumer script of one client.
struct Pair {
    produce: Client,
    consume: Client,
}

fn pair(produce: Option<Client>, consume: Option<Client>) -> Option<Pair> {
    Some(Pair {
        produce: produce?,
        consume: consume?,
    })
}

fn python(client: &str) -> Option<Pair> {
    pair(
        clients::python(&format!("{client}_produce.py")),
        clients::python(&format!("{client}_consume.py")),
    )
}

/// The security arguments of a script: trusting `ca`, presenting `cert` and `key` if given.
fn tls<'a>(ca: &'a std::path::Path, client: Option<(&'a Certs, bool)>) -> Vec<&'a str> {
    let mut v = vec!["--tls-ca", ca.to_str().unwrap()];
    if let Some((certs, good)) = client {
        let (cert, key) = match good {
            true => (&certs.client_cert, &certs.client_key),
            false => (&certs.other_client_cert, &certs.other_client_key),
        };
        v.extend(["--tls-cert", cert.to_str().unwrap()]);
        v.extend(["--tls-key", key.to_str().unwrap()]);
    }
    v
}

/// A producer run that must fail within [`REFUSED_WITHIN`], and store nothing.
fn refused(pair: &Pair, b: &Broker, topic: &str, security: &[&str]) {
    let mut more = vec!["--count", "1", "--timeout", REFUSED_WITHIN];
    more.extend_from_slice(security);
    let mut all = vec![b.bootstrap.as_str(), topic];
    all.extend(more);
    let done = pair.produce.run(&all, b"", RUN);
    assert!(
        !done.status.success(),
        "a producer with {security:?} was served:\n{}",
        done.stdout
    );
    assert_nothing_stored(b, topic);
}

fn assert_nothing_stored(b: &Broker, topic: &str) {
    let first = b.broker.offset_for_timestamp(topic, 0, 0).unwrap();
    assert_eq!(first, None, "a record was stored in {topic}");
}

/// Produce ten records and read them back in a group, with `security`.
fn served(pair: &Pair, b: &Broker, topic: &str, security: &[&str]) {
    let mut more = vec!["--count", "10"];
    more.extend_from_slice(security);
    let produced = pair
        .produce
        .run_json(&args(&b.bootstrap, topic, &more), RUN);
    // aiokafka reports a batch's first timestamp for all of its records.
    read_back_natively(b, topic, &produced, "r", Stamps::AtMost);
    let group = format!("{topic}-group");
    let mut more = vec![group.as_str(), "--count", "10"];
    more.extend_from_slice(security);
    let consumed = pair
        .consume
        .run_json(&args(&b.bootstrap, topic, &more), RUN);
    assert_eq!(script_records(&consumed), script_records(&produced));
}

/// The whole check for one client: TLS with the right and the wrong CA, then mutual TLS.
fn tls_and_mutual_tls(pair: Pair) {
    let certs = Certs::new();
    let b = Broker::start_with(|builder| builder.tls(certs.server(false)));
    b.create("tls", 1);
    served(&pair, &b, "tls", &tls(&certs.ca, None));
    b.create("tls-wrong-ca", 1);
    refused(&pair, &b, "tls-wrong-ca", &tls(&certs.other_ca, None));
    drop(b);

    let b = Broker::start_with(|builder| builder.tls(certs.server(true)));
    for (topic, client) in [("no-cert", None), ("other-ca-cert", Some((&certs, false)))] {
        b.create(topic, 1);
        refused(&pair, &b, topic, &tls(&certs.ca, client));
    }
    b.create("mtls", 1);
    served(&pair, &b, "mtls", &tls(&certs.ca, Some((&certs, true))));
}

#[test]
fn confluent_kafka_over_tls_and_mutual_tls() {
    let Some(pair) = python("confluent") else {
        return;
    };
    tls_and_mutual_tls(pair);
}

#[test]
fn kafka_python_over_tls_and_mutual_tls() {
    let Some(pair) = python("kafka_python") else {
        return;
    };
    tls_and_mutual_tls(pair);
}

#[test]
fn aiokafka_over_tls_and_mutual_tls() {
    let Some(pair) = python("aiokafka") else {
        return;
    };
    tls_and_mutual_tls(pair);
}

#[test]
fn kafkajs_over_tls_and_mutual_tls() {
    let Some(pair) = pair(
        clients::node("kafkajs_produce.js"),
        clients::node("kafkajs_consume.js"),
    ) else {
        return;
    };
    tls_and_mutual_tls(pair);
}

/// kcat's `-X` settings for TLS trusting `ca`, presenting the good client certificate when
/// `mutual`.
fn kcat_tls(certs: &Certs, ca: &std::path::Path, mutual: bool) -> Vec<String> {
    let mut x = vec![
        "security.protocol=ssl".to_owned(),
        format!("ssl.ca.location={}", ca.display()),
    ];
    if mutual {
        x.push(format!(
            "ssl.certificate.location={}",
            certs.client_cert.display()
        ));
        x.push(format!("ssl.key.location={}", certs.client_key.display()));
    }
    x.into_iter().flat_map(|x| ["-X".to_owned(), x]).collect()
}

#[test]
fn kcat_over_tls_and_mutual_tls() {
    let Some(kcat) = clients::kcat() else { return };
    let certs = Certs::new();
    let run = |b: &Broker, security: &[String], more: &[&str], stdin: &[u8]| {
        let mut all: Vec<&str> = vec!["-b", &b.bootstrap, "-m", REFUSED_WITHIN];
        all.extend(security.iter().map(String::as_str));
        all.extend_from_slice(more);
        kcat.run(&all, stdin, RUN)
    };
    let produce = ["-P", "-t", "kt", "-K:"];
    let consume = ["-C", "-t", "kt", "-o", "beginning", "-e", "-c", "2"];
    for mutual in [false, true] {
        let b = Broker::start_with(|builder| builder.tls(certs.server(mutual)));
        b.create("kt", 1);
        let wrong = run(
            &b,
            &kcat_tls(&certs, &certs.other_ca, mutual),
            &produce,
            b"x:y\n",
        );
        assert!(!wrong.status.success(), "served with another CA");
        if mutual {
            let no_cert = run(&b, &kcat_tls(&certs, &certs.ca, false), &produce, b"x:y\n");
            assert!(!no_cert.status.success(), "served without a certificate");
        }
        assert_nothing_stored(&b, "kt");
        let good = kcat_tls(&certs, &certs.ca, mutual);
        let sent = run(&b, &good, &produce, b"k1:v1\nk2:v2\n");
        assert!(sent.status.success(), "{}", sent.stderr);
        let read = run(&b, &good, &consume, b"");
        assert!(read.status.success(), "{}", read.stderr);
        assert_eq!(read.stdout.lines().collect::<Vec<_>>(), ["v1", "v2"]);
    }
}

/// SASL/PLAIN over TLS: the right password is served, a wrong one refused.
#[test]
fn confluent_kafka_sasl_plain_over_tls() {
    let Some(pair) = python("confluent") else {
        return;
    };
    let certs = Certs::new();
    let b = Broker::start_with(|builder| {
        builder
            .listener(ListenerConfig::new("127.0.0.1:0").sasl_plain("alice", "s3cret"))
            .tls(certs.server(false))
    });
    let mut security = tls(&certs.ca, None);
    b.create("sasl-wrong", 1);
    security.extend(["--sasl-plain", "alice:wrong"]);
    refused(&pair, &b, "sasl-wrong", &security);
    security.truncate(2);
    security.extend(["--sasl-plain", "alice:s3cret"]);
    b.create("sasl-ssl", 1);
    served(&pair, &b, "sasl-ssl", &security);
}

/// Plaintext and TLS on two addresses: one group across both (a member on each, the
/// partitions split between them), and each address advertises itself as the one broker.
#[test]
fn plaintext_and_tls_at_once_are_one_broker_with_one_group() {
    let (Some(pair), Some(kcat)) = (python("confluent"), clients::kcat()) else {
        return;
    };
    let certs = Certs::new();
    let tls_port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let tls_bootstrap = format!("127.0.0.1:{tls_port}");
    let b = Broker::start_with(|builder| {
        builder.listener(
            ListenerConfig::new("127.0.0.1:0")
                .tls(certs.server(false))
                .tls_listen(tls_bootstrap.clone()),
        )
    });
    b.create("both", 2);
    let security = tls(&certs.ca, None);
    let mut more = vec!["--count", "10"];
    more.extend_from_slice(&security);
    let produced = pair
        .produce
        .run_json(&args(&tls_bootstrap, "both", &more), RUN);
    assert_read_back_natively(&b, "both", &produced, "r");

    // A member on each address: one group, so the two partitions are split between them.
    let mut more = vec!["one-group", "--until-stdin-closes"];
    let plain = pair.consume.spawn(&args(&b.bootstrap, "both", &more));
    more.extend_from_slice(&security);
    let secure = pair.consume.spawn(&args(&tls_bootstrap, "both", &more));
    for member in [&plain, &secure] {
        member.wait_for_stdout("one partition of the two", RUN, |out| {
            assignment(out).len() == 1
        });
    }
    let held: BTreeSet<u32> = [&plain, &secure]
        .iter()
        .flat_map(|m| assignment(&m.stdout()))
        .collect();
    assert_eq!(held, BTreeSet::from([0, 1]), "each member one partition");
    plain.finish(RUN);
    secure.finish(RUN);

    for (bootstrap, security) in [
        (b.bootstrap.clone(), Vec::new()),
        (tls_bootstrap.clone(), kcat_tls(&certs, &certs.ca, false)),
    ] {
        let mut all: Vec<&str> = vec!["-b", &bootstrap, "-L", "-J"];
        all.extend(security.iter().map(String::as_str));
        let metadata = kcat.run_ok(&all, b"", RUN).json();
        let brokers = metadata["brokers"].as_array().unwrap();
        assert_eq!(brokers.len(), 1, "{metadata}");
        assert_eq!(brokers[0]["name"], bootstrap.as_str(), "{metadata}");
    }
}
