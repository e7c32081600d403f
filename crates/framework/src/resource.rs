//! Resource vectors and the pod request arithmetic shared by the cache and NodeResourcesFit (upstream `framework/types.go` Resource).

use std::collections::BTreeMap;

use crate::pod::{Container, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::quantity;

/// Resource name of CPU.
pub const CPU: &str = "cpu";
/// Resource name of memory.
pub const MEMORY: &str = "memory";
/// Resource name of ephemeral storage.
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
/// Resource name of the pod count.
pub const PODS: &str = "pods";

/// CPU assumed for a container without a cpu request when scoring (100m).
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
/// Memory assumed for a container without a memory request when scoring (200 MiB).
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

/// A vector of resource amounts: cpu in millicores, the rest in base units.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resource {
    /// CPU in millicores.
    pub milli_cpu: i64,
    /// Memory in bytes.
    pub memory: i64,
    /// Ephemeral storage in bytes.
    pub ephemeral_storage: i64,
    /// Number of pods (only meaningful for allocatable).
    pub allowed_pod_number: i64,
    /// Extended, hugepages and other scalar resources.
    pub scalar_resources: ScalarResources,
}

/// The scalar resources of a [`Resource`]: a map that takes one pointer while empty.
///
/// Most nodes and pods have none, and NodeInfo holds three resource vectors that every Filter
/// and Score pass reads: keeping the map out of line keeps them in fewer cache lines.
#[derive(Clone, Default)]
// The box is the point: one pointer instead of the map's three words.
#[allow(clippy::box_collection)]
pub struct ScalarResources(Option<Box<BTreeMap<String, i64>>>);

static NO_SCALARS: BTreeMap<String, i64> = BTreeMap::new();

impl std::ops::Deref for ScalarResources {
    type Target = BTreeMap<String, i64>;
    fn deref(&self) -> &Self::Target {
        self.0.as_deref().unwrap_or(&NO_SCALARS)
    }
}

impl std::ops::DerefMut for ScalarResources {
    /// Allocates the map on first write.
    fn deref_mut(&mut self) -> &mut Self::Target {
        self.0.get_or_insert_with(Default::default)
    }
}

impl PartialEq for ScalarResources {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for ScalarResources {}

impl std::fmt::Debug for ScalarResources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

impl From<BTreeMap<String, i64>> for ScalarResources {
    fn from(map: BTreeMap<String, i64>) -> Self {
        ScalarResources((!map.is_empty()).then(|| Box::new(map)))
    }
}

impl<'a> IntoIterator for &'a ScalarResources {
    type Item = (&'a String, &'a i64);
    type IntoIter = std::collections::btree_map::Iter<'a, String, i64>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// True for resources the scheduler tracks as scalars: extended resources, hugepages, prefixed
/// native resources and attachable volumes (upstream `schedutil.IsScalarResourceName`).
pub fn is_scalar_resource_name(name: &str) -> bool {
    is_extended_resource_name(name)
        || name.starts_with("hugepages-")
        || name.contains("kubernetes.io/")
        || name.starts_with("attachable-volumes-")
}

/// True for extended resources: domain-qualified, not in the kubernetes.io domain, not a quota name.
pub fn is_extended_resource_name(name: &str) -> bool {
    name.contains('/') && !name.contains("kubernetes.io/") && !name.starts_with("requests.")
}

impl Resource {
    /// Builds a resource vector from a ResourceList, ignoring names the scheduler does not track
    /// and quantities that do not parse (the API server rejects those before they reach us).
    pub fn from_list<'a>(list: impl IntoIterator<Item = (&'a String, &'a Quantity)>) -> Self {
        let mut r = Resource::default();
        for (name, q) in list {
            r.add_named(name, &q.0);
        }
        r
    }

    fn add_named(&mut self, name: &str, q: &str) {
        match name {
            CPU => self.milli_cpu += quantity::milli_value(q).unwrap_or(0),
            MEMORY => self.memory += quantity::value(q).unwrap_or(0),
            EPHEMERAL_STORAGE => self.ephemeral_storage += quantity::value(q).unwrap_or(0),
            PODS => self.allowed_pod_number += quantity::value(q).unwrap_or(0),
            _ if is_scalar_resource_name(name) => {
                *self.scalar_resources.entry(name.to_string()).or_default() += quantity::value(q).unwrap_or(0)
            }
            _ => {}
        }
    }

    /// Adds `other` to self.
    pub fn add(&mut self, other: &Resource) {
        self.milli_cpu += other.milli_cpu;
        self.memory += other.memory;
        self.ephemeral_storage += other.ephemeral_storage;
        self.allowed_pod_number += other.allowed_pod_number;
        for (k, v) in &other.scalar_resources {
            *self.scalar_resources.entry(k.clone()).or_default() += v;
        }
    }

    /// Subtracts `other` from self.
    pub fn sub(&mut self, other: &Resource) {
        self.milli_cpu -= other.milli_cpu;
        self.memory -= other.memory;
        self.ephemeral_storage -= other.ephemeral_storage;
        self.allowed_pod_number -= other.allowed_pod_number;
        for (k, v) in &other.scalar_resources {
            *self.scalar_resources.entry(k.clone()).or_default() -= v;
        }
    }

    /// Per-resource maximum of self and `other`.
    pub fn set_max(&mut self, other: &Resource) {
        self.milli_cpu = self.milli_cpu.max(other.milli_cpu);
        self.memory = self.memory.max(other.memory);
        self.ephemeral_storage = self.ephemeral_storage.max(other.ephemeral_storage);
        self.allowed_pod_number = self.allowed_pod_number.max(other.allowed_pod_number);
        for (k, v) in &other.scalar_resources {
            let e = self.scalar_resources.entry(k.clone()).or_default();
            *e = (*e).max(*v);
        }
    }

    /// The amount of a named resource (0 when absent).
    pub fn get(&self, name: &str) -> i64 {
        match name {
            CPU => self.milli_cpu,
            MEMORY => self.memory,
            EPHEMERAL_STORAGE => self.ephemeral_storage,
            PODS => self.allowed_pod_number,
            _ => self.scalar_resources.get(name).copied().unwrap_or(0),
        }
    }

    /// True when no resource is requested.
    pub fn is_zero(&self) -> bool {
        self.milli_cpu == 0
            && self.memory == 0
            && self.ephemeral_storage == 0
            && self.scalar_resources.values().all(|v| *v == 0)
    }
}

/// Options for [`pod_requests`].
#[derive(Debug, Clone, Copy, Default)]
pub struct RequestOptions {
    /// Substitute 100m cpu / 200 MiB memory for containers that do not request them (scoring).
    pub non_zero_defaults: bool,
}

use crate::pod::ResourceList;

/// Resources the kubelet reports for a container (or the pod) being resized in place.
#[derive(Clone, Copy)]
struct StatusResources<'a> {
    actuated: Option<&'a ResourceList>,
    allocated: Option<&'a ResourceList>,
}

/// Upstream's effective requests during an in-place resize: the largest of spec, actuated and
/// allocated, since the kubelet may still run the old (larger) size; an infeasible resize will
/// never be actuated, so its spec is ignored. Returns the lists the maximum is taken over.
fn effective_lists<'a>(
    spec: Option<&'a ResourceList>,
    status: Option<StatusResources<'a>>,
    infeasible: bool,
) -> Vec<&'a ResourceList> {
    match status {
        None => spec.into_iter().collect(),
        Some(st) if infeasible => [st.actuated, st.allocated].into_iter().flatten().collect(),
        Some(st) => [spec, st.actuated, st.allocated].into_iter().flatten().collect(),
    }
}

fn max_of(lists: &[&ResourceList]) -> Resource {
    let mut r = Resource::default();
    for l in lists {
        r.set_max(&Resource::from_list(*l));
    }
    r
}

fn container_requests(
    c: &Container,
    status: Option<StatusResources<'_>>,
    infeasible: bool,
    opts: RequestOptions,
) -> Resource {
    let spec = c.resources.as_ref().and_then(|r| r.requests.as_ref());
    let lists = effective_lists(spec, status, infeasible);
    let mut r = max_of(&lists);
    if opts.non_zero_defaults {
        // Only requests missing from the effective list are defaulted; an explicit 0 stays 0.
        let has = |n: &str| lists.iter().any(|l| l.contains_key(n));
        if !has(CPU) {
            r.milli_cpu = DEFAULT_MILLI_CPU_REQUEST;
        }
        if !has(MEMORY) {
            r.memory = DEFAULT_MEMORY_REQUEST;
        }
    }
    r
}

/// The status resources of a container, when the kubelet reports them (`status.resources` set).
fn container_status<'a>(pod: &'a Pod, name: &str) -> Option<StatusResources<'a>> {
    let status = pod.status.as_ref()?;
    let cs = status
        .container_statuses
        .iter()
        .flatten()
        .chain(status.init_container_statuses.iter().flatten())
        .find(|cs| cs.name == name)?;
    let res = cs.resources.as_ref()?;
    Some(StatusResources { actuated: res.requests.as_ref(), allocated: cs.allocated_resources.as_ref() })
}

fn resize_infeasible(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "PodResizePending"))
        .is_some_and(|c| c.reason.as_deref() == Some("Infeasible"))
}

fn is_supported_pod_level_resource(name: &str) -> bool {
    name == CPU || name == MEMORY || name.starts_with("hugepages-")
}

/// The effective resource request of a pod: containers plus sidecars, the max over init phases,
/// pod-level requests, plus overhead (upstream's `PodRequests` with status resources honoured).
pub fn pod_requests(pod: &Pod, opts: RequestOptions) -> Resource {
    let Some(spec) = pod.spec.as_ref() else { return Resource::default() };
    let infeasible = resize_infeasible(pod);
    let mut reqs = Resource::default();
    for c in spec.containers.iter() {
        reqs.add(&container_requests(c, container_status(pod, &c.name), infeasible, opts));
    }
    let mut sidecars = Resource::default();
    let mut init_max = Resource::default();
    for c in spec.init_containers.iter().flatten() {
        let phase = if c.restart_policy.as_deref() == Some("Always") {
            // Only sidecars keep running, so only they can be resized in place.
            sidecars.add(&container_requests(c, container_status(pod, &c.name), infeasible, opts));
            sidecars.clone()
        } else {
            let mut p = container_requests(c, None, infeasible, opts);
            p.add(&sidecars);
            p
        };
        init_max.set_max(&phase);
    }
    reqs.add(&sidecars);
    reqs.set_max(&init_max);

    // Pod-level requests (PodLevelResources) replace the container aggregate for the resources
    // they name; the scheduler honours cpu, memory and hugepages there.
    let pod_level = spec.resources.as_ref().and_then(|r| r.requests.as_ref());
    if let Some(pl) = pod_level.filter(|pl| pl.keys().any(|k| is_supported_pod_level_resource(k))) {
        let status = pod.status.as_ref().and_then(|st| {
            let res = st.resources.as_ref()?;
            Some(StatusResources { actuated: res.requests.as_ref(), allocated: st.allocated_resources.as_ref() })
        });
        let effective = status.map(|st| max_of(&effective_lists(Some(pl), Some(st), infeasible)));
        for (name, q) in pl {
            let value = |r: &Resource| r.get(name);
            let v = match (&effective, name.as_str()) {
                (Some(e), _) => value(e),
                (None, CPU) => quantity::milli_value(&q.0).unwrap_or(0),
                (None, _) => quantity::value(&q.0).unwrap_or(0),
            };
            match name.as_str() {
                CPU => reqs.milli_cpu = v,
                MEMORY => reqs.memory = v,
                n if n.starts_with("hugepages-") => {
                    reqs.scalar_resources.insert(n.to_string(), v);
                }
                _ => {}
            }
        }
    }
    if let Some(overhead) = spec.overhead.as_ref() {
        reqs.add(&Resource::from_list(overhead));
    }
    reqs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    fn c(name: &str, cpu: Option<&str>, mem: Option<&str>) -> serde_json::Value {
        let mut req = serde_json::Map::new();
        if let Some(cpu) = cpu {
            req.insert("cpu".into(), json!(cpu));
        }
        if let Some(mem) = mem {
            req.insert("memory".into(), json!(mem));
        }
        json!({"name": name, "image": "x", "resources": {"requests": req}})
    }

    #[test]
    fn containers_are_summed_and_init_phases_maxed() {
        let p = pod(json!({"spec": {
            "containers": [c("a", Some("1"), Some("1Gi")), c("b", Some("500m"), None)],
            "initContainers": [c("i", Some("2"), Some("100Mi"))]
        }}));
        let r = pod_requests(&p, RequestOptions::default());
        assert_eq!(r.milli_cpu, 2000);
        assert_eq!(r.memory, 1 << 30);
    }

    #[test]
    fn sidecars_accumulate_and_run_alongside() {
        let mut sidecar = c("s", Some("200m"), Some("100Mi"));
        sidecar["restartPolicy"] = json!("Always");
        let p = pod(json!({"spec": {
            "containers": [c("a", Some("1"), Some("1Gi"))],
            "initContainers": [sidecar, c("i", Some("1500m"), None)]
        }}));
        let r = pod_requests(&p, RequestOptions::default());
        // containers+sidecars = 1200m; init phase = 1500m + 200m sidecar = 1700m
        assert_eq!(r.milli_cpu, 1700);
        assert_eq!(r.memory, (1 << 30) + 100 * (1 << 20));
    }

    #[test]
    fn non_zero_defaults_only_for_missing_requests() {
        let p = pod(json!({"spec": {"containers": [c("a", None, None), c("b", Some("0"), None)]}}));
        let r = pod_requests(&p, RequestOptions { non_zero_defaults: true });
        assert_eq!(r.milli_cpu, 100);
        assert_eq!(r.memory, 2 * DEFAULT_MEMORY_REQUEST);
        assert!(pod_requests(&p, RequestOptions::default()).is_zero());
    }

    #[test]
    fn overhead_and_pod_level_requests() {
        let p = pod(json!({"spec": {
            "containers": [c("a", Some("1"), Some("1Gi"))],
            "resources": {"requests": {"cpu": "3"}},
            "overhead": {"cpu": "250m", "example.com/foo": "2"}
        }}));
        let r = pod_requests(&p, RequestOptions::default());
        assert_eq!(r.milli_cpu, 3250);
        assert_eq!(r.memory, 1 << 30);
        assert_eq!(r.get("example.com/foo"), 2);
    }

    #[test]
    fn in_place_resize_uses_status_like_upstream() {
        let st = |name: &str, actual: Option<&str>, allocated: Option<&str>| {
            let mut cs = json!({"name": name, "image": "x", "imageID": "", "ready": true, "restartCount": 0});
            if let Some(a) = allocated {
                cs["allocatedResources"] = json!({"cpu": a});
            }
            if let Some(a) = actual {
                cs["resources"] = json!({"requests": {"cpu": a}});
            }
            cs
        };
        let mut sidecar = c("s", Some("100m"), None);
        sidecar["restartPolicy"] = json!("Always");
        let cases = [
            ("actuated larger than spec wins", json!({"containerStatuses": [st("a", Some("2"), None)]}), 2000 + 100),
            (
                "allocated counts when resources are reported",
                json!({"containerStatuses": [st("a", Some("500m"), Some("3"))]}),
                3000 + 100,
            ),
            (
                "status without resources is ignored",
                json!({"containerStatuses": [st("a", None, Some("3"))]}),
                1000 + 100,
            ),
            ("sidecar status is honoured", json!({"initContainerStatuses": [st("s", Some("1"), None)]}), 1000 + 1000),
            (
                "plain init container status is ignored",
                json!({"initContainerStatuses": [st("i", Some("5"), None)]}),
                1000 + 100,
            ),
            (
                "infeasible resize ignores the spec",
                json!({"containerStatuses": [st("a", Some("200m"), Some("300m"))],
                       "conditions": [{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}]}),
                300 + 100,
            ),
        ];
        for (name, status, want) in cases {
            let mut p = pod(
                json!({"spec": {"containers": [c("a", Some("1"), None)], "initContainers": [sidecar.clone(), c("i", Some("10m"), None)]}}),
            );
            p.status = Some(serde_json::from_value(status).unwrap());
            assert_eq!(pod_requests(&p, RequestOptions::default()).milli_cpu, want, "{name}");
        }
        // a request the status reports is not replaced by the non-zero default
        let mut p = pod(json!({"spec": {"containers": [c("a", None, None)]}}));
        p.status = Some(serde_json::from_value(json!({"containerStatuses": [st("a", Some("50m"), None)]})).unwrap());
        assert_eq!(pod_requests(&p, RequestOptions { non_zero_defaults: true }).milli_cpu, 50);
        // pod-level resize: the larger of spec, actuated and allocated
        let mut p =
            pod(json!({"spec": {"containers": [c("a", Some("1"), None)], "resources": {"requests": {"cpu": "2"}}}}));
        p.status = Some(
            serde_json::from_value(
                json!({"resources": {"requests": {"cpu": "3"}}, "allocatedResources": {"cpu": "1"}}),
            )
            .unwrap(),
        );
        assert_eq!(pod_requests(&p, RequestOptions::default()).milli_cpu, 3000);
    }

    #[test]
    fn scalar_names() {
        assert!(is_scalar_resource_name("example.com/gpu"));
        assert!(is_scalar_resource_name("hugepages-2Mi"));
        assert!(is_scalar_resource_name("kubernetes.io/foo"));
        assert!(!is_scalar_resource_name("requests.example.com/x"));
        assert!(!is_scalar_resource_name("nvidia"));
    }
}
