use super::*;

fn key(topic: &str, partition: i32) -> PartitionKey {
    PartitionKey {
        topic: TopicKey::Name(topic.into()),
        partition,
    }
}

fn at(fetch_offset: i64) -> FetchParams {
    FetchParams {
        fetch_offset,
        max_bytes: 1 << 20,
    }
}

fn watermark(high_watermark: i64) -> Answered {
    Answered {
        high_watermark,
        log_start_offset: 0,
        has_records: false,
        is_error: false,
    }
}

fn by_name(id: i32, epoch: i32) -> SessionRequest {
    SessionRequest {
        id,
        epoch,
        uses_topic_ids: false,
    }
}

const LIMITS: SessionLimits = SessionLimits {
    slots: 2,
    max_partitions: 3,
    eviction_ms: 1000,
};

/// A session of `partitions` of topic `t` (all at offset 0, high watermark 0) opened at
/// `now_ms`.
fn opened(cache: &mut FetchSessions, now_ms: u64, partitions: i32) -> i32 {
    let fetch: Vec<_> = (0..partitions).map(|p| (key("t", p), at(0))).collect();
    assert_eq!(
        cache.begin(now_ms, by_name(NO_SESSION, 0), &fetch, &[]),
        Context::Full
    );
    let answered = fetch.into_iter().map(|(k, p)| (k, p, watermark(0)));
    cache.open(now_ms, false, answered.collect::<Vec<_>>().into_iter())
}

fn incremental(
    cache: &mut FetchSessions,
    now_ms: u64,
    id: i32,
    epoch: i32,
    fetch: &[(PartitionKey, FetchParams)],
    forget: &[PartitionKey],
) -> Vec<(PartitionKey, FetchParams)> {
    match cache.begin(now_ms, by_name(id, epoch), fetch, forget) {
        Context::Incremental {
            id: got,
            partitions,
        } => {
            assert_eq!(got, id);
            partitions
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_full_fetch_opens_a_session_that_incremental_fetches_change_and_forget() {
    let mut cache = FetchSessions::new(LIMITS);
    let id = opened(&mut cache, 0, 2);
    assert!(id > 0);
    assert_eq!((cache.len(), cache.cached_partitions()), (1, 2));
    // Partition 0 moves on, partition 2 is added, nothing is forgotten.
    let fetched = incremental(
        &mut cache,
        1,
        id,
        1,
        &[(key("t", 0), at(5)), (key("t", 2), at(7))],
        &[],
    );
    assert_eq!(
        fetched,
        [
            (key("t", 0), at(5)),
            (key("t", 1), at(0)),
            (key("t", 2), at(7))
        ]
    );
    let fetched = incremental(&mut cache, 2, id, 2, &[], &[key("t", 1)]);
    assert_eq!(fetched, [(key("t", 0), at(5)), (key("t", 2), at(7))]);
    // Forgetting a partition the session does not have changes nothing.
    let fetched = incremental(&mut cache, 3, id, 3, &[], &[key("u", 0)]);
    assert_eq!(fetched.len(), 2);
}

#[test]
fn only_what_changed_is_answered_and_partitions_with_records_move_to_the_end() {
    let mut cache = FetchSessions::new(LIMITS);
    let id = opened(&mut cache, 0, 3);
    let fetched = incremental(&mut cache, 1, id, 1, &[], &[]);
    let records = Answered {
        has_records: true,
        ..watermark(1)
    };
    let error = Answered {
        is_error: true,
        ..watermark(-1)
    };
    let moved_start = Answered {
        log_start_offset: 4,
        ..watermark(0)
    };
    let answers = [
        (fetched[0].0.clone(), records),
        (fetched[1].0.clone(), watermark(0)),
        (fetched[2].0.clone(), moved_start),
    ];
    assert_eq!(cache.answer(id, 1, &answers), Ok(vec![true, false, true]));
    let fetched = incremental(&mut cache, 2, id, 2, &[], &[]);
    let order: Vec<i32> = fetched.iter().map(|(k, _)| k.partition).collect();
    assert_eq!(order, [1, 2, 0], "the partition that got records goes last");
    // Nothing new: nothing answered. Then an error is answered every time, and the
    // partition once more when it clears, whatever its high watermark.
    let quiet = [
        (key("t", 1), watermark(0)),
        (key("t", 2), moved_start),
        (key("t", 0), watermark(1)),
    ];
    assert_eq!(cache.answer(id, 2, &quiet), Ok(vec![false, false, false]));
    for epoch in [3, 4] {
        incremental(&mut cache, 3, id, epoch, &[], &[]);
        let failing = [(key("t", 1), error)];
        assert_eq!(cache.answer(id, epoch, &failing), Ok(vec![true]));
    }
    incremental(&mut cache, 4, id, 5, &[], &[]);
    assert_eq!(cache.answer(id, 5, &quiet), Ok(vec![true, false, false]));
}

#[test]
fn a_wrong_epoch_an_unknown_id_and_the_other_naming_are_refused_and_change_nothing() {
    let mut cache = FetchSessions::new(LIMITS);
    let id = opened(&mut cache, 0, 1);
    let added = [(key("t", 1), at(0))];
    let refused = |cache: &mut FetchSessions, request| match cache.begin(1, request, &added, &[]) {
        Context::Refused(e) => e,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        refused(&mut cache, by_name(id, 2)),
        SessionError::InvalidFetchSessionEpoch
    );
    assert_eq!(
        refused(&mut cache, by_name(id.wrapping_add(1).max(1), 1)),
        SessionError::FetchSessionIdNotFound
    );
    let by_id = SessionRequest {
        uses_topic_ids: true,
        ..by_name(id, 1)
    };
    assert_eq!(
        refused(&mut cache, by_id),
        SessionError::FetchSessionTopicIdError
    );
    assert_eq!(cache.cached_partitions(), 1, "nothing was added");
    let fetched = incremental(&mut cache, 1, id, 1, &[], &[]);
    assert_eq!(fetched.len(), 1);
    // A duplicate of the request just begun is refused, and so is its answer once a later
    // request of the session has begun.
    assert_eq!(
        refused(&mut cache, by_name(id, 1)),
        SessionError::InvalidFetchSessionEpoch
    );
    incremental(&mut cache, 1, id, 2, &[], &[]);
    assert_eq!(
        cache.answer(id, 1, &[]),
        Err(SessionError::InvalidFetchSessionEpoch)
    );
}

#[test]
fn epochs_wrap_from_the_largest_to_one() {
    assert_eq!(next_epoch(0), 1);
    assert_eq!(next_epoch(i32::MAX), 1);
    assert_eq!(next_epoch(-1), -1);
}

#[test]
fn a_full_fetch_naming_a_session_closes_it_and_epoch_minus_one_opens_none() {
    let mut cache = FetchSessions::new(LIMITS);
    let id = opened(&mut cache, 0, 1);
    assert_eq!(
        cache.begin(1, by_name(id, -1), &[], &[]),
        Context::Sessionless
    );
    assert_eq!(cache.len(), 0);
    let id = opened(&mut cache, 2, 1);
    assert_eq!(cache.begin(3, by_name(id, 0), &[], &[]), Context::Full);
    assert_eq!(
        cache.len(),
        0,
        "epoch 0 closes the session it names, to open another"
    );
}

#[test]
fn a_session_emptied_or_grown_past_the_cap_is_closed_and_answered_sessionless() {
    let mut cache = FetchSessions::new(LIMITS);
    let id = opened(&mut cache, 0, 1);
    assert_eq!(
        cache.begin(1, by_name(id, 1), &[], &[key("t", 0)]),
        Context::Sessionless
    );
    assert_eq!(cache.len(), 0);
    let id = opened(&mut cache, 2, 3);
    let more = [(key("t", 3), at(0))];
    assert_eq!(
        cache.begin(3, by_name(id, 1), &more, &[]),
        Context::Sessionless
    );
    assert_eq!(cache.len(), 0);
    // A full fetch over the cap opens no session.
    assert_eq!(opened(&mut cache, 4, 4), NO_SESSION);
}

#[test]
fn a_session_unused_for_the_eviction_time_expires() {
    let mut cache = FetchSessions::new(LIMITS);
    let id = opened(&mut cache, 0, 1);
    incremental(&mut cache, 1000, id, 1, &[], &[]);
    // Used at 1000: alive at 2000, gone after.
    incremental(&mut cache, 2000, id, 2, &[], &[]);
    assert_eq!(
        cache.begin(3001, by_name(id, 3), &[], &[]),
        Context::Refused(SessionError::FetchSessionIdNotFound)
    );
    assert_eq!(cache.len(), 0);
}

#[test]
fn a_full_cache_evicts_a_smaller_session_past_the_eviction_time_and_no_younger_one() {
    let mut cache = FetchSessions::new(LIMITS);
    let small = opened(&mut cache, 0, 1);
    let large = opened(&mut cache, 0, 3);
    // Both in use; the small one is not yet old enough to evict.
    incremental(&mut cache, 900, small, 1, &[], &[]);
    incremental(&mut cache, 900, large, 1, &[], &[]);
    assert_eq!(
        opened(&mut cache, 1000, 2),
        NO_SESSION,
        "full, none evictable"
    );
    // Old enough: a larger session takes the smallest one's slot, an equal one does not.
    incremental(&mut cache, 1500, small, 2, &[], &[]);
    incremental(&mut cache, 1500, large, 2, &[], &[]);
    assert_eq!(opened(&mut cache, 1600, 1), NO_SESSION, "not larger");
    let new = opened(&mut cache, 1600, 2);
    assert_ne!(new, NO_SESSION);
    assert_eq!(cache.len(), 2);
    assert_eq!(
        cache.begin(1700, by_name(small, 3), &[], &[]),
        Context::Refused(SessionError::FetchSessionIdNotFound),
        "the smallest was evicted"
    );
    incremental(&mut cache, 1700, large, 3, &[], &[]);
}

#[test]
fn a_full_cache_gives_the_slot_of_a_stale_session_first() {
    let mut cache = FetchSessions::new(LIMITS);
    let stale = opened(&mut cache, 0, 3);
    let used = opened(&mut cache, 0, 1);
    incremental(&mut cache, 900, used, 1, &[], &[]);
    // Full, and the new session is no larger than either: only staleness frees a slot.
    assert_ne!(opened(&mut cache, 1500, 1), NO_SESSION);
    assert_eq!(
        cache.begin(1500, by_name(stale, 1), &[], &[]),
        Context::Refused(SessionError::FetchSessionIdNotFound)
    );
    incremental(&mut cache, 1500, used, 2, &[], &[]);
}

#[test]
fn session_ids_are_positive_and_distinct() {
    let mut cache = FetchSessions::new(SessionLimits {
        slots: 500,
        ..LIMITS
    });
    let ids: BTreeSet<i32> = (0..500).map(|_| opened(&mut cache, 0, 1)).collect();
    assert_eq!(ids.len(), 500);
    assert!(ids.iter().all(|&id| id > 0));
}
