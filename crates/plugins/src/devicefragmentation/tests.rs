//! The plugin over real objects: slices, a class, claims with allocations, nodes and pods.

use k8s_openapi::api::resource::v1::ResourceSlice;
use ksched_framework::listers::MemoryLister;
use serde_json::{json, Value};

use super::*;
use crate::helper::testing::{node_info, pod, pod_info};

const CLASS: &str = "gpu.example.com";
const DRIVER: &str = "gpu.example.com";

/// A cluster: the lister the plugin reads and the nodes.
struct Cluster {
    lister: Arc<MemoryLister>,
    nodes: Vec<NodeInfo>,
    pods: usize,
}

impl Cluster {
    fn new() -> Self {
        let lister = Arc::new(MemoryLister::default());
        lister.device_classes.upsert(Arc::new(
            serde_json::from_value(json!({"metadata": {"name": CLASS},
                "spec": {"selectors": [{"cel": {"expression": format!("device.driver == \"{DRIVER}\"")}}]}}))
            .unwrap(),
        ));
        Cluster { lister, nodes: Vec::new(), pods: 0 }
    }

    /// A node with `cores` free cpu and one shareable 1000-milligpu device per model listed
    /// (no slice when none is: the test publishes its own).
    fn add_node(&mut self, name: &str, cores: i64, models: &[&str]) {
        let devices: Vec<Value> = models
            .iter()
            .enumerate()
            .map(|(i, m)| {
                json!({"name": format!("gpu-{i}"), "allowMultipleAllocations": true,
                    "attributes": {"model": {"string": m}}, "capacity": {"milligpu": {"value": "1000"}}})
            })
            .collect();
        if !devices.is_empty() {
            self.lister.resource_slices.upsert(Arc::new(
                serde_json::from_value(json!({"metadata": {"name": format!("{name}-gpus")},
                    "spec": {"driver": DRIVER, "nodeName": name, "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                             "devices": devices}}))
                .unwrap(),
            ));
        }
        let n: ksched_framework::node::Node = serde_json::from_value(json!({"metadata": {"name": name},
            "status": {"allocatable": {"cpu": format!("{cores}"), "memory": "1Ti", "pods": "110"}}}))
        .unwrap();
        let mut ni = node_info(n);
        ni.generation = 1;
        self.nodes.push(ni);
    }

    /// Records an allocation of `milli` of `node`'s device `gpu` (as a claim's status does).
    fn allocate(&mut self, node: &str, gpu: usize, milli: i64) {
        self.pods += 1;
        let name = format!("used-{}", self.pods);
        self.lister.resource_claims.upsert(Arc::new(
            serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default", "uid": name, "resourceVersion": "1"},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": CLASS}}]}},
                "status": {"allocation": {"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": node,
                    "device": format!("gpu-{gpu}"), "shareID": name, "consumedCapacity": {"milligpu": format!("{milli}")}}]}}}}))
            .unwrap(),
        ));
        // The node changed (the pod holding the claim landed there).
        let ni = self.nodes.iter_mut().find(|n| n.name() == node).unwrap();
        ni.generation += 1;
    }

    /// A pod with `cores` of cpu and a claim for `milli` of one device (a share), or for
    /// `whole` devices, with optional CEL selectors.
    fn pod(&mut self, cores: i64, milli: Option<i64>, whole: i64, selectors: &[&str]) -> PodInfo {
        self.pods += 1;
        let name = format!("pod-{}", self.pods);
        let mut spec = json!({"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": format!("{cores}")}}}]});
        if milli.is_some() || whole > 0 {
            let mut exactly = json!({"deviceClassName": CLASS, "allocationMode": "ExactCount", "count": whole.max(1)});
            if let Some(m) = milli {
                exactly["capacity"] = json!({"requests": {"milligpu": format!("{m}")}});
            }
            if !selectors.is_empty() {
                exactly["selectors"] =
                    Value::Array(selectors.iter().map(|e| json!({"cel": {"expression": e}})).collect());
            }
            self.lister.resource_claims.upsert(Arc::new(
                serde_json::from_value(
                    json!({"metadata": {"name": name, "namespace": "default", "uid": format!("claim-{name}")},
                    "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}),
                )
                .unwrap(),
            ));
            spec["resourceClaims"] = json!([{"name": "gpu", "resourceClaimName": name}]);
        }
        pod_info(pod(json!({"name": name, "uid": name}), spec))
    }
}

/// The plugin, built the way the registry builds it.
fn plugin(c: &Cluster) -> DeviceFragmentation {
    plugin_with(c, json!({"deviceClassName": CLASS, "capacity": "milligpu"}))
}

/// The plugin with these args.
fn plugin_with(c: &Cluster, args: Value) -> DeviceFragmentation {
    let args = DeviceFragmentationArgs::decode(Some(&args)).unwrap();
    let shared = ksched_framework::handle::SharedState::default();
    let dra = crate::dynamicresources::manager::shared(&shared, c.lister.clone());
    DeviceFragmentation::with(args, dra, Features::default())
}

/// Runs PreFilter, PreScore, Score and NormalizeScore for `pod`; the normalized scores by
/// node, or `None` when the plugin skips the pod.
fn scores(p: &DeviceFragmentation, c: &Cluster, pod: &PodInfo) -> Option<Vec<(String, i64)>> {
    let snapshot = Snapshot::from_node_infos(c.nodes.clone());
    let mut state = CycleState::new();
    let (_, s) = p.pre_filter(&mut state, pod, &snapshot);
    assert!(s.is_success(), "{}", s.message());
    let nodes: Vec<&NodeInfo> = snapshot.list().iter().map(|n| &**n).collect();
    let s = p.pre_score(&mut state, pod, &nodes, &snapshot);
    if s.is_skip() {
        return None;
    }
    assert!(s.is_success(), "{}", s.message());
    let mut raw = vec![0; nodes.len()];
    p.score_nodes(&state, pod, &nodes, &mut raw).unwrap();
    assert!(p.normalize_score(&state, pod, &nodes, &mut raw).is_success());
    Some(nodes.iter().map(|n| n.name().to_string()).zip(raw).collect())
}

fn best(scores: &[(String, i64)]) -> Vec<&str> {
    let max = scores.iter().map(|s| s.1).max().unwrap();
    scores.iter().filter(|s| s.1 == max).map(|s| s.0.as_str()).collect()
}

/// Teaches the plugin a mix by letting it see pods (PreFilter counts each once).
fn learn(p: &DeviceFragmentation, c: &mut Cluster, shapes: &[(i64, Option<i64>, i64, usize)]) {
    let snapshot = Snapshot::from_node_infos(c.nodes.clone());
    for &(cores, milli, whole, n) in shapes {
        for _ in 0..n {
            let pi = c.pod(cores, milli, whole, &[]);
            let mut state = CycleState::new();
            p.pre_filter(&mut state, &pi, &snapshot);
        }
    }
}

#[test]
fn a_small_share_fills_the_sliver_an_810_left_instead_of_breaking_a_fresh_gpu() {
    let mut c = Cluster::new();
    c.add_node("a", 64, &["T4", "T4"]);
    c.add_node("b", 64, &["T4", "T4"]);
    c.allocate("a", 0, 810);
    let p = plugin(&c);
    learn(&p, &mut c, &[(4, Some(810), 0, 10), (8, None, 1, 10), (2, Some(160), 0, 4)]);
    let pod = c.pod(2, Some(160), 0, &[]);
    let s = scores(&p, &c, &pod).unwrap();
    // On a the 160 goes into the 190 the 810 left: only a 160 copy is lost there. On b it
    // breaks a whole GPU (still room for an 810 on it, but no longer for a whole-GPU pod).
    assert_eq!(best(&s), ["a"], "{s:?}");
}

#[test]
fn a_cpu_only_pod_leaves_the_cores_a_nodes_gpus_will_need() {
    let mut c = Cluster::new();
    // 12 cores per GPU against 11 asked: every core counts. 50 cores per GPU: plenty.
    c.add_node("tight", 24, &["T4", "T4"]);
    c.add_node("roomy", 200, &["T4", "T4", "T4", "T4"]);
    let p = plugin(&c);
    learn(&p, &mut c, &[(11, None, 1, 10), (4, None, 0, 5)]);
    // 4 cores on "tight" leave 20 for two GPUs that will want 22: a fifth of a GPU starves.
    // Every shape still fits there, so only the rate of the mix sees it; without it the
    // best-fit tie-break (least device capacity left) would pick "tight".
    let pod = c.pod(4, None, 0, &[]);
    let s = scores(&p, &c, &pod).unwrap();
    assert_eq!(best(&s), ["roomy"], "{s:?}");
    // A GPU pod asking the mix's rate starves nothing on either: best fit decides again.
    let gpu_pod = c.pod(11, None, 1, &[]);
    let s = scores(&p, &c, &gpu_pod).unwrap();
    assert_eq!(best(&s), ["tight"], "{s:?}");
}

#[test]
fn only_the_growth_of_starved_capacity_is_charged() {
    use measure::{Device, PerUnit};
    // One learnt shape with weight 0: what is left of the loss is the starved term alone.
    let shape = Shape { milli_cpu: 11_000, memory: 0, demand: Demand::Whole(1), class: 0 };
    let mix = Arc::new(MixSnapshot {
        version: 1,
        shapes: vec![(shape, 1.0)],
        class_demand: vec![1000.0],
        per_unit: PerUnit { milli_cpu: 11.0, memory: 0.0 },
    });
    let node = |cores: i64| {
        let devices = vec![Device { capacity: 1000, free: 1000, classes: u64::MAX }; 2];
        view_for(Arc::new(NodeState { milli_cpu: Some(cores * 1000), memory: None, devices, counters: None }), &mix)
    };
    let loss = |pod: Shape, view: &NodeView| {
        let data = ScoreData { pod, snapshot: mix.clone(), weights: vec![0.0], unit: 1000.0 };
        placement_loss(&data, view).unwrap().0
    };
    let cpu_only = Shape { milli_cpu: 4000, demand: Demand::None, ..shape };
    // 24 cores feed both GPUs; 20 feed 1.82 of them.
    assert!((loss(cpu_only, &node(24)) - 2000.0 * 2.0 / 22.0).abs() < 1e-6);
    // 8 cores feed 0.73 GPU even before: a GPU pod with few cores leaves less to starve
    // there, which earns it nothing.
    let light = Shape { milli_cpu: 1000, ..shape };
    assert_eq!(loss(light, &node(8)), 0.0);
}

#[test]
fn whole_gpu_pods_keep_nodes_with_whole_gpus_for_the_next_ones() {
    let mut c = Cluster::new();
    c.add_node("half", 64, &["T4", "T4"]);
    c.add_node("empty", 64, &["T4", "T4"]);
    c.allocate("half", 0, 1000);
    let p = plugin(&c);
    learn(&p, &mut c, &[(8, None, 2, 10), (8, None, 1, 10)]);
    // A whole GPU on "empty" would break the only place a 2-GPU pod still fits.
    let pod = c.pod(8, None, 1, &[]);
    let s = scores(&p, &c, &pod).unwrap();
    assert_eq!(best(&s), ["half"], "{s:?}");
}

#[test]
fn selectors_make_pods_without_them_avoid_the_devices_others_need() {
    let mut c = Cluster::new();
    c.add_node("t4", 64, &["T4", "T4"]);
    c.add_node("g2", 64, &["G2", "G2"]);
    let p = plugin(&c);
    // Half the pods can only use T4s; a pod that can use anything should leave those alone.
    let t4 = "device.attributes[\"gpu.example.com\"].model == \"T4\"";
    let snapshot = Snapshot::from_node_infos(c.nodes.clone());
    for _ in 0..10 {
        for sel in [&[t4][..], &[]] {
            let pi = c.pod(8, None, 1, sel);
            p.pre_filter(&mut CycleState::new(), &pi, &snapshot);
        }
    }
    let any = c.pod(8, None, 1, &[]);
    let s = scores(&p, &c, &any).unwrap();
    assert_eq!(best(&s), ["g2"], "{s:?}");
    // A T4-only pod scores the G2 node lowest: none of its devices accept it.
    let only_t4 = c.pod(8, None, 1, &[t4]);
    let s = scores(&p, &c, &only_t4).unwrap();
    assert_eq!(best(&s), ["t4"]);
    assert_eq!(s.iter().find(|x| x.0 == "g2").unwrap().1, 0);
}

#[test]
fn node_views_follow_the_nodes_generation() {
    let mut c = Cluster::new();
    c.add_node("a", 64, &["T4"]);
    c.add_node("b", 64, &["T4"]);
    let p = plugin(&c);
    learn(&p, &mut c, &[(4, Some(600), 0, 5), (4, Some(400), 0, 5), (8, None, 1, 5)]);
    let pod = c.pod(4, Some(400), 0, &[]);
    assert_eq!(best(&scores(&p, &c, &pod).unwrap()).len(), 2, "identical nodes tie");
    // 600 of a's GPU is taken: the 400 fills it exactly there, where b would lose its whole
    // GPU. The plugin sees it because a's generation moved.
    c.allocate("a", 0, 600);
    assert_eq!(best(&scores(&p, &c, &pod).unwrap()), ["a"]);
}

/// The order of events in a real cluster: the pod holding a claim is deleted (the node
/// changes then), and only later the resource claim controller deallocates or deletes its
/// claim, which changes no node. The next pod must see the freed GPU at once.
#[test]
fn a_claim_freed_after_its_pod_left_is_seen_by_the_next_pod_at_once() {
    let mut c = Cluster::new();
    c.add_node("a", 64, &["T4"]);
    c.add_node("b", 64, &["T4"]);
    c.allocate("a", 0, 600);
    let p = plugin(&c);
    learn(&p, &mut c, &[(4, Some(600), 0, 5), (4, Some(400), 0, 5), (8, None, 1, 5)]);
    let pod = c.pod(4, Some(400), 0, &[]);
    // The 400 fills what the 600 left on a.
    assert_eq!(best(&scores(&p, &c, &pod).unwrap()), ["a"]);
    // The pod holding the 600 leaves: a's generation moves, its claim is still allocated.
    c.nodes.iter_mut().find(|n| n.name() == "a").unwrap().generation += 1;
    assert_eq!(best(&scores(&p, &c, &pod).unwrap()), ["a"]);
    // Its claim is deleted; no node changes. a and b are alike again: both whole GPUs.
    assert!(c.lister.resource_claims.remove(Some("default"), "used-1").is_some());
    let s = scores(&p, &c, &pod).unwrap();
    assert_eq!(best(&s), ["a", "b"], "the freed GPU must count at once: {s:?}");
    // And the other way: a claim allocated by another scheduler (no node change here) is seen.
    c.lister.resource_claims.upsert(Arc::new(
        serde_json::from_value(
            json!({"metadata": {"name": "other", "namespace": "default", "uid": "other", "resourceVersion": "1"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": CLASS}}]}},
            "status": {"allocation": {"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "b",
                "device": "gpu-0", "shareID": "other", "consumedCapacity": {"milligpu": "600"}}]}}}}),
        )
        .unwrap(),
    ));
    assert_eq!(best(&scores(&p, &c, &pod).unwrap()), ["b"]);
}

/// A claim allocated outside this scheduler: `milli` of `node`'s first GPU, no node changes.
fn claim_elsewhere(c: &Cluster, name: &str, node: &str, milli: i64) {
    c.lister.resource_claims.upsert(Arc::new(
        serde_json::from_value(
            json!({"metadata": {"name": name, "namespace": "default", "uid": name, "resourceVersion": "1"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": CLASS}}]}},
            "status": {"allocation": {"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": node,
                "device": "gpu-0", "shareID": name, "consumedCapacity": {"milligpu": format!("{milli}")}}]}}}}),
        )
        .unwrap(),
    ));
}

/// Free capacity per class and in all.
type Free = (Vec<i64>, i64);

/// The cluster totals as kept, the nodes the last cycle read again, and the same totals
/// counted afresh from every node.
fn totals_and_recount(p: &DeviceFragmentation, c: &Cluster) -> (Free, usize, Free) {
    let snapshot = Snapshot::from_node_infos(c.nodes.clone());
    let allocated = p.dra.allocated();
    let mut learner = p.learner.lock();
    let Learner { devices, totals, .. } = &mut *learner;
    let mut class_free = vec![0; totals.class_free.len()];
    let mut free = 0;
    for ni in snapshot.list() {
        // Asks the tracker, which checks the node's generation and its pools' revisions
        // itself, so a node the totals missed shows here.
        let (state, _) = devices.node_state(&*p.dra, &p.features, ni, &*allocated).unwrap();
        for d in &state.devices {
            free += d.free;
            for (c, f) in class_free.iter_mut().enumerate() {
                if d.classes & (1u64 << c) != 0 {
                    *f += d.free;
                }
            }
        }
    }
    ((totals.class_free.clone(), totals.free_total), totals.last_read, (class_free, free))
}

/// PreScore's cluster totals: each cycle reads again only the nodes that changed (a new
/// generation, an allocation in one of their pools), and the totals stay what counting every
/// node would give.
#[test]
fn cluster_totals_read_only_the_nodes_that_changed() {
    let mut c = Cluster::new();
    for i in 0..12 {
        c.add_node(&format!("n{i}"), 64, &["T4", "A100"][..1 + i % 2]);
    }
    let p = plugin(&c);
    learn(&p, &mut c, &[(4, Some(600), 0, 5), (4, Some(400), 0, 5), (8, None, 1, 5)]);
    let pod = c.pod(4, Some(400), 0, &[]);
    scores(&p, &c, &pod).unwrap();
    let (kept, read, counted) = totals_and_recount(&p, &c);
    assert_eq!((read, &kept), (12, &counted), "the first cycle counts every node");
    assert_eq!(kept.1, 18_000, "18 GPUs free");

    scores(&p, &c, &pod).unwrap();
    let (kept, read, counted) = totals_and_recount(&p, &c);
    assert_eq!((read, &kept), (0, &counted), "nothing changed");

    // An allocation that moves no node: only its pool's record says so.
    claim_elsewhere(&c, "other", "n3", 600);
    scores(&p, &c, &pod).unwrap();
    let (kept, read, counted) = totals_and_recount(&p, &c);
    assert_eq!((read, &kept), (1, &counted));
    assert_eq!(kept.1, 17_400);

    // Freed again, then a pod placed on another node (its generation moves).
    assert!(c.lister.resource_claims.remove(Some("default"), "other").is_some());
    c.allocate("n8", 0, 250);
    scores(&p, &c, &pod).unwrap();
    let (kept, read, counted) = totals_and_recount(&p, &c);
    assert_eq!((read, &kept), (2, &counted));
    assert_eq!(kept.1, 17_750);

    // Another node: everything is read again.
    c.add_node("n12", 64, &["T4"]);
    scores(&p, &c, &pod).unwrap();
    let (kept, read, counted) = totals_and_recount(&p, &c);
    assert_eq!((read, &kept), (13, &counted));
    assert_eq!(kept.1, 18_750);
}

/// A slice of `devices` for `node` in pool `pool` of `count` slices.
fn slice(node: &str, pool: &str, count: i64, devices: Value) -> Arc<ResourceSlice> {
    Arc::new(
        serde_json::from_value(json!({"metadata": {"name": format!("{node}-{pool}-{}", devices[0]["name"].as_str().unwrap())},
            "spec": {"driver": DRIVER, "nodeName": node, "pool": {"name": pool, "generation": 1, "resourceSliceCount": count},
                     "devices": devices}}))
        .unwrap(),
    )
}

/// The measure counts the devices allocation would give: not a device whose taint keeps pods
/// off, not the devices of a pool whose slices are not all published, and shares rounded up
/// by the device's request policy.
#[test]
fn the_device_model_is_the_allocators() {
    let mut c = Cluster::new();
    c.add_node("tainted", 64, &[]);
    c.add_node("incomplete", 64, &[]);
    c.add_node("stepped", 64, &[]);
    c.add_node("plain", 64, &["T4"]);
    // Every GPU here takes shares in steps of 250.
    let gpu = |name: &str, extra: Value| {
        let mut d = json!({"name": name, "allowMultipleAllocations": true,
            "attributes": {"model": {"string": "T4"}}, "capacity": {"milligpu": {"value": "1000",
                "requestPolicy": {"validRange": {"min": "250", "step": "250"}}}}});
        for (k, v) in extra.as_object().unwrap() {
            d[k] = v.clone();
        }
        d
    };
    c.lister.resource_slices.upsert(slice(
        "tainted",
        "tainted",
        1,
        json!([gpu("gpu-0", json!({"taints": [{"key": "broken", "effect": "NoSchedule"}]})), gpu("gpu-1", json!({}))]),
    ));
    c.lister.resource_slices.upsert(slice("incomplete", "incomplete", 2, json!([gpu("gpu-0", json!({}))])));
    c.lister.resource_slices.upsert(slice("stepped", "stepped", 1, json!([gpu("gpu-0", json!({}))])));
    let p = plugin(&c);
    learn(&p, &mut c, &[(1, Some(300), 0, 4)]);
    let pod = c.pod(1, Some(300), 0, &[]);
    scores(&p, &c, &pod).unwrap();
    let learner = p.learner.lock();
    let node = |n: &str| learner.devices.read_state(n).unwrap();
    assert_eq!(node("tainted").devices.len(), 1, "the NoSchedule-tainted GPU is not counted");
    assert!(node("incomplete").devices.is_empty(), "a pool with one of its two slices published is not usable");
    assert_eq!(node("plain").devices.len(), 1);
    // 300 under a 250-step policy takes 500: two copies per GPU, as allocation would give.
    let shapes = &learner.mix.snapshot().shapes;
    assert_eq!(shapes.iter().map(|(s, _)| s.demand).collect::<Vec<_>>(), [Demand::Share(500)]);
    assert_eq!(measure::usable(&node("stepped"), &shapes[0].0), 1000);
}

#[test]
fn pods_outside_the_model_are_left_to_the_other_plugins() {
    let mut c = Cluster::new();
    c.add_node("a", 64, &["T4"]);
    let p = plugin(&c);
    learn(&p, &mut c, &[(4, Some(500), 0, 3)]);
    // Two shares in one pod: not a shape the measure knows.
    let mut pi = c.pod(1, Some(300), 2, &[]);
    assert_eq!(scores(&p, &c, &pi), None);
    // A pod whose claim is missing.
    let mut spec = (*pi.pod).clone();
    spec.spec.as_mut().unwrap().resource_claims.as_mut().unwrap()[0].resource_claim_name = Some("missing".into());
    pi = pod_info(spec);
    assert_eq!(scores(&p, &c, &pi), None);
}

#[test]
fn without_the_device_class_the_plugin_skips() {
    let mut c = Cluster::new();
    c.add_node("a", 64, &["T4"]);
    c.lister.device_classes.remove(None, CLASS);
    let p = plugin(&c);
    let pod = c.pod(1, Some(500), 0, &[]);
    assert_eq!(scores(&p, &c, &pod), None);
}

#[test]
fn normalize_keeps_the_best_node_alone_at_the_top() {
    // Upstream's linear scaling would give 100 to both of the first two (within 1%).
    let mut s = vec![-1000, -1003, -101_000, -50_000];
    normalize(&mut s);
    assert_eq!(s, [100, 98, 0, 50]);
    // A node the pod does not fit gets 0 and leaves the others spread over the scale, as
    // without it (it would have squeezed them all into 98-99).
    let mut with_unfit = vec![-1000, -1003, -101_000, -50_000, DOES_NOT_FIT];
    normalize(&mut with_unfit);
    assert_eq!(with_unfit, [100, 98, 0, 50, 0]);
    let mut none_fit = vec![DOES_NOT_FIT, DOES_NOT_FIT];
    normalize(&mut none_fit);
    assert_eq!(none_fit, [0, 0]);
    let mut same = vec![-5, -5];
    normalize(&mut same);
    assert_eq!(same, [100, 100]);
    let mut tie = vec![-5, -5, -9];
    normalize(&mut tie);
    assert_eq!(tie, [100, 100, 0]);
}

#[test]
fn registered_in_tree_with_strict_args() {
    let handle = Handle::for_tests();
    let r = crate::in_tree_registry();
    let factory = r.get(names::DEVICE_FRAGMENTATION).expect("registered");
    let p = factory(Some(&json!({"deviceClassName": CLASS})), &handle).unwrap();
    assert_eq!(p.name(), "DeviceFragmentation");
    assert!(p.as_pre_filter().is_some() && p.as_pre_score().is_some() && p.as_score().is_some());
    assert!(p.as_filter().is_none(), "it never rejects a node");
    let err = factory(Some(&json!({})), &handle).err().unwrap();
    assert_eq!(err, "deviceClassName: Required value: the DeviceClass of the measured devices");
}

/// A DeviceClass for the whole GPUs of [`partitionable_node`] only (their partitions are
/// published in the same pool but not measured).
const WHOLE_CLASS: &str = "whole-gpu.example.com";

/// Publishes one partitionable GPU on `node` (KEP-4815): a counter set `gpu-0` of 80Gi of
/// memory, the whole GPU (1000 milligpu, shareable when `shareable`) drawing all of it, and
/// partitions of 10Gi and 40Gi drawing their part, listed in that order. Adds [`WHOLE_CLASS`].
fn partitionable_node(c: &mut Cluster, node: &str, shareable: bool) {
    c.add_node(node, 64, &[]);
    let part = |name: &str, memory: &str, extra: Value| {
        let mut d = json!({"name": name, "attributes": {"part": {"string": name}},
            "consumesCounters": [{"counterSet": "gpu-0", "counters": {"memory": {"value": memory}}}]});
        for (k, v) in extra.as_object().unwrap() {
            d[k] = v.clone();
        }
        d
    };
    let devices = json!([
        part(
            "whole",
            "80Gi",
            json!({"allowMultipleAllocations": shareable, "capacity": {"milligpu": {"value": "1000"}}})
        ),
        part("p10", "10Gi", json!({})),
        part("p40", "40Gi", json!({})),
    ]);
    c.lister.resource_slices.upsert(Arc::new(
        serde_json::from_value(json!({"metadata": {"name": format!("{node}-counters")},
            "spec": {"driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 2},
                     "sharedCounters": [{"name": "gpu-0", "counters": {"memory": {"value": "80Gi"}}}]}}))
        .unwrap(),
    ));
    c.lister.resource_slices.upsert(slice(node, node, 2, devices));
    c.lister.device_classes.upsert(Arc::new(
        serde_json::from_value(json!({"metadata": {"name": WHOLE_CLASS},
            "spec": {"selectors": [{"cel": {"expression": "device.attributes[\"gpu.example.com\"].part == \"whole\""}}]}}))
        .unwrap(),
    ));
}

/// Records an allocation of `device` on `node` for a claim `name`: exclusive, or a share of
/// `milli` milligpu.
fn allocate_device(c: &mut Cluster, name: &str, node: &str, device: &str, milli: Option<i64>) {
    let mut result = json!({"request": "gpu", "driver": DRIVER, "pool": node, "device": device});
    if let Some(m) = milli {
        result["shareID"] = json!(name);
        result["consumedCapacity"] = json!({"milligpu": format!("{m}")});
    }
    c.lister.resource_claims.upsert(Arc::new(
        serde_json::from_value(
            json!({"metadata": {"name": name, "namespace": "default", "uid": name, "resourceVersion": "1"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": CLASS}}]}},
            "status": {"allocation": {"devices": {"results": [result]}}}}),
        )
        .unwrap(),
    ));
    c.nodes.iter_mut().find(|n| n.name() == node).unwrap().generation += 1;
}

/// Whether the allocator itself would give a claim for one device `part` of `node` now.
fn allocator_gives(p: &DeviceFragmentation, c: &Cluster, node: &str, part: &str) -> bool {
    use ksched_dra::allocator::{Allocator, DeviceClassLister};
    let dra = p.dra.clone();
    let classes: Arc<dyn DeviceClassLister> = Arc::new(move |n: &str| dra.device_class(n));
    let allocator = Allocator::with_index(p.features, p.dra.allocated(), classes, p.dra.slice_index(), p.dra.cel());
    let claim: ResourceClaim = serde_json::from_value(json!({"metadata": {"name": "probe", "namespace": "default", "uid": "probe"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": CLASS, "allocationMode": "ExactCount", "count": 1,
            "selectors": [{"cel": {"expression": format!("device.attributes[\"gpu.example.com\"].part == \"{part}\"")}}]}}]}}}))
    .unwrap();
    let ni = c.nodes.iter().find(|n| n.name() == node).unwrap();
    allocator.fits(ni.node().unwrap(), &[&claim], None).unwrap().is_some()
}

/// Partitions of one GPU draw on its shared counters: what one of them takes, the others can
/// no longer have. The measure sees a device as free only when allocation could give it now,
/// both when it measures the whole GPU and its partitions (devices claimed whole) and when it
/// measures the whole GPU alone, shared by capacity, with the partitions out of its class.
#[test]
fn shared_counters_decide_which_partitions_are_free() {
    struct Case {
        name: &'static str,
        /// Claims allocated: device and, for a share, its milligpu.
        allocated: &'static [(&'static str, Option<i64>)],
        /// Free per device [whole, p10, p40], measured whole (no capacity configured).
        whole_devices: [i64; 3],
        /// Free milligpu of the whole GPU, measured alone by capacity.
        shared_gpu: i64,
    }
    let cases = [
        Case { name: "nothing allocated", allocated: &[], whole_devices: [1, 1, 1], shared_gpu: 1000 },
        Case { name: "the 10Gi partition", allocated: &[("p10", None)], whole_devices: [0, 0, 1], shared_gpu: 0 },
        Case { name: "the 40Gi partition", allocated: &[("p40", None)], whole_devices: [0, 1, 0], shared_gpu: 0 },
        Case {
            name: "both partitions",
            allocated: &[("p10", None), ("p40", None)],
            whole_devices: [0, 0, 0],
            shared_gpu: 0,
        },
        Case {
            name: "a share of the whole GPU",
            allocated: &[("whole", Some(300))],
            whole_devices: [0, 0, 0],
            shared_gpu: 700,
        },
        Case {
            name: "the whole GPU, exclusively",
            allocated: &[("whole", None)],
            whole_devices: [0, 0, 0],
            shared_gpu: 0,
        },
    ];
    for case in &cases {
        let mut c = Cluster::new();
        partitionable_node(&mut c, "part", true);
        for (i, (device, milli)) in case.allocated.iter().enumerate() {
            allocate_device(&mut c, &format!("used-{i}"), "part", device, *milli);
        }
        let free_of = |p: &DeviceFragmentation, c: &Cluster| {
            let mut learner = p.learner.lock();
            let Learner { mix, devices, .. } = &mut *learner;
            assert!(devices.refresh(&*p.dra, mix.classes()));
            let ni = c.nodes.iter().find(|n| n.name() == "part").unwrap();
            let (state, _) = devices.node_state(&*p.dra, &p.features, ni, &*p.dra.allocated()).unwrap();
            state.devices.iter().map(|d| d.free).collect::<Vec<_>>()
        };

        let whole = plugin_with(&c, json!({"deviceClassName": CLASS}));
        assert_eq!(free_of(&whole, &c), case.whole_devices, "{}: devices measured whole", case.name);
        for (part, free) in ["whole", "p10", "p40"].iter().zip(case.whole_devices) {
            assert_eq!(allocator_gives(&whole, &c, "part", part), free > 0, "{}: the allocator on {part}", case.name);
        }

        let shared = plugin_with(&c, json!({"deviceClassName": WHOLE_CLASS, "capacity": "milligpu"}));
        assert_eq!(free_of(&shared, &c), [case.shared_gpu], "{}: the shared GPU alone", case.name);
    }
}

/// A node whose partitionable GPU has a partition allocated has only what the counters leave:
/// a pod for one device fills it there, where a node with two free GPUs would lose the only
/// place a 2-device pod fits.
#[test]
fn a_gpu_with_a_partition_taken_is_not_a_free_gpu() {
    let mut c = Cluster::new();
    partitionable_node(&mut c, "part", true);
    c.add_node("plain", 64, &["T4", "T4"]);
    allocate_device(&mut c, "used-p10", "part", "p10", None);
    let p = plugin_with(&c, json!({"deviceClassName": CLASS}));
    learn(&p, &mut c, &[(8, None, 1, 10), (8, None, 2, 10)]);
    let pod = c.pod(8, None, 1, &[]);
    let s = scores(&p, &c, &pod).unwrap();
    assert_eq!(best(&s), ["part"], "{s:?}");
}

/// Taking the whole device of a partitionable GPU takes its partitions with it: on a fresh
/// one, the first device listed (the whole GPU, which the allocator gives a claim for one
/// device) costs all three, where a node with two plain GPUs loses one GPU and a 2-GPU slot.
/// Whole devices picked together must fit in the counters together, as allocation finds them.
/// (The whole GPU is not shareable here: when the search backs out of a shareable device it
/// keeps that device's counters taken, upstream's allocator as ours, so a claim for two devices
/// would get none; the measure does not copy that, and Filter has the last word.)
#[test]
fn taking_a_whole_partitionable_gpu_takes_its_partitions() {
    let mut c = Cluster::new();
    partitionable_node(&mut c, "part", false);
    c.add_node("plain", 64, &["T4", "T4"]);
    let p = plugin_with(&c, json!({"deviceClassName": CLASS}));
    learn(&p, &mut c, &[(8, None, 1, 10), (8, None, 2, 10)]);
    let pod = c.pod(8, None, 1, &[]);
    let s = scores(&p, &c, &pod).unwrap();
    assert_eq!(best(&s), ["plain"], "{s:?}");

    let state = p.learner.lock().devices.read_state("part").unwrap();
    let two = Shape { milli_cpu: 0, memory: 0, demand: Demand::Whole(2), class: 0 };
    assert_eq!(measure::chosen_devices(&state, &two), Some(vec![1, 2]), "the partitions, not the whole GPU");
    let one = Shape { demand: Demand::Whole(1), ..two };
    assert_eq!(measure::chosen_devices(&state, &one), Some(vec![0]));
    assert_eq!(measure::lost_with(&state, &[0]), [1, 2]);
    assert_eq!(measure::lost_with(&state, &[2]), [0], "10Gi still fit beside 40Gi");
    assert_eq!(measure::lost_with(&state, &[1, 2]), [0]);
    let three = Shape { demand: Demand::Whole(3), ..two };
    assert_eq!(measure::chosen_devices(&state, &three), None);
    // The allocator agrees.
    let dra = p.dra.clone();
    let classes: Arc<dyn ksched_dra::allocator::DeviceClassLister> = Arc::new(move |n: &str| dra.device_class(n));
    let allocator = ksched_dra::allocator::Allocator::with_index(
        p.features,
        p.dra.allocated(),
        classes,
        p.dra.slice_index(),
        p.dra.cel(),
    );
    let ni = c.nodes.iter().find(|n| n.name() == "part").unwrap();
    let given = |count: i64| {
        let claim: ResourceClaim = serde_json::from_value(json!({"metadata": {"name": "probe", "namespace": "default", "uid": "probe"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": CLASS, "allocationMode": "ExactCount", "count": count}}]}}}))
        .unwrap();
        let r = allocator.allocate(ni.node().unwrap(), &[&claim], None).unwrap()?;
        Some(r[0].devices.as_ref().unwrap().results.iter().flatten().map(|d| d.device.clone()).collect::<Vec<_>>())
    };
    assert_eq!(given(1), Some(vec!["whole".to_string()]));
    assert_eq!(given(2), Some(vec!["p10".to_string(), "p40".to_string()]));
    assert_eq!(given(3), None);
}
