//! `ksched bench --mode trace-time`: the trace in time, through the real scheduler (its queue
//! with backoff, requeueing on cluster events, the leftover flush; its scheduling loop and
//! binding cycles; PostFilter) in an in-process cluster whose queue runs on a virtual clock.
//!
//! Pods arrive at their `creation_time` (from the earliest one) divided by `--speedup`, run for
//! their own run time (`deletion_time - scheduled_time`, or `- creation_time` for a pod the
//! trace never scheduled; divided by `--run-speedup`, 1 by default) from the moment they are
//! bound, then leave: the pod is deleted, then its claim deallocated (the resourceclaim
//! controller's part). A pod without `deletion_time`
//! never leaves. A pod that does not fit waits in the queue until a cluster event or a flush
//! gets it retried, for as long as it takes.
//!
//! The accounting checks of `--mode trace` ([`super::accounting`]) run every `--check-every`
//! events, on the state at the peak GPU allocation (kept from the last moment it held, checked
//! once the run is over and that level is known to be the peak), and at the end.
//!
//! Why a speedup of arrivals rather than of the whole timeline: the trace's pods are a sample
//! spread over 150 days, mostly short-lived (median run ~8 min); replayed at their own times
//! they never use more than about 1% of the cluster's GPUs at once, so nothing ever waits, and
//! compressing the whole timeline uniformly keeps exactly that overlap. Arrivals compressed
//! while run times stay keep each pod's own duration and raise the load by about the factor.
//!
//! The virtual clock moves from one instant of interest to the next (an arrival, a departure,
//! a backoff or leftover-flush tick); at each, the driver applies one change at a time and
//! waits until the scheduler has nothing left to do (queue idle, no cycle or binding in
//! flight), so a run is deterministic and takes only as long as the scheduling work. Leftover
//! flush ticks that would only retry pods whose last attempt saw the cluster as it still is are
//! skipped: such a retry fails exactly as that attempt did.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Args;
use k8s_openapi::api::resource::v1::ResourceClaim;
use ksched_framework::interface::QueuedPodInfo;
use ksched_scheduler::inprocess::InProcessCluster;
use ksched_scheduler::metrics::SchedulerMetrics;
use ksched_scheduler::queue::FakeClock;
use plotters::prelude::*;
use serde::Serialize;

use super::accounting::{self, Placement};
use super::cluster::{self, ObjectOptions, NAMESPACE};
use super::csv::{Trace, TracePod, GPU_MILLI};
use super::profiles::{self, TraceProfile};
use super::report::{colour, quantile};

/// Options of `--mode trace-time`.
#[derive(Args, Debug, Clone)]
pub struct TimelineArgs {
    /// Arrivals this many times faster than in the trace; each pod keeps its run time (unless
    /// `--run-speedup`).
    #[arg(long, default_value_t = 20000.0)]
    pub speedup: f64,
    /// Run times this many times shorter than in the trace (1: as in the trace). With
    /// `--mode trace-live` it bounds how long a pod stays, in wall time.
    #[arg(long, default_value_t = 1.0)]
    pub run_speedup: f64,
    /// Run the accounting checks after every this many trace events (arrivals and departures),
    /// besides at the peak GPU allocation and at the end; 0: only at those two.
    #[arg(long, default_value_t = DEFAULT_CHECK_EVERY, value_name = "N")]
    pub check_every: usize,
}

/// The default of `--check-every`: a check walks every pod present and every claim (tens of
/// milliseconds with the default trace's 8152 pods), so the 16 of them over its 16,304 events
/// cost little next to the scheduling (with the peak's and the end's, 0.7 s of a 96 s replay
/// with the policy, release build), while a broken invariant is still caught near where it
/// broke.
pub const DEFAULT_CHECK_EVERY: usize = 1000;

/// Counts scheduling attempts.
#[derive(Default)]
struct Attempts {
    scheduled: AtomicU64,
    failed: AtomicU64,
    algorithm_ns: AtomicU64,
}

impl SchedulerMetrics for Attempts {
    fn scheduling_algorithm_duration(&self, seconds: f64) {
        self.algorithm_ns.fetch_add((seconds * 1e9) as u64, Ordering::Relaxed);
    }
    fn pod_scheduled(&self, _: &str, _: f64, _: &QueuedPodInfo) {
        self.scheduled.fetch_add(1, Ordering::Relaxed);
    }
    fn pod_failed(&self, _: &str, _: bool, _: f64) {
        self.failed.fetch_add(1, Ordering::Relaxed);
    }
}

/// One pod of the timeline.
struct Life {
    pod: TracePod,
    name: String,
    arrival_ms: i64,
    /// How long it runs once bound (`None`: until the end of the replay).
    run_ms: Option<i64>,
    bound_ms: Option<i64>,
    node: Option<String>,
    departed: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// Departures first at an instant: room is freed before new pods look for it.
    Departure(usize),
    Arrival(usize),
}

/// The replay's own bookkeeping, in virtual time.
struct Driver {
    lives: Vec<Life>,
    /// `namespace/name` to index into `lives`.
    index: HashMap<String, usize>,
    events: BinaryHeap<Reverse<(i64, Event)>>,
    capacity: f64,
    /// Virtual milliseconds since the start.
    now: i64,
    /// GPU milli allocated, and requested by waiting pods.
    allocated: i64,
    waiting: i64,
    peak_alloc: i64,
    peak_demand: i64,
    timeline: Vec<(f64, f64, f64)>,
    /// When a pod was last bound or left (virtual ms; -1: never).
    last_change: i64,
    /// Pods that arrived so far.
    arrived: usize,
    /// Trace events (arrivals, departures) applied so far.
    events_done: usize,
    /// When the allocation first reached `peak_alloc` (virtual ms).
    peak_reached: i64,
    /// The allocation reached a new peak whose state is not kept yet.
    peak_unkept: bool,
    /// The state at the highest allocation so far, checked at the end.
    peak_state: Option<State>,
    /// Accounting checks run so far.
    checks: usize,
    /// Wall time spent in the checks (and in keeping the peak's state).
    check_time: Duration,
}

/// What the accounting checks look at, as it was at one moment: the pods present and their
/// nodes, the claims as the API held them (immutable: a write replaces a claim's `Arc`).
struct State {
    /// Virtual ms.
    at_ms: i64,
    /// GPU milli allocated, as the harness counted it.
    allocated: i64,
    /// Pods present: index into the lives, and node.
    present: Vec<(usize, Option<String>)>,
    claims: Vec<Arc<ResourceClaim>>,
}

impl Driver {
    /// The state now.
    fn state(&self, c: &InProcessCluster) -> State {
        State {
            at_ms: self.now,
            allocated: self.allocated,
            present: self
                .lives
                .iter()
                .enumerate()
                .filter(|(_, l)| !l.departed)
                .map(|(i, l)| (i, l.node.clone()))
                .collect(),
            claims: c.resource_claims(),
        }
    }

    /// The accounting checks of `state`, counted and timed.
    fn check(&mut self, trace: &Trace, state: &State) -> anyhow::Result<()> {
        let start = Instant::now();
        let r = check(trace, &self.lives, state);
        self.checks += 1;
        self.check_time += start.elapsed();
        r
    }

    /// The accounting checks of the pods present now.
    fn check_now(&mut self, trace: &Trace, c: &InProcessCluster) -> anyhow::Result<()> {
        let start = Instant::now();
        let state = self.state(c);
        self.check_time += start.elapsed();
        self.check(trace, &state)
    }

    /// Keeps the state at the highest allocation so far, at the last moment it holds (the
    /// allocation is about to drop from it, or the run is over): the peak is known only once
    /// the run is over, and checking every level that was the highest for a while costs a
    /// full check each (hundreds on the default trace), where keeping its state costs a copy
    /// of pointers.
    fn keep_peak(&mut self, c: &InProcessCluster) {
        let start = Instant::now();
        self.peak_unkept = false;
        self.peak_state = Some(self.state(c));
        self.check_time += start.elapsed();
    }

    /// The accounting checks of the state at the peak allocation.
    fn check_peak(&mut self, trace: &Trace) -> anyhow::Result<()> {
        let Some(state) = self.peak_state.take() else { return Ok(()) };
        let r = self.check(trace, &state).with_context(|| {
            format!(
                "accounting check of the state at the peak allocation ({:.2}% of the GPUs, reached at {:.3} s, held until {})",
                self.peak_alloc as f64 * 100.0 / self.capacity,
                self.peak_reached as f64 / 1000.0,
                at(state.at_ms)
            )
        });
        self.peak_state = Some(state);
        r
    }

    /// Records the bindings made since the last look (they happened at `now`), schedules
    /// those pods' departures and samples the allocation.
    fn take_binds(&mut self, c: &InProcessCluster) {
        for b in c.take_binds() {
            let Some(&i) = self.index.get(&b.pod) else { continue };
            let l = &mut self.lives[i];
            l.bound_ms = Some(self.now);
            l.node = Some(b.node);
            self.allocated += l.pod.gpu_request_milli();
            self.waiting -= l.pod.gpu_request_milli();
            if let Some(run) = l.run_ms {
                self.events.push(Reverse((self.now + run, Event::Departure(i))));
            }
            self.last_change = self.now;
        }
        if self.allocated > self.peak_alloc {
            self.peak_alloc = self.allocated;
            self.peak_reached = self.now;
            self.peak_unkept = true;
        }
        self.peak_demand = self.peak_demand.max(self.allocated + self.waiting);
        let point = (
            self.now as f64 / 1000.0,
            self.allocated as f64 * 100.0 / self.capacity,
            self.waiting as f64 * 100.0 / self.capacity,
        );
        if self.timeline.last().is_some_and(|l| l.1 != point.1 || l.2 != point.2) {
            self.timeline.push(point);
        }
    }
}

/// The result of one profile.
#[derive(Debug, Clone, Serialize)]
pub struct TimelineResult {
    /// The profile.
    pub name: String,
    /// `built-in` or its file.
    pub source: String,
    /// The configuration used.
    pub config: serde_json::Value,
    /// Pods that arrived.
    pub pods: usize,
    /// Pods bound at some point.
    pub scheduled: usize,
    /// Pods still waiting when nothing was left to happen (their wait counts until then).
    pub never_scheduled: usize,
    /// Pending time (seconds of trace time) from arrival to binding: median.
    pub pending_p50_s: f64,
    /// 90th percentile.
    pub pending_p90_s: f64,
    /// 99th percentile.
    pub pending_p99_s: f64,
    /// Longest.
    pub pending_max_s: f64,
    /// Pods that waited at all.
    pub pods_that_waited: usize,
    /// GPU-hours of demand spent waiting: sum over pods of GPUs requested times pending time.
    pub pending_gpu_hours: f64,
    /// Highest GPU allocation reached (% of capacity).
    pub peak_alloc_pct: f64,
    /// When the allocation first reached its peak (virtual seconds; null: no GPU was ever
    /// allocated).
    pub peak_alloc_s: Option<f64>,
    /// The moment whose state the peak's accounting check saw (virtual seconds): the last one
    /// at the peak, before the allocation first dropped from it.
    pub peak_check_s: Option<f64>,
    /// Accounting checks run: every `check_every` events, of the peak's state, and at the end.
    pub accounting_checks: usize,
    /// Wall time the checks took, seconds (included in `seconds`).
    pub check_seconds: f64,
    /// Events (arrivals and departures) between two periodic checks (0: none).
    pub check_every: usize,
    /// Highest GPU demand present at once (allocated plus waiting, % of capacity).
    pub peak_demand_pct: f64,
    /// Scheduling attempts (cycles), successful and failed.
    pub attempts_scheduled: u64,
    /// Failed attempts.
    pub attempts_failed: u64,
    /// Virtual time when the last thing happened (seconds).
    pub end_s: f64,
    /// Wall time of the run, seconds.
    pub seconds: f64,
    /// Allocation over time: (seconds, allocated %, waiting demand %), at every change.
    pub timeline: Vec<(f64, f64, f64)>,
    /// Per pod: name, arrival and binding (virtual seconds; null: never bound), and its node.
    pub pods_bound: Vec<(String, f64, Option<f64>, Option<String>)>,
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct TimelineResults {
    /// `trace-time`.
    pub mode: String,
    /// The node list.
    pub trace_nodes: String,
    /// The pod list.
    pub trace_pods: String,
    /// Nodes.
    pub nodes: usize,
    /// GPUs.
    pub gpus: i64,
    /// Speedup of arrivals.
    pub speedup: f64,
    /// Run times are divided by this.
    pub run_speedup: f64,
    /// `--slice`: the first pod row replayed and how many (null: every row).
    pub slice: Option<(usize, usize)>,
    /// Pods without a deletion time: once bound, they stayed until the end.
    pub pods_without_deletion_time: usize,
    /// `git rev-parse --short HEAD`.
    pub git_revision: String,
    /// How to read the figures.
    pub notes: Vec<String>,
    /// Per profile.
    pub profiles: Vec<TimelineResult>,
}

/// How long the driver waits between looks at an unfinished scheduler.
const POLL: Duration = Duration::from_micros(20);
/// The queue's backoff flush period (upstream's one-second ticker).
const BACKOFF_TICK_MS: i64 = 1000;
/// The queue's leftover flush period (upstream's 30 s).
const LEFTOVER_TICK_MS: i64 = 30_000;

/// How often (wall time) a replay reports its progress on stderr.
const PROGRESS_EVERY: Duration = Duration::from_secs(30);

/// With no trace event left, the run ends after this long without a binding or departure.
const IDLE_END_MS: i64 = 3_600_000;

/// The next tick of the leftover flush (every 30 s) that can change anything: one that takes a
/// pod out of unschedulablePods (after the queue's maximum stay there) whose last attempt came
/// before the cluster's last change. A retry of a pod that failed with the cluster as it still
/// is fails again the same way, so those ticks are skipped.
fn next_useful_leftover_flush(
    queue: &ksched_scheduler::queue::SchedulingQueue,
    t0: Instant,
    now: i64,
    last_change: i64,
    max_stay_ms: i64,
) -> Option<i64> {
    let oldest_stale = queue
        .unschedulable_pods()
        .iter()
        .filter_map(|p| {
            queue.get_pod(p.metadata.namespace.as_deref().unwrap_or("default"), p.metadata.name.as_deref()?)
        })
        .filter(|q| q.gating_plugin.is_none())
        .map(|q| q.timestamp.saturating_duration_since(t0).as_millis() as i64)
        .filter(|failed| *failed <= last_change)
        .min()?;
    // The flush takes pods that stayed strictly longer than the maximum.
    let due = (oldest_stale + max_stay_ms + 1).max(now + 1);
    Some((due + LEFTOVER_TICK_MS - 1) / LEFTOVER_TICK_MS * LEFTOVER_TICK_MS)
}

/// Virtual milliseconds as the checks' messages give them.
fn at(now_ms: i64) -> String {
    format!("{:.3} s of virtual time", now_ms as f64 / 1000.0)
}

/// When a pod of a replay in time arrives and how long it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodTimes {
    /// Arrival, virtual milliseconds from the earliest creation.
    pub arrival_ms: i64,
    /// How long it runs once bound (`None`: until the end of the replay).
    pub run_ms: Option<i64>,
}

/// Every pod's arrival and run time under `args` (`mode` names the mode in errors): arrivals
/// `--speedup` times faster, run times (from the trace's scheduling, or its creation for a pod
/// the trace never scheduled, to its deletion) `--run-speedup` times shorter. Both replays in
/// time use it, so that the same pods arrive and leave at the same virtual times.
pub fn schedule(trace: &Trace, args: &TimelineArgs, mode: &str) -> anyhow::Result<Vec<PodTimes>> {
    let (speedup, run_speedup) = (args.speedup, args.run_speedup);
    anyhow::ensure!(speedup.is_finite() && speedup > 0.0, "--speedup must be positive, got {speedup}");
    anyhow::ensure!(run_speedup.is_finite() && run_speedup > 0.0, "--run-speedup must be positive, got {run_speedup}");
    // Virtual time 0 is the first creation: times since the Unix epoch (ISO-8601) then start
    // the replay at once, and a trace counting from its own start (the Alibaba trace's first
    // pod is created at 0) keeps its times.
    let t0 = trace.pods.iter().filter_map(|p| p.creation_ms).min().unwrap_or(0);
    trace
        .pods
        .iter()
        .map(|p| {
            let Some(c) = p.creation_ms else {
                anyhow::bail!(
                    "pod {}: --mode {mode} needs creation_time (this pod list has no times, or none for this pod)",
                    p.name
                );
            };
            // A pod the trace never saw deleted was still running when it ended: it stays.
            let start = p.scheduled_ms.unwrap_or(c).max(c);
            Ok(PodTimes {
                arrival_ms: ((c - t0) as f64 / speedup).round() as i64,
                run_ms: p.deletion_ms.map(|d| ((d - start.min(d)) as f64 / run_speedup).round() as i64),
            })
        })
        .collect()
}

/// Replays `trace` in time under one profile.
pub fn replay(
    trace: &Trace,
    profile: &TraceProfile,
    args: &TimelineArgs,
    opts: ObjectOptions,
    rt: &tokio::runtime::Handle,
) -> anyhow::Result<TimelineResult> {
    replay_observed(trace, profile, args, opts, rt, &mut |_, _| {})
}

/// Where a replay is, as [`replay_observed`] shows it after each trace event.
#[derive(Debug, Clone, Copy)]
// Only the tests' observers read it; the replay itself observes nothing.
#[cfg_attr(not(test), allow(dead_code))]
struct Moment {
    /// Trace events applied so far.
    events: usize,
    /// GPU milli allocated, as the harness counts it.
    allocated_milli: i64,
}

/// [`replay`], calling `observe` after each trace event has been applied and the scheduler
/// has settled, before any check of that moment (tests tamper with the cluster there to see
/// the checks catch it).
fn replay_observed(
    trace: &Trace,
    profile: &TraceProfile,
    args: &TimelineArgs,
    opts: ObjectOptions,
    rt: &tokio::runtime::Handle,
    observe: &mut dyn FnMut(&InProcessCluster, Moment),
) -> anyhow::Result<TimelineResult> {
    let mut lives = Vec::with_capacity(trace.pods.len());
    for (p, times) in trace.pods.iter().zip(schedule(trace, args, "trace-time")?) {
        lives.push(Life {
            pod: p.clone(),
            name: p.name.clone(),
            arrival_ms: times.arrival_ms,
            run_ms: times.run_ms,
            bound_ms: None,
            node: None,
            departed: false,
        });
    }
    let wall = Instant::now();
    let _guard = rt.enter();
    let clock = Arc::new(FakeClock::new());
    let t0 = ksched_scheduler::queue::Clock::now(&*clock);
    let attempts = Arc::new(Attempts::default());
    let cfg = super::harness_config(profile);
    // FGD's target workload in time is the trace's pods, all of them, in the trace's order.
    let all: Vec<usize> = (0..trace.pods.len()).collect();
    let names: Vec<String> = trace.nodes.iter().map(|n| n.name.clone()).collect();
    let registry = profiles::registry(0, Arc::new(super::fgd::FgdWorkload::new(&trace.pods, &all, &names, 0)));
    let mut c = InProcessCluster::with_clock(&cfg, &registry, attempts.clone(), clock.clone())?;
    c.apply_device_class(cluster::device_class());
    for n in &trace.nodes {
        c.apply_node(cluster::node(n, opts));
        if let Some(s) = cluster::slice(n) {
            c.apply_resource_slice(s);
        }
    }
    c.start_without_flushers();
    let scheduler_name = profile.scheduler_name();
    let queue = c.scheduler.queue.clone();
    let index: HashMap<String, usize> =
        lives.iter().enumerate().map(|(i, l)| (format!("{NAMESPACE}/{}", l.name), i)).collect();
    let events = lives.iter().enumerate().map(|(i, l)| Reverse((l.arrival_ms, Event::Arrival(i)))).collect();
    let mut d = Driver {
        lives,
        index,
        events,
        capacity: trace.gpu_capacity_milli() as f64,
        now: 0,
        allocated: 0,
        waiting: 0,
        peak_alloc: 0,
        peak_demand: 0,
        timeline: vec![(0.0, 0.0, 0.0)],
        last_change: -1,
        arrived: 0,
        events_done: 0,
        peak_reached: 0,
        peak_unkept: false,
        peak_state: None,
        checks: 0,
        check_time: Duration::ZERO,
    };
    let mut last_report = Instant::now();
    let max_unschedulable = queue.options().pod_max_in_unschedulable_pods_duration.as_millis() as i64;

    let settle = |c: &InProcessCluster| -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(600);
        loop {
            // A rejected pod in backoffQ is not waiting for its backoff: the scheduling loop pops
            // it as soon as activeQ is empty (PopFromBackoffQ), so the scheduler is not done.
            let idle =
                |q: &ksched_scheduler::queue::SchedulingQueue| !q.has_poppable() && q.in_flight_pods().is_empty();
            if idle(&queue) {
                anyhow::ensure!(rt.block_on(c.scheduler.wait_for_bindings(Duration::from_secs(60))), "bindings hang");
                if idle(&queue) {
                    return Ok(());
                }
            }
            anyhow::ensure!(Instant::now() < deadline, "the scheduler did not settle in 10 minutes");
            std::thread::sleep(POLL);
        }
    };

    loop {
        // Bindings made by the flushes' retries.
        d.take_binds(&c);
        // A full trace takes minutes to hours of retries: say how far it got.
        if last_report.elapsed() >= PROGRESS_EVERY {
            last_report = Instant::now();
            let q = queue.pending_counts();
            eprintln!(
                "  {}: {:.2} h virtual, {}/{} arrived, {} waiting, {:.2}% allocated, {} attempts ({} failed), {:.0}s",
                profile.name,
                d.now as f64 / 3_600_000.0,
                d.arrived,
                d.lives.len(),
                q.active + q.backoff + q.unschedulable + q.gated,
                d.allocated as f64 * 100.0 / d.capacity,
                attempts.scheduled.load(Ordering::Relaxed) + attempts.failed.load(Ordering::Relaxed),
                attempts.failed.load(Ordering::Relaxed),
                wall.elapsed().as_secs_f64()
            );
        }
        // The next instant of interest.
        let now = d.now;
        let next_event = d.events.peek().map(|e| e.0 .0);
        let next_backoff = (queue.pending_counts().backoff > 0).then(|| (now / BACKOFF_TICK_MS + 1) * BACKOFF_TICK_MS);
        let next_leftover = next_useful_leftover_flush(&queue, t0, now, d.last_change, max_unschedulable);
        let Some(next) = [next_event, next_backoff, next_leftover].into_iter().flatten().min() else { break };
        if next_event.is_none() && next - d.last_change.max(0) > IDLE_END_MS {
            // Only retries of pods that keep failing with errors are left.
            break;
        }
        d.now = next;
        clock.set(t0 + Duration::from_millis(next as u64));
        queue.flush_backoff_q_completed();
        if next % LEFTOVER_TICK_MS == 0 {
            queue.flush_unschedulable_pods_leftover();
        }
        settle(&c)?;
        while d.events.peek().is_some_and(|e| e.0 .0 == next) {
            let Some(Reverse((_, ev))) = d.events.pop() else { break };
            match ev {
                Event::Arrival(i) => {
                    d.take_binds(&c);
                    let l = &d.lives[i];
                    let uid = format!("{}-uid", l.name);
                    let (pod, claim) = cluster::pod(&l.pod, &l.name, &uid, &scheduler_name, opts);
                    if let Some(mut claim) = claim {
                        // The harness plays the resourceclaim controller: it deallocates the
                        // claim after the pod's deletion instead of the garbage collector
                        // deleting it with the pod.
                        claim.metadata.owner_references = None;
                        c.apply_resource_claim(claim)
                            .map_err(|e| anyhow::anyhow!("claim of {}: {}", l.name, e.message))?;
                    }
                    d.waiting += l.pod.gpu_request_milli();
                    d.arrived += 1;
                    c.apply_pod(pod);
                }
                Event::Departure(i) => {
                    // Bindings the flushes' retries made at this instant came before this
                    // departure: count them before it lowers the allocation.
                    d.take_binds(&c);
                    if d.peak_unkept && d.lives[i].pod.gpu_request_milli() > 0 {
                        d.keep_peak(&c);
                    }
                    let name = d.lives[i].name.clone();
                    let pod = c.pod(NAMESPACE, &name).with_context(|| format!("pod {name} vanished"))?;
                    c.delete_pod(&pod);
                    d.allocated -= d.lives[i].pod.gpu_request_milli();
                    d.lives[i].departed = true;
                    d.last_change = d.now;
                    settle(&c)?;
                    d.take_binds(&c);
                    if let Some(claim) = c.resource_claim(NAMESPACE, &cluster::claim_name(&name)) {
                        let mut claim = (*claim).clone();
                        claim.status = None;
                        claim.metadata.finalizers = None;
                        c.apply_resource_claim(claim).map_err(|e| anyhow::anyhow!("claim of {name}: {}", e.message))?;
                    }
                }
            }
            settle(&c)?;
            d.take_binds(&c);
            d.events_done += 1;
            observe(&c, Moment { events: d.events_done, allocated_milli: d.allocated });
            if args.check_every > 0 && d.events_done.is_multiple_of(args.check_every) {
                d.check_now(trace, &c)
                    .with_context(|| format!("accounting check after event {} at {}", d.events_done, at(d.now)))?;
            }
        }
    }
    // The allocation never dropped from its peak: the state now is the peak's.
    if d.peak_unkept {
        d.keep_peak(&c);
    }
    d.check_peak(trace)?;
    d.check_now(trace, &c).with_context(|| format!("accounting check at the end, {}", at(d.now)))?;
    rt.block_on(c.stop());
    let Driver {
        lives,
        now,
        peak_alloc,
        peak_demand,
        timeline,
        capacity,
        peak_reached,
        peak_state,
        checks,
        check_time,
        ..
    } = d;
    let end = now;
    let pending_s: Vec<f64> =
        lives.iter().map(|l| (l.bound_ms.unwrap_or(end) - l.arrival_ms).max(0) as f64 / 1000.0).collect();
    let gpu_hours: f64 = lives
        .iter()
        .zip(&pending_s)
        .map(|(l, s)| l.pod.gpu_request_milli() as f64 / GPU_MILLI as f64 * s / 3600.0)
        .sum();
    let r2 = |x: f64| (x * 100.0).round() / 100.0;
    Ok(TimelineResult {
        name: profile.name.clone(),
        source: profile.source.clone(),
        config: ksched_scheduler::config::to_json(&profile.config),
        pods: lives.len(),
        scheduled: lives.iter().filter(|l| l.bound_ms.is_some()).count(),
        never_scheduled: lives.iter().filter(|l| l.bound_ms.is_none()).count(),
        pending_p50_s: r2(quantile(&pending_s, 0.5)),
        pending_p90_s: r2(quantile(&pending_s, 0.9)),
        pending_p99_s: r2(quantile(&pending_s, 0.99)),
        pending_max_s: r2(pending_s.iter().copied().fold(0.0, f64::max)),
        pods_that_waited: pending_s.iter().filter(|s| **s > 0.0).count(),
        pending_gpu_hours: r2(gpu_hours),
        peak_alloc_pct: r2(peak_alloc as f64 * 100.0 / capacity),
        peak_demand_pct: r2(peak_demand as f64 * 100.0 / capacity),
        peak_alloc_s: (peak_alloc > 0).then_some(peak_reached as f64 / 1000.0),
        peak_check_s: peak_state.map(|s| s.at_ms as f64 / 1000.0),
        accounting_checks: checks,
        check_seconds: (check_time.as_secs_f64() * 1000.0).round() / 1000.0,
        check_every: args.check_every,
        attempts_scheduled: attempts.scheduled.load(Ordering::Relaxed),
        attempts_failed: attempts.failed.load(Ordering::Relaxed),
        end_s: end as f64 / 1000.0,
        seconds: (wall.elapsed().as_secs_f64() * 1000.0).round() / 1000.0,
        timeline,
        pods_bound: lives
            .iter()
            .map(|l| {
                (l.name.clone(), l.arrival_ms as f64 / 1000.0, l.bound_ms.map(|b| b as f64 / 1000.0), l.node.clone())
            })
            .collect(),
    })
}

/// The accounting checks of a state.
fn check(trace: &Trace, lives: &[Life], state: &State) -> anyhow::Result<()> {
    let placements: Vec<Placement> = state
        .present
        .iter()
        .map(|(i, node)| {
            let l = &lives[*i];
            Placement { name: l.name.clone(), uid: format!("{}-uid", l.name), node: node.clone(), pod: l.pod.clone() }
        })
        .collect();
    let claims = state.claims.iter().map(|cl| (cl.metadata.name.clone().unwrap_or_default(), cl.clone())).collect();
    let v = accounting::check(&trace.nodes, &placements, &claims, state.allocated);
    anyhow::ensure!(
        v.is_empty(),
        "accounting check failed ({} violation(s)):\n  {}",
        v.len(),
        v.iter().take(20).cloned().collect::<Vec<_>>().join("\n  ")
    );
    Ok(())
}

/// Allocated GPU (solid) and waiting GPU demand (dashed) over time, per profile.
pub fn plot(path: &Path, title: &str, results: &[TimelineResult]) -> anyhow::Result<()> {
    let series: Vec<Series<'_>> = results.iter().map(|r| Series { name: &r.name, timeline: &r.timeline }).collect();
    plot_series(path, title, &series)
}

/// One curve of [`plot_series`]: a name and its (seconds, allocated %, waiting %) points.
pub struct Series<'a> {
    /// The legend.
    pub name: &'a str,
    /// The points, at every change.
    pub timeline: &'a [(f64, f64, f64)],
}

/// Allocated GPU (solid) and waiting GPU demand (dashed) over time, per series.
pub fn plot_series(path: &Path, title: &str, results: &[Series<'_>]) -> anyhow::Result<()> {
    // Up to a little after the last binding: afterwards the cluster only drains.
    let last_bind =
        results.iter().flat_map(|r| r.timeline.iter().filter(|p| p.2 > 0.0).map(|p| p.0)).fold(0.0_f64, f64::max);
    let first_idle = results.iter().flat_map(|r| r.timeline.iter().map(|p| p.0)).fold(0.0_f64, f64::max);
    let x_max = if last_bind > 0.0 { (last_bind * 1.5).min(first_idle).max(1.0) } else { first_idle.max(1.0) } / 3600.0;
    let y_max = results
        .iter()
        .flat_map(|r| r.timeline.iter().filter(|p| p.0 / 3600.0 <= x_max).map(|p| p.1.max(p.2)))
        .fold(1.0_f64, f64::max);
    let root = SVGBackend::new(path, (960, 600)).into_drawing_area();
    let draw = || -> Result<(), Box<dyn std::error::Error + '_>> {
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(16)
            .x_label_area_size(40)
            .y_label_area_size(56)
            .build_cartesian_2d(0.0..x_max, 0.0..y_max * 1.05)?;
        chart
            .configure_mesh()
            .x_desc("hours (virtual time)")
            .y_desc("% of GPU capacity: allocated (solid), waiting (dashed)")
            .draw()?;
        for (i, r) in results.iter().enumerate() {
            let c = colour(i);
            let step = |f: fn(&(f64, f64, f64)) -> f64| {
                let mut pts = Vec::new();
                let mut prev: Option<f64> = None;
                for p in r.timeline.iter().filter(|p| p.0 / 3600.0 <= x_max) {
                    if let Some(y) = prev {
                        pts.push((p.0 / 3600.0, y));
                    }
                    pts.push((p.0 / 3600.0, f(p)));
                    prev = Some(f(p));
                }
                if let Some(y) = prev {
                    pts.push((x_max, y));
                }
                pts
            };
            chart
                .draw_series(LineSeries::new(step(|p| p.1), c.stroke_width(2)))?
                .label(r.name.to_string())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
            chart.draw_series(DashedLineSeries::new(step(|p| p.2), 5, 3, c.stroke_width(1)))?;
        }
        chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw()?;
        root.present()?;
        Ok(())
    };
    draw().map_err(|e| anyhow::anyhow!("plotting {}: {e}", path.display()))
}

/// `ksched bench --mode trace-time`.
pub fn run(
    args: &super::TraceArgs,
    timeline: &TimelineArgs,
    configs: &[PathBuf],
    out: &Path,
    revision: &str,
    rt: &tokio::runtime::Handle,
) -> anyhow::Result<()> {
    let (nodes_path, pods_path, trace) = args.load(out)?;
    let profiles = args.profiles(configs)?;
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let capacity = trace.gpu_capacity_milli();
    anyhow::ensure!(capacity > 0, "{}: the nodes have no GPU", nodes_path.display());
    eprintln!(
        "trace in time: {} nodes, {} GPUs, {} pods, arrivals {}x faster; {} profile(s), one at a time",
        trace.nodes.len(),
        capacity / GPU_MILLI,
        trace.pods.len(),
        timeline.speedup,
        profiles.len()
    );
    let staying: Vec<&str> = trace.pods.iter().filter(|p| p.deletion_ms.is_none()).map(|p| p.name.as_str()).collect();
    if !staying.is_empty() {
        eprintln!(
            "{}: {} pod(s) have no deletion_time (still running when the trace ended): once bound they stay until the end of the replay ({}{})",
            pods_path.display(),
            staying.len(),
            staying.iter().take(5).copied().collect::<Vec<_>>().join(", "),
            if staying.len() > 5 { format!(" and {} more", staying.len() - 5) } else { String::new() }
        );
    }
    let mut results = Vec::new();
    let mut failures = Vec::new();
    for p in &profiles {
        match replay(&trace, p, timeline, args.object_options(), rt) {
            Ok(r) => {
                eprintln!(
                    "  {}: {} pods, {} waited, never scheduled {}; pending p50 {:.0}s p99 {:.0}s; {:.1} GPU-hours waiting; peak allocation {:.2}%; {} attempts ({} failed); {:.1}s",
                    r.name, r.pods, r.pods_that_waited, r.never_scheduled, r.pending_p50_s, r.pending_p99_s,
                    r.pending_gpu_hours, r.peak_alloc_pct, r.attempts_scheduled + r.attempts_failed, r.attempts_failed, r.seconds
                );
                results.push(r);
            }
            Err(e) => {
                eprintln!("  {}: FAILED: {e:#}", p.name);
                failures.push(format!("profile {}: {e:#}", p.name));
            }
        }
    }
    let r = TimelineResults {
        mode: "trace-time".into(),
        trace_nodes: nodes_path.display().to_string(),
        trace_pods: pods_path.display().to_string(),
        nodes: trace.nodes.len(),
        gpus: capacity / GPU_MILLI,
        speedup: timeline.speedup,
        run_speedup: timeline.run_speedup,
        slice: args.slice.map(|s| (s.start, s.count)),
        pods_without_deletion_time: staying.len(),
        git_revision: revision.to_string(),
        notes: vec![
            "times are seconds of virtual time: trace arrivals divided by the speedup, run times by the run speedup"
                .into(),
            "pending: arrival to binding; pods never scheduled count until the end".into(),
            "virtual time 0 is the earliest creation_time; pods without a deletion_time never leave".into(),
            "accounting checks (the end-of-seed checks of --mode trace) ran every check_every events, on the state at the peak allocation (as it was at peak_check_s, the last moment at the peak) and at the end".into(),
        ],
        profiles: results,
    };
    let json = out.join("results.json");
    std::fs::write(&json, serde_json::to_vec_pretty(&r)?).with_context(|| format!("writing {}", json.display()))?;
    let svg = out.join("gpu-allocation-over-time.svg");
    let title = format!("{}: arrivals {}x faster, {} GPUs", pods_path.display(), timeline.speedup, r.gpus);
    if let Err(e) = plot(&svg, &title, &r.profiles) {
        eprintln!("no plot: {e:#}");
    }
    print!("{}", table(&r));
    println!("results: {}\nplot: {}", json.display(), svg.display());
    anyhow::ensure!(failures.is_empty(), "{} replay(s) failed:\n{}", failures.len(), failures.join("\n"));
    Ok(())
}

/// The stdout table: one row per profile.
pub fn table(r: &TimelineResults) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let width = r.profiles.iter().map(|p| p.name.len()).max().unwrap_or(7).max(7);
    let _ = writeln!(
        out,
        "{:<width$}  {:>6}  {:>6}  {:>5}  {:>9}  {:>9}  {:>9}  {:>11}  {:>10}  {:>8}  {:>7}",
        "PROFILE",
        "PODS",
        "WAITED",
        "NEVER",
        "P50 WAIT",
        "P99 WAIT",
        "MAX WAIT",
        "GPU-H WAIT",
        "PEAK ALLOC",
        "ATTEMPTS",
        "SECONDS"
    );
    for p in &r.profiles {
        let _ = writeln!(
            out,
            "{:<width$}  {:>6}  {:>6}  {:>5}  {:>8.0}s  {:>8.0}s  {:>8.0}s  {:>11.1}  {:>9.2}%  {:>8}  {:>7.1}",
            p.name,
            p.pods,
            p.pods_that_waited,
            p.never_scheduled,
            p.pending_p50_s,
            p.pending_p99_s,
            p.pending_max_s,
            p.pending_gpu_hours,
            p.peak_alloc_pct,
            p.attempts_scheduled + p.attempts_failed,
            p.seconds
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The small trace at its own pace under a built-in profile, checked every `check_every`
    /// events, with `observe` called after each event.
    fn run_observed(
        profile: &str,
        opts: ObjectOptions,
        check_every: usize,
        mut observe: impl FnMut(&InProcessCluster, Moment) + Send + 'static,
    ) -> anyhow::Result<TimelineResult> {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let handle = rt.handle().clone();
        let p = profiles::built_in(profile).unwrap();
        let args = TimelineArgs { speedup: 1.0, run_speedup: 1.0, check_every };
        std::thread::spawn(move || {
            let t = crate::bench::trace::replay::tests::small_trace();
            replay_observed(&t, &p, &args, opts, &handle, &mut observe)
        })
        .join()
        .unwrap()
    }

    fn run(profile: &str, opts: ObjectOptions) -> TimelineResult {
        run_observed(profile, opts, DEFAULT_CHECK_EVERY, |_, _| {}).unwrap()
    }

    /// Makes the first allocated claim (by name) say it consumes one milli more of its first
    /// device than it does: a wrong allocation in the API, which lasts until its pod leaves
    /// and the harness deallocates the claim. Returns the violation the checks should report.
    fn corrupt_a_claim(c: &InProcessCluster) -> Option<String> {
        let mut claims = c.resource_claims();
        claims.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let claim = claims.into_iter().find(|c| c.status.as_ref().is_some_and(|s| s.allocation.is_some()))?;
        let mut claim = (*claim).clone();
        let name = claim.metadata.name.clone().unwrap_or_default();
        let result = &mut claim.status.as_mut()?.allocation.as_mut()?.devices.as_mut()?.results.as_mut()?[0];
        let consumed = result.consumed_capacity.get_or_insert_with(Default::default);
        let was: i64 = consumed.get(cluster::CAPACITY)?.0.parse().ok()?;
        let q = k8s_openapi::apimachinery::pkg::api::resource::Quantity((was + 1).to_string());
        consumed.insert(cluster::CAPACITY.into(), q);
        let want = format!(
            "pod {}: consumes {} milli of {}/{}, it uses {was}",
            name.trim_end_matches("-gpu"),
            was + 1,
            result.pool,
            result.device
        );
        c.apply_resource_claim(claim).unwrap();
        Some(want)
    }

    /// Where [`corrupt_once`] leaves the violation it expects.
    type Expected = Arc<std::sync::Mutex<Option<String>>>;

    /// `observe` corrupting a claim once, the first time `when` holds.
    fn corrupt_once(
        when: impl Fn(Moment) -> bool + Send + 'static,
    ) -> (impl FnMut(&InProcessCluster, Moment) + Send + 'static, Expected) {
        let slot = Arc::new(std::sync::Mutex::new(None));
        let out = slot.clone();
        let observe = move |c: &InProcessCluster, m: Moment| {
            let mut s = slot.lock().unwrap();
            if s.is_none() && when(m) {
                *s = corrupt_a_claim(c);
            }
        };
        (observe, out)
    }

    #[test]
    fn a_broken_allocation_is_caught_by_the_check_after_the_event_that_broke_it() {
        // a1 arrives at t=0 (event 1) and is bound at once: its claim is the first allocated.
        let (observe, want) = corrupt_once(|m| m.events == 1);
        let e = format!("{:#}", run_observed("default", ObjectOptions::default(), 1, observe).unwrap_err());
        let want = want.lock().unwrap().clone().expect("a claim was corrupted");
        assert!(want.starts_with("pod openb-pod-a1: consumes 601 milli of openb-node-0000/gpu-0"), "{want}");
        assert!(e.starts_with("accounting check after event 1 at 0.000 s of virtual time: "), "{e}");
        assert!(e.contains(&want), "{e}\nexpected: {want}");
    }

    #[test]
    fn the_peak_state_is_checked_even_without_periodic_checks() {
        let clean = run_observed("default", ObjectOptions::default(), 0, |_, _| {}).unwrap();
        assert_eq!(clean.accounting_checks, 2, "the peak's and the end's");
        let highest = clean.timeline.iter().map(|p| p.1).fold(0.0, f64::max);
        let peak_milli = (highest * 22_000.0 / 100.0).round() as i64;
        // Corrupt a claim once the allocation is at its peak: with no periodic check, only
        // the peak's check sees it (by the end the pod has left and its claim is deallocated).
        let (observe, want) = corrupt_once(move |m| m.allocated_milli == peak_milli);
        let e = format!("{:#}", run_observed("default", ObjectOptions::default(), 0, observe).unwrap_err());
        let want = want.lock().unwrap().clone().expect("a claim was corrupted at the peak");
        let head = format!(
            "accounting check of the state at the peak allocation ({:.2}% of the GPUs, reached at {:.3} s, held until {:.3} s of virtual time): ",
            clean.peak_alloc_pct,
            clean.peak_alloc_s.unwrap(),
            clean.peak_check_s.unwrap()
        );
        assert!(e.starts_with(&head), "{e}\nexpected: {head}");
        assert!(e.contains(&want), "{e}\nexpected: {want}");
    }

    #[test]
    fn checks_run_every_n_events_at_the_peak_and_at_the_end() {
        let r = run_observed("default", ObjectOptions::default(), 5, |_, _| {}).unwrap();
        // 24 arrivals and 24 departures: 9 periodic checks, the peak's and the end's.
        assert_eq!((r.check_every, r.accounting_checks), (5, 11));
        let highest = r.timeline.iter().map(|p| p.1).fold(0.0, f64::max);
        // The peak's check saw the state as the allocation first dropped from the peak (the
        // timeline's next point).
        assert_eq!((highest * 100.0).round() / 100.0, r.peak_alloc_pct);
        let i = r.timeline.iter().position(|p| p.1 == highest).unwrap();
        assert_eq!(r.timeline[i].0, r.peak_alloc_s.unwrap());
        let drop = r.timeline[i..].iter().find(|p| p.1 != highest).unwrap();
        assert!(drop.1 < highest);
        assert_eq!(drop.0, r.peak_check_s.unwrap());
    }

    fn bound(r: &TimelineResult, short: &str) -> (f64, Option<f64>) {
        let name = format!("openb-pod-{short}");
        let p = r.pods_bound.iter().find(|p| p.0 == name).unwrap();
        (p.1, p.2)
    }

    // The P100 node of the small trace, in time: a1 (600, t=0..1000) and a2 (600, t=10..5000)
    // take half of each GPU; a3 (whole, t=20) waits until a1 leaves and its claim is
    // deallocated at t=1000; a4 (400, t=2000) fits beside a2; a5 (400) and a6 (100) wait until
    // a2 leaves at t=5000.
    #[test]
    fn waiting_pods_are_retried_when_a_departure_frees_their_gpu() {
        for opts in [ObjectOptions::default(), ObjectOptions { gpu_milli_resource: false }] {
            let r = run("default", opts);
            assert_eq!(bound(&r, "a1"), (0.0, Some(0.0)));
            assert_eq!(bound(&r, "a3"), (20.0, Some(1000.0)), "{opts:?}");
            assert_eq!(bound(&r, "a4"), (2000.0, Some(2000.0)));
            assert_eq!(bound(&r, "a5"), (2000.0, Some(5000.0)));
            assert_eq!(bound(&r, "a6"), (2000.0, Some(5000.0)));
            // The default profile spread d1 and d2: d3 (two whole T4s) waits until they leave.
            assert_eq!(bound(&r, "d3"), (36.0, Some(100_000.0)));
            assert_eq!(r.never_scheduled, 0);
            assert!(r.attempts_failed > 0);
        }
    }

    #[test]
    fn bestfit_keeps_the_two_gpu_pod_from_waiting() {
        let r = run("bestfit", ObjectOptions::default());
        assert_eq!(bound(&r, "d3"), (36.0, Some(36.0)));
        assert_eq!(bound(&r, "a3"), (20.0, Some(1000.0)));
        let default = run("default", ObjectOptions::default());
        assert!(
            r.pending_gpu_hours < default.pending_gpu_hours,
            "{} vs {}",
            r.pending_gpu_hours,
            default.pending_gpu_hours
        );
    }
}
