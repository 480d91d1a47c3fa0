//! What an idle broker costs: one topic of 32 partitions, four consumers of one group parked
//! in long polls (30 s, one blocking thread each), nothing produced. The figure is the
//! process's CPU time over the watched interval as a percentage of one core; a broker that
//! polls, spins or ticks while nothing happens shows here. Topic creation, the joins and the
//! start of the polls are outside the interval; afterwards one record per partition ends every
//! poll and the threads are joined.

use std::time::Duration;

use nanokafka::{NanoKafka, RecordBatch, TopicConfig};

use crate::harness::{Meter, Usage, POLL_BATCH};

pub const PARTITIONS: u32 = 32;
pub const CONSUMERS: usize = 4;
/// Long enough to outlast the watched interval, shorter than the session timeout (45 s).
const LONG_POLL: Duration = Duration::from_secs(30);
/// Time for the parked polls to reach the broker before the interval starts.
const SETTLE: Duration = Duration::from_millis(200);

/// Parks the consumers, watches the process for `interval`, then releases them.
pub fn parked_polls(broker: &NanoKafka, interval: Duration) -> Usage {
    let (topic, group) = ("idle", "idle-group");
    let config = TopicConfig::default().partitions(PARTITIONS);
    broker.create_topic(topic, config).expect("create topic");
    let members: Vec<String> = (0..CONSUMERS).map(|i| format!("member-{i}")).collect();
    for member in &members {
        broker.join_group(topic, group, member).expect("join");
    }
    std::thread::scope(|scope| {
        for member in &members {
            scope.spawn(move || loop {
                let records = broker
                    .poll_batch_raw(topic, group, member, POLL_BATCH, LONG_POLL)
                    .expect("poll_batch_raw");
                if !records.is_empty() {
                    break;
                }
            });
        }
        std::thread::sleep(SETTLE);
        let meter = Meter::start();
        std::thread::sleep(interval);
        let usage = meter.usage();
        for partition in 0..PARTITIONS {
            let mut batch = RecordBatch::with_capacity(1, 1);
            batch.push_raw(None, b"wake");
            broker
                .produce_batch(topic, Some(partition), batch)
                .expect("produce_batch");
        }
        usage
    })
}
