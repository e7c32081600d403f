//! Allocator behaviour, one test per rule, written from the semantics of the API (not from
//! upstream's test tables), plus a seeded randomized check of the invariants.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;

use ksched_framework::node::Node;
use serde_json::{json, Value};

use super::*;

const DRIVER: &str = "gpu.example.com";

fn node(name: &str, labels: Value) -> Node {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap()
}

/// A slice of `DRIVER` on `node` (or with the given spec fields), pool = node name.
fn slice(name: &str, spec: Value) -> Arc<ResourceSlice> {
    let mut s = json!({"metadata": {"name": name}, "spec": {"driver": DRIVER,
        "pool": {"name": "pool", "generation": 1, "resourceSliceCount": 1}}});
    for (k, v) in spec.as_object().unwrap() {
        s["spec"][k] = v.clone();
    }
    Arc::new(serde_json::from_value(s).unwrap())
}

fn gpus(names: &[&str]) -> Value {
    Value::Array(names.iter().map(|n| json!({"name": n})).collect())
}

fn class(name: &str, selectors: &[&str]) -> Arc<DeviceClass> {
    let sels: Vec<Value> = selectors.iter().map(|e| json!({"cel": {"expression": e}})).collect();
    Arc::new(serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"selectors": sels}})).unwrap())
}

fn claim(name: &str, devices: Value) -> ResourceClaim {
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default", "uid": name},
        "spec": {"devices": devices}}))
    .unwrap()
}

/// One request for `count` devices of class "gpu".
fn count_claim(name: &str, count: i64) -> ResourceClaim {
    claim(
        name,
        json!({"requests": [{"name": "req", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": count}}]}),
    )
}

struct Setup {
    classes: Vec<Arc<DeviceClass>>,
    slices: Vec<Arc<ResourceSlice>>,
    state: AllocatedState,
    features: Features,
}

impl Setup {
    fn new(slices: Vec<Arc<ResourceSlice>>) -> Self {
        Setup {
            classes: vec![class("gpu", &[])],
            slices,
            state: AllocatedState::default(),
            features: Features::default(),
        }
    }

    fn allocator(&self) -> Allocator {
        let classes = self.classes.clone();
        let lister = move |n: &str| classes.iter().find(|c| c.metadata.name.as_deref() == Some(n)).cloned();
        let counter = Arc::new(AtomicU64::new(0));
        Allocator::new(
            self.features,
            Arc::new(self.state.clone()),
            Arc::new(lister),
            self.slices.clone(),
            Arc::new(CelCache::new()),
        )
        .with_share_ids(Arc::new(move || format!("share-{}", counter.fetch_add(1, Ordering::Relaxed))))
    }

    fn run(&self, n: &Node, claims: &[ResourceClaim]) -> Result<Option<Vec<AllocationResult>>, AllocError> {
        let refs: Vec<&ResourceClaim> = claims.iter().collect();
        self.allocator().allocate(n, &refs, None)
    }

    /// The allocated device names of each claim, or `None` when allocation failed.
    fn devices(&self, n: &Node, claims: &[ResourceClaim]) -> Option<Vec<Vec<String>>> {
        let res = self.run(n, claims).expect("allocation error")?;
        Some(res.iter().map(|r| results(r).iter().map(|d| d.device.clone()).collect()).collect())
    }
}

fn results(r: &AllocationResult) -> &[DeviceRequestAllocationResult] {
    r.devices.as_ref().and_then(|d| d.results.as_deref()).unwrap_or_default()
}

fn n1() -> Node {
    node("n1", json!({"zone": "a"}))
}

fn on_n1(devices: Value) -> Arc<ResourceSlice> {
    slice("s1", json!({"nodeName": "n1", "devices": devices}))
}

#[test]
fn exact_count_takes_the_first_free_devices_in_order() {
    let s = Setup::new(vec![on_n1(gpus(&["g0", "g1", "g2"]))]);
    assert_eq!(s.devices(&n1(), &[count_claim("c", 2)]), Some(vec![vec!["g0".into(), "g1".into()]]));
    assert_eq!(s.devices(&n1(), &[count_claim("c", 4)]), None);
    // other nodes' slices are invisible
    assert_eq!(s.devices(&node("n2", json!({})), &[count_claim("c", 1)]), None);
}

#[test]
fn allocated_devices_are_skipped_and_claims_of_one_pod_never_share() {
    let mut s = Setup::new(vec![on_n1(gpus(&["g0", "g1", "g2"]))]);
    s.state.devices.insert(&DeviceId::new(DRIVER, "pool", "g0"));
    assert_eq!(
        s.devices(&n1(), &[count_claim("a", 1), count_claim("b", 1)]),
        Some(vec![vec!["g1".into()], vec!["g2".into()]])
    );
    assert_eq!(s.devices(&n1(), &[count_claim("a", 2), count_claim("b", 1)]), None);
}

#[test]
fn node_local_devices_pin_the_claim_to_the_node() {
    let s = Setup::new(vec![on_n1(gpus(&["g0"]))]);
    let r = s.run(&n1(), &[count_claim("c", 1)]).unwrap().unwrap();
    let sel = serde_json::to_value(&r[0].node_selector).unwrap();
    assert_eq!(
        sel,
        json!({"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]})
    );
    assert_eq!(results(&r[0])[0].request, "req");
    assert_eq!(results(&r[0])[0].driver, DRIVER);
    assert_eq!(results(&r[0])[0].pool, "pool");
}

#[test]
fn network_attached_devices_carry_the_slice_selector_or_none() {
    let zone =
        json!({"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]});
    let s = Setup::new(vec![slice("net", json!({"nodeSelector": zone, "devices": gpus(&["n0"])}))]);
    let r = s.run(&n1(), &[count_claim("c", 1)]).unwrap().unwrap();
    assert_eq!(serde_json::to_value(&r[0].node_selector).unwrap(), zone);
    assert_eq!(s.devices(&node("n2", json!({"zone": "b"})), &[count_claim("c", 1)]), None);
    let all = Setup::new(vec![slice("all", json!({"allNodes": true, "devices": gpus(&["x"])}))]);
    let r = all.run(&n1(), &[count_claim("c", 1)]).unwrap().unwrap();
    assert!(r[0].node_selector.is_none());
}

#[test]
fn all_mode_takes_every_matching_device_and_needs_at_least_one() {
    let mut s = Setup::new(vec![on_n1(json!([
        {"name": "g0", "attributes": {"model": {"string": "a"}}},
        {"name": "g1", "attributes": {"model": {"string": "b"}}},
        {"name": "g2", "attributes": {"model": {"string": "a"}}}]))]);
    s.classes = vec![class("gpu", &[r#"device.attributes["gpu.example.com"].model == "a""#])];
    let all = claim(
        "c",
        json!({"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu", "allocationMode": "All"}}]}),
    );
    assert_eq!(s.devices(&n1(), std::slice::from_ref(&all)), Some(vec![vec!["g0".into(), "g2".into()]]));
    s.state.devices.insert(&DeviceId::new(DRIVER, "pool", "g2"));
    assert_eq!(s.devices(&n1(), std::slice::from_ref(&all)), None, "all means all, allocated ones included");
    s.classes = vec![class("gpu", &["false"])];
    assert_eq!(s.devices(&n1(), &[all]), None);
}

#[test]
fn all_mode_refuses_incomplete_pools_with_an_error() {
    let s = Setup::new(vec![slice(
        "s1",
        json!({"nodeName": "n1", "pool": {"name": "pool", "generation": 1, "resourceSliceCount": 2}, "devices": gpus(&["g0"])}),
    )]);
    let all = claim(
        "c",
        json!({"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu", "allocationMode": "All"}}]}),
    );
    assert_eq!(
        s.run(&n1(), &[all]),
        Err(AllocError::Fatal(
            "claim default/c, request r: asks for all devices, but resource pool gpu.example.com/pool is currently being updated".into()
        ))
    );
    // exact counts do not use incomplete pools either
    assert_eq!(s.devices(&n1(), &[count_claim("c", 1)]), None);
}

#[test]
fn only_the_newest_pool_generation_counts() {
    let old = slice("old", json!({"nodeName": "n1", "devices": gpus(&["stale"])}));
    let new = slice(
        "new",
        json!({"nodeName": "n1", "pool": {"name": "pool", "generation": 2, "resourceSliceCount": 1}, "devices": gpus(&["fresh"])}),
    );
    let s = Setup::new(vec![old, new]);
    assert_eq!(s.devices(&n1(), &[count_claim("c", 1)]), Some(vec![vec!["fresh".into()]]));
}

#[test]
fn pools_and_slices_are_searched_by_name() {
    let b = slice(
        "b-slice",
        json!({"nodeName": "n1", "pool": {"name": "b", "generation": 1, "resourceSliceCount": 1}, "devices": gpus(&["b0"])}),
    );
    let a2 = slice(
        "a-2",
        json!({"nodeName": "n1", "pool": {"name": "a", "generation": 1, "resourceSliceCount": 2}, "devices": gpus(&["a2"])}),
    );
    let a1 = slice(
        "a-1",
        json!({"nodeName": "n1", "pool": {"name": "a", "generation": 1, "resourceSliceCount": 2}, "devices": gpus(&["a1"])}),
    );
    let s = Setup::new(vec![b, a2, a1]);
    assert_eq!(s.devices(&n1(), &[count_claim("c", 3)]), Some(vec![vec!["a1".into(), "a2".into(), "b0".into()]]));
}

#[test]
fn duplicate_device_names_make_the_pool_invalid_for_the_node() {
    let s = Setup::new(vec![on_n1(gpus(&["g0", "g0"]))]);
    assert_eq!(
        s.run(&n1(), &[count_claim("c", 1)]),
        Err(AllocError::NodeFailed("invalid resource pools were encountered".into()))
    );
}

#[test]
fn request_selectors_filter_devices_with_cel() {
    let s = Setup::new(vec![on_n1(json!([
        {"name": "small", "capacity": {"memory": {"value": "16Gi"}}},
        {"name": "big", "capacity": {"memory": {"value": "80Gi"}}}]))]);
    let c = claim(
        "c",
        json!({"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1,
        "selectors": [{"cel": {"expression": r#"device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0"#}}]}}]}),
    );
    assert_eq!(s.devices(&n1(), &[c]), Some(vec![vec!["big".into()]]));
}

#[test]
fn cel_runtime_errors_stop_allocation_with_upstream_text() {
    let mut s = Setup::new(vec![on_n1(gpus(&["g0"]))]);
    s.classes = vec![class("gpu", &[r#"device.attributes["gpu.example.com"].model == "x""#])];
    assert_eq!(
        s.run(&n1(), &[count_claim("c", 1)]),
        Err(AllocError::Fatal("class gpu: selector #0: CEL runtime error: no such key: model".into()))
    );
    s.classes = vec![class("gpu", &["device.driver =="])];
    let Err(AllocError::Fatal(msg)) = s.run(&n1(), &[count_claim("c", 1)]) else { panic!() };
    assert!(
        msg.starts_with(
            "class gpu: selector #0: CEL compile error: compilation failed: ERROR: <input>:1:17: Syntax error"
        ),
        "{msg}"
    );
}

#[test]
fn match_attribute_backtracks_to_devices_that_agree() {
    let s = Setup::new(vec![on_n1(json!([
        {"name": "g0", "attributes": {"numa": {"int": 0}}},
        {"name": "g1", "attributes": {"numa": {"int": 1}}},
        {"name": "g2", "attributes": {"numa": {"int": 1}}}]))]);
    let c = claim(
        "c",
        json!({"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 2}}],
        "constraints": [{"matchAttribute": "gpu.example.com/numa"}]}),
    );
    assert_eq!(s.devices(&n1(), std::slice::from_ref(&c)), Some(vec![vec!["g1".into(), "g2".into()]]));
    let three = claim(
        "c",
        json!({"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 3}}],
        "constraints": [{"matchAttribute": "gpu.example.com/numa"}]}),
    );
    assert_eq!(s.devices(&n1(), &[three]), None);
}

#[test]
fn match_attribute_across_requests_and_distinct_attribute() {
    let devs = json!([
        {"name": "g0", "attributes": {"numa": {"int": 0}, "kind": {"string": "gpu"}}},
        {"name": "g1", "attributes": {"numa": {"int": 0}, "kind": {"string": "gpu"}}},
        {"name": "n0", "attributes": {"numa": {"int": 1}, "kind": {"string": "nic"}}},
        {"name": "n1", "attributes": {"numa": {"int": 0}, "kind": {"string": "nic"}}}]);
    let mut s = Setup::new(vec![on_n1(devs)]);
    s.classes = vec![
        class("gpu", &[r#"device.attributes["gpu.example.com"].kind == "gpu""#]),
        class("nic", &[r#"device.attributes["gpu.example.com"].kind == "nic""#]),
    ];
    let same = claim(
        "c",
        json!({"requests": [
            {"name": "g", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}},
            {"name": "n", "exactly": {"deviceClassName": "nic", "allocationMode": "ExactCount", "count": 1}}],
        "constraints": [{"matchAttribute": "gpu.example.com/numa", "requests": ["g", "n"]}]}),
    );
    assert_eq!(s.devices(&n1(), &[same]), Some(vec![vec!["g0".into(), "n1".into()]]));
    let distinct = claim(
        "c",
        json!({"requests": [
            {"name": "a", "exactly": {"deviceClassName": "nic", "allocationMode": "ExactCount", "count": 1}},
            {"name": "b", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}}],
        "constraints": [{"distinctAttribute": "gpu.example.com/numa"}]}),
    );
    assert_eq!(s.devices(&n1(), &[distinct]), Some(vec![vec!["n0".into(), "g0".into()]]));
}

#[test]
fn first_available_picks_the_first_subrequest_that_fits_and_names_it() {
    let mut s = Setup::new(vec![on_n1(json!([{"name": "small", "attributes": {"size": {"string": "s"}}}]))]);
    s.classes = vec![
        class("big", &[r#"device.attributes["gpu.example.com"].size == "l""#]),
        class("small", &[r#"device.attributes["gpu.example.com"].size == "s""#]),
    ];
    let c = claim(
        "c",
        json!({"requests": [{"name": "r", "firstAvailable": [
        {"name": "large", "deviceClassName": "big", "allocationMode": "ExactCount", "count": 1},
        {"name": "fallback", "deviceClassName": "small", "allocationMode": "ExactCount", "count": 1}]}]}),
    );
    let r = s.run(&n1(), &[c]).unwrap().unwrap();
    assert_eq!(results(&r[0])[0].request, "r/fallback");
    assert_eq!(results(&r[0])[0].device, "small");
}

#[test]
fn first_available_backtracks_into_earlier_subrequests_of_other_claims() {
    // claim a can use one "any" device or two; claim b needs two. Only a=1 leaves room.
    let s = Setup::new(vec![on_n1(gpus(&["g0", "g1", "g2"]))]);
    let a = claim(
        "a",
        json!({"requests": [{"name": "r", "firstAvailable": [
        {"name": "two", "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 2},
        {"name": "one", "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}]}]}),
    );
    let got = s.run(&n1(), &[a, count_claim("b", 2)]).unwrap().unwrap();
    assert_eq!(results(&got[0]).iter().map(|d| d.request.as_str()).collect::<Vec<_>>(), ["r/one"]);
    assert_eq!(results(&got[1]).len(), 2);
}

#[test]
fn fits_reports_the_subrequests_allocate_uses() {
    let s = Setup::new(vec![on_n1(gpus(&["g0", "g1", "g2"]))]);
    let a = claim(
        "a",
        json!({"requests": [
            {"name": "plain", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}},
            {"name": "r", "firstAvailable": [
                {"name": "two", "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 2},
                {"name": "one", "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}]}]}),
    );
    let claims = [a, count_claim("b", 1)];
    let refs: Vec<&ResourceClaim> = claims.iter().collect();
    let allocator = s.allocator();
    let fit = allocator.fits(&n1(), &refs, None).unwrap().expect("fits");
    // a: the plain request, then "one" (index 1) since "two" leaves nothing for b; b: plain.
    assert_eq!(fit.sub_requests, vec![vec![None, Some(1)], vec![None]]);
    let got = allocator.allocate(&n1(), &refs, None).unwrap().unwrap();
    let requests: Vec<&str> = results(&got[0]).iter().map(|d| d.request.as_str()).collect();
    assert_eq!(requests, ["plain", "r/one"]);
    // Nothing fits: both say so.
    let too_many = [count_claim("c", 4)];
    let refs: Vec<&ResourceClaim> = too_many.iter().collect();
    assert_eq!(allocator.fits(&n1(), &refs, None), Ok(None));
    assert_eq!(allocator.allocate(&n1(), &refs, None), Ok(None));
}

#[test]
fn pools_are_gathered_per_node_and_follow_node_labels_for_selected_slices() {
    // A slice for nodes labelled zone=a: the same allocator must see a relabelled node anew
    // (such slices are never cached per node name).
    let s = Setup::new(vec![slice(
        "net",
        json!({"nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "zone", "operator": "In", "values": ["a"]}]}]}, "devices": gpus(&["g0"])}),
    )]);
    let allocator = s.allocator();
    let c = [count_claim("c", 1)];
    let refs: Vec<&ResourceClaim> = c.iter().collect();
    assert!(allocator.fits(&node("n1", json!({"zone": "a"})), &refs, None).unwrap().is_some());
    assert_eq!(allocator.fits(&node("n1", json!({"zone": "b"})), &refs, None), Ok(None));
    // Node-local slices: cached per node, and each node sees only its own.
    let s = Setup::new(vec![on_n1(gpus(&["g0"])), slice("s2", json!({"nodeName": "n2", "devices": gpus(&["h0"])}))]);
    let allocator = s.allocator();
    for _ in 0..2 {
        let on = |n: &str| {
            let r = allocator.allocate(&node(n, json!({})), &refs, None).unwrap().unwrap();
            results(&r[0])[0].device.clone()
        };
        assert_eq!((on("n1"), on("n2")), ("g0".to_string(), "h0".to_string()));
        assert_eq!(allocator.fits(&node("n3", json!({})), &refs, None), Ok(None));
    }
}

#[test]
fn admin_access_may_use_allocated_devices_but_not_twice_per_claim() {
    let mut s = Setup::new(vec![on_n1(gpus(&["g0"]))]);
    s.state.devices.insert(&DeviceId::new(DRIVER, "pool", "g0"));
    let admin = |n: i64| {
        claim(
            "c",
            json!({"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": n, "adminAccess": true}}]}),
        )
    };
    let r = s.run(&n1(), &[admin(1)]).unwrap().unwrap();
    assert_eq!(results(&r[0])[0].admin_access, Some(true));
    assert!(s.run(&n1(), &[admin(2)]).unwrap().is_none());
    s.features.admin_access = false;
    assert_eq!(
        s.run(&n1(), &[admin(1)]),
        Err(AllocError::Fatal(
            "claim default/c, request r: admin access is requested, but the feature is disabled".into()
        ))
    );
}

#[test]
fn taints_block_allocation_unless_tolerated() {
    let s = Setup::new(vec![on_n1(json!([
        {"name": "g0", "taints": [{"key": "broken", "effect": "NoSchedule"}]},
        {"name": "g1", "taints": [{"key": "info", "effect": "None"}]}]))]);
    assert_eq!(s.devices(&n1(), &[count_claim("c", 1)]), Some(vec![vec!["g1".into()]]));
    assert_eq!(s.devices(&n1(), &[count_claim("c", 2)]), None);
    let tolerating = claim(
        "c",
        json!({"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 2,
        "tolerations": [{"key": "broken", "operator": "Exists", "effect": "NoSchedule"}]}}]}),
    );
    let r = s.run(&n1(), &[tolerating]).unwrap().unwrap();
    assert_eq!(results(&r[0]).len(), 2);
    assert_eq!(results(&r[0])[0].tolerations.as_ref().map(Vec::len), Some(1), "tolerations are recorded");
    let mut off = Setup::new(s.slices.clone());
    off.features.device_taints = false;
    assert_eq!(off.devices(&n1(), &[count_claim("c", 2)]).map(|d| d[0].len()), Some(2));
}

fn partitionable() -> Vec<Arc<ResourceSlice>> {
    let counters = slice(
        "counters",
        json!({"nodeName": "n1", "pool": {"name": "pool", "generation": 1, "resourceSliceCount": 2},
        "sharedCounters": [{"name": "gpu-0", "counters": {"memory": {"value": "40Gi"}}}]}),
    );
    let parts = slice(
        "parts",
        json!({"nodeName": "n1", "pool": {"name": "pool", "generation": 1, "resourceSliceCount": 2}, "devices": [
        {"name": "whole", "consumesCounters": [{"counterSet": "gpu-0", "counters": {"memory": {"value": "40Gi"}}}]},
        {"name": "half-0", "consumesCounters": [{"counterSet": "gpu-0", "counters": {"memory": {"value": "20Gi"}}}]},
        {"name": "half-1", "consumesCounters": [{"counterSet": "gpu-0", "counters": {"memory": {"value": "20Gi"}}}]}]}),
    );
    vec![counters, parts]
}

#[test]
fn partitions_share_counters_of_the_physical_device() {
    let mut s = Setup::new(partitionable());
    assert_eq!(s.devices(&n1(), &[count_claim("c", 1)]), Some(vec![vec!["whole".into()]]));
    // the whole GPU and a half cannot both be had
    assert_eq!(s.devices(&n1(), &[count_claim("c", 2)]), Some(vec![vec!["half-0".into(), "half-1".into()]]));
    assert_eq!(s.devices(&n1(), &[count_claim("c", 3)]), None);
    // an allocated half leaves only the other half
    s.state.devices.insert(&DeviceId::new(DRIVER, "pool", "half-0"));
    assert_eq!(s.devices(&n1(), &[count_claim("c", 1)]), Some(vec![vec!["half-1".into()]]));
    s.features.partitionable_devices = false;
    assert_eq!(s.devices(&n1(), &[count_claim("c", 1)]), None, "partitions need the feature");
}

/// The counter model code outside the allocator reads ([`NodeCounters`]) says of each
/// device what the allocator's counter check says: with the device's own state (allocated or
/// not) added, a claim for that one device gets it exactly when the model allows it.
#[test]
fn node_counters_agree_with_the_allocator() {
    let dev = |name: &str, set: &str, memory: &str| {
        json!({"name": name, "attributes": {"name": {"string": name}},
            "consumesCounters": [{"counterSet": set, "counters": {"memory": {"value": memory}}}]})
    };
    let mut shared_whole = dev("whole-1", "gpu-1", "40Gi");
    shared_whole["allowMultipleAllocations"] = json!(true);
    shared_whole["capacity"] = json!({"milligpu": {"value": "1000"}});
    let pool = |name: &str| json!({"name": name, "generation": 1, "resourceSliceCount": 2});
    let slices = vec![
        slice(
            "a-counters",
            json!({"nodeName": "n1", "pool": pool("a"),
            "sharedCounters": [{"name": "gpu-0", "counters": {"memory": {"value": "40Gi"}}}]}),
        ),
        slice(
            "a-devices",
            json!({"nodeName": "n1", "pool": pool("a"),
            "devices": [dev("whole", "gpu-0", "40Gi"), dev("half-0", "gpu-0", "20Gi"), dev("half-1", "gpu-0", "20Gi")]}),
        ),
        // A shareable whole device: its first share draws all its counters, later ones none.
        slice(
            "b-counters",
            json!({"nodeName": "n1", "pool": pool("b"),
            "sharedCounters": [{"name": "gpu-1", "counters": {"memory": {"value": "40Gi"}}}]}),
        ),
        slice(
            "b-devices",
            json!({"nodeName": "n1", "pool": pool("b"),
            "devices": [shared_whole, dev("half-2", "gpu-1", "20Gi")]}),
        ),
    ];
    let names = [("a", "whole"), ("a", "half-0"), ("a", "half-1"), ("b", "whole-1"), ("b", "half-2")];
    // (case, devices allocated exclusively, a device with a share, allowed per device)
    type Case =
        (&'static str, &'static [(&'static str, &'static str)], Option<(&'static str, &'static str)>, [bool; 5]);
    let cases: [Case; 5] = [
        ("nothing allocated", &[], None, [true; 5]),
        ("a half", &[("a", "half-0")], None, [false, true, true, true, true]),
        ("the whole", &[("a", "whole")], None, [false, false, false, true, true]),
        ("a share of the shareable whole", &[], Some(("b", "whole-1")), [true, true, true, true, false]),
        ("the other half", &[("b", "half-2")], None, [true, true, true, false, true]),
    ];
    for (case, exclusive, shared, want) in cases {
        let mut s = Setup::new(slices.clone());
        for (pool, d) in exclusive {
            s.state.devices.insert(&DeviceId::new(DRIVER, pool, d));
        }
        if let Some((pool, d)) = shared {
            let id = DeviceId::new(DRIVER, pool, d);
            s.state.shared.insert(&id);
            s.state.capacity.insert(id, [("milligpu".to_string(), Quantity::parse("300").unwrap())].into());
        }
        let index = SliceIndex::new(s.slices.clone());
        let counters = index.node_counters(&n1(), &s.features, &s.state).unwrap();
        let devices = index.node_devices(&n1(), &s.features).unwrap();
        let allows: Vec<bool> = names
            .iter()
            .map(|(_, n)| counters.allows(devices.iter().find(|d| d.device().name == *n).unwrap()))
            .collect();
        assert_eq!(allows, want, "{case}");
        for ((pool, device), allowed) in names.iter().zip(want) {
            let mut exactly = json!({"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1,
                "selectors": [{"cel": {"expression": format!("device.attributes[\"{DRIVER}\"].name == \"{device}\"")}}]});
            if device.starts_with("whole-") {
                exactly["capacity"] = json!({"requests": {"milligpu": "100"}});
            }
            let one = claim("c", json!({"requests": [{"name": "r", "exactly": exactly}]}));
            let taken = s.state.devices.contains(DRIVER, pool, device);
            assert_eq!(s.devices(&n1(), &[one]).is_some(), allowed && !taken, "{case}: the allocator on {device}");
        }
    }
}

/// Devices taken in one attempt draw on what the others had left.
#[test]
fn counter_attempts_take_counters_in_turn() {
    let s = Setup::new(partitionable());
    let index = SliceIndex::new(s.slices.clone());
    let counters = index.node_counters(&n1(), &s.features, &s.state).unwrap();
    let devices = index.node_devices(&n1(), &s.features).unwrap();
    let [whole, half_0, half_1] = [0, 1, 2].map(|i| &devices[i]);
    let mut attempt = counters.attempt();
    assert!(attempt.fits(whole) && attempt.fits(half_0), "fits takes nothing");
    assert!(attempt.take(half_0));
    assert!(!attempt.take(whole), "the whole needs the half taken");
    assert!(attempt.take(half_1), "a refused take left the counters as they were");
    assert!(!attempt.fits(half_0));
    let mut off = s.features;
    off.partitionable_devices = false;
    let without = index.node_counters(&n1(), &off, &s.state).unwrap();
    assert!(!without.allows(whole), "devices drawing counters need the feature");
}

#[test]
fn shareable_devices_are_shared_until_their_capacity_is_used() {
    let shared = on_n1(json!([{"name": "nic", "allowMultipleAllocations": true,
        "capacity": {"bandwidth": {"value": "10G", "requestPolicy": {"default": "1G", "validRange": {"min": "1G", "step": "1G"}}}}}]));
    let mut s = Setup::new(vec![shared]);
    let want = |bw: &str| {
        claim(
            "c",
            json!({"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1,
            "capacity": {"requests": {"bandwidth": bw}}}}]}),
        )
    };
    let r = s.run(&n1(), &[want("2.5G"), want("4G")]).unwrap().unwrap();
    let d = &results(&r[0])[0];
    assert_eq!(d.device, "nic");
    assert_eq!(d.share_id.as_deref(), Some("share-0"));
    // 2.5G rounds up to the next 1G step
    assert_eq!(serde_json::to_value(&d.consumed_capacity).unwrap(), json!({"bandwidth": "3000000000"}));
    assert_eq!(results(&r[1])[0].device, "nic", "two claims share the device");
    for a in &r {
        s.state.add_allocation(a);
    }
    // 3G + 4G used: 3G left
    assert!(s.run(&n1(), &[want("3G")]).unwrap().is_some());
    assert!(s.run(&n1(), &[want("4G")]).unwrap().is_none());
    assert!(s.run(&n1(), &[want("11G")]).unwrap().is_none(), "beyond the policy range");
}

#[test]
fn binding_conditions_are_copied_and_such_pools_come_last() {
    let plain = slice(
        "plain",
        json!({"nodeName": "n1", "pool": {"name": "z-plain", "generation": 1, "resourceSliceCount": 1}, "devices": gpus(&["p0"])}),
    );
    let bc = slice(
        "bc",
        json!({"nodeName": "n1", "pool": {"name": "a-bc", "generation": 1, "resourceSliceCount": 1}, "devices": [
        {"name": "b0", "bindingConditions": ["attached"], "bindingFailureConditions": ["failed"], "bindsToNode": true}]}),
    );
    let s = Setup::new(vec![plain, bc]);
    let r = s.run(&n1(), &[count_claim("c", 2)]).unwrap().unwrap();
    let devs = results(&r[0]);
    assert_eq!(devs.iter().map(|d| d.device.as_str()).collect::<Vec<_>>(), ["p0", "b0"]);
    assert_eq!(devs[1].binding_conditions.as_deref(), Some(&["attached".to_string()][..]));
    assert_eq!(devs[1].binding_failure_conditions.as_deref(), Some(&["failed".to_string()][..]));
    let mut off = Setup::new(s.slices.clone());
    off.features.device_binding_and_status = false;
    assert_eq!(off.devices(&n1(), &[count_claim("c", 2)]), None, "without the feature such devices are not used");
}

#[test]
fn too_many_devices_for_one_claim_is_an_error() {
    let names: Vec<String> = (0..40).map(|i| format!("g{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let s = Setup::new(vec![on_n1(gpus(&refs))]);
    assert_eq!(
        s.run(&n1(), &[count_claim("c", 33)]),
        Err(AllocError::Fatal("claim default/c: number of requested devices 33 exceeds the claim limit of 32".into()))
    );
    assert!(s.run(&n1(), &[count_claim("c", 32)]).unwrap().is_some());
}

#[test]
fn the_deadline_stops_a_long_search() {
    // 12 devices with distinct values, a match constraint over 3: exhaustive search.
    let devs: Vec<Value> = (0..12).map(|i| json!({"name": format!("g{i}"), "attributes": {"v": {"int": i}}})).collect();
    let s = Setup::new(vec![on_n1(Value::Array(devs))]);
    let c = claim(
        "c",
        json!({"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 3}}],
        "constraints": [{"matchAttribute": "gpu.example.com/v"}]}),
    );
    let refs = [&c];
    assert_eq!(s.allocator().allocate(&n1(), &refs, Some(Instant::now())), Err(AllocError::Timeout));
    assert_eq!(s.allocator().allocate(&n1(), &refs, None), Ok(None));
}

#[test]
fn class_and_claim_configuration_is_passed_on() {
    let mut s = Setup::new(vec![on_n1(gpus(&["g0", "g1"]))]);
    s.classes = vec![Arc::new(
        serde_json::from_value(json!({"metadata": {"name": "gpu"}, "spec": {"config": [{"opaque": {"driver": DRIVER, "parameters": {"a": 1}}}]}}))
            .unwrap(),
    )];
    let c = claim(
        "c",
        json!({"requests": [
            {"name": "x", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}},
            {"name": "y", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}}],
        "config": [{"requests": ["y"], "opaque": {"driver": DRIVER, "parameters": {"b": 2}}}]}),
    );
    let r = s.run(&n1(), &[c]).unwrap().unwrap();
    let cfg = serde_json::to_value(&r[0].devices.as_ref().unwrap().config).unwrap();
    assert_eq!(
        cfg,
        json!([
        {"source": "FromClass", "requests": ["x", "y"], "opaque": {"driver": DRIVER, "parameters": {"a": 1}}},
        {"source": "FromClaim", "requests": ["y"], "opaque": {"driver": DRIVER, "parameters": {"b": 2}}}])
    );
}

#[test]
fn unknown_class_in_the_allocator_is_an_error() {
    let s = Setup::new(vec![on_n1(gpus(&["g0"]))]);
    let c = claim(
        "c",
        json!({"requests": [{"name": "r", "exactly": {"deviceClassName": "nope", "allocationMode": "ExactCount", "count": 1}}]}),
    );
    assert_eq!(
        s.run(&n1(), &[c]),
        Err(AllocError::Fatal(
            "claim default/c, request r: could not retrieve device class nope: deviceclass.resource.k8s.io \"nope\" not found".into()
        ))
    );
}

/// Seeded random allocate/free cycles: no exclusive device is ever handed out twice, and
/// shared counters and consumable capacity never exceed what the slices publish.
#[test]
fn randomized_allocation_never_double_books_or_overcommits() {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    let mut rng = StdRng::seed_from_u64(0x5eed);
    let nodes: Vec<Node> = (0..3).map(|i| node(&format!("n{i}"), json!({}))).collect();
    let mut slices = Vec::new();
    for n in 0..3 {
        let pool = |count: i64| json!({"name": format!("n{n}"), "generation": 1, "resourceSliceCount": count});
        slices.push(slice(&format!("n{n}-gpus"), json!({"nodeName": format!("n{n}"), "pool": pool(3), "devices":
            (0..4).map(|i| json!({"name": format!("g{i}"), "attributes": {"numa": {"int": i % 2}}})).collect::<Vec<_>>()})));
        slices.push(slice(
            &format!("n{n}-counters"),
            json!({"nodeName": format!("n{n}"), "pool": pool(3),
            "sharedCounters": [{"name": "big", "counters": {"mem": {"value": "8"}}}]}),
        ));
        slices.push(slice(
            &format!("n{n}-parts"),
            json!({"nodeName": format!("n{n}"), "pool": pool(3), "devices": [
            {"name": "p-whole", "consumesCounters": [{"counterSet": "big", "counters": {"mem": {"value": "8"}}}]},
            {"name": "p-a", "consumesCounters": [{"counterSet": "big", "counters": {"mem": {"value": "4"}}}]},
            {"name": "p-b", "consumesCounters": [{"counterSet": "big", "counters": {"mem": {"value": "4"}}}]},
            {"name": "p-c", "consumesCounters": [{"counterSet": "big", "counters": {"mem": {"value": "2"}}}]},
            {"name": "shared", "allowMultipleAllocations": true, "capacity": {"bw": {"value": "10"}}}]}),
        ));
    }
    let mut s = Setup::new(slices);
    let mut live: Vec<(usize, AllocationResult)> = Vec::new();
    let mut allocated_any = 0;
    for step in 0..400 {
        if !live.is_empty() && rng.random_bool(0.3) {
            let i = rng.random_range(0..live.len());
            live.swap_remove(i);
        } else {
            let n = rng.random_range(0..3);
            let mut claims = Vec::new();
            for c in 0..rng.random_range(1..3) {
                let name = format!("c{step}-{c}");
                claims.push(match rng.random_range(0..4) {
                    0 => count_claim(&name, rng.random_range(1..3)),
                    1 => claim(&name, json!({"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount",
                            "count": 2}}], "constraints": [{"matchAttribute": "gpu.example.com/numa"}]})),
                    2 => claim(&name, json!({"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount",
                            "count": 1, "selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}}]})),
                    _ => claim(&name, json!({"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount",
                            "count": 1, "capacity": {"requests": {"bw": format!("{}", rng.random_range(1..6))}}}}]})),
                });
            }
            let refs: Vec<&ResourceClaim> = claims.iter().collect();
            if let Some(results) = s.allocator().allocate(&nodes[n], &refs, None).unwrap() {
                allocated_any += 1;
                for r in results {
                    live.push((n, r));
                }
            }
        }
        // rebuild the state from the live allocations and check the invariants
        let mut state = AllocatedState::default();
        let mut exclusive: BTreeMap<String, usize> = BTreeMap::new();
        let mut mem: BTreeMap<String, i64> = BTreeMap::new();
        let mut bw: BTreeMap<String, i64> = BTreeMap::new();
        for (_, a) in &live {
            state.add_allocation(a);
            for d in results(a) {
                let key = format!("{}/{}", d.pool, d.device);
                if d.share_id.is_some() {
                    let used = d.consumed_capacity.as_ref().unwrap()["bw"].0.parse::<i64>().unwrap();
                    *bw.entry(key).or_default() += used;
                    continue;
                }
                *exclusive.entry(key.clone()).or_default() += 1;
                let m = match d.device.as_str() {
                    "p-whole" => 8,
                    "p-a" | "p-b" => 4,
                    "p-c" => 2,
                    _ => 0,
                };
                *mem.entry(d.pool.clone()).or_default() += m;
            }
        }
        assert!(exclusive.values().all(|&n| n == 1), "step {step}: device given twice: {exclusive:?}");
        assert!(mem.values().all(|&m| m <= 8), "step {step}: counters exceeded: {mem:?}");
        assert!(bw.values().all(|&b| b <= 10), "step {step}: capacity exceeded: {bw:?}");
        s.state = state;
    }
    assert!(allocated_any > 100, "the test must exercise allocation ({allocated_any})");
}

/// Three shareable GPUs: gpu-0 fresh, gpu-1 with 700 of 1000 taken, gpu-2 with 500 taken.
fn shared_gpus() -> Setup {
    let dev =
        |n: &str| json!({"name": n, "allowMultipleAllocations": true, "capacity": {"milligpu": {"value": "1000"}}});
    let mut s = Setup::new(vec![on_n1(json!([dev("gpu-0"), dev("gpu-1"), dev("gpu-2")]))]);
    for (device, used) in [("gpu-1", "700"), ("gpu-2", "500")] {
        let a: AllocationResult = serde_json::from_value(json!({"devices": {"results": [{"request": "r",
            "driver": DRIVER, "pool": "pool", "device": device, "shareID": device,
            "consumedCapacity": {"milligpu": used}}]}}))
        .unwrap();
        s.state.add_allocation(&a);
    }
    s
}

fn share_claim(name: &str, milli: &str) -> ResourceClaim {
    claim(
        name,
        json!({"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount",
            "count": 1, "capacity": {"requests": {"milligpu": milli}}}}]}),
    )
}

fn with_selection(s: &Setup, selection: DeviceSelection, claims: &[ResourceClaim]) -> Option<Vec<Vec<String>>> {
    let refs: Vec<&ResourceClaim> = claims.iter().collect();
    let res = s.allocator().with_device_selection(selection).allocate(&n1(), &refs, None).expect("no error")?;
    Some(res.iter().map(|r| results(r).iter().map(|d| d.device.clone()).collect()).collect())
}

#[test]
fn first_fit_is_the_default_and_takes_the_first_listed_device_with_room() {
    let s = shared_gpus();
    let claims = [share_claim("c", "250")];
    assert_eq!(s.devices(&n1(), &claims), Some(vec![vec!["gpu-0".to_string()]]));
    assert_eq!(with_selection(&s, DeviceSelection::FirstFit, &claims), s.devices(&n1(), &claims));
}

#[test]
fn best_fit_takes_the_device_left_with_the_least_capacity() {
    let s = shared_gpus();
    // 250: gpu-1 (300 free) leaves 50, gpu-2 250, gpu-0 750.
    assert_eq!(
        with_selection(&s, DeviceSelection::BestFit, &[share_claim("c", "250")]),
        Some(vec![vec!["gpu-1".into()]])
    );
    // 400 does not fit gpu-1: gpu-2 (500 free) is the tightest that does.
    assert_eq!(
        with_selection(&s, DeviceSelection::BestFit, &[share_claim("c", "400")]),
        Some(vec![vec!["gpu-2".into()]])
    );
    // Two claims in one attempt: the second sees the first's consumption.
    assert_eq!(
        with_selection(&s, DeviceSelection::BestFit, &[share_claim("a", "300"), share_claim("b", "300")]),
        Some(vec![vec!["gpu-1".into()], vec!["gpu-2".into()]])
    );
    assert_eq!(with_selection(&s, DeviceSelection::BestFit, &[share_claim("c", "1001")]), None);
}

#[test]
fn best_fit_leaves_whole_device_requests_in_listed_order() {
    let s = shared_gpus();
    // No capacity request: each device is consumed whole, so only the fresh one fits, as
    // without the strategy; several devices keep the combination order.
    for sel in [DeviceSelection::FirstFit, DeviceSelection::BestFit] {
        assert_eq!(with_selection(&s, sel, &[count_claim("c", 1)]), Some(vec![vec!["gpu-0".into()]]), "{sel:?}");
    }
    let plain = Setup::new(vec![on_n1(gpus(&["g0", "g1", "g2"]))]);
    assert_eq!(
        with_selection(&plain, DeviceSelection::BestFit, &[count_claim("c", 2)]),
        Some(vec![vec!["g0".into(), "g1".into()]])
    );
}

#[test]
fn best_fit_still_backtracks_on_constraints() {
    // Two requests of one claim must share the `rack` attribute: the tightest device for the
    // first (gpu-1, rack a) has no partner, so the search moves on to gpu-2 and gpu-3 (rack b).
    let dev = |n: &str, rack: &str| {
        json!({"name": n, "allowMultipleAllocations": true, "attributes": {"rack": {"string": rack}},
            "capacity": {"milligpu": {"value": "1000"}}})
    };
    let mut s = Setup::new(vec![on_n1(json!([dev("gpu-1", "a"), dev("gpu-2", "b"), dev("gpu-3", "b")]))]);
    let a: AllocationResult = serde_json::from_value(json!({"devices": {"results": [
        {"request": "r", "driver": DRIVER, "pool": "pool", "device": "gpu-1", "shareID": "x", "consumedCapacity": {"milligpu": "900"}},
        {"request": "r", "driver": DRIVER, "pool": "pool", "device": "gpu-2", "shareID": "y", "consumedCapacity": {"milligpu": "500"}}]}}))
    .unwrap();
    s.state.add_allocation(&a);
    let req = |n: &str| {
        json!({"name": n, "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount",
        "count": 1, "capacity": {"requests": {"milligpu": "100"}}}})
    };
    let c = claim(
        "c",
        json!({"requests": [req("one"), req("two")], "constraints": [{"requests": ["one", "two"], "matchAttribute": "gpu.example.com/rack"}]}),
    );
    assert_eq!(
        with_selection(&s, DeviceSelection::BestFit, &[c]),
        Some(vec![vec!["gpu-2".into(), "gpu-2".into()]]),
        "both on gpu-2: the tightest with a partner in its rack (itself: shareable)"
    );
}
