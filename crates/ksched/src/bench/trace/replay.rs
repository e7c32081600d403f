//! The FGD paper's replay through the real framework, in process and synchronously: for each
//! pod of the arrival sequence, once, in order, one scheduling cycle as the scheduler runs it
//! (PreFilter, Filter, Score and host selection in `SchedulingAlgorithm`, then assume, Reserve,
//! Permit, PreBind, Bind) against a cache and an in-memory API that stores what DynamicResources
//! writes to claims; the bound pod is then confirmed in the cache as the informer would. A pod
//! that fits nowhere is dropped: no PostFilter (the paper has no preemption, and every trace
//! pod has the same priority, so DefaultPreemption could not act), no retry, no departures.
//!
//! No randomness: upstream v1.36's host selection breaks ties by the heap over the feasible
//! list (whose order comes from the rotating start of the filter walk), and draws a random
//! number only for nodes scored by extenders. The seed only orders the pods.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod as ApiPod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use ksched_framework::client::{ApiClient, ApiError};
use ksched_framework::handle::{EventRecorder, NoopRecorder, SchedulerView, Spawner};
use ksched_framework::listers::{ClusterLister, MemoryLister};
use ksched_framework::pod::Pod;
use ksched_framework::{CycleState, PodInfo, Snapshot};
use ksched_scheduler::cache::Cache;
use ksched_scheduler::config::KubeSchedulerConfiguration;
use ksched_scheduler::schedule_one::{NominatedPods, ScheduleError, SchedulingAlgorithm};

use super::accounting::{self, Placement};
use super::cluster::{self, ObjectOptions};
use super::csv::{Trace, TraceNode};

/// The API the replay's scheduler writes to: bindings are accepted (the replay records the
/// node itself), claim writes are stored in the lister the scheduler reads, as an API server
/// and an informer would, with resource versions and conflicts.
pub struct TraceApi {
    lister: Arc<MemoryLister>,
    rv: AtomicU64,
}

impl TraceApi {
    /// An API over `lister`.
    pub fn new(lister: Arc<MemoryLister>) -> Self {
        TraceApi { lister, rv: AtomicU64::new(1) }
    }

    fn next_rv(&self) -> String {
        (self.rv.fetch_add(1, Ordering::Relaxed) + 1).to_string()
    }

    /// Stores a new claim (as its user would create it).
    pub fn create_claim(&self, mut c: ResourceClaim) {
        c.metadata.resource_version = Some(self.next_rv());
        self.lister.resource_claims.upsert(Arc::new(c));
    }

    fn update(&self, c: &ResourceClaim) -> Result<ResourceClaim, ApiError> {
        let ns = c.metadata.namespace.as_deref().unwrap_or("default");
        let name = c.metadata.name.as_deref().unwrap_or_default();
        let Some(old) = self.lister.resource_claims.get(Some(ns), name) else {
            return Err(ApiError { code: 404, message: format!("resourceclaims.resource.k8s.io {name:?} not found") });
        };
        if old.metadata.resource_version != c.metadata.resource_version {
            return Err(ApiError {
                code: 409,
                message: format!("Operation cannot be fulfilled on resourceclaims.resource.k8s.io {name:?}: the object has been modified"),
            });
        }
        let mut c = c.clone();
        c.metadata.resource_version = Some(self.next_rv());
        self.lister.resource_claims.upsert(Arc::new(c.clone()));
        Ok(c)
    }
}

fn ready<T: Send + 'static>(r: T) -> BoxFuture<'static, T> {
    Box::pin(async move { r })
}

impl ApiClient for TraceApi {
    fn bind(&self, _: &Pod, _: &str) -> BoxFuture<'static, Result<(), ApiError>> {
        ready(Ok(()))
    }
    fn patch_pod_status(&self, _: &str, _: &str, _: serde_json::Value) -> BoxFuture<'static, Result<(), ApiError>> {
        ready(Ok(()))
    }
    fn delete_pod(&self, _: &str, _: &str, _: Option<&str>) -> BoxFuture<'static, Result<(), ApiError>> {
        ready(Ok(()))
    }
    fn get_resource_claim(&self, ns: &str, name: &str) -> BoxFuture<'static, Result<ResourceClaim, ApiError>> {
        let r = self.lister.resource_claims.get(Some(ns), name).map(|c| (*c).clone()).ok_or_else(|| ApiError {
            code: 404,
            message: format!("resourceclaims.resource.k8s.io {name:?} not found"),
        });
        ready(r)
    }
    fn update_resource_claim(&self, c: &ResourceClaim) -> BoxFuture<'static, Result<ResourceClaim, ApiError>> {
        ready(self.update(c))
    }
    fn update_resource_claim_status(&self, c: &ResourceClaim) -> BoxFuture<'static, Result<ResourceClaim, ApiError>> {
        ready(self.update(c))
    }
    fn answers_in_place(&self) -> bool {
        true
    }
}

/// What happened to one pod of the sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodOutcome {
    /// Index into the trace's pods.
    pub trace_index: usize,
    /// Its GPU request, milli.
    pub gpu_milli: i64,
    /// Whether it was placed.
    pub placed: bool,
}

/// One replay of one sequence under one profile.
#[derive(Debug, Clone)]
pub struct SeedReplay {
    /// Per pod of the sequence, in order.
    pub outcomes: Vec<PodOutcome>,
    /// Cluster GPU capacity, milli.
    pub capacity_milli: i64,
    /// Wall time of the scheduling cycles (object building excluded).
    pub elapsed: Duration,
    /// CPU time of the scheduling cycles (the replaying thread's; wall time where the system
    /// does not tell).
    pub cpu: Duration,
    /// Of which: cycles of pods that fit nowhere.
    pub failed_cpu: Duration,
    /// Of which: assume, Reserve, Permit, PreBind and Bind of placed pods.
    pub binding_cpu: Duration,
    /// Node of each placed pod, by instance name (for tests and checks).
    pub placements: HashMap<String, String>,
    /// The claims as the API holds them at the end, by name.
    pub claims: HashMap<String, Arc<ResourceClaim>>,
}

impl SeedReplay {
    /// Cumulative (arrived, allocated) milli after each pod.
    pub fn cumulative(&self) -> Vec<(i64, i64)> {
        let (mut arrived, mut allocated) = (0, 0);
        self.outcomes
            .iter()
            .map(|o| {
                arrived += o.gpu_milli;
                if o.placed {
                    allocated += o.gpu_milli;
                }
                (arrived, allocated)
            })
            .collect()
    }

    /// Allocation (% of capacity) when arrived first reaches `pct` % of capacity (`None` if
    /// the sequence never gets there).
    pub fn alloc_pct_at(&self, pct: f64) -> Option<f64> {
        let cap = self.capacity_milli as f64;
        self.cumulative().into_iter().find(|(a, _)| *a as f64 >= pct / 100.0 * cap).map(|(_, x)| x as f64 * 100.0 / cap)
    }

    /// Pods that fit nowhere, and their GPU demand in milli.
    pub fn failed(&self) -> (usize, i64) {
        self.outcomes.iter().filter(|o| !o.placed).fold((0, 0), |(n, g), o| (n + 1, g + o.gpu_milli))
    }
}

/// A point in the calling thread's CPU time (`/proc/thread-self/schedstat`, nanoseconds on
/// the CPU), or in wall time where that file does not exist: on a machine shared with other
/// work, wall time charges the replay for the time others held the CPU.
#[derive(Debug, Clone, Copy)]
pub enum ThreadCpu {
    /// Nanoseconds this thread ran.
    Cpu(u64),
    /// Wall time instead.
    Wall(Instant),
}

impl ThreadCpu {
    /// Now.
    pub fn now() -> Self {
        let ns = std::fs::read_to_string("/proc/thread-self/schedstat")
            .ok()
            .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse::<u64>().ok()));
        match ns {
            Some(ns) => ThreadCpu::Cpu(ns),
            None => ThreadCpu::Wall(Instant::now()),
        }
    }

    /// Time since `self` on the same clock.
    pub fn elapsed(&self) -> Duration {
        match (self, ThreadCpu::now()) {
            (ThreadCpu::Cpu(a), ThreadCpu::Cpu(b)) => Duration::from_nanos(b.saturating_sub(*a)),
            (ThreadCpu::Wall(a), _) => a.elapsed(),
            (ThreadCpu::Cpu(_), ThreadCpu::Wall(_)) => Duration::ZERO,
        }
    }
}

/// The instance name of the `k`-th pod of a sequence (a pod drawn twice gets two instances).
pub fn instance_name(trace_name: &str, k: usize) -> String {
    format!("{trace_name}-{k}")
}

/// One profile's scheduler over a fresh cluster of trace nodes: the framework as the scheduler
/// builds it, its cache and an in-memory API, placing one pod per call in a synchronous cycle.
pub struct Harness {
    lister: Arc<MemoryLister>,
    api: Arc<TraceApi>,
    framework: Arc<ksched_framework::Framework>,
    percentage_of_nodes_to_score: Option<i32>,
    alg: SchedulingAlgorithm,
    cache: Cache,
    snapshot: Snapshot,
    nominated: NominatedPods,
}

impl Harness {
    /// The profile `scheduler_name` of `cfg` over the Nodes, ResourceSlices and DeviceClass of
    /// `nodes`.
    pub fn new(
        nodes: &[TraceNode],
        cfg: &KubeSchedulerConfiguration,
        scheduler_name: &str,
        registry: &ksched_framework::Registry,
        opts: ObjectOptions,
    ) -> anyhow::Result<Harness> {
        let lister = Arc::new(MemoryLister::default());
        let api = Arc::new(TraceApi::new(lister.clone()));
        let recorder = |_: &str| -> Arc<dyn EventRecorder> { Arc::new(NoopRecorder) };
        let view: Arc<OnceLock<Arc<dyn SchedulerView>>> = Arc::new(OnceLock::new());
        let spawner: Spawner = Arc::new(|_| {});
        let cluster_lister: Arc<dyn ClusterLister> = lister.clone();
        let profiles = ksched_scheduler::app::build_profiles(
            cfg,
            registry,
            api.clone(),
            &recorder,
            cluster_lister,
            view,
            spawner,
            &[],
        )?;
        let profile = profiles.get(scheduler_name).ok_or_else(|| anyhow::anyhow!("no profile {scheduler_name:?}"))?;
        let cache = Cache::new();
        lister.device_classes.upsert(Arc::new(cluster::device_class()));
        for n in nodes {
            cache.add_node(Arc::new((&cluster::node(n, opts)).into()));
            if let Some(s) = cluster::slice(n) {
                lister.resource_slices.upsert(Arc::new(s));
            }
        }
        Ok(Harness {
            lister,
            api,
            framework: profile.framework.clone(),
            percentage_of_nodes_to_score: profile.percentage_of_nodes_to_score,
            alg: SchedulingAlgorithm {
                percentage_of_nodes_to_score: cfg.percentage_of_nodes_to_score.unwrap_or(0),
                ..Default::default()
            },
            cache,
            snapshot: Snapshot::default(),
            nominated: NominatedPods::default(),
        })
    }

    /// Stores a pod's claim, as its user would create it before the pod.
    pub fn create_claim(&self, c: ResourceClaim) {
        self.api.create_claim(c);
    }

    /// One scheduling cycle for `pod` and, when a node is found, its binding: the node (`None`
    /// when it fits nowhere) and the CPU time the binding took.
    pub fn schedule(&mut self, pod: &ApiPod) -> anyhow::Result<(Option<String>, Duration)> {
        schedule_once(
            &self.framework,
            self.percentage_of_nodes_to_score,
            &mut self.alg,
            &self.cache,
            &mut self.snapshot,
            &self.nominated,
            pod,
        )
    }

    /// The claims as the API holds them now, by name.
    pub fn claims(&self) -> HashMap<String, Arc<ResourceClaim>> {
        self.lister
            .resource_claims
            .list()
            .into_iter()
            .map(|c| (c.metadata.name.clone().unwrap_or_default(), c))
            .collect()
    }
}

/// Replays `sequence` (indices into `trace.pods`) under `cfg` on a fresh cluster, then runs the
/// accounting checks; a broken check fails the replay.
pub fn replay(
    trace: &Trace,
    sequence: &[usize],
    cfg: &KubeSchedulerConfiguration,
    scheduler_name: &str,
    registry: &ksched_framework::Registry,
    opts: ObjectOptions,
) -> anyhow::Result<SeedReplay> {
    let mut h = Harness::new(&trace.nodes, cfg, scheduler_name, registry, opts)?;
    let mut outcomes = Vec::with_capacity(sequence.len());
    let mut placements = HashMap::new();
    let mut elapsed = Duration::ZERO;
    let (mut cpu, mut failed_cpu, mut binding_cpu) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    for (k, &i) in sequence.iter().enumerate() {
        let p = &trace.pods[i];
        let name = instance_name(&p.name, k);
        let uid = format!("{name}-uid");
        let (pod, claim): (ApiPod, _) = cluster::pod(p, &name, &uid, scheduler_name, opts);
        if let Some(c) = claim {
            h.create_claim(c);
        }
        let (start, start_cpu) = (Instant::now(), ThreadCpu::now());
        let (node, binding) = h.schedule(&pod).map_err(|e| anyhow::anyhow!("pod {k} ({name}): {e}"))?;
        elapsed += start.elapsed();
        let took = start_cpu.elapsed();
        cpu += took;
        binding_cpu += binding;
        if node.is_none() {
            failed_cpu += took;
        }
        outcomes.push(PodOutcome { trace_index: i, gpu_milli: p.gpu_request_milli(), placed: node.is_some() });
        if let Some(n) = node {
            placements.insert(name, n);
        }
    }
    let claims = h.claims();
    let out = SeedReplay {
        outcomes,
        capacity_milli: trace.gpu_capacity_milli(),
        elapsed,
        cpu,
        failed_cpu,
        binding_cpu,
        placements,
        claims,
    };

    let placed: Vec<Placement> = sequence
        .iter()
        .enumerate()
        .map(|(k, &i)| {
            let p = &trace.pods[i];
            let name = instance_name(&p.name, k);
            Placement { node: out.placements.get(&name).cloned(), uid: format!("{name}-uid"), name, pod: p.clone() }
        })
        .collect();
    let allocated: i64 = out.outcomes.iter().filter(|o| o.placed).map(|o| o.gpu_milli).sum();
    let violations = accounting::check(&trace.nodes, &placed, &out.claims, allocated);
    anyhow::ensure!(
        violations.is_empty(),
        "accounting check failed ({} violation(s)):\n  {}",
        violations.len(),
        violations.iter().take(20).cloned().collect::<Vec<_>>().join("\n  ")
    );
    Ok(out)
}

/// One scheduling cycle and, when a node is found, its binding (and how long that took);
/// `None` when the pod fits nowhere. Anything else (a plugin error, a failed Reserve or PreBind) is an error of the
/// replay: nothing else runs concurrently, so it cannot be a lost race.
fn schedule_once(
    fw: &ksched_framework::Framework,
    percentage: Option<i32>,
    alg: &mut SchedulingAlgorithm,
    cache: &Cache,
    snapshot: &mut Snapshot,
    nominated: &NominatedPods,
    pod: &ApiPod,
) -> anyhow::Result<(Option<String>, Duration)> {
    let pi = PodInfo::new(Arc::new(pod.into()));
    cache.update_snapshot(snapshot).map_err(|e| anyhow::anyhow!("snapshot: {e}"))?;
    let mut state = CycleState::new();
    let host = match alg.schedule_pod(fw, percentage, &mut state, &pi, snapshot, nominated) {
        Ok(r) => r.suggested_host,
        Err(ScheduleError::Fit(_)) => return Ok((None, Duration::ZERO)),
        Err(e) => anyhow::bail!("scheduling: {}", e.message()),
    };
    let start = ThreadCpu::now();
    let assumed = Arc::new(pi.assumed_on(&host));
    cache.assume_pod(assumed.clone()).map_err(|e| anyhow::anyhow!("assume: {e}"))?;
    let s = fw.run_reserve(&mut state, &assumed, &host);
    anyhow::ensure!(s.is_success(), "Reserve on {host}: {}", s.message());
    let s = fw.run_permit(&mut state, &assumed, &host);
    anyhow::ensure!(s.is_success(), "Permit on {host}: {}", s.message());
    let pre_flight = fw.run_pre_bind_pre_flights(&mut state, &assumed, &host);
    anyhow::ensure!(pre_flight.is_success() || pre_flight.is_skip(), "PreBindPreFlight: {}", pre_flight.message());
    if pre_flight.is_success() {
        let s = futures::executor::block_on(fw.run_pre_bind(&state, &assumed, &host));
        anyhow::ensure!(s.is_success(), "PreBind on {host}: {}", s.message());
    }
    let s = futures::executor::block_on(fw.run_bind(&state, &assumed, &host));
    anyhow::ensure!(s.is_success(), "Bind on {host}: {}", s.message());
    // The informer's confirmation of the binding.
    cache.add_pod(assumed.pod_with_node_name()).map_err(|e| anyhow::anyhow!("confirm: {e}"))?;
    fw.run_post_bind(&state, &assumed, &host);
    Ok((Some(host), start.elapsed()))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::bench::trace::{csv, profiles};

    /// The committed small trace (see its README): every GPU pod is pinned by `gpu_spec` to a
    /// model only one node has, except the T4 pods, which two identical nodes can take.
    pub(crate) fn small_trace() -> Trace {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/trace-small");
        let (trace, _) = Trace::load_with(&dir.join("nodes.csv"), &dir.join("pods.csv"), csv::TimeUnit::Auto).unwrap();
        trace
    }

    /// The registry of a replay of `t`'s pods in file order, seed 1.
    fn test_registry(t: &Trace) -> ksched_framework::Registry {
        let seq: Vec<usize> = (0..t.pods.len()).collect();
        let nodes: Vec<String> = t.nodes.iter().map(|n| n.name.clone()).collect();
        profiles::registry(1, Arc::new(crate::bench::trace::fgd::FgdWorkload::new(&t.pods, &seq, &nodes, 1)))
    }

    fn in_file_order(profile: &str, opts: ObjectOptions) -> (Trace, SeedReplay) {
        let t = small_trace();
        let p = profiles::built_in(profile).unwrap();
        let seq: Vec<usize> = (0..t.pods.len()).collect();
        let r =
            replay(&t, &seq, &crate::bench::trace::harness_config(&p), &p.scheduler_name(), &test_registry(&t), opts)
                .unwrap();
        (t, r)
    }

    fn failed(t: &Trace, r: &SeedReplay) -> Vec<String> {
        let mut v: Vec<String> = r
            .outcomes
            .iter()
            .filter(|o| !o.placed)
            .map(|o| t.pods[o.trace_index].name.trim_start_matches("openb-pod-").to_string())
            .collect();
        v.sort();
        v
    }

    fn node_of(r: &SeedReplay, short: &str, k: usize) -> Option<String> {
        r.placements.get(&instance_name(&format!("openb-pod-{short}"), k)).cloned()
    }

    /// (device, consumed milli) of each device in a pod's claim.
    fn devices(r: &SeedReplay, short: &str, k: usize) -> Vec<(String, String)> {
        let c = &r.claims[&cluster::claim_name(&instance_name(&format!("openb-pod-{short}"), k))];
        let a = c.status.as_ref().and_then(|s| s.allocation.as_ref());
        a.into_iter()
            .flat_map(|a| a.devices.iter().flat_map(|d| d.results.iter().flatten()))
            .map(|d| (d.device.clone(), d.consumed_capacity.as_ref().unwrap()[cluster::CAPACITY].0.clone()))
            .collect()
    }

    // Hand computation (file order; devices are tried in slice order, gpu-0 first):
    // P100 node, 2 GPUs: a1 600 -> gpu-0, a2 600 -> gpu-1, a3 whole fails (no free GPU), a4 400
    //   -> gpu-0, a5 400 -> gpu-1, a6 100 fails (full): 2000 allocated.
    // V100M32 node, 8 GPUs: b1 4 whole -> gpu-0..3, b2 300 -> gpu-4, b3 4 whole fails (3 free),
    //   b4 3 whole -> gpu-5..7, b5 700 -> gpu-4: 8000.
    // G2 node, 96 cpus: c1 (90 cpus) 1 GPU, c2 (8 cpus) fails on cpu, c3 (6 cpus) 2 GPUs: 3000.
    // e1 (G2 or V100M32, 8 cpus): V100M32 full, G2 out of cpu: fails.
    // T4 nodes, 2 GPUs each: d1 500 on one. The default profile (LeastAllocated, Balanced)
    //   puts d2 500 on the other, so d3 (2 whole) fails and d4 500 takes a half: 1500.
    //   BestFit puts d2 beside d1, d3 takes the other node whole, d4 the first node's gpu-1: 3500.
    // f1..f5 use no GPU and fit anywhere.
    // Total requested 23100 of 22000: default allocates 14500 (65.91%), BestFit 16500 (75%).

    #[test]
    fn the_default_profile_strands_half_gpus_on_the_small_trace() {
        let (t, r) = in_file_order("default", ObjectOptions::default());
        assert_eq!(failed(&t, &r), ["a3", "a6", "b3", "c2", "d3", "e1"]);
        assert_eq!(r.cumulative().last(), Some(&(23_100, 14_500)));
        assert_eq!(r.failed(), (6, 8_600));
        let (d1, d2) = (node_of(&r, "d1", 4).unwrap(), node_of(&r, "d2", 7).unwrap());
        assert_ne!(d1, d2, "the default profile spreads");
        assert_eq!(devices(&r, "a1", 0), [("gpu-0".to_string(), "600".to_string())]);
        assert_eq!(devices(&r, "a2", 2), [("gpu-1".to_string(), "600".to_string())]);
        assert_eq!(devices(&r, "a4", 16), [("gpu-0".to_string(), "400".to_string())]);
        assert_eq!(devices(&r, "a5", 17), [("gpu-1".to_string(), "400".to_string())]);
        assert!(devices(&r, "a3", 5).is_empty(), "a dropped pod's claim stays unallocated");
        let b4: Vec<String> = devices(&r, "b4", 12).into_iter().map(|d| format!("{}={}", d.0, d.1)).collect();
        assert_eq!(b4, ["gpu-5=1000", "gpu-6=1000", "gpu-7=1000"], "whole GPUs consume their whole capacity");
        assert_eq!(devices(&r, "b5", 14), [("gpu-4".to_string(), "700".to_string())]);
        assert_eq!(node_of(&r, "e1", 15), None);
        // Arrived first reaches 22000 with e1 (22200), before a4 and a5 are placed.
        assert_eq!(r.alloc_pct_at(100.0), Some(13_700.0 * 100.0 / 22_000.0));
        assert_eq!(r.alloc_pct_at(106.0), None, "the sequence stops at 105%");
    }

    #[test]
    fn bestfit_packs_the_half_gpus_and_fits_the_two_gpu_pod() {
        let (t, r) = in_file_order("bestfit", ObjectOptions::default());
        assert_eq!(failed(&t, &r), ["a3", "a6", "b3", "c2", "e1"]);
        assert_eq!(r.cumulative().last(), Some(&(23_100, 16_500)));
        let (d1, d2, d3) =
            (node_of(&r, "d1", 4).unwrap(), node_of(&r, "d2", 7).unwrap(), node_of(&r, "d3", 10).unwrap());
        assert_eq!(d1, d2);
        assert_ne!(d1, d3);
        assert_eq!(node_of(&r, "d4", 13), Some(d1));
        assert_eq!(devices(&r, "d4", 13), [("gpu-1".to_string(), "500".to_string())]);
    }

    #[test]
    fn most_allocated_packs_by_cpu_and_random_is_one_of_the_two() {
        let (_, r) = in_file_order("most-allocated", ObjectOptions::default());
        assert_eq!(r.cumulative().last(), Some(&(23_100, 16_500)));
        let (_, r) = in_file_order("random", ObjectOptions::default());
        let allocated = r.cumulative().last().unwrap().1;
        assert!(allocated == 14_500 || allocated == 16_500, "{allocated}");
    }

    #[test]
    fn the_gpu_milli_mirror_changes_no_default_placement() {
        let (_, with) = in_file_order("default", ObjectOptions::default());
        let (_, without) = in_file_order("default", ObjectOptions { gpu_milli_resource: false });
        assert_eq!(with.placements, without.placements);
    }

    /// The repository's fragmentation-aware policy, as `--config` loads it.
    pub(crate) fn policy_profile() -> profiles::TraceProfile {
        let file =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/gpu-sharing/scheduler-config.yaml");
        profiles::from_arg(std::path::Path::new(&format!("policy={}", file.display()))).unwrap()
    }

    fn gpu_node(name: &str, cores: i64, memory_gib: i64, gpus: i64) -> TraceNode {
        TraceNode {
            name: name.into(),
            cpu_milli: cores * 1000,
            memory_mib: memory_gib * 1024,
            gpus,
            model: "T4".into(),
        }
    }

    fn shape(
        name: &str,
        cores: i64,
        memory_gib: i64,
        num_gpu: i64,
        gpu_milli: i64,
    ) -> crate::bench::trace::csv::TracePod {
        crate::bench::trace::csv::TracePod::with_requests(
            name,
            cores * 1000,
            memory_gib * 1024,
            num_gpu,
            gpu_milli,
            &[],
        )
    }

    /// Where `profile` puts an 8-core, 4 GiB pod without GPU after it has scheduled the earlier
    /// pods of the mix on `school`.
    fn cpu_pod_after_the_mix(profile: &profiles::TraceProfile) -> String {
        let nodes = [
            gpu_node("school", 48, 256, 3),
            gpu_node("tight", 9, 64, 2),
            gpu_node("middle", 72, 128, 4),
            gpu_node("roomy", 80, 256, 2),
        ];
        let opts = ObjectOptions::default();
        let cfg = crate::bench::trace::harness_config(profile);
        let sched = profile.scheduler_name();
        let mut h = Harness::new(
            &nodes,
            &cfg,
            &sched,
            &profiles::registry(1, Arc::new(crate::bench::trace::fgd::FgdWorkload::new(&[], &[], &[], 1))),
            opts,
        )
        .unwrap();
        let earlier = [
            shape("whole-1", 4, 8, 1, 1000),
            shape("share-1", 20, 16, 1, 500),
            shape("whole-2", 4, 8, 1, 1000),
            shape("share-2", 20, 16, 1, 500),
        ];
        for p in &earlier {
            let (mut pod, claim) = cluster::pod(p, &p.name, &format!("{}-uid", p.name), &sched, opts);
            pod.spec.as_mut().unwrap().node_selector =
                Some([("kubernetes.io/hostname".to_string(), "school".to_string())].into());
            if let Some(c) = claim {
                h.create_claim(c);
            }
            let (node, _) = h.schedule(&pod).unwrap();
            assert_eq!(node.as_deref(), Some("school"), "{} under {}", p.name, profile.name);
        }
        let cpu = shape("cpu-only", 8, 4, 0, 0);
        let (pod, claim) = cluster::pod(&cpu, &cpu.name, "cpu-only-uid", &sched, opts);
        assert!(claim.is_none());
        h.schedule(&pod).unwrap().0.unwrap_or_else(|| panic!("the cpu pod fits nowhere under {}", profile.name))
    }

    /// The case where the fragmentation-aware policy must choose differently from BestFit and
    /// from LeastAllocated, run through the real profiles and plugins.
    ///
    /// The mix, learnt by DeviceFragmentation from the four earlier pods (pinned by a node
    /// selector to `school`, which they fill: its cpu and GPUs are gone, so it takes nothing
    /// more): half are whole GPUs with 4 cores and 8 GiB, half are half GPUs with 20 cores and
    /// 16 GiB, so the mix asks 16 cores and 16 GiB per GPU. Then a pod asks for 8 cores, 4 GiB
    /// and no GPU. The T4 nodes it can go to, all empty:
    ///
    /// - `tight`: 9 cores, 64 GiB, 2 GPUs. The pod leaves 1 core, which strands both GPUs (no
    ///   shape of the mix fits in 1 core): the policy loses 2 whole GPUs there. `bestfit`
    ///   (NodeResourcesFit MostAllocated over cpu and the GPU milli mirror) scores it highest:
    ///   8 of 9 cores used (88) against 11 and 10 on the others; the GPU mirror is 0 on all.
    /// - `roomy`: 80 cores, 256 GiB, 2 GPUs, the largest free fraction of cpu and memory, so
    ///   LeastAllocated (90 for cpu, 98 for memory) prefers it by more than BalancedAllocation
    ///   prefers `middle` (cpu and memory fractions 0.11 and 0.03 there, 0.10 and 0.02 here):
    ///   the `default` profile puts the pod there. The 8 cores drop it from 4 copies of the
    ///   20-core half-GPU shape (80 cores; its 2 GPUs hold 4) to 3 (72 cores): half a GPU of
    ///   the mix's usable capacity.
    /// - `middle`: 72 cores, 128 GiB, 4 GPUs. 3 copies of the 20-core shape before and after
    ///   (72 and 64 cores), whole-GPU copies still fit, and 64 cores still feed its 4 GPUs at
    ///   the mix's 16 per GPU: nothing usable is lost and nothing starves, so the
    ///   policy (`examples/gpu-sharing/scheduler-config.yaml`: DeviceFragmentation, whose
    ///   normalization gives 100 to the least loss alone, weight 10, NodeResourcesFit scoring
    ///   off) puts it there.
    ///
    /// The GPU counts make each shape of the mix necessary: the policy's tie-break (the least
    /// free GPU left) would take `tight` among equal losses, and `roomy` over `middle`; only the
    /// whole-GPU shape's loss rules out `tight`, and only the half-GPU shape's rules out `roomy`.
    #[test]
    fn the_policy_avoids_stranding_gpus_where_bestfit_and_least_allocated_do_not() {
        assert_eq!(cpu_pod_after_the_mix(&policy_profile()), "middle");
        assert_eq!(cpu_pod_after_the_mix(&profiles::built_in("bestfit").unwrap()), "tight");
        assert_eq!(cpu_pod_after_the_mix(&profiles::built_in("default").unwrap()), "roomy");
    }
}
