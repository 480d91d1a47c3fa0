//! The series behind the console's charts: records appended per second by topic and total
//! lag by group, sampled every `every` into rings of [`RING_LEN`] points (10 minutes at 1 s).
//!
//! The console costs nothing while no page is open: the sampler runs only while the API was
//! asked something within `idle_after` ([`super::CONSOLE_IDLE_AFTER`]) on the broker's clock.
//! Each API request [`Sampler::touch`]es it, which starts its loop when it is not running;
//! the loop ends by itself at the first tick past `idle_after` without a request. The series
//! stay (the charts show the last window when the page comes back).

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::async_handle::AsyncNanoKafka;
use crate::clock::SharedClock;

/// Points kept per series: 10 minutes at one a second.
pub(crate) const RING_LEN: usize = 600;

/// A series: `(time ms, value)`, oldest first, at most [`RING_LEN`].
pub(crate) type Series = VecDeque<(u64, f64)>;

#[derive(Debug)]
pub(crate) struct Sampler {
    broker: AsyncNanoKafka,
    clock: SharedClock,
    every: Duration,
    idle_after: Duration,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// When the API was last asked something (clock ms).
    last_used_ms: u64,
    running: bool,
    /// Times the loop was started, and samples taken, since the console started.
    runs: u64,
    samples: u64,
    /// The previous sample: its time and each topic's record count (sum of log ends).
    previous: Option<(u64, BTreeMap<String, u64>)>,
    throughput: BTreeMap<String, Series>,
    lag: BTreeMap<String, Series>,
}

impl Sampler {
    pub fn new(
        broker: AsyncNanoKafka,
        clock: SharedClock,
        every: Duration,
        idle_after: Duration,
    ) -> Self {
        Sampler {
            broker,
            clock,
            every,
            idle_after,
            state: Mutex::default(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The API was asked something now: keep sampling, starting the loop if it stopped. Call
    /// on a thread with an actix/tokio runtime (a request handler's).
    pub fn touch(self: &Arc<Self>) {
        let mut state = self.state();
        state.last_used_ms = self.clock.now_ms();
        if !state.running {
            state.running = true;
            state.runs += 1;
            actix_rt::spawn(self.clone().run());
        }
    }

    async fn run(self: Arc<Self>) {
        loop {
            self.sample().await;
            actix_rt::time::sleep(self.every).await;
            let mut state = self.state();
            let idle = self.clock.now_ms().saturating_sub(state.last_used_ms);
            if u128::from(idle) >= self.idle_after.as_millis() {
                state.running = false;
                tracing::debug!(idle_ms = idle, "console sampler stopped: the API is idle");
                return;
            }
        }
    }

    /// One sample: each topic's records per second since the previous sample, each group's
    /// total lag. A broker that cannot answer skips the sample.
    async fn sample(&self) {
        let Ok(stats) = self.broker.stats().await else {
            return;
        };
        let now = self.clock.now_ms();
        let counts: BTreeMap<String, u64> = stats
            .topics
            .iter()
            .map(|(name, t)| {
                (
                    name.clone(),
                    t.partitions.iter().map(|p| p.log_end_offset).sum(),
                )
            })
            .collect();
        let mut lag: BTreeMap<String, u64> = BTreeMap::new();
        for topic in stats.topics.values() {
            for (group, total) in super::views::group_lags(topic) {
                *lag.entry(group).or_default() += total;
            }
        }
        let mut state = self.state();
        state.samples += 1;
        if let Some((then, before)) = state.previous.take() {
            let seconds = now.saturating_sub(then) as f64 / 1000.0;
            if seconds > 0.0 {
                for (name, count) in &counts {
                    let added = count.saturating_sub(before.get(name).copied().unwrap_or(*count));
                    push(
                        state.throughput.entry(name.clone()).or_default(),
                        now,
                        added as f64 / seconds,
                    );
                }
            }
        }
        for (group, total) in &lag {
            push(
                state.lag.entry(group.clone()).or_default(),
                now,
                *total as f64,
            );
        }
        // Series of topics and groups deleted since go with them.
        state.throughput.retain(|name, _| counts.contains_key(name));
        state.lag.retain(|group, _| lag.contains_key(group));
        state.previous = Some((now, counts));
    }

    /// `topic`'s records per second at the last sample; `None` before two samples.
    pub fn rate(&self, topic: &str) -> Option<f64> {
        self.state().throughput.get(topic)?.back().map(|(_, v)| *v)
    }

    pub fn throughput(&self, topic: &str) -> Vec<(u64, f64)> {
        self.state()
            .throughput
            .get(topic)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default()
    }

    pub fn lag_history(&self, group: &str) -> Vec<(u64, f64)> {
        self.state()
            .lag
            .get(group)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default()
    }

    /// `(running, runs, samples)`: whether the loop runs, how often it was started, how many
    /// samples it took.
    #[cfg(test)]
    pub fn activity(&self) -> (bool, u64, u64) {
        let state = self.state();
        (state.running, state.runs, state.samples)
    }
}

fn push(series: &mut Series, t: u64, value: f64) {
    if series.len() == RING_LEN {
        series.pop_front();
    }
    series.push_back((t, value));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    /// Waits (up to 20 s of real time) until `done`, checking every millisecond.
    async fn until(what: &str, done: impl Fn() -> bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while !done() {
            assert!(
                std::time::Instant::now() < deadline,
                "timed out waiting for {what}"
            );
            actix_rt::time::sleep(Duration::from_millis(1)).await;
        }
    }

    #[test]
    fn the_sampler_stops_when_the_api_is_idle_and_starts_again_on_the_next_request() {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(1_000_000);
        let broker = crate::NanoKafka::builder()
            .data_dir(dir.path())
            .clock(Arc::new(clock.clone()))
            .build()
            .unwrap();
        broker
            .create_topic("t", crate::TopicConfig::default())
            .unwrap();
        let sampler = Arc::new(Sampler::new(
            broker.async_handle(),
            Arc::new(clock.clone()),
            Duration::from_millis(2),
            Duration::from_secs(60),
        ));
        actix_rt::System::new().block_on(async {
            sampler.touch();
            until("three samples", || sampler.activity().2 >= 3).await;
            // Within the idle time it keeps going.
            clock.advance(59_000);
            let taken = sampler.activity().2;
            until("more samples", || sampler.activity().2 >= taken + 3).await;
            assert!(sampler.activity().0);
            // A minute without a request: it stops by itself, and takes no more samples.
            clock.advance(1_000);
            until("the sampler to stop", || !sampler.activity().0).await;
            let stopped_at = sampler.activity().2;
            actix_rt::time::sleep(Duration::from_millis(50)).await;
            assert_eq!(sampler.activity(), (false, 1, stopped_at));
            // The next request starts it again.
            sampler.touch();
            until("a sample after the restart", || {
                sampler.activity().2 > stopped_at
            })
            .await;
            assert_eq!(sampler.activity().1, 2);
        });
        drop(sampler);
        broker.shutdown().unwrap();
    }

    #[test]
    fn rates_need_two_samples_and_deleted_topics_and_groups_lose_their_series() {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(1_000_000);
        let broker = crate::NanoKafka::builder()
            .data_dir(dir.path())
            .clock(Arc::new(clock.clone()))
            .build()
            .unwrap();
        broker
            .create_topic("t", crate::TopicConfig::default())
            .unwrap();
        broker.join_group("t", "g", "m").unwrap();
        broker.leave_group("t", "g", "m").unwrap();
        let sampler = Sampler::new(
            broker.async_handle(),
            Arc::new(clock.clone()),
            Duration::from_secs(1),
            Duration::from_secs(60),
        );
        let sample = || futures::executor::block_on(sampler.sample());
        sample();
        assert_eq!(sampler.rate("t"), None);
        for _ in 0..4 {
            broker.produce_raw("t", None, b"x".to_vec()).unwrap();
        }
        clock.advance(2_000);
        sample();
        assert_eq!(sampler.rate("t"), Some(2.0));
        assert_eq!(sampler.lag_history("g").last(), Some(&(1_002_000, 4.0)));
        broker.delete_topic("t").unwrap();
        clock.advance(1_000);
        sample();
        assert_eq!(
            (sampler.rate("t"), sampler.lag_history("g")),
            (None, vec![])
        );
        broker.shutdown().unwrap();
    }

    #[test]
    fn a_series_keeps_its_last_ring_len_points() {
        let mut series = Series::new();
        for t in 0..(RING_LEN as u64 + 10) {
            push(&mut series, t, 1.0);
        }
        assert_eq!(series.len(), RING_LEN);
        assert_eq!(series.front().unwrap().0, 10);
    }
}
