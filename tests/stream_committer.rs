//! `StreamCommitter`: a `RecordStream`'s commits made apart from it. A stream handed to an
//! actor's `ctx.add_stream` is committed and stopped through it; commits are coalesced per
//! partition and sent on flush, on the interval, on a rebalance and on drop; nothing is
//! committed before it was asked for.

use std::time::Duration;

use actix::prelude::*;
use futures::StreamExt;
use nanokafka::{
    AsyncNanoKafka, Error, NanoKafka, Record, RecordStream, StreamCommitter, StreamOptions,
    TopicConfig,
};

#[path = "common/stream.rs"]
mod common_stream;
use common_stream::{next, run, PATIENCE};

const TOPIC: &str = "events";
/// Longer than any test: a commit waits for a flush, never for the interval.
const NEVER: Duration = Duration::from_secs(3600);

/// A broker in `dir` with a topic of `partitions` partitions holding `records` `u64`
/// records (value = its number), spread round-robin.
fn broker_with(dir: &tempfile::TempDir, records: u64, partitions: u32) -> NanoKafka {
    let broker = NanoKafka::open(dir.path()).unwrap();
    let topic = broker.topic::<u64>(TOPIC);
    topic
        .create(TopicConfig::default().partitions(partitions))
        .unwrap();
    for i in 0..records {
        topic.produce_keyed(i.to_string(), &i).unwrap();
    }
    broker
}

fn options(commit_interval: Duration) -> StreamOptions {
    StreamOptions {
        max_batch: 7,
        poll_wait: Duration::from_millis(100),
        commit_interval,
        ..StreamOptions::default()
    }
}

/// Member `member` of group `g`, as a stream with small batches and `commit_interval`.
async fn open(bus: &AsyncNanoKafka, member: &str, commit_interval: Duration) -> RecordStream<u64> {
    bus.stream_with::<u64>(TOPIC, "g", member, options(commit_interval))
        .await
        .unwrap()
}

/// Reads `n` records of `stream` and asks `committer` to commit each.
async fn read_and_commit(stream: &mut RecordStream<u64>, committer: &StreamCommitter, n: usize) {
    for _ in 0..n {
        let record = next(stream).await;
        committer.commit_record(&record).unwrap();
    }
}

/// The group's lag in partition 0 (records past its committed offset).
async fn lag(bus: &AsyncNanoKafka, group: &str) -> u64 {
    bus.lag(TOPIC, group).await.unwrap()[&0]
}

/// Waits, within the patience bound, until the group's lag in partition 0 is `expected`.
async fn lag_reaches(bus: &AsyncNanoKafka, group: &str, expected: u64) {
    let waited = actix_rt::time::timeout(PATIENCE, async {
        while lag(bus, group).await != expected {
            actix_rt::time::sleep(Duration::from_millis(5)).await;
        }
    });
    waited.await.expect("the lag reaches the commit");
}

/// Reads its stream (given by `ctx.add_stream`), commits each record through its
/// committer until `stop_after`, then leaves through the committer; reports what it read
/// when the stream ends.
struct Reader {
    committer: StreamCommitter,
    stop_after: usize,
    seen: Vec<u64>,
    done: Option<futures::channel::oneshot::Sender<Vec<u64>>>,
}

impl Actor for Reader {
    type Context = Context<Self>;
}

impl StreamHandler<nanokafka::Result<Record<u64>>> for Reader {
    fn handle(&mut self, item: nanokafka::Result<Record<u64>>, ctx: &mut Context<Self>) {
        if self.seen.len() == self.stop_after {
            return;
        }
        let record = item.expect("a record");
        self.committer.commit_record(&record).expect("yielded");
        self.seen.push(record.value);
        if self.seen.len() == self.stop_after {
            let committer = self.committer.clone();
            ctx.spawn(async move { committer.leave().await.expect("leave") }.into_actor(self));
        }
    }

    fn finished(&mut self, ctx: &mut Context<Self>) {
        if let Some(done) = self.done.take() {
            let _ = done.send(std::mem::take(&mut self.seen));
        }
        ctx.stop();
    }
}

#[test]
fn an_actor_commits_its_stream_through_a_committer_and_a_reopen_resumes_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with(&dir, 20, 1);
    let (seen, lag_after) = run(broker.async_handle(), |bus| async move {
        let stream = open(&bus, "a", NEVER).await;
        let committer = stream.committer();
        let (done, read) = futures::channel::oneshot::channel();
        Reader::create(|ctx| {
            ctx.add_stream(stream);
            Reader {
                committer,
                stop_after: 10,
                seen: Vec::new(),
                done: Some(done),
            }
        });
        let seen = read.await.expect("the stream ends after the leave");
        (seen, lag(&bus, "g").await)
    });
    assert_eq!(seen, (0..10).collect::<Vec<_>>());
    assert_eq!(lag_after, 10, "the leave flushed the commit of offset 9");
    drop(broker);
    let broker = NanoKafka::open(dir.path()).unwrap();
    let resumed = run(broker.async_handle(), |bus| async move {
        let mut stream = open(&bus, "b", NEVER).await;
        next(&mut stream).await
    });
    assert_eq!((resumed.offset, resumed.value), (10, 10));
}

#[test]
fn commits_wait_for_a_flush_and_coalesce_into_one_per_partition() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with(&dir, 20, 1);
    run(broker.async_handle(), |bus| async move {
        let mut stream = open(&bus, "a", NEVER).await;
        let committer = stream.committer();
        let mut read = Vec::new();
        for _ in 0..10 {
            read.push(next(&mut stream).await);
        }
        assert_eq!(lag(&bus, "g").await, 20, "reading commits nothing");
        for record in &read {
            committer.commit_record(record).unwrap();
        }
        // A record the stream never yielded is refused, and nothing is pending for it.
        let unseen = Record {
            offset: 15,
            ..read[9].clone()
        };
        assert!(matches!(
            committer.commit_record(&unseen),
            Err(Error::InvalidArgument { name: "record", .. })
        ));
        assert_eq!(lag(&bus, "g").await, 20, "not sent before the flush");
        assert_eq!(committer.commits_sent(), 0);
        committer.flush().await.unwrap();
        assert_eq!(
            committer.commits_sent(),
            1,
            "ten commits, one coordinator commit"
        );
        assert_eq!(lag(&bus, "g").await, 10);
        // Nothing pending: a flush sends nothing.
        committer.flush().await.unwrap();
        assert_eq!(committer.commits_sent(), 1);
    });
}

#[test]
fn the_interval_sends_pending_commits_while_the_stream_is_polled() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with(&dir, 20, 1);
    run(broker.async_handle(), |bus| async move {
        let mut stream = open(&bus, "a", Duration::from_millis(50)).await;
        let committer = stream.committer();
        read_and_commit(&mut stream, &committer, 5).await;
        // The stream, polled on (as an actor's is), sends the commit once the interval ends.
        let reader = actix_rt::spawn(async move { while stream.next().await.is_some() {} });
        lag_reaches(&bus, "g", 15).await;
        assert_eq!(committer.commits_sent(), 1);
        reader.abort();
    });
}

/// An interval past any instant (`Duration::MAX`) never falls due: the stream reads on, and
/// its commits go only on a flush.
#[test]
fn an_endless_interval_sends_commits_only_on_a_flush() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with(&dir, 20, 1);
    run(broker.async_handle(), |bus| async move {
        let mut stream = open(&bus, "a", Duration::MAX).await;
        let committer = stream.committer();
        read_and_commit(&mut stream, &committer, 5).await;
        // Past the first batch of 7: the stream polls again with the commits pending.
        for _ in 0..5 {
            next(&mut stream).await;
        }
        assert_eq!(committer.commits_sent(), 0);
        assert_eq!(lag(&bus, "g").await, 20);
        committer.flush().await.unwrap();
        assert_eq!(lag(&bus, "g").await, 15);
    });
}

#[test]
fn dropping_the_stream_sends_its_pending_commits_before_leaving() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with(&dir, 20, 1);
    run(broker.async_handle(), |bus| async move {
        let mut stream = open(&bus, "a", NEVER).await;
        let committer = stream.committer();
        read_and_commit(&mut stream, &committer, 3).await;
        drop(stream);
        lag_reaches(&bus, "g", 17).await;
        // The committer outlives its stream; its member is gone.
        committer.commit(0, 5);
        assert!(committer.flush().await.is_err());
        assert_eq!(lag(&bus, "g").await, 17);
    });
}

#[test]
fn a_rebalance_sends_the_pending_commits_first_and_a_refusal_is_yielded() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with(&dir, 20, 1);
    run(broker.async_handle(), |bus| async move {
        let mut first = open(&bus, "a", NEVER).await;
        let committer = first.committer();
        read_and_commit(&mut first, &committer, 7).await;
        // A second member joins: the group rebalances, and the first stream's next poll
        // sees it.
        let _second = open(&bus, "b", NEVER).await;
        let after = actix_rt::time::timeout(PATIENCE, first.next()).await;
        // The embedded coordinator moved to the new generation at the join: it refuses the
        // commit fenced by the old one, the stream says so, and nothing is committed (the
        // records are read again from offset 0, by whichever member owns the partition).
        let event = after.expect("an item within the patience bound");
        assert!(
            matches!(
                event,
                Some(Err(Error::IllegalGeneration { generation: 1, .. }))
            ),
            "{event:?}"
        );
        assert_eq!(lag(&bus, "g").await, 20);
        assert_eq!(committer.commits_sent(), 1);
    });
}
