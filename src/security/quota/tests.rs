use std::sync::Arc;

use super::admin::{self, AdminError, Match};
use super::store::QUOTAS_FILE;
use super::*;
use crate::clock::ManualClock;
use crate::storage::fs;

use EntityName::{Default as Dflt, Named};

fn named(s: &str) -> Option<EntityName> {
    Some(Named(s.to_owned()))
}

fn entity(user: Option<EntityName>, client: Option<EntityName>) -> QuotaEntity {
    QuotaEntity::new(user, client)
}

const P: QuotaKey = QuotaKey::ProducerByteRate;

/// One quota per level of Kafka's order, each with its level as value.
fn every_level() -> Vec<QuotaEntity> {
    vec![
        entity(named("alice"), named("app")),
        entity(named("alice"), Some(Dflt)),
        entity(named("alice"), None),
        entity(Some(Dflt), named("app")),
        entity(Some(Dflt), Some(Dflt)),
        entity(Some(Dflt), None),
        entity(None, named("app")),
        entity(None, Some(Dflt)),
    ]
}

#[test]
fn the_most_specific_entity_wins_in_kafkas_order() {
    let levels = every_level();
    let mut config = QuotaConfig::default();
    for (level, e) in levels.iter().enumerate() {
        config.set(e, P, Some(level as f64 + 1.0));
    }
    // Remove the levels one by one from the top: each time the next one decides.
    for (level, e) in levels.iter().enumerate() {
        let (tags, bound) = config.resolve(P, "alice", "app").unwrap();
        assert_eq!(bound, level as f64 + 1.0, "level {}: {e}", level + 1);
        let expected_tags = match level {
            2 | 5 => ("alice", ""),
            6 | 7 => ("", "app"),
            _ => ("alice", "app"),
        };
        assert_eq!((tags.user.as_str(), tags.client_id.as_str()), expected_tags);
        config.set(e, P, None);
    }
    assert_eq!(config.resolve(P, "alice", "app"), None);
    assert!(config.is_empty());
}

#[test]
fn a_quota_covers_only_its_own_key_and_entities() {
    let mut config = QuotaConfig::default();
    config.set(&entity(None, named("greedy")), P, Some(1_000.0));
    config.set(
        &entity(named("bob"), None),
        QuotaKey::ConsumerByteRate,
        Some(5.0),
    );
    assert_eq!(config.resolve(P, "ANONYMOUS", "polite"), None);
    assert_eq!(
        config.resolve(QuotaKey::ConsumerByteRate, "ANONYMOUS", "greedy"),
        None
    );
    let (tags, bound) = config.resolve(P, "ANONYMOUS", "greedy").unwrap();
    assert_eq!(
        (tags.user.as_str(), tags.client_id.as_str(), bound),
        ("", "greedy", 1_000.0)
    );
    // A user quota: one rate for all the user's clients.
    let (a, _) = config
        .resolve(QuotaKey::ConsumerByteRate, "bob", "x")
        .unwrap();
    let (b, _) = config
        .resolve(QuotaKey::ConsumerByteRate, "bob", "y")
        .unwrap();
    assert_eq!(a, b);
}

#[test]
fn clients_sharing_an_entity_share_its_rate_and_throttle_time() {
    let mut config = QuotaConfig::default();
    config.set(&entity(named("alice"), None), P, Some(1_000.0));
    let mut sensors = Sensors::default();
    let t0 = 1_000_000;
    assert_eq!(sensors.record(&config, P, ("alice", "a"), 5_000.0, t0), 0);
    // 15 000 B over the 10 s minimum span: 1500 B/s against 1000, (1500-1000)/1000 × 10 s.
    assert_eq!(
        sensors.record(&config, P, ("alice", "b"), 10_000.0, t0),
        5_000
    );
    // Another user is not covered.
    assert_eq!(sensors.record(&config, P, ("carol", "a"), 1e9, t0), 0);
    // A single burst is throttled at most the measured span.
    assert_eq!(sensors.record(&config, P, ("alice", "a"), 1e9, t0), 11_000);
    assert_eq!(sensors.rate_count(), 1);
}

#[test]
fn request_time_is_throttled_at_most_one_window() {
    let mut config = QuotaConfig::default();
    config.set(
        &entity(None, Some(Dflt)),
        QuotaKey::RequestPercentage,
        Some(10.0),
    );
    let mut sensors = Sensors::default();
    // 2 s of handler time = 200 percent-seconds, over 10 s: 20 % against 10 %.
    let throttle = sensors.record(&config, QuotaKey::RequestPercentage, ("u", "c"), 200.0, 0);
    assert_eq!(throttle, 1_000);
}

#[test]
fn values_are_checked_as_kafka_does() {
    assert!(P.validate(1_048_576.0).is_ok());
    assert!(P.validate(0.0).unwrap_err().contains("greater than 0"));
    assert!(P.validate(-1.0).is_err());
    assert!(P.validate(1.5).is_err());
    assert!(P.validate(f64::NAN).is_err());
    assert!(QuotaKey::RequestPercentage.validate(12.5).is_ok());
    assert!(QuotaKey::RequestPercentage.validate(f64::INFINITY).is_err());
}

fn open(dir: &std::path::Path, clock: &ManualClock) -> crate::error::Result<ClientQuotas> {
    ClientQuotas::open(fs::os(), dir, Arc::new(clock.clone()))
}

#[test]
fn the_store_round_trips_and_a_second_process_sees_changes_within_a_second() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_000_000);
    let serving = open(dir.path(), &clock).unwrap();
    assert!(!serving.is_active());
    let cli = open(dir.path(), &clock).unwrap();
    let levels = every_level();
    cli.alter(|c| {
        for (i, e) in levels.iter().enumerate() {
            c.set(e, QuotaKey::ALL[i % 3], Some(i as f64 + 1.0));
        }
    })
    .unwrap();
    let reopened = open(dir.path(), &clock).unwrap();
    assert_eq!(reopened.config(), cli.config());
    assert_eq!(reopened.config().entries().count(), 8);
    // The serving one looks again only once a second has passed.
    assert_eq!(serving.record(P, "alice", "app", 1e9), 0);
    clock.advance(1_000);
    assert!(serving.is_active());
    assert!(serving.record(P, "alice", "app", 1e9) > 0);
}

#[test]
fn a_damaged_store_is_refused_naming_the_file_and_a_running_one_keeps_its_quotas() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(0);
    let quotas = open(dir.path(), &clock).unwrap();
    quotas
        .alter(|c| c.set(&entity(None, named("app")), P, Some(100.0)))
        .unwrap();
    let file = dir.path().join("security").join(QUOTAS_FILE);
    let damaged: [&[u8]; 6] = [
        b"{\"version\":1,\"quotas\":[",
        b"{\"version\":2,\"quotas\":[]}",
        b"{\"version\":1,\"quotas\":[{\"entity\":{},\"values\":{\"producer_byte_rate\":1}}]}",
        b"{\"version\":1,\"quotas\":[{\"entity\":{\"ip\":null},\"values\":{\"producer_byte_rate\":1}}]}",
        b"{\"version\":1,\"quotas\":[{\"entity\":{\"user\":\"a\"},\"values\":{\"byte_rate\":1}}]}",
        b"{\"version\":1,\"quotas\":[{\"entity\":{\"user\":\"a\"},\"values\":{\"producer_byte_rate\":-5}}]}",
    ];
    for bytes in damaged {
        std::fs::write(&file, bytes).unwrap();
        let e = open(dir.path(), &clock).unwrap_err();
        assert!(
            matches!(&e, crate::error::Error::Corrupt { path, .. } if *path == file),
            "{e}"
        );
        clock.advance(1_000);
        assert!(quotas.is_active(), "{}", String::from_utf8_lossy(bytes));
        assert_eq!(
            quotas.config().get(&entity(None, named("app")), P),
            Some(100.0)
        );
    }
}

fn components(list: &[(&str, i8, Option<&str>)]) -> Vec<(String, Match)> {
    list.iter()
        .map(|(t, m, n)| (t.to_string(), Match::from_wire(*m, *n).unwrap()))
        .collect()
}

#[test]
fn describe_filters_as_kafka_does() {
    let mut config = QuotaConfig::default();
    for e in every_level() {
        config.set(&e, P, Some(1.0));
    }
    let count = |list: &[(&str, i8, Option<&str>)], strict| {
        admin::describe(&config, &components(list), strict)
            .unwrap()
            .len()
    };
    assert_eq!(count(&[], false), 8);
    assert_eq!(count(&[], true), 0);
    assert_eq!(count(&[("user", 0, Some("alice"))], false), 3);
    assert_eq!(count(&[("user", 0, Some("alice"))], true), 1);
    assert_eq!(count(&[("user", 1, None)], false), 3);
    assert_eq!(count(&[("user", 2, None)], false), 6);
    assert_eq!(count(&[("user", 2, None), ("client-id", 2, None)], true), 4);
    assert_eq!(count(&[("client-id", 0, Some("app"))], true), 1);
    assert_eq!(count(&[("ip", 2, None)], false), 0);
    let refused = |list: &[(&str, i8, Option<&str>)]| {
        admin::describe(&config, &components(list), false).unwrap_err()
    };
    assert!(matches!(
        refused(&[("user", 2, None), ("user", 1, None)]),
        AdminError::InvalidRequest(_)
    ));
    assert!(matches!(
        refused(&[("ip", 2, None), ("user", 1, None)]),
        AdminError::InvalidRequest(_)
    ));
    assert!(matches!(
        refused(&[("group", 2, None)]),
        AdminError::UnsupportedEntityType(_)
    ));
    assert!(Match::from_wire(0, None).is_err());
    assert!(Match::from_wire(1, Some("x")).is_err());
    assert!(Match::from_wire(3, None).is_err());
}

#[test]
fn alter_applies_an_entry_whole_or_not_at_all() {
    let mut config = QuotaConfig::default();
    let e = QuotaEntity::from_parts([("user", Some("alice")), ("client-id", None)]).unwrap();
    assert_eq!(e, entity(named("alice"), Some(Dflt)));
    let ops = |list: &[(&str, Option<f64>)]| -> Vec<admin::Op> {
        list.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    };
    admin::alter(&mut config, &e, &ops(&[("producer_byte_rate", Some(10.0))])).unwrap();
    let bad = ops(&[
        ("consumer_byte_rate", Some(5.0)),
        ("producer_byte_rate", Some(0.0)),
    ]);
    assert!(admin::alter(&mut config, &e, &bad).is_err());
    assert!(admin::alter(&mut config, &e, &ops(&[("nope", Some(1.0))])).is_err());
    assert_eq!(config.get(&e, QuotaKey::ConsumerByteRate), None);
    assert_eq!(config.get(&e, P), Some(10.0));
    admin::alter(&mut config, &e, &ops(&[("producer_byte_rate", None)])).unwrap();
    assert!(config.is_empty());
    for parts in [
        vec![],
        vec![("user", Some(""))],
        vec![("user", None), ("user", Some("a"))],
        vec![("ip", Some("1.2.3.4"))],
        vec![("group", Some("g"))],
    ] {
        assert!(QuotaEntity::from_parts(parts.clone()).is_err(), "{parts:?}");
    }
}
