//! The async lifecycle: a service inside an actix System opens, uses and closes a broker
//! without a blocking call, and the data directory is free again as soon as it is closed.

#[path = "common/watchdog.rs"]
mod watchdog;

use std::path::Path;
use std::time::Duration;

use actix::System;
use nanokafka::{AsyncNanoKafka, Error, NanoKafka, TopicConfig};

const WATCHDOG: Duration = Duration::from_secs(60);

/// Runs `body` inside a fresh actix System, failing on a hang.
fn in_system<F>(body: impl FnOnce() -> F + Send + 'static)
where
    F: std::future::Future<Output = ()> + 'static,
{
    watchdog::within(WATCHDOG, move || System::new().block_on(body()));
}

async fn produced_values(bus: &AsyncNanoKafka, topic: &str, group: &str) -> Vec<u64> {
    bus.join_group(topic, group, "reader").await.unwrap();
    let records = bus
        .poll_batch::<u64>(topic, group, "reader", 100, Duration::ZERO)
        .await
        .unwrap();
    records.into_iter().map(|r| r.value).collect()
}

/// Opens the broker in `path` again (its lock must be free), then shuts it down.
async fn reopen_and_shut_down(path: &Path) {
    AsyncNanoKafka::open(path)
        .await
        .unwrap()
        .shutdown()
        .await
        .unwrap();
}

/// Opens the broker in `path` again, reads topic `t`'s values as a new group, shuts it down.
async fn reopened_values(path: &Path) -> Vec<u64> {
    let again = AsyncNanoKafka::open(path).await.unwrap();
    let values = produced_values(&again, "t", "g").await;
    again.shutdown().await.unwrap();
    values
}

#[test]
fn open_produce_shutdown_and_reopen_at_once_in_one_system() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_owned();
    in_system(move || async move {
        let bus = AsyncNanoKafka::open(&path).await.unwrap();
        bus.create_topic("t", TopicConfig::default()).await.unwrap();
        for value in 0..3u64 {
            bus.produce("t", &value).await.unwrap();
        }
        bus.shutdown().await.unwrap();

        // The lock is released when shutdown returns: the same System reopens at once.
        assert_eq!(reopened_values(&path).await, [0, 1, 2]);
    });
}

#[test]
fn build_async_applies_the_builder_settings() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_owned();
    in_system(move || async move {
        let bus = NanoKafka::builder()
            .data_dir(&path)
            .max_record_bytes(1024)
            .max_request_bytes(4096)
            .io_threads(1)
            .listen("127.0.0.1:0")
            .build_async()
            .await
            .unwrap();
        let described = bus.describe_broker().await.unwrap();
        assert_eq!(
            (described.max_record_bytes, described.max_request_bytes),
            (1024, 4096)
        );
        let listener = bus.listener_addr().expect("built with a listener");
        assert_ne!(listener.port(), 0);
        bus.create_topic("t", TopicConfig::default()).await.unwrap();
        let too_large = bus.produce_raw("t", None, vec![0; 2048]).await;
        assert!(
            matches!(too_large, Err(Error::RecordTooLarge { .. })),
            "{too_large:?}"
        );
        bus.shutdown().await.unwrap();
        // The listener's port is closed with the broker.
        assert!(std::net::TcpStream::connect(listener).is_err());
    });
}

#[test]
fn build_async_refuses_a_bad_setting_with_the_blocking_builds_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_owned();
    in_system(move || async move {
        let refused = NanoKafka::builder()
            .data_dir(&path)
            .io_threads(0)
            .build_async()
            .await;
        assert!(
            matches!(
                refused,
                Err(Error::InvalidArgument {
                    name: "io_threads",
                    ..
                })
            ),
            "{refused:?}"
        );
    });
}

#[test]
fn a_second_shutdown_is_ok_and_every_later_call_answers_broker_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_owned();
    in_system(move || async move {
        let bus = AsyncNanoKafka::open(&path).await.unwrap();
        bus.create_topic("t", TopicConfig::default()).await.unwrap();
        // The produce route is learned: the direct path to the partition must stop too.
        bus.produce("t", &1u64).await.unwrap();
        let clone = bus.clone();
        bus.shutdown().await.unwrap();
        bus.shutdown().await.unwrap();
        clone.shutdown().await.unwrap();

        assert!(matches!(
            clone.produce("t", &2u64).await,
            Err(Error::BrokerStopped)
        ));
        assert!(matches!(clone.stats().await, Err(Error::BrokerStopped)));
        assert!(matches!(
            bus.create_topic("u", TopicConfig::default()).await,
            Err(Error::BrokerStopped)
        ));
        assert!(matches!(bus.lag("t", "g").await, Err(Error::BrokerStopped)));
    });
}

#[test]
fn dropping_the_last_async_handle_releases_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_owned();
    in_system(move || async move {
        let bus = AsyncNanoKafka::open(&path).await.unwrap();
        bus.create_topic("t", TopicConfig::default()).await.unwrap();
        bus.produce("t", &7u64).await.unwrap();
        let clone = bus.clone();
        drop(bus);
        // A clone still owns the broker.
        assert!(matches!(
            AsyncNanoKafka::open(&path).await,
            Err(Error::DataDirLocked { .. })
        ));
        clone.produce("t", &8u64).await.unwrap();
        drop(clone);

        assert_eq!(reopened_values(&path).await, [7, 8]);
    });
}

#[test]
fn opening_a_locked_directory_fails_as_the_blocking_open_does() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_owned();
    let holder = NanoKafka::open(&path).unwrap();
    let blocking = NanoKafka::open(&path).unwrap_err();
    assert!(
        matches!(blocking, Error::DataDirLocked { .. }),
        "{blocking:?}"
    );
    let async_path = path.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    in_system(move || async move {
        let refused = AsyncNanoKafka::open(&async_path).await.unwrap_err();
        tx.send(refused.to_string()).unwrap();
    });
    assert_eq!(rx.recv().unwrap(), blocking.to_string());
    // Nothing was disturbed: the holder still serves.
    holder.create_topic("t", TopicConfig::default()).unwrap();
}

#[test]
fn the_blocking_open_inside_a_runtime_points_to_the_async_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_owned();
    in_system(move || async move {
        let refused = NanoKafka::open(&path).unwrap_err();
        assert!(
            matches!(refused, Error::BlockingInActorContext),
            "{refused:?}"
        );
        assert!(
            refused.to_string().contains("AsyncNanoKafka::open"),
            "{refused}"
        );
        // Nothing was taken: the async open of the same directory works.
        reopen_and_shut_down(&path).await;
    });
}

#[test]
fn shutting_down_a_borrowed_async_handle_stops_the_blocking_handle_too() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_owned();
    let broker = NanoKafka::open(&path).unwrap();
    broker.create_topic("t", TopicConfig::default()).unwrap();
    let bus = broker.async_handle();
    let reopen_path = path.clone();
    in_system(move || async move {
        bus.produce("t", &1u64).await.unwrap();
        bus.shutdown().await.unwrap();
        // The lock is released: the directory opens again while `broker` is still alive.
        assert_eq!(reopened_values(&reopen_path).await, [1]);
    });
    assert!(matches!(broker.stats(), Err(Error::BrokerStopped)));
    broker.shutdown().unwrap();
}

#[test]
fn an_async_handle_outlives_the_blocking_handle_it_came_from_only_if_it_owns() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_owned();
    let broker = NanoKafka::open(&path).unwrap();
    let borrowed = broker.async_handle();
    drop(broker);
    in_system(move || async move {
        // The borrowed handle did not keep the broker: it is closed, and shutdown is a no-op.
        assert!(matches!(borrowed.stats().await, Err(Error::BrokerStopped)));
        borrowed.shutdown().await.unwrap();
        reopen_and_shut_down(&path).await;
    });
}

#[test]
fn a_handle_wrapped_from_an_addr_shuts_down_through_the_actor_face() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_owned();
    let broker = NanoKafka::open(&path).unwrap();
    broker.create_topic("t", TopicConfig::default()).unwrap();
    broker.produce("t", &3u64).unwrap();
    let wrapped = AsyncNanoKafka::from(broker.addr().unwrap());
    let reopen_path = path.clone();
    in_system(move || async move {
        wrapped.shutdown().await.unwrap();
        wrapped.shutdown().await.unwrap();
        // The partitions are closed and the lock released; the data is on disk.
        assert!(matches!(
            wrapped.lag("t", "g").await,
            Err(Error::BrokerStopped)
        ));
        assert_eq!(reopened_values(&reopen_path).await, [3]);
    });
    // The blocking handle's own close finds nothing left to close.
    broker.shutdown().unwrap();
}
