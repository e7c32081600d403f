//! FGD, the FGD paper's policy (Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing
//! Workloads with Fragmentation Gradient Descent", USENIX ATC'23, section 4), as a score plugin
//! of this harness, so that every comparison with it is made in one run, on the same cluster
//! objects, allocator and arrival sequences as the other profiles.
//!
//! From the paper:
//! - The *target workload* is the distribution of pod types in the workload, known in advance:
//!   a type is (cpu, GPU share per GPU, number of GPUs, GPU models accepted); the most popular
//!   types that together make 95% of the pods, their frequencies renormalized over them (the
//!   authors' experiments: cpu-only pods included, popularity threshold 95%, step 1).
//! - A node's *fragmentation* for a type is the free GPU capacity the type cannot use there:
//!   all of it when the type asks for no GPU, accepts none of the node's GPUs, or cannot run
//!   there at all (not enough GPUs with room for its share, or not enough cpu); otherwise the
//!   free capacity of the GPUs with less room than its share (for whole GPUs: the partly used
//!   ones). The node's fragmentation is the frequency-weighted sum over the types.
//! - A placement's score is `sigmoid((F_before − F_after) / 1000) × 100` truncated to an
//!   integer (0-100), the fragmentation measured in milli-GPUs: placements that add the least
//!   fragmentation score highest. Memory is not part of the measure (the filter checks it).
//!
//! Ties are many (integer scores), and how they are broken matters: the paper's simulator keeps
//! a fixed order of the nodes per experiment seed and takes the first of the best nodes, which
//! packs pods onto a stable subset of nodes. `fgd` leaves ties to the scheduler (its own host
//! selection, which rotates where the node walk starts); `fgd-fixed-order` breaks them by a
//! per-seed permutation of the nodes, as the paper's published figures were made.
//!
//! The GPU a share goes to: the paper's FGD picks the GPU whose placement scores best; here the
//! allocator chooses (the profile sets DynamicResources `deviceSelection: BestFit`, the GPU left
//! with least room), and the score is that of the allocator's choice, so the node FGD picks and
//! the GPU the allocator gives agree. Measured against the published medians, this reproduces
//! FGD within the tolerance the docs give (docs/placement-quality.md).

use std::collections::HashMap;
use std::sync::Arc;

use ksched_dra::allocator::Features;
use ksched_dra::manager::SharedDraManager;
use ksched_framework::{
    CycleState, Handle, NodeInfo, Plugin, PodInfo, PreScorePlugin, ScorePlugin, Snapshot, Status, MAX_NODE_SCORE,
};
use ksched_plugins::devicefragmentation::devices::DeviceTracker;
use ksched_plugins::devicefragmentation::measure::{Demand, NodeState};
use parking_lot::Mutex;

use super::arrivals::SplitMix64;
use super::cluster::{self, CAPACITY, DEVICE_CLASS};
use super::csv::TracePod;

/// The plugin's name in profiles.
pub const FGD_SCORE: &str = "TraceFGDScore";

/// Share of the pods the typical types cover (the paper's popularity threshold).
const POPULARITY: f64 = 0.95;

/// One type of the target workload.
#[derive(Debug, Clone, PartialEq)]
pub struct TypicalPod {
    /// Cpu request, millicores.
    pub milli_cpu: i64,
    /// GPUs asked for (0: none).
    pub num_gpu: i64,
    /// Share of each of them, milli-GPUs (1000: whole).
    pub gpu_milli: i64,
    /// The CEL selectors of its GPU models (empty: any model).
    pub selectors: Vec<String>,
    /// Its frequency in the target workload (the typical types sum to 1).
    pub frequency: f64,
}

/// The paper's target workload of the pods `sequence` draws from `pods`.
pub fn typical_pods(pods: &[TracePod], sequence: &[usize]) -> Vec<TypicalPod> {
    let mut counts: HashMap<(i64, i64, i64, Vec<String>), usize> = HashMap::new();
    for &i in sequence {
        let p = &pods[i];
        let gpu = if p.num_gpu > 0 { p.gpu_milli } else { 0 };
        let selectors = if p.num_gpu > 0 && !p.gpu_spec.is_empty() {
            vec![cluster::model_selector(&p.gpu_spec)]
        } else {
            Vec::new()
        };
        *counts.entry((p.cpu_milli, p.num_gpu, gpu, selectors)).or_default() += 1;
    }
    let total = sequence.len().max(1) as f64;
    let mut types: Vec<_> = counts.into_iter().collect();
    // Most popular first, then a fixed order of the types themselves (not hash order).
    types.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let mut covered = 0usize;
    let mut out = Vec::new();
    for ((milli_cpu, num_gpu, gpu_milli, selectors), n) in types {
        if covered as f64 >= POPULARITY * total {
            break;
        }
        covered += n;
        out.push(TypicalPod { milli_cpu, num_gpu, gpu_milli, selectors, frequency: n as f64 });
    }
    for t in &mut out {
        t.frequency /= covered.max(1) as f64;
    }
    out
}

/// What the FGD profiles of one replay share: the target workload and the per-seed node order.
#[derive(Debug, Clone)]
pub struct FgdWorkload {
    /// The typical pod types.
    pub typical: Vec<TypicalPod>,
    /// Each node's place in the seed's node order (for `fgd-fixed-order`).
    pub rank: HashMap<String, u32>,
}

impl FgdWorkload {
    /// The workload of `sequence`, with the node order of `seed` over `nodes`.
    pub fn new(pods: &[TracePod], sequence: &[usize], nodes: &[String], seed: u64) -> Self {
        let mut order: Vec<usize> = (0..nodes.len()).collect();
        // A different stream from the arrival sequence's (same seed, other constant).
        let mut rng = SplitMix64::new(seed ^ 0x6a09_e667_f3bc_c909);
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i + 1));
        }
        let rank = order.iter().enumerate().map(|(r, &i)| (nodes[i].clone(), r as u32)).collect();
        FgdWorkload { typical: typical_pods(pods, sequence), rank }
    }
}

/// The plugin's args (`tieBreak: FixedNodeOrder` for the paper's tie-breaking).
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FgdArgs {
    #[serde(default)]
    tie_break: Option<String>,
}

/// Builds the plugin over `workload`.
pub fn new(
    workload: Arc<FgdWorkload>,
    args: Option<&serde_json::Value>,
    handle: &Handle,
) -> Result<Arc<dyn Plugin>, String> {
    let args: FgdArgs = match args {
        Some(v) => serde_json::from_value(v.clone()).map_err(|e| format!("{FGD_SCORE} args: {e}"))?,
        None => FgdArgs::default(),
    };
    let fixed_order = match args.tie_break.as_deref() {
        None | Some("Scheduler") => false,
        Some("FixedNodeOrder") => true,
        Some(other) => return Err(format!("{FGD_SCORE} args: tieBreak {other:?}: Scheduler or FixedNodeOrder")),
    };
    let dra = ksched_dra::manager::from_shared(&handle.shared).unwrap_or_else(|| {
        ksched_plugins::dynamicresources::manager::shared(&handle.shared, handle.lister.clone())
            as Arc<dyn SharedDraManager>
    });
    let mut classes: Vec<Vec<String>> = vec![Vec::new()];
    for t in &workload.typical {
        if !classes.contains(&t.selectors) {
            classes.push(t.selectors.clone());
        }
    }
    let type_class =
        workload.typical.iter().map(|t| classes.iter().position(|c| *c == t.selectors).unwrap_or(0) as u8).collect();
    Ok(Arc::new(FgdScore {
        workload,
        fixed_order,
        dra,
        features: ksched_plugins::dynamicresources::allocator_features(&handle.features),
        classes,
        type_class,
        state: Mutex::new(Tracked {
            devices: DeviceTracker::new(DEVICE_CLASS, Some(CAPACITY), true, false),
            by_node: HashMap::new(),
        }),
    }))
}

struct Tracked {
    devices: DeviceTracker,
    /// Per node: its state and its fragmentation before the pod.
    by_node: HashMap<String, (Arc<NodeState>, f64)>,
}

struct FgdScore {
    workload: Arc<FgdWorkload>,
    fixed_order: bool,
    dra: Arc<dyn SharedDraManager>,
    features: Features,
    /// Eligibility classes: the distinct model selectors of the types (class 0: any model).
    classes: Vec<Vec<String>>,
    /// Each typical type's class.
    type_class: Vec<u8>,
    state: Mutex<Tracked>,
}

const POD_KEY: &str = "PreScoreTraceFGD";

/// The pod being scheduled, as FGD sees it.
#[derive(Debug, Clone)]
struct FgdPod {
    milli_cpu: i64,
    demand: Demand,
    /// The class of its model selectors (`None`: a selector set no typical type has: matched
    /// by evaluating nothing, so every device counts).
    class: Option<u8>,
    /// Per node: fragmentation before and the node state, read in PreScore.
    nodes: Arc<HashMap<String, (Arc<NodeState>, f64)>>,
}

impl FgdScore {
    /// The node's fragmentation for the target workload, with `free` per device and `cpu` free.
    fn fragmentation(&self, node: &NodeState, free: &[i64], cpu: i64) -> f64 {
        let total: i64 = free.iter().map(|f| (*f).max(0)).sum();
        let mut f = 0.0;
        for (t, &class) in self.workload.typical.iter().zip(&self.type_class) {
            let frag = if t.num_gpu == 0 || t.gpu_milli == 0 {
                total
            } else {
                let accepts = |i: usize| node.devices[i].classes & (1u64 << class) != 0;
                let room = |i: usize| {
                    let need = if t.gpu_milli >= 1000 { node.devices[i].capacity } else { t.gpu_milli };
                    free[i] >= need
                };
                let fitting = (0..free.len()).filter(|&i| accepts(i) && room(i)).count() as i64;
                if fitting >= t.num_gpu && cpu >= t.milli_cpu {
                    (0..free.len()).filter(|&i| !accepts(i) || !room(i)).map(|i| free[i].max(0)).sum()
                } else {
                    total
                }
            };
            f += t.frequency * frag as f64;
        }
        f
    }

    /// The score of placing `pod` on a node in `state` (fragmentation `before`), with the
    /// devices the allocator's best fit gives it; `None` when they do not fit.
    fn score_on(&self, pod: &FgdPod, state: &NodeState, before: f64) -> Option<i64> {
        let accepts = |i: usize| pod.class.is_none_or(|c| state.devices[i].classes & (1u64 << c) != 0);
        let mut free: Vec<i64> = state.devices.iter().map(|d| d.free).collect();
        match pod.demand {
            Demand::None => {}
            Demand::Share(m) => {
                let best = (0..free.len()).filter(|&i| accepts(i) && free[i] >= m).min_by_key(|&i| free[i] - m)?;
                free[best] -= m;
            }
            Demand::Whole(n) => {
                let whole: Vec<usize> = (0..free.len())
                    .filter(|&i| accepts(i) && free[i] == state.devices[i].capacity)
                    .take(n as usize)
                    .collect();
                if whole.len() < n as usize {
                    return None;
                }
                for i in whole {
                    free[i] = 0;
                }
            }
        }
        let cpu = state.milli_cpu.unwrap_or(i64::MAX) - pod.milli_cpu;
        let after = self.fragmentation(state, &free, cpu);
        let x = (before - after) / 1000.0;
        Some((100.0 / (1.0 + (-x).exp())) as i64)
    }
}

impl Plugin for FgdScore {
    fn name(&self) -> &str {
        FGD_SCORE
    }
    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        Some(self)
    }
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }
}

impl PreScorePlugin for FgdScore {
    fn pre_score(&self, state: &mut CycleState, pod: &PodInfo, _nodes: &[&NodeInfo], snapshot: &Snapshot) -> Status {
        let (demand, selectors) = match pod_demand(&*self.dra, pod) {
            Ok(d) => d,
            Err(e) => return Status::error(format!("{FGD_SCORE}: {e}")),
        };
        let mut tracked = self.state.lock();
        let Tracked { devices, by_node } = &mut *tracked;
        if !devices.refresh(&*self.dra, &self.classes) {
            return Status::skip();
        }
        let allocated = self.dra.allocated();
        for ni in snapshot.list() {
            let Some((st, _)) = devices.node_state(&*self.dra, &self.features, ni, &*allocated) else {
                return Status::skip();
            };
            let stale = by_node.get(ni.name()).is_none_or(|(s, _)| !Arc::ptr_eq(s, &st));
            if stale {
                let free: Vec<i64> = st.devices.iter().map(|d| d.free).collect();
                let f = self.fragmentation(&st, &free, st.milli_cpu.unwrap_or(i64::MAX));
                by_node.insert(ni.name().to_string(), (st, f));
            }
        }
        let class = if selectors.is_empty() {
            Some(0)
        } else {
            self.classes.iter().position(|c| *c == selectors).map(|c| c as u8)
        };
        state.write(
            POD_KEY,
            FgdPod { milli_cpu: pod.requests.milli_cpu, demand, class, nodes: Arc::new(by_node.clone()) },
        );
        Status::success()
    }
}

impl ScorePlugin for FgdScore {
    fn score(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let pod =
            state.read::<FgdPod>(POD_KEY).map_err(|_| Status::error(format!("{FGD_SCORE}: no PreScore state")))?;
        let Some((st, before)) = pod.nodes.get(node.name()) else { return Ok(0) };
        let score = self.score_on(pod, st, *before).unwrap_or(0);
        if !self.fixed_order {
            return Ok(score);
        }
        // The score first, then the node's place in the seed's order: the first of the best.
        let rank = i64::from(self.workload.rank.get(node.name()).copied().unwrap_or(u32::MAX >> 1));
        Ok(score * (1 << 32) + ((1i64 << 32) - 1 - rank))
    }

    fn has_normalize(&self) -> bool {
        self.fixed_order
    }

    fn normalize_score(&self, _state: &CycleState, _pod: &PodInfo, _nodes: &[&NodeInfo], scores: &mut [i64]) -> Status {
        // The one best (score, order) gets 100, the others less: host selection then takes it.
        ksched_plugins::devicefragmentation::normalize(scores);
        debug_assert!(scores.iter().all(|s| (0..=MAX_NODE_SCORE).contains(s)));
        Status::success()
    }
}

/// The pod's GPU demand and model selectors, from its claim.
fn pod_demand(dra: &dyn SharedDraManager, pod: &PodInfo) -> Result<(Demand, Vec<String>), String> {
    let p = &pod.pod;
    let ns = p.metadata.namespace.as_deref().unwrap_or_default();
    let mut demand = Demand::None;
    let mut selectors = Vec::new();
    for pc in p.spec.as_ref().and_then(|s| s.resource_claims.as_ref()).into_iter().flatten() {
        let (name, _) = ksched_dra::claim::claim_name(p, pc)?;
        let Some(name) = name else { continue };
        let claim = dra.claim(ns, &name)?;
        for r in claim.spec.devices.as_ref().and_then(|d| d.requests.as_deref()).unwrap_or_default() {
            let Some(e) = &r.exactly else { continue };
            if e.device_class_name != DEVICE_CLASS {
                continue;
            }
            let count = e.count.unwrap_or(1);
            let share = e
                .capacity
                .as_ref()
                .and_then(|c| c.requests.as_ref()?.get(CAPACITY))
                .map(|q| ksched_dra::quantity::Quantity::of(q).map(|v| v.as_f64().round() as i64).unwrap_or(0));
            demand = match share {
                Some(m) => Demand::Share(m),
                None => Demand::Whole(count as u32),
            };
            selectors =
                e.selectors.iter().flatten().filter_map(|s| s.cel.as_ref().map(|c| c.expression.clone())).collect();
        }
    }
    Ok((demand, selectors))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(cpu: i64, num_gpu: i64, milli: i64, spec: &[&str]) -> TracePod {
        TracePod::with_requests("", cpu, 1, num_gpu, milli, spec)
    }

    #[test]
    fn the_target_workload_is_the_popular_types_renormalized() {
        // 20 pods: 10 of type A, 6 of B, 3 of C, 1 of D. A+B+C make 95%: D is left out.
        let pods =
            vec![pod(4000, 1, 500, &[]), pod(8000, 1, 1000, &[]), pod(2000, 0, 0, &[]), pod(4000, 1, 500, &["T4"])];
        let seq: Vec<usize> = [0; 10].iter().chain(&[1; 6]).chain(&[2; 3]).chain(&[3; 1]).copied().collect();
        let t = typical_pods(&pods, &seq);
        assert_eq!(t.len(), 3);
        assert_eq!((t[0].milli_cpu, t[0].gpu_milli, t[0].frequency), (4000, 500, 10.0 / 19.0));
        assert_eq!((t[1].num_gpu, t[1].gpu_milli), (1, 1000));
        assert_eq!((t[2].num_gpu, t[2].gpu_milli, t[2].selectors.len()), (0, 0, 0));
        assert!((t.iter().map(|t| t.frequency).sum::<f64>() - 1.0).abs() < 1e-12);
        // A model restriction makes its own type.
        let t = typical_pods(&pods, &[0, 3, 3]);
        assert_eq!(t[0].selectors, vec![cluster::model_selector(&["T4".to_string()])]);
    }

    #[test]
    fn node_orders_are_per_seed_permutations() {
        let nodes: Vec<String> = (0..50).map(|i| format!("n{i}")).collect();
        let a = FgdWorkload::new(&[pod(1, 0, 0, &[])], &[0], &nodes, 42);
        let b = FgdWorkload::new(&[pod(1, 0, 0, &[])], &[0], &nodes, 43);
        let mut ranks: Vec<u32> = a.rank.values().copied().collect();
        ranks.sort_unstable();
        assert_eq!(ranks, (0..50).collect::<Vec<u32>>());
        assert_ne!(a.rank, b.rank);
        assert_eq!(a.rank, FgdWorkload::new(&[pod(1, 0, 0, &[])], &[0], &nodes, 42).rank);
    }
}
