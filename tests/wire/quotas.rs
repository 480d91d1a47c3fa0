//! Client quotas through the listener: AlterClientQuotas and DescribeClientQuotas with
//! Kafka's rules, and a client over its quota throttled (KIP-219: the response says how
//! long, and the broker reads nothing more from that connection until then).

use std::time::{Duration, Instant};

use kafka_protocol::messages::{
    alter_client_quotas_request as alter, describe_client_quotas_request as describe,
    AlterClientQuotasRequest, AlterClientQuotasResponse, ApiVersionsRequest,
    DescribeClientQuotasRequest, DescribeClientQuotasResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use nanokafka::TopicConfig;

use crate::client::WireClient;
use crate::common::listening_broker;
use crate::records::{batch, produce};

const INVALID_REQUEST: i16 = 42;
const UNSUPPORTED_VERSION: i16 = 35;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

/// An AlterClientQuotas of one entity (`(type, name)`, `None` the default) and its ops
/// (`(key, value)`, `None` removes).
pub fn alter_request(
    entity: &[(&str, Option<&str>)],
    ops: &[(&str, Option<f64>)],
    validate_only: bool,
) -> AlterClientQuotasRequest {
    let entity = entity
        .iter()
        .map(|(t, n)| {
            alter::EntityData::default()
                .with_entity_type(s(t))
                .with_entity_name(n.map(s))
        })
        .collect();
    let ops = ops
        .iter()
        .map(|(k, v)| {
            alter::OpData::default()
                .with_key(s(k))
                .with_value(v.unwrap_or(0.0))
                .with_remove(v.is_none())
        })
        .collect();
    AlterClientQuotasRequest::default()
        .with_entries(vec![alter::EntryData::default()
            .with_entity(entity)
            .with_ops(ops)])
        .with_validate_only(validate_only)
}

fn alter_error(response: &AlterClientQuotasResponse) -> i16 {
    response.entries[0].error_code
}

/// A DescribeClientQuotas of `(type, match_type, match)` components.
fn describe_request(
    components: &[(&str, i8, Option<&str>)],
    strict: bool,
) -> DescribeClientQuotasRequest {
    let components = components
        .iter()
        .map(|(t, m, n)| {
            describe::ComponentData::default()
                .with_entity_type(s(t))
                .with_match_type(*m)
                .with_match(n.map(s))
        })
        .collect();
    DescribeClientQuotasRequest::default()
        .with_components(components)
        .with_strict(strict)
}

/// Each entry as `"type=name,..."` → `[(key, value)]`, sorted.
fn entries(response: &DescribeClientQuotasResponse) -> Vec<(String, Vec<(String, f64)>)> {
    let mut out: Vec<_> = (response.entries.iter().flatten())
        .map(|e| {
            let entity = (e.entity.iter())
                .map(|d| {
                    let name = d.entity_name.as_deref().unwrap_or("<default>");
                    format!("{}={name}", &*d.entity_type)
                })
                .collect::<Vec<_>>()
                .join(",");
            let values = (e.values.iter())
                .map(|v| (v.key.to_string(), v.value))
                .collect();
            (entity, values)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn quotas_are_altered_and_described_with_kafkas_rules_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (_broker, addr) = listening_broker(dir.path());
        let mut client = WireClient::connect(addr);
        for version in [0, 1] {
            let set = alter_request(
                &[("user", Some("alice")), ("client-id", None)],
                &[
                    ("producer_byte_rate", Some(1024.0)),
                    ("request_percentage", Some(25.0)),
                ],
                false,
            );
            assert_eq!(alter_error(&client.call(&set, version)), 0);
        }
        let dry = alter_request(
            &[("client-id", Some("app"))],
            &[("consumer_byte_rate", Some(8.0))],
            true,
        );
        assert_eq!(alter_error(&client.call(&dry, 1)), 0);
        let refused = [
            (
                alter_request(&[("user", Some("a"))], &[("nope", Some(1.0))], false),
                INVALID_REQUEST,
            ),
            (
                alter_request(
                    &[("user", Some("a"))],
                    &[("producer_byte_rate", Some(0.0))],
                    false,
                ),
                INVALID_REQUEST,
            ),
            (
                alter_request(
                    &[("user", Some("a"))],
                    &[("producer_byte_rate", Some(1.5))],
                    false,
                ),
                INVALID_REQUEST,
            ),
            (
                alter_request(&[], &[("producer_byte_rate", Some(1.0))], false),
                INVALID_REQUEST,
            ),
            (
                alter_request(
                    &[("user", Some(""))],
                    &[("producer_byte_rate", Some(1.0))],
                    false,
                ),
                INVALID_REQUEST,
            ),
            (
                alter_request(
                    &[("group", Some("g"))],
                    &[("producer_byte_rate", Some(1.0))],
                    false,
                ),
                INVALID_REQUEST,
            ),
        ];
        for (request, code) in refused {
            let response = client.call(&request, 1);
            assert_eq!(alter_error(&response), code, "{request:?}");
            assert!(response.entries[0].error_message.is_some());
        }
        let all = client.call(&describe_request(&[], false), 1);
        assert_eq!(all.error_code, 0);
        let expected = vec![(
            "user=alice,client-id=<default>".to_owned(),
            vec![
                ("producer_byte_rate".to_owned(), 1024.0),
                ("request_percentage".to_owned(), 25.0),
            ],
        )];
        assert_eq!(
            entries(&all),
            expected,
            "the dry run and the refusals changed nothing"
        );
        let strict_user = client.call(&describe_request(&[("user", 0, Some("alice"))], true), 0);
        assert_eq!(entries(&strict_user), vec![]);
        let user = client.call(&describe_request(&[("user", 0, Some("alice"))], false), 0);
        assert_eq!(entries(&user), expected);
        let both = describe_request(&[("user", 2, None), ("client-id", 1, None)], true);
        assert_eq!(entries(&client.call(&both, 1)), expected);
        let twice = describe_request(&[("user", 2, None), ("user", 1, None)], false);
        let response = client.call(&twice, 1);
        assert_eq!(
            (response.error_code, response.entries.is_none()),
            (INVALID_REQUEST, true)
        );
        let unknown = client.call(&describe_request(&[("group", 2, None)], false), 1);
        assert_eq!(unknown.error_code, UNSUPPORTED_VERSION);
        let remove = alter_request(
            &[("user", Some("alice")), ("client-id", None)],
            &[("request_percentage", None)],
            false,
        );
        assert_eq!(alter_error(&client.call(&remove, 1)), 0);
    }
    let (_broker, addr) = listening_broker(dir.path());
    let mut client = WireClient::connect(addr);
    let all = client.call(&describe_request(&[], false), 1);
    assert_eq!(
        entries(&all),
        vec![(
            "user=alice,client-id=<default>".to_owned(),
            vec![("producer_byte_rate".to_owned(), 1024.0)]
        )]
    );
}

#[test]
fn a_producer_over_its_quota_is_told_its_throttle_time_and_held_that_long() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    broker.create_topic("t", TopicConfig::default()).unwrap();
    let value = "x".repeat(40_000);
    let records = batch(&[&value], Compression::None, -1, 0);
    let mut admin = WireClient::connect_as(addr, "admin");
    let mut client = WireClient::connect(addr);
    // Without a quota: no throttle.
    let response = client.call(&produce("t", 0, records.clone(), -1), 9);
    assert_eq!(response.throttle_time_ms, 0);
    let quota = alter_request(
        &[("client-id", Some("wire-test"))],
        &[("producer_byte_rate", Some(3_000.0))],
        false,
    );
    assert_eq!(alter_error(&admin.call(&quota, 1)), 0);
    // About 40 KB over the 10 s minimum span is 4 KB/s against 3 KB/s: (4 - 3) / 3 × 10 s,
    // about 3.4 s of quiet.
    let response = client.call(&produce("t", 0, records, -1), 9);
    let throttle = response.throttle_time_ms;
    assert!(
        (1_000..=11_000).contains(&throttle),
        "throttle {throttle} ms"
    );
    assert_eq!(response.responses[0].partition_responses[0].error_code, 0);
    // The client ignores it; the broker does not read its next request until it ends.
    let asked = Instant::now();
    client.call(&ApiVersionsRequest::default(), 3);
    let held = asked.elapsed();
    assert!(
        held >= Duration::from_millis(throttle as u64 - 50),
        "held {held:?} of {throttle} ms"
    );
    // Another client's connection is not held.
    let asked = Instant::now();
    admin.call(&ApiVersionsRequest::default(), 3);
    assert!(asked.elapsed() < Duration::from_millis(throttle as u64 / 2));
}
