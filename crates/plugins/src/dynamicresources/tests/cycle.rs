//! Whole scheduling cycles against an in-memory cluster and a fake API server: what the
//! plugin decides at each extension point, what it writes, and its messages.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex as StdMutex;

use futures::future::BoxFuture;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use ksched_framework::client::{ApiClient, ApiError};
use ksched_framework::listers::MemoryLister;
use ksched_framework::pod::Pod;
use serde_json::{json, Value};

use super::*;
use crate::helper::testing::{node, node_info, pod, pod_info};

/// A fake API server over the lister: claim writes check resource versions like the real
/// one, and can be told to answer with conflicts.
#[derive(Default)]
struct FakeApi {
    lister: Arc<MemoryLister>,
    rv: AtomicU64,
    conflicts: AtomicUsize,
    delete_on_conflict: std::sync::atomic::AtomicBool,
    calls: StdMutex<Vec<String>>,
}

fn not_found(name: &str) -> ApiError {
    ApiError { code: 404, message: format!("resourceclaims.resource.k8s.io {name:?} not found") }
}

impl FakeApi {
    fn store(&self, mut c: ResourceClaim, what: &str) -> Result<ResourceClaim, ApiError> {
        let ns = c.metadata.namespace.clone().unwrap_or_default();
        let name = c.metadata.name.clone().unwrap_or_default();
        self.calls.lock().unwrap().push(format!("{what} {ns}/{name}"));
        let current = self.lister.resource_claims.get(Some(&ns), &name).ok_or_else(|| not_found(&name))?;
        if self.conflicts.load(Ordering::SeqCst) > 0 {
            self.conflicts.fetch_sub(1, Ordering::SeqCst);
            if self.delete_on_conflict.load(Ordering::SeqCst) {
                let mut gone = (*current).clone();
                gone.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::from_second(1).unwrap(),
                ));
                self.lister.resource_claims.upsert(Arc::new(gone));
            }
            return Err(ApiError { code: 409, message: "the object has been modified".into() });
        }
        if current.metadata.resource_version != c.metadata.resource_version {
            return Err(ApiError { code: 409, message: "the object has been modified".into() });
        }
        c.metadata.resource_version = Some((100 + self.rv.fetch_add(1, Ordering::SeqCst)).to_string());
        self.lister.resource_claims.upsert(Arc::new(c.clone()));
        Ok(c)
    }
}

impl ApiClient for FakeApi {
    fn bind(&self, _: &Pod, _: &str) -> BoxFuture<'static, Result<(), ApiError>> {
        Box::pin(async { Ok(()) })
    }
    fn patch_pod_status(&self, _: &str, _: &str, _: Value) -> BoxFuture<'static, Result<(), ApiError>> {
        Box::pin(async { Ok(()) })
    }
    fn delete_pod(&self, _: &str, _: &str, _: Option<&str>) -> BoxFuture<'static, Result<(), ApiError>> {
        Box::pin(async { Ok(()) })
    }
    fn get_resource_claim(&self, ns: &str, name: &str) -> BoxFuture<'static, Result<ResourceClaim, ApiError>> {
        let r = self.lister.resource_claims.get(Some(ns), name).map(|c| (*c).clone()).ok_or_else(|| not_found(name));
        Box::pin(async move { r })
    }
    fn update_resource_claim(&self, c: &ResourceClaim) -> BoxFuture<'static, Result<ResourceClaim, ApiError>> {
        let r = self.store(c.clone(), "update");
        Box::pin(async move { r })
    }
    fn update_resource_claim_status(&self, c: &ResourceClaim) -> BoxFuture<'static, Result<ResourceClaim, ApiError>> {
        let r = self.store(c.clone(), "updateStatus");
        Box::pin(async move { r })
    }
    fn patch_resource_claim_status(
        &self,
        ns: &str,
        name: &str,
        patch: Value,
    ) -> BoxFuture<'static, Result<ResourceClaim, ApiError>> {
        let uid = patch.pointer("/status/reservedFor/0/uid").and_then(|u| u.as_str()).unwrap_or_default().to_string();
        let r = match self.lister.resource_claims.get(Some(ns), name) {
            Some(c) => {
                let mut c = (*c).clone();
                if let Some(rf) = c.status.as_mut().and_then(|s| s.reserved_for.as_mut()) {
                    rf.retain(|r| r.uid != uid);
                }
                self.calls.lock().unwrap().push(format!("patchStatus {ns}/{name}"));
                self.lister.resource_claims.upsert(Arc::new(c.clone()));
                Ok(c)
            }
            None => Err(not_found(name)),
        };
        Box::pin(async move { r })
    }
}

struct Cluster {
    api: Arc<FakeApi>,
    plugin: DynamicResources,
}

fn class(name: &str, selectors: &[&str]) -> Arc<DeviceClass> {
    let sels: Vec<Value> = selectors.iter().map(|e| json!({"cel": {"expression": e}})).collect();
    Arc::new(serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"selectors": sels}})).unwrap())
}

fn slice_on(node: &str, devices: &[&str]) -> Arc<ResourceSlice> {
    let devs: Vec<Value> = devices.iter().map(|d| json!({"name": d})).collect();
    Arc::new(
        serde_json::from_value(
            json!({"metadata": {"name": format!("{node}-gpus")}, "spec": {"driver": "gpu.example.com",
            "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": devs}}),
        )
        .unwrap(),
    )
}

fn claim_obj(name: &str, class: &str) -> Arc<ResourceClaim> {
    Arc::new(
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
            "resourceVersion": "1"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": class,
                "allocationMode": "ExactCount", "count": 1}}]}}}))
        .unwrap(),
    )
}

fn cluster() -> Cluster {
    let api = Arc::new(FakeApi::default());
    api.lister.device_classes.upsert(class("gpu", &[]));
    api.lister.resource_slices.upsert(slice_on("n1", &["g0", "g1"]));
    let mut handle = Handle::for_tests();
    handle.lister = api.lister.clone();
    handle.client = api.clone();
    let manager = handle.shared.get_or_init(|| DraManager::new(handle.lister.clone()));
    let plugin =
        DynamicResources { args: DynamicResourcesArgs::default(), features: Features::default(), handle, manager };
    Cluster { api, plugin }
}

fn claim_pod(name: &str, claim: &str) -> PodInfo {
    pod_info(pod(
        json!({"name": name, "uid": format!("uid-{name}")}),
        json!({"containers": [{"name": "c", "image": "i"}], "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}]}),
    ))
}

fn n(name: &str) -> NodeInfo {
    node_info(node(json!({"name": name}), json!({})))
}

impl Cluster {
    fn add_claim(&self, c: Arc<ResourceClaim>) {
        self.api.lister.resource_claims.upsert(c);
    }

    fn claim(&self, name: &str) -> Arc<ResourceClaim> {
        self.api.lister.resource_claims.get(Some("default"), name).unwrap()
    }

    /// PreFilter and Filter on n1 and n2: the statuses.
    fn filter(&self, state: &mut CycleState, p: &PodInfo) -> (Status, Vec<Status>) {
        let (_, s) = self.plugin.pre_filter(state, p, &Snapshot::default());
        if !s.is_success() {
            return (s, Vec::new());
        }
        let per_node = ["n1", "n2"].iter().map(|name| self.plugin.filter(state, p, &n(name))).collect();
        (s, per_node)
    }
}

fn devices_of(c: &ResourceClaim) -> Vec<String> {
    allocation_of(c)
        .into_iter()
        .flat_map(|a| a.devices.iter().flat_map(|d| d.results.iter().flatten()))
        .map(|r| r.device.clone())
        .collect()
}

#[test]
fn a_pod_gets_a_device_allocated_reserved_and_written() {
    let c = cluster();
    c.add_claim(claim_obj("c1", "gpu"));
    let p = claim_pod("p1", "c1");
    assert!(c.plugin.pre_enqueue(&p).is_success());
    let mut state = CycleState::new();
    let (pre, filters) = c.filter(&mut state, &p);
    assert!(pre.is_success(), "{pre:?}");
    assert!(filters[0].is_success(), "{:?}", filters[0]);
    assert_eq!(
        (filters[1].code(), filters[1].message()),
        (Code::UnschedulableAndUnresolvable, ERR_REASON_CANNOT_ALLOCATE.into())
    );
    assert!(c.plugin.reserve(&mut state, &p, "n1").is_success());
    assert_eq!(c.plugin.manager.in_flight(), 1);
    assert_eq!(c.plugin.pre_bind_pre_flight(&state, &p, "n1").code(), Code::Success);
    let s = futures::executor::block_on(c.plugin.pre_bind(&state, &p, "n1"));
    assert!(s.is_success(), "{s:?}");
    let written = c.claim("c1");
    assert_eq!(devices_of(&written), ["g0"]);
    let st = written.status.as_ref().unwrap();
    assert_eq!(st.reserved_for.as_ref().unwrap()[0].uid, "uid-p1");
    assert_eq!(st.reserved_for.as_ref().unwrap()[0].resource, "pods");
    assert!(st.allocation.as_ref().unwrap().allocation_timestamp.is_some());
    assert!(written.metadata.finalizers.as_ref().unwrap().iter().any(|f| f == FINALIZER));
    let sel = serde_json::to_value(&st.allocation.as_ref().unwrap().node_selector).unwrap();
    assert_eq!(sel["nodeSelectorTerms"][0]["matchFields"][0]["values"], json!(["n1"]));
    assert_eq!(c.plugin.manager.in_flight(), 0, "the allocation is no longer in flight");
    assert_eq!(*c.api.calls.lock().unwrap(), ["update default/c1", "updateStatus default/c1"]);
}

#[test]
fn two_pods_in_flight_never_get_the_same_device() {
    let c = cluster();
    for name in ["a", "b", "x"] {
        c.add_claim(claim_obj(name, "gpu"));
    }
    let mut states = Vec::new();
    for (pod_name, claim) in [("pa", "a"), ("pb", "b")] {
        let p = claim_pod(pod_name, claim);
        let mut state = CycleState::new();
        let (pre, filters) = c.filter(&mut state, &p);
        assert!(pre.is_success() && filters[0].is_success(), "{pod_name}: {pre:?} {filters:?}");
        assert!(c.plugin.reserve(&mut state, &p, "n1").is_success());
        states.push((state, p));
    }
    // both devices are in flight: a third pod finds none
    let third = claim_pod("px", "x");
    let (_, filters) = c.filter(&mut CycleState::new(), &third);
    assert_eq!(filters[0].message(), ERR_REASON_CANNOT_ALLOCATE);
    for (state, p) in &states {
        assert!(futures::executor::block_on(c.plugin.pre_bind(state, p, "n1")).is_success());
    }
    assert_eq!(devices_of(&c.claim("a")), ["g0"]);
    assert_eq!(devices_of(&c.claim("b")), ["g1"]);
    // once written, the devices are taken by the claims' status
    let (_, filters) = c.filter(&mut CycleState::new(), &third);
    assert_eq!(filters[0].message(), ERR_REASON_CANNOT_ALLOCATE);
}

#[test]
fn a_claim_in_flight_for_one_pod_makes_its_sharer_wait() {
    let c = cluster();
    c.add_claim(claim_obj("shared", "gpu"));
    let first = claim_pod("p1", "shared");
    let mut state = CycleState::new();
    c.filter(&mut state, &first);
    assert!(c.plugin.reserve(&mut state, &first, "n1").is_success());
    let second = claim_pod("p2", "shared");
    let (pre, _) = c.filter(&mut CycleState::new(), &second);
    assert_eq!(
        (pre.code(), pre.message()),
        (
            Code::UnschedulableAndUnresolvable,
            "resource claim default/shared is in the process of being allocated".into()
        )
    );
    // after the first pod's binding, the second shares the allocated claim on its node only
    assert!(futures::executor::block_on(c.plugin.pre_bind(&state, &first, "n1")).is_success());
    let mut state2 = CycleState::new();
    let (pre, filters) = c.filter(&mut state2, &second);
    assert!(pre.is_success());
    assert!(filters[0].is_success());
    assert_eq!(filters[1].message(), ERR_REASON_NOT_AVAILABLE);
    assert!(futures::executor::block_on(c.plugin.pre_bind(&state2, &second, "n1")).is_success());
    let reserved: Vec<String> =
        c.claim("shared").status.as_ref().unwrap().reserved_for.iter().flatten().map(|r| r.name.clone()).collect();
    assert_eq!(reserved, ["p1", "p2"]);
}

#[test]
fn missing_claims_and_classes_have_upstream_messages() {
    let c = cluster();
    let p = claim_pod("p", "nope");
    assert_eq!(c.plugin.pre_enqueue(&p).message(), "could not find ResourceClaim \"default/nope\"");
    let templated = pod_info(pod(
        json!({"name": "t", "uid": "uid-t"}),
        json!({"containers": [], "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "tmpl"}]}),
    ));
    let s = c.plugin.pre_enqueue(&templated);
    assert_eq!(
        (s.code(), s.message()),
        (Code::UnschedulableAndUnresolvable, "pod \"default/t\": ResourceClaim not created yet".into())
    );
    c.add_claim(claim_obj("c", "missing-class"));
    let p = claim_pod("p", "c");
    let mut state = CycleState::new();
    let (pre, _) = c.filter(&mut state, &p);
    assert_eq!(
        (pre.code(), pre.message()),
        (Code::UnschedulableAndUnresolvable, "request gpu: device class missing-class does not exist".into())
    );
    let fw = framework();
    let (_, s) = c.plugin.post_filter(&fw, &mut state, &p, &Snapshot::default(), &NodeToStatus::default());
    assert_eq!(s.message(), NO_NEW_CLAIMS_TO_DEALLOCATE, "no claims were recorded");
}

#[test]
fn broken_cel_is_an_error_not_an_unschedulable_pod() {
    let c = cluster();
    c.api.lister.device_classes.upsert(class("gpu", &[r#"device.attributes["gpu.example.com"].model == "a""#]));
    c.add_claim(claim_obj("c", "gpu"));
    let (_, filters) = c.filter(&mut CycleState::new(), &claim_pod("p", "c"));
    assert_eq!(
        (filters[0].code(), filters[0].message()),
        (Code::Error, "class gpu: selector #0: CEL runtime error: no such key: model".into())
    );
}

#[test]
fn post_filter_deallocates_a_claim_allocated_elsewhere() {
    let c = cluster();
    let mut claim = (*claim_obj("c", "gpu")).clone();
    claim.status = Some(
        serde_json::from_value(json!({"allocation": {"devices": {"results": [
            {"request": "gpu", "driver": "gpu.example.com", "pool": "n2", "device": "x"}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}]}}}))
        .unwrap(),
    );
    c.add_claim(Arc::new(claim));
    let p = claim_pod("p", "c");
    let mut state = CycleState::new();
    let (_, filters) = c.filter(&mut state, &p);
    assert_eq!(filters[0].message(), ERR_REASON_NOT_AVAILABLE);
    assert!(filters[1].is_success());
    let (_, s) = c.plugin.post_filter(&framework(), &mut state, &p, &Snapshot::default(), &NodeToStatus::default());
    assert_eq!((s.code(), s.message()), (Code::Unschedulable, DEALLOCATION_COMPLETED.into()));
    assert!(c.claim("c").status.as_ref().unwrap().allocation.is_none());
}

#[test]
fn pre_bind_retries_conflicts_and_notices_deletion() {
    let c = cluster();
    c.add_claim(claim_obj("c", "gpu"));
    let p = claim_pod("p", "c");
    let mut state = CycleState::new();
    c.filter(&mut state, &p);
    assert!(c.plugin.reserve(&mut state, &p, "n1").is_success());
    c.api.conflicts.store(1, Ordering::SeqCst);
    assert!(futures::executor::block_on(c.plugin.pre_bind(&state, &p, "n1")).is_success());
    assert_eq!(devices_of(&c.claim("c")), ["g0"]);

    // a claim deleted while PreBind writes it: the error, and nothing stays in flight
    c.add_claim(claim_obj("d", "gpu"));
    let q = claim_pod("q", "d");
    let mut state = CycleState::new();
    c.filter(&mut state, &q);
    assert!(c.plugin.reserve(&mut state, &q, "n1").is_success());
    c.api.conflicts.store(1, Ordering::SeqCst);
    c.api.delete_on_conflict.store(true, Ordering::SeqCst);
    let s = futures::executor::block_on(c.plugin.pre_bind(&state, &q, "n1"));
    assert_eq!((s.code(), s.message()), (Code::Error, "claim default/d got deleted in the meantime".into()));
    c.plugin.unreserve(&mut state, &q, "n1");
    assert_eq!(c.plugin.manager.in_flight(), 0);
}

#[test]
fn unreserve_releases_the_in_flight_devices() {
    let c = cluster();
    c.add_claim(claim_obj("a", "gpu"));
    let p = claim_pod("p", "a");
    let mut state = CycleState::new();
    c.filter(&mut state, &p);
    assert!(c.plugin.reserve(&mut state, &p, "n1").is_success());
    assert_eq!(c.plugin.manager.in_flight(), 1);
    c.plugin.unreserve(&mut state, &p, "n1");
    assert_eq!(c.plugin.manager.in_flight(), 0);
}

#[test]
fn first_available_scores_earlier_subrequests_higher() {
    let c = cluster();
    c.api.lister.device_classes.upsert(class("never", &["false"]));
    let claim: ResourceClaim = serde_json::from_value(
        json!({"metadata": {"name": "c", "namespace": "default", "uid": "u", "resourceVersion": "1"},
        "spec": {"devices": {"requests": [{"name": "r", "firstAvailable": [
            {"name": "best", "deviceClassName": "never", "allocationMode": "ExactCount", "count": 1},
            {"name": "ok", "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}]}]}}}),
    )
    .unwrap();
    c.add_claim(Arc::new(claim));
    let p = claim_pod("p", "c");
    let mut state = CycleState::new();
    c.filter(&mut state, &p);
    assert_eq!(c.plugin.score(&state, &p, &n("n1")).unwrap(), 7);
    assert_eq!(c.plugin.score(&state, &p, &n("n2")).unwrap(), 0, "no allocation there");
    // The framework scores runs of nodes: the same scores as node by node.
    let (n1, n2) = (n("n1"), n("n2"));
    let mut out = [-1; 2];
    c.plugin.score_nodes(&state, &p, &[&n1, &n2], &mut out).unwrap();
    assert_eq!(out, [7, 0]);
    // A pod without claims scores 0 everywhere, whatever another pod's state held.
    let plain = pod_info(pod(
        json!({"name": "plain", "uid": "uid-plain"}),
        json!({"containers": [{"name": "c", "image": "i"}]}),
    ));
    let mut plain_state = CycleState::new();
    c.filter(&mut plain_state, &plain);
    let mut out = [-1; 2];
    c.plugin.score_nodes(&plain_state, &plain, &[&n1, &n2], &mut out).unwrap();
    assert_eq!(out, [0, 0]);
}

#[test]
fn claim_hints_queue_for_the_pods_own_claims_and_deallocations() {
    let c = cluster();
    c.add_claim(claim_obj("mine", "gpu"));
    let p = claim_pod("p", "mine");
    let events = c.plugin.events_to_register().unwrap();
    let hint = events[1].hint.as_ref().unwrap();
    let obj = |v: Value| EventObject::Other(Arc::new(v));
    let mine = json!({"metadata": {"name": "mine", "uid": "uid-mine"}, "status": {}});
    let other = json!({"metadata": {"name": "other", "uid": "uid-other"}});
    let other_allocated = json!({"metadata": {"name": "other", "uid": "uid-other"}, "status": {"allocation": {}}});
    assert_eq!(hint(&p.pod, None, Some(&obj(mine.clone()))).unwrap(), QueueingHint::Queue, "created");
    assert_eq!(hint(&p.pod, Some(&obj(mine.clone())), Some(&obj(mine.clone()))).unwrap(), QueueingHint::QueueSkip);
    assert_eq!(hint(&p.pod, None, Some(&obj(other.clone()))).unwrap(), QueueingHint::QueueSkip);
    assert_eq!(
        hint(&p.pod, Some(&obj(other_allocated)), Some(&obj(other))).unwrap(),
        QueueingHint::Queue,
        "deallocated"
    );
}
