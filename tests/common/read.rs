//! Reading a topic back: every record through a fresh group.

use std::collections::BTreeMap;
use std::time::Duration;

use nanokafka::NanoKafka;

/// Every `u64` record of `topic` through a fresh `group`: partition → (offset → value).
pub fn read_topic(
    broker: &NanoKafka,
    topic: &str,
    group: &str,
) -> BTreeMap<u32, BTreeMap<u64, u64>> {
    broker.join_group(topic, group, "reader").unwrap();
    let mut log: BTreeMap<u32, BTreeMap<u64, u64>> = BTreeMap::new();
    loop {
        let batch = broker
            .poll_batch::<u64>(topic, group, "reader", 1000, Duration::ZERO)
            .unwrap();
        let Some(last) = batch.last() else { return log };
        broker
            .commit(topic, group, last.partition, last.offset)
            .unwrap();
        for r in batch {
            log.entry(r.partition)
                .or_default()
                .insert(r.offset, r.value);
        }
    }
}
