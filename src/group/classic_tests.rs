use super::*;

const SESSION: u64 = 10_000;
const REBALANCE: u64 = 5_000;

fn group(initial_delay_ms: u64) -> ClassicGroup {
    ClassicGroup::new("g", SESSION, initial_delay_ms, 0xab)
}

fn request(member_id: &str, protocols: &[&str]) -> JoinRequest {
    JoinRequest {
        member_id: member_id.to_owned(),
        client_id: "client".to_owned(),
        client_host: "/127.0.0.1".to_owned(),
        session_timeout_ms: SESSION,
        rebalance_timeout_ms: REBALANCE,
        protocol_type: "consumer".to_owned(),
        protocols: protocols
            .iter()
            .map(|name| Protocol {
                name: (*name).to_owned(),
                metadata: name.as_bytes().to_vec(),
            })
            .collect(),
        topics: Some(BTreeSet::from(["t".to_owned()])),
        require_known_member_id: true,
        instance_id: None,
    }
}

/// A JoinGroup's step (what the tests of dynamic members look at).
fn step(joined: Result<Joined, ClassicError>) -> Result<JoinStep, ClassicError> {
    joined.map(|j| j.step)
}

/// Joins a new member through MEMBER_ID_REQUIRED; returns its id.
fn join_new(g: &mut ClassicGroup, protocols: &[&str], now: u64) -> String {
    let Err(ClassicError::MemberIdRequired(id)) = g.join(request("", protocols), now) else {
        panic!("a v4 join without an id is asked to come back with one");
    };
    assert_eq!(
        step(g.join(request(&id, protocols), now)),
        Ok(JoinStep::Wait(id.clone()))
    );
    id
}

fn complete(g: &mut ClassicGroup) -> Vec<JoinAnswer> {
    let barrier = g.reach_barrier();
    g.finish_rebalance(barrier.protocol, BTreeMap::new())
}

#[test]
fn a_new_member_needs_the_id_it_was_given_and_ids_are_unique() {
    let mut g = group(0);
    let a = join_new(&mut g, &["range"], 0);
    let b = join_new(&mut g, &["range"], 0);
    assert_ne!(a, b);
    assert!(a.starts_with("client-ab-"), "{a}");
    assert_eq!(
        step(g.join(request("made-up", &["range"]), 0)),
        Err(ClassicError::UnknownMemberId)
    );
    // A pending id lapses after the session timeout.
    let Err(ClassicError::MemberIdRequired(late)) = g.join(request("", &["range"]), 0) else {
        panic!()
    };
    assert_eq!(
        step(g.join(request(&late, &["range"]), SESSION + 1)),
        Err(ClassicError::UnknownMemberId)
    );
}

#[test]
fn the_barrier_waits_for_every_known_member_then_the_generation_moves() {
    let mut g = group(0);
    let a = join_new(&mut g, &["range"], 0);
    assert!(g.barrier_reached(0));
    let answers = complete(&mut g);
    assert_eq!(answers.len(), 1);
    assert_eq!((answers[0].generation, answers[0].leader.as_str()), (1, ""));
    assert_eq!(g.state(), ClassicState::CompletingRebalance);
    assert_eq!(
        g.sync(&a, None, 1, (None, None), vec![], 1),
        Ok(SyncStep::Answer(vec![]))
    );
    assert_eq!(g.state(), ClassicState::Stable);

    // b joins: a must join again before the generation completes.
    let b = join_new(&mut g, &["range"], 2);
    assert_eq!(g.state(), ClassicState::PreparingRebalance);
    assert!(!g.barrier_reached(2));
    assert_eq!(
        g.heartbeat(&a, None, 1, 2),
        Err(ClassicError::RebalanceInProgress)
    );
    assert_eq!(
        step(g.join(request(&a, &["range"]), 3)),
        Ok(JoinStep::Wait(a.clone()))
    );
    assert!(g.barrier_reached(3));
    let answers = complete(&mut g);
    assert_eq!(answers.len(), 2);
    assert!(answers
        .iter()
        .all(|j| j.generation == 2 && j.members.is_empty()));
    assert_eq!(
        g.heartbeat(&b, None, 1, 4),
        Err(ClassicError::IllegalGeneration)
    );
    assert_eq!(g.heartbeat(&b, None, 2, 4), Ok(()));
}

#[test]
fn members_that_miss_the_deadline_are_dropped() {
    let mut g = group(0);
    let a = join_new(&mut g, &["range"], 0);
    complete(&mut g);
    let b = join_new(&mut g, &["range"], 100);
    assert!(!g.barrier_reached(100 + REBALANCE - 1));
    assert_eq!(g.next_deadline(), Some(100 + REBALANCE));
    assert!(g.barrier_reached(100 + REBALANCE));
    let barrier = g.reach_barrier();
    assert_eq!(barrier.removed.len(), 1);
    assert_eq!(barrier.removed[0].id, a);
    let answers = g.finish_rebalance(barrier.protocol, BTreeMap::new());
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0].member_id, b);
}

#[test]
fn a_group_starting_empty_waits_the_initial_delay() {
    let mut g = group(3_000);
    join_new(&mut g, &["range"], 0);
    assert!(!g.barrier_reached(2_999));
    assert_eq!(g.next_deadline(), Some(3_000));
    join_new(&mut g, &["range"], 1_000);
    assert!(g.barrier_reached(3_000));
    assert_eq!(complete(&mut g).len(), 2);
}

#[test]
fn eager_protocols_win_over_cooperative_and_inconsistent_ones_are_refused() {
    let mut g = group(0);
    join_new(&mut g, &["cooperative-sticky", "range"], 0);
    join_new(&mut g, &["cooperative-sticky", "range", "roundrobin"], 0);
    assert_eq!(
        step(g.join(request("", &["roundrobin"]), 0)),
        Err(ClassicError::InconsistentGroupProtocol)
    );
    let answers = complete(&mut g);
    assert!(answers.iter().all(|j| j.protocol_name == "range"));

    // Cooperative only: it is what they offer, so it is what they get.
    let mut g = group(0);
    join_new(&mut g, &["cooperative-sticky"], 0);
    assert_eq!(complete(&mut g)[0].protocol_name, "cooperative-sticky");
}

#[test]
fn a_follower_rejoining_unchanged_gets_the_current_generation_without_a_rebalance() {
    let mut g = group(0);
    let a = join_new(&mut g, &["range"], 0);
    complete(&mut g);
    let Ok(JoinStep::Answer(answer)) = step(g.join(request(&a, &["range"]), 1)) else {
        panic!("answered at once")
    };
    assert_eq!(answer.generation, 1);
    assert_eq!(g.state(), ClassicState::CompletingRebalance);
    // With other protocols it is a rebalance.
    assert_eq!(
        step(g.join(request(&a, &["roundrobin"]), 2)),
        Ok(JoinStep::Wait(a.clone()))
    );
    assert_eq!(g.state(), ClassicState::PreparingRebalance);
}

#[test]
fn silent_members_expire_and_leaving_rebalances() {
    let mut g = group(0);
    let a = join_new(&mut g, &["range"], 0);
    let b = join_new(&mut g, &["range"], 0);
    complete(&mut g);
    g.heartbeat(&a, None, 1, SESSION).unwrap();
    assert!(g.expire(SESSION).is_empty(), "exactly the timeout is alive");
    let expired = g.expire(SESSION + 1);
    assert_eq!(expired.len(), 1);
    assert_eq!(expired[0].id, b);
    assert_eq!(g.state(), ClassicState::PreparingRebalance);
    assert_eq!(
        step(g.join(request(&a, &["range"]), SESSION + 2)),
        Ok(JoinStep::Wait(a.clone()))
    );
    complete(&mut g);
    assert!(g.remove(&a, SESSION + 3, "left").is_some());
    assert!(g.barrier_reached(SESSION + 3), "nobody left to wait for");
    assert!(complete(&mut g).is_empty());
    assert_eq!(g.state(), ClassicState::Empty);
    assert_eq!(g.generation(), 3);
}

#[test]
fn commits_are_fenced_by_member_and_generation() {
    let mut g = group(0);
    assert_eq!(
        g.check_commit("", None, -1, 0),
        Ok(()),
        "standalone on an empty group"
    );
    assert_eq!(
        g.check_commit("made-by-a-kip-848-client", None, -1, 0),
        Ok(()),
        "standalone on an empty group, whatever member id it names"
    );
    let a = join_new(&mut g, &["range"], 0);
    complete(&mut g);
    assert_eq!(
        g.check_commit(&a, None, 1, 0),
        Err(ClassicError::RebalanceInProgress)
    );
    g.sync(&a, None, 1, (None, None), vec![], 0).unwrap();
    assert_eq!(g.check_commit(&a, None, 1, 0), Ok(()));
    assert_eq!(
        g.check_commit(&a, None, 0, 0),
        Err(ClassicError::IllegalGeneration)
    );
    assert_eq!(
        g.check_commit("x", None, 1, 0),
        Err(ClassicError::UnknownMemberId)
    );
    assert_eq!(
        g.check_commit("", None, -1, 0),
        Err(ClassicError::UnknownMemberId)
    );
    assert_eq!(
        g.check_commit("made-by-a-kip-848-client", None, -1, 0),
        Err(ClassicError::UnknownMemberId)
    );
}

#[test]
fn a_leader_assigned_group_elects_a_leader_whose_sync_releases_the_followers() {
    let mut g = group(0);
    let connect = |id: &str| {
        let mut r = request(id, &["sessioned"]);
        r.protocol_type = "connect".to_owned();
        r.topics = None;
        r
    };
    let Err(ClassicError::MemberIdRequired(a)) = g.join(connect(""), 0) else {
        panic!()
    };
    g.join(connect(&a), 0).unwrap();
    let Err(ClassicError::MemberIdRequired(b)) = g.join(connect(""), 0) else {
        panic!()
    };
    g.join(connect(&b), 0).unwrap();
    let answers = complete(&mut g);
    let leader = answers
        .iter()
        .find(|j| j.leader == j.member_id)
        .expect("a leader");
    assert_eq!(leader.members.len(), 2);
    let follower = answers.iter().find(|j| j.leader != j.member_id).unwrap();
    assert!(follower.members.is_empty());
    assert_eq!(g.assigning(), Assigning::Leader);
    assert_eq!(
        g.sync(&follower.member_id, None, 1, (None, None), vec![], 1),
        Ok(SyncStep::Wait)
    );
    let given = vec![(a.clone(), b"to-a".to_vec()), (b.clone(), b"to-b".to_vec())];
    let Ok(SyncStep::Release(released)) =
        g.sync(&leader.member_id, None, 1, (None, None), given, 1)
    else {
        panic!()
    };
    assert_eq!(released.len(), 2);
    assert_eq!(g.state(), ClassicState::Stable);
    // A consumer client cannot join a connect group.
    assert_eq!(
        step(g.join(request("", &["range"]), 2)),
        Err(ClassicError::InconsistentGroupProtocol)
    );
}

#[test]
fn a_consumer_group_voting_for_an_unknown_assignor_elects_a_leader_and_relays_its_bytes() {
    let mut g = group(0);
    let a = join_new(&mut g, &["stream"], 0);
    let b = join_new(&mut g, &["stream", "range"], 0);
    let answers = complete(&mut g);
    assert_eq!(g.assigning(), Assigning::Leader);
    let leader = answers.iter().find(|j| j.member_id == j.leader).unwrap();
    assert_eq!(leader.protocol_name, "stream");
    let handed: BTreeMap<String, Vec<u8>> = leader.members.iter().cloned().collect();
    let metadata = b"stream".to_vec();
    assert_eq!(
        handed,
        BTreeMap::from([(a.clone(), metadata.clone()), (b.clone(), metadata)])
    );
    let follower = if leader.member_id == a { &b } else { &a };
    assert_eq!(
        g.sync(follower, None, 1, (None, None), vec![], 1),
        Ok(SyncStep::Wait)
    );
    let given = vec![
        (a.clone(), b"\0to-a".to_vec()),
        (b.clone(), b"\0to-b".to_vec()),
    ];
    let Ok(SyncStep::Release(released)) =
        g.sync(&leader.member_id, None, 1, (None, None), given.clone(), 1)
    else {
        panic!("the leader's sync releases the follower")
    };
    assert_eq!(released, given);

    // Voting for a known assignor again, the broker assigns.
    g.join(request(&a, &["range"]), 2).unwrap();
    g.join(request(&b, &["range"]), 2).unwrap();
    let answers = complete(&mut g);
    assert_eq!(g.assigning(), Assigning::Broker);
    assert!(answers
        .iter()
        .all(|j| j.leader.is_empty() && j.protocol_name == "range"));
}

#[test]
fn a_session_timeout_out_of_the_brokers_bounds_is_refused() {
    let mut g = group(0);
    for session_timeout_ms in [0, SESSION + 1] {
        let mut r = request("", &["range"]);
        r.session_timeout_ms = session_timeout_ms;
        assert_eq!(step(g.join(r, 0)), Err(ClassicError::InvalidSessionTimeout));
    }
    assert_eq!(g.state(), ClassicState::Empty);
    join_new(&mut g, &["range"], 0);
}

fn static_request(member_id: &str, instance: &str, protocols: &[&str]) -> JoinRequest {
    JoinRequest {
        instance_id: Some(instance.to_owned()),
        ..request(member_id, protocols)
    }
}

/// Joins an unknown instance: a new member at once (no MEMBER_ID_REQUIRED detour). Its id.
fn join_static(g: &mut ClassicGroup, instance: &str, protocols: &[&str], now: u64) -> String {
    let joined = g.join(static_request("", instance, protocols), now);
    let Ok(Joined {
        step: JoinStep::Wait(id),
        fenced: None,
    }) = joined
    else {
        panic!("an unknown instance joins as a new member: {joined:?}")
    };
    id
}

/// Completes the rebalance, each member assigned its own id's bytes, and syncs every member;
/// a leader-assigned group's leader hands out the same.
fn complete_and_sync(g: &mut ClassicGroup, now: u64) {
    let barrier = g.reach_barrier();
    let assignments: BTreeMap<String, Vec<u8>> = g
        .members()
        .map(|m| (m.id.clone(), m.id.as_bytes().to_vec()))
        .collect();
    let answers = g.finish_rebalance(barrier.protocol, assignments.clone());
    for a in &answers {
        let instance = g.member(&a.member_id).unwrap().instance_id.clone();
        let given = match a.leader == a.member_id {
            true => assignments.clone().into_iter().collect(),
            false => Vec::new(),
        };
        let synced = g.sync(
            &a.member_id,
            instance.as_deref(),
            a.generation,
            (None, None),
            given,
            now,
        );
        assert!(synced.is_ok(), "{synced:?}");
    }
    assert_eq!(g.state(), ClassicState::Stable);
}

/// A `Stable` group at generation 1 of a static member (instance `a-1`) and a dynamic one:
/// the group and their ids.
fn stable_pair() -> (ClassicGroup, String, String) {
    let mut g = group(0);
    let a = join_static(&mut g, "a-1", &["range"], 0);
    let b = join_new(&mut g, &["range"], 0);
    complete_and_sync(&mut g, 0);
    (g, a, b)
}

/// The instance's process restarts: a JoinGroup without a member id, the same instance id.
fn restart(g: &mut ClassicGroup, instance: &str, protocols: &[&str], now: u64) -> Joined {
    g.join(static_request("", instance, protocols), now)
        .unwrap()
}

#[test]
fn a_static_member_restarting_within_its_session_timeout_keeps_its_assignment_without_a_rebalance()
{
    let (mut g, a, b) = stable_pair();
    assert!(
        a.starts_with("a-1-"),
        "Kafka's shape: the instance id first: {a}"
    );

    let restarted = restart(&mut g, "a-1", &["range"], SESSION - 1);
    assert_eq!(restarted.fenced.as_deref(), Some(a.as_str()));
    let JoinStep::Answer(answer) = restarted.step else {
        panic!("answered at once: {restarted:?}")
    };
    let a2 = answer.member_id.clone();
    assert_ne!(a2, a, "a new member id");
    assert_eq!(answer.generation, 1, "the same generation");
    assert_eq!(g.state(), ClassicState::Stable, "no rebalance");
    assert_eq!(
        g.sync(&a2, Some("a-1"), 1, (None, None), vec![], SESSION - 1),
        Ok(SyncStep::Answer(a.as_bytes().to_vec())),
        "the assignment of the member it replaced"
    );
    assert_eq!(g.heartbeat(&b, None, 1, SESSION - 1), Ok(()));
    let member = g.member(&a2).unwrap();
    assert_eq!(member.native_id, a, "its native memberships keep their id");
    assert!(g.member(&a).is_none());
    // Alive from its restart on: the old member's silence does not count against it.
    assert!(g.expire(SESSION + 1).is_empty());
}

#[test]
fn a_static_member_restarting_after_its_session_timeout_joins_anew_in_a_rebalance() {
    let (mut g, a, b) = stable_pair();
    g.heartbeat(&b, None, 1, SESSION).unwrap();
    let expired = g.expire(SESSION + 1);
    assert_eq!(expired.len(), 1);
    assert_eq!(expired[0].id, a);
    assert_eq!(g.state(), ClassicState::PreparingRebalance);
    let a2 = join_static(&mut g, "a-1", &["range"], SESSION + 2);
    assert_ne!(a2, a);
    assert_eq!(g.member(&a2).unwrap().native_id, a2);
    assert_eq!(
        step(g.join(request(&b, &["range"]), SESSION + 2)),
        Ok(JoinStep::Wait(b.clone()))
    );
    assert_eq!(complete(&mut g)[0].generation, 2);
}

#[test]
fn the_replaced_member_id_and_a_wrong_pairing_are_fenced_and_change_nothing() {
    let (mut g, a, b) = stable_pair();
    let JoinStep::Answer(answer) = restart(&mut g, "a-1", &["range"], 1).step else {
        panic!()
    };
    let a2 = answer.member_id;
    g.sync(&a2, Some("a-1"), 1, (None, None), vec![], 1)
        .unwrap();

    let fenced = Err(ClassicError::FencedInstanceId);
    let old = Some("a-1");
    assert_eq!(g.heartbeat(&a, old, 1, 2), fenced);
    assert_eq!(
        g.sync(&a, old, 1, (None, None), vec![], 2),
        Err(ClassicError::FencedInstanceId)
    );
    assert_eq!(g.check_commit(&a, old, 1, 2), fenced);
    assert_eq!(
        g.leave(&a, old, 2).map(|m| m.id),
        Err(ClassicError::FencedInstanceId)
    );
    assert_eq!(
        step(g.join(static_request(&a, "a-1", &["range"]), 2)),
        Err(ClassicError::FencedInstanceId)
    );
    // Another member's id with this instance id: fenced too.
    assert_eq!(g.heartbeat(&b, old, 1, 2), fenced);
    // An instance id the group does not know.
    assert_eq!(
        g.heartbeat(&a2, Some("nobody"), 1, 2),
        Err(ClassicError::UnknownMemberId)
    );
    assert_eq!(g.state(), ClassicState::Stable);
    assert_eq!(g.members().count(), 2);
    assert_eq!(g.heartbeat(&a2, old, 1, 2), Ok(()));
    assert_eq!(g.check_commit(&a2, old, 1, 2), Ok(()));
}

#[test]
fn leave_group_names_a_static_member_by_its_instance_id() {
    let (mut g, a, b) = stable_pair();
    let unknown = Err(ClassicError::UnknownMemberId);
    assert_eq!(g.leave("", Some("nobody"), 1).map(|m| m.id), unknown);
    assert_eq!(g.leave("", None, 1).map(|m| m.id), unknown);
    assert_eq!(g.state(), ClassicState::Stable, "nothing changed");
    assert_eq!(g.leave("", Some("a-1"), 1).map(|m| m.id), Ok(a));
    assert_eq!(g.state(), ClassicState::PreparingRebalance);
    assert_eq!(g.leave(&b, None, 1).map(|m| m.id), Ok(b));
    assert_eq!(g.members().count(), 0);
}

#[test]
fn a_restart_that_changes_the_subscription_or_comes_mid_rebalance_rebalances() {
    let mut g = group(0);
    let a = join_static(&mut g, "a-1", &["range"], 0);
    complete_and_sync(&mut g, 0);
    let mut other_topics = static_request("", "a-1", &["range"]);
    other_topics.topics = Some(BTreeSet::from(["u".to_owned()]));
    let joined = g.join(other_topics, 1).unwrap();
    assert_eq!(joined.fenced.as_deref(), Some(a.as_str()));
    let JoinStep::Wait(a2) = joined.step else {
        panic!("a rebalance: {joined:?}")
    };
    assert_eq!(g.state(), ClassicState::PreparingRebalance);
    assert_eq!(
        g.member(&a2).unwrap().topics,
        BTreeSet::from(["u".to_owned()])
    );
    complete(&mut g);
    assert_eq!(g.state(), ClassicState::CompletingRebalance);
    // Restarted before it synced: the leader may have assigned the old id, so a rebalance.
    let JoinStep::Wait(_) = restart(&mut g, "a-1", &["range"], 2).step else {
        panic!("a rebalance")
    };
    assert_eq!(g.state(), ClassicState::PreparingRebalance);
}

#[test]
fn a_restarted_leader_of_a_leader_assigned_group_is_told_the_old_leader_and_syncs_its_assignment() {
    let mut g = group(0);
    let a = join_static(&mut g, "a-1", &["stream"], 0);
    let b = join_static(&mut g, "b-1", &["stream"], 0);
    complete_and_sync(&mut g, 0);
    assert_eq!(g.assigning(), Assigning::Leader);

    let JoinStep::Answer(answer) = restart(&mut g, "a-1", &["stream"], 1).step else {
        panic!("no rebalance")
    };
    // As Kafka answers JoinGroup v0-8: the leader it replaced, no member list, so the new
    // process does not assign again but syncs what its predecessor assigned.
    assert_eq!(answer.leader, a);
    assert!(answer.members.is_empty());
    assert_eq!(g.state(), ClassicState::Stable);
    let a2 = answer.member_id;
    assert_eq!(
        g.sync(&a2, Some("a-1"), 1, (None, None), vec![], 1),
        Ok(SyncStep::Answer(a.as_bytes().to_vec()))
    );
    assert_eq!(g.heartbeat(&b, Some("b-1"), 1, 1), Ok(()));
    // It is the leader now: its JoinGroup with the same metadata rebalances, as a leader's does.
    assert_eq!(
        step(g.join(static_request(&a2, "a-1", &["stream"]), 2)),
        Ok(JoinStep::Wait(a2.clone()))
    );
    assert_eq!(g.state(), ClassicState::PreparingRebalance);
}
