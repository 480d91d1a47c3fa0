//! The async lifecycle on every backend: `build_async` inside an actix System, and
//! `shutdown().await` that leaves nothing running (on Kafka: queued records delivered, the
//! backend's runtime stopped off the caller's runtime), after which the handle refuses.

use nanokafka::{Backend, Error, NanoKafka, TopicConfig};

use crate::target::{on_every_target, Target};
use crate::wait;

/// A client built with `build_async` inside a System produces, shuts down without blocking
/// the System, then answers `BrokerStopped`; a client built afterwards reads the record (on
/// the embedded broker: the directory was unlocked by the shutdown).
fn build_async_and_shutdown_inside_a_system(t: &Target) {
    let dir = tempfile::tempdir().unwrap();
    let builder = match t.bootstrap() {
        Some(servers) => NanoKafka::builder()
            .data_dir(dir.path())
            .kafka_bootstrap(servers),
        None => NanoKafka::builder().data_dir(dir.path()),
    };
    let topic = t.topic("async-lifecycle");
    let expected = match t.is_kafka() {
        true => Backend::Kafka,
        false => Backend::Embedded,
    };
    let (async_builder, async_topic) = (builder.clone(), topic.clone());
    actix_rt::System::new().block_on(async move {
        let bus = async_builder.build_async().await.unwrap();
        assert_eq!(bus.backend(), expected);
        bus.create_topic(&async_topic, TopicConfig::default())
            .await
            .unwrap();
        bus.produce(&async_topic, &7u64).await.unwrap();
        bus.shutdown().await.unwrap();
        let refused = bus.produce(&async_topic, &8u64).await;
        assert!(matches!(refused, Err(Error::BrokerStopped)), "{refused:?}");
        bus.shutdown().await.unwrap();
    });

    let reader = builder.build().unwrap();
    let mut consumer = reader.consumer::<u64>(&topic, "g", "c").unwrap();
    let read = wait::read(&mut consumer, 1);
    assert_eq!(read.iter().map(|r| r.value).collect::<Vec<_>>(), [7]);
}

on_every_target!(build_async_and_shutdown_inside_a_system);
