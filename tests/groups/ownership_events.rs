//! A subscription's `Assigned`/`Revoked` events, folded, are the member's partitions as the
//! group's coordinator has them (`stats()`), through joins, an eviction of a silent member,
//! and unsubscribes, and as a member is itself evicted and rejoins; a member that ends has
//! given every partition back before `Ended`.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use futures::channel::oneshot;
use nanokafka::clock::ManualClock;
use nanokafka::messages::{SubscriptionEnd, SubscriptionEvent};
use nanokafka::{AsyncNanoKafka, NanoKafka, TopicConfig};

use super::subscription_kit::*;

/// Short, so that the silent member is evicted within the test; the subscriptions poll
/// every 100 ms (`options()`), well within it.
const SESSION: Duration = Duration::from_secs(1);

/// A member's partitions as its events tell them.
#[derive(Default)]
struct View {
    owned: BTreeSet<u32>,
    ended: bool,
}

impl View {
    /// Folds `event` in; an `Assigned` or `Revoked` of no partition is a failure.
    fn apply(&mut self, member: &str, event: &SubscriptionEvent) {
        match event {
            SubscriptionEvent::Assigned { partitions, .. } => {
                assert!(
                    !partitions.is_empty(),
                    "{member}: {event:?} announces nothing"
                );
                self.owned.extend(partitions);
            }
            SubscriptionEvent::Revoked { partitions, .. } => {
                assert!(
                    !partitions.is_empty(),
                    "{member}: {event:?} revokes nothing"
                );
                for p in partitions {
                    assert!(self.owned.remove(p), "{member}: {p} revoked, not owned");
                }
            }
            SubscriptionEvent::Ended(_) => {
                assert!(
                    self.owned.is_empty(),
                    "{member} ended still owning {:?}",
                    self.owned
                );
                self.ended = true;
            }
            _ => {}
        }
    }
}

/// The coordinator's assignment of `member` now (none when it has no partition or left).
async fn coordinator_view(bus: &AsyncNanoKafka, member: &str) -> BTreeSet<u32> {
    let stats = bus.stats().await.unwrap();
    let group = &stats.topics[TOPIC].groups["g"];
    group
        .assignment
        .get(member)
        .map(|p| p.iter().copied().collect())
        .unwrap_or_default()
}

/// Folds `watch`'s events into `view` until it equals the coordinator's view of `member`.
async fn agrees(bus: &AsyncNanoKafka, member: &str, watch: &mut Watch, view: &mut View) {
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        let expected = coordinator_view(bus, member).await;
        while let Ok(event) = watch.events.try_recv() {
            view.apply(member, &event);
        }
        if view.owned == expected {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{member} sees {:?}, the coordinator {expected:?}",
            view.owned
        );
        actix_rt::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Unsubscribes `watch`'s member and folds its events through `Ended`.
async fn unsubscribe(member: &str, mut watch: Watch, view: &mut View) {
    watch.subscription.unsubscribe();
    for event in watch
        .events_until(|e| matches!(e, SubscriptionEvent::Ended(_)))
        .await
    {
        view.apply(member, &event);
    }
    assert!(view.ended);
    let end = watch.subscription.clone().await;
    assert!(matches!(end, SubscriptionEnd::Unsubscribed), "{end:?}");
}

#[test]
fn a_members_events_track_its_partitions_through_joins_evictions_and_unsubscribes() {
    let dir = tempfile::tempdir().unwrap();
    let broker = NanoKafka::builder()
        .data_dir(dir.path())
        .session_timeout(SESSION)
        .build()
        .unwrap();
    broker
        .create_topic(TOPIC, TopicConfig::default().partitions(2))
        .unwrap();
    let bus = broker.async_handle();
    System::new().block_on(async move {
        let names = ["a", "b", "c"];
        let mut watches = Vec::new();
        let mut views: Vec<View> = Vec::new();
        // Three subscriptions join one after the other on two partitions: the last to come
        // has none, at first or for good.
        for name in names {
            let watch = subscribe_with(&bus, name, commit_all(), None, options())
                .await
                .unwrap();
            watches.push(watch);
            views.push(View::default());
            for (i, name) in names.iter().enumerate().take(watches.len()) {
                agrees(&bus, name, &mut watches[i], &mut views[i]).await;
            }
        }
        // A member that never polls joins, and is evicted a session timeout later.
        bus.join_group(TOPIC, "g", "silent").await.unwrap();
        let evicted = async {
            while bus.stats().await.unwrap().topics[TOPIC].groups["g"]
                .assignment
                .contains_key("silent")
            {
                actix_rt::time::sleep(Duration::from_millis(20)).await;
            }
        };
        actix_rt::time::timeout(PATIENCE, evicted)
            .await
            .expect("the silent member evicted");
        for (i, name) in names.iter().enumerate() {
            agrees(&bus, name, &mut watches[i], &mut views[i]).await;
        }
        // Each unsubscribes in turn: it gives its partitions back, the others take them.
        let mut watches: Vec<Option<Watch>> = watches.into_iter().map(Some).collect();
        for gone in 0..names.len() {
            let watch = watches[gone].take().unwrap();
            unsubscribe(names[gone], watch, &mut views[gone]).await;
            assert!(coordinator_view(&bus, names[gone]).await.is_empty());
            for rest in gone + 1..names.len() {
                let watch = watches[rest].as_mut().unwrap();
                agrees(&bus, names[rest], watch, &mut views[rest]).await;
            }
        }
        let stats = bus.stats().await.unwrap();
        assert!(stats.topics[TOPIC].groups["g"].assignment.is_empty());
    });
}

#[test]
fn an_unsubscribe_commits_the_answer_of_the_batch_at_the_subscriber_before_leaving() {
    let (_dir, broker) = broker(1);
    produce(&broker, 0, &[0, 1]);
    let bus = broker.async_handle();
    System::new().block_on(async move {
        let (release, held) = oneshot::channel();
        let mut watch = subscribe_with(&bus, "m", commit_all(), Some(held), options())
            .await
            .unwrap();
        assert_eq!(watch.records(2).await, vec![(0, 0), (0, 1)]);
        // The batch is with the subscriber as the member unsubscribes; it answers after.
        watch.subscription.unsubscribe();
        release.send(()).unwrap();
        let end = watch.subscription.clone().await;
        assert!(matches!(end, SubscriptionEnd::Unsubscribed), "{end:?}");
        // Its commit: the partition's next owner does not get the batch again.
        lag_becomes(&bus, &[(0, 0)]).await;
    });
}

#[test]
fn an_evicted_subscription_gives_back_its_partitions_then_rejoins_and_takes_them_again() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_700_000_000_000);
    // Long on the manual clock: only the test's jump past it evicts anyone.
    let broker = NanoKafka::builder()
        .data_dir(dir.path())
        .clock(Arc::new(clock.clone()))
        .session_timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    broker
        .create_topic(TOPIC, TopicConfig::default().partitions(2))
        .unwrap();
    let bus = broker.async_handle();
    System::new().block_on(async move {
        let mut watch = subscribe_with(&bus, "a", commit_all(), None, options())
            .await
            .unwrap();
        let mut view = View::default();
        agrees(&bus, "a", &mut watch, &mut view).await;
        assert_eq!(view.owned, BTreeSet::from([0, 1]));
        // Silent past the session timeout as far as the coordinator can tell: its next poll
        // finds it evicted.
        clock.advance(31_000);
        let events = watch
            .events_until(|e| matches!(e, SubscriptionEvent::Revoked { .. }))
            .await;
        for event in &events {
            view.apply("a", event);
        }
        assert!(view.owned.is_empty(), "all given back: {events:?}");
        // It rejoins and is given them again.
        agrees(&bus, "a", &mut watch, &mut view).await;
        assert_eq!(view.owned, BTreeSet::from([0, 1]));
        unsubscribe("a", watch, &mut view).await;
    });
}
