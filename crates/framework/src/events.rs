//! Cluster events and queueing hints: how a plugin says which changes can make a rejected pod
//! schedulable again (upstream `framework/types.go`, queueing hints).

use std::fmt;
use std::sync::Arc;

use crate::node::Node;
use crate::pod::Pod;

/// The kind of object an event is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EventResource {
    /// Any pod (matches AssignedPod and UnschedulablePod too).
    Pod,
    /// A pod bound to a node.
    AssignedPod,
    /// A pod waiting in the queue.
    UnschedulablePod,
    /// A node.
    Node,
    /// A PersistentVolume.
    PersistentVolume,
    /// A PersistentVolumeClaim.
    PersistentVolumeClaim,
    /// storage.k8s.io/CSINode
    CsiNode,
    /// storage.k8s.io/CSIDriver
    CsiDriver,
    /// storage.k8s.io/VolumeAttachment
    VolumeAttachment,
    /// storage.k8s.io/CSIStorageCapacity
    CsiStorageCapacity,
    /// storage.k8s.io/StorageClass
    StorageClass,
    /// resource.k8s.io/ResourceClaim
    ResourceClaim,
    /// resource.k8s.io/ResourceSlice
    ResourceSlice,
    /// resource.k8s.io/DeviceClass
    DeviceClass,
    /// scheduling.k8s.io/PodGroup
    PodGroup,
    /// Every resource.
    Wildcard,
}

impl EventResource {
    /// Upstream's resource name, used in event labels.
    pub fn as_str(self) -> &'static str {
        match self {
            EventResource::Pod => "Pod",
            EventResource::AssignedPod => "AssignedPod",
            EventResource::UnschedulablePod => "UnschedulablePod",
            EventResource::Node => "Node",
            EventResource::PersistentVolume => "PersistentVolume",
            EventResource::PersistentVolumeClaim => "PersistentVolumeClaim",
            EventResource::CsiNode => "storage.k8s.io/CSINode",
            EventResource::CsiDriver => "storage.k8s.io/CSIDriver",
            EventResource::VolumeAttachment => "storage.k8s.io/VolumeAttachment",
            EventResource::CsiStorageCapacity => "storage.k8s.io/CSIStorageCapacity",
            EventResource::StorageClass => "storage.k8s.io/StorageClass",
            EventResource::ResourceClaim => "resource.k8s.io/ResourceClaim",
            EventResource::ResourceSlice => "resource.k8s.io/ResourceSlice",
            EventResource::DeviceClass => "resource.k8s.io/DeviceClass",
            EventResource::PodGroup => "scheduling.k8s.io/PodGroup",
            EventResource::Wildcard => "*",
        }
    }

    fn matches(self, incoming: EventResource) -> bool {
        self == incoming
            || self == EventResource::Wildcard
            || (self == EventResource::Pod
                && matches!(incoming, EventResource::AssignedPod | EventResource::UnschedulablePod))
    }
}

/// Bit flags describing what changed. More specific update bits are numerically larger than Add
/// and Delete, which the matching rule relies on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct ActionType(pub u32);

impl ActionType {
    /// Object created.
    pub const ADD: ActionType = ActionType(1);
    /// Object deleted.
    pub const DELETE: ActionType = ActionType(1 << 1);
    /// Node allocatable changed.
    pub const UPDATE_NODE_ALLOCATABLE: ActionType = ActionType(1 << 2);
    /// Node labels changed.
    pub const UPDATE_NODE_LABEL: ActionType = ActionType(1 << 3);
    /// Node taints changed, or spec.unschedulable went true -> false.
    pub const UPDATE_NODE_TAINT: ActionType = ActionType(1 << 4);
    /// Node condition type->status map changed.
    pub const UPDATE_NODE_CONDITION: ActionType = ActionType(1 << 5);
    /// Node annotations changed.
    pub const UPDATE_NODE_ANNOTATION: ActionType = ActionType(1 << 6);
    /// Node declared features changed.
    pub const UPDATE_NODE_DECLARED_FEATURE: ActionType = ActionType(1 << 7);
    /// Pod labels changed.
    pub const UPDATE_POD_LABEL: ActionType = ActionType(1 << 8);
    /// A pod request decreased or was removed.
    pub const UPDATE_POD_SCALE_DOWN: ActionType = ActionType(1 << 9);
    /// The number of tolerations changed.
    pub const UPDATE_POD_TOLERATION: ActionType = ActionType(1 << 10);
    /// Scheduling gates went from non-empty to empty.
    pub const UPDATE_POD_SCHEDULING_GATES_ELIMINATED: ActionType = ActionType(1 << 11);
    /// A generated ResourceClaim status changed.
    pub const UPDATE_POD_GENERATED_RESOURCE_CLAIM: ActionType = ActionType(1 << 12);
    /// Any update.
    pub const UPDATE: ActionType = ActionType(((1 << 13) - 1) & !3);
    /// Any action.
    pub const ALL: ActionType = ActionType((1 << 13) - 1);

    /// True when any bit is shared.
    pub fn intersects(self, o: ActionType) -> bool {
        self.0 & o.0 != 0
    }

    /// Upstream's action name for event labels (`Add`, `UpdateNodeTaint`, `Update`, `All`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            ActionType::ADD => "Add",
            ActionType::DELETE => "Delete",
            ActionType::UPDATE_NODE_ALLOCATABLE => "UpdateNodeAllocatable",
            ActionType::UPDATE_NODE_LABEL => "UpdateNodeLabel",
            ActionType::UPDATE_NODE_TAINT => "UpdateNodeTaint",
            ActionType::UPDATE_NODE_CONDITION => "UpdateNodeCondition",
            ActionType::UPDATE_NODE_ANNOTATION => "UpdateNodeAnnotation",
            ActionType::UPDATE_NODE_DECLARED_FEATURE => "UpdateNodeDeclaredFeature",
            ActionType::UPDATE_POD_LABEL => "UpdatePodLabel",
            ActionType::UPDATE_POD_SCALE_DOWN => "UpdatePodScaleDown",
            ActionType::UPDATE_POD_TOLERATION => "UpdatePodToleration",
            ActionType::UPDATE_POD_SCHEDULING_GATES_ELIMINATED => "UpdatePodSchedulingGatesEliminated",
            ActionType::UPDATE_POD_GENERATED_RESOURCE_CLAIM => "UpdatePodGeneratedResourceClaim",
            ActionType::UPDATE => "Update",
            ActionType::ALL => "All",
            _ => "Unknown",
        }
    }
}

impl std::ops::BitOr for ActionType {
    type Output = ActionType;
    fn bitor(self, o: ActionType) -> ActionType {
        ActionType(self.0 | o.0)
    }
}

/// A change in the cluster that may make pods schedulable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClusterEvent {
    /// What kind of object.
    pub resource: EventResource,
    /// What happened to it.
    pub action: ActionType,
    /// A custom label replacing `<Resource><Action>` (e.g. `UnschedulableTimeout`).
    pub custom_label: Option<&'static str>,
}

impl ClusterEvent {
    /// An event for a resource and action.
    pub const fn new(resource: EventResource, action: ActionType) -> Self {
        ClusterEvent { resource, action, custom_label: None }
    }

    /// A wildcard event with a custom label (`UnschedulableTimeout`, `ForceActivate`).
    pub const fn wildcard(label: &'static str) -> Self {
        ClusterEvent { resource: EventResource::Wildcard, action: ActionType::ALL, custom_label: Some(label) }
    }

    /// True for wildcard-All events, which match every registration.
    pub fn is_wildcard(&self) -> bool {
        self.resource == EventResource::Wildcard && self.action == ActionType::ALL
    }

    /// True when this registered event matches the incoming one (upstream `ClusterEvent.Match`).
    pub fn matches(&self, incoming: &ClusterEvent) -> bool {
        self.is_wildcard()
            || (self.resource.matches(incoming.resource)
                && self.action.intersects(incoming.action)
                && incoming.action.0 <= self.action.0)
    }

    /// The label used in metrics and logs.
    pub fn label(&self) -> String {
        match self.custom_label {
            Some(l) => l.to_string(),
            None => format!("{}{}", self.resource.as_str(), self.action.as_str()),
        }
    }
}

impl fmt::Display for ClusterEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}

/// The object carried by an event (old or new version).
#[derive(Debug, Clone)]
pub enum EventObject {
    /// A pod.
    Pod(Arc<Pod>),
    /// A node.
    Node(Arc<Node>),
    /// A PodGroup.
    PodGroup(Arc<crate::podgroup::PodGroup>),
    /// Any other object, as JSON.
    Other(Arc<serde_json::Value>),
}

impl EventObject {
    /// The pod, if this is one.
    pub fn as_pod(&self) -> Option<&Pod> {
        match self {
            EventObject::Pod(p) => Some(p),
            _ => None,
        }
    }

    /// The node, if this is one.
    pub fn as_node(&self) -> Option<&Node> {
        match self {
            EventObject::Node(n) => Some(n),
            _ => None,
        }
    }

    /// The PodGroup, if this is one.
    pub fn as_pod_group(&self) -> Option<&crate::podgroup::PodGroup> {
        match self {
            EventObject::PodGroup(g) => Some(g),
            _ => None,
        }
    }
}

/// A hint's verdict: whether the event may make the pod schedulable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QueueingHint {
    /// The event cannot help the pod.
    QueueSkip,
    /// The event may help; requeue the pod.
    Queue,
}

/// A queueing hint function: (pod waiting, old object, new object) -> verdict. Errors count as Queue.
pub type QueueingHintFn =
    Arc<dyn Fn(&Pod, Option<&EventObject>, Option<&EventObject>) -> Result<QueueingHint, String> + Send + Sync>;

/// A registered event with an optional hint (none means always Queue).
#[derive(Clone)]
pub struct ClusterEventWithHint {
    /// The event.
    pub event: ClusterEvent,
    /// The hint; `None` = always Queue.
    pub hint: Option<QueueingHintFn>,
}

impl ClusterEventWithHint {
    /// An event registration without a hint.
    pub fn new(resource: EventResource, action: ActionType) -> Self {
        ClusterEventWithHint { event: ClusterEvent::new(resource, action), hint: None }
    }

    /// An event registration with a hint.
    pub fn with_hint(
        resource: EventResource,
        action: ActionType,
        hint: impl Fn(&Pod, Option<&EventObject>, Option<&EventObject>) -> Result<QueueingHint, String>
            + Send
            + Sync
            + 'static,
    ) -> Self {
        ClusterEventWithHint { event: ClusterEvent::new(resource, action), hint: Some(Arc::new(hint)) }
    }
}

impl fmt::Debug for ClusterEventWithHint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}(hint: {})", self.event, self.hint.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matching_rule() {
        let reg = ClusterEvent::new(EventResource::Node, ActionType::ADD | ActionType::UPDATE_NODE_TAINT);
        assert!(reg.matches(&ClusterEvent::new(EventResource::Node, ActionType::UPDATE_NODE_TAINT)));
        assert!(reg.matches(&ClusterEvent::new(EventResource::Node, ActionType::ADD)));
        assert!(!reg.matches(&ClusterEvent::new(EventResource::Node, ActionType::UPDATE_NODE_LABEL)));
        assert!(!reg.matches(&ClusterEvent::new(EventResource::Pod, ActionType::ADD)));
        // a generic Update (all bits) is less specific than the registration: no match
        assert!(!reg.matches(&ClusterEvent::new(EventResource::Node, ActionType::UPDATE)));
        let pods = ClusterEvent::new(EventResource::Pod, ActionType::DELETE);
        assert!(pods.matches(&ClusterEvent::new(EventResource::AssignedPod, ActionType::DELETE)));
        assert!(ClusterEvent::wildcard("x").matches(&ClusterEvent::new(EventResource::Node, ActionType::ADD)));
    }

    #[test]
    fn labels() {
        assert_eq!(ClusterEvent::new(EventResource::Node, ActionType::ADD).label(), "NodeAdd");
        assert_eq!(ClusterEvent::new(EventResource::AssignedPod, ActionType::DELETE).label(), "AssignedPodDelete");
        assert_eq!(ClusterEvent::wildcard("UnschedulableTimeout").label(), "UnschedulableTimeout");
        assert_eq!(ActionType::UPDATE.as_str(), "Update");
    }
}
