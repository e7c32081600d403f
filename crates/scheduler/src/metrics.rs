//! Where the scheduling loop reports what it did. The Prometheus implementation plugs in here;
//! tests and benchmarks use [`NoopMetrics`] or their own recorders.

use ksched_framework::interface::QueuedPodInfo;

/// Scheduling-loop observations (the `scheduler_*` metrics of §10.2 hang off these calls).
pub trait SchedulerMetrics: Send + Sync {
    /// Time spent in the scheduling algorithm of one cycle.
    fn scheduling_algorithm_duration(&self, _seconds: f64) {}
    /// A binding goroutine started (+1) or finished (-1).
    fn binding_goroutines(&self, _delta: i64) {}
    /// A pod was bound; `seconds` since its cycle started.
    fn pod_scheduled(&self, _profile: &str, _seconds: f64, _pod: &QueuedPodInfo) {}
    /// A scheduling attempt failed (`unschedulable` or error).
    fn pod_failed(&self, _profile: &str, _unschedulable: bool, _seconds: f64) {}
}

/// Metrics sink that drops everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopMetrics;
impl SchedulerMetrics for NoopMetrics {}
