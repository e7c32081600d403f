//! Pod groups (workload-aware scheduling, alpha in v1.36): the `scheduling.k8s.io/v1alpha2`
//! PodGroup objects the scheduler watches, and the runtime state of each group's member pods
//! (upstream's pod group manager and its snapshot state).
//!
//! A pod joins a group through `spec.schedulingGroup.podGroupName`; membership is keyed by the
//! pod's namespace and that name, whether or not the PodGroup object exists yet.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use crate::pod::Pod;
use parking_lot::{Mutex, RwLock};
use rustc_hash::FxHashMap;

use crate::node_info::NodeInfo;
use crate::pod_info::PodInfo;

/// The PodGroup API object.
pub type PodGroup = k8s_openapi::api::scheduling::v1alpha2::PodGroup;

/// The `spec.schedulingGroup.podGroupName` of a pod.
pub fn pod_group_name(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref()?.scheduling_group.as_ref()?.pod_group_name.as_deref().filter(|n| !n.is_empty())
}

/// The group a pod belongs to, if any.
pub fn group_key_of(pod: &Pod) -> Option<GroupKey> {
    let name = pod_group_name(pod)?;
    Some(GroupKey::new(pod.metadata.namespace.as_deref().unwrap_or("default"), name))
}

/// True when both pods name the same group in the same namespace.
pub fn matching_scheduling_group(a: &Pod, b: &Pod) -> bool {
    match (group_key_of(a), group_key_of(b)) {
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}

/// The gang's `minCount`, when the group uses the gang policy.
pub fn gang_min_count(pg: &PodGroup) -> Option<i32> {
    pg.spec.scheduling_policy.gang.as_ref().map(|g| g.min_count)
}

/// The first topology constraint's key, if the group has one.
pub fn topology_key(pg: &PodGroup) -> Option<&str> {
    pg.spec.scheduling_constraints.as_ref()?.topology.as_ref()?.first().map(|t| t.key.as_str())
}

/// The group's priority (`spec.priority`, 0 when unset).
pub fn pod_group_priority(pg: &PodGroup) -> i32 {
    pg.spec.priority.unwrap_or(0)
}

/// True when the group is preempted as a whole (`disruptionMode: PodGroup`).
pub fn disrupted_as_group(pg: &PodGroup) -> bool {
    pg.spec.disruption_mode.as_deref() == Some("PodGroup")
}

/// Namespace and name of a group.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupKey {
    /// Namespace.
    pub namespace: String,
    /// PodGroup name.
    pub name: String,
}

impl GroupKey {
    /// A key.
    pub fn new(namespace: &str, name: &str) -> Self {
        GroupKey { namespace: namespace.to_string(), name: name.to_string() }
    }
}

impl fmt::Display for GroupKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

fn uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or_default()
}

fn node_of(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref()?.node_name.as_deref().filter(|n| !n.is_empty())
}

/// The member pods of one group, by state: unscheduled (in the queue or in flight), assumed
/// (placed by the scheduler, binding not confirmed) or assigned (bound).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodGroupState {
    all: BTreeMap<String, Arc<Pod>>,
    unscheduled: BTreeSet<String>,
    assumed: BTreeMap<String, String>,
    assigned: BTreeSet<String>,
}

impl PodGroupState {
    /// Adds a member pod, assigned or unscheduled by its `spec.nodeName`.
    pub fn add_pod(&mut self, pod: Arc<Pod>) {
        let id = uid(&pod).to_string();
        if node_of(&pod).is_some() {
            self.unscheduled.remove(&id);
            self.assumed.remove(&id);
            self.assigned.insert(id.clone());
        } else if !self.assumed.contains_key(&id) && !self.assigned.contains(&id) {
            self.unscheduled.insert(id.clone());
        }
        self.all.insert(id, pod);
    }

    /// Removes a member pod.
    pub fn delete_pod(&mut self, uid: &str) {
        self.all.remove(uid);
        self.unscheduled.remove(uid);
        self.assumed.remove(uid);
        self.assigned.remove(uid);
    }

    /// Marks a known member as placed on `node` (ignored for unknown pods).
    pub fn assume_pod(&mut self, uid: &str, node: &str) {
        let Some(pod) = self.all.get(uid) else { return };
        if node_of(pod).is_some() {
            self.assigned.insert(uid.to_string());
        } else {
            self.assumed.insert(uid.to_string(), node.to_string());
        }
        self.unscheduled.remove(uid);
    }

    /// Undoes [`PodGroupState::assume_pod`].
    pub fn forget_pod(&mut self, uid: &str) {
        let Some(pod) = self.all.get(uid) else { return };
        self.assumed.remove(uid);
        if node_of(pod).is_some() {
            self.assigned.insert(uid.to_string());
        } else {
            self.unscheduled.insert(uid.to_string());
        }
    }

    /// True when the group has no member.
    pub fn is_empty(&self) -> bool {
        self.all.is_empty()
    }

    /// Every member the scheduler knows.
    pub fn all_pods_count(&self) -> usize {
        self.all.len()
    }

    /// Members assumed or assigned.
    pub fn scheduled_pods_count(&self) -> usize {
        self.assumed.len() + self.assigned.len()
    }

    /// UIDs of the assumed members.
    pub fn assumed_pods(&self) -> Vec<String> {
        self.assumed.keys().cloned().collect()
    }

    /// UIDs of the assigned members.
    pub fn assigned_pods(&self) -> Vec<String> {
        self.assigned.iter().cloned().collect()
    }

    /// Assumed and assigned members with their nodes.
    pub fn scheduled_pods(&self) -> Vec<(Arc<Pod>, String)> {
        let assigned = self.assigned.iter().filter_map(|u| {
            let p = self.all.get(u)?;
            Some((p.clone(), node_of(p)?.to_string()))
        });
        let assumed = self.assumed.iter().filter_map(|(u, n)| Some((self.all.get(u)?.clone(), n.clone())));
        assigned.chain(assumed).collect()
    }

    /// Members neither assumed nor assigned, by name.
    pub fn unscheduled_pods(&self) -> Vec<Arc<Pod>> {
        let mut out: Vec<Arc<Pod>> = self.unscheduled.iter().filter_map(|u| self.all.get(u).cloned()).collect();
        out.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        out
    }

    /// True when the pod with this UID is a member.
    pub fn contains(&self, uid: &str) -> bool {
        self.all.contains_key(uid)
    }
}

#[derive(Default)]
struct Inner {
    objects: FxHashMap<GroupKey, Arc<PodGroup>>,
    states: FxHashMap<GroupKey, PodGroupState>,
}

/// The PodGroup objects (the informer's lister) and the live state of every group, shared by
/// the event handlers, the scheduling loop and the plugins.
#[derive(Default)]
pub struct PodGroups {
    inner: RwLock<Inner>,
}

impl fmt::Debug for PodGroups {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = self.inner.read();
        f.debug_struct("PodGroups").field("objects", &i.objects.len()).field("groups", &i.states.len()).finish()
    }
}

impl PodGroups {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// The PodGroup object, if it exists.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<PodGroup>> {
        self.inner.read().objects.get(&GroupKey::new(namespace, name)).cloned()
    }

    /// The PodGroup object a pod refers to.
    pub fn group_of(&self, pod: &Pod) -> Option<Arc<PodGroup>> {
        let key = group_key_of(pod)?;
        self.inner.read().objects.get(&key).cloned()
    }

    /// Every PodGroup object.
    pub fn list(&self) -> Vec<Arc<PodGroup>> {
        self.inner.read().objects.values().cloned().collect()
    }

    /// Stores a PodGroup object; returns the previous version.
    pub fn upsert(&self, pg: Arc<PodGroup>) -> Option<Arc<PodGroup>> {
        let key = GroupKey::new(
            pg.metadata.namespace.as_deref().unwrap_or("default"),
            pg.metadata.name.as_deref().unwrap_or_default(),
        );
        self.inner.write().objects.insert(key, pg)
    }

    /// Forgets a PodGroup object; returns it.
    pub fn remove(&self, namespace: &str, name: &str) -> Option<Arc<PodGroup>> {
        self.inner.write().objects.remove(&GroupKey::new(namespace, name))
    }

    /// Applies an informer change of a pod (add: `old` None; delete: `new` None) to the state
    /// of the group it belongs to. Pods without a group are ignored.
    pub fn observe_pod(&self, old: Option<&Arc<Pod>>, new: Option<&Arc<Pod>>) {
        let old_key = old.and_then(|p| group_key_of(p));
        let new_key = new.and_then(|p| group_key_of(p));
        if old_key.is_none() && new_key.is_none() {
            return;
        }
        let mut inner = self.inner.write();
        if let (Some(k), Some(o)) = (&old_key, old) {
            let replaced = new.is_some_and(|n| uid(n) == uid(o)) && new_key.as_ref() == Some(k);
            if !replaced {
                if let Some(s) = inner.states.get_mut(k) {
                    s.delete_pod(uid(o));
                    if s.is_empty() {
                        inner.states.remove(k);
                    }
                }
            }
        }
        if let (Some(k), Some(n)) = (new_key, new) {
            inner.states.entry(k).or_default().add_pod(n.clone());
        }
    }

    /// Marks a member pod as placed on `node` by the scheduler.
    pub fn assume(&self, pod: &Pod, node: &str) {
        let Some(k) = group_key_of(pod) else { return };
        if let Some(s) = self.inner.write().states.get_mut(&k) {
            s.assume_pod(uid(pod), node);
        }
    }

    /// Undoes [`PodGroups::assume`] (the binding failed).
    pub fn forget(&self, pod: &Pod) {
        let Some(k) = group_key_of(pod) else { return };
        if let Some(s) = self.inner.write().states.get_mut(&k) {
            s.forget_pod(uid(pod));
        }
    }

    /// A copy of a group's state (empty when no member is known).
    pub fn state(&self, namespace: &str, name: &str) -> PodGroupState {
        self.inner.read().states.get(&GroupKey::new(namespace, name)).cloned().unwrap_or_default()
    }

    /// Number of members known for a group.
    pub fn all_pods_count(&self, namespace: &str, name: &str) -> usize {
        self.inner.read().states.get(&GroupKey::new(namespace, name)).map_or(0, PodGroupState::all_pods_count)
    }

    /// Members assumed or assigned.
    pub fn scheduled_pods_count(&self, namespace: &str, name: &str) -> usize {
        self.inner.read().states.get(&GroupKey::new(namespace, name)).map_or(0, PodGroupState::scheduled_pods_count)
    }
}

/// The pod-group scheduling cycle a per-pod attempt belongs to: the group's state in the
/// cycle's snapshot, where the group's pods placed so far in this cycle count as assumed.
pub type PodGroupCycle = Arc<Mutex<PodGroupState>>;

/// Starts a pod-group cycle from the group's state when the cycle began.
pub fn new_cycle(state: PodGroupState) -> PodGroupCycle {
    Arc::new(Mutex::new(state))
}

/// A set of nodes a pod group may be placed on.
#[derive(Debug, Clone)]
pub struct Placement {
    /// Identifies the placement in logs and messages (e.g. the topology domain).
    pub name: String,
    /// The nodes, in snapshot order.
    pub nodes: Vec<Arc<NodeInfo>>,
    /// Tried only when no other placement can host the group (not in upstream, whose
    /// placements are all equal).
    pub fallback: bool,
}

/// A pod group being scheduled: its identity and the pods considered in this cycle.
#[derive(Debug, Clone)]
pub struct PodGroupInfo {
    /// Namespace.
    pub namespace: String,
    /// PodGroup name.
    pub name: String,
    /// The pods being scheduled, in the cycle's order.
    pub unscheduled_pods: Vec<Arc<PodInfo>>,
}

/// A pod of the group and the node a placement simulation proposed for it.
#[derive(Debug, Clone)]
pub struct ProposedAssignment {
    /// The pod.
    pub pod: Arc<PodInfo>,
    /// The proposed node.
    pub node: String,
}

/// The outcome of simulating a group in one placement, for PlacementScore plugins.
#[derive(Debug, Clone)]
pub struct PodGroupAssignments {
    /// The placement.
    pub placement: Arc<Placement>,
    /// Where each feasible pod would go.
    pub proposed: Vec<ProposedAssignment>,
}

/// A request to make room for a pod group (workload-aware preemption, and past upstream the
/// gang preemption and reservations of [`crate::PodGroupPostFilterPlugin`]).
#[derive(Debug, Clone, Copy)]
pub struct PodGroupPreemption<'a> {
    /// The group.
    pub pod_group: &'a PodGroup,
    /// Its members being scheduled.
    pub pods: &'a [Arc<PodInfo>],
    /// Snapshot indices (ascending) of the nodes victims may come from; `None`: every node
    /// (upstream's single cluster-wide domain).
    pub domain: Option<&'a [usize]>,
    /// Every pod group with a gang policy is one victim, whatever its `disruptionMode` (past
    /// upstream: a gang is never cut in half). Upstream groups only `disruptionMode: PodGroup`.
    pub atomic_gangs: bool,
    /// Pods of the group's own priority count as victims too: they are waited for, never
    /// evicted (reservations, past upstream).
    pub include_equal_priority: bool,
}

/// The victims chosen for a pod group.
#[derive(Debug, Clone, Default)]
pub struct PodGroupVictims {
    /// The pods to remove, unit by unit, the most important unit first.
    pub pods: Vec<Arc<PodInfo>>,
    /// How many units (single pods or whole groups) they make up.
    pub units: usize,
    /// Units whose removal exceeds a PodDisruptionBudget.
    pub pdb_violations: usize,
    /// The highest priority among the units.
    pub highest_priority: Option<i32>,
}

impl PodGroupVictims {
    /// Orders choices between domains: fewer PDB violations, then a lower highest victim
    /// priority, then fewer pods, as upstream's choice between nodes for one pod.
    pub fn cost(&self) -> (usize, i32, usize) {
        (self.pdb_violations, self.highest_priority.unwrap_or(i32::MIN), self.pods.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn member(name: &str, node: Option<&str>) -> Arc<Pod> {
        let mut spec = json!({"containers": [], "schedulingGroup": {"podGroupName": "g"}});
        if let Some(n) = node {
            spec["nodeName"] = json!(n);
        }
        Arc::new(
            serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ns", "uid": name}, "spec": spec}))
                .unwrap(),
        )
    }

    #[test]
    fn membership_follows_informer_and_scheduler_changes() {
        let groups = PodGroups::new();
        let (a, b) = (member("a", None), member("b", None));
        groups.observe_pod(None, Some(&a));
        groups.observe_pod(None, Some(&b));
        groups.observe_pod(None, Some(&member("c", Some("n1"))));
        let s = groups.state("ns", "g");
        assert_eq!((s.all_pods_count(), s.scheduled_pods_count()), (3, 1));
        assert_eq!(s.unscheduled_pods().len(), 2);

        groups.assume(&a, "n2");
        assert_eq!(groups.scheduled_pods_count("ns", "g"), 2);
        groups.forget(&a);
        assert_eq!(groups.scheduled_pods_count("ns", "g"), 1);
        groups.assume(&a, "n2");
        // The binding lands: the informer reports the pod assigned.
        groups.observe_pod(Some(&a), Some(&member("a", Some("n2"))));
        let s = groups.state("ns", "g");
        assert_eq!(s.assigned_pods().len(), 2);
        assert!(s.assumed_pods().is_empty());
        let mut nodes: Vec<String> = s.scheduled_pods().into_iter().map(|(_, n)| n).collect();
        nodes.sort();
        assert_eq!(nodes, ["n1", "n2"]);

        groups.observe_pod(Some(&b), None);
        assert_eq!(groups.all_pods_count("ns", "g"), 2);
        assert_eq!(groups.all_pods_count("ns", "other"), 0);
        // Pods outside any group are ignored.
        let plain: Arc<Pod> = Arc::new(serde_json::from_value(json!({"metadata": {"name": "p"}})).unwrap());
        groups.observe_pod(None, Some(&plain));
        assert_eq!(groups.all_pods_count("default", "g"), 0);
    }

    #[test]
    fn pod_group_fields() {
        let pg: PodGroup = serde_json::from_value(json!({"metadata": {"name": "g", "namespace": "ns"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}, "priority": 7, "disruptionMode": "PodGroup",
                "schedulingConstraints": {"topology": [{"key": "zone"}]}}}))
        .unwrap();
        assert_eq!(gang_min_count(&pg), Some(3));
        assert_eq!(topology_key(&pg), Some("zone"));
        assert_eq!(pod_group_priority(&pg), 7);
        assert!(disrupted_as_group(&pg));
        let groups = PodGroups::new();
        groups.upsert(Arc::new(pg));
        assert!(groups.group_of(&member("x", None)).is_some());
    }
}
