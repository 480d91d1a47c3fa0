//! The decision rules one by one, the filters, and the store.

use super::*;

fn binding(
    resource_type: ResourceType,
    pattern_type: PatternType,
    name: &str,
    principal: &str,
    operation: Operation,
    permission: Permission,
) -> AclBinding {
    AclBinding {
        resource_type,
        pattern_type,
        name: name.into(),
        principal: principal.into(),
        host: WILDCARD.into(),
        operation,
        permission,
    }
}

fn allow(name: &str, operation: Operation) -> AclBinding {
    binding(
        ResourceType::Topic,
        PatternType::Literal,
        name,
        "User:alice",
        operation,
        Permission::Allow,
    )
}

fn deny(name: &str, operation: Operation) -> AclBinding {
    AclBinding {
        permission: Permission::Deny,
        ..allow(name, operation)
    }
}

fn may(acls: &Acls, who: &str, operation: Operation, topic: &str) -> bool {
    acls.authorize(&Action {
        principal: who,
        host: "127.0.0.1",
        operation,
        resource_type: ResourceType::Topic,
        name: topic,
    })
}

#[test]
fn no_matching_allow_denies() {
    let acls = Acls::default();
    assert!(!may(&acls, "User:alice", Operation::Read, "orders"));
    let acls = Acls::new([allow("orders", Operation::Read)]);
    assert!(!may(&acls, "User:alice", Operation::Read, "payments"));
    assert!(!may(&acls, "User:bob", Operation::Read, "orders"));
    assert!(!may(&acls, "User:alice", Operation::Write, "orders"));
    assert!(may(&acls, "User:alice", Operation::Read, "orders"));
}

#[test]
fn a_literal_matches_its_name_only_and_the_wildcard_every_name() {
    let acls = Acls::new([allow("orders", Operation::Read)]);
    assert!(!may(&acls, "User:alice", Operation::Read, "orders2"));
    assert!(!may(&acls, "User:alice", Operation::Read, "order"));
    let acls = Acls::new([allow(WILDCARD, Operation::Read)]);
    assert!(may(&acls, "User:alice", Operation::Read, "orders"));
    assert!(may(&acls, "User:alice", Operation::Read, "anything"));
}

#[test]
fn a_prefixed_pattern_matches_names_that_start_with_it() {
    let acls = Acls::new([AclBinding {
        pattern_type: PatternType::Prefixed,
        ..allow("team-", Operation::Read)
    }]);
    assert!(may(&acls, "User:alice", Operation::Read, "team-orders"));
    assert!(may(&acls, "User:alice", Operation::Read, "team-"));
    assert!(!may(&acls, "User:alice", Operation::Read, "team"));
    assert!(!may(&acls, "User:alice", Operation::Read, "other-team-x"));
    // A prefixed `*` is a prefix like any other, not the wildcard.
    let acls = Acls::new([AclBinding {
        pattern_type: PatternType::Prefixed,
        ..allow(WILDCARD, Operation::Read)
    }]);
    assert!(!may(&acls, "User:alice", Operation::Read, "orders"));
}

#[test]
fn a_resource_type_matches_only_itself() {
    let acls = Acls::new([binding(
        ResourceType::Group,
        PatternType::Literal,
        "orders",
        "User:alice",
        Operation::Read,
        Permission::Allow,
    )]);
    assert!(!may(&acls, "User:alice", Operation::Read, "orders"));
}

#[test]
fn a_deny_wins_over_any_allow() {
    let acls = Acls::new([
        allow(WILDCARD, Operation::All),
        deny("secret", Operation::Read),
    ]);
    assert!(!may(&acls, "User:alice", Operation::Read, "secret"));
    assert!(may(&acls, "User:alice", Operation::Write, "secret"));
    assert!(may(&acls, "User:alice", Operation::Read, "public"));
    // A prefixed deny of every user beats a literal allow of one.
    let acls = Acls::new([
        allow("team-secret", Operation::Read),
        binding(
            ResourceType::Topic,
            PatternType::Prefixed,
            "team-",
            WILDCARD_PRINCIPAL,
            Operation::All,
            Permission::Deny,
        ),
    ]);
    assert!(!may(&acls, "User:alice", Operation::Read, "team-secret"));
}

#[test]
fn all_matches_every_operation() {
    let acls = Acls::new([allow("orders", Operation::All)]);
    for &operation in Operation::ALL {
        assert!(may(&acls, "User:alice", operation, "orders"), "{operation}");
    }
    let acls = Acls::new([
        allow("orders", Operation::All),
        deny("orders", Operation::All),
    ]);
    assert!(!may(&acls, "User:alice", Operation::Describe, "orders"));
}

#[test]
fn read_write_delete_and_alter_imply_describe() {
    for granted in [
        Operation::Read,
        Operation::Write,
        Operation::Delete,
        Operation::Alter,
    ] {
        let acls = Acls::new([allow("orders", granted)]);
        assert!(
            may(&acls, "User:alice", Operation::Describe, "orders"),
            "{granted}"
        );
        assert!(!may(
            &acls,
            "User:alice",
            Operation::DescribeConfigs,
            "orders"
        ));
    }
    let acls = Acls::new([allow("orders", Operation::Create)]);
    assert!(!may(&acls, "User:alice", Operation::Describe, "orders"));
    let acls = Acls::new([allow("orders", Operation::Describe)]);
    assert!(!may(&acls, "User:alice", Operation::Read, "orders"));
}

#[test]
fn alter_configs_implies_describe_configs() {
    let acls = Acls::new([allow("orders", Operation::AlterConfigs)]);
    assert!(may(
        &acls,
        "User:alice",
        Operation::DescribeConfigs,
        "orders"
    ));
    assert!(!may(&acls, "User:alice", Operation::Describe, "orders"));
}

#[test]
fn a_deny_implies_nothing() {
    let acls = Acls::new([
        allow("orders", Operation::All),
        deny("orders", Operation::Read),
    ]);
    assert!(may(&acls, "User:alice", Operation::Describe, "orders"));
}

#[test]
fn the_wildcard_principal_matches_every_user() {
    let acls = Acls::new([AclBinding {
        principal: WILDCARD_PRINCIPAL.into(),
        ..allow("orders", Operation::Read)
    }]);
    assert!(may(&acls, "User:bob", Operation::Read, "orders"));
    assert!(may(&acls, "User:ANONYMOUS", Operation::Read, "orders"));
}

#[test]
fn a_host_matches_itself_or_the_wildcard() {
    let from = |host: &str| AclBinding {
        host: host.into(),
        ..allow("orders", Operation::Read)
    };
    assert!(may(
        &Acls::new([from("127.0.0.1")]),
        "User:alice",
        Operation::Read,
        "orders"
    ));
    assert!(!may(
        &Acls::new([from("10.0.0.1")]),
        "User:alice",
        Operation::Read,
        "orders"
    ));
    let deny_remote = Acls::new([
        from("*"),
        AclBinding {
            host: "10.0.0.1".into(),
            ..deny("orders", Operation::Read)
        },
    ]);
    assert!(may(&deny_remote, "User:alice", Operation::Read, "orders"));
}

#[test]
fn super_users_may_do_everything() {
    let dir = tempfile::tempdir().unwrap();
    let store = AclStore::open(dir.path()).unwrap();
    store
        .update(|acls| (acls.add(deny(WILDCARD, Operation::All)), ()))
        .unwrap();
    let authorizer = Authorizer::new(store, ["User:admin".to_owned()]);
    let action = |principal| Action {
        principal,
        host: "127.0.0.1",
        operation: Operation::Delete,
        resource_type: ResourceType::Topic,
        name: "orders",
    };
    assert!(authorizer.authorize(&action("User:admin")));
    assert!(!authorizer.authorize(&action("User:alice")));
}

#[test]
fn some_topic_writable_is_what_authorize_any_asks() {
    let any = |acls: &Acls| {
        acls.authorize_any(&Action {
            principal: "User:alice",
            host: "127.0.0.1",
            operation: Operation::Write,
            resource_type: ResourceType::Topic,
            name: "",
        })
    };
    assert!(!any(&Acls::default()));
    assert!(any(&Acls::new([allow("orders", Operation::Write)])));
    assert!(!any(&Acls::new([allow("orders", Operation::Read)])));
    assert!(!any(&Acls::new([
        allow("orders", Operation::Write),
        deny(WILDCARD, Operation::Write)
    ])));
}

#[test]
fn filters_select_as_kafkas_do() {
    let literal = allow("team-orders", Operation::Read);
    let prefixed = AclBinding {
        pattern_type: PatternType::Prefixed,
        ..allow("team-", Operation::Write)
    };
    let wildcard = allow(WILDCARD, Operation::Describe);
    let acls = Acls::new([literal.clone(), prefixed.clone(), wildcard.clone()]);
    let select = |filter: AclFilter| acls.matching(&filter).cloned().collect::<Vec<_>>();
    assert_eq!(select(AclFilter::default()).len(), 3);
    let by_name = |pattern| AclFilter {
        name: Some("team-orders".into()),
        pattern: Some(pattern),
        ..AclFilter::default()
    };
    assert_eq!(select(by_name(PatternFilter::Any)), vec![literal.clone()]);
    assert_eq!(select(by_name(PatternFilter::Match)).len(), 3);
    assert_eq!(
        select(AclFilter {
            pattern: Some(PatternFilter::Exactly(PatternType::Prefixed)),
            ..AclFilter::default()
        }),
        vec![prefixed]
    );
    assert_eq!(
        select(AclFilter {
            operation: Some(Operation::Describe),
            ..AclFilter::default()
        }),
        vec![wildcard]
    );
    assert!(AclFilter::from_wire((0, 3, 1, 1), None, None, None).is_err());
    assert!(AclFilter::from_wire((1, 0, 1, 1), None, None, None).is_err());
    assert_eq!(
        AclFilter::from_wire((1, 2, 1, 1), None, None, None),
        Ok(AclFilter {
            pattern: Some(PatternFilter::Match),
            ..AclFilter::default()
        })
    );
}

#[test]
fn bindings_kafka_would_refuse_are_refused() {
    assert!(allow("orders", Operation::Read).validate().is_ok());
    assert!(allow("", Operation::Read).validate().is_err());
    let bad_principal = AclBinding {
        principal: "alice".into(),
        ..allow("orders", Operation::Read)
    };
    assert!(bad_principal.validate().is_err());
    let cluster = |name: &str| {
        binding(
            ResourceType::Cluster,
            PatternType::Literal,
            name,
            "User:alice",
            Operation::Alter,
            Permission::Allow,
        )
    };
    assert!(cluster(CLUSTER_NAME).validate().is_ok());
    assert!(cluster("other").validate().is_err());
}

#[test]
fn kafka_acls_names_parse_in_any_spelling() {
    assert_eq!(
        Operation::parse("DescribeConfigs"),
        Some(Operation::DescribeConfigs)
    );
    assert_eq!(
        Operation::parse("idempotent-write"),
        Some(Operation::IdempotentWrite)
    );
    assert_eq!(Operation::parse("read"), Some(Operation::Read));
    assert_eq!(Operation::parse("Any"), None);
    assert_eq!(PatternType::parse("prefixed"), Some(PatternType::Prefixed));
}

#[test]
fn the_store_round_trips_and_a_second_store_sees_a_change() {
    let dir = tempfile::tempdir().unwrap();
    let store = AclStore::open(dir.path()).unwrap();
    assert!(store.current().is_empty());
    let serving = AclStore::open(dir.path()).unwrap();
    let added = store
        .update(|acls| {
            let added = acls.add(allow("orders", Operation::Read));
            (added, added)
        })
        .unwrap();
    assert!(added);
    assert_eq!(
        AclStore::open(dir.path())
            .unwrap()
            .current()
            .iter()
            .collect::<Vec<_>>(),
        vec![&allow("orders", Operation::Read)]
    );
    // The other store (a running broker's) reads the change without being reopened.
    assert!(may(
        &serving.current(),
        "User:alice",
        Operation::Read,
        "orders"
    ));
    let removed = store
        .update(|acls| {
            let removed = acls.remove_matching(&AclFilter::default());
            (!removed.is_empty(), removed.len())
        })
        .unwrap();
    assert_eq!(removed, 1);
    assert!(serving.current().is_empty());
}

#[test]
fn a_damaged_store_is_refused_naming_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = AclStore::open(dir.path()).unwrap();
    store
        .update(|acls| (acls.add(allow("orders", Operation::Read)), ()))
        .unwrap();
    let path = store.path().to_owned();
    let good = std::fs::read_to_string(&path).unwrap();
    for damage in [
        good[..good.len() / 2].to_owned(),
        good.replace("READ", "READS"),
        good.replace("nanokafka-acls", "something-else"),
        good.replace("\"version\": 1", "\"version\": 2"),
        good.replace("User:alice", "alice"),
    ] {
        std::fs::write(&path, &damage).unwrap();
        let err = AclStore::open(dir.path()).unwrap_err();
        assert!(
            matches!(&err, AclError::Damaged { path: p, .. } if *p == path),
            "{err}"
        );
        assert!(err.to_string().contains(&path.display().to_string()));
        // A broker serving on it allows nothing it allowed before, and a change is refused.
        assert!(!may(
            &store.current(),
            "User:alice",
            Operation::Read,
            "orders"
        ));
        assert!(store.update(|_| (true, ())).is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), damage);
    }
}
