//! The Scheduler: the serial scheduling cycle (`schedule_one`), the concurrent binding cycle and
//! the failure handler (upstream `schedule_one.go`: `ScheduleOne`, `handleSchedulingFailure`).
//!
//! The scheduling cycle runs on one dedicated OS thread and never awaits; binding cycles are
//! spawned on the tokio runtime because they do API calls (against an in-memory API, a binding
//! cycle runs on the scheduling thread until it would wait; see `answers_in_place`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use ksched_framework::client::{ApiClient, ApiError};
use ksched_framework::interface::{NodeToStatus, NominatingInfo, NominatingMode, QueuedPodInfo};
use ksched_framework::pod::Pod;
use ksched_framework::pod_info::is_terminating;
use ksched_framework::{
    ActionType, ClusterEvent, Code, CycleState, EventObject, EventResource, Framework, PodInfo, Snapshot,
};
use parking_lot::Mutex;

use crate::cache::Cache;
use crate::extender::HttpExtender;
use crate::fit_error::{truncate_event_note, Diagnosis, FitError, NO_NODES_AVAILABLE};
use crate::klog::KObj;
use crate::metrics::SchedulerMetrics;
use crate::pod_writes::{PodWrites, Superseded};
use crate::queue::SchedulingQueue;
use crate::schedule_one::{BatchCycle, NominatedPods, ScheduleError, ScheduleResult, SchedulingAlgorithm};

mod podgroup;
pub use podgroup::{POD_GROUP_UNSCHEDULABLE, WAITING_FOR_PREEMPTION};

/// A profile: its framework and its percentageOfNodesToScore override.
#[derive(Clone)]
pub struct Profile {
    /// The framework.
    pub framework: Arc<Framework>,
    /// percentageOfNodesToScore for this profile, if set.
    pub percentage_of_nodes_to_score: Option<i32>,
}

/// Looks up the live version of a pod (the informer's view).
pub trait PodLister: Send + Sync {
    /// The pod `namespace/name`, if it exists.
    fn get(&self, namespace: &str, name: &str) -> Option<Arc<Pod>>;
}

/// Why a pod failed a cycle.
#[derive(Debug, Clone)]
pub struct Failure {
    /// Unschedulable/UnschedulableAndUnresolvable/Pending mean "unschedulable"; others "error".
    pub code: Code,
    /// The user-visible message.
    pub message: String,
    /// The diagnosis of a FitError.
    pub diagnosis: Option<Diagnosis>,
    /// How to change the nominated node.
    pub nominating: Option<NominatingInfo>,
    /// The binding was refused because the pod is already bound: no status is written.
    pub already_bound: bool,
}

fn clear_nominated() -> Option<NominatingInfo> {
    Some(NominatingInfo { nominated_node_name: String::new(), mode: NominatingMode::Override })
}

impl Failure {
    fn error(message: impl Into<String>) -> Self {
        Failure {
            code: Code::Error,
            message: message.into(),
            diagnosis: None,
            nominating: clear_nominated(),
            already_bound: false,
        }
    }

    /// A rejection of the chosen node at Reserve/Permit/binding, reported as a FitError over 1 node.
    fn rejected_on_node(node: &str, status: ksched_framework::Status) -> Self {
        let mut d = Diagnosis::default();
        d.add_plugin_status(&status);
        let code = status.code();
        d.node_to_status.statuses.insert(node.to_string(), status);
        let fe = FitError { num_all_nodes: 1, diagnosis: d };
        Failure {
            code,
            message: fe.message(),
            diagnosis: Some(fe.diagnosis),
            nominating: clear_nominated(),
            already_bound: false,
        }
    }

    fn is_unschedulable(&self) -> bool {
        matches!(self.code, Code::Unschedulable | Code::UnschedulableAndUnresolvable | Code::Pending)
    }
}

/// Everything the scheduling loop needs. Construct with [`Scheduler::new`], feed the cache and
/// queue from event handlers, then call [`Scheduler::run`].
pub struct Scheduler {
    /// The cache.
    pub cache: Arc<Cache>,
    /// The queue.
    pub queue: Arc<SchedulingQueue>,
    /// Profiles by scheduler name.
    pub profiles: HashMap<String, Profile>,
    /// Live pods, for the failure handler.
    pub pod_lister: Arc<dyn PodLister>,
    /// Metrics sink.
    pub metrics: Arc<dyn SchedulerMetrics>,
    algorithm: Mutex<SchedulingAlgorithm>,
    snapshot: Mutex<Snapshot>,
    runtime: tokio::runtime::Handle,
    stopped: AtomicBool,
    in_flight_bindings: Arc<tokio::sync::Semaphore>,
    /// Binding cycles past Permit not yet finished (the loop waits while there are too many).
    bindings_ahead: Arc<BindingsAhead>,
    /// Binding cycles not yet handed to the runtime (see [`Scheduler::dispatch_bindings`]).
    pending_bindings: Mutex<PendingBindings>,
    extenders: Vec<Arc<HttpExtender>>,
    /// Orders each pod's status writes before its binding (see [`PodWrites`]).
    pod_writes: Arc<PodWrites>,
}

/// Upper bound of concurrent binding cycles (each holds one API call at a time).
///
/// Measured side by side on kube-apiserver (1000 nodes, 5000 pending pods), 1024 bound no
/// faster than 128: the API server sets the rate, and every call in flight costs memory (over
/// HTTP/1.1 also a connection each; over HTTP/2, which `options::transport` negotiates with
/// kube-apiserver, they share one). Fewer than 128 cost rate: 64 took 7% longer and 32 15%
/// (docs/performance.md).
pub const MAX_CONCURRENT_BINDINGS: usize = 128;
/// Binding cycles past Permit that the scheduling loop lets wait for the API server before it
/// takes the next pod: twice the calls in flight, so that every finished call finds the next
/// binding ready.
pub const MAX_BINDINGS_AHEAD: usize = 2 * MAX_CONCURRENT_BINDINGS;
/// Percentage of scheduling cycles that time each plugin call (upstream's `pluginMetricsSamplePercent`).
const PLUGIN_METRICS_SAMPLE_PERCENT: u32 = 10;
/// Binding cycles gathered before they are handed to the runtime while the queue stays busy.
const BINDING_BATCH: usize = 16;
/// How often an idle scheduling loop brings its snapshot up to date.
const IDLE_SNAPSHOT_REFRESH: Duration = Duration::from_secs(1);
/// Longest a gathered binding cycle waits for its batch to fill.
const BINDING_BATCH_WAIT: Duration = Duration::from_micros(500);

/// Binding cycles waiting to be handed to the runtime.
struct PendingBindings {
    jobs: Vec<BoxFuture<'static, ()>>,
    /// When the first of `jobs` was queued.
    oldest: Instant,
}

/// Binding cycles not yet finished: those past Permit, and those waiting at Permit.
///
/// Scheduling a pod takes tens of microseconds; binding it on a real API server takes
/// milliseconds, and only [`MAX_CONCURRENT_BINDINGS`] bindings run at once. A loop that kept
/// scheduling while bindings waited would hold, for every pod of a burst, an assumed copy of
/// its info, its cycle state and a suspended binding task (about 5 KB) until the API server
/// caught up: 25 MiB for 5000 pending pods. The loop waits instead while [`MAX_BINDINGS_AHEAD`]
/// cycles past Permit are outstanding; the pods stay in the queue meanwhile, as they would
/// with a slower scheduler. The API calls in flight stay at their bound, so binding goes as
/// fast, and each pod is scheduled against the same cache (assumed pods included) in the
/// same queue order, so placements do not change.
///
/// While any pod waits at Permit the loop never waits: a gang's members wait there for the
/// rest of the gang, which only the loop can schedule.
struct BindingsAhead {
    /// Cycles past Permit above which the loop waits.
    limit: usize,
    /// Cycles past Permit, and cycles waiting at Permit.
    counts: Mutex<(usize, usize)>,
    drained: parking_lot::Condvar,
}

impl BindingsAhead {
    fn new(limit: usize) -> Self {
        BindingsAhead { limit, counts: Mutex::new((0, 0)), drained: parking_lot::Condvar::new() }
    }

    /// Whether the loop should wait before taking the next pod.
    fn full(&self, counts: &(usize, usize)) -> bool {
        counts.0 >= self.limit && counts.1 == 0
    }
}

/// Counts one binding cycle in [`BindingsAhead`] while it lives.
struct BindingAhead {
    ahead: Arc<BindingsAhead>,
    waits_at_permit: bool,
}

impl BindingAhead {
    fn new(ahead: &Arc<BindingsAhead>, waits_at_permit: bool) -> Self {
        let mut c = ahead.counts.lock();
        if waits_at_permit {
            c.1 += 1;
        } else {
            c.0 += 1;
        }
        BindingAhead { ahead: ahead.clone(), waits_at_permit }
    }
}

impl Drop for BindingAhead {
    fn drop(&mut self) {
        let mut c = self.ahead.counts.lock();
        if self.waits_at_permit {
            c.1 -= 1;
        } else {
            c.0 -= 1;
        }
        if !self.ahead.full(&c) {
            self.ahead.drained.notify_one();
        }
    }
}

impl Default for PendingBindings {
    fn default() -> Self {
        PendingBindings { jobs: Vec::new(), oldest: Instant::now() }
    }
}

impl Scheduler {
    /// Assembles a scheduler.
    pub fn new(
        cache: Arc<Cache>,
        queue: Arc<SchedulingQueue>,
        profiles: HashMap<String, Profile>,
        pod_lister: Arc<dyn PodLister>,
        metrics: Arc<dyn SchedulerMetrics>,
        percentage_of_nodes_to_score: i32,
        runtime: tokio::runtime::Handle,
    ) -> Arc<Self> {
        Self::with_extenders(
            cache,
            queue,
            profiles,
            pod_lister,
            metrics,
            percentage_of_nodes_to_score,
            runtime,
            Vec::new(),
        )
    }

    /// Assembles a scheduler that consults HTTP extenders.
    #[allow(clippy::too_many_arguments)]
    pub fn with_extenders(
        cache: Arc<Cache>,
        queue: Arc<SchedulingQueue>,
        profiles: HashMap<String, Profile>,
        pod_lister: Arc<dyn PodLister>,
        metrics: Arc<dyn SchedulerMetrics>,
        percentage_of_nodes_to_score: i32,
        runtime: tokio::runtime::Handle,
        extenders: Vec<Arc<HttpExtender>>,
    ) -> Arc<Self> {
        let sched = Arc::new(Scheduler {
            cache,
            queue,
            profiles,
            pod_lister,
            metrics,
            algorithm: Mutex::new(SchedulingAlgorithm {
                next_start_node_index: 0,
                percentage_of_nodes_to_score,
                extenders: extenders.clone(),
                runtime: Some(runtime.clone()),
            }),
            extenders,
            snapshot: Mutex::new(Snapshot::default()),
            runtime,
            stopped: AtomicBool::new(false),
            in_flight_bindings: Arc::new(tokio::sync::Semaphore::new(MAX_CONCURRENT_BINDINGS)),
            bindings_ahead: Arc::new(BindingsAhead::new(MAX_BINDINGS_AHEAD)),
            pending_bindings: Mutex::new(PendingBindings::default()),
            pod_writes: Arc::new(PodWrites::default()),
        });
        if let Some(groups) = sched.pod_groups() {
            sched.cache.track_pod_groups(groups);
        }
        sched
    }

    /// True when `pod` belongs to one of our profiles.
    pub fn responsible_for(&self, pod: &Pod) -> bool {
        let name = pod.spec.as_ref().and_then(|s| s.scheduler_name.as_deref()).unwrap_or("default-scheduler");
        self.profiles.contains_key(name)
    }

    /// Runs the scheduling loop on a dedicated thread until [`Scheduler::stop`].
    pub fn run(self: &Arc<Self>) -> std::thread::JoinHandle<()> {
        let s = self.clone();
        std::thread::Builder::new()
            .name("scheduling-loop".into())
            .spawn(move || {
                let run = || {
                    while !s.stopped.load(Ordering::Relaxed) {
                        s.wait_for_bindings_ahead();
                        let qpi = match s.queue.pop_timeout(Duration::ZERO) {
                            Some(qpi) => qpi,
                            None => {
                                // Nothing else to schedule right now: start the binding cycles
                                // gathered so far before blocking.
                                s.dispatch_bindings();
                                match s.wait_for_pod() {
                                    Some(qpi) => qpi,
                                    None => break,
                                }
                            }
                        };
                        s.schedule_one(qpi);
                    }
                    s.dispatch_bindings();
                };
                // Run the loop on a worker of the filter/score pool: per-node work it fans out
                // then runs partly on this thread instead of waking every worker for it.
                match s.profiles.values().next().map(|p| p.framework.handle().parallelizer.clone()) {
                    Some(par) => par.install(run),
                    None => run(),
                }
            })
            .expect("spawning the scheduling thread")
    }

    /// Blocks until a pod is ready to schedule (`None` once stopped). While it waits, the
    /// snapshot follows the cache: a snapshot left as of the last cycle holds the previous
    /// version of every node and pod changed since (after a burst of status updates, a second
    /// copy of the cluster).
    fn wait_for_pod(&self) -> Option<QueuedPodInfo> {
        loop {
            self.refresh_snapshot();
            if let Some(qpi) = self.queue.pop_timeout(IDLE_SNAPSHOT_REFRESH) {
                return Some(qpi);
            }
            if self.stopped.load(Ordering::Relaxed) || self.queue.is_closed() {
                return None;
            }
        }
    }

    /// Blocks while too many binding cycles are outstanding (see [`BindingsAhead`]).
    fn wait_for_bindings_ahead(&self) {
        let ahead = &self.bindings_ahead;
        if !ahead.full(&ahead.counts.lock()) {
            return;
        }
        // The cycles gathered but not yet handed over must run for the count to fall.
        self.dispatch_bindings();
        let mut c = ahead.counts.lock();
        while ahead.full(&c) && !self.stopped.load(Ordering::Relaxed) {
            ahead.drained.wait_for(&mut c, Duration::from_millis(100));
        }
    }

    /// Binding cycles not finished (past Permit, waiting at Permit) and binding cycles holding
    /// one of the concurrent-binding slots, for the memory report.
    pub fn binding_counts(&self) -> (usize, usize, usize) {
        let c = *self.bindings_ahead.counts.lock();
        (c.0, c.1, MAX_CONCURRENT_BINDINGS - self.in_flight_bindings.available_permits())
    }

    /// Brings the scheduling snapshot up to date with the cache (copies only what changed).
    fn refresh_snapshot(&self) {
        let mut snap = self.snapshot.lock();
        // An inconsistency is rebuilt away here; the next cycle reports none.
        let _ = self.cache.update_snapshot(&mut snap);
    }

    /// Stops taking new pods and closes the queue.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Relaxed);
        self.queue.close();
    }

    /// Hands the gathered binding cycles to the runtime as one task. Spawning each from the
    /// scheduling thread woke a parked runtime worker per pod (a futex round trip that was 13%
    /// of the scheduling thread at 5000 nodes); batching keeps the loop on scheduling.
    fn dispatch_bindings(&self) {
        let jobs = std::mem::take(&mut self.pending_bindings.lock().jobs);
        if jobs.is_empty() {
            return;
        }
        self.runtime.spawn(async move {
            for job in jobs {
                tokio::spawn(job);
            }
        });
    }

    /// Waits (up to `timeout`) for in-flight binding cycles to finish.
    pub async fn wait_for_bindings(&self, timeout: Duration) -> bool {
        self.dispatch_bindings();
        let all = MAX_CONCURRENT_BINDINGS as u32;
        tokio::time::timeout(timeout, self.in_flight_bindings.acquire_many(all)).await.is_ok()
    }

    pub(crate) fn nominated_pods(&self, pod: &PodInfo, snapshot: &Snapshot) -> NominatedPods {
        let mut out = NominatedPods::new();
        let prio = pod.priority();
        for node in self.queue.nominated_nodes() {
            if snapshot.index.contains_key(&node) {
                let pods: Vec<Arc<PodInfo>> = self
                    .queue
                    .nominated_pods_for_node(&node)
                    .into_iter()
                    .filter(|p| p.uid() != pod.uid() && p.priority() >= prio)
                    .collect();
                if !pods.is_empty() {
                    out.insert(node, pods);
                }
            }
        }
        out
    }

    /// One scheduling cycle for a popped pod; on success its binding cycle is queued for
    /// [`Scheduler::dispatch_bindings`], which runs every [`BINDING_BATCH`] pods, after
    /// [`BINDING_BATCH_WAIT`], and whenever the queue runs dry (with an in-memory API, only
    /// once the cycle has to wait: see [`ApiClient::answers_in_place`]).
    fn schedule_one(self: &Arc<Self>, qpi: QueuedPodInfo) {
        let Some(qpi) = self.schedule_pod_group_of(qpi) else { return };
        let pod = qpi.pod_info.pod.clone();
        let uid = qpi.pod_info.uid().to_string();
        let scheduler_name =
            pod.spec.as_ref().and_then(|s| s.scheduler_name.clone()).unwrap_or_else(|| "default-scheduler".into());
        let Some(profile) = self.profiles.get(&scheduler_name).cloned() else {
            tracing::error!(pod = %qpi.pod_info.key(), scheduler_name, "no profile for the pod's schedulerName");
            self.queue.done(&uid);
            return;
        };
        let fw = profile.framework.clone();
        if is_terminating(&pod) {
            let note = format!("skip schedule deleting pod: {}", qpi.pod_info.key());
            fw.handle().recorder.record(&pod, None, "Warning", "FailedScheduling", "Scheduling", &note);
            self.queue.done(&uid);
            return;
        }
        if self.cache.is_assumed_pod(&pod) {
            self.queue.done(&uid);
            return;
        }
        let start = Instant::now();
        let mut state = CycleState::new();
        state.record_plugin_metrics = rand::random_range(0..100) < PLUGIN_METRICS_SAMPLE_PERCENT;

        let result = {
            let mut snap = self.snapshot.lock();
            if let Err(e) = self.cache.update_snapshot(&mut snap) {
                drop(snap);
                self.handle_failure(&fw, qpi, Failure::error(e.to_string()), start);
                return;
            }
            let nominated = self.nominated_pods(&qpi.pod_info, &snap);
            let batch = fw
                .batching()
                .then(|| BatchCycle { signature: qpi.signature.as_ref(), cycle: self.queue.scheduling_cycle() });
            let mut alg = self.algorithm.lock();
            let r = alg.schedule_queued_pod(
                &fw,
                profile.percentage_of_nodes_to_score,
                &mut state,
                &qpi.pod_info,
                &snap,
                &nominated,
                batch,
            );
            match r {
                Err(ScheduleError::Fit(mut fe)) => {
                    // Without PostFilter plugins upstream clears the nomination; with them
                    // the plugins' result decides (none keeps it).
                    let mut nominating = clear_nominated();
                    if fw.has_post_filter_plugins() {
                        let (res, st) =
                            fw.run_post_filter(&mut state, &qpi.pod_info, &snap, &fe.diagnosis.node_to_status);
                        fe.diagnosis.post_filter_msg = st.message();
                        nominating = res.and_then(|r| r.nominating_info);
                    }
                    Err(Failure {
                        code: Code::Unschedulable,
                        message: fe.message(),
                        diagnosis: Some(fe.diagnosis),
                        nominating,
                        already_bound: false,
                    })
                }
                Err(ScheduleError::NoNodesAvailable) => Err(Failure {
                    code: Code::UnschedulableAndUnresolvable,
                    message: ScheduleError::NoNodesAvailable.message(),
                    diagnosis: Some(Diagnosis { node_to_status: NodeToStatus::default(), ..Default::default() }),
                    nominating: clear_nominated(),
                    already_bound: false,
                }),
                Err(ScheduleError::Internal(e)) => Err(Failure::error(e)),
                Ok(r) => Ok(r),
            }
        };
        self.metrics.scheduling_algorithm_duration(start.elapsed().as_secs_f64());
        let result: ScheduleResult = match result {
            Ok(r) => r,
            Err(f) => {
                self.handle_failure(&fw, qpi, f, start);
                return;
            }
        };
        let host = result.suggested_host.clone();
        let counts = (result.evaluated_nodes, result.feasible_nodes);

        // Assume: the cache counts the pod on the node before the binding is confirmed.
        let assumed_info = Arc::new(qpi.pod_info.assumed_on(&host));
        if let Err(e) = self.cache.assume_pod(assumed_info.clone()) {
            self.handle_failure(&fw, qpi, Failure::error(e.to_string()), start);
            return;
        }
        self.queue.delete_nominated_pod_if_exists(&pod);

        let s = fw.run_reserve(&mut state, &assumed_info, &host);
        if !s.is_success() {
            fw.run_unreserve(&mut state, &assumed_info, &host);
            let _ = self.cache.forget_pod(&assumed_info.pod);
            let f = if s.is_rejected() { Failure::rejected_on_node(&host, s) } else { Failure::error(s.message()) };
            self.handle_failure(&fw, qpi, f, start);
            return;
        }
        let s = fw.run_permit(&mut state, &assumed_info, &host);
        if !s.is_success() && !s.is_wait() {
            fw.run_unreserve(&mut state, &assumed_info, &host);
            let _ = self.cache.forget_pod(&assumed_info.pod);
            let f = if s.is_rejected() { Failure::rejected_on_node(&host, s) } else { Failure::error(s.message()) };
            self.handle_failure(&fw, qpi, f, start);
            return;
        }

        // The pod may wait for its binding behind others: keep only what binding plugins read.
        state.drop_scheduling_only_state();
        let sched = self.clone();
        let permit = self.in_flight_bindings.clone();
        let in_place = fw.handle().client.answers_in_place();
        let ahead = BindingAhead::new(&self.bindings_ahead, s.is_wait());
        let mut job: BoxFuture<'static, ()> = Box::pin(async move {
            let _ahead = ahead;
            let _permit = permit.acquire().await;
            sched.binding_cycle(fw, state, qpi, assumed_info, (host, counts.0, counts.1), start).await;
        });
        if in_place {
            // An in-memory API binds in microseconds: handing that to a runtime worker costs a
            // wake-up, and on a busy machine the woken worker can wait milliseconds for a CPU.
            // Run the cycle here as far as it goes; one that waits (on Permit, on an earlier
            // status write) is handed over as usual and resumes there.
            let _runtime = self.runtime.enter();
            let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
            if job.as_mut().poll(&mut cx).is_ready() {
                return;
            }
        }
        let batch_full = {
            let mut pending = self.pending_bindings.lock();
            let now = Instant::now();
            if pending.jobs.is_empty() {
                pending.oldest = now;
            }
            pending.jobs.push(job);
            pending.jobs.len() >= BINDING_BATCH || now.duration_since(pending.oldest) >= BINDING_BATCH_WAIT
        };
        if batch_full {
            self.dispatch_bindings();
        }
    }

    async fn binding_cycle(
        self: Arc<Self>,
        fw: Arc<Framework>,
        mut state: CycleState,
        qpi: QueuedPodInfo,
        assumed: Arc<PodInfo>,
        // The chosen node and the nodes evaluated / found feasible on the way.
        (host, evaluated, feasible): (String, usize, usize),
        start: Instant,
    ) {
        self.metrics.binding_goroutines(1);
        // A status write from an earlier failed attempt must not land after the binding: it
        // would report the bound pod as unschedulable. The binding makes what it reports
        // obsolete, so one still retrying stops after its current attempt.
        self.pod_writes.supersede(assumed.uid()).await;
        let outcome = self.bind_pod(&fw, &mut state, &assumed, &host).await;
        self.metrics.binding_goroutines(-1);
        match outcome {
            Ok(()) => {
                tracing::debug!(
                    v = 2,
                    pod = ?KObj { namespace: assumed.namespace(), name: assumed.name() },
                    node = %host,
                    evaluatedNodes = evaluated,
                    feasibleNodes = feasible,
                    "Successfully bound pod to node"
                );
                let note = format!("Successfully assigned {} to {host}", qpi.pod_info.key());
                fw.handle().recorder.record(&qpi.pod_info.pod, None, "Normal", "Scheduled", "Binding", &note);
                self.metrics.pod_scheduled(fw.profile_name(), start.elapsed().as_secs_f64(), &qpi);
                fw.run_post_bind(&state, &assumed, &host);
            }
            Err(mut f) => {
                f.already_bound = f.code == Code::Error && self.bound_anyway(&fw, &assumed, &f).await;
                fw.run_unreserve(&mut state, &assumed, &host);
                if f.already_bound {
                    // The pod is on a node (ours, or another binder's) and only our informer
                    // has not seen it yet: it stays assumed where we put it until the informer
                    // says where it is. Forgetting it now would free room the pod occupies.
                    // No failure is written on it either: that status patch would land after
                    // the binding and report a bound pod as failed.
                    tracing::info!(pod = %assumed.key(), error = %f.message, "binding failed but the pod is bound");
                    self.handle_failure(&fw, qpi, f, start);
                    return;
                }
                let _ = self.cache.forget_pod(&assumed.pod);
                // Freed resources may help other pods; a rejected pod must not requeue itself.
                let uid = assumed.uid().to_string();
                let exclude_self = f.is_unschedulable();
                let check = move |p: &Pod| !exclude_self || p.metadata.uid.as_deref() != Some(uid.as_str());
                self.queue.move_all_to_active_or_backoff(
                    ClusterEvent::new(EventResource::AssignedPod, ActionType::DELETE),
                    Some(&EventObject::Pod(assumed.pod_with_node_name())),
                    None,
                    Some(&check),
                );
                self.handle_failure(&fw, qpi, f, start);
            }
        }
    }

    /// Whether a pod whose binding failed with an error is bound all the same: another binder
    /// won ("already assigned"), or our binding was applied and its answer lost (a dropped
    /// connection, a server error after the write). Asks the API server itself, retrying for
    /// about 3 s while it cannot be reached; when it cannot tell, the failure stands.
    async fn bound_anyway(&self, fw: &Framework, pod: &PodInfo, f: &Failure) -> bool {
        if f.message.contains(" is already assigned to node ") {
            return true;
        }
        let client = fw.handle().client.clone();
        let mut delay = Duration::from_millis(100);
        for _ in 0..5 {
            match client.get_pod(pod.namespace(), pod.name()).await {
                Ok(Some(p)) => {
                    let same = p.metadata.uid.as_deref() == Some(pod.uid());
                    return same && p.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_some_and(|n| !n.is_empty());
                }
                Ok(None) => return false,
                // 501: this client cannot read pods.
                Err(e) if e.code == 0 || (e.code >= 500 && e.code != 501) || e.code == 429 => {
                    tokio::time::sleep(delay).await;
                    delay *= 2;
                }
                Err(_) => return false,
            }
        }
        false
    }

    /// Runs PreBindPreFlight, WaitOnPermit, PreBind and Bind.
    async fn bind_pod(
        &self,
        fw: &Framework,
        state: &mut CycleState,
        assumed: &Arc<PodInfo>,
        host: &str,
    ) -> Result<(), Failure> {
        let pre_flight = fw.run_pre_bind_pre_flights(state, assumed, host);
        if pre_flight.code() == Code::Error {
            return Err(Failure::error(pre_flight.message()));
        }
        let waiting = fw.get_waiting_pod(assumed.uid()).is_some();
        if pre_flight.is_success() || waiting {
            // NominatedNodeNameForExpectation: tell other schedulers where this pod is going.
            let patch = serde_json::json!({"status": {"nominatedNodeName": host}});
            if let Err(e) = fw.handle().client.patch_pod_status(assumed.namespace(), assumed.name(), patch).await {
                tracing::debug!(pod = %assumed.key(), error = %e, "failed to set nominatedNodeName before binding");
            }
        }
        let s = fw.wait_on_permit(assumed.uid(), |d| Box::pin(tokio::time::sleep(d))).await;
        if !s.is_success() {
            let f = if s.is_rejected() { Failure::rejected_on_node(host, s) } else { Failure::error(s.message()) };
            return Err(f);
        }
        self.queue.done(assumed.uid());
        if pre_flight.is_success() {
            let s = fw.run_pre_bind(state, assumed, host).await;
            if !s.is_success() {
                return Err(Failure::error(s.message()));
            }
        }
        // The first interested binder extender binds instead of the Bind plugins.
        for ext in self.extenders.iter().filter(|e| e.is_binder() && e.is_interested(&assumed.pod)) {
            match ext.bind(&assumed.pod, host).await {
                Ok(()) => return Ok(()),
                Err(e) if ext.is_ignorable() => {
                    tracing::info!(extender = ext.name(), error = %e, "skipping ignorable binder extender");
                }
                Err(e) => return Err(Failure::error(e)),
            }
        }
        let s = fw.run_bind(state, assumed, host).await;
        if !s.is_success() {
            let msg = if s.is_skip() { "no bind plugin bound the pod".to_string() } else { s.message() };
            return Err(Failure::error(msg));
        }
        Ok(())
    }

    /// The failure handler: requeue, nominate, record the event and patch the PodScheduled
    /// condition (upstream `handleSchedulingFailure`).
    pub fn handle_failure(self: &Arc<Self>, fw: &Arc<Framework>, mut qpi: QueuedPodInfo, f: Failure, start: Instant) {
        let reason = if f.is_unschedulable() { "Unschedulable" } else { "SchedulerError" };
        self.metrics.pod_failed(fw.profile_name(), f.is_unschedulable(), start.elapsed().as_secs_f64());
        qpi.unschedulable_plugins.clear();
        qpi.pending_plugins.clear();
        if let Some(d) = &f.diagnosis {
            qpi.unschedulable_plugins = d.unschedulable_plugins.clone();
            qpi.pending_plugins = d.pending_plugins.clone();
        }
        let pod_ref = KObj { namespace: qpi.pod_info.namespace(), name: qpi.pod_info.name() };
        if f.is_unschedulable() && f.message == NO_NODES_AVAILABLE {
            tracing::debug!(v = 2, pod = ?pod_ref, "Unable to schedule pod; no nodes are registered to the cluster; waiting");
        } else if f.is_unschedulable() && f.diagnosis.is_none() && f.message.starts_with(POD_GROUP_UNSCHEDULABLE) {
            tracing::debug!(v = 2, pod = ?pod_ref, err = %f.message, "Unable to schedule pod belonging to a pod group; waiting");
        } else if f.is_unschedulable() {
            tracing::debug!(v = 2, pod = ?pod_ref, err = %f.message, "Unable to schedule pod; no fit; waiting");
        } else {
            tracing::error!(err = %f.message, pod = ?pod_ref, "Error scheduling pod; retrying");
        }
        let uid = qpi.pod_info.uid().to_string();
        let live = self.pod_lister.get(qpi.pod_info.namespace(), qpi.pod_info.name());
        let cycle = self.queue.scheduling_cycle();
        let current = match live {
            // Deleted, bound meanwhile (e.g. by an extender that timed out), or recreated: nothing
            // to requeue or report.
            None => {
                self.queue.done(&uid);
                return;
            }
            Some(p) if p.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_some_and(|n| !n.is_empty()) => {
                self.queue.done(&uid);
                return;
            }
            Some(p) if p.metadata.uid.as_deref() != Some(uid.as_str()) => {
                self.queue.done(&uid);
                return;
            }
            Some(p) => {
                qpi.pod_info = Arc::new(PodInfo::new(p.clone()));
                // Requeueing also ends the pod's cycle in the queue (Done).
                if let Err(e) = self.queue.add_unschedulable_if_not_present(qpi.clone(), cycle) {
                    tracing::error!(pod = %qpi.pod_info.key(), error = %e, "requeueing the pod failed");
                }
                p
            }
        };
        let mut nnn_patch: Option<String> = None;
        match f.nominating.as_ref().filter(|ni| ni.mode == NominatingMode::Override) {
            Some(ni) => {
                if ni.nominated_node_name.is_empty() {
                    self.queue.delete_nominated_pod_if_exists(&current);
                } else {
                    self.queue.add_nominated_pod(qpi.pod_info.clone(), Some(ni.nominated_node_name.clone()));
                }
                let cur = current.status.as_ref().and_then(|s| s.nominated_node_name.clone()).unwrap_or_default();
                if cur != ni.nominated_node_name {
                    nnn_patch = Some(ni.nominated_node_name.clone());
                }
            }
            // Noop keeps whatever the pod's status says.
            None => self.queue.add_nominated_pod(qpi.pod_info.clone(), None),
        }
        fw.handle().recorder.record(
            &current,
            None,
            "Warning",
            "FailedScheduling",
            "Scheduling",
            &truncate_event_note(&f.message),
        );

        let nomination_changed = nnn_patch.is_some();
        if f.already_bound {
            return;
        }
        if let Some(patch) = pod_scheduled_condition_patch(&current, reason, &f.message, nnn_patch) {
            let client = fw.handle().client.clone();
            let (ns, name) = (qpi.pod_info.namespace().to_string(), qpi.pod_info.name().to_string());
            let write = |superseded| async move {
                if let Err(e) = patch_failure_status(client.as_ref(), &ns, &name, patch, superseded).await {
                    tracing::warn!(pod = %format!("{ns}/{name}"), error = %e, "failed to update the PodScheduled condition");
                }
            };
            // Upstream writes this synchronously; here it is ordered per pod instead, so the
            // pod's next binding still waits for it (or, while it is retrying, stops it).
            let write = self.pod_writes.enqueue(&uid, write);
            self.runtime.spawn(write.clone());
            // A nomination must be visible before the pod's next cycle (other schedulers and our
            // own next attempt read it), as upstream's synchronous status update guarantees; the
            // common case, a condition message, is written in the background for throughput.
            // The wait is bounded: during an outage the write goes on in the background.
            if nomination_changed && tokio::runtime::Handle::try_current().is_err() {
                // The timer is made inside: this thread is not one of the runtime's.
                let _ = self.runtime.block_on(async { tokio::time::timeout(NOMINATION_WRITE_WAIT, write).await });
            }
        }
    }
}

/// The status patch setting PodScheduled=False (reason, full message) and optionally the
/// nominated node; `None` when the pod already says exactly that.
pub fn pod_scheduled_condition_patch(
    pod: &Pod,
    reason: &str,
    message: &str,
    nnn: Option<String>,
) -> Option<serde_json::Value> {
    let existing = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"));
    let unchanged = existing.is_some_and(|c| {
        c.status == "False" && c.reason.as_deref() == Some(reason) && c.message.as_deref() == Some(message)
    });
    if unchanged && nnn.is_none() {
        return None;
    }
    let transition = match existing {
        Some(c) if c.status == "False" => {
            c.last_transition_time.as_ref().map(|t| t.0.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        }
        _ => None,
    }
    .unwrap_or_else(|| chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
    let mut cond = serde_json::json!({
        "type": "PodScheduled", "status": "False", "reason": reason, "message": message,
        "lastProbeTime": null, "lastTransitionTime": transition,
    });
    if let Some(g) = pod.metadata.generation {
        cond["observedGeneration"] = serde_json::json!(g);
    }
    let mut status = serde_json::json!({"conditions": [cond]});
    if let Some(n) = nnn {
        status["nominatedNodeName"] = if n.is_empty() { serde_json::Value::Null } else { serde_json::json!(n) };
    }
    Some(serde_json::json!({"status": status}))
}

/// The failure handler's first pause between attempts to write a pod's condition while the
/// API server cannot be reached; it doubles up to [`FAILURE_STATUS_RETRY_MAX`].
const FAILURE_STATUS_RETRY_INITIAL: Duration = Duration::from_secs(1);

/// The longest pause between attempts to write a pod's condition.
const FAILURE_STATUS_RETRY_MAX: Duration = Duration::from_secs(10);

/// How long the scheduling loop waits for a nomination's write before going on without it.
const NOMINATION_WRITE_WAIT: Duration = Duration::from_secs(30);

/// The failure handler's status write: upstream's retries, then, since it runs in the
/// background, again after a pause (1 s, doubling up to 10 s) for as long as the errors are
/// transient and nothing superseded the write. Upstream gives up after ~0.3 s (its write
/// blocks the scheduling loop); a refused pod whose condition was lost to an outage then shows
/// no reason until its next attempt, which may be minutes away: nothing requeues it, since
/// the cluster did not change.
async fn patch_failure_status(
    client: &dyn ApiClient,
    namespace: &str,
    name: &str,
    patch: serde_json::Value,
    mut superseded: Superseded,
) -> Result<(), ApiError> {
    let mut pause = FAILURE_STATUS_RETRY_INITIAL;
    loop {
        if superseded.is_set() {
            tracing::debug!(pod = %format!("{namespace}/{name}"), "PodScheduled condition superseded before it was written");
            return Ok(());
        }
        match patch_pod_status_with_retries(client, namespace, name, patch.clone()).await {
            Err(e) if e.code == 0 || e.code >= 500 || e.code == 429 => {
                tracing::debug!(pod = %format!("{namespace}/{name}"), error = %e, "retrying the PodScheduled condition");
                tokio::select! {
                    _ = tokio::time::sleep(pause) => {}
                    _ = superseded.wait() => {}
                }
                pause = (pause * 2).min(FAILURE_STATUS_RETRY_MAX);
            }
            r => return r,
        }
    }
}

/// Patches pod status, retrying conflicts, server errors and connection failures with upstream's
/// backoff (10 ms × 5^n, 4 attempts).
pub async fn patch_pod_status_with_retries(
    client: &dyn ApiClient,
    namespace: &str,
    name: &str,
    patch: serde_json::Value,
) -> Result<(), ApiError> {
    let mut delay = Duration::from_millis(10);
    let mut last = None;
    for _ in 0..4 {
        match client.patch_pod_status(namespace, name, patch.clone()).await {
            Ok(()) => return Ok(()),
            Err(e) if e.code == 409 || e.code >= 500 || e.code == 0 => {
                last = Some(e);
                tokio::time::sleep(delay).await;
                delay *= 5;
            }
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or(ApiError { code: 0, message: "patch failed".into() }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// Fails the first `failures` status patches as an unreachable server would.
    struct Unreachable {
        failures: usize,
        calls: AtomicUsize,
    }

    impl ApiClient for Unreachable {
        fn bind(&self, _: &Pod, _: &str) -> BoxFuture<'static, Result<(), ApiError>> {
            Box::pin(async { Ok(()) })
        }
        fn patch_pod_status(&self, _: &str, _: &str, _: serde_json::Value) -> BoxFuture<'static, Result<(), ApiError>> {
            let n = self.calls.fetch_add(1, Ordering::SeqCst);
            let fail = n < self.failures;
            Box::pin(async move {
                if fail {
                    Err(ApiError { code: 0, message: "connection refused".into() })
                } else {
                    Ok(())
                }
            })
        }
        fn delete_pod(&self, _: &str, _: &str, _: Option<&str>) -> BoxFuture<'static, Result<(), ApiError>> {
            Box::pin(async { Ok(()) })
        }
    }

    #[tokio::test]
    async fn the_failure_condition_outlasts_a_short_outage() {
        // Upstream's four quick attempts all fail; the background write keeps going.
        let client = Unreachable { failures: 6, calls: AtomicUsize::new(0) };
        let (_switch, superseded) = Superseded::switch();
        patch_failure_status(&client, "ns", "p", serde_json::json!({}), superseded).await.unwrap();
        assert_eq!(client.calls.load(Ordering::SeqCst), 7);
        // A rejection is final.
        struct Rejects;
        impl ApiClient for Rejects {
            fn bind(&self, _: &Pod, _: &str) -> BoxFuture<'static, Result<(), ApiError>> {
                Box::pin(async { Ok(()) })
            }
            fn patch_pod_status(
                &self,
                _: &str,
                _: &str,
                _: serde_json::Value,
            ) -> BoxFuture<'static, Result<(), ApiError>> {
                Box::pin(async { Err(ApiError { code: 404, message: "gone".into() }) })
            }
            fn delete_pod(&self, _: &str, _: &str, _: Option<&str>) -> BoxFuture<'static, Result<(), ApiError>> {
                Box::pin(async { Ok(()) })
            }
        }
        let (_switch, superseded) = Superseded::switch();
        let e = patch_failure_status(&Rejects, "ns", "p", serde_json::json!({}), superseded).await.unwrap_err();
        assert_eq!(e.code, 404);
    }

    /// Refuses every status patch until `until`, as an API server that is down or cut off.
    struct DownUntil {
        until: tokio::time::Instant,
        calls: AtomicUsize,
        written: AtomicUsize,
    }

    impl ApiClient for DownUntil {
        fn bind(&self, _: &Pod, _: &str) -> BoxFuture<'static, Result<(), ApiError>> {
            Box::pin(async { Ok(()) })
        }
        fn patch_pod_status(&self, _: &str, _: &str, _: serde_json::Value) -> BoxFuture<'static, Result<(), ApiError>> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            if tokio::time::Instant::now() < self.until {
                return Box::pin(async { Err(ApiError { code: 0, message: "connection refused".into() }) });
            }
            self.written.fetch_add(1, Ordering::SeqCst);
            Box::pin(async { Ok(()) })
        }
        fn delete_pod(&self, _: &str, _: &str, _: Option<&str>) -> BoxFuture<'static, Result<(), ApiError>> {
            Box::pin(async { Ok(()) })
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_failure_condition_outlasts_a_long_outage() {
        // Ten minutes down: the refused pod's condition still lands once the server is back
        // (nothing else would report it: the pod waits for a cluster change that may never
        // come). Paused time: the ten minutes pass at once.
        let start = tokio::time::Instant::now();
        let client = DownUntil {
            until: start + Duration::from_secs(600),
            calls: AtomicUsize::new(0),
            written: AtomicUsize::new(0),
        };
        let (_switch, superseded) = Superseded::switch();
        patch_failure_status(&client, "ns", "p", serde_json::json!({}), superseded).await.unwrap();
        assert_eq!(client.written.load(Ordering::SeqCst), 1);
        let waited = start.elapsed();
        assert!(waited >= Duration::from_secs(600), "{waited:?}");
        // At most one pause (10 s) plus upstream's retries (0.31 s) past the outage.
        assert!(waited <= Duration::from_secs(611), "{waited:?}");
        // Paced by the pauses: about 4 requests per 10 s, not a busy loop.
        let calls = client.calls.load(Ordering::SeqCst);
        assert!(calls <= 4 * 70, "{calls} requests");
    }

    #[tokio::test(start_paused = true)]
    async fn a_superseded_failure_condition_stops_being_retried() {
        let start = tokio::time::Instant::now();
        let client = DownUntil {
            until: start + Duration::from_secs(600),
            calls: AtomicUsize::new(0),
            written: AtomicUsize::new(0),
        };
        let (switch, superseded) = Superseded::switch();
        let write = patch_failure_status(&client, "ns", "p", serde_json::json!({}), superseded);
        let supersede = async {
            tokio::time::sleep(Duration::from_secs(30)).await;
            switch.send_replace(true);
            futures::future::pending::<()>().await
        };
        let r = tokio::select! {
            r = write => r,
            _ = supersede => unreachable!(),
        };
        assert!(r.is_ok());
        let waited = start.elapsed();
        assert!(waited >= Duration::from_secs(30) && waited < Duration::from_secs(31), "{waited:?}");
        assert_eq!(client.written.load(Ordering::SeqCst), 0, "nothing written while down");
    }
}
