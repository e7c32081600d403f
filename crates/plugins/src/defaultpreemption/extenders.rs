//! Letting the extenders with a preempt verb narrow the candidates and change their victims,
//! between the dry run and the choice of the best candidate (upstream `callExtenders`).

use std::collections::HashMap;
use std::sync::Arc;

use ksched_framework::extender::{Extender, NodeToVictims, Victims};
use ksched_framework::pod::Pod;
use ksched_framework::{Snapshot, Status};

use super::Candidate;

/// Passes the candidates through every extender that supports preemption and is interested in
/// the pod, in the given order, each one working on the previous one's answer. Returns the
/// surviving candidates (possibly none); an error of a non-ignorable extender is an Error status.
pub(crate) fn call_extenders(
    extenders: &[Arc<dyn Extender>],
    pod: &Pod,
    candidates: Vec<Candidate>,
    snapshot: &Snapshot,
) -> Result<Vec<Candidate>, Status> {
    if candidates.is_empty() || !extenders.iter().any(|e| e.supports_preemption() && e.is_interested(pod)) {
        return Ok(candidates);
    }
    // Candidates are rebuilt in their walk order, so that ties in the final choice still go
    // to the first candidate walked, as without extenders.
    let order: Vec<String> = candidates.iter().map(|c| c.name.clone()).collect();
    let mut victims: NodeToVictims = candidates
        .into_iter()
        .map(|c| (c.name, Victims { pods: c.victims, num_pdb_violations: c.num_pdb_violations }))
        .collect();
    for ext in extenders.iter().filter(|e| e.supports_preemption() && e.is_interested(pod)) {
        let mut answer = match ext.process_preemption(pod, &victims, snapshot) {
            Ok(a) => a,
            Err(e) if ext.is_ignorable() => {
                tracing::info!(extender = ext.name(), error = %e, "skipped extender as it returned error and has ignorable flag set");
                continue;
            }
            Err(e) => return Err(Status::error(e)),
        };
        let mut empty: Vec<String> = answer.iter().filter(|(_, v)| v.pods.is_empty()).map(|(n, _)| n.clone()).collect();
        // Sorted so that the node named in the error does not depend on hash order.
        empty.sort();
        if let Some(node) = empty.first().filter(|_| !ext.is_ignorable()) {
            return Err(Status::error(format!("expected at least one victim pod on node {node:?}")));
        }
        for node in &empty {
            tracing::info!(extender = ext.name(), node, "ignored node for which the extender didn't report victims");
            answer.remove(node);
        }
        victims = answer;
        // No node left: no later extender can bring one back.
        if victims.is_empty() {
            break;
        }
    }
    let position: HashMap<&str, usize> = order.iter().enumerate().map(|(i, n)| (n.as_str(), i)).collect();
    let mut out: Vec<Candidate> = victims
        .into_iter()
        .map(|(name, v)| Candidate { name, victims: v.pods, num_pdb_violations: v.num_pdb_violations })
        .collect();
    // Nodes an extender added beyond the dry run's come last, by name.
    out.sort_by(|a, b| {
        let key = |c: &Candidate| position.get(c.name.as_str()).copied().unwrap_or(usize::MAX);
        key(a).cmp(&key(b)).then_with(|| a.name.cmp(&b.name))
    });
    Ok(out)
}
