//! The Prometheus registry of the scheduler: upstream's `scheduler_*` families (names, types,
//! labels and buckets of `pkg/scheduler/metrics`), the volume-binding and leader-election families
//! linked into the upstream binary, and process metrics.
//!
//! Families are registered through [`KubeRegistry`], which keeps upstream's names and help texts
//! for the exposition ([`PrometheusMetrics::expose`]).

use std::sync::Arc;
use std::time::Duration;

use ksched_framework::batch::{BatchAttempt, FlushReason};
use ksched_framework::handle::{ExtensionPoint, FrameworkMetrics};
use ksched_framework::interface::QueuedPodInfo;
use ksched_framework::status::Code;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::{Family, MetricConstructor};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Metric;

use std::sync::OnceLock;

use rustc_hash::FxHashMap;

use super::exposition::Format;
use super::process::ProcessCollector;
use super::registry::{KubeRegistry, StabilityLevel as Stability};
use super::SchedulerMetrics;
use super::{apiserver, restclient, workqueue};
use crate::cache::{Cache, CacheSize};
use crate::queue::QueueMetrics;

/// Upstream's `ExponentialBuckets(start, factor, count)`: computed by repeated multiplication, as
/// client_golang does, so the boundaries are bit-identical.
pub fn exponential_buckets(start: f64, factor: f64, count: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(count);
    let mut v = start;
    for _ in 0..count {
        out.push(v);
        v *= factor;
    }
    out
}

/// Builds histograms with exponential buckets (a [`Family`] constructor).
#[derive(Debug, Clone, Copy)]
pub struct Exp {
    start: f64,
    factor: f64,
    count: usize,
}

impl Exp {
    /// `ExponentialBuckets(start, factor, count)`.
    pub const fn new(start: f64, factor: f64, count: usize) -> Self {
        Exp { start, factor, count }
    }
    fn histogram(self) -> Histogram {
        Histogram::new(exponential_buckets(self.start, self.factor, self.count))
    }
}

impl MetricConstructor<Histogram> for Exp {
    fn new_metric(&self) -> Histogram {
        self.histogram()
    }
}

// Bucket layouts of upstream `pkg/scheduler/metrics/metrics.go`.
const ATTEMPT_BUCKETS: Exp = Exp::new(0.001, 2.0, 15);
const EVENT_HANDLING_BUCKETS: Exp = Exp::new(0.0001, 2.0, 12);
const VICTIM_BUCKETS: Exp = Exp::new(1.0, 2.0, 7);
const SLI_BUCKETS: Exp = Exp::new(0.01, 2.0, 20);
const POD_ATTEMPTS_BUCKETS: Exp = Exp::new(1.0, 2.0, 5);
const EXTENSION_POINT_BUCKETS: Exp = Exp::new(0.0001, 2.0, 12);
const PLUGIN_BUCKETS: Exp = Exp::new(0.00001, 1.5, 20);
const NODE_HINT_BUCKETS: Exp = Exp::new(0.00001, 2.0, 12);
const BINDING_CONDITIONS_BUCKETS: Exp = Exp::new(0.1, 2.0, 14);

/// A labelled histogram family.
pub type HistogramFamily<L> = Family<L, Histogram, Exp>;

// Label sets. Fields are in alphabetical order, the order client_golang prints them in.

/// `{profile, result}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultProfile {
    /// Scheduler profile name.
    pub profile: String,
    /// `scheduled`, `unschedulable` or `error`.
    pub result: String,
}
/// A single label named `event`, `queue`, `attempts`, ... (see the field).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EventLabel {
    /// Event label (`NodeAdd`, `PodPopped`, ...).
    pub event: String,
}
/// `{queue}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueLabel {
    /// `active`, `backoff`, `unschedulable` or `gated`.
    pub queue: String,
}
/// `{attempts}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AttemptsLabel {
    /// `1`..`14` or `15+`.
    pub attempts: String,
}
/// `{extension_point, profile, status}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ExtensionPointLabels {
    /// Extension point name.
    pub extension_point: String,
    /// Scheduler profile name.
    pub profile: String,
    /// Status code name.
    pub status: String,
}
/// `{extension_point, plugin, status}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PluginLabels {
    /// Extension point name.
    pub extension_point: String,
    /// Plugin name.
    pub plugin: String,
    /// Status code name.
    pub status: String,
}
/// `{event, queue}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueEventLabels {
    /// Event label.
    pub event: String,
    /// Pool the pod entered.
    pub queue: String,
}
/// `{operation}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OperationLabel {
    /// Operation (`binding`, ...).
    pub operation: String,
}
/// `{result}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    /// Result.
    pub result: String,
}
/// `{type}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TypeLabel {
    /// `assumed_pods`, `pods` or `nodes`.
    pub r#type: String,
}
/// `{plugin, profile}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PluginProfileLabels {
    /// Plugin name.
    pub plugin: String,
    /// Scheduler profile name.
    pub profile: String,
}
/// `{extension_point, plugin, profile}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PluginEvaluationLabels {
    /// Extension point name.
    pub extension_point: String,
    /// Plugin name.
    pub plugin: String,
    /// Scheduler profile name.
    pub profile: String,
}
/// `{event, hint, plugin}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueingHintLabels {
    /// Event label.
    pub event: String,
    /// `Queue`, `QueueSkip` or `Error`.
    pub hint: String,
    /// Plugin name.
    pub plugin: String,
}
/// `{profile, result}` of batching (`no_hint`, `hint_used`, `hint_not_used`) and
/// `{profile, reason}` of batch flushes share this shape with a different second label.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProfileReason {
    /// Scheduler profile name.
    pub profile: String,
    /// Flush reason.
    pub reason: String,
}
/// `{hinted, profile}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HintedProfile {
    /// `hint` or `no_hint`.
    pub hinted: String,
    /// Scheduler profile name.
    pub profile: String,
}
/// `{profile}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProfileLabel {
    /// Scheduler profile name.
    pub profile: String,
}
/// `{status}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StatusLabel {
    /// Status.
    pub status: String,
}
/// `{driver, profile, status}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DriverLabels {
    /// DRA driver name.
    pub driver: String,
    /// Scheduler profile name.
    pub profile: String,
    /// Status.
    pub status: String,
}
/// `{name}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NameLabel {
    /// Lease name.
    pub name: String,
}

/// `kubernetes_build_info` labels (component-base's `version.Info`, with this build's values).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
#[allow(missing_docs)]
pub struct BuildInfoLabels {
    pub build_date: String,
    pub compiler: String,
    pub git_commit: String,
    pub git_tree_state: String,
    pub git_version: String,
    pub go_version: String,
    pub major: String,
    pub minor: String,
    pub platform: String,
}

impl BuildInfoLabels {
    /// The labels of this binary (the values `--version=raw` prints).
    pub fn this_build() -> Self {
        use crate::options::version;
        let arch = match std::env::consts::ARCH {
            "x86_64" => "amd64",
            "aarch64" => "arm64",
            "x86" => "386",
            other => other,
        };
        BuildInfoLabels {
            build_date: "1970-01-01T00:00:00Z".into(),
            compiler: "rustc".into(),
            git_commit: String::new(),
            git_tree_state: String::new(),
            git_version: version::GIT_VERSION.into(),
            go_version: String::new(),
            major: version::MAJOR.to_string(),
            minor: version::MINOR.to_string(),
            platform: format!("{}/{arch}", std::env::consts::OS),
        }
    }
}

/// `{name, stage}` of `kubernetes_feature_enabled` (stage `ALPHA`, `BETA`, `DEPRECATED`, or
/// empty for GA).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FeatureLabels {
    /// Gate name.
    pub name: String,
    /// Maturity.
    pub stage: String,
}

/// `{binary, component, emulation, min_compat}` of `version_info`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CompatibilityVersionLabels {
    /// Binary version (`1.36.0`).
    pub binary: String,
    /// Component (`kube`).
    pub component: String,
    /// Emulated version (`1.36`).
    pub emulation: String,
    /// Minimum compatibility version (`1.35`).
    pub min_compat: String,
}

/// Registers client-go's `rest_client_*` families (component-base's registration order).
fn register_rest_client(reg: &mut KubeRegistry, f: &restclient::RestClientFamilies) {
    use Stability::Alpha;
    register(
        reg,
        "rest_client_request_duration_seconds",
        Alpha,
        "Request latency in seconds. Broken down by verb, and host.",
        &f.request_duration,
    );
    register(
        reg,
        "rest_client_request_size_bytes",
        Alpha,
        "Request size in bytes. Broken down by verb and host.",
        &f.request_size,
    );
    register(
        reg,
        "rest_client_response_size_bytes",
        Alpha,
        "Response size in bytes. Broken down by verb and host.",
        &f.response_size,
    );
    register(
        reg,
        "rest_client_rate_limiter_duration_seconds",
        Alpha,
        "Client side rate limiter latency in seconds. Broken down by verb, and host.",
        &f.rate_limiter_duration,
    );
    register(
        reg,
        "rest_client_requests_total",
        Alpha,
        "Number of HTTP requests, partitioned by status code, method, and host.",
        &f.requests,
    );
    register(
        reg,
        "rest_client_request_retries_total",
        Alpha,
        "Number of request retries, partitioned by status code, verb, and host.",
        &f.request_retries,
    );
    register(reg, "rest_client_exec_plugin_ttl_seconds", Alpha, "Gauge of the shortest TTL (time-to-live) of the client certificate(s) managed by the auth exec plugin. The value is in seconds until certificate expiry (negative if already expired). If auth exec plugins are unused or manage no TLS certificates, the value will be +INF.", &f.exec_plugin_ttl_seconds);
    register(reg, "rest_client_exec_plugin_certificate_rotation_age", Alpha, "Histogram of the number of seconds the last auth exec plugin client certificate lived before being rotated. If auth exec plugin client certificates are unused, histogram will contain no data.", &f.exec_plugin_certificate_rotation_age);
    register(reg, "rest_client_exec_plugin_call_total", Alpha, "Number of calls to an exec plugin, partitioned by the type of event encountered (no_error, plugin_execution_error, plugin_not_found_error, client_internal_error) and an optional exit code. The exit code will be set to 0 if and only if the plugin call was successful.", &f.exec_plugin_calls);
    register(
        reg,
        "rest_client_transport_cache_entries",
        Alpha,
        "Number of transport entries in the internal cache.",
        &f.transport_cache_entries,
    );
    register(reg, "rest_client_transport_create_calls_total", Alpha, "Number of calls to get a new transport, partitioned by the result of the operation hit: obtained from the cache, miss: created and added to the cache, miss-gc: recreated and added back to the cache after being garbage collected, uncacheable: created and not cached", &f.transport_create_calls);
    register(
        reg,
        "rest_client_transport_ca_reload_total",
        Alpha,
        "Number of times a CA reload is attempted, partitioned by the result and reason for the reload attempt",
        &f.transport_ca_reload,
    );
    register(
        reg,
        "rest_client_transport_cert_rotation_gc_calls_total",
        Alpha,
        "Number of times a cert rotation goroutine cancel func is called via GC cleanup of the associated transport",
        &f.transport_cert_rotation_gc_calls,
    );
    register(reg, "rest_client_transport_cache_gc_calls_total", Alpha, "Number of times a GC cleanup attempts to delete a transport cache entry, partitioned by the result: deleted, skipped", &f.transport_cache_gc_calls);
}

/// Every family the scheduler exports. The ones the current code feeds are listed in the
/// documentation of [`PrometheusMetrics`]; the rest are registered (as upstream registers them
/// with the default feature gates) so dashboards and alerts find them.
#[derive(Debug)]
#[allow(missing_docs)]
pub struct Families {
    pub schedule_attempts: Family<ResultProfile, Counter>,
    pub scheduling_attempt_duration: HistogramFamily<ResultProfile>,
    pub scheduling_algorithm_duration: Histogram,
    pub event_handling_duration: HistogramFamily<EventLabel>,
    pub preemption_victims: Histogram,
    pub preemption_attempts: Counter,
    pub pending_pods: Family<QueueLabel, Gauge>,
    pub pod_scheduling_sli_duration: HistogramFamily<AttemptsLabel>,
    pub pod_scheduling_attempts: Histogram,
    pub pod_scheduled_after_flush: Counter,
    pub framework_extension_point_duration: HistogramFamily<ExtensionPointLabels>,
    pub plugin_execution_duration: HistogramFamily<PluginLabels>,
    pub queue_incoming_pods: Family<QueueEventLabels, Counter>,
    pub goroutines: Family<OperationLabel, Gauge>,
    pub permit_wait_duration: HistogramFamily<ResultLabel>,
    pub cache_size: Family<TypeLabel, Gauge>,
    pub unschedulable_pods: Family<PluginProfileLabels, Gauge>,
    pub plugin_evaluation: Family<PluginEvaluationLabels, Counter>,
    pub batch_attempts: Family<ResultProfile, Counter>,
    pub batch_cache_flushed: Family<ProfileReason, Counter>,
    pub get_node_hint_duration: HistogramFamily<HintedProfile>,
    pub store_schedule_results_duration: HistogramFamily<ProfileLabel>,
    pub queueing_hint_execution_duration: HistogramFamily<QueueingHintLabels>,
    pub inflight_events: Family<EventLabel, Gauge>,
    pub preemption_goroutines_duration: HistogramFamily<ResultLabel>,
    pub preemption_goroutines_execution: Family<ResultLabel, Counter>,
    pub resourceclaim_creates: Family<StatusLabel, Counter>,
    pub dra_bindingconditions_allocations: Family<DriverLabels, Counter>,
    pub dra_bindingconditions_wait_duration: HistogramFamily<DriverLabels>,
    pub volume_binder_cache_requests: Family<OperationLabel, Counter>,
    pub volume_scheduling_stage_error: Family<OperationLabel, Counter>,
    pub leader_election_master_status: Family<NameLabel, Gauge>,
    pub leader_election_slowpath: Family<NameLabel, Counter>,
}

/// Registers `metric` under its full upstream name (see [`KubeRegistry::register`]).
fn register<M: Metric + Clone>(reg: &mut KubeRegistry, name: &str, stability: Stability, help: &str, metric: &M) {
    reg.register(name, stability, help, metric);
}

impl Families {
    fn new() -> Self {
        Families {
            schedule_attempts: Family::default(),
            scheduling_attempt_duration: Family::new_with_constructor(ATTEMPT_BUCKETS),
            scheduling_algorithm_duration: ATTEMPT_BUCKETS.histogram(),
            event_handling_duration: Family::new_with_constructor(EVENT_HANDLING_BUCKETS),
            preemption_victims: VICTIM_BUCKETS.histogram(),
            preemption_attempts: Counter::default(),
            pending_pods: Family::default(),
            pod_scheduling_sli_duration: Family::new_with_constructor(SLI_BUCKETS),
            pod_scheduling_attempts: POD_ATTEMPTS_BUCKETS.histogram(),
            pod_scheduled_after_flush: Counter::default(),
            framework_extension_point_duration: Family::new_with_constructor(EXTENSION_POINT_BUCKETS),
            plugin_execution_duration: Family::new_with_constructor(PLUGIN_BUCKETS),
            queue_incoming_pods: Family::default(),
            goroutines: Family::default(),
            permit_wait_duration: Family::new_with_constructor(ATTEMPT_BUCKETS),
            cache_size: Family::default(),
            unschedulable_pods: Family::default(),
            plugin_evaluation: Family::default(),
            batch_attempts: Family::default(),
            batch_cache_flushed: Family::default(),
            get_node_hint_duration: Family::new_with_constructor(NODE_HINT_BUCKETS),
            store_schedule_results_duration: Family::new_with_constructor(NODE_HINT_BUCKETS),
            queueing_hint_execution_duration: Family::new_with_constructor(PLUGIN_BUCKETS),
            inflight_events: Family::default(),
            preemption_goroutines_duration: Family::new_with_constructor(SLI_BUCKETS),
            preemption_goroutines_execution: Family::default(),
            resourceclaim_creates: Family::default(),
            dra_bindingconditions_allocations: Family::default(),
            dra_bindingconditions_wait_duration: Family::new_with_constructor(BINDING_CONDITIONS_BUCKETS),
            volume_binder_cache_requests: Family::default(),
            volume_scheduling_stage_error: Family::default(),
            leader_election_master_status: Family::default(),
            leader_election_slowpath: Family::default(),
        }
    }

    /// Registers everything in upstream's registration order (`metricsList`, then the families
    /// behind the default-on gates, then volume binding and leader election).
    fn register_all(&self, reg: &mut KubeRegistry) {
        use Stability::*;
        register(
            reg,
            "scheduler_schedule_attempts_total",
            Stable,
            "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be scheduled, while 'error' means an internal scheduler problem.",
            &self.schedule_attempts,
        );
        register(
            reg,
            "scheduler_scheduling_attempt_duration_seconds",
            Stable,
            "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            &self.scheduling_attempt_duration,
        );
        register(
            reg,
            "scheduler_scheduling_algorithm_duration_seconds",
            Alpha,
            "Scheduling algorithm latency in seconds",
            &self.scheduling_algorithm_duration,
        );
        register(
            reg,
            "scheduler_event_handling_duration_seconds",
            Alpha,
            "Event handling latency in seconds.",
            &self.event_handling_duration,
        );
        register(
            reg,
            "scheduler_preemption_victims",
            Stable,
            "Number of selected preemption victims",
            &self.preemption_victims,
        );
        register(
            reg,
            "scheduler_preemption_attempts_total",
            Stable,
            "Total preemption attempts in the cluster till now",
            &self.preemption_attempts,
        );
        register(
            reg,
            "scheduler_pending_pods",
            Stable,
            "Number of pending pods, by the queue type. 'active' means number of pods in activeQ; 'backoff' means number of pods in backoffQ; 'unschedulable' means number of pods in unschedulablePods that the scheduler attempted to schedule and failed; 'gated' is the number of unschedulable pods that the scheduler never attempted to schedule because they are gated.",
            &self.pending_pods,
        );
        register(
            reg,
            "scheduler_pod_scheduling_sli_duration_seconds",
            Beta,
            "E2e latency for a pod being scheduled, from the time the pod enters the scheduling queue and might involve multiple scheduling attempts.",
            &self.pod_scheduling_sli_duration,
        );
        register(
            reg,
            "scheduler_pod_scheduling_attempts",
            Stable,
            "Number of attempts to successfully schedule a pod.",
            &self.pod_scheduling_attempts,
        );
        register(
            reg,
            "scheduler_pod_scheduled_after_flush_total",
            Alpha,
            "Number of pods that were successfully scheduled after being flushed from unschedulablePods due to timeout. This metric helps detect potential queueing hint misconfigurations or event handling issues.",
            &self.pod_scheduled_after_flush,
        );
        register(
            reg,
            "scheduler_framework_extension_point_duration_seconds",
            Stable,
            "Latency for running all plugins of a specific extension point.",
            &self.framework_extension_point_duration,
        );
        register(
            reg,
            "scheduler_plugin_execution_duration_seconds",
            Alpha,
            "Duration for running a plugin at a specific extension point.",
            &self.plugin_execution_duration,
        );
        register(
            reg,
            "scheduler_queue_incoming_pods_total",
            Stable,
            "Number of pods added to scheduling queues by event and queue type.",
            &self.queue_incoming_pods,
        );
        register(
            reg,
            "scheduler_goroutines",
            Beta,
            "Number of running goroutines split by the work they do such as binding.",
            &self.goroutines,
        );
        register(
            reg,
            "scheduler_permit_wait_duration_seconds",
            Beta,
            "Duration of waiting on permit.",
            &self.permit_wait_duration,
        );
        register(
            reg,
            "scheduler_cache_size",
            Alpha,
            "Number of nodes, pods, and assumed (bound) pods in the scheduler cache.",
            &self.cache_size,
        );
        register(
            reg,
            "scheduler_unschedulable_pods",
            Beta,
            "The number of unschedulable pods broken down by plugin name. A pod will increment the gauge for all plugins that caused it to not schedule and so this metric have meaning only when broken down by plugin.",
            &self.unschedulable_pods,
        );
        register(
            reg,
            "scheduler_plugin_evaluation_total",
            Beta,
            "Number of attempts to schedule pods by each plugin and the extension point (available only in PreFilter, Filter, PreScore, and Score).",
            &self.plugin_evaluation,
        );
        register(
            reg,
            "scheduler_batch_attempts_total",
            Alpha,
            "Counts of results when we attempt to use batching.",
            &self.batch_attempts,
        );
        register(
            reg,
            "scheduler_batch_cache_flushed_total",
            Alpha,
            "Counts of cache flushes by reason.",
            &self.batch_cache_flushed,
        );
        register(
            reg,
            "scheduler_get_node_hint_duration_seconds",
            Alpha,
            "Latency for getting a node hint.",
            &self.get_node_hint_duration,
        );
        register(
            reg,
            "scheduler_store_schedule_results_duration_seconds",
            Alpha,
            "Latency for getting a no.",
            &self.store_schedule_results_duration,
        );
        // SchedulerQueueingHints (GA, locked on).
        register(
            reg,
            "scheduler_queueing_hint_execution_duration_seconds",
            Alpha,
            "Duration for running a queueing hint function of a plugin.",
            &self.queueing_hint_execution_duration,
        );
        register(
            reg,
            "scheduler_inflight_events",
            Alpha,
            "Number of events currently tracked in the scheduling queue.",
            &self.inflight_events,
        );
        // SchedulerAsyncPreemption (beta, on).
        register(
            reg,
            "scheduler_preemption_goroutines_duration_seconds",
            Alpha,
            "Duration in seconds for running goroutines for the preemption.",
            &self.preemption_goroutines_duration,
        );
        register(
            reg,
            "scheduler_preemption_goroutines_execution_total",
            Alpha,
            "Number of preemption goroutines executed.",
            &self.preemption_goroutines_execution,
        );
        // DRAExtendedResource (beta, on).
        register(
            reg,
            "scheduler_resourceclaim_creates_total",
            Alpha,
            "Number of ResourceClaims creation requests within scheduler",
            &self.resourceclaim_creates,
        );
        // DRADeviceBindingConditions (beta, on).
        register(
            reg,
            "scheduler_dra_bindingconditions_allocations_total",
            Alpha,
            "Number of allocations using devices with BindingConditions, counted per driver per scheduling attempt",
            &self.dra_bindingconditions_allocations,
        );
        register(
            reg,
            "scheduler_dra_bindingconditions_wait_duration_seconds",
            Alpha,
            "Time in seconds spent waiting for BindingConditions to be satisfied during PreBind.",
            &self.dra_bindingconditions_wait_duration,
        );
        // VolumeBinding plugin metrics.
        register(
            reg,
            "scheduler_volume_binder_cache_requests_total",
            Alpha,
            "Total number for request volume binding cache",
            &self.volume_binder_cache_requests,
        );
        register(
            reg,
            "scheduler_volume_scheduling_stage_error_total",
            Alpha,
            "Volume scheduling stage error count",
            &self.volume_scheduling_stage_error,
        );
        // client-go leader election.
        register(
            reg,
            "leader_election_master_status",
            Alpha,
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease. Please make sure to group by name.",
            &self.leader_election_master_status,
        );
        register(
            reg,
            "leader_election_slowpath_total",
            Alpha,
            "Total number of slow path exercised in renewing leader leases. 'name' is the string used to identify the lease. Please make sure to group by name.",
            &self.leader_election_slowpath,
        );
    }
}

/// The Prometheus implementation of [`SchedulerMetrics`], [`QueueMetrics`] and
/// [`FrameworkMetrics`], plus the registry served on `/metrics`.
///
/// Fed by the running scheduler: `schedule_attempts_total`, `scheduling_attempt_duration_seconds`,
/// `scheduling_algorithm_duration_seconds`, `pod_scheduling_sli_duration_seconds`,
/// `pod_scheduling_attempts`, `pod_scheduled_after_flush_total`, `goroutines{operation="binding"}`,
/// `pending_pods`, `queue_incoming_pods_total`, `queueing_hint_execution_duration_seconds`,
/// `inflight_events`, `unschedulable_pods`, `framework_extension_point_duration_seconds`,
/// `plugin_execution_duration_seconds`, `cache_size` (see [`Self::spawn_cache_size_refresher`]),
/// `preemption_*` and `event_handling_duration_seconds` once their hooks are called,
/// `leader_election_master_status` via [`Self::set_leader`], and the process metrics.
#[derive(Debug)]
pub struct PrometheusMetrics {
    registry: KubeRegistry,
    families: Families,
    feature_enabled: Family<FeatureLabels, Gauge>,
    compatibility_version: Family<CompatibilityVersionLabels, Gauge>,
    /// `plugin_execution_duration_seconds` children by plugin, then extension point and status:
    /// sampled cycles observe every plugin call, and a label-struct lookup (three `String`s) per
    /// call would cost more than the plugin.
    plugin_hists: parking_lot::RwLock<FxHashMap<Box<str>, Box<PluginSlots>>>,
    pod_groups: Option<PodGroupFamilies>,
}

/// The pod-group families, which upstream registers only when GenericWorkload is on.
#[derive(Debug)]
struct PodGroupFamilies {
    attempts: Family<ResultProfile, Counter>,
    attempt_duration: HistogramFamily<ResultProfile>,
    algorithm_duration: Histogram,
}

/// One histogram slot per (extension point, status code) of a plugin, created on first use.
type PluginSlots = [[OnceLock<Histogram>; CODES]; POINTS];
const CODES: usize = 8;
const POINTS: usize = 20;

impl Default for PrometheusMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl PrometheusMetrics {
    /// A registry with every family registered and the process collector attached.
    pub fn new() -> Self {
        let families = Families::new();
        let mut registry = KubeRegistry::new();
        // component-base's legacy registry: self-metrics first, then what the linked packages
        // register (client-go, apiserver), then the scheduler's own.
        registry.register_meta_metrics();
        register_rest_client(&mut registry, &restclient::families());
        workqueue::register(&mut registry);
        apiserver::register(&mut registry);
        families.register_all(&mut registry);
        let build_info = Family::<BuildInfoLabels, Gauge>::default();
        build_info.get_or_create(&BuildInfoLabels::this_build()).set(1);
        register(
            &mut registry,
            "kubernetes_build_info",
            Stability::Beta,
            "A metric with a constant '1' value labeled by major, minor, git version, git commit, git tree state, build date, Go version, and compiler from which Kubernetes was built, and platform on which it is running.",
            &build_info,
        );
        let feature_enabled = Family::<FeatureLabels, Gauge>::default();
        register(
            &mut registry,
            "kubernetes_feature_enabled",
            Stability::Beta,
            "This metric records the data about the stage and enablement of a k8s feature.",
            &feature_enabled,
        );
        let compatibility_version = Family::<CompatibilityVersionLabels, Gauge>::default();
        register(
            &mut registry,
            "version_info",
            Stability::Alpha,
            "Provides the compatibility version info of the component. The component label is the name of the component, usually kube, but is relevant for aggregated-apiservers.",
            &compatibility_version,
        );
        registry.register_raw_collector(Box::new(ProcessCollector::new()));
        let m = PrometheusMetrics {
            registry,
            families,
            feature_enabled,
            compatibility_version,
            plugin_hists: Default::default(),
            pod_groups: None,
        };
        let (major, minor) = (crate::options::version::MAJOR, crate::options::version::MINOR);
        m.set_compatibility_version((major, minor), (major, minor - 1));
        m
    }

    /// Also exports the `scheduler_podgroup_*` families (GenericWorkload on).
    pub fn with_pod_group_metrics(mut self) -> Self {
        let f = PodGroupFamilies {
            attempts: Family::default(),
            attempt_duration: Family::new_with_constructor(ATTEMPT_BUCKETS),
            algorithm_duration: ATTEMPT_BUCKETS.histogram(),
        };
        let reg = &mut self.registry;
        register(
            reg,
            "scheduler_podgroup_schedule_attempts_total",
            Stability::Alpha,
            "Number of attempts to schedule pod group, by the result. 'unschedulable' means a pod group could not be scheduled, while 'error' means an internal scheduler problem.",
            &f.attempts,
        );
        register(
            reg,
            "scheduler_podgroup_scheduling_attempt_duration_seconds",
            Stability::Alpha,
            "Pod group scheduling attempt latency in seconds (scheduling algorithm + binding)",
            &f.attempt_duration,
        );
        register(
            reg,
            "scheduler_podgroup_scheduling_algorithm_duration_seconds",
            Stability::Alpha,
            "Pod group scheduling algorithm latency in seconds",
            &f.algorithm_duration,
        );
        self.pod_groups = Some(f);
        self
    }

    /// The registry (for `/metrics`).
    pub fn registry(&self) -> &KubeRegistry {
        &self.registry
    }

    /// Every family, for callers feeding metrics that have no trait hook yet.
    pub fn families(&self) -> &Families {
        &self.families
    }

    /// The OpenMetrics text exposition of the registry.
    pub fn encode(&self) -> String {
        self.expose(Format::OpenMetrics)
    }

    /// The exposition of the registry in `format`, as upstream prints it.
    pub fn expose(&self, format: Format) -> String {
        self.registry.expose(format)
    }

    /// `version_info{binary, component="kube", emulation, min_compat}` (component-base's
    /// compatibility registry): the emulated and minimum compatibility `(major, minor)`.
    pub fn set_compatibility_version(&self, emulation: (u32, u32), min_compatibility: (u32, u32)) {
        self.compatibility_version.clear();
        let labels = CompatibilityVersionLabels {
            binary: crate::options::version::GIT_VERSION.trim_start_matches('v').into(),
            component: "kube".into(),
            emulation: format!("{}.{}", emulation.0, emulation.1),
            min_compat: format!("{}.{}", min_compatibility.0, min_compatibility.1),
        };
        self.compatibility_version.get_or_create(&labels).set(1);
    }

    /// Sets `scheduler_cache_size` from a cache snapshot.
    pub fn record_cache_size(&self, size: CacheSize) {
        for (ty, v) in [("assumed_pods", size.assumed_pods), ("pods", size.pods), ("nodes", size.nodes)] {
            self.families.cache_size.get_or_create(&TypeLabel { r#type: ty.into() }).set(v as i64);
        }
    }

    /// Refreshes `scheduler_cache_size` from `cache` every second (upstream's cache cleanup
    /// period) until the returned task is aborted.
    pub fn spawn_cache_size_refresher(self: &Arc<Self>, cache: Arc<Cache>) -> tokio::task::JoinHandle<()> {
        let this = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                this.record_cache_size(cache.size());
            }
        })
    }

    /// `leader_election_master_status{name}`: 1 while leading the lease `name`, 0 otherwise.
    pub fn set_leader(&self, name: &str, leading: bool) {
        self.families.leader_election_master_status.get_or_create(&NameLabel { name: name.into() }).set(leading as i64);
    }

    /// `kubernetes_feature_enabled{name, stage}`: one series per feature gate this build knows.
    pub fn set_feature_gates<'a>(&self, gates: impl IntoIterator<Item = (&'a str, &'a str, bool)>) {
        for (name, stage, enabled) in gates {
            let labels = FeatureLabels { name: name.into(), stage: stage.into() };
            self.feature_enabled.get_or_create(&labels).set(enabled as i64);
        }
    }

    /// `leader_election_slowpath_total{name}`: a renewal went through the slow path.
    pub fn leader_election_slowpath(&self, name: &str) {
        self.families.leader_election_slowpath.get_or_create(&NameLabel { name: name.into() }).inc();
    }

    fn attempt(&self, profile: &str, result: &str, seconds: f64) {
        let labels = ResultProfile { profile: profile.into(), result: result.into() };
        self.families.schedule_attempts.get_or_create(&labels).inc();
        self.families.scheduling_attempt_duration.get_or_create(&labels).observe(seconds);
    }
}

/// Upstream's `getAttemptsLabel`: `1`..`14`, then `15+`.
fn attempts_label(attempts: u32) -> String {
    if attempts >= 15 {
        "15+".into()
    } else {
        attempts.to_string()
    }
}

impl SchedulerMetrics for PrometheusMetrics {
    fn scheduling_algorithm_duration(&self, seconds: f64) {
        self.families.scheduling_algorithm_duration.observe(seconds);
    }

    fn binding_goroutines(&self, delta: i64) {
        self.families.goroutines.get_or_create(&OperationLabel { operation: "binding".into() }).inc_by(delta);
    }

    fn pod_scheduled(&self, profile: &str, seconds: f64, pod: &QueuedPodInfo) {
        self.attempt(profile, "scheduled", seconds);
        let f = &self.families;
        f.pod_scheduling_attempts.observe(f64::from(pod.attempts));
        if let Some(first) = pod.initial_attempt_timestamp {
            f.pod_scheduling_sli_duration
                .get_or_create(&AttemptsLabel { attempts: attempts_label(pod.attempts) })
                .observe(first.elapsed().as_secs_f64());
        }
        if pod.was_flushed_from_unschedulable {
            f.pod_scheduled_after_flush.inc();
        }
    }

    fn pod_failed(&self, profile: &str, unschedulable: bool, seconds: f64) {
        self.attempt(profile, if unschedulable { "unschedulable" } else { "error" }, seconds);
    }

    fn preemption_attempt(&self, victims: usize) {
        self.families.preemption_attempts.inc();
        self.families.preemption_victims.observe(victims as f64);
    }

    fn event_handling_duration(&self, event: &str, seconds: f64) {
        self.families.event_handling_duration.get_or_create(&EventLabel { event: event.into() }).observe(seconds);
    }

    fn pod_group_algorithm_duration(&self, seconds: f64) {
        if let Some(f) = &self.pod_groups {
            f.algorithm_duration.observe(seconds);
        }
    }

    fn pod_group_attempt(&self, profile: &str, result: &str, seconds: f64) {
        if let Some(f) = &self.pod_groups {
            let l = ResultProfile { profile: profile.into(), result: result.into() };
            f.attempts.get_or_create(&l).inc();
            f.attempt_duration.get_or_create(&l).observe(seconds);
        }
    }
}

impl QueueMetrics for PrometheusMetrics {
    fn incoming_pod(&self, queue: &str, event: &str) {
        self.families
            .queue_incoming_pods
            .get_or_create(&QueueEventLabels { event: event.into(), queue: queue.into() })
            .inc();
    }

    fn pending_pods(&self, active: usize, backoff: usize, unschedulable: usize, gated: usize) {
        for (q, v) in [("active", active), ("backoff", backoff), ("unschedulable", unschedulable), ("gated", gated)] {
            self.families.pending_pods.get_or_create(&QueueLabel { queue: q.into() }).set(v as i64);
        }
    }

    fn queueing_hint(&self, plugin: &str, event: &str, result: &str, seconds: f64) {
        let labels = QueueingHintLabels { event: event.into(), hint: result.into(), plugin: plugin.into() };
        self.families.queueing_hint_execution_duration.get_or_create(&labels).observe(seconds);
    }

    fn in_flight_events(&self, event: &str, delta: i64) {
        self.families.inflight_events.get_or_create(&EventLabel { event: event.into() }).inc_by(delta);
    }

    fn unschedulable_reason(&self, plugin: &str, profile: &str, delta: i64) {
        let labels = PluginProfileLabels { plugin: plugin.into(), profile: profile.into() };
        self.families.unschedulable_pods.get_or_create(&labels).inc_by(delta);
    }
}

impl FrameworkMetrics for PrometheusMetrics {
    fn extension_point_duration(&self, profile: &str, point: ExtensionPoint, status: Code, seconds: f64) {
        let labels = ExtensionPointLabels {
            extension_point: point.as_str().into(),
            profile: profile.into(),
            status: status.as_str().into(),
        };
        self.families.framework_extension_point_duration.get_or_create(&labels).observe(seconds);
    }

    fn plugin_duration(&self, plugin: &str, point: ExtensionPoint, status: Code, seconds: f64) {
        let (p, c) = (point as usize, status as usize);
        let create = || {
            let labels = PluginLabels {
                extension_point: point.as_str().into(),
                plugin: plugin.into(),
                status: status.as_str().into(),
            };
            self.families.plugin_execution_duration.get_or_create(&labels).clone()
        };
        if p >= POINTS || c >= CODES {
            return create().observe(seconds);
        }
        if let Some(slots) = self.plugin_hists.read().get(plugin) {
            return slots[p][c].get_or_init(create).observe(seconds);
        }
        let mut map = self.plugin_hists.write();
        let slots = map.entry(plugin.into()).or_insert_with(|| Box::new(std::array::from_fn(|_| Default::default())));
        slots[p][c].get_or_init(create).observe(seconds);
    }

    fn plugin_evaluations(&self, profile: &str, plugin: &str, point: ExtensionPoint, count: u64) {
        let labels = PluginEvaluationLabels {
            extension_point: point.as_str().into(),
            plugin: plugin.into(),
            profile: profile.into(),
        };
        self.families.plugin_evaluation.get_or_create(&labels).inc_by(count);
    }

    fn batch_attempt(&self, profile: &str, result: BatchAttempt) {
        let labels = ResultProfile { profile: profile.into(), result: result.as_str().into() };
        self.families.batch_attempts.get_or_create(&labels).inc();
    }

    fn batch_cache_flushed(&self, profile: &str, reason: FlushReason) {
        let labels = ProfileReason { profile: profile.into(), reason: reason.as_str().into() };
        self.families.batch_cache_flushed.get_or_create(&labels).inc();
    }

    fn get_node_hint_duration(&self, profile: &str, hinted: bool, seconds: f64) {
        let labels = HintedProfile { hinted: if hinted { "hint" } else { "no_hint" }.into(), profile: profile.into() };
        self.families.get_node_hint_duration.get_or_create(&labels).observe(seconds);
    }

    fn store_schedule_results_duration(&self, profile: &str, seconds: f64) {
        let labels = ProfileLabel { profile: profile.into() };
        self.families.store_schedule_results_duration.get_or_create(&labels).observe(seconds);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket_line(text: &str, sample: &str, le: &str) -> bool {
        text.lines().any(|l| l.starts_with(sample) && l.contains(&format!("le=\"{le}\"")))
    }

    #[test]
    fn buckets_match_client_golang() {
        assert_eq!(exponential_buckets(1.0, 2.0, 5), vec![1.0, 2.0, 4.0, 8.0, 16.0]);
        let b = exponential_buckets(0.001, 2.0, 15);
        assert_eq!(b.len(), 15);
        assert_eq!(b[0], 0.001);
        assert!((b[14] - 16.384).abs() < 1e-9);
        let p = exponential_buckets(0.00001, 1.5, 20);
        assert_eq!(p.len(), 20);
        // Repeated multiplication, not powf.
        let mut v = 0.00001;
        for x in &p {
            assert_eq!(*x, v);
            v *= 1.5;
        }
    }

    #[test]
    fn families_have_upstream_names_types_and_labels() {
        let m = PrometheusMetrics::new();
        let qpi = QueuedPodInfo {
            attempts: 3,
            initial_attempt_timestamp: Some(std::time::Instant::now()),
            ..QueuedPodInfo::new(
                Arc::new(ksched_framework::PodInfo::new(Arc::new(ksched_framework::pod::Pod::default()))),
                std::time::Instant::now(),
            )
        };
        m.pod_scheduled("default-scheduler", 0.002, &qpi);
        m.pod_failed("default-scheduler", true, 0.5);
        m.scheduling_algorithm_duration(0.001);
        m.binding_goroutines(1);
        m.pending_pods(1, 2, 3, 4);
        m.incoming_pod("active", "PodAdd");
        m.queueing_hint("NodeAffinity", "NodeAdd", "Queue", 0.00002);
        m.in_flight_events("PodPopped", 1);
        m.unschedulable_reason("NodeResourcesFit", "default-scheduler", 1);
        m.extension_point_duration("default-scheduler", ExtensionPoint::Filter, Code::Success, 0.0002);
        m.plugin_duration("NodeAffinity", ExtensionPoint::Filter, Code::Unschedulable, 0.00001);
        m.record_cache_size(CacheSize { assumed_pods: 1, pods: 2, nodes: 3 });
        m.set_leader("kube-scheduler", true);
        m.batch_attempt("default-scheduler", BatchAttempt::HintUsed);
        m.batch_cache_flushed("default-scheduler", FlushReason::NodeNotFull);
        m.get_node_hint_duration("default-scheduler", false, 0.00002);
        m.store_schedule_results_duration("default-scheduler", 0.00003);
        m.extension_point_duration("default-scheduler", ExtensionPoint::Sign, Code::Success, 0.00001);
        let text = m.encode();

        for (family, ty) in [
            ("scheduler_schedule_attempts", "counter"),
            ("scheduler_scheduling_attempt_duration_seconds", "histogram"),
            ("scheduler_scheduling_algorithm_duration_seconds", "histogram"),
            ("scheduler_pending_pods", "gauge"),
            ("scheduler_pod_scheduling_sli_duration_seconds", "histogram"),
            ("scheduler_pod_scheduling_attempts", "histogram"),
            ("scheduler_framework_extension_point_duration_seconds", "histogram"),
            ("scheduler_plugin_execution_duration_seconds", "histogram"),
            ("scheduler_queue_incoming_pods", "counter"),
            ("scheduler_goroutines", "gauge"),
            ("scheduler_cache_size", "gauge"),
            ("scheduler_unschedulable_pods", "gauge"),
            ("scheduler_queueing_hint_execution_duration_seconds", "histogram"),
            ("scheduler_inflight_events", "gauge"),
            ("scheduler_preemption_attempts", "counter"),
            ("scheduler_preemption_victims", "histogram"),
            ("leader_election_master_status", "gauge"),
            ("process_cpu_seconds", "counter"),
            ("process_resident_memory_bytes", "gauge"),
            ("process_start_time_seconds", "gauge"),
            ("process_open_fds", "gauge"),
        ] {
            assert!(text.contains(&format!("# TYPE {family} {ty}\n")), "{family} {ty} missing in\n{text}");
        }
        assert!(text.contains("# HELP scheduler_schedule_attempts [STABLE] Number of attempts to schedule pods"));
        assert!(text.contains(r#"scheduler_schedule_attempts_total{profile="default-scheduler",result="scheduled"} 1"#));
        assert!(
            text.contains(r#"scheduler_schedule_attempts_total{profile="default-scheduler",result="unschedulable"} 1"#)
        );
        assert!(text.contains(r#"scheduler_pending_pods{queue="gated"} 4"#));
        assert!(text.contains(r#"scheduler_goroutines{operation="binding"} 1"#));
        assert!(text.contains(r#"scheduler_queue_incoming_pods_total{event="PodAdd",queue="active"} 1"#));
        assert!(text.contains(r#"scheduler_inflight_events{event="PodPopped"} 1"#));
        assert!(
            text.contains(r#"scheduler_unschedulable_pods{plugin="NodeResourcesFit",profile="default-scheduler"} 1"#)
        );
        assert!(text.contains(r#"scheduler_batch_attempts_total{profile="default-scheduler",result="hint_used"} 1"#));
        assert!(text
            .contains(r#"scheduler_batch_cache_flushed_total{profile="default-scheduler",reason="node_not_full"} 1"#));
        assert!(text.contains(
            r#"scheduler_get_node_hint_duration_seconds_count{hinted="no_hint",profile="default-scheduler"} 1"#
        ));
        assert!(
            text.contains(r#"scheduler_store_schedule_results_duration_seconds_count{profile="default-scheduler"} 1"#)
        );
        assert!(
            text.contains("# HELP scheduler_store_schedule_results [ALPHA] Latency for getting a no.\n")
                || text.contains(
                    "# HELP scheduler_store_schedule_results_duration_seconds [ALPHA] Latency for getting a no.\n"
                )
        );
        // Upstream's ExponentialBuckets(0.00001, 2, 12), compared as numbers (the formats
        // spell 1e-05 differently).
        let les: Vec<f64> = text
            .lines()
            .filter(|l| l.starts_with("scheduler_get_node_hint_duration_seconds_bucket"))
            .filter_map(|l| l.split("le=\"").nth(1)?.split('"').next()?.parse().ok())
            .collect();
        let want = exponential_buckets(0.00001, 2.0, 12);
        assert_eq!(les.len(), want.len() + 1, "{les:?}");
        for (got, want) in les.iter().zip(&want) {
            assert!((got - want).abs() <= want * 1e-9, "{les:?}");
        }
        assert!(text.contains(
            r#"scheduler_framework_extension_point_duration_seconds_count{extension_point="Sign",profile="default-scheduler",status="Success"} 1"#
        ));
        assert!(text.contains(r#"scheduler_cache_size{type="assumed_pods"} 1"#));
        assert!(text.contains(r#"scheduler_cache_size{type="nodes"} 3"#));
        assert!(text.contains(r#"leader_election_master_status{name="kube-scheduler"} 1"#));
        assert!(text.contains(r#"scheduler_pod_scheduling_sli_duration_seconds_count{attempts="3"} 1"#));
        assert!(text.contains(
            r#"scheduler_framework_extension_point_duration_seconds_count{extension_point="Filter",profile="default-scheduler",status="Success"} 1"#
        ));
        assert!(text.contains(
            r#"scheduler_plugin_execution_duration_seconds_count{extension_point="Filter",plugin="NodeAffinity",status="Unschedulable"} 1"#
        ));
        assert!(text.contains(
            r#"scheduler_queueing_hint_execution_duration_seconds_count{event="NodeAdd",hint="Queue",plugin="NodeAffinity"} 1"#
        ));
        // Bucket boundaries.
        assert!(bucket_line(&text, "scheduler_scheduling_algorithm_duration_seconds_bucket", "0.001"));
        assert!(bucket_line(&text, "scheduler_scheduling_algorithm_duration_seconds_bucket", "16.384"));
        assert!(bucket_line(&text, "scheduler_pod_scheduling_attempts_bucket", "16.0"));
        assert!(!bucket_line(&text, "scheduler_pod_scheduling_attempts_bucket", "32.0"));
        assert!(bucket_line(&text, "scheduler_pod_scheduling_sli_duration_seconds_bucket", "0.01"));
        assert!(bucket_line(&text, "scheduler_pod_scheduling_sli_duration_seconds_bucket", "5242.88"));
        assert!(bucket_line(&text, "scheduler_framework_extension_point_duration_seconds_bucket", "0.2048"));
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn attempts_label_caps_at_fifteen() {
        assert_eq!(attempts_label(1), "1");
        assert_eq!(attempts_label(14), "14");
        assert_eq!(attempts_label(15), "15+");
        assert_eq!(attempts_label(40), "15+");
    }
}
