//! Waiting for what a test expects, with a deadline and never a sleep: reading records until
//! enough came, polling group members until their assignments settle, retrying a check until
//! it holds. On Kafka every one of these moves in the background (joins, rebalances, fetches),
//! so a test asks again until it sees the state it expects or the deadline fails it.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::time::{Duration, Instant};

use nanokafka::{Consumer, NanoKafka, Record};
use serde::de::DeserializeOwned;

/// Bounds every wait: a group join on tansu takes about 3 s, a rebalance as long; nothing
/// here needs more than a few of them.
pub const PATIENCE: Duration = Duration::from_secs(60);
/// One poll inside a wait: short, so that members polled in turn all make progress.
pub const STEP: Duration = Duration::from_millis(200);

/// Between two checks of [`until`]: paces a check that answers at once (a lag query), so
/// that waiting does not take a core from the brokers it waits for.
const PACE: Duration = Duration::from_millis(5);

/// Calls `check` until it returns `Some`, failing the test after [`PATIENCE`] with `what`.
pub fn until<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(Instant::now() < deadline, "no {what} within {PATIENCE:?}");
        std::thread::sleep(PACE);
    }
}

/// Polls `consumer` (for at most the records still missing) until `count` records came;
/// returns them in arrival order.
pub fn read<T: DeserializeOwned>(consumer: &mut Consumer<T>, count: usize) -> Vec<Record<T>> {
    let mut records = Vec::new();
    until(&format!("{count} records"), || {
        let left = count - records.len();
        let batch = consumer.poll_batch(left, STEP).expect("poll_batch");
        records.extend(batch);
        (records.len() >= count).then_some(())
    });
    records
}

/// Polls every member in turn until together they read `count` records; returns each
/// member's records.
pub fn read_all<T: DeserializeOwned>(
    members: &mut [&mut Consumer<T>],
    count: usize,
) -> Vec<Vec<Record<T>>> {
    let mut read: Vec<Vec<Record<T>>> = members.iter().map(|_| Vec::new()).collect();
    until(
        &format!("{count} records over {} members", members.len()),
        || {
            for (member, mine) in members.iter_mut().zip(&mut read) {
                mine.extend(member.poll_batch(count, STEP).expect("poll_batch"));
            }
            (read.iter().map(Vec::len).sum::<usize>() >= count).then_some(())
        },
    );
    read
}

/// Polls every member in turn (which is what drives joins and rebalances) until their
/// assignments satisfy `settled`; returns them. Nothing may be read meanwhile: the test
/// settles a group only when every record is committed or none was produced.
pub fn settle<T: DeserializeOwned + Debug>(
    members: &mut [&mut Consumer<T>],
    what: &str,
    settled: impl Fn(&[Vec<u32>]) -> bool,
) -> Vec<Vec<u32>> {
    until(what, || {
        let mut assignments = Vec::new();
        for member in members.iter_mut() {
            let read = member.poll_batch(100, STEP).expect("poll_batch");
            assert!(read.is_empty(), "read while settling: {read:?}");
            assignments.push(member.assignment().partitions.clone());
        }
        settled(&assignments).then_some(assignments)
    })
}

/// A new member of `group`, joined on a thread of its own while this one polls `others`, the
/// group's current members. On Kafka a join completes only once the group has rebalanced,
/// and a librdkafka member rejoins only while it is polled (as a consumer on its own thread
/// is); on the embedded broker the join returns at once. Nothing may be read meanwhile.
pub fn join_while_polling<T: DeserializeOwned + Debug + Send + 'static>(
    broker: &NanoKafka,
    names: (&str, &str, &str),
    others: &mut [&mut Consumer<T>],
) -> Consumer<T> {
    join_with_while_polling(broker, names, nanokafka::GroupOptions::default(), others)
}

/// As [`join_while_polling`], with the group's options. The join runs on a thread of its
/// own, not a scoped one: when [`PATIENCE`] runs out the test fails at once, instead of
/// waiting for a join that nothing drives any more.
pub fn join_with_while_polling<T: DeserializeOwned + Debug + Send + 'static>(
    broker: &NanoKafka,
    (topic, group, member): (&str, &str, &str),
    options: nanokafka::GroupOptions,
    others: &mut [&mut Consumer<T>],
) -> Consumer<T> {
    let joining = {
        let (broker, topic, group, member) = (
            broker.clone(),
            topic.to_owned(),
            group.to_owned(),
            member.to_owned(),
        );
        std::thread::spawn(move || broker.consumer_with::<T>(&topic, &group, &member, options))
    };
    let deadline = Instant::now() + PATIENCE;
    while !joining.is_finished() && !others.is_empty() {
        assert!(
            Instant::now() < deadline,
            "{member} still joining after {PATIENCE:?}"
        );
        for other in others.iter_mut() {
            let read = other.poll_batch(100, STEP).expect("poll_batch");
            assert!(read.is_empty(), "read while {member} joined: {read:?}");
        }
    }
    let joined = joining.join().expect("the joining thread");
    joined.unwrap_or_else(|e| panic!("{member} joining {group}: {e}"))
}

/// Whether `assignments` give every partition of `0..partitions` to exactly one member.
pub fn each_partition_once(assignments: &[Vec<u32>], partitions: u32) -> bool {
    let mut all: Vec<u32> = assignments.concat();
    all.sort_unstable();
    all == (0..partitions).collect::<Vec<_>>()
}

/// The records' (partition, offset) → value.
pub fn by_position<T: Clone>(records: &[Record<T>]) -> BTreeMap<(u32, u64), T> {
    records
        .iter()
        .map(|r| ((r.partition, r.offset), r.value.clone()))
        .collect()
}

/// Milliseconds since the Unix epoch, as record timestamps count.
pub fn now_ms() -> u64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    since.map_or(0, |d| d.as_millis() as u64)
}
