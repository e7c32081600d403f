//! Finding preemption candidates: the per-node victim selection (`SelectVictimsOnNode`), the
//! PDB split, the dry run over the potential nodes and the choice among candidates.

use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::Timestamp;
use ksched_framework::labels::Selector;
use ksched_framework::parallelize::ParallelSite;
use ksched_framework::pod::Pod;
use ksched_framework::pod_info::pod_priority;
use ksched_framework::{Code, CycleState, Framework, NodeInfo, NodeToStatus, PodInfo, Status};

use super::{DefaultPreemption, NO_VICTIMS_FOUND};

/// The per-node victim searches.
static DRY_RUN_SITE: ParallelSite = ParallelSite::new();

/// A node where preempting `victims` (most important first) lets the pod fit.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// The node.
    pub name: String,
    /// The pods to evict, ordered by decreasing importance.
    pub victims: Vec<Arc<PodInfo>>,
    /// How many victims are protected by an exhausted PodDisruptionBudget.
    pub num_pdb_violations: i64,
}

/// The current time as a Timestamp (jiff's clock needs its `std` feature, which is off here).
pub(crate) fn now() -> Timestamp {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    Timestamp::new(since.as_secs() as i64, since.subsec_nanos() as i32).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// A pod's start time; pods that have not started count as starting now.
fn start_time(pod: &Pod, now: Timestamp) -> Timestamp {
    pod.status.as_ref().and_then(|s| s.start_time.as_ref()).map(|t| t.0).unwrap_or(now)
}

/// Upstream's `MoreImportantPod` as an ordering: higher priority first, then earlier start.
/// Pods without a start time compare as "now", so they are the least important of their
/// priority; two of them compare equal (the stable sort keeps their node order).
pub fn importance_order(a: &Pod, b: &Pod, now: Timestamp) -> Ordering {
    pod_priority(b).cmp(&pod_priority(a)).then_with(|| start_time(a, now).cmp(&start_time(b, now)))
}

/// PDBs of the namespaces of the pods on the potential nodes. Upstream lists every PDB; only
/// those in a victim's namespace can ever match it, so this is the same set for our purpose.
pub(crate) fn pod_disruption_budgets(
    handle: &ksched_framework::Handle,
    nodes: &[&Arc<NodeInfo>],
) -> Vec<Arc<PodDisruptionBudget>> {
    let namespaces: BTreeSet<&str> = nodes.iter().flat_map(|n| n.pods.iter().map(|p| p.namespace())).collect();
    namespaces.into_iter().flat_map(|ns| handle.lister.pod_disruption_budgets(ns)).collect()
}

/// The `disruptionsAllowed` budgets of a list of PDBs, consumed as victims are chosen.
pub(super) struct PdbBudgets<'a> {
    pdbs: &'a [Arc<PodDisruptionBudget>],
    allowed: Vec<i32>,
    selectors: Vec<Option<Selector>>,
}

impl<'a> PdbBudgets<'a> {
    pub(super) fn new(pdbs: &'a [Arc<PodDisruptionBudget>]) -> Self {
        let allowed = pdbs.iter().map(|p| p.status.as_ref().and_then(|s| s.disruptions_allowed).unwrap_or(0)).collect();
        let selectors = pdbs
            .iter()
            .map(|p| {
                let sel = p.spec.as_ref().and_then(|s| s.selector.as_ref())?;
                // An invalid, nil or empty selector matches nothing.
                Selector::from_label_selector(Some(sel)).ok().filter(|s| !s.is_everything())
            })
            .collect();
        PdbBudgets { pdbs, allowed, selectors }
    }

    /// Takes one disruption from the budget of every PDB that selects `pi` and tells whether one
    /// went below zero. `stop_at_first`: take none after the first budget that does.
    pub(super) fn consume(&mut self, pi: &PodInfo, stop_at_first: bool) -> bool {
        let labels = &pi.pod.metadata.labels;
        if labels.is_empty() {
            return false;
        }
        let mut violated = false;
        for (i, pdb) in self.pdbs.iter().enumerate() {
            if pdb.metadata.namespace.as_deref().unwrap_or("default") != pi.namespace() {
                continue;
            }
            let Some(sel) = &self.selectors[i] else { continue };
            if !sel.matches(labels) {
                continue;
            }
            // Already accounted for by the disruption controller.
            let disrupted = pdb.status.as_ref().and_then(|s| s.disrupted_pods.as_ref());
            if disrupted.is_some_and(|d| d.contains_key(pi.name())) {
                continue;
            }
            self.allowed[i] -= 1;
            if self.allowed[i] < 0 {
                violated = true;
                if stop_at_first {
                    break;
                }
            }
        }
        violated
    }
}

/// Splits pods (keeping their order) into those whose eviction would exceed a matching PDB's
/// `disruptionsAllowed` budget and the others. Budgets are consumed in order across the list.
pub fn split_by_pdb_violation(
    pods: &[Arc<PodInfo>],
    pdbs: &[Arc<PodDisruptionBudget>],
) -> (Vec<Arc<PodInfo>>, Vec<Arc<PodInfo>>) {
    let mut budgets = PdbBudgets::new(pdbs);
    let (mut violating, mut non_violating) = (Vec::new(), Vec::new());
    for pi in pods {
        if budgets.consume(pi, false) {
            violating.push(pi.clone());
        } else {
            non_violating.push(pi.clone());
        }
    }
    (violating, non_violating)
}

/// The minimal set of lower-priority pods to evict from `node` for `pod` to fit, and how many of
/// them violate a PDB. `state` and `node` are scratch copies and end up modified.
pub fn select_victims_on_node(
    fw: &Framework,
    state: &mut CycleState,
    pod: &PodInfo,
    node: &mut NodeInfo,
    pdbs: &[Arc<PodDisruptionBudget>],
    nominated: &[Arc<PodInfo>],
) -> Result<(Vec<Arc<PodInfo>>, i64), Status> {
    fn remove(
        fw: &Framework,
        state: &mut CycleState,
        pod: &PodInfo,
        node: &mut NodeInfo,
        victim: &Arc<PodInfo>,
    ) -> Result<(), Status> {
        if !node.remove_pod(victim.uid()) {
            return Err(Status::error(format!(
                "no corresponding pod {} in pods of node {}",
                victim.name(),
                node.name()
            )));
        }
        let s = fw.run_pre_filter_extension_remove_pod(state, pod, victim, node);
        if s.is_success() {
            Ok(())
        } else {
            Err(Status::error(s.message()))
        }
    }
    fn add(
        fw: &Framework,
        state: &mut CycleState,
        pod: &PodInfo,
        node: &mut NodeInfo,
        victim: &Arc<PodInfo>,
    ) -> Result<(), Status> {
        node.add_pod(victim.clone());
        let s = fw.run_pre_filter_extension_add_pod(state, pod, victim, node);
        if s.is_success() {
            Ok(())
        } else {
            Err(Status::error(s.message()))
        }
    }

    let prio = pod.priority();
    let mut potential: Vec<Arc<PodInfo>> = node.pods.iter().filter(|p| p.priority() < prio).cloned().collect();
    for v in &potential {
        remove(fw, state, pod, node, v)?;
    }
    if potential.is_empty() {
        return Err(Status::unresolvable(NO_VICTIMS_FOUND));
    }
    let filters = fw.active_filters(state);
    // If the pod does not fit even with every lower-priority pod gone, this node cannot help.
    let s = fw.run_filters_with_nominated_pods(&filters, state, pod, node, nominated);
    if !s.is_success() {
        return Err(s);
    }
    let now = now();
    potential.sort_by(|a, b| importance_order(&a.pod, &b.pod, now));
    let (violating, non_violating) = split_by_pdb_violation(&potential, pdbs);

    // Put pods back, most important first (PDB-protected ones before the others), keeping each
    // one that still lets the pod fit.
    let mut victims: Vec<Arc<PodInfo>> = Vec::new();
    let mut num_violating = 0i64;
    for (group, counts) in [(&violating, true), (&non_violating, false)] {
        for p in group.iter() {
            add(fw, state, pod, node, p)?;
            if !fw.run_filters_with_nominated_pods(&filters, state, pod, node, nominated).is_success() {
                remove(fw, state, pod, node, p)?;
                victims.push(p.clone());
                if counts {
                    num_violating += 1;
                }
            }
        }
    }
    if !violating.is_empty() && !non_violating.is_empty() {
        victims.sort_by(|a, b| importance_order(&a.pod, &b.pod, now));
    }
    Ok((victims, num_violating))
}

/// A bounded list, as upstream's `candidateList`: additions beyond the capacity are dropped.
struct CandidateList {
    cap: usize,
    items: Vec<Candidate>,
}

impl CandidateList {
    fn add(&mut self, c: Candidate) {
        if self.items.len() < self.cap {
            self.items.push(c);
        }
    }
}

/// Dry-runs preemption on the potential nodes, walking from `offset`, until at least one
/// PDB-respecting candidate exists and `num_candidates` were found. Returns the candidates
/// (PDB-respecting first), the statuses of the nodes that could not be candidates, and the
/// errors met.
#[allow(clippy::too_many_arguments)]
pub(crate) fn dry_run_preemption(
    pl: &DefaultPreemption,
    fw: &Framework,
    state: &CycleState,
    pod: &Arc<PodInfo>,
    potential: &[&Arc<NodeInfo>],
    pdbs: &[Arc<PodDisruptionBudget>],
    offset: usize,
    num_candidates: usize,
) -> (Vec<Candidate>, NodeToStatus, Vec<String>) {
    let n = potential.len();
    let mut non_violating = CandidateList { cap: num_candidates, items: Vec::new() };
    let mut violating = CandidateList { cap: num_candidates, items: Vec::new() };
    let mut statuses = NodeToStatus::default();
    let mut errors = Vec::new();
    let check = |i: usize| {
        let node = potential[(offset + i) % n];
        let mut node_copy = NodeInfo::clone(node);
        let mut state_copy = state.clone();
        let nominated = pl.nominated_pods_for(node.name(), pod);
        let r = select_victims_on_node(fw, &mut state_copy, pod, &mut node_copy, pdbs, &nominated);
        (node.name().to_string(), r)
    };
    // Batches keep the parallelism while folding results in walk order, so where the walk stops
    // does not depend on thread timing.
    let batch = fw.handle().parallelizer.parallelism().max(1);
    let mut next = 0;
    'walk: while next < n {
        let len = batch.min(n - next);
        let results = fw.handle().parallelizer.map(&DRY_RUN_SITE, len, |j| check(next + j));
        next += len;
        for (name, r) in results {
            let status = match r {
                Ok((victims, violations)) if !victims.is_empty() => {
                    let c = Candidate { name, victims, num_pdb_violations: violations };
                    if violations == 0 {
                        non_violating.add(c);
                    } else {
                        violating.add(c);
                    }
                    let (nv, v) = (non_violating.items.len(), violating.items.len());
                    if nv > 0 && nv + v >= num_candidates {
                        break 'walk;
                    }
                    continue;
                }
                Ok(_) => Status::error(format!("expected at least one victim pod on node {name:?}")),
                Err(s) => s,
            };
            if status.code() == Code::Error {
                errors.push(status.message());
            }
            statuses.statuses.insert(name, status);
        }
    }
    let mut out = non_violating.items;
    out.extend(violating.items);
    (out, statuses, errors)
}

/// Index of the candidate to preempt on, applying upstream's criteria in order and keeping the
/// ties for the next one: fewest PDB violations, lowest highest-victim priority, lowest sum of
/// (priority + 2^31), fewest victims, latest start among the highest-priority victims; then the
/// first remaining candidate.
pub fn pick_one_node_for_preemption(candidates: &[Candidate]) -> usize {
    if candidates.is_empty() {
        return 0;
    }
    let now = now();
    let scores: [&dyn Fn(&Candidate) -> i128; 5] = [
        &|c| -i128::from(c.num_pdb_violations),
        &|c| -i128::from(c.victims.first().map(|p| p.priority()).unwrap_or(0)),
        &|c| -c.victims.iter().map(|p| i128::from(p.priority()) + (1i128 << 31)).sum::<i128>(),
        &|c| -(c.victims.len() as i128),
        &|c| earliest_start_of_highest_priority(&c.victims, now).map(|t| t.as_nanosecond()).unwrap_or(i128::MIN),
    ];
    let mut remaining: Vec<usize> = (0..candidates.len()).collect();
    for score in scores {
        let mut best = i128::MIN;
        let mut selected = Vec::new();
        for &i in &remaining {
            let s = score(&candidates[i]);
            if s > best {
                best = s;
                selected.clear();
            }
            if s == best {
                selected.push(i);
            }
        }
        if selected.len() == 1 {
            return selected[0];
        }
        remaining = selected;
    }
    remaining[0]
}

/// The earliest start time among the highest-priority victims (upstream's
/// `GetEarliestPodStartTime`).
fn earliest_start_of_highest_priority(victims: &[Arc<PodInfo>], now: Timestamp) -> Option<Timestamp> {
    let first = victims.first()?;
    let mut max_prio = first.priority();
    let mut earliest = start_time(&first.pod, now);
    for v in victims {
        let (p, t) = (v.priority(), start_time(&v.pod, now));
        if p == max_prio {
            earliest = earliest.min(t);
        } else if p > max_prio {
            max_prio = p;
            earliest = t;
        }
    }
    Some(earliest)
}
