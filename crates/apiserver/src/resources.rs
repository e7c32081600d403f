//! The static table of served resources.
//!
//! Everything else (routing, discovery, storage buckets, manifest ordering)
//! is driven from [`RESOURCES`], so adding a resource is one line here.

/// How a resource is backed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backing {
    /// Objects stored in their own bucket.
    Stored,
    /// A view of another resource's bucket (same objects, converted on the way in and out).
    ViewOf(&'static str, &'static str),
    /// Create-only review resources answered synchronously and never stored.
    Review,
}

/// One served resource (group/version/plural) and its discovery metadata.
#[derive(Debug)]
pub struct ResourceDef {
    /// API group, empty for core.
    pub group: &'static str,
    /// API version within the group.
    pub version: &'static str,
    /// Plural resource name used in URLs.
    pub plural: &'static str,
    /// Singular name (kubectl accepts it).
    pub singular: &'static str,
    /// Object kind.
    pub kind: &'static str,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// kubectl short names.
    pub short_names: &'static [&'static str],
    /// Whether a `/status` subresource exists (main-resource writes then keep the old status).
    pub has_status: bool,
    /// Storage backing.
    pub backing: Backing,
}

/// Index into [`RESOURCES`].
pub type ResourceId = usize;

const fn r(
    group: &'static str,
    plural: &'static str,
    singular: &'static str,
    kind: &'static str,
    namespaced: bool,
    short_names: &'static [&'static str],
    has_status: bool,
) -> ResourceDef {
    ResourceDef {
        group,
        version: "v1",
        plural,
        singular,
        kind,
        namespaced,
        short_names,
        has_status,
        backing: Backing::Stored,
    }
}

const fn review(group: &'static str, plural: &'static str, singular: &'static str, kind: &'static str) -> ResourceDef {
    ResourceDef {
        group,
        version: "v1",
        plural,
        singular,
        kind,
        namespaced: false,
        short_names: &[],
        has_status: false,
        backing: Backing::Review,
    }
}

/// Every served resource: `v1` of its group unless it says otherwise.
pub static RESOURCES: &[ResourceDef] = &[
    r("", "namespaces", "namespace", "Namespace", false, &["ns"], true),
    r("", "nodes", "node", "Node", false, &["no"], true),
    r("", "pods", "pod", "Pod", true, &["po"], true),
    r("", "events", "event", "Event", true, &["ev"], false),
    r("", "services", "service", "Service", true, &["svc"], true),
    r("", "endpoints", "endpoints", "Endpoints", true, &["ep"], false),
    r("", "replicationcontrollers", "replicationcontroller", "ReplicationController", true, &["rc"], true),
    r("", "persistentvolumes", "persistentvolume", "PersistentVolume", false, &["pv"], true),
    r("", "persistentvolumeclaims", "persistentvolumeclaim", "PersistentVolumeClaim", true, &["pvc"], true),
    r("", "configmaps", "configmap", "ConfigMap", true, &["cm"], false),
    r("", "secrets", "secret", "Secret", true, &[], false),
    r("", "serviceaccounts", "serviceaccount", "ServiceAccount", true, &["sa"], false),
    r("", "limitranges", "limitrange", "LimitRange", true, &["limits"], false),
    r("", "resourcequotas", "resourcequota", "ResourceQuota", true, &["quota"], true),
    r("", "podtemplates", "podtemplate", "PodTemplate", true, &[], false),
    ResourceDef {
        backing: Backing::ViewOf("", "events"),
        ..r("events.k8s.io", "events", "event", "Event", true, &["ev"], false)
    },
    r("coordination.k8s.io", "leases", "lease", "Lease", true, &[], false),
    r("policy", "poddisruptionbudgets", "poddisruptionbudget", "PodDisruptionBudget", true, &["pdb"], true),
    r("storage.k8s.io", "storageclasses", "storageclass", "StorageClass", false, &["sc"], false),
    r("storage.k8s.io", "csinodes", "csinode", "CSINode", false, &[], false),
    r("storage.k8s.io", "csidrivers", "csidriver", "CSIDriver", false, &[], false),
    r("storage.k8s.io", "csistoragecapacities", "csistoragecapacity", "CSIStorageCapacity", true, &[], false),
    r("storage.k8s.io", "volumeattachments", "volumeattachment", "VolumeAttachment", false, &[], true),
    r(
        "storage.k8s.io",
        "volumeattributesclasses",
        "volumeattributesclass",
        "VolumeAttributesClass",
        false,
        &["vac"],
        false,
    ),
    r("apps", "deployments", "deployment", "Deployment", true, &["deploy"], true),
    r("apps", "replicasets", "replicaset", "ReplicaSet", true, &["rs"], true),
    r("apps", "statefulsets", "statefulset", "StatefulSet", true, &["sts"], true),
    r("apps", "daemonsets", "daemonset", "DaemonSet", true, &["ds"], true),
    r("apps", "controllerrevisions", "controllerrevision", "ControllerRevision", true, &[], false),
    r("batch", "jobs", "job", "Job", true, &[], true),
    r("batch", "cronjobs", "cronjob", "CronJob", true, &["cj"], true),
    r("scheduling.k8s.io", "priorityclasses", "priorityclass", "PriorityClass", false, &["pc"], false),
    // The workload-aware scheduling API (alpha in v1.36, GenericWorkload).
    ResourceDef { version: "v1alpha2", ..r("scheduling.k8s.io", "podgroups", "podgroup", "PodGroup", true, &[], true) },
    ResourceDef {
        version: "v1alpha2",
        ..r("scheduling.k8s.io", "workloads", "workload", "Workload", true, &[], false)
    },
    r("resource.k8s.io", "resourceclaims", "resourceclaim", "ResourceClaim", true, &[], true),
    r("resource.k8s.io", "resourceclaimtemplates", "resourceclaimtemplate", "ResourceClaimTemplate", true, &[], false),
    r("resource.k8s.io", "resourceslices", "resourceslice", "ResourceSlice", false, &[], false),
    r("resource.k8s.io", "deviceclasses", "deviceclass", "DeviceClass", false, &[], false),
    r("discovery.k8s.io", "endpointslices", "endpointslice", "EndpointSlice", true, &[], false),
    review("authentication.k8s.io", "tokenreviews", "tokenreview", "TokenReview"),
    review("authentication.k8s.io", "selfsubjectreviews", "selfsubjectreview", "SelfSubjectReview"),
    review("authorization.k8s.io", "subjectaccessreviews", "subjectaccessreview", "SubjectAccessReview"),
    review("authorization.k8s.io", "selfsubjectaccessreviews", "selfsubjectaccessreview", "SelfSubjectAccessReview"),
];

impl ResourceDef {
    /// `v1` or `group/v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `pods` or `leases.coordination.k8s.io`, the form used in error messages.
    pub fn group_resource(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// `<Kind>List`.
    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    /// Whether objects are persisted (i.e. not a review resource).
    pub fn is_stored(&self) -> bool {
        !matches!(self.backing, Backing::Review)
    }
}

/// Looks a resource up by URL coordinates.
pub fn by_path(group: &str, version: &str, plural: &str) -> Option<ResourceId> {
    RESOURCES.iter().position(|d| d.group == group && d.version == version && d.plural == plural)
}

/// Looks a resource up by `apiVersion` and `kind` as found in an object.
pub fn by_kind(api_version: &str, kind: &str) -> Option<ResourceId> {
    let (group, version) = split_api_version(api_version);
    RESOURCES.iter().position(|d| d.group == group && d.version == version && d.kind == kind)
}

/// Splits `group/version` (or a bare core `version`).
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    api_version.rsplit_once('/').unwrap_or(("", api_version))
}

/// The resource whose bucket holds this resource's objects.
pub fn storage_id(id: ResourceId) -> ResourceId {
    match RESOURCES[id].backing {
        Backing::ViewOf(group, plural) => by_path(group, "v1", plural).unwrap_or(id),
        _ => id,
    }
}

/// The resource definition for an id.
pub fn def(id: ResourceId) -> &'static ResourceDef {
    &RESOURCES[id]
}

/// Versions served for a group (core is ""), preferred first, in table order.
pub fn versions(group: &str) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for d in RESOURCES.iter().filter(|d| d.group == group) {
        if !out.contains(&d.version) {
            out.push(d.version);
        }
    }
    out
}

/// Group names in discovery order (core excluded).
pub fn groups() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for d in RESOURCES {
        if !d.group.is_empty() && !out.contains(&d.group) {
            out.push(d.group);
        }
    }
    out
}

/// Well-known ids used by the defaulting and binding code.
pub mod ids {
    use super::{by_path, ResourceId};

    fn must(group: &str, plural: &str) -> ResourceId {
        // The table is static; a miss is a programming error caught by the unit test below.
        by_path(group, "v1", plural).unwrap_or(usize::MAX)
    }

    /// core/v1 namespaces.
    pub fn namespaces() -> ResourceId {
        must("", "namespaces")
    }
    /// core/v1 pods.
    pub fn pods() -> ResourceId {
        must("", "pods")
    }
    /// core/v1 nodes.
    pub fn nodes() -> ResourceId {
        must("", "nodes")
    }
    /// core/v1 events.
    pub fn core_events() -> ResourceId {
        must("", "events")
    }
    /// events.k8s.io/v1 events.
    pub fn events_v1() -> ResourceId {
        must("events.k8s.io", "events")
    }
    /// scheduling.k8s.io/v1 priorityclasses.
    pub fn priority_classes() -> ResourceId {
        must("scheduling.k8s.io", "priorityclasses")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_known_ids_resolve() {
        for id in [
            ids::namespaces(),
            ids::pods(),
            ids::nodes(),
            ids::core_events(),
            ids::events_v1(),
            ids::priority_classes(),
        ] {
            assert!(id < RESOURCES.len());
        }
        assert_eq!(storage_id(ids::events_v1()), ids::core_events());
    }

    #[test]
    fn lookups() {
        assert_eq!(def(by_kind("v1", "Pod").unwrap()).plural, "pods");
        assert_eq!(
            def(by_kind("scheduling.k8s.io/v1", "PriorityClass").unwrap()).group_resource(),
            "priorityclasses.scheduling.k8s.io"
        );
        assert!(by_kind("v1", "Nope").is_none());
        assert_eq!(def(by_kind("scheduling.k8s.io/v1alpha2", "PodGroup").unwrap()).plural, "podgroups");
        assert!(by_kind("scheduling.k8s.io/v1", "PodGroup").is_none());
        assert_eq!(versions("scheduling.k8s.io"), ["v1", "v1alpha2"]);
        assert_eq!(versions("apps"), ["v1"]);
    }

    #[test]
    fn no_duplicate_paths() {
        for (i, a) in RESOURCES.iter().enumerate() {
            for b in &RESOURCES[i + 1..] {
                assert!(!(a.group == b.group && a.plural == b.plural), "{}", a.plural);
            }
        }
    }
}
