use super::*;
use crate::group::{Assignor, GroupState};

const SESSION: u64 = 45_000;

/// A consumer group and the native groups of its topics (`t`: 4 partitions, `u`: 2), as the
/// listener's actor drives them.
struct Sim {
    group: ConsumerGroup,
    native: BTreeMap<String, GroupState>,
    topics: BTreeMap<String, u32>,
    now: u64,
}

impl Sim {
    fn new() -> Self {
        Sim {
            group: ConsumerGroup::new("g", SESSION, 0xab),
            native: BTreeMap::new(),
            topics: BTreeMap::from([("t".to_owned(), 4), ("u".to_owned(), 2)]),
            now: 0,
        }
    }

    fn beat(&mut self, request: HeartbeatRequest) -> Result<HeartbeatAnswer, ConsumerError> {
        let (epoch, full) = (request.member_epoch, request.owned.is_some());
        let existing = self.topics.keys().cloned().collect();
        let step = match self.group.begin(request, &existing, self.now)? {
            HeartbeatStep::Reconcile(step) => step,
            HeartbeatStep::Left {
                member_id,
                native,
                topics,
                epoch,
            } => {
                for topic in topics {
                    let _ = self
                        .native
                        .get_mut(&topic)
                        .unwrap()
                        .leave(&native, self.now);
                }
                return Ok(HeartbeatAnswer {
                    member_id,
                    member_epoch: epoch,
                    assignment: None,
                });
            }
        };
        let Reconcile {
            member_id,
            native: name,
            topics,
            lingering,
            dropped,
            holding,
            assignor,
        } = step;
        for topic in dropped {
            let _ = self.native.get_mut(&topic).unwrap().leave(&name, self.now);
        }
        let mut granted = Partitions::new();
        for topic in topics.iter().chain(&lingering) {
            let partitions = self.topics[topic];
            let native = self.native.entry(topic.clone()).or_insert_with(|| {
                let assignor = match assignor {
                    "range" => Assignor::Range,
                    _ => Assignor::Sticky,
                };
                GroupState::new(topic, "g", partitions, assignor, SESSION)
            });
            let held = holding.get(topic).cloned().unwrap_or_default();
            let assignment = native.join_kafka_member(&name, &held, self.now);
            if topics.contains(topic) {
                granted.insert(topic.clone(), assignment.partitions.into_iter().collect());
            }
        }
        let joined = topics.union(&lingering).cloned().collect();
        Ok(self
            .group
            .finish(&member_id, granted, joined, epoch, full, self.now)
            .unwrap())
    }
}

impl Sim {
    /// The group's expiry at `now`, and the fenced members leaving their native groups as
    /// the actor makes them: the ids of those removed.
    fn expire(&mut self, now: u64) -> Vec<String> {
        self.now = now;
        let gone = self.group.expire(now);
        for (member, topics) in &gone {
            for topic in topics {
                let _ = self.native.get_mut(topic).unwrap().leave(member, now);
            }
        }
        gone.into_iter().map(|(member, _)| member).collect()
    }

    /// `a` holds all of `t`, `b` joins, and at [`ASKED`] `a` is told to revoke half of it
    /// (what it keeps is returned); `a`'s rebalance timeout is [`REBALANCE`].
    fn asked_to_revoke(&mut self) -> Vec<u32> {
        let mut a = join("a", &["t"]);
        a.rebalance_timeout_ms = REBALANCE as i32;
        self.beat(a).unwrap();
        self.beat(beat("a", 1, Some(&[("t", &[0, 1, 2, 3])])))
            .unwrap();
        self.now = 100;
        self.beat(join("b", &["t"])).unwrap();
        self.now = ASKED;
        let a = self.beat(beat("a", 1, None)).unwrap();
        assert_eq!(a.member_epoch, 1);
        assigned(&a)["t"].iter().copied().collect()
    }
}

/// `a`'s rebalance timeout in [`Sim::asked_to_revoke`], and when it is asked.
const REBALANCE: u64 = 5_000;
const ASKED: u64 = 1_000;
const ALL: &[(&str, &[u32])] = &[("t", &[0, 1, 2, 3])];

fn join(member: &str, topics: &[&str]) -> HeartbeatRequest {
    HeartbeatRequest {
        version: 1,
        member_id: member.to_owned(),
        member_epoch: 0,
        rebalance_timeout_ms: 30_000,
        subscribed_topic_names: Some(topics.iter().map(|t| (*t).to_owned()).collect()),
        owned: Some(Partitions::new()),
        ..HeartbeatRequest::default()
    }
}

/// A heartbeat at `epoch`; `owned`: `None` for unchanged, else (topic, partitions).
fn beat(member: &str, epoch: i32, owned: Option<&[(&str, &[u32])]>) -> HeartbeatRequest {
    HeartbeatRequest {
        version: 1,
        member_id: member.to_owned(),
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        owned: owned.map(parts),
        ..HeartbeatRequest::default()
    }
}

fn parts(list: &[(&str, &[u32])]) -> Partitions {
    list.iter()
        .map(|(t, ps)| ((*t).to_owned(), ps.iter().copied().collect()))
        .collect()
}

fn assigned(answer: &HeartbeatAnswer) -> Partitions {
    answer.assignment.clone().expect("an assignment")
}

#[test]
fn a_lone_member_joins_at_epoch_one_and_gets_every_partition() {
    let mut sim = Sim::new();
    let a = sim.beat(join("a", &["t", "missing"])).unwrap();
    assert_eq!(a.member_id, "a");
    assert_eq!(a.member_epoch, 1);
    assert_eq!(assigned(&a), parts(&[("t", &[0, 1, 2, 3])]));
    assert_eq!(sim.group.state(), ConsumerGroupState::Stable);
    // Nothing changed: the answer carries no assignment.
    let again = sim.beat(beat("a", 1, None)).unwrap();
    assert_eq!((again.member_epoch, again.assignment), (1, None));
}

#[test]
fn a_partition_is_revoked_from_its_owner_before_it_is_assigned_elsewhere() {
    let mut sim = Sim::new();
    sim.beat(join("a", &["t"])).unwrap();
    sim.beat(beat("a", 1, Some(&[("t", &[0, 1, 2, 3])])))
        .unwrap();
    // b joins: epoch 2; what b's share holds is still a's.
    let b = sim.beat(join("b", &["t"])).unwrap();
    assert_eq!((b.member_epoch, assigned(&b)), (2, Partitions::new()));
    assert_eq!(sim.group.group_epoch(), 2);
    // a is told to keep half and stays at epoch 1 until it reports the rest gone.
    let a = sim.beat(beat("a", 1, None)).unwrap();
    assert_eq!(a.member_epoch, 1);
    let kept = assigned(&a);
    assert_eq!(kept["t"].len(), 2);
    assert_eq!(sim.group.state(), ConsumerGroupState::Reconciling);
    // b still gets nothing while a holds everything.
    let b = sim.beat(beat("b", 2, None)).unwrap();
    assert_eq!(b.assignment, None);
    // a revoked: it moves to epoch 2, then b gets the rest, still at epoch 2.
    let kept_list: Vec<u32> = kept["t"].iter().copied().collect();
    let a = sim.beat(beat("a", 1, Some(&[("t", &kept_list)]))).unwrap();
    assert_eq!(a.member_epoch, 2);
    let b = sim.beat(beat("b", 2, None)).unwrap();
    assert_eq!(b.member_epoch, 2);
    let given: BTreeSet<u32> = (0..4).filter(|p| !kept["t"].contains(p)).collect();
    assert_eq!(assigned(&b), Partitions::from([("t".to_owned(), given)]));
    assert_eq!(sim.group.state(), ConsumerGroupState::Stable);
}

#[test]
fn a_leaving_member_hands_its_partitions_over() {
    let mut sim = Sim::new();
    sim.beat(join("a", &["t"])).unwrap();
    sim.beat(join("b", &["t"])).unwrap();
    let kept: Vec<u32> = assigned(&sim.beat(beat("a", 1, None)).unwrap())["t"]
        .iter()
        .copied()
        .collect();
    sim.beat(beat("a", 1, Some(&[("t", &kept)]))).unwrap();
    let b = sim.beat(beat("b", 2, Some(&[]))).unwrap();
    assert_eq!(assigned(&b)["t"].len(), 2);
    let left = sim.beat(beat("a", LEAVE_EPOCH, None)).unwrap();
    assert_eq!(left.member_epoch, LEAVE_EPOCH);
    assert_eq!(sim.group.group_epoch(), 3);
    let b = sim.beat(beat("b", 2, None)).unwrap();
    assert_eq!(
        (b.member_epoch, assigned(&b)),
        (3, parts(&[("t", &[0, 1, 2, 3])]))
    );
    // Gone: its epoch means nothing any more.
    assert_eq!(
        sim.beat(beat("a", 1, None)),
        Err(ConsumerError::UnknownMemberId)
    );
}

#[test]
fn epochs_other_than_the_members_are_fenced_except_a_lost_answers() {
    let mut sim = Sim::new();
    sim.beat(join("a", &["t"])).unwrap();
    assert_eq!(
        sim.beat(beat("a", 2, None)),
        Err(ConsumerError::FencedMemberEpoch)
    );
    sim.beat(join("b", &["u"])).unwrap();
    // a moved to epoch 2 in an answer it did not receive: epoch 1 with what it was given
    // passes.
    let a = sim.beat(beat("a", 1, None)).unwrap();
    assert_eq!(a.member_epoch, 2);
    let a = sim
        .beat(beat("a", 1, Some(&[("t", &[0, 1, 2, 3])])))
        .unwrap();
    assert_eq!(a.member_epoch, 2);
    assert!(a.assignment.is_some(), "a stale epoch is answered in full");
    // ...but not with a partition outside its assignment, nor from further back.
    assert_eq!(
        sim.beat(beat("a", 1, Some(&[("u", &[0])]))),
        Err(ConsumerError::FencedMemberEpoch)
    );
    assert_eq!(
        sim.beat(beat("a", 3, None)),
        Err(ConsumerError::FencedMemberEpoch)
    );
    // A fenced member joins again with epoch 0 and its id.
    let a = sim.beat(join("a", &["t"])).unwrap();
    assert!(a.member_epoch > 2);
}

#[test]
fn a_silent_member_is_removed_after_the_session_timeout() {
    let mut sim = Sim::new();
    sim.beat(join("a", &["t"])).unwrap();
    sim.now = SESSION;
    sim.beat(join("b", &["t"])).unwrap();
    assert!(sim.group.expire(SESSION).is_empty());
    let gone = sim.group.expire(SESSION + 1);
    assert_eq!(
        gone,
        vec![("a".to_owned(), BTreeSet::from(["t".to_owned()]))]
    );
    assert_eq!(sim.group.members().count(), 1);
    assert_eq!(sim.group.group_epoch(), 3);
}

#[test]
fn a_subscription_change_bumps_the_group_epoch_and_a_dropped_topic_is_left() {
    let mut sim = Sim::new();
    sim.beat(join("a", &["t"])).unwrap();
    let mut change = beat("a", 1, None);
    change.subscribed_topic_names = Some(BTreeSet::from(["u".to_owned()]));
    let a = sim.beat(change).unwrap();
    assert_eq!(sim.group.group_epoch(), 2);
    // It still holds t's partitions: it must give them up first, and until then nobody else
    // gets them.
    assert_eq!((a.member_epoch, assigned(&a)), (1, Partitions::new()));
    sim.beat(join("b", &["t"])).unwrap();
    assert_eq!(
        sim.native["t"].assignment().get("b"),
        Some(&vec![]),
        "t's partitions wait for a"
    );
    let a = sim.beat(beat("a", 1, Some(&[]))).unwrap();
    assert_eq!(
        (a.member_epoch, assigned(&a)),
        (3, parts(&[("u", &[0, 1])]))
    );
    assert!(
        !sim.native["t"].assignment().contains_key("a"),
        "left t's native group"
    );
    let b = sim.beat(beat("b", 3, None)).unwrap();
    assert_eq!(assigned(&b), parts(&[("t", &[0, 1, 2, 3])]));
}

#[test]
fn a_regex_subscription_matches_whole_names_and_sees_new_topics() {
    let mut sim = Sim::new();
    let mut request = join("a", &[]);
    request.subscribed_topic_names = None;
    request.subscribed_topic_regex = Some("t|v.*".to_owned());
    let a = sim.beat(request).unwrap();
    assert_eq!(assigned(&a), parts(&[("t", &[0, 1, 2, 3])]));
    sim.topics.insert("vv".to_owned(), 1);
    sim.topics.insert("tt".to_owned(), 1);
    let a = sim.beat(beat("a", 1, None)).unwrap();
    assert_eq!(sim.group.group_epoch(), 2);
    assert_eq!(
        (a.member_epoch, assigned(&a)),
        (2, parts(&[("t", &[0, 1, 2, 3]), ("vv", &[0])]))
    );
}

#[test]
fn bad_fields_are_refused_with_kafkas_errors_and_change_nothing() {
    let mut sim = Sim::new();
    let invalid = |r: Result<HeartbeatAnswer, ConsumerError>| {
        matches!(r, Err(ConsumerError::InvalidRequest(_)))
    };
    assert!(invalid(sim.beat(join("", &["t"]))), "v1 needs a member id");
    assert!(invalid(sim.beat(join("a", &[]))), "a join names topics");
    let mut r = join("a", &["t"]);
    r.rebalance_timeout_ms = -1;
    assert!(invalid(sim.beat(r)));
    let mut r = join("a", &["t"]);
    r.owned = Some(parts(&[("t", &[0])]));
    assert!(invalid(sim.beat(r)));
    assert!(invalid(sim.beat(beat("a", -3, None))));
    assert!(invalid(sim.beat(beat("a", STATIC_LEAVE_EPOCH, None))));
    let mut r = join("a", &["t"]);
    r.server_assignor = Some("sticky".to_owned());
    assert!(matches!(
        sim.beat(r),
        Err(ConsumerError::UnsupportedAssignor(_))
    ));
    let mut r = join("a", &["t"]);
    r.subscribed_topic_regex = Some("(".to_owned());
    assert!(matches!(
        sim.beat(r),
        Err(ConsumerError::InvalidRegularExpression(_))
    ));
    assert!(sim.group.is_empty());
    assert_eq!(sim.group.group_epoch(), 0);
    assert_eq!(
        sim.beat(beat("a", 1, None)),
        Err(ConsumerError::UnknownMemberId)
    );
}

#[test]
fn a_v0_join_without_a_member_id_gets_one() {
    let mut sim = Sim::new();
    let mut r = join("", &["t"]);
    r.version = 0;
    let a = sim.beat(r).unwrap();
    assert!(a.member_id.starts_with("member-ab-"), "{}", a.member_id);
    assert_eq!(a.member_epoch, 1);
}

#[test]
fn the_group_uses_the_assignor_most_members_name() {
    let mut sim = Sim::new();
    assert_eq!(sim.group.assignor(), "uniform");
    let mut r = join("a", &["t"]);
    r.server_assignor = Some("range".to_owned());
    sim.beat(r).unwrap();
    assert_eq!(sim.group.assignor(), "range");
    assert_eq!(sim.native["t"].assignor(), Assignor::Range);
    let mut r = join("b", &["t"]);
    r.server_assignor = Some("uniform".to_owned());
    sim.beat(r).unwrap();
    assert_eq!(sim.group.assignor(), "uniform", "a tie goes to the default");
    let mut r = join("c", &["t"]);
    r.server_assignor = Some("range".to_owned());
    sim.beat(r).unwrap();
    assert_eq!(sim.group.assignor(), "range");
}

#[test]
fn commits_and_offset_fetches_are_fenced_by_member_epoch() {
    let mut sim = Sim::new();
    // No members: a commit with a negative epoch passes whatever member id it names.
    assert_eq!(sim.group.check_commit("made-by-client", -1), Ok(()));
    sim.beat(join("a", &["t"])).unwrap();
    assert_eq!(sim.group.check_commit("a", 1), Ok(()));
    assert_eq!(
        sim.group.check_commit("a", 0),
        Err(ConsumerError::StaleMemberEpoch)
    );
    assert_eq!(
        sim.group.check_commit("other", -1),
        Err(ConsumerError::UnknownMemberId)
    );
    assert_eq!(sim.group.check_fetch(None, -1), Ok(()));
    assert_eq!(sim.group.check_fetch(Some("a"), 1), Ok(()));
    assert_eq!(
        sim.group.check_fetch(Some("a"), 2),
        Err(ConsumerError::StaleMemberEpoch)
    );
    assert_eq!(
        sim.group.check_fetch(Some("b"), 1),
        Err(ConsumerError::UnknownMemberId)
    );
}

#[test]
fn a_member_holding_on_to_a_revoked_partition_is_fenced_at_its_rebalance_timeout() {
    let mut sim = Sim::new();
    sim.asked_to_revoke();
    assert_eq!(sim.group.rebalance_deadline(), Some(ASKED + REBALANCE));
    // It keeps heartbeating, still reporting every partition: that does not reset the timer.
    for at in [2_000, 4_000, ASKED + REBALANCE - 1] {
        sim.now = at;
        let a = sim.beat(beat("a", 1, Some(ALL))).unwrap();
        assert_eq!(a.member_epoch, 1);
        assert_eq!(sim.expire(at), Vec::<String>::new(), "not fenced at {at}");
    }
    assert_eq!(sim.expire(ASKED + REBALANCE), ["a"]);
    assert_eq!(
        sim.group.group_epoch(),
        3,
        "the fence bumps the group epoch"
    );
    assert_eq!(sim.group.members().count(), 1);
}

#[test]
fn after_the_fence_the_partitions_reach_their_new_owner_and_the_fenced_member_is_unknown() {
    let mut sim = Sim::new();
    let kept = sim.asked_to_revoke();
    sim.now = 2_000;
    assert_eq!(sim.beat(beat("b", 2, None)).unwrap().assignment, None);
    sim.expire(ASKED + REBALANCE);
    let b = sim.beat(beat("b", 2, None)).unwrap();
    assert_eq!((b.member_epoch, assigned(&b)), (3, parts(ALL)));
    // Kafka removed it: its next heartbeat is UNKNOWN_MEMBER_ID, then it joins again.
    let a = sim.beat(beat("a", 1, Some(&[("t", &kept)])));
    assert_eq!(a, Err(ConsumerError::UnknownMemberId));
    let a = sim.beat(join("a", &["t"])).unwrap();
    assert_eq!((a.member_epoch, assigned(&a)), (4, Partitions::new()));
}

#[test]
fn a_member_that_revokes_in_time_is_not_fenced() {
    let mut sim = Sim::new();
    let kept = sim.asked_to_revoke();
    sim.now = ASKED + REBALANCE - 1;
    let a = sim.beat(beat("a", 1, Some(&[("t", &kept)]))).unwrap();
    assert_eq!(a.member_epoch, 2);
    assert_eq!(sim.group.rebalance_deadline(), None);
    assert_eq!(sim.expire(ASKED + REBALANCE), Vec::<String>::new());
    // Long after, within the session timeout of both.
    assert_eq!(sim.expire(SESSION), Vec::<String>::new());
    assert_eq!(sim.group.group_epoch(), 2);
}

#[test]
fn the_rebalance_timer_starts_again_for_a_revocation_asked_after_the_last_was_done() {
    let mut sim = Sim::new();
    let mut a = join("a", &["t", "u"]);
    a.rebalance_timeout_ms = REBALANCE as i32;
    sim.beat(a).unwrap();
    sim.beat(join("b", &["t"])).unwrap();
    sim.now = ASKED;
    let kept: Vec<u32> = assigned(&sim.beat(beat("a", 1, None)).unwrap())["t"]
        .iter()
        .copied()
        .collect();
    // It gives up what it was asked to, and in the same heartbeat drops `u`, which it must
    // now revoke: a new revocation, timed from this heartbeat.
    let later = ASKED + 3_000;
    sim.now = later;
    let mut drop_u = beat("a", 1, Some(&[("t", &kept), ("u", &[0, 1])]));
    drop_u.subscribed_topic_names = Some(BTreeSet::from(["t".to_owned()]));
    sim.beat(drop_u).unwrap();
    assert_eq!(sim.group.rebalance_deadline(), Some(later + REBALANCE));
    assert_eq!(sim.expire(ASKED + REBALANCE), Vec::<String>::new());
    assert_eq!(sim.expire(later + REBALANCE), ["a"]);
}

fn static_join(member: &str, instance: &str) -> HeartbeatRequest {
    let mut request = join(member, &["t"]);
    request.instance_id = Some(instance.to_owned());
    request
}

fn static_beat(member: &str, instance: &str, epoch: i32) -> HeartbeatRequest {
    let mut request = beat(member, epoch, None);
    request.instance_id = Some(instance.to_owned());
    request
}

/// Static member `a` (instance `ia`) and `b` share `t`, two partitions each, at epoch 2:
/// what `a` holds.
fn static_pair(sim: &mut Sim) -> Vec<u32> {
    sim.beat(static_join("a", "ia")).unwrap();
    sim.beat(join("b", &["t"])).unwrap();
    let a = sim.beat(static_beat("a", "ia", 1)).unwrap();
    let kept: Vec<u32> = assigned(&a)["t"].iter().copied().collect();
    sim.beat(beat("a", 1, Some(&[("t", &kept)]))).unwrap();
    let b = sim.beat(beat("b", 2, Some(&[]))).unwrap();
    assert_eq!(assigned(&b)["t"].len(), 2);
    assert_eq!(sim.group.state(), ConsumerGroupState::Stable);
    kept
}

#[test]
fn a_static_member_leaving_for_a_while_keeps_its_partitions_for_its_next_instance() {
    let mut sim = Sim::new();
    let kept = static_pair(&mut sim);
    let left = sim
        .beat(static_beat("a", "ia", STATIC_LEAVE_EPOCH))
        .unwrap();
    assert_eq!(left.member_epoch, STATIC_LEAVE_EPOCH);
    assert_eq!(sim.group.group_epoch(), 2, "no rebalance");
    let b = sim.beat(beat("b", 2, None)).unwrap();
    assert_eq!(
        (b.member_epoch, b.assignment),
        (2, None),
        "b gets nothing of a's"
    );
    // The instance comes back with a new member id: it takes a's place and partitions.
    let again = sim.beat(static_join("a2", "ia")).unwrap();
    assert_eq!(
        (again.member_epoch, assigned(&again)),
        (2, parts(&[("t", &kept)]))
    );
    assert_eq!(sim.group.group_epoch(), 2);
    assert_eq!(sim.group.members().count(), 2);
    // The member id it replaced is fenced.
    assert!(matches!(
        sim.beat(static_beat("a", "ia", 2)),
        Err(ConsumerError::FencedInstanceId(_))
    ));
}

#[test]
fn a_static_member_that_does_not_come_back_leaves_at_its_session_timeout() {
    let mut sim = Sim::new();
    static_pair(&mut sim);
    // Its session timeout runs from its last heartbeat, not from its leave.
    sim.now = 1_000;
    sim.beat(static_beat("a", "ia", 2)).unwrap();
    sim.now = 2_000;
    sim.beat(static_beat("a", "ia", STATIC_LEAVE_EPOCH))
        .unwrap();
    sim.now = SESSION;
    sim.beat(beat("b", 2, None)).unwrap();
    assert_eq!(sim.expire(1_000 + SESSION), Vec::<String>::new());
    assert_eq!(sim.expire(1_000 + SESSION + 1), ["a"]);
    let b = sim.beat(beat("b", 2, None)).unwrap();
    assert_eq!((b.member_epoch, assigned(&b)), (3, parts(ALL)));
}

#[test]
fn an_instance_id_in_use_is_refused_and_changes_nothing() {
    let mut sim = Sim::new();
    static_pair(&mut sim);
    assert!(matches!(
        sim.beat(static_join("x", "ia")),
        Err(ConsumerError::UnreleasedInstanceId(_))
    ));
    assert!(matches!(
        sim.beat(static_beat("x", "ia", STATIC_LEAVE_EPOCH)),
        Err(ConsumerError::FencedInstanceId(_))
    ));
    assert_eq!(
        sim.beat(static_beat("x", "unknown", STATIC_LEAVE_EPOCH)),
        Err(ConsumerError::UnknownMemberId)
    );
    assert_eq!(
        (sim.group.group_epoch(), sim.group.members().count()),
        (2, 2)
    );
    assert_eq!(sim.beat(static_beat("a", "ia", 2)).unwrap().member_epoch, 2);
}
