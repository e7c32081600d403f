//! client-go's `workqueue_*` families (component-base `metrics/prometheus/workqueue`), one series
//! per named queue. The queues are those of the secure port's certificate controllers
//! (`crate::server`), named as upstream names theirs.

use std::sync::atomic::AtomicU64;
use std::sync::LazyLock;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;

use super::prometheus::{Exp, HistogramFamily};
use super::registry::{KubeRegistry, StabilityLevel};

/// `ExponentialBuckets(10e-9, 10, 10)`: 10 ns .. 10 s.
const DURATION_BUCKETS: Exp = Exp::new(10e-9, 10.0, 10);

/// `{name}`: the queue's name.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NameLabel {
    /// Queue name.
    pub name: String,
}

/// A settable float gauge.
pub type FloatGauge = Gauge<f64, AtomicU64>;

/// The families.
#[derive(Debug)]
#[allow(missing_docs)]
pub struct WorkqueueFamilies {
    pub depth: Family<NameLabel, Gauge>,
    pub adds: Family<NameLabel, Counter>,
    pub queue_duration: HistogramFamily<NameLabel>,
    pub work_duration: HistogramFamily<NameLabel>,
    pub unfinished_work: Family<NameLabel, FloatGauge>,
    pub longest_running_processor: Family<NameLabel, FloatGauge>,
    pub retries: Family<NameLabel, Counter>,
}

static FAMILIES: LazyLock<WorkqueueFamilies> = LazyLock::new(|| WorkqueueFamilies {
    depth: Family::default(),
    adds: Family::default(),
    queue_duration: Family::new_with_constructor(DURATION_BUCKETS),
    work_duration: Family::new_with_constructor(DURATION_BUCKETS),
    unfinished_work: Family::default(),
    longest_running_processor: Family::default(),
    retries: Family::default(),
});

/// The series of one queue. Creating it creates every series at zero, as client-go's metrics
/// provider does when a named queue is built.
#[derive(Debug, Clone)]
#[allow(missing_docs)]
pub struct WorkqueueMetrics {
    pub depth: Gauge,
    pub adds: Counter,
    pub queue_duration: Histogram,
    pub work_duration: Histogram,
    pub unfinished_work_seconds: FloatGauge,
    pub longest_running_processor_seconds: FloatGauge,
    pub retries: Counter,
}

impl WorkqueueMetrics {
    /// The series of the queue `name`.
    pub fn new(name: &str) -> Self {
        let f = &*FAMILIES;
        let l = NameLabel { name: name.into() };
        WorkqueueMetrics {
            depth: f.depth.get_or_create(&l).clone(),
            adds: f.adds.get_or_create(&l).clone(),
            queue_duration: f.queue_duration.get_or_create(&l).clone(),
            work_duration: f.work_duration.get_or_create(&l).clone(),
            unfinished_work_seconds: f.unfinished_work.get_or_create(&l).clone(),
            longest_running_processor_seconds: f.longest_running_processor.get_or_create(&l).clone(),
            retries: f.retries.get_or_create(&l).clone(),
        }
    }
}

/// Registers the families in `reg` (upstream's order).
pub(crate) fn register(reg: &mut KubeRegistry) {
    use StabilityLevel::Beta;
    let f = &*FAMILIES;
    reg.register("workqueue_depth", Beta, "Current depth of workqueue", &f.depth);
    reg.register("workqueue_adds_total", Beta, "Total number of adds handled by workqueue", &f.adds);
    reg.register(
        "workqueue_queue_duration_seconds",
        Beta,
        "How long in seconds an item stays in workqueue before being requested.",
        &f.queue_duration,
    );
    reg.register(
        "workqueue_work_duration_seconds",
        Beta,
        "How long in seconds processing an item from workqueue takes.",
        &f.work_duration,
    );
    reg.register(
        "workqueue_unfinished_work_seconds",
        Beta,
        "How many seconds of work has done that is in progress and hasn't been observed by work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases.",
        &f.unfinished_work,
    );
    reg.register(
        "workqueue_longest_running_processor_seconds",
        Beta,
        "How many seconds has the longest running processor for workqueue been running.",
        &f.longest_running_processor,
    );
    reg.register("workqueue_retries_total", Beta, "Total number of retries handled by workqueue", &f.retries);
}
