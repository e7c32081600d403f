//! Workload-aware preemption (WorkloadAwarePreemption, alpha): making room for a pod group as a
//! whole (upstream's `PodGroupEvaluator`). Victims are units: a single pod, or every pod of a
//! group whose `disruptionMode` is `PodGroup` (past upstream, on request: of every gang). All
//! eligible units are removed from the snapshot; if the group then fits, units are given back,
//! the most important first, as long as it still fits; the rest are evicted.
//!
//! The scheduler calls this (through [`PodGroupPostFilterPlugin`]) after a pod-group cycle found
//! the group unschedulable; `fits` re-runs the group's scheduling on the changed snapshot.

use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::Timestamp;
use ksched_framework::podgroup::{
    disrupted_as_group, gang_min_count, group_key_of, pod_group_priority, GroupKey, PodGroup, PodGroupPreemption,
    PodGroupVictims, PodGroups,
};
use ksched_framework::snapshot::SnapshotUndo;
use ksched_framework::{Framework, PodGroupPostFilterPlugin, PodInfo, Snapshot, Status};

use super::candidates::PdbBudgets;
use super::executor::Preemptor;
use super::{DefaultPreemption, NOT_ELIGIBLE_POLICY_NEVER};

/// No unit has a lower priority than the group.
pub const NO_VICTIMS_FOR_PREEMPTOR: &str = "No preemption victims found for incoming preemptor";
/// PreEnqueue reason while a group's victims are being evicted.
pub const WAITING_FOR_POD_GROUP_PREEMPTION: &str = "waiting for the preemption for this pod group to be finished";
/// PostFilter reason for a member whose group does not exist (TopologyAwareWorkloadScheduling).
pub const POD_GROUP_NOT_FOUND: &str = "preemption: pod group for pod not found";
/// PostFilter reason for a member of a group with scheduling constraints
/// (TopologyAwareWorkloadScheduling: preempting per placement would preempt once per domain).
pub const NOT_ELIGIBLE_PLACEMENT_BASED: &str =
    "preemption: not eligible due to placement-based pod group scheduling limitation";
/// PostFilter reason for a member when the group preempts as a whole (WorkloadAwarePreemption).
pub const NOT_ELIGIBLE_WORKLOAD_AWARE: &str = "preemption: not eligible due to workload aware preemption enabled";
/// The domain name upstream gives a pod group's preemption in events.
pub const CLUSTER_DOMAIN: &str = "cluster";

/// One preemption unit: a pod, or the pods of a group preempted together.
#[derive(Debug, Clone)]
struct Unit {
    /// `(node, pod)` for every pod of the unit.
    pods: Vec<(String, Arc<PodInfo>)>,
    priority: i32,
    /// Its pods belong to a pod group (also a member evicted alone, as upstream counts it).
    in_group: bool,
    earliest_start: Timestamp,
}

/// Upstream's `moreImportantVictim` as an ordering (Less: `a` is more important): priority,
/// then group members before other pods, then for pods the earlier start, for groups the
/// larger unit and then the earlier start.
fn importance(a: &Unit, b: &Unit) -> Ordering {
    b.priority
        .cmp(&a.priority)
        .then_with(|| b.in_group.cmp(&a.in_group))
        .then_with(|| if a.in_group { b.pods.len().cmp(&a.pods.len()) } else { Ordering::Equal })
        .then_with(|| a.earliest_start.cmp(&b.earliest_start))
}

/// Splits units (keeping their order) into those with a pod whose eviction would exceed a
/// matching PDB's budget and the others; a unit stops consuming budgets at its first violating
/// pod, and a pod at its first exhausted budget, as upstream's unit-wise split does.
fn split_units_by_pdb(units: Vec<Unit>, pdbs: &[Arc<PodDisruptionBudget>]) -> (Vec<Unit>, Vec<Unit>) {
    let mut budgets = PdbBudgets::new(pdbs);
    let (mut violating, mut non_violating) = (Vec::new(), Vec::new());
    for u in units {
        if u.pods.iter().any(|(_, p)| budgets.consume(p, true)) {
            violating.push(u);
        } else {
            non_violating.push(u);
        }
    }
    (violating, non_violating)
}

/// The group a victim pod is preempted with, if it is preempted as part of a group.
fn unit_group(groups: &PodGroups, pod: &PodInfo, atomic_gangs: bool) -> Option<(GroupKey, Arc<PodGroup>)> {
    let key = group_key_of(&pod.pod)?;
    let pg = groups.get(&key.namespace, &key.name)?;
    (disrupted_as_group(&pg) || (atomic_gangs && gang_min_count(&pg).is_some())).then_some((key, pg))
}

impl DefaultPreemption {
    /// Every unit with a pod on some node (in node order, then pod order), except the group's
    /// own members. Units are complete: a group's pods outside the domain belong to it too.
    fn units(&self, snapshot: &Snapshot, request: &PodGroupPreemption<'_>, own: Option<&GroupKey>) -> Vec<Unit> {
        let groups = &self.handle.pod_groups;
        let now = super::candidates::now();
        let mut units: Vec<Unit> = Vec::new();
        let mut group_index: HashMap<GroupKey, usize> = HashMap::new();
        for node in snapshot.list() {
            for pi in &node.pods {
                let key = group_key_of(&pi.pod);
                if key.is_some() && key.as_ref() == own {
                    continue;
                }
                let start = pi.pod.status.as_ref().and_then(|s| s.start_time.as_ref()).map_or(now, |t| t.0);
                let entry = (node.name().to_string(), pi.clone());
                match unit_group(groups, pi, request.atomic_gangs) {
                    Some((key, pg)) => match group_index.get(&key) {
                        Some(&i) => {
                            let u = &mut units[i];
                            u.pods.push(entry);
                            u.earliest_start = u.earliest_start.min(start);
                        }
                        None => {
                            group_index.insert(key, units.len());
                            units.push(Unit {
                                pods: vec![entry],
                                priority: pod_group_priority(&pg),
                                in_group: true,
                                earliest_start: start,
                            });
                        }
                    },
                    None => units.push(Unit {
                        pods: vec![entry],
                        priority: pi.priority(),
                        in_group: key.is_some(),
                        earliest_start: start,
                    }),
                }
            }
        }
        if let Some(domain) = request.domain {
            let names: BTreeSet<&str> =
                domain.iter().filter_map(|&i| snapshot.list().get(i)).map(|n| n.name()).collect();
            units.retain(|u| u.pods.iter().any(|(n, _)| names.contains(n.as_str())));
        }
        units
    }

    /// PDBs of the units' namespaces (only those can match a victim).
    fn unit_pdbs(&self, units: &[Unit]) -> Vec<Arc<PodDisruptionBudget>> {
        let namespaces: BTreeSet<&str> = units.iter().flat_map(|u| u.pods.iter().map(|(_, p)| p.namespace())).collect();
        namespaces.into_iter().flat_map(|ns| self.handle.lister.pod_disruption_budgets(ns)).collect()
    }
}

fn remove(snapshot: &mut Snapshot, unit: &Unit, undo: &mut SnapshotUndo) {
    for (node, pod) in &unit.pods {
        snapshot.remove_pod(node, pod.uid(), undo);
    }
}

fn restore_unit(snapshot: &mut Snapshot, unit: &Unit, undo: &mut SnapshotUndo) {
    for (node, pod) in &unit.pods {
        snapshot.add_pod(node, pod.clone(), undo);
    }
}

impl PodGroupPostFilterPlugin for DefaultPreemption {
    fn select_pod_group_victims(
        &self,
        request: &PodGroupPreemption<'_>,
        snapshot: &mut Snapshot,
        fits: &mut dyn FnMut(&mut Snapshot) -> Status,
    ) -> Result<PodGroupVictims, Status> {
        let priority = pod_group_priority(request.pod_group);
        // Reservations evict nobody, so a group that never preempts may still reserve.
        let never = request
            .pods
            .iter()
            .any(|p| p.pod.spec.as_ref().and_then(|s| s.preemption_policy.as_deref()) == Some("Never"));
        if never && !request.include_equal_priority {
            return Err(Status::unschedulable(NOT_ELIGIBLE_POLICY_NEVER));
        }
        let own = GroupKey::new(
            request.pod_group.metadata.namespace.as_deref().unwrap_or("default"),
            request.pod_group.metadata.name.as_deref().unwrap_or_default(),
        );
        let mut potential: Vec<Unit> = self
            .units(snapshot, request, Some(&own))
            .into_iter()
            .filter(|u| u.priority < priority || (request.include_equal_priority && u.priority == priority))
            .collect();
        if potential.is_empty() {
            return Err(Status::unresolvable(NO_VICTIMS_FOR_PREEMPTOR));
        }
        let mut undo = SnapshotUndo::default();
        for u in &potential {
            remove(snapshot, u, &mut undo);
        }
        let s = fits(snapshot);
        if !s.is_success() {
            snapshot.restore(undo);
            return Err(s);
        }
        potential.sort_by(importance);
        let pdbs = self.unit_pdbs(&potential);
        let (violating, non_violating) = split_units_by_pdb(potential, &pdbs);
        let mut chosen: Vec<(Unit, bool)> = Vec::new();
        for (u, violates) in
            violating.into_iter().map(|u| (u, true)).chain(non_violating.into_iter().map(|u| (u, false)))
        {
            restore_unit(snapshot, &u, &mut undo);
            if !fits(snapshot).is_success() {
                remove(snapshot, &u, &mut undo);
                chosen.push((u, violates));
            }
        }
        snapshot.restore(undo);
        chosen.sort_by(|a, b| importance(&a.0, &b.0));
        Ok(PodGroupVictims {
            units: chosen.len(),
            pdb_violations: chosen.iter().filter(|(_, v)| *v).count(),
            highest_priority: chosen.iter().map(|(u, _)| u.priority).max(),
            pods: chosen.into_iter().flat_map(|(u, _)| u.pods.into_iter().map(|(_, p)| p)).collect(),
        })
    }

    fn actuate_pod_group_preemption(
        &self,
        fw: &Framework,
        pod_group: &PodGroup,
        pods: &[Arc<PodInfo>],
        victims: &PodGroupVictims,
    ) {
        let preemptor = Preemptor::PodGroup {
            group: Arc::new(pod_group.clone()),
            pods: pods.iter().map(|p| p.pod.clone()).collect(),
        };
        self.executor.actuate_for(fw, CLUSTER_DOMAIN, &victims.pods, preemptor);
    }
}

#[cfg(test)]
mod tests;
