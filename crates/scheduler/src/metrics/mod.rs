//! Where the scheduling loop reports what it did. [`PrometheusMetrics`] exports the upstream
//! `scheduler_*` families (upstream `pkg/scheduler/metrics`); tests and benchmarks use [`NoopMetrics`] or their own recorders.

pub mod apiserver;
pub mod exposition;
mod process;
pub(crate) use process::status_kb;
mod prometheus;
pub mod registry;
pub mod resources;
pub mod restclient;
pub mod workqueue;

use ksched_framework::interface::QueuedPodInfo;

pub use self::exposition::{Format, OPENMETRICS_CONTENT_TYPE, TEXT_CONTENT_TYPE};
pub use self::process::ProcessCollector;
pub use self::prometheus::{exponential_buckets, PrometheusMetrics};
pub use self::registry::{KubeRegistry, StabilityLevel};

/// The maturity label of `kubernetes_feature_enabled` for the gates this build knows (v1.36's
/// `pkg/features`): `ALPHA`, `BETA`, `DEPRECATED`, or empty for GA.
pub fn feature_stage(gate: &str) -> &'static str {
    match gate {
        "DynamicResourceAllocation" => "",
        "DRADeviceBindingConditions"
        | "DRAResourceClaimDeviceStatus"
        | "DRASchedulerFilterTimeout"
        | "LoggingBetaOptions"
        | "NodeDeclaredFeatures"
        | "OpportunisticBatching"
        | "RemoteRequestHeaderUID" => "BETA",
        _ => "ALPHA",
    }
}

/// Scheduling-loop observations (the `scheduler_*` metrics of upstream `pkg/scheduler/metrics` hang off these calls).
pub trait SchedulerMetrics: Send + Sync {
    /// Time spent in the scheduling algorithm of one cycle.
    fn scheduling_algorithm_duration(&self, _seconds: f64) {}
    /// A binding goroutine started (+1) or finished (-1).
    fn binding_goroutines(&self, _delta: i64) {}
    /// A pod was bound; `seconds` since its cycle started.
    fn pod_scheduled(&self, _profile: &str, _seconds: f64, _pod: &QueuedPodInfo) {}
    /// A scheduling attempt failed (`unschedulable` or error).
    fn pod_failed(&self, _profile: &str, _unschedulable: bool, _seconds: f64) {}
    /// A preemption attempt ran and selected `victims` pods
    /// (`scheduler_preemption_attempts_total`, `scheduler_preemption_victims`).
    fn preemption_attempt(&self, _victims: usize) {}
    /// An informer event was handled (`scheduler_event_handling_duration_seconds`).
    fn event_handling_duration(&self, _event: &str, _seconds: f64) {}
    /// The algorithm of a pod-group cycle ran (`scheduler_podgroup_scheduling_algorithm_duration_seconds`).
    fn pod_group_algorithm_duration(&self, _seconds: f64) {}
    /// A pod-group cycle ended with `result` (`scheduler_podgroup_schedule_attempts_total`,
    /// `scheduler_podgroup_scheduling_attempt_duration_seconds`).
    fn pod_group_attempt(&self, _profile: &str, _result: &str, _seconds: f64) {}
}

/// Metrics sink that drops everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopMetrics;
impl SchedulerMetrics for NoopMetrics {}
