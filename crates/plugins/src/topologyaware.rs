//! TopologyPlacementGenerator (§4.21, alpha): a pod group with a topology constraint is tried
//! in each domain of the constraint's node label (one placement per label value); a group with
//! members already placed is confined to their domain.
//!
//! Past upstream (opt-in args, see [`TopologyPlacementGeneratorArgs`]): a default topology key
//! for groups that name none, and a preferred mode that falls back to the whole cluster when
//! no single domain can host the group.

use std::collections::BTreeMap;
use std::sync::Arc;

use ksched_framework::podgroup::{topology_key, Placement, PodGroupInfo};
use ksched_framework::{Handle, NodeInfo, PlacementGeneratePlugin, Plugin, Snapshot, Status};
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
}

/// Builds the plugin.
pub fn new(args: Option<&serde_json::Value>, handle: &Handle) -> Result<Arc<dyn Plugin>, String> {
    Ok(Arc::new(TopologyPlacementGenerator {
        handle: handle.clone(),
        args: TopologyPlacementGeneratorArgs::decode(args)?,
    }))
}

impl Plugin for TopologyPlacementGenerator {
    fn name(&self) -> &str {
        names::TOPOLOGY_PLACEMENT_GENERATOR
    }

    fn as_placement_generate(&self) -> Option<&dyn PlacementGeneratePlugin> {
        Some(self)
    }
}

impl TopologyPlacementGenerator {
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
