//! A payments service on NanoKafka's actor API, built the way the README shows, that checks
//! its own books and exits non-zero on any mismatch.
//!
//! - `Gateway` produces payments on `payments` (4 partitions, keyed by user, each with a
//!   `payment-id` header): about 500 a second for 3 s, then a burst of 20,000.
//! - `Ledger` books them (group `ledger`, a push subscription): the bank refuses every
//!   1000th payment on every attempt (`Ack::Retry`; after the third attempt it goes to the
//!   dead-letter topic `payments.dlq`), times out once on every 333rd (retried, then booked)
//!   and some payments are malformed (`Ack::DeadLetter` sends them there at once). Its
//!   `DeadLettered` events name the payment (key and headers) and where its dead letter is.
//! - A second `Ledger` member joins during the steady phase and leaves during the burst: the
//!   group rebalances twice, and each member logs the partitions it is given and gives back.
//! - `Auditor` reads every payment as a `RecordStream` (a spawned task) and sums per user.
//!
//! Then the service checks: every payment booked once (the ledger books by payment id; a
//! record comes again only for a retry, or at a rebalance, at most two batches per partition
//! each time: at-least-once), no record delivered past its third attempt, the dead letters
//! (key, headers, why) matching the events and the refused and malformed payments, the
//! per-user totals of the ledger and of the auditor; then it closes the broker, reopens the
//! same directory, and checks that nothing is delivered again.
//!
//! Run: `cargo run --release --example payments`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix::prelude::*;
use futures::StreamExt;
use nanokafka::messages::{Ack, Delivered, SubscribeOptions, Subscription, SubscriptionEvent};
use nanokafka::{AsyncNanoKafka, Error, Header, RecordBatch, Topic, TopicConfig};
use serde::{Deserialize, Serialize};

#[path = "common/data_dir.rs"]
mod data_dir;

const PAYMENTS: &str = "payments";
const DEAD_LETTERS: &str = "payments.dlq";
const PARTITIONS: u32 = 4;
const STEADY: u64 = 1_500; // 3 s at 500 a second
const BURST: u64 = 20_000;
const TOTAL: u64 = STEADY + BURST;
const MAX_ATTEMPTS: u32 = 3;
const MAX_BATCH: usize = 100;
/// The second ledger member joins, then leaves.
const REBALANCES: usize = 2;
const USERS: u64 = 40;
/// Bounds every wait; reached only when something is wrong.
const PATIENCE: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Payment {
    id: u64,
    user: String,
    cents: u64,
}

fn payment(id: u64) -> Payment {
    Payment {
        id,
        user: format!("user-{}", id % USERS),
        cents: 100 + (id * 37) % 9_900,
    }
}

/// The bank refuses these on every attempt.
fn refused(id: u64) -> bool {
    id % 1000 == 999
}

/// Malformed: dead-lettered at once, never retried.
fn malformed(id: u64) -> bool {
    id % 2500 == 1234
}

/// The bank times out on the first attempt of these.
fn flaky(id: u64) -> bool {
    id % 333 == 7
}

fn payment_id(headers: &[Header]) -> Option<u64> {
    let header = headers.iter().find(|h| h.key == "payment-id")?;
    std::str::from_utf8(header.value.as_deref()?)
        .ok()?
        .parse()
        .ok()
}

/// What the ledger group did, shared by its members (a real ledger keeps this in its
/// database, keyed by payment id so that a payment delivered again is booked once).
#[derive(Default)]
struct Books {
    booked: BTreeMap<u64, Payment>,
    /// Deliveries of each payment that reached the ledger's decision, with their attempts.
    attempts: BTreeMap<u64, Vec<u32>>,
    /// First attempts of payments already booked: (partition, offset).
    delivered_again: Vec<(u32, u64)>,
    /// (payment id, dead letter offset) as the `DeadLettered` events told.
    dead_lettered: Vec<(u64, u64)>,
    /// Records delivered after the reopen.
    after_reopen: Vec<u64>,
    reopened: bool,
}

type SharedBooks = Arc<Mutex<Books>>;

fn lock(books: &SharedBooks) -> std::sync::MutexGuard<'_, Books> {
    books.lock().unwrap_or_else(|e| e.into_inner())
}

/// Produces the payments: a steady rate, then a burst.
struct Gateway {
    bus: AsyncNanoKafka,
    produced: Arc<AtomicU64>,
}

impl Actor for Gateway {
    type Context = Context<Self>;
}

/// Produce payments `ids`, keyed by user, in one batch.
#[derive(Message)]
#[rtype(result = "Result<(), Error>")]
struct Pay(std::ops::Range<u64>);

impl Handler<Pay> for Gateway {
    type Result = ResponseFuture<Result<(), Error>>;

    fn handle(&mut self, Pay(ids): Pay, _: &mut Context<Self>) -> Self::Result {
        let (bus, produced) = (self.bus.clone(), self.produced.clone());
        Box::pin(async move {
            let mut batch = RecordBatch::new();
            let count = ids.end - ids.start;
            for id in ids {
                let p = payment(id);
                let header = [Header::new("payment-id", id.to_string())];
                batch.push_with_headers(Some(p.user.as_bytes()), &p, &header)?;
            }
            bus.produce_batch(PAYMENTS, None, batch).await?;
            produced.fetch_add(count, Ordering::Relaxed);
            Ok(())
        })
    }
}

/// One member of the ledger group.
struct Ledger {
    member: &'static str,
    books: SharedBooks,
}

impl Actor for Ledger {
    type Context = Context<Self>;
}

impl Handler<Delivered<Payment>> for Ledger {
    type Result = Ack;

    fn handle(&mut self, batch: Delivered<Payment>, _: &mut Context<Self>) -> Ack {
        let mut books = lock(&self.books);
        for (i, record) in batch.records.iter().enumerate() {
            let (p, offset) = (&record.value, record.offset);
            // The batch's first record may be a retry; those after it are first attempts.
            let attempt = if i == 0 { batch.attempt } else { 1 };
            if books.reopened {
                books.after_reopen.push(p.id);
            }
            books.attempts.entry(p.id).or_default().push(attempt);
            if malformed(p.id) {
                let reason = format!("payment {} has no valid amount", p.id);
                return Ack::DeadLetter { offset, reason };
            }
            if refused(p.id) || (flaky(p.id) && attempt == 1) {
                let after = Duration::from_millis(5);
                return Ack::Retry { offset, after };
            }
            if books.booked.insert(p.id, p.clone()).is_some() && attempt == 1 {
                books.delivered_again.push((record.partition, offset));
            }
        }
        Ack::Commit
    }
}

impl Handler<SubscriptionEvent> for Ledger {
    type Result = ();

    fn handle(&mut self, event: SubscriptionEvent, _: &mut Context<Self>) {
        let member = self.member;
        match event {
            SubscriptionEvent::Assigned { partitions, .. } => {
                println!("ledger/{member}: assigned {partitions:?}")
            }
            SubscriptionEvent::Revoked { partitions, .. } => {
                println!("ledger/{member}: revoked {partitions:?}")
            }
            SubscriptionEvent::DeadLettered {
                key,
                headers,
                reason,
                attempts,
                dead_letter_offset,
                ..
            } => {
                let user = String::from_utf8_lossy(key.as_deref().unwrap_or_default());
                let Some(id) = payment_id(&headers) else {
                    return println!("ledger/{member}: a dead letter without a payment id");
                };
                println!(
                    "ledger/{member}: payment {id} of {user} dead-lettered after {attempts} \
                     attempt(s) ({}) at offset {dead_letter_offset}",
                    reason.as_deref().unwrap_or("refused by the bank")
                );
                lock(&self.books)
                    .dead_lettered
                    .push((id, dead_letter_offset));
            }
            SubscriptionEvent::Ended(why) => println!("ledger/{member}: ended ({why:?})"),
            _ => {}
        }
    }
}

async fn ledger(
    topic: &Topic<Payment>,
    member: &'static str,
    books: &SharedBooks,
) -> Result<Subscription, Error> {
    let ledger = Ledger {
        member,
        books: books.clone(),
    }
    .start();
    let options = SubscribeOptions::default()
        .max_attempts(MAX_ATTEMPTS)
        .max_batch(MAX_BATCH)
        .dead_letter_topic(DEAD_LETTERS)
        .poll_wait(Duration::from_millis(200))
        .events(ledger.clone().recipient());
    topic
        .subscribe("ledger", member, ledger.recipient(), options)
        .await
}

/// The auditor: every payment, as a stream, summed per user; stops after `count` distinct
/// payments and returns the sums and how many it read.
async fn audit(topic: Topic<Payment>, count: u64) -> Result<(BTreeMap<String, u64>, u64), Error> {
    let mut stream = topic.stream("audit", "auditor-1").await?;
    let (mut seen, mut read, mut totals) = (BTreeSet::new(), 0, BTreeMap::new());
    while (seen.len() as u64) < count {
        let Some(record) = stream.next().await else {
            break;
        };
        let record = record?;
        read += 1;
        if seen.insert(record.value.id) {
            *totals.entry(record.value.user.clone()).or_default() += record.value.cents;
        }
        stream.commit(&record).await?;
    }
    stream.leave().await?;
    Ok((totals, read))
}

/// Waits until `done` holds, checking every 20 ms, for at most [`PATIENCE`].
async fn until(what: &str, mut done: impl FnMut() -> bool) -> Result<(), String> {
    let deadline = Instant::now() + PATIENCE;
    while !done() {
        if Instant::now() > deadline {
            return Err(format!("timed out waiting for {what}"));
        }
        actix_rt::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// What every check found wrong.
#[derive(Default)]
struct Failures(Vec<String>);

impl Failures {
    fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.0.push(what());
        }
    }
}

#[actix::main]
async fn main() {
    let started = Instant::now();
    match run().await {
        Ok(Failures(failures)) if failures.is_empty() => {
            println!(
                "payments: all checks passed in {:.1} s",
                started.elapsed().as_secs_f64()
            );
        }
        Ok(Failures(failures)) => {
            for failure in &failures {
                eprintln!("payments: MISMATCH: {failure}");
            }
            std::process::exit(1);
        }
        Err(e) => {
            eprintln!("payments: FAILED: {e}");
            std::process::exit(1);
        }
    }
}

async fn run() -> Result<Failures, String> {
    let dir = data_dir::ExampleDir::new();
    let bus = AsyncNanoKafka::open(dir.path())
        .await
        .map_err(|e| e.to_string())?;
    println!("backend: {:?}", bus.backend());
    let payments: Topic<Payment> = bus.topic(PAYMENTS);
    let config = TopicConfig::default().partitions(PARTITIONS);
    payments.create(config).await.map_err(|e| e.to_string())?;

    let books = SharedBooks::default();
    let first = ledger(&payments, "ledger-1", &books)
        .await
        .map_err(|e| e.to_string())?;
    let auditor = actix::spawn(audit(payments.clone(), TOTAL));
    let produced = Arc::new(AtomicU64::new(0));
    let gateway = Gateway {
        bus: bus.clone(),
        produced: produced.clone(),
    }
    .start();
    let pay = |ids| {
        let gateway = gateway.clone();
        async move {
            gateway
                .send(Pay(ids))
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())
        }
    };

    // Steady: 10 payments every 20 ms; a second ledger member joins half way.
    let mut second = None;
    let mut tick = actix_rt::time::interval(Duration::from_millis(20));
    for start in (0..STEADY).step_by(10) {
        tick.tick().await;
        pay(start..start + 10).await?;
        if start == STEADY / 2 {
            second = Some(
                ledger(&payments, "ledger-2", &books)
                    .await
                    .map_err(|e| e.to_string())?,
            );
        }
    }
    // The burst, in batches of 1000; the second member leaves half way.
    for start in (STEADY..TOTAL).step_by(1000) {
        pay(start..start + 1000).await?;
        if start == STEADY + BURST / 2 {
            if let Some(second) = second.take() {
                second.unsubscribe();
                second.await;
            }
        }
    }
    println!(
        "gateway: {} payments produced",
        produced.load(Ordering::Relaxed)
    );

    let dead: BTreeSet<u64> = (0..TOTAL)
        .filter(|&id| refused(id) || malformed(id))
        .collect();
    until("the ledger to settle every payment", || {
        let books = lock(&books);
        let letters: BTreeSet<u64> = books.dead_lettered.iter().map(|l| l.0).collect();
        books.booked.len() + letters.len() == TOTAL as usize
    })
    .await?;
    // The last commits may still be on their way.
    let deadline = Instant::now() + PATIENCE;
    let lag = loop {
        let lag = payments.lag("ledger").await.map_err(|e| e.to_string())?;
        if lag.values().all(|&l| l == 0) || Instant::now() > deadline {
            break lag;
        }
        actix_rt::time::sleep(Duration::from_millis(20)).await;
    };
    let (audited, audit_reads) = actix_rt::time::timeout(PATIENCE, auditor)
        .await
        .map_err(|_| "the auditor did not finish".to_string())?
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;

    let mut failures = Failures::default();
    check_books(&books, &dead, &audited, audit_reads, &mut failures);
    failures.check(lag.values().all(|&l| l == 0), || {
        format!("ledger lag {lag:?}")
    });
    check_dead_letters(&bus, &books, &dead, &mut failures).await?;

    // Close and reopen the same directory: nothing is delivered again.
    first.unsubscribe();
    first.await;
    bus.shutdown().await.map_err(|e| e.to_string())?;
    let bus = AsyncNanoKafka::open(dir.path())
        .await
        .map_err(|e| e.to_string())?;
    let payments: Topic<Payment> = bus.topic(PAYMENTS);
    lock(&books).reopened = true;
    let again = ledger(&payments, "ledger-1", &books)
        .await
        .map_err(|e| e.to_string())?;
    let auditor = actix::spawn(audit(payments.clone(), u64::from(PARTITIONS)));
    // One new payment per partition: each comes after anything still uncommitted there.
    for partition in 0..PARTITIONS {
        let p = payment(TOTAL + u64::from(partition));
        let mut batch = RecordBatch::new();
        let header = [Header::new("payment-id", p.id.to_string())];
        batch
            .push_with_headers(Some(p.user.as_bytes()), &p, &header)
            .map_err(|e| e.to_string())?;
        bus.produce_batch(PAYMENTS, Some(partition), batch)
            .await
            .map_err(|e| e.to_string())?;
    }
    until("the new payments after the reopen", || {
        lock(&books).after_reopen.len() >= PARTITIONS as usize
    })
    .await?;
    let (_, reads) = actix_rt::time::timeout(PATIENCE, auditor)
        .await
        .map_err(|_| "the auditor did not finish after the reopen".to_string())?
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    let after: Vec<u64> = lock(&books).after_reopen.clone();
    let new: Vec<u64> = (TOTAL..TOTAL + u64::from(PARTITIONS)).collect();
    let mut sorted = after.clone();
    sorted.sort();
    failures.check(sorted == new, || {
        format!("after the reopen the ledger got {after:?}, not only {new:?}")
    });
    failures.check(reads == u64::from(PARTITIONS), || {
        format!("after the reopen the auditor read {reads} records, not {PARTITIONS}")
    });
    println!("reopen: the ledger and the auditor got only the {PARTITIONS} new payments");
    again.unsubscribe();
    again.await;
    bus.shutdown().await.map_err(|e| e.to_string())?;
    Ok(failures)
}

/// Every payment booked once (or dead-lettered), deliveries within the rules, the totals.
fn check_books(
    books: &SharedBooks,
    dead: &BTreeSet<u64>,
    audited: &BTreeMap<String, u64>,
    audit_reads: u64,
    failures: &mut Failures,
) {
    let books = lock(books);
    let mut expected_booked = BTreeMap::<String, u64>::new();
    let mut expected_all = BTreeMap::<String, u64>::new();
    for id in 0..TOTAL {
        let p = payment(id);
        *expected_all.entry(p.user.clone()).or_default() += p.cents;
        if !dead.contains(&id) {
            *expected_booked.entry(p.user).or_default() += p.cents;
        }
    }
    let mut booked = BTreeMap::<String, u64>::new();
    for p in books.booked.values() {
        *booked.entry(p.user.clone()).or_default() += p.cents;
    }
    let wrongly_booked: Vec<&u64> = books.booked.keys().filter(|id| dead.contains(id)).collect();
    failures.check(wrongly_booked.is_empty(), || {
        format!("refused payments booked: {wrongly_booked:?}")
    });
    failures.check(booked == expected_booked, || {
        "the ledger's per-user totals are wrong".into()
    });
    failures.check(audited == &expected_all, || {
        "the auditor's per-user totals are wrong".into()
    });
    failures.check(audit_reads == TOTAL, || {
        format!("the auditor read {audit_reads} records for {TOTAL} payments")
    });
    // A payment comes again on its first attempt only at a rebalance (at-least-once: a
    // member reads on from the committed offsets then), at most two batches per partition
    // each time: the one with the subscriber and the one whose commit was on its way.
    let again = books.delivered_again.len();
    let bound = REBALANCES * PARTITIONS as usize * 2 * MAX_BATCH;
    failures.check(again <= bound, || {
        format!("{again} payments delivered again over {REBALANCES} rebalances")
    });
    let too_often: Vec<_> = (books.attempts.iter())
        .filter(|(_, attempts)| attempts.iter().any(|&a| a > MAX_ATTEMPTS))
        .collect();
    failures.check(too_often.is_empty(), || {
        format!("deliveries past attempt {MAX_ATTEMPTS}: {too_often:?}")
    });
    let refused_ids: Vec<u64> = dead.iter().copied().filter(|&id| refused(id)).collect();
    for id in &refused_ids {
        let attempts = &books.attempts[id];
        failures.check(attempts.iter().max() == Some(&MAX_ATTEMPTS), || {
            format!("refused payment {id} had attempts {attempts:?}")
        });
    }
    let retried = books
        .attempts
        .values()
        .flatten()
        .filter(|&&a| a > 1)
        .count();
    println!(
        "ledger: {} payments booked, {} dead letters, {retried} retries, {} delivered again \
         at a rebalance",
        books.booked.len(),
        books.dead_lettered.len(),
        books.delivered_again.len()
    );
}

/// The dead-letter topic holds the refused and malformed payments, each once, with its key
/// and the headers saying why, where the `DeadLettered` events said.
async fn check_dead_letters(
    bus: &AsyncNanoKafka,
    books: &SharedBooks,
    dead: &BTreeSet<u64>,
    failures: &mut Failures,
) -> Result<(), String> {
    // Dead letters keep the source's bytes, so they decode as the source's type.
    let letters = bus.topic::<Payment>(DEAD_LETTERS).accept_any_payload_type();
    let mut stream = letters
        .stream("dlq-check", "checker")
        .await
        .map_err(|e| e.to_string())?;
    // One dead letter per event: a record is dead-lettered twice only when a rebalance
    // refused the commit past its first dead letter (its next owner then writes another).
    let told = lock(books).dead_lettered.clone();
    let mut found = BTreeMap::new();
    for _ in 0..told.len() {
        let next = actix_rt::time::timeout(PATIENCE, stream.next()).await;
        let Ok(Some(Ok(record))) = next else {
            return Err(format!(
                "only {} dead letters read of {}",
                found.len(),
                told.len()
            ));
        };
        let header = |key: &str| {
            let h = record.headers.iter().find(|h| h.key == key)?;
            Some(String::from_utf8_lossy(h.value.as_deref()?).into_owned())
        };
        let id = record.value.id;
        let reason = header("nanokafka.dlq.reason");
        let expected_reason = if malformed(id) {
            "rejected"
        } else {
            "retries-exhausted"
        };
        failures.check(reason.as_deref() == Some(expected_reason), || {
            format!("dead letter of {id}: reason {reason:?}")
        });
        failures.check(
            record.key.as_deref() == Some(record.value.user.as_bytes()),
            || format!("dead letter of {id}: key {:?}", record.key),
        );
        failures.check(payment_id(&record.headers) == Some(id), || {
            format!("dead letter of {id}: no payment-id")
        });
        failures.check(
            header("nanokafka.dlq.topic").as_deref() == Some(PAYMENTS),
            || format!("dead letter of {id}: no origin topic"),
        );
        found.insert(record.offset, id);
        stream.commit(&record).await.map_err(|e| e.to_string())?;
    }
    stream.leave().await.map_err(|e| e.to_string())?;
    let unread = bus
        .lag(DEAD_LETTERS, "dlq-check")
        .await
        .map_err(|e| e.to_string())?;
    failures.check(unread.values().all(|&l| l == 0), || {
        format!("dead letters no event told of: {unread:?} unread")
    });
    let found_ids: BTreeSet<u64> = found.values().copied().collect();
    failures.check(&found_ids == dead, || {
        format!("dead letters {found_ids:?}, expected {dead:?}")
    });
    for (id, offset) in &told {
        failures.check(found.get(offset) == Some(id), || {
            let holds = found.get(offset);
            format!("payment {id} was told dead-lettered at {offset}, which holds {holds:?}")
        });
    }
    println!(
        "dead letters: {} in {DEAD_LETTERS}, as the events said",
        found.len()
    );
    Ok(())
}
