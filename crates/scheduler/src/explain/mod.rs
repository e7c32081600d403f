//! Explanations of one scheduling decision, past what upstream reports: every node's first
//! rejecting plugin and reason, every Score plugin's raw, normalized and weighted score, why the
//! winner won, the smallest confirmed changes that would let an unschedulable pod in, and what
//! preemption would do. Pure and synchronous over a snapshot: it runs the profile's real
//! framework (the scheduler's own filter walk and scoring) and writes nothing anywhere.
//!
//! Served by `ksched explain` and by the scheduler at `/debug/explain/{namespace}/{pod}`.

mod fixes;
pub mod live;
mod profiles;
pub mod render;

use std::collections::BTreeMap;

use ksched_framework::interface::NodeToStatus;
use ksched_framework::{CycleState, Framework, NodeInfo, PodInfo, Snapshot, Status};
use ksched_plugins::defaultpreemption::DefaultPreemption;
use serde::Serialize;

use crate::fit_error::{Diagnosis, FitError, NO_NODES_AVAILABLE};
use crate::schedule_one::{
    num_feasible_nodes_to_find, prioritize_nodes, select_host_index, NominatedPods, ScheduleError, SchedulingAlgorithm,
};

pub use fixes::Fix;
pub use profiles::{nominated_from_pods, Explainer, ReadOnlyClient};

/// The explanation of one pod's scheduling decision.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    /// `namespace/name`.
    pub pod: String,
    /// The profile (schedulerName) whose framework ran.
    pub profile: String,
    /// The node the pod is bound to already, if any (the explanation is of a fresh cycle).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bound_to: Option<String>,
    /// Nodes in the snapshot.
    pub num_nodes: usize,
    /// `Schedulable`, `Unschedulable` or `Error`.
    pub verdict: Verdict,
    /// The node the scheduler would pick among all feasible nodes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selected_node: Option<String>,
    /// For an unschedulable pod, the FailedScheduling message, as the scheduler writes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// A PreFilter rejection, which rejects every node at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pre_filter: Option<Rejection>,
    /// Rejected nodes grouped by (plugin, reason), largest group first.
    pub rejections: Vec<RejectionGroup>,
    /// Every node's outcome, in snapshot order.
    pub nodes: Vec<NodeVerdict>,
    /// Scores of the feasible nodes (absent when none is feasible).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scores: Option<ScoreTable>,
    /// Why the selected node won.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub winner: Option<Winner>,
    /// Changes that would make an unschedulable pod fit, each confirmed by re-running the
    /// framework with the change applied.
    pub fits_if: Vec<Fix>,
    /// What DefaultPreemption would do (unschedulable pods of profiles that enable it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preemption: Option<PreemptionExplanation>,
    /// How this explanation differs from a live cycle (evaluation scope, nominations).
    pub notes: Vec<String>,
}

/// The outcome of the cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Verdict {
    /// At least one node fits.
    Schedulable,
    /// No node fits.
    Unschedulable,
    /// A plugin failed with an error.
    Error,
}

/// A plugin's rejection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Rejection {
    /// The plugin (empty when the status carries none).
    pub plugin: String,
    /// Status code name (`Unschedulable`, `UnschedulableAndUnresolvable`, ...).
    pub code: String,
    /// The reasons, as in the FailedScheduling message.
    pub reasons: Vec<String>,
}

impl Rejection {
    fn from_status(s: &Status, fallback_plugin: &str) -> Self {
        Rejection {
            plugin: s.plugin().unwrap_or(fallback_plugin).to_string(),
            code: s.code().as_str().to_string(),
            reasons: s.all_reasons(),
        }
    }
}

/// One node's outcome.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeVerdict {
    /// The node.
    pub node: String,
    /// Whether every filter passed.
    pub feasible: bool,
    /// The first plugin that rejected the node and its reasons.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rejected_by: Option<Rejection>,
}

/// Nodes rejected by the same plugin for the same reasons.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RejectionGroup {
    /// The rejecting plugin.
    pub plugin: String,
    /// The reasons, joined with `, `.
    pub reason: String,
    /// How many nodes.
    pub count: usize,
    /// The nodes, in snapshot order.
    pub nodes: Vec<String>,
}

/// A Score plugin and its weight.
#[derive(Debug, Clone, Serialize)]
pub struct ScorePlugin {
    /// Plugin name.
    pub name: String,
    /// Its weight in the profile.
    pub weight: i64,
}

/// Scores of one feasible node.
#[derive(Debug, Clone, Serialize)]
pub struct NodeScore {
    /// The node.
    pub node: String,
    /// Per plugin (aligned with [`ScoreTable::plugins`]): the plugin's own score.
    pub raw: Vec<i64>,
    /// After NormalizeScore (0–100).
    pub normalized: Vec<i64>,
    /// Normalized times the weight.
    pub weighted: Vec<i64>,
    /// Sum of the weighted scores.
    pub total: i64,
}

/// The scoring of all feasible nodes.
#[derive(Debug, Clone, Serialize)]
pub struct ScoreTable {
    /// Score plugins that ran (those skipped by their PreScore are absent).
    pub plugins: Vec<ScorePlugin>,
    /// Feasible nodes, highest total first (ties in evaluation order).
    pub nodes: Vec<NodeScore>,
}

/// Why the selected node won.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Winner {
    /// The node.
    pub node: String,
    /// Its total score.
    pub total: i64,
    /// Other nodes with the same total.
    pub tied_with: Vec<String>,
    /// The best node with a lower total, and its total.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runner_up: Option<(String, i64)>,
    /// One sentence.
    pub why: String,
}

/// One preemption candidate.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PreemptionCandidate {
    /// The node.
    pub node: String,
    /// Victims (`namespace/name (priority P)`), most important first.
    pub victims: Vec<String>,
    /// Victims protected by an exhausted PodDisruptionBudget.
    pub pdb_violations: i64,
}

/// What DefaultPreemption would do.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PreemptionExplanation {
    /// Why the pod may not preempt, when it may not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_eligible: Option<String>,
    /// The node and victims DefaultPreemption would pick.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chosen: Option<PreemptionCandidate>,
    /// Why it was picked over the other candidates.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// Every node where preemption would let the pod fit.
    pub candidates: Vec<PreemptionCandidate>,
    /// Why the other nodes are not candidates, grouped.
    pub not_candidates: Vec<RejectionGroup>,
}

/// What an explanation runs against.
pub struct ExplainInput<'a> {
    /// The framework of the pod's profile.
    pub framework: &'a Framework,
    /// The profile's percentageOfNodesToScore, else the global one (for the notes).
    pub percentage_of_nodes_to_score: i32,
    /// The cluster.
    pub snapshot: &'a Snapshot,
    /// Nominated pods that matter for the pod (priority ≥ its own, not itself).
    pub nominated: &'a NominatedPods,
    /// The profile's DefaultPreemption (a fresh instance: it is only asked for a plan).
    pub preemption: Option<&'a DefaultPreemption>,
}

/// The filter walk over every node, and the cycle state it left.
pub(crate) struct Evaluation<'s> {
    pub(crate) state: CycleState,
    pub(crate) feasible: Vec<&'s NodeInfo>,
    pub(crate) diagnosis: Diagnosis,
}

/// Runs PreFilter and Filter over every node with the scheduler's own walk.
pub(crate) fn evaluate<'s>(
    fw: &Framework,
    snapshot: &'s Snapshot,
    pod: &PodInfo,
    nominated: &NominatedPods,
) -> Result<Evaluation<'s>, String> {
    let mut state = CycleState::new();
    let mut alg = SchedulingAlgorithm::default();
    match alg.find_nodes_that_fit(fw, 100, &mut state, pod, snapshot, nominated, None) {
        Ok((feasible, diagnosis)) => Ok(Evaluation { state, feasible, diagnosis }),
        Err(e) => Err(e.message()),
    }
}

/// Explains how the framework decides for `pod`.
pub fn explain(input: &ExplainInput<'_>, pod: &PodInfo) -> Explanation {
    let fw = input.framework;
    let snapshot = input.snapshot;
    let mut ex = Explanation {
        pod: pod.key(),
        profile: fw.profile_name().to_string(),
        bound_to: pod.node_name().map(str::to_string),
        num_nodes: snapshot.num_nodes(),
        verdict: Verdict::Error,
        selected_node: None,
        message: None,
        pre_filter: None,
        rejections: Vec::new(),
        nodes: Vec::new(),
        scores: None,
        winner: None,
        fits_if: Vec::new(),
        preemption: None,
        notes: Vec::new(),
    };
    if snapshot.num_nodes() == 0 {
        ex.verdict = Verdict::Unschedulable;
        ex.message = Some(NO_NODES_AVAILABLE.to_string());
        return ex;
    }
    let mut eval = match evaluate(fw, snapshot, pod, input.nominated) {
        Ok(e) => e,
        Err(e) => {
            ex.message = Some(e);
            return ex;
        }
    };
    let d = &eval.diagnosis;
    if !d.pre_filter_msg.is_empty() {
        ex.pre_filter = Some(Rejection::from_status(&d.node_to_status.absent, ""));
    }
    let absent_plugin = d.unschedulable_plugins.iter().cloned().collect::<Vec<_>>().join(",");
    ex.nodes = node_verdicts(snapshot, &eval.feasible, &d.node_to_status, &absent_plugin);
    ex.rejections = group_rejections(&ex.nodes);
    if let Some(nnn) = pod.pod.status.as_ref().and_then(|s| s.nominated_node_name.as_deref()).filter(|n| !n.is_empty())
    {
        if eval.feasible.len() == 1 && eval.feasible[0].name() == nnn && d.node_to_status.statuses.is_empty() {
            ex.notes.push(format!(
                "the pod is nominated to node {nnn}, which fits: the scheduler takes it without evaluating other nodes"
            ));
        }
    }

    if eval.feasible.is_empty() {
        ex.verdict = Verdict::Unschedulable;
        let mut diagnosis = eval.diagnosis.clone();
        if fw.has_post_filter_plugins() {
            let (msg, plan) =
                post_filter_dry_run(fw, input.preemption, &eval.state, pod, snapshot, &diagnosis.node_to_status);
            diagnosis.post_filter_msg = msg;
            ex.preemption = plan.map(|p| preemption_explanation(snapshot, &p));
        }
        ex.message = Some(FitError { num_all_nodes: snapshot.num_nodes(), diagnosis }.message());
        ex.fits_if = fixes::find(input, pod, &eval);
        return ex;
    }

    ex.verdict = Verdict::Schedulable;
    let to_find = num_feasible_nodes_to_find(input.percentage_of_nodes_to_score, snapshot.num_nodes());
    if to_find < snapshot.num_nodes() && fw.has_score_plugins() {
        ex.notes.push(format!(
            "a live cycle stops after {to_find} feasible nodes of {} (percentageOfNodesToScore), starting at a \
             rotating index: it picks the best of those; this explanation scores every feasible node",
            snapshot.num_nodes()
        ));
    }
    match score(fw, &mut eval.state, pod, &eval.feasible, snapshot) {
        Ok((table, winner)) => {
            ex.selected_node = Some(winner.node.clone());
            ex.scores = Some(table);
            ex.winner = Some(winner);
        }
        Err(e) => {
            ex.verdict = Verdict::Error;
            ex.message = Some(e);
        }
    }
    ex
}

/// The PostFilter chain as the framework runs it (first success or unresolvable stops it,
/// rejections accumulate their reasons), with DefaultPreemption asked for a plan instead of
/// preempting. Returns the message the scheduler appends and the preemption plan.
pub fn post_filter_dry_run(
    fw: &Framework,
    preemption: Option<&DefaultPreemption>,
    state: &CycleState,
    pod: &PodInfo,
    snapshot: &Snapshot,
    statuses: &NodeToStatus,
) -> (String, Option<ksched_plugins::defaultpreemption::PreemptionPlan>) {
    let mut reasons: Vec<String> = Vec::new();
    let mut plan = None;
    for name in fw.list_plugins(ksched_framework::ExtensionPoint::PostFilter) {
        let status = if name == ksched_plugins::names::DEFAULT_PREEMPTION {
            let Some(pl) = preemption else { continue };
            let p = pl.plan(fw, state, pod, snapshot, statuses);
            let s = p.status.clone();
            plan = Some(p);
            s
        } else {
            let Some(pf) = fw.plugin(&name).and_then(|p| p.as_post_filter()) else { continue };
            let mut scratch = state.clone();
            pf.post_filter(fw, &mut scratch, pod, snapshot, statuses).1
        };
        if status.is_success() || status.code() == ksched_framework::Code::UnschedulableAndUnresolvable {
            return (status.message(), plan);
        }
        if !status.is_rejected() {
            return (status.message(), plan);
        }
        reasons.extend(status.all_reasons());
    }
    (Status::new(ksched_framework::Code::Unschedulable, reasons).message(), plan)
}

fn node_verdicts(
    snapshot: &Snapshot,
    feasible: &[&NodeInfo],
    statuses: &NodeToStatus,
    absent_plugin: &str,
) -> Vec<NodeVerdict> {
    let feasible: std::collections::HashSet<&str> = feasible.iter().map(|n| n.name()).collect();
    snapshot
        .list()
        .iter()
        .map(|n| {
            let name = n.name();
            let ok = feasible.contains(name);
            let rejected_by = (!ok).then(|| match statuses.statuses.get(name) {
                Some(s) => Rejection::from_status(s, ""),
                None => Rejection::from_status(&statuses.absent, absent_plugin),
            });
            NodeVerdict { node: name.to_string(), feasible: ok, rejected_by }
        })
        .collect()
}

/// Groups rejected nodes by plugin and reason: the largest group first, then by plugin.
pub fn group_rejections(nodes: &[NodeVerdict]) -> Vec<RejectionGroup> {
    let mut groups: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for n in nodes {
        if let Some(r) = &n.rejected_by {
            groups.entry((r.plugin.clone(), r.reasons.join(", "))).or_default().push(n.node.clone());
        }
    }
    let mut out: Vec<RejectionGroup> = groups
        .into_iter()
        .map(|((plugin, reason), nodes)| RejectionGroup { plugin, reason, count: nodes.len(), nodes })
        .collect();
    out.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| (&a.plugin, &a.reason).cmp(&(&b.plugin, &b.reason))));
    out
}

fn score(
    fw: &Framework,
    state: &mut CycleState,
    pod: &PodInfo,
    feasible: &[&NodeInfo],
    snapshot: &Snapshot,
) -> Result<(ScoreTable, Winner), String> {
    let result = prioritize_nodes(fw, state, pod, feasible, snapshot).map_err(|e| match e {
        ScheduleError::Internal(m) => m,
        other => other.message(),
    })?;
    let n = feasible.len();
    let p = result.plugin_names.len();
    // Raw scores: the same plugins over the same state, before NormalizeScore.
    let mut raw = vec![0i64; n * p];
    for (name, out) in result.plugin_names.iter().zip(raw.chunks_mut(n.max(1))) {
        let sp = fw.plugin(name).and_then(|pl| pl.as_score().map(|_| pl.clone()));
        if let Some(pl) = sp {
            let scorer = pl.as_score().expect("checked above");
            scorer.score_nodes(state, pod, feasible, out).map_err(|(_, s)| s.message())?;
        }
    }
    let randomizer = vec![0i64; n];
    let best = select_host_index(&result.totals, &randomizer);
    let mut nodes: Vec<NodeScore> = (0..n)
        .map(|i| NodeScore {
            node: feasible[i].name().to_string(),
            raw: (0..p).map(|k| raw[k * n + i]).collect(),
            normalized: (0..p).map(|k| result.scores[k * n + i]).collect(),
            weighted: (0..p).map(|k| result.weighted(k, i)).collect(),
            total: result.totals[i],
        })
        .collect();
    let winner_name = nodes[best].node.clone();
    let total = result.totals[best];
    // Stable: equal totals keep evaluation order.
    nodes.sort_by_key(|n| std::cmp::Reverse(n.total));
    let tied_with: Vec<String> =
        nodes.iter().filter(|s| s.total == total && s.node != winner_name).map(|s| s.node.clone()).collect();
    let runner = nodes.iter().find(|s| s.total < total);
    let plugins: Vec<ScorePlugin> = result
        .plugin_names
        .iter()
        .zip(&result.weights)
        .map(|(name, weight)| ScorePlugin { name: name.clone(), weight: *weight })
        .collect();
    let why = if n == 1 {
        "the only feasible node".to_string()
    } else if !tied_with.is_empty() {
        format!(
            "highest total {total}, tied with {} other node(s); the scheduler keeps the first of equally scored \
             nodes in its evaluation order, which starts at a rotating index, so any of the tied nodes may be \
             chosen by a live cycle ({winner_name} comes first when the walk starts at the first node)",
            tied_with.len()
        )
    } else {
        let winner = nodes.iter().find(|s| s.node == winner_name).expect("winner is scored");
        match runner {
            Some(r) => {
                let mut deltas: Vec<(i64, &str)> = plugins
                    .iter()
                    .enumerate()
                    .map(|(k, pl)| (winner.weighted[k] - r.weighted[k], pl.name.as_str()))
                    .filter(|(d, _)| *d != 0)
                    .collect();
                deltas.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
                let parts: Vec<String> = deltas.iter().map(|(d, name)| format!("{name} {d:+}")).collect();
                format!(
                    "highest total {total}, {} ahead of {} ({}): {}",
                    total - r.total,
                    r.node,
                    r.total,
                    if parts.is_empty() { "no plugin differs".to_string() } else { parts.join(", ") }
                )
            }
            None => format!("highest total {total}"),
        }
    };
    let winner =
        Winner { node: winner_name, total, tied_with, runner_up: runner.map(|r| (r.node.clone(), r.total)), why };
    Ok((ScoreTable { plugins, nodes }, winner))
}

fn describe_candidate(c: &ksched_plugins::defaultpreemption::Candidate) -> PreemptionCandidate {
    PreemptionCandidate {
        node: c.name.clone(),
        victims: c.victims.iter().map(|v| format!("{} (priority {})", v.key(), v.priority())).collect(),
        pdb_violations: c.num_pdb_violations,
    }
}

fn preemption_explanation(
    snapshot: &Snapshot,
    plan: &ksched_plugins::defaultpreemption::PreemptionPlan,
) -> PreemptionExplanation {
    let candidates: Vec<PreemptionCandidate> = plan.candidates.iter().map(describe_candidate).collect();
    let chosen = plan.chosen.map(|i| candidates[i].clone());
    let why = plan.chosen.map(|i| {
        if plan.candidates.len() == 1 {
            "the only node where preemption helps".to_string()
        } else {
            let c = &plan.candidates[i];
            format!(
                "fewest PDB violations ({}), then lowest highest victim priority ({}), then lowest sum of \
                 priorities, then fewest victims ({}), then latest start: best of {} candidates",
                c.num_pdb_violations,
                c.victims.first().map(|v| v.priority()).unwrap_or(0),
                c.victims.len(),
                plan.candidates.len()
            )
        }
    });
    let candidate_names: std::collections::HashSet<&str> = plan.candidates.iter().map(|c| c.name.as_str()).collect();
    let others: Vec<NodeVerdict> = snapshot
        .list()
        .iter()
        .filter(|n| !candidate_names.contains(n.name()))
        .map(|n| NodeVerdict {
            node: n.name().to_string(),
            feasible: false,
            rejected_by: Some(Rejection::from_status(plan.not_candidates.get(n.name()), "DefaultPreemption")),
        })
        .collect();
    PreemptionExplanation {
        not_eligible: plan.not_eligible.clone(),
        chosen,
        why,
        candidates,
        not_candidates: group_rejections(&others),
    }
}

#[cfg(test)]
mod tests;
