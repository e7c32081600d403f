//! Scheduler extenders as plugins see them (upstream's `framework.Extender`, the part that
//! in-tree plugins use: preemption). The HTTP client lives in the scheduler crate.

use std::collections::HashMap;
use std::sync::Arc;

use crate::pod::Pod;

use crate::{PodInfo, Snapshot};

/// The pods a preemption would evict on one node (upstream's `extenderv1.Victims`).
#[derive(Debug, Clone, Default)]
pub struct Victims {
    /// The pods to evict.
    pub pods: Vec<Arc<PodInfo>>,
    /// How many of them are protected by an exhausted PodDisruptionBudget.
    pub num_pdb_violations: i64,
}

/// Candidate node name -> the victims preempting on it would need.
pub type NodeToVictims = HashMap<String, Victims>;

/// An extender, as the scheduling framework consults it.
pub trait Extender: Send + Sync {
    /// Unique name, used in logs.
    fn name(&self) -> &str;

    /// True when scheduling goes on without this extender if it fails.
    fn is_ignorable(&self) -> bool;

    /// True when the extender takes part in preemption (has a preempt verb).
    fn supports_preemption(&self) -> bool;

    /// True when the extender manages a resource the pod asks for (or manages none).
    fn is_interested(&self, pod: &Pod) -> bool;

    /// Lets the extender narrow the candidate nodes and change their victims. The reply may
    /// only name pods found on that node in `nodes`. Blocks the calling (scheduling) thread.
    fn process_preemption(&self, pod: &Pod, victims: &NodeToVictims, nodes: &Snapshot)
        -> Result<NodeToVictims, String>;
}
