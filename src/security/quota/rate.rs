//! Kafka's windowed rate (`Rate` over a `SampledStat`), the measure a client quota bounds.
//!
//! The rate is the sum of what was recorded in the retained samples, divided by the time
//! they span. A sample covers one window of [`WINDOW_SIZE_MS`]; [`WINDOW_NUM`] of them are
//! kept (plus one that may straddle the start of the span), so the rate looks back about
//! `quota.window.num` × `quota.window.size.seconds` = 11 s. A span shorter than
//! `WINDOW_NUM - 1` full windows counts as that many, so a client's first burst is not
//! measured against a few milliseconds (Kafka's rule, which also makes the first second of a
//! client's life as cheap as any other).

/// `quota.window.num`: how many windows the rate looks back over (Kafka's default).
pub const WINDOW_NUM: u64 = 11;

/// `quota.window.size.seconds`, in milliseconds: one window (Kafka's default, 1 s).
pub const WINDOW_SIZE_MS: u64 = 1_000;

/// A rate per second of what is recorded, measured as Kafka measures a quota's rate.
#[derive(Debug, Clone, Default)]
pub struct Rate {
    samples: Vec<Sample>,
    /// The sample being filled.
    current: usize,
}

#[derive(Debug, Clone, Copy)]
struct Sample {
    value: f64,
    start_ms: u64,
    last_event_ms: u64,
}

impl Sample {
    fn new(now_ms: u64) -> Self {
        Sample {
            value: 0.0,
            start_ms: now_ms,
            last_event_ms: now_ms,
        }
    }
}

impl Rate {
    /// Adds `value` (bytes, or percent-seconds of handler time) at `now_ms`.
    pub fn record(&mut self, value: f64, now_ms: u64) {
        if self.samples.is_empty() {
            self.samples.push(Sample::new(now_ms));
        }
        if now_ms.saturating_sub(self.samples[self.current].start_ms) >= WINDOW_SIZE_MS {
            self.advance(now_ms);
        }
        let sample = &mut self.samples[self.current];
        sample.value += value;
        sample.last_event_ms = now_ms;
    }

    /// Starts a new sample, reusing the oldest slot once `WINDOW_NUM + 1` exist (the extra
    /// one is the sample that straddles the start of the span).
    fn advance(&mut self, now_ms: u64) {
        self.current = (self.current + 1) % (WINDOW_NUM as usize + 1);
        match self.samples.get_mut(self.current) {
            Some(sample) => *sample = Sample::new(now_ms),
            None => self.samples.push(Sample::new(now_ms)),
        }
    }

    /// The rate per second at `now_ms`.
    pub fn measure(&mut self, now_ms: u64) -> f64 {
        let window_ms = self.window_size_ms(now_ms);
        let total: f64 = self.samples.iter().map(|s| s.value).sum();
        total / (window_ms as f64 / 1_000.0)
    }

    /// The time the rate divides by, in milliseconds: from the start of the oldest retained
    /// sample to `now_ms`, at least `WINDOW_NUM - 1` windows, at least 1 ms.
    pub fn window_size_ms(&mut self, now_ms: u64) -> u64 {
        self.purge_obsolete(now_ms);
        let oldest = self.samples.iter().map(|s| s.start_ms).min();
        let mut elapsed = oldest.map_or(0, |start| now_ms.saturating_sub(start));
        let full_windows = elapsed / WINDOW_SIZE_MS;
        let min_full_windows = WINDOW_NUM - 1;
        if full_windows < min_full_windows {
            elapsed += (min_full_windows - full_windows) * WINDOW_SIZE_MS;
        }
        elapsed.max(1)
    }

    /// Samples whose last event is a whole span old count nothing and start again now.
    fn purge_obsolete(&mut self, now_ms: u64) {
        for sample in &mut self.samples {
            if now_ms.saturating_sub(sample.last_event_ms) >= WINDOW_NUM * WINDOW_SIZE_MS {
                *sample = Sample::new(now_ms);
            }
        }
    }

    /// True when nothing recorded is still measured: the rate can be forgotten.
    pub fn is_idle(&self, now_ms: u64) -> bool {
        self.samples.iter().all(|s| {
            s.value == 0.0 || now_ms.saturating_sub(s.last_event_ms) >= WINDOW_NUM * WINDOW_SIZE_MS
        })
    }

    /// Kafka's throttle time for a rate over `bound`: how long the client must stay quiet
    /// for the rate, over the window it is measured on, to come down to the bound
    /// (`O·W / (W + X) = T`, so `X = (O − T) / T · W`), rounded, at most `cap_ms`; 0 within
    /// the bound.
    pub fn throttle_ms(&mut self, bound: f64, now_ms: u64, cap_ms: u64) -> u64 {
        let observed = self.measure(now_ms);
        if observed <= bound {
            return 0;
        }
        let window_ms = self.window_size_ms(now_ms) as f64;
        let throttle = ((observed - bound) / bound * window_ms).round();
        (throttle as u64).min(cap_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: u64 = 1_000_000;

    #[test]
    fn a_first_burst_is_measured_over_ten_windows_not_over_no_time() {
        let mut rate = Rate::default();
        rate.record(5_000.0, T0);
        // 5000 bytes over the minimum span of (11 - 1) × 1 s.
        assert_eq!(rate.window_size_ms(T0), 10_000);
        assert_eq!(rate.measure(T0), 500.0);
        assert_eq!(rate.throttle_ms(1_000.0, T0, u64::MAX), 0);
    }

    #[test]
    fn the_throttle_time_brings_the_rate_back_to_the_bound() {
        let mut rate = Rate::default();
        rate.record(15_000.0, T0);
        // 1500 B/s against 1000 B/s over 10 s: (1500 - 1000) / 1000 × 10 000 ms.
        assert_eq!(rate.throttle_ms(1_000.0, T0, u64::MAX), 5_000);
        // Until ten windows have passed the span is padded to ten (Kafka's rule): 5 s on,
        // still 15 000 B over 10 s; 11.5 s on, the span is 11.5 s.
        assert_eq!(rate.measure(T0 + 5_000), 1_500.0);
        rate.record(0.0, T0 + 999);
        assert_eq!(rate.measure(T0 + 11_500), 15_000.0 / 11.5);
        assert_eq!(rate.throttle_ms(1_500.0, T0 + 11_500, u64::MAX), 0);
        // Capped.
        assert_eq!(rate.throttle_ms(1_000.0, T0, 1_000), 1_000);
    }

    #[test]
    fn samples_roll_per_window_and_old_ones_stop_counting() {
        let mut rate = Rate::default();
        for second in 0..15 {
            rate.record(1_000.0, T0 + second * WINDOW_SIZE_MS);
        }
        // At T0 + 14.5 s: 12 slots hold the samples started at 3 s .. 14 s; the one of 3 s
        // saw its last event 11.5 s ago and no longer counts. 11 000 B over 10.5 s.
        let now = T0 + 14_500;
        assert_eq!(rate.window_size_ms(now), 10_500);
        assert_eq!(rate.measure(now), 11_000.0 / 10.5);
        // A whole span later every sample is obsolete: nothing is measured.
        let later = T0 + 14_000 + WINDOW_NUM * WINDOW_SIZE_MS;
        assert_eq!(rate.measure(later), 0.0);
        assert!(rate.is_idle(later));
    }
}
