//! Extended resources backed by DRA (DRAExtendedResource): a pod that requests
//! `example.com/gpu: 1` gets devices of the DeviceClass whose `extendedResourceName` is
//! `example.com/gpu` (or `deviceclass.resource.kubernetes.io/<class>` for any class) on nodes
//! where no device plugin advertises that resource. The scheduler represents the requests as
//! a claim of its own, made per node in Filter and created in PreBind.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::resource::v1::{DeviceClaim, DeviceClass, DeviceRequest, ExactDeviceRequest, ResourceClaim};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use ksched_dra::claim::{EXTENDED_RESOURCE_CLAIM_ANNOTATION, FINALIZER};
use ksched_framework::client::{ApiClient, ApiError};
use ksched_framework::pod::{Container, Pod};
use ksched_framework::resource::{is_extended_resource_name, pod_requests, RequestOptions};
use ksched_framework::{Handle, NodeInfo, PodInfo, Status};

use super::manager::DraManager;
use super::{unresolvable, DraState};

/// Name of the extended-resource claim before PreBind creates it.
pub const SPECIAL_CLAIM_NAME: &str = "<extended-resources>";
/// Prefix of the implicit extended resource name of every DeviceClass.
pub const DEVICE_CLASS_PREFIX: &str = "deviceclass.resource.kubernetes.io/";

/// The pod's scalar requests, kept for Filter.
#[derive(Debug, Clone)]
pub(super) struct PodExtended {
    scalar: BTreeMap<String, i64>,
    classes: Arc<HashMap<String, Arc<DeviceClass>>>,
}

fn created(c: &DeviceClass) -> Option<&k8s_openapi::jiff::Timestamp> {
    c.metadata.creation_timestamp.as_ref().map(|t| &t.0)
}

/// Which class serves each extended resource name: the oldest class naming it (ties by
/// name), and every class under its implicit name.
pub fn class_resolver(classes: &[Arc<DeviceClass>]) -> HashMap<String, Arc<DeviceClass>> {
    let mut out: HashMap<String, Arc<DeviceClass>> = HashMap::new();
    for c in classes {
        let name = c.metadata.name.clone().unwrap_or_default();
        out.insert(format!("{DEVICE_CLASS_PREFIX}{name}"), c.clone());
    }
    for c in classes {
        let Some(ern) = c.spec.extended_resource_name.clone() else { continue };
        let replace = match out.get(&ern) {
            None => true,
            Some(old) => match created(c).cmp(&created(old)) {
                std::cmp::Ordering::Less => true,
                std::cmp::Ordering::Equal => c.metadata.name < old.metadata.name,
                std::cmp::Ordering::Greater => false,
            },
        };
        if replace {
            out.insert(ern, c.clone());
        }
    }
    out
}

/// Extended resource names DRA may serve (upstream's `IsDRAExtendedResourceName`).
pub fn is_dra_extended_resource_name(name: &str) -> bool {
    is_extended_resource_name(name) || name.starts_with(DEVICE_CLASS_PREFIX)
}

/// True for the placeholder claim that exists only in memory.
pub(super) fn is_special_name(c: &ResourceClaim) -> bool {
    c.metadata.name.as_deref() == Some(SPECIAL_CLAIM_NAME)
}

fn pod_uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or_default()
}

/// PreFilter: the pod's extended-resource claim (existing or placeholder) when it requests
/// a resource some DeviceClass serves.
pub(super) fn pre_filter(
    manager: &DraManager,
    pod: &Pod,
) -> Result<(Option<Arc<ResourceClaim>>, Option<PodExtended>), Status> {
    let reqs = pod_requests(pod, RequestOptions::default());
    if reqs.scalar_resources.is_empty() {
        return Ok((None, None));
    }
    let classes = Arc::new(class_resolver(&manager.device_classes()));
    let mapped = reqs
        .scalar_resources
        .iter()
        .any(|(n, &v)| v != 0 && is_dra_extended_resource_name(n) && classes.contains_key(n));
    if !mapped {
        return Ok((None, None));
    }
    let ext = PodExtended { scalar: reqs.scalar_resources.iter().map(|(k, v)| (k.clone(), *v)).collect(), classes };
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let existing = manager.claims().into_iter().find(|c| {
        c.metadata.annotations.as_ref().and_then(|a| a.get(EXTENDED_RESOURCE_CLAIM_ANNOTATION)).map(String::as_str)
            == Some("true")
            && c.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.name == name && o.controller == Some(true) && o.uid == pod_uid(pod))
    });
    if let Some(c) = existing {
        return Ok((Some(c), Some(ext)));
    }
    let claim = ResourceClaim {
        metadata: ObjectMeta {
            namespace: pod.metadata.namespace.clone(),
            name: Some(SPECIAL_CLAIM_NAME.into()),
            uid: Some(uuid_like()),
            generate_name: Some(format!("{name}-extended-resources-")),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Pod".into(),
                name: name.to_string(),
                uid: pod_uid(pod).to_string(),
                controller: Some(true),
                ..Default::default()
            }]),
            annotations: Some([(EXTENDED_RESOURCE_CLAIM_ANNOTATION.to_string(), "true".to_string())].into()),
            ..Default::default()
        },
        spec: Default::default(),
        status: None,
    };
    Ok((Some(Arc::new(claim)), Some(ext)))
}

fn uuid_like() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!("extended-resources-{:016x}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// Filter: the node's version of the extended-resource claim (with one request per
/// container and resource), or `None` when device plugins serve everything here.
pub(super) fn filter(
    s: &DraState,
    _manager: &DraManager,
    pod: &Pod,
    node: &NodeInfo,
) -> Result<(Option<Arc<ResourceClaim>>, Vec<serde_json::Value>), Status> {
    let Some(claim) = s.extended_claim() else { return Ok((None, Vec::new())) };
    let Some(ext) = &s.extended else { return Ok((None, Vec::new())) };
    if claim.spec.devices.as_ref().and_then(|d| d.requests.as_ref()).is_some() {
        return Err(unresolvable("cannot schedule extended resource claim"));
    }
    let mut wanted: BTreeMap<String, i64> = BTreeMap::new();
    for (name, &q) in &ext.scalar {
        if !is_dra_extended_resource_name(name) || q == 0 {
            continue;
        }
        let allocatable = node.allocatable.scalar_resources.get(name).copied();
        let backed = ext.classes.contains_key(name);
        if backed && allocatable.unwrap_or(0) == 0 {
            wanted.insert(name.clone(), q);
        } else if allocatable.is_none() {
            return Err(unresolvable("cannot fit resource"));
        }
    }
    if s.num_user == 0 && wanted.is_empty() {
        return Ok((None, Vec::new()));
    }
    if claim.status.as_ref().is_some_and(|st| st.allocation.is_some()) {
        return Ok((None, Vec::new()));
    }
    let (requests, mappings) = requests_and_mappings(pod, &wanted, &ext.classes);
    let mut node_claim = (**claim).clone();
    node_claim.spec.devices = Some(DeviceClaim { requests: Some(requests), ..Default::default() });
    Ok((Some(Arc::new(node_claim)), mappings))
}

fn container_request(c: &Container, name: &str) -> i64 {
    c.resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get(name))
        .and_then(|q| ksched_framework::quantity::value(&q.0).ok())
        .unwrap_or(0)
}

/// A request for what one container still needs of `resource` after `reusable` requests
/// (long-lived containers' devices an init container can reuse), plus the mappings.
fn container_request_and_mappings(
    index: usize,
    c: &Container,
    resource: &str,
    class: &str,
    reusable: &[Option<DeviceRequest>],
) -> (Option<DeviceRequest>, Vec<serde_json::Value>) {
    let want = container_request(c, resource);
    if want == 0 {
        return (None, Vec::new());
    }
    let mapping =
        |req: &str| serde_json::json!({"containerName": c.name, "resourceName": resource, "requestName": req});
    let mut mappings = Vec::new();
    let mut sum = 0;
    for r in reusable.iter().flatten() {
        sum += r.exactly.as_ref().and_then(|e| e.count).unwrap_or(0);
        mappings.push(mapping(&r.name));
        if sum >= want {
            return (None, mappings);
        }
    }
    let keys: BTreeSet<&String> =
        c.resources.as_ref().and_then(|r| r.requests.as_ref()).map(|r| r.keys().collect()).unwrap_or_default();
    let ridx = keys.iter().position(|k| *k == resource).unwrap_or(0);
    let name = format!("container-{index}-request-{ridx}");
    mappings.push(mapping(&name));
    let req = DeviceRequest {
        name,
        exactly: Some(ExactDeviceRequest {
            device_class_name: class.to_string(),
            allocation_mode: Some("ExactCount".into()),
            count: Some(want - sum),
            ..Default::default()
        }),
        first_available: None,
    };
    (Some(req), mappings)
}

fn requests_and_mappings(
    pod: &Pod,
    wanted: &BTreeMap<String, i64>,
    classes: &HashMap<String, Arc<DeviceClass>>,
) -> (Vec<DeviceRequest>, Vec<serde_json::Value>) {
    let spec = pod.spec.as_ref();
    let inits = spec.and_then(|s| s.init_containers.clone()).unwrap_or_default();
    let num_init = inits.len();
    let mut containers = inits;
    containers.extend(spec.into_iter().flat_map(|s| s.containers.iter().cloned()));
    let (mut long_lived, mut short_lived) = (Vec::new(), Vec::new());
    for (i, c) in containers.iter().enumerate() {
        let sidecar = c.restart_policy.as_deref() == Some("Always");
        if i < num_init && !sidecar {
            short_lived.push(i);
        } else {
            long_lived.push(i);
        }
    }
    let mut requests = Vec::new();
    let mut mappings = Vec::new();
    for resource in wanted.keys() {
        let Some(class) = classes.get(resource) else { continue };
        let class = class.metadata.name.clone().unwrap_or_default();
        let mut long_requests: Vec<Option<DeviceRequest>> = vec![None; containers.len()];
        let mut long_mappings = Vec::new();
        for &i in &long_lived {
            let (r, m) = container_request_and_mappings(i, &containers[i], resource, &class, &[]);
            long_requests[i] = r;
            long_mappings.extend(m);
        }
        let mut max_short: Option<DeviceRequest> = None;
        let mut short_names = BTreeSet::new();
        let mut short_mappings: Vec<serde_json::Value> = Vec::new();
        for &i in &short_lived {
            let (r, m) = container_request_and_mappings(i, &containers[i], resource, &class, &long_requests[i..]);
            if let Some(r) = r {
                short_names.insert(r.name.clone());
                let count = |x: &DeviceRequest| x.exactly.as_ref().and_then(|e| e.count).unwrap_or(0);
                if max_short.as_ref().is_none_or(|m| count(m) < count(&r)) {
                    max_short = Some(r);
                }
            }
            short_mappings.extend(m);
        }
        if let Some(max) = &max_short {
            if short_names.len() > 1 {
                short_names.remove(&max.name);
                for m in &mut short_mappings {
                    let renamed = m["requestName"].as_str().is_some_and(|n| short_names.contains(n));
                    if renamed {
                        m["requestName"] = serde_json::Value::String(max.name.clone());
                    }
                }
            }
            requests.push(max.clone());
        }
        requests.extend(long_requests.into_iter().flatten());
        mappings.extend(long_mappings);
        mappings.extend(short_mappings);
    }
    requests.sort_by(|a, b| a.name.cmp(&b.name));
    (requests, mappings)
}

/// Creates the node's extended-resource claim (PreBind).
pub(super) async fn create_claim(client: &dyn ApiClient, s: &DraState, node: &str) -> Result<ResourceClaim, String> {
    let na = s.m.lock().node_allocations.get(node).cloned();
    let Some(c) = na.and_then(|na| na.extended_claim.clone()) else {
        return Err(format!("extended resource claim not found for node {node}"));
    };
    let mut c = (*c).clone();
    c.status = None;
    c.metadata.name = None;
    c.metadata.uid = None;
    let key = format!(
        "{}/{}",
        c.metadata.namespace.as_deref().unwrap_or_default(),
        c.metadata.generate_name.as_deref().unwrap_or_default()
    );
    client.create_resource_claim(&c).await.map_err(|e| format!("create claim for extended resources {key}: {e}"))
}

/// Records the extended-resource claim in the pod status (PreBind).
pub(super) async fn patch_pod_status(s: &DraState, handle: &Handle, pod: &PodInfo, node: &str) -> Option<Status> {
    let i = s.num_user;
    let claim = s.m.lock().claims.get(i).cloned()?;
    if is_special_name(&claim) || s.extended.is_none() {
        return None;
    }
    let na = s.m.lock().node_allocations.get(node).cloned();
    let mappings = na.map(|n| n.mappings.clone()).unwrap_or_default();
    if mappings.is_empty() {
        // Nothing was allocated for it: device plugins served every request.
        let allocated = s.m.lock().allocation.get(i).is_some_and(|a| a.is_some());
        if !allocated {
            return None;
        }
        return Some(Status::error(format!(
            "nil or empty request mappings, no update of pod {}/{} ExtendedResourceClaimStatus",
            pod.namespace(),
            pod.name()
        )));
    }
    let patch = serde_json::json!({"status": {"extendedResourceClaimStatus": {
        "requestMappings": mappings, "resourceClaimName": claim.metadata.name}}});
    match handle.client.patch_pod_status(pod.namespace(), pod.name(), patch).await {
        Ok(()) => None,
        Err(e) => Some(Status::error(format!(
            "update pod {}/{} ExtendedResourceClaimStatus: {e}",
            pod.namespace(),
            pod.name()
        ))),
    }
}

/// Removes the finalizer and deletes a claim (upstream's `deleteClaim`).
pub(super) async fn delete_claim(client: &dyn ApiClient, mut c: ResourceClaim) -> Result<(), String> {
    let ns = c.metadata.namespace.clone().unwrap_or_default();
    let name = c.metadata.name.clone().unwrap_or_default();
    let mut refresh = false;
    for attempt in 0..5 {
        if refresh {
            c = client
                .get_resource_claim(&ns, &name)
                .await
                .map_err(|e| format!("get resourceclaim {ns}/{name}: {e}"))?;
        }
        refresh = true;
        if let Some(f) = c.metadata.finalizers.as_mut() {
            f.retain(|x| x != FINALIZER);
        }
        match client.update_resource_claim(&c).await {
            Ok(_) => break,
            Err(e) if ApiError::is_conflict(&e) && attempt < 4 => continue,
            Err(e) => return Err(format!("update resourceclaim {ns}/{name}: {e}")),
        }
    }
    client.delete_resource_claim(&ns, &name).await.map_err(|e| e.to_string())
}

/// Unreserve: drops the extended-resource claim's in-flight allocation and deletes a claim
/// PreBind already created.
pub(super) fn unreserve(s: &DraState, manager: &DraManager, handle: &Handle, claims: &[Arc<ResourceClaim>]) {
    let Some(initial) = s.extended_claim() else { return };
    let Some(current) = claims.get(s.num_user) else { return };
    let uid = initial.metadata.uid.as_deref().unwrap_or_default();
    if manager.maybe_remove_pending(uid, false) {
        manager.restore(
            current.metadata.namespace.as_deref().unwrap_or_default(),
            current.metadata.name.as_deref().unwrap_or_default(),
        );
    }
    if is_special_name(current) {
        return;
    }
    let c = (**current).clone();
    let client = handle.client.clone();
    (handle.spawner)(Box::pin(async move {
        if let Err(e) = delete_claim(&*client, c).await {
            tracing::warn!(error = %e, "delete extended resource claim");
        }
    }));
}
