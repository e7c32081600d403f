//! Measurements besides throughput: scheduling-attempt latencies (through the scheduler's
//! metrics hook), the process's peak RSS and CPU time.

use std::sync::atomic::{AtomicBool, Ordering};

use ksched_framework::interface::QueuedPodInfo;
use ksched_scheduler::metrics::SchedulerMetrics;
use parking_lot::Mutex;

/// Records attempt durations, and the scheduling algorithm's share of them, while enabled (the
/// measured window only, like upstream's histogram collectors which are reset when measurement
/// starts).
#[derive(Debug, Default)]
pub struct LatencyRecorder {
    enabled: AtomicBool,
    /// Attempts: from the pod's pop to its binding (or failure), as `scheduling_attempt_duration_seconds`.
    seconds: Mutex<Vec<f64>>,
    /// Snapshot update, filter and score, as `scheduling_algorithm_duration_seconds`: set against
    /// the attempts, it tells the scheduling cycle from the wait for the binding cycle.
    algorithm_seconds: Mutex<Vec<f64>>,
}

/// `(p50, p99)` of `seconds`, in milliseconds.
fn p50_p99_ms(seconds: &Mutex<Vec<f64>>) -> Option<(f64, f64)> {
    let mut v = seconds.lock().clone();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let q = |p: usize| v[(v.len() * p).div_ceil(100) - 1] * 1000.0;
    Some((q(50), q(99)))
}

impl LatencyRecorder {
    /// Starts or stops recording.
    pub fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Ordering::Relaxed);
    }

    fn record(&self, into: &Mutex<Vec<f64>>, s: f64) {
        if self.enabled.load(Ordering::Relaxed) {
            into.lock().push(s);
        }
    }

    /// Attempt latency `(p50, p99)` in milliseconds, `None` without observations.
    pub fn percentiles_ms(&self) -> Option<(f64, f64)> {
        p50_p99_ms(&self.seconds)
    }

    /// Scheduling-algorithm latency `(p50, p99)` in milliseconds, `None` without observations.
    pub fn algorithm_percentiles_ms(&self) -> Option<(f64, f64)> {
        p50_p99_ms(&self.algorithm_seconds)
    }

    /// Attempts recorded.
    pub fn count(&self) -> usize {
        self.seconds.lock().len()
    }
}

impl SchedulerMetrics for LatencyRecorder {
    fn scheduling_algorithm_duration(&self, seconds: f64) {
        self.record(&self.algorithm_seconds, seconds);
    }

    fn pod_scheduled(&self, _profile: &str, seconds: f64, _pod: &QueuedPodInfo) {
        self.record(&self.seconds, seconds);
    }

    fn pod_failed(&self, _profile: &str, _unschedulable: bool, seconds: f64) {
        self.record(&self.seconds, seconds);
    }
}

fn proc_status_bytes(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Peak resident set size of this process (`VmHWM`), in bytes. Linux only; `None` elsewhere.
/// It cannot be reset, so it is the peak since the process started.
pub fn peak_rss_bytes() -> Option<u64> {
    proc_status_bytes("VmHWM:")
}

/// Current resident set size (`VmRSS`), in bytes: read after a workload's cluster is dropped, it
/// shows what the workload left behind.
pub fn rss_bytes() -> Option<u64> {
    proc_status_bytes("VmRSS:")
}

/// User + system CPU seconds of this process, all threads (`/proc/self/stat` fields 14 and 15).
pub fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name may contain spaces and parentheses: fields start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_whitespace().skip(11);
    let utime: u64 = f.next()?.parse().ok()?;
    let stime: u64 = f.next()?.parse().ok()?;
    // USER_HZ is 100 on every Linux ABI the kernel exports to user space.
    Some((utime + stime) as f64 / 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorder_only_counts_while_enabled() {
        let r = LatencyRecorder::default();
        r.pod_failed("p", true, 1.0);
        assert_eq!(r.count(), 0);
        r.set_enabled(true);
        for i in 1..=100 {
            r.pod_failed("p", true, f64::from(i) / 1000.0);
        }
        let (p50, p99) = r.percentiles_ms().unwrap();
        assert!((p50 - 50.0).abs() < 1e-9 && (p99 - 99.0).abs() < 1e-9, "{p50} {p99}");
        assert_eq!(r.algorithm_percentiles_ms(), None, "attempts are not algorithm runs");
    }

    #[test]
    fn algorithm_durations_are_kept_apart_from_attempts() {
        let r = LatencyRecorder::default();
        r.scheduling_algorithm_duration(1.0);
        r.set_enabled(true);
        for i in 1..=200 {
            r.scheduling_algorithm_duration(f64::from(i) / 10_000.0);
        }
        r.pod_failed("p", true, 0.5);
        let (p50, p99) = r.algorithm_percentiles_ms().unwrap();
        assert!((p50 - 10.0).abs() < 1e-9 && (p99 - 19.8).abs() < 1e-9, "{p50} {p99}");
        assert_eq!(r.count(), 1);
        assert_eq!(r.percentiles_ms(), Some((500.0, 500.0)));
    }

    #[test]
    fn process_stats_are_readable_on_linux() {
        if cfg!(target_os = "linux") {
            // Current first: other tests in this process may grow RSS between the two reads,
            // and the high-water mark can only be at least any earlier reading.
            let now = rss_bytes().unwrap();
            assert!(peak_rss_bytes().unwrap() >= now);
            let mut x = 0u64;
            for i in 0..1_000_000u64 {
                x = x.wrapping_mul(31).wrapping_add(i);
            }
            std::hint::black_box(x);
            assert!(cpu_seconds().unwrap() >= 0.0);
        }
    }
}
