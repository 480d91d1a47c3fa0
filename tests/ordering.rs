//! Order per producer (spec §4) under pipelining: one task with hundreds of produces in
//! flight gets its records appended, and its replies answered, in the order it sent them.

use futures::StreamExt;
use nanokafka::{NanoKafka, TopicConfig};

#[test]
fn pipelined_produces_from_one_task_are_appended_in_call_order() {
    let dir = tempfile::tempdir().unwrap();
    let broker = NanoKafka::open(dir.path()).unwrap();
    broker.create_topic("t", TopicConfig::default()).unwrap();
    let handle = broker.async_handle();
    let offsets = actix_rt::System::new().block_on(async move {
        futures::stream::iter(0..5_000u64)
            .map(|i| {
                let handle = handle.clone();
                async move {
                    handle
                        .produce_raw("t", None, i.to_le_bytes().to_vec())
                        .await
                }
            })
            .buffered(512)
            .map(|reply| reply.expect("produce").offset)
            .collect::<Vec<u64>>()
            .await
    });
    assert_eq!(
        offsets,
        (0..5_000).collect::<Vec<_>>(),
        "the i-th produce got offset i"
    );
    broker.join_group("t", "g", "c").unwrap();
    let mut values = Vec::new();
    while values.len() < 5_000 {
        let batch = broker
            .poll_batch_raw("t", "g", "c", 1000, std::time::Duration::ZERO)
            .unwrap();
        let last = batch.last().expect("records remain");
        broker
            .commit("t", "g", last.partition, last.offset)
            .unwrap();
        values.extend(
            batch
                .into_iter()
                .map(|r| u64::from_le_bytes(r.value.try_into().unwrap())),
        );
    }
    assert_eq!(
        values,
        (0..5_000).collect::<Vec<_>>(),
        "the log holds them in call order"
    );
}
