//! The SchedulingThroughput collector of upstream scheduler_perf (`scheduler_perf/util.go` throughputCollector), as a pure state
//! machine fed with `(tick time, pods scheduled so far)`; the caller owns the 1 s ticker.
//!
//! Rules: ticks before the first scheduled pod are ignored; the first tick that sees a scheduled
//! pod only sets the baseline (it is likely an outlier: sampling and pod creation start
//! independently); after that each tick yields `new pods / actual seconds since the last sample`,
//! except that a tick without progress is merged into the next productive one, whose value is then
//! recorded once per merged interval so percentiles keep their time weighting.

use std::time::{Duration, Instant};

/// The interval between collector ticks.
pub const SAMPLE_INTERVAL: Duration = Duration::from_secs(1);

/// Ticks deviating from their expected spacing by more than this share are reported (upstream's
/// benchmark-mode error margin).
const ERROR_MARGIN_PERCENT: f64 = 30.0;

/// One recorded sample, for the progress plot (upstream's `.dat` progress lines).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Progress {
    /// When the sample was taken.
    pub at: Instant,
    /// Pods scheduled so far.
    pub scheduled: usize,
    /// The throughput of the sample (pods/s).
    pub rate: f64,
}

/// Upstream's throughput collector.
#[derive(Debug, Default)]
pub struct ThroughputCollector {
    samples: Vec<f64>,
    progress: Vec<Progress>,
    /// When the baseline was taken.
    start: Option<Instant>,
    last_count: usize,
    last_time: Option<Instant>,
    skipped: u32,
    warnings: Vec<String>,
}

/// What the collector reports: `None` when there were no samples (run too short).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ThroughputSummary {
    /// Mean of the samples.
    pub average: f64,
    /// 50th percentile.
    pub perc50: f64,
    /// 90th percentile.
    pub perc90: f64,
    /// 95th percentile.
    pub perc95: f64,
    /// 99th percentile.
    pub perc99: f64,
    /// Number of samples.
    pub samples: usize,
}

impl ThroughputCollector {
    /// A collector that has not seen any tick.
    pub fn new() -> Self {
        Self::default()
    }

    /// One tick at `now` with `scheduled` measured pods bound so far.
    pub fn tick(&mut self, now: Instant, scheduled: usize) {
        if scheduled == 0 {
            return;
        }
        let Some(last_time) = self.last_time else {
            self.start = Some(now);
            self.last_time = Some(now);
            self.last_count = scheduled;
            return;
        };
        let new = scheduled.saturating_sub(self.last_count);
        if new == 0 {
            self.skipped += 1;
            return;
        }
        // Actual elapsed time, not ticks × interval: the ticker may have been late.
        let duration = now.saturating_duration_since(last_time);
        let expected = SAMPLE_INTERVAL * (self.skipped + 1);
        let deviation = (duration.as_secs_f64() - expected.as_secs_f64()) / expected.as_secs_f64() * 100.0;
        if deviation.abs() > ERROR_MARGIN_PERCENT {
            self.warnings.push(format!(
                "{} interval(s) took {:.3}s instead of {:.3}s ({deviation:+.1}%)",
                self.skipped + 1,
                duration.as_secs_f64(),
                expected.as_secs_f64()
            ));
        }
        let rate = new as f64 / duration.as_secs_f64().max(f64::MIN_POSITIVE);
        for _ in 0..=self.skipped {
            self.samples.push(rate);
        }
        self.progress.push(Progress { at: now, scheduled, rate });
        self.last_count = scheduled;
        self.last_time = Some(now);
        self.skipped = 0;
    }

    /// The recorded samples, in order.
    #[cfg(test)]
    pub fn samples(&self) -> &[f64] {
        &self.samples
    }

    /// The samples as upstream's `.dat` progress lines.
    pub fn progress(&self) -> &[Progress] {
        &self.progress
    }

    /// When the baseline tick happened.
    #[cfg(test)]
    pub fn start(&self) -> Option<Instant> {
        self.start
    }

    /// Tick-timing warnings.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Average and percentiles (index ⌈n·p/100⌉−1 of the sorted samples); `None` without samples.
    pub fn summary(&self) -> Option<ThroughputSummary> {
        summarize(&self.samples)
    }
}

/// Average and upstream-style percentiles of `samples`.
pub fn summarize(samples: &[f64]) -> Option<ThroughputSummary> {
    if samples.is_empty() {
        return None;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let perc = |p: usize| sorted[(n * p).div_ceil(100) - 1];
    Some(ThroughputSummary {
        average: sorted.iter().sum::<f64>() / n as f64,
        perc50: perc(50),
        perc90: perc(90),
        perc95: perc(95),
        perc99: perc(99),
        samples: n,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(base: Instant, ms: u64) -> Instant {
        base + Duration::from_millis(ms)
    }

    #[test]
    fn waits_for_the_first_scheduled_pod_and_discards_the_baseline() {
        let t = Instant::now();
        let mut c = ThroughputCollector::new();
        c.tick(at(t, 1000), 0);
        c.tick(at(t, 2000), 0);
        assert!(c.start().is_none());
        c.tick(at(t, 3000), 50); // baseline: the 50 pods are not a sample
        assert_eq!(c.start(), Some(at(t, 3000)));
        assert!(c.samples().is_empty());
        assert!(c.summary().is_none(), "a single tick yields no samples");
        c.tick(at(t, 4000), 150);
        assert_eq!(c.samples(), &[100.0]);
    }

    #[test]
    fn uses_actual_elapsed_time_and_warns_on_late_ticks() {
        let t = Instant::now();
        let mut c = ThroughputCollector::new();
        c.tick(at(t, 1000), 10);
        c.tick(at(t, 2000), 110);
        c.tick(at(t, 3500), 260); // late tick: 150 pods over 1.5 s
        assert_eq!(c.samples(), &[100.0, 100.0]);
        assert_eq!(c.warnings().len(), 1, "{:?}", c.warnings());
        assert!(c.warnings()[0].contains("+50.0%"), "{:?}", c.warnings());
    }

    #[test]
    fn zero_progress_ticks_merge_into_the_next_sample_recorded_k_plus_one_times() {
        let t = Instant::now();
        let mut c = ThroughputCollector::new();
        c.tick(at(t, 1000), 5);
        c.tick(at(t, 2000), 5);
        c.tick(at(t, 3000), 5);
        c.tick(at(t, 4000), 65); // 60 pods over 3 s, recorded 3 times
        c.tick(at(t, 5000), 165);
        assert_eq!(c.samples(), &[20.0, 20.0, 20.0, 100.0]);
        assert!(c.warnings().is_empty());
        let p = c.progress();
        assert_eq!(p.len(), 2);
        assert_eq!((p[0].scheduled, p[0].rate), (65, 20.0));
        let s = c.summary().unwrap();
        assert_eq!(s.samples, 4);
        assert_eq!(s.average, 40.0);
    }

    #[test]
    fn percentiles_use_ceil_index_of_sorted_samples() {
        // 1..=10 shuffled: p50 -> index ceil(5)-1 = 4 -> 5; p90 -> 8 -> 9; p95 -> ceil(9.5)-1 = 9 -> 10.
        let s = summarize(&[7.0, 3.0, 10.0, 1.0, 5.0, 9.0, 2.0, 8.0, 4.0, 6.0]).unwrap();
        assert_eq!((s.perc50, s.perc90, s.perc95, s.perc99), (5.0, 9.0, 10.0, 10.0));
        assert_eq!(s.average, 5.5);
        // n = 3: p50 -> ceil(1.5)-1 = 1; p90/p95/p99 -> 2.
        let s = summarize(&[30.0, 10.0, 20.0]).unwrap();
        assert_eq!((s.perc50, s.perc90, s.perc99), (20.0, 30.0, 30.0));
        // n = 1: every percentile is the sample.
        let s = summarize(&[42.0]).unwrap();
        assert_eq!((s.perc50, s.perc99, s.average), (42.0, 42.0, 42.0));
        // n = 200: p99 -> index 197.
        let v: Vec<f64> = (1..=200).map(f64::from).collect();
        assert_eq!(summarize(&v).unwrap().perc99, 198.0);
        assert!(summarize(&[]).is_none());
    }
}
