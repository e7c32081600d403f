//! TopologyPlacementGenerator (upstream `framework/plugins/topologyaware`, alpha): a pod group with a topology constraint is tried
//! in each domain of the constraint's node label (one placement per label value); a group with
//! members already placed is confined to their domain.
//!
//! Past upstream (opt-in args, see [`TopologyPlacementGeneratorArgs`]): a default topology key
//! for groups that name none, a preferred mode that falls back to the whole cluster when no
//! single domain can host the group, and best-fit scoring of the domains that can host it.
//!
//! Best fit: among the domains where the whole group fits, prefer the one with the least free
//! capacity left once the group is in it. Free capacity is counted per resource the group
//! requests (cpu, memory, extended resources such as GPUs) as allocatable minus requested over
//! the domain's nodes, as a fraction of the cluster's allocatable of that resource, averaged
//! over those resources. Filling the tightest domain keeps the roomiest ones whole for larger
//! groups; upstream's NodeResourcesFit placement score compares utilization ratios instead,
//! which prefers a large half-full domain over a small one the group would fill exactly.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use ksched_framework::podgroup::{topology_key, Placement, PodGroupAssignments, PodGroupInfo};
use ksched_framework::resource::Resource;
use ksched_framework::{
    Handle, NodeInfo, PlacementGeneratePlugin, PlacementScorePlugin, Plugin, Snapshot, Status, MAX_NODE_SCORE,
    MIN_NODE_SCORE,
};
use parking_lot::Mutex;
use serde::Deserialize;

use crate::names;

/// Args of TopologyPlacementGenerator (not in upstream, which takes none; the defaults are its
/// behaviour).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TopologyPlacementGeneratorArgs {
    /// Node label key whose domains a group without its own topology constraint is kept in
    /// (e.g. `topology.kubernetes.io/zone` or a rack label). Empty: such groups are not confined.
    #[serde(default)]
    pub default_topology_key: String,
    /// `Required` (default, upstream): a constrained group only goes into one domain.
    /// `Preferred`: one domain when any can host the group, else anywhere.
    #[serde(default)]
    pub mode: TopologyMode,
    /// Score the domains that can host a group by best fit (see the module docs); the plugin
    /// then also takes part in PlacementScore, with the weight configured for it (1 if none).
    #[serde(default)]
    pub best_fit: bool,
}

/// How strictly a group is kept in one domain.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub enum TopologyMode {
    /// Only single-domain placements.
    #[default]
    Required,
    /// Single-domain placements first, the whole cluster as the last resort.
    Preferred,
}

impl TopologyPlacementGeneratorArgs {
    /// Decodes and validates the args.
    pub fn decode(args: Option<&serde_json::Value>) -> Result<Self, String> {
        let a: Self = ksched_framework::registry::decode_args(args)?;
        if !a.default_topology_key.is_empty() && a.default_topology_key.contains(char::is_whitespace) {
            return Err(format!(
                "defaultTopologyKey: Invalid value: {:?}: must be a label key",
                a.default_topology_key
            ));
        }
        Ok(a)
    }
}

/// The TopologyPlacementGenerator plugin.
pub struct TopologyPlacementGenerator {
    handle: Handle,
    args: TopologyPlacementGeneratorArgs,
    /// Best fit: the cluster's allocatable per resource, for the snapshot it was summed over
    /// (every placement of a cycle divides by the same totals; summing 5000 nodes per
    /// placement cost more than the rest of the scoring).
    cluster_totals: Mutex<ClusterTotals>,
}

/// Allocatable per resource name over a snapshot, identified by its generation, size and
/// first node.
#[derive(Default)]
struct ClusterTotals {
    snapshot: (u64, usize, usize),
    totals: HashMap<String, i64>,
}

/// Builds the plugin.
pub fn new(args: Option<&serde_json::Value>, handle: &Handle) -> Result<Arc<dyn Plugin>, String> {
    Ok(Arc::new(TopologyPlacementGenerator {
        handle: handle.clone(),
        args: TopologyPlacementGeneratorArgs::decode(args)?,
        cluster_totals: Mutex::default(),
    }))
}

impl Plugin for TopologyPlacementGenerator {
    fn name(&self) -> &str {
        names::TOPOLOGY_PLACEMENT_GENERATOR
    }

    fn as_placement_generate(&self) -> Option<&dyn PlacementGeneratePlugin> {
        Some(self)
    }

    fn as_placement_score(&self) -> Option<&dyn PlacementScorePlugin> {
        self.args.best_fit.then_some(self as &dyn PlacementScorePlugin)
    }
}

/// Parts per million: the resolution of the best-fit raw score.
const PPM: f64 = 1_000_000.0;

impl PlacementScorePlugin for TopologyPlacementGenerator {
    /// The free capacity the placement would have left, in millionths of the cluster's (lower
    /// is a better fit); normalization turns it around.
    fn score_placement(
        &self,
        _group: &PodGroupInfo,
        assignments: &PodGroupAssignments,
        snapshot: &Snapshot,
    ) -> Result<i64, Status> {
        let mut group = Resource::default();
        for a in &assignments.proposed {
            group.add(&a.pod.requests);
        }
        let mut names: Vec<&str> = Vec::new();
        if group.milli_cpu > 0 {
            names.push("cpu");
        }
        if group.memory > 0 {
            names.push("memory");
        }
        names.extend(group.scalar_resources.iter().filter(|(_, v)| **v > 0).map(|(k, _)| k.as_str()));
        if names.is_empty() {
            return Ok(0);
        }
        let mut sum = 0.0;
        for name in &names {
            let cluster = self.cluster_total(snapshot, name);
            if cluster <= 0 {
                continue;
            }
            let free: i64 = assignments
                .placement
                .nodes
                .iter()
                .map(|n| (n.allocatable.get(name) - n.requested.get(name)).max(0))
                .sum();
            let left = (free - group.get(name)).max(0);
            sum += left as f64 / cluster as f64;
        }
        Ok((sum / names.len() as f64 * PPM).round() as i64)
    }

    fn has_normalize(&self) -> bool {
        true
    }

    /// The tightest placement scores 100, the roomiest 0 (all 100 when they are equal).
    fn normalize_placement_scores(&self, _group: &PodGroupInfo, scores: &mut [i64]) -> Status {
        let (Some(&min), Some(&max)) = (scores.iter().min(), scores.iter().max()) else { return Status::success() };
        for s in scores.iter_mut() {
            *s = if max == min {
                MAX_NODE_SCORE
            } else {
                MIN_NODE_SCORE + (max - *s) * (MAX_NODE_SCORE - MIN_NODE_SCORE) / (max - min)
            };
        }
        Status::success()
    }
}

impl TopologyPlacementGenerator {
    /// The cluster's allocatable of one resource, summed once per snapshot.
    fn cluster_total(&self, snapshot: &Snapshot, name: &str) -> i64 {
        let id =
            (snapshot.generation, snapshot.num_nodes(), snapshot.list().first().map_or(0, |n| Arc::as_ptr(n) as usize));
        let mut cache = self.cluster_totals.lock();
        if cache.snapshot != id {
            *cache = ClusterTotals { snapshot: id, totals: HashMap::new() };
        }
        *cache
            .totals
            .entry(name.to_string())
            .or_insert_with(|| snapshot.list().iter().map(|n| n.allocatable.get(name)).sum())
    }

    /// The one domain of the group's already placed members, if any.
    fn scheduled_domain(&self, group: &PodGroupInfo, key: &str, snapshot: &Snapshot) -> Result<Option<String>, String> {
        let state = self.handle.pod_groups.state(&group.namespace, &group.name);
        let mut domain: Option<String> = None;
        for (pod, node) in state.scheduled_pods() {
            let pod_key = format!(
                "{}/{}",
                pod.metadata.namespace.as_deref().unwrap_or_default(),
                pod.metadata.name.as_deref().unwrap_or_default()
            );
            let ni = snapshot.get(&node).map_err(|e| format!("getting node for pod {pod_key}: {e}"))?;
            let d = ni.label(key).ok_or_else(|| format!("no topology domain found for pod {pod_key}"))?;
            match &domain {
                Some(prev) if prev != d => return Err(format!("more than 1 domain found for pod group: {prev}, {d}")),
                _ => domain = Some(d.to_string()),
            }
        }
        Ok(domain)
    }
}

impl PlacementGeneratePlugin for TopologyPlacementGenerator {
    fn generate_placements(
        &self,
        group: &PodGroupInfo,
        parent: &Placement,
        snapshot: &Snapshot,
    ) -> Result<Vec<Placement>, Status> {
        let Some(pg) = self.handle.pod_groups.get(&group.namespace, &group.name) else {
            return Err(Status::error(format!("podgroup.scheduling.k8s.io {:?} not found", group.name)));
        };
        let key = match topology_key(&pg) {
            Some(k) => k.to_string(),
            None if !self.args.default_topology_key.is_empty() => self.args.default_topology_key.clone(),
            None => return Ok(vec![parent.clone()]),
        };
        let required = self
            .scheduled_domain(group, &key, snapshot)
            .map_err(|e| Status::error(format!("cannot determine domain for already scheduled pods: {e}")))?;
        // Domains in name order: upstream iterates a map (random order); sorting keeps runs
        // reproducible without favouring any domain in the final choice, which scores decide.
        let mut domains: BTreeMap<&str, Vec<Arc<NodeInfo>>> = BTreeMap::new();
        for n in &parent.nodes {
            if let Some(d) = n.label(&key) {
                if required.as_deref().is_none_or(|r| r == d) {
                    domains.entry(d).or_default().push(n.clone());
                }
            }
        }
        let mut out: Vec<Placement> =
            domains.into_iter().map(|(d, nodes)| Placement { name: d.to_string(), nodes, fallback: false }).collect();
        if self.args.mode == TopologyMode::Preferred && required.is_none() {
            out.push(Placement { fallback: true, ..parent.clone() });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
