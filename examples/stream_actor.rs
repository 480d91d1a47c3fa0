//! A `RecordStream` inside an actor: the stream is handed to `ctx.add_stream`, and the actor
//! commits and stops it through a `StreamCommitter` (Kafka's `commitAsync`: commits are
//! coalesced per partition and sent every `commit_interval`, on `flush` and on leave).
//!
//! A `Billing` actor reads the typed topic `payments`, commits every record it handled, and
//! leaves the group after the last; the committed offsets then show that nothing is left.
//!
//! Run: `cargo run --release --example stream_actor`.

use std::time::Duration;

use actix::prelude::*;
use nanokafka::{NanoKafka, Record, StreamCommitter, StreamOptions, TopicConfig};

#[path = "common/data_dir.rs"]
mod data_dir;

const PAYMENTS: u64 = 10;

/// Handles each payment, commits it, and leaves after the last.
struct Billing {
    committer: StreamCommitter,
    handled: u64,
    /// Told when the stream has ended.
    done: Option<futures::channel::oneshot::Sender<()>>,
}

impl Actor for Billing {
    type Context = Context<Self>;
}

impl StreamHandler<nanokafka::Result<Record<u64>>> for Billing {
    fn handle(&mut self, item: nanokafka::Result<Record<u64>>, ctx: &mut Context<Self>) {
        let record = match item {
            Ok(record) => record,
            // A record that does not decode, or a commit the group refused after a rebalance.
            Err(e) => return eprintln!("billing: {e}"),
        };
        println!("billing {} cents (offset {})", record.value, record.offset);
        // Pending until the next flush: the interval, `flush().await`, or the leave.
        if let Err(e) = self.committer.commit_record(&record) {
            eprintln!("billing: {e}");
        }
        self.handled += 1;
        if self.handled == PAYMENTS {
            let committer = self.committer.clone();
            let leave = async move { committer.leave().await };
            ctx.spawn(leave.into_actor(self).map(|left, _, _| {
                if let Err(e) = left {
                    eprintln!("billing: leave: {e}");
                }
            }));
        }
    }

    /// The leave ended the stream.
    fn finished(&mut self, ctx: &mut Context<Self>) {
        if let Some(done) = self.done.take() {
            let _ = done.send(());
        }
        ctx.stop();
    }
}

#[actix::main]
async fn main() -> nanokafka::Result<()> {
    let dir = data_dir::ExampleDir::new();
    let bus = NanoKafka::builder()
        .data_dir(dir.path())
        .build_async()
        .await?;
    let payments = bus.topic::<u64>("payments");
    match payments.create(TopicConfig::default()).await {
        // A kept data directory has it from an earlier run.
        Ok(()) | Err(nanokafka::Error::TopicExists { .. }) => {}
        Err(e) => return Err(e),
    }
    for cents in 1..=PAYMENTS {
        payments.produce(&(cents * 100)).await?;
    }
    let options = StreamOptions {
        commit_interval: Duration::from_millis(200),
        ..StreamOptions::default()
    };
    let stream = payments
        .stream_with("billing", "billing-1", options)
        .await?;
    let committer = stream.committer();
    let (done, ended) = futures::channel::oneshot::channel();
    Billing::create(|ctx| {
        ctx.add_stream(stream);
        Billing {
            committer,
            handled: 0,
            done: Some(done),
        }
    });
    let _ = ended.await;
    println!("lag after the leave: {:?}", payments.lag("billing").await?);
    bus.shutdown().await
}
