//! The memo's contract, checked: the evaluation memo ([`ksched_framework::memo`]) may never change
//! a decision. [`run`] builds a random cluster, configuration and pod sequence from a stream of
//! choices, schedules every pod twice, on two identical clusters with the memo on and off, and
//! returns the first pod whose outcome differs: the node, the evaluated and feasible counts, every
//! plugin's score on every node, or the FailedScheduling message, the plugins it names and the
//! nomination that preemption made (a FailedScheduling event says exactly that message; a
//! Scheduled event names the node).
//!
//! The inputs are drawn from small palettes on purpose: the memo can only go wrong when two pods
//! differ in something a node-local plugin reads yet get the same key, so the generator makes pods
//! that differ in one detail (a port's protocol or host IP, a container without requests, an image
//! repeated in an init container or an image volume) and schedules them close together. The unit
//! tests run thousands of seeded sequences; the `memo` fuzz target drives the same generator with
//! the fuzzer's bytes.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use k8s_openapi::api::core::v1 as api;
use ksched_framework::handle::{NoClient, NoopMetrics, NoopRecorder};
use ksched_framework::listers::MemoryLister;
use ksched_framework::{CycleState, PodInfo, Snapshot};
use serde_json::{json, Value};

use super::{BatchCycle, NominatedPods, ScheduleError, SchedulingAlgorithm};
use crate::cache::Cache;
use crate::scheduler::Profile;

/// A source of choices: a seeded generator in tests, the fuzzer's bytes in the fuzz target.
pub trait Choices {
    /// A number in `0..n` (`n` > 0).
    fn below(&mut self, n: usize) -> usize;
}

/// Choices from a seeded random generator.
pub struct Seeded(rand::rngs::StdRng);

impl Seeded {
    /// The choices of seed `seed`.
    pub fn new(seed: u64) -> Self {
        Seeded(rand::SeedableRng::seed_from_u64(seed))
    }
}

impl Choices for Seeded {
    fn below(&mut self, n: usize) -> usize {
        rand::Rng::random_range(&mut self.0, 0..n)
    }
}

/// Choices read from bytes, two at a time; zeros once they run out, so every input is a valid
/// (and, past its end, the simplest) sequence.
pub struct Bytes<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Bytes<'a> {
    /// Choices from `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Bytes { data, at: 0 }
    }

    /// True when every byte was read.
    pub fn exhausted(&self) -> bool {
        self.at >= self.data.len()
    }
}

impl Choices for Bytes<'_> {
    fn below(&mut self, n: usize) -> usize {
        let mut v = 0usize;
        for _ in 0..2 {
            v = v << 8 | usize::from(self.data.get(self.at).copied().unwrap_or(0));
            self.at += 1;
        }
        v % n
    }
}

fn pick<'a, T>(c: &mut dyn Choices, items: &'a [T]) -> &'a T {
    &items[c.below(items.len())]
}

fn chance(c: &mut dyn Choices, percent: usize) -> bool {
    c.below(100) < percent
}

/// How big a sequence [`run`] makes.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Most nodes in a small cluster; one sequence in eight has 100 to 160 nodes instead, where
    /// `percentageOfNodesToScore` below 100 makes the walk stop early.
    pub max_nodes: usize,
    /// Scheduling steps (attempts, retries of failed pods included).
    pub steps: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_nodes: 24, steps: 40 }
    }
}

/// What a passing sequence did, so that callers can check the runs exercised something.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stats {
    /// Pods placed.
    pub placed: usize,
    /// Attempts that found no node.
    pub failed: usize,
    /// Attempts that took at least one node's result from the memo.
    pub memo_hits: usize,
}

/// The first difference between the two runs.
#[derive(Debug, Clone)]
pub struct Mismatch {
    /// Scheduling step.
    pub step: usize,
    /// The pod, as JSON.
    pub pod: String,
    /// Outcome with the memo.
    pub with_memo: String,
    /// Outcome without it.
    pub without_memo: String,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "step {}: pod {}\n  with the memo:    {}\n  without the memo: {}",
            self.step, self.pod, self.with_memo, self.without_memo
        )
    }
}

const ZONES: [&str; 3] = ["a", "b", "c"];
const TIERS: [&str; 2] = ["web", "batch"];
/// Image references as pods write them: tagged, untagged (`:latest`), and one tag written twice.
const POD_IMAGES: [&str; 5] =
    ["registry.k8s.io/app:1", "registry.k8s.io/app", "registry.k8s.io/db:2", "docker.io/library/big:3", "busybox"];
/// Image names as the kubelet reports them.
const NODE_IMAGES: [&str; 5] = [
    "registry.k8s.io/app:1",
    "registry.k8s.io/app:latest",
    "registry.k8s.io/db:2",
    "docker.io/library/big:3",
    "busybox:latest",
];
const IMAGE_SIZES: [i64; 4] = [10_000_000, 300_000_000, 900_000_000, 2_000_000_000];
const PROFILES: [&str; 3] = ["default-scheduler", "packer", "tuned"];

/// The configuration: the default profile and two with other plugin args and weights; the
/// global and per-profile `percentageOfNodesToScore` vary.
fn config(c: &mut dyn Choices) -> crate::config::KubeSchedulerConfiguration {
    let percentage = *pick(c, &[0, 100, 10, 30, 50]);
    let packer_percentage = *pick(c, &[None, Some(20), Some(100)]);
    let parallelism = *pick(c, &[1, 2, 16]);
    let strategy = *pick(c, &["MostAllocated", "RequestedToCapacityRatio", "LeastAllocated"]);
    let mut scoring = json!({"type": strategy, "resources": [{"name": "cpu", "weight": 1},
        {"name": "memory", "weight": 2}, {"name": "example.com/foo", "weight": 3}]});
    if strategy == "RequestedToCapacityRatio" {
        scoring["requestedToCapacityRatio"] =
            json!({"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]});
    }
    let mut packer = json!({
        "schedulerName": "packer",
        "pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": scoring}}],
    });
    if let Some(p) = packer_percentage {
        packer["percentageOfNodesToScore"] = json!(p);
    }
    let tuned = json!({
        "schedulerName": "tuned",
        "plugins": {"score": {"enabled": [{"name": "ImageLocality", "weight": 5}, {"name": "TaintToleration", "weight": 7}]}},
        "pluginConfig": [
            {"name": "NodeResourcesBalancedAllocation", "args": {"resources": [
                {"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}, {"name": "ephemeral-storage", "weight": 1}]}},
            {"name": "NodeAffinity", "args": {"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 3, "preference": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["web"]}]}}]}}},
        ],
    });
    let cfg = json!({
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "percentageOfNodesToScore": percentage,
        "parallelism": parallelism,
        "profiles": [{"schedulerName": "default-scheduler"}, packer, tuned],
    });
    crate::config::load_config(cfg.to_string().as_bytes(), "memo_check").expect("the generated configuration is valid")
}

fn node(c: &mut dyn Choices, name: &str) -> api::Node {
    let cpu = *pick(c, &[1, 2, 4, 8]);
    let mut taints = vec![];
    if chance(c, 15) {
        taints.push(json!({"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}));
    }
    if chance(c, 25) {
        taints.push(json!({"key": "spot", "effect": "PreferNoSchedule"}));
    }
    if chance(c, 10) {
        taints.push(json!({"key": "maintenance", "value": *pick(c, &["soon", "now"]), "effect": "PreferNoSchedule"}));
    }
    let mut images = vec![];
    for (i, img) in NODE_IMAGES.iter().enumerate() {
        if chance(c, 30) {
            let size = *pick(c, &IMAGE_SIZES);
            // A digest name beside the tag, as the kubelet lists them.
            images.push(json!({"names": [format!("registry.k8s.io/x@sha256:{i}"), img], "sizeBytes": size}));
        }
    }
    let mut allocatable = json!({
        "cpu": cpu.to_string(),
        "memory": format!("{}Gi", *pick(c, &[2, 4, 16])),
        "pods": pick(c, &["4", "16", "110"]).to_string(),
        "ephemeral-storage": pick(c, &["1Gi", "10Gi"]).to_string(),
    });
    if chance(c, 40) {
        allocatable["example.com/foo"] = json!(pick(c, &["1", "4"]).to_string());
    }
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "zone": *pick(c, &ZONES),
            "tier": *pick(c, &TIERS)}},
        "spec": {"unschedulable": chance(c, 5), "taints": taints},
        "status": {"allocatable": allocatable.clone(), "capacity": allocatable, "images": images},
    }))
    .expect("a valid node")
}

fn requests(c: &mut dyn Choices) -> Value {
    match c.below(6) {
        0 | 1 => json!({}),
        2 => json!({"requests": {"cpu": *pick(c, &["100m", "250m", "1"])}}),
        3 => json!({"requests": {"memory": *pick(c, &["128Mi", "1Gi"])}}),
        4 => json!({"requests": {"cpu": *pick(c, &["100m", "1"]), "memory": *pick(c, &["200Mi", "2Gi"]),
            "ephemeral-storage": "500Mi"}}),
        _ => json!({"requests": {"cpu": "250m", "memory": "512Mi", "example.com/foo": "1"},
            "limits": {"example.com/foo": "1"}}),
    }
}

fn ports(c: &mut dyn Choices) -> Value {
    let n = *pick(c, &[0, 0, 0, 0, 1, 1, 2]);
    let ports: Vec<Value> = (0..n)
        .map(|_| {
            let mut p = json!({"containerPort": 80, "hostPort": *pick(c, &[8080, 8080, 8081, 0])});
            if let Some(proto) = pick(c, &[None, Some("TCP"), Some("UDP"), Some("SCTP")]) {
                p["protocol"] = json!(proto);
            }
            if let Some(ip) = pick(c, &[None, None, Some(""), Some("127.0.0.1"), Some("10.0.0.1"), Some("0.0.0.0")]) {
                p["hostIP"] = json!(ip);
            }
            p
        })
        .collect();
    Value::Array(ports)
}

fn container(c: &mut dyn Choices, name: String) -> Value {
    json!({"name": name, "image": *pick(c, &POD_IMAGES), "resources": requests(c), "ports": ports(c)})
}

/// A workload's pod spec from palettes (the sequence makes several pods of each, and variants
/// that differ in one detail).
fn template(c: &mut dyn Choices) -> Value {
    let mut spec = json!({
        "schedulerName": *pick(c, &PROFILES),
        "priority": *pick(c, &[0, 0, 100, 1000]),
        "containers": (0..*pick(c, &[1, 1, 1, 2, 3])).map(|i| container(c, format!("c{i}"))).collect::<Vec<_>>(),
    });
    if chance(c, 30) {
        spec["initContainers"] = init_containers(c);
    }
    let mut volumes = vec![];
    if chance(c, 20) {
        volumes.push(json!({"name": "img", "image": {"reference": *pick(c, &POD_IMAGES)}}));
    }
    if chance(c, 15) {
        volumes.push(json!({"name": "scratch", "emptyDir": {}}));
    }
    if chance(c, 10) {
        volumes.push(json!({"name": "conf", "configMap": {"name": "conf"}}));
    }
    if chance(c, 5) {
        volumes.push(json!({"name": "data", "hostPath": {"path": "/data"}}));
    }
    if !volumes.is_empty() {
        spec["volumes"] = json!(volumes);
    }
    if chance(c, 15) {
        spec["overhead"] = json!({"cpu": "100m", "memory": *pick(c, &["64Mi", "128Mi"])});
    }
    if chance(c, 10) {
        spec["resources"] = json!({"requests": {"cpu": *pick(c, &["500m", "2"]), "memory": "1Gi"}});
    }
    let mut tolerations = vec![];
    if chance(c, 25) {
        tolerations.push(json!({"key": "dedicated", "operator": *pick(c, &["Equal", "Exists"]), "value": "gpu",
            "effect": *pick(c, &["NoSchedule", "PreferNoSchedule"])}));
    }
    if chance(c, 20) {
        tolerations.push(json!({"key": *pick(c, &["spot", "maintenance"]), "operator": "Exists"}));
    }
    if chance(c, 5) {
        tolerations.push(json!({"operator": "Exists"}));
    }
    if chance(c, 5) {
        tolerations
            .push(json!({"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}));
    }
    if !tolerations.is_empty() {
        spec["tolerations"] = json!(tolerations);
    }
    if chance(c, 15) {
        spec["nodeSelector"] = json!({*pick(c, &["tier", "zone"]): *pick(c, &["web", "a"])});
    }
    let mut affinity = json!({});
    if chance(c, 15) {
        affinity["nodeAffinity"] = match c.below(3) {
            0 => json!({"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": [*pick(c, &ZONES), "b"]}]}]}}),
            1 => json!({"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": *pick(c, &[1, 5, 50]), "preference": {"matchExpressions": [
                    {"key": "zone", "operator": "In", "values": [*pick(c, &ZONES)]}]}}]}),
            _ => json!({"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 5, "preference": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["batch"]}]}},
                {"weight": *pick(c, &[5, 20]), "preference": {"matchExpressions": [
                    {"key": "zone", "operator": "NotIn", "values": ["c"]}]}}]}),
        };
    }
    if chance(c, 8) {
        let key = *pick(c, &["zone", "kubernetes.io/hostname"]);
        let term = json!({"labelSelector": {"matchLabels": {"app": *pick(c, &["a", "b"])}}, "topologyKey": key});
        affinity[*pick(c, &["podAffinity", "podAntiAffinity"])] = if chance(c, 50) {
            json!({"requiredDuringSchedulingIgnoredDuringExecution": [term]})
        } else {
            json!({"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10, "podAffinityTerm": term}]})
        };
    }
    if affinity.as_object().is_some_and(|a| !a.is_empty()) {
        spec["affinity"] = affinity;
    }
    if chance(c, 8) {
        spec["topologySpreadConstraints"] = json!([{"maxSkew": 1, "topologyKey": *pick(c, &["zone", "kubernetes.io/hostname"]),
            "whenUnsatisfiable": *pick(c, &["DoNotSchedule", "ScheduleAnyway"]),
            "labelSelector": {"matchLabels": {"app": *pick(c, &["a", "b"])}}}]);
    }
    json!({"metadata": {"namespace": *pick(c, &["default", "team"]), "labels": {"app": *pick(c, &["a", "b", "c"])}},
        "spec": spec})
}

fn init_containers(c: &mut dyn Choices) -> Value {
    let inits: Vec<Value> = (0..*pick(c, &[1, 2]))
        .map(|i| {
            let mut init = container(c, format!("init{i}"));
            if chance(c, 50) {
                init["restartPolicy"] = json!("Always");
            }
            init
        })
        .collect();
    json!(inits)
}

/// `t` with one detail changed: what the memo's key must tell apart from `t`.
fn variant(c: &mut dyn Choices, t: &Value) -> Value {
    let mut t = t.clone();
    let spec = &mut t["spec"];
    let n = spec["containers"].as_array().map_or(0, Vec::len);
    let k = c.below(n.max(1));
    match c.below(11) {
        0 => spec["containers"][k]["ports"] = ports(c),
        1 => spec["containers"][k]["resources"] = requests(c),
        2 => spec["containers"][k]["image"] = json!(*pick(c, &POD_IMAGES)),
        3 => {
            let extra = container(c, format!("c{n}"));
            if let Some(list) = spec["containers"].as_array_mut() {
                list.push(extra);
            }
        }
        4 => spec["initContainers"] = if spec["initContainers"].is_null() { init_containers(c) } else { Value::Null },
        5 => {
            let img = json!({"name": "img", "image": {"reference": *pick(c, &POD_IMAGES)}});
            match spec["volumes"].as_array_mut() {
                Some(v) => v.push(img),
                None => spec["volumes"] = json!([img]),
            }
        }
        6 => {
            spec["overhead"] =
                if spec["overhead"].is_null() { json!({"cpu": "100m", "memory": "64Mi"}) } else { Value::Null }
        }
        7 => {
            spec["resources"] = if spec["resources"].is_null() {
                json!({"requests": {"cpu": "1", "memory": "1Gi"}})
            } else {
                Value::Null
            }
        }
        8 => {
            spec["tolerations"] = json!([{"key": *pick(c, &["dedicated", "spot"]), "operator": "Exists",
                "effect": *pick(c, &["NoSchedule", "PreferNoSchedule"])}])
        }
        9 => spec["nodeSelector"] = if spec["nodeSelector"].is_null() { json!({"zone": "a"}) } else { Value::Null },
        _ => spec["priority"] = json!(*pick(c, &[0, 100, 1000])),
    }
    t
}

/// A pod of `t` named `name`.
fn pod(t: &Value, name: &str) -> api::Pod {
    let mut p = t.clone();
    p["metadata"]["name"] = json!(name);
    p["metadata"]["uid"] = json!(name);
    strip_nulls(&mut p);
    serde_json::from_value(p).expect("a valid pod")
}

fn strip_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, v| !v.is_null());
            m.values_mut().for_each(strip_nulls);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

/// Where a cycle left its pod.
enum Placed {
    On(String),
    /// Unschedulable, and preemption nominated it to this node.
    Nominated(String),
    Nowhere,
}

/// One cluster and the scheduler's pure parts scheduling on it.
struct Side {
    profiles: HashMap<String, Profile>,
    cache: Cache,
    snapshot: Snapshot,
    alg: SchedulingAlgorithm,
    /// Pods nominated by preemption, with their node.
    nominated: Vec<(Arc<PodInfo>, String)>,
    cycle: u64,
}

impl Side {
    fn new(cfg: &crate::config::KubeSchedulerConfiguration, memo: bool) -> Self {
        let profiles = crate::app::build_profiles_with_metrics(
            cfg,
            &ksched_plugins::in_tree_registry(),
            Arc::new(NoClient),
            &|_| Arc::new(NoopRecorder),
            Arc::new(MemoryLister::default()),
            Arc::new(OnceLock::new()),
            ksched_framework::handle::thread_spawner(),
            Arc::new(NoopMetrics),
            &[],
        )
        .expect("the generated profiles build");
        for p in profiles.values() {
            p.framework.set_memo(memo);
        }
        let alg = SchedulingAlgorithm {
            percentage_of_nodes_to_score: cfg.percentage_of_nodes_to_score.unwrap_or(0),
            ..Default::default()
        };
        Side { profiles, cache: Cache::new(), snapshot: Snapshot::default(), alg, nominated: vec![], cycle: 0 }
    }

    /// One scheduling cycle as the scheduling loop runs it (batching hint, nominated pods,
    /// PostFilter on failure); a placed pod is bound in the cache. The outcome as text, and the
    /// node when placed.
    fn schedule(&mut self, p: &api::Pod, sampled: bool) -> (String, Placed) {
        self.cache.update_snapshot(&mut self.snapshot).expect("snapshot");
        let name = p.spec.as_ref().and_then(|s| s.scheduler_name.clone()).unwrap_or_default();
        let profile = self.profiles[&name].clone();
        let fw = &profile.framework;
        let pi = PodInfo::new(Arc::new(p.into()));
        let mut state = CycleState::new();
        state.record_plugin_metrics = sampled;
        let nominated: NominatedPods = {
            let mut by_node = NominatedPods::new();
            for (n, node) in &self.nominated {
                if n.uid() != pi.uid() && n.priority() >= pi.priority() && self.snapshot.index.contains_key(node) {
                    by_node.entry(node.clone()).or_default().push(n.clone());
                }
            }
            by_node
        };
        self.cycle += 1;
        let signature = fw.batching().then(|| fw.sign_pod(&pi)).flatten();
        let batch = fw.batching().then_some(BatchCycle { signature: signature.as_ref(), cycle: self.cycle });
        let r = self.alg.schedule_queued_pod(
            fw,
            profile.percentage_of_nodes_to_score,
            &mut state,
            &pi,
            &self.snapshot,
            &nominated,
            batch,
        );
        match r {
            Ok(r) => {
                self.nominated.retain(|(n, _)| n.uid() != pi.uid());
                let mut bound = p.clone();
                bound.spec.as_mut().expect("spec").node_name = Some(r.suggested_host.clone());
                self.cache.add_pod(Arc::new((&bound).into())).expect("bind");
                let scores = r.scores.map(|s| (s.plugin_names, s.scores, s.totals));
                let text = format!("{} of {}/{} {scores:?}", r.suggested_host, r.feasible_nodes, r.evaluated_nodes);
                (text, Placed::On(r.suggested_host))
            }
            Err(ScheduleError::Fit(mut fe)) => {
                let mut nominated = None;
                if fw.has_post_filter_plugins() {
                    let (res, st) = fw.run_post_filter(&mut state, &pi, &self.snapshot, &fe.diagnosis.node_to_status);
                    fe.diagnosis.post_filter_msg = st.message();
                    nominated = res.and_then(|r| r.nominating_info).map(|n| n.nominated_node_name);
                }
                self.nominated.retain(|(n, _)| n.uid() != pi.uid());
                if let Some(node) = nominated.clone().filter(|n| !n.is_empty()) {
                    self.nominated.push((Arc::new(pi.clone()), node));
                }
                let mut plugins: Vec<_> = fe.diagnosis.unschedulable_plugins.iter().cloned().collect();
                plugins.sort();
                let outcome = nominated.clone().filter(|n| !n.is_empty()).map_or(Placed::Nowhere, Placed::Nominated);
                (format!("{} {plugins:?} nominated {nominated:?}", fe.message()), outcome)
            }
            Err(e) => (format!("error: {}", e.message()), Placed::Nowhere),
        }
    }
}

fn memo_hits(side: &Side) -> u64 {
    side.profiles.values().map(|p| p.framework.memo_reused()).sum()
}

/// Schedules one random sequence with the memo on and off; the first difference, if any.
pub fn run(c: &mut dyn Choices, limits: Limits) -> Result<Stats, Box<Mismatch>> {
    let cfg = config(c);
    let (mut with, mut without) = (Side::new(&cfg, true), Side::new(&cfg, false));
    let num_nodes = if c.below(8) == 0 { 100 + c.below(61) } else { 1 + c.below(limits.max_nodes.max(1)) };
    let mut nodes: Vec<api::Node> = (0..num_nodes).map(|i| node(c, &format!("n{i}"))).collect();
    for n in &nodes {
        for side in [&mut with, &mut without] {
            side.cache.add_node(Arc::new(n.into()));
        }
    }
    let mut bound: Vec<api::Pod> = Vec::new();
    let mut pending: Vec<api::Pod> = Vec::new();
    let mut templates: Vec<Value> = (0..1 + c.below(4)).map(|_| template(c)).collect();
    let mut stats = Stats::default();
    let mut made = 0;
    let mut retry: Option<api::Pod> = None;
    for step in 0..limits.steps {
        // Mostly replicas of a few workloads, some variants of them, a new workload now and then,
        // and retries of pods that failed.
        let p = if let Some(p) = retry.take() {
            p
        } else if !pending.is_empty() && chance(c, 15) {
            pending.swap_remove(c.below(pending.len()))
        } else {
            made += 1;
            let k = c.below(templates.len());
            match c.below(12) {
                0 => templates.push(template(c)),
                1 | 2 => templates.push(variant(c, &templates[k])),
                _ => {}
            }
            let t = if templates.len() > 8 { templates.swap_remove(0) } else { templates[k].clone() };
            pod(&t, &format!("p{made}"))
        };
        let sampled = chance(c, 10);
        let hits_before = memo_hits(&with);
        let (a, placed_on) = with.schedule(&p, sampled);
        let (b, _) = without.schedule(&p, sampled);
        if a != b {
            let pod = serde_json::to_string(&p).unwrap_or_default();
            return Err(Box::new(Mismatch { step, pod, with_memo: a, without_memo: b }));
        }
        if memo_hits(&with) > hits_before {
            stats.memo_hits += 1;
        }
        match placed_on {
            Placed::On(n) => {
                stats.placed += 1;
                let mut p = p;
                p.spec.as_mut().expect("spec").node_name = Some(n);
                bound.push(p);
            }
            Placed::Nominated(n) => {
                // The preemptor's victims go (here: every lower-priority pod on the node, as
                // their deletions would arrive), and the pod is retried next.
                stats.failed += 1;
                let prio = |p: &api::Pod| p.spec.as_ref().and_then(|s| s.priority).unwrap_or(0);
                let (victims, kept): (Vec<_>, Vec<_>) = bound.drain(..).partition(|b| {
                    b.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(n.as_str()) && prio(b) < prio(&p)
                });
                bound = kept;
                for v in victims {
                    let v: Arc<ksched_framework::pod::Pod> = Arc::new((&v).into());
                    for side in [&mut with, &mut without] {
                        side.cache.remove_pod(&v).expect("remove victim");
                    }
                }
                retry = Some(p);
            }
            Placed::Nowhere => {
                stats.failed += 1;
                pending.push(p);
            }
        }
        // The cluster changes under the memo between cycles.
        match c.below(12) {
            0 if !bound.is_empty() => {
                let gone: Arc<ksched_framework::pod::Pod> = Arc::new((&bound.swap_remove(c.below(bound.len()))).into());
                for side in [&mut with, &mut without] {
                    side.cache.remove_pod(&gone).expect("remove pod");
                }
            }
            1 => {
                let k = c.below(nodes.len());
                let old: ksched_framework::node::Node = (&nodes[k]).into();
                let name = nodes[k].metadata.name.clone().unwrap_or_default();
                nodes[k] = node(c, &name);
                for side in [&mut with, &mut without] {
                    side.cache.update_node(&old, Arc::new((&nodes[k]).into()));
                }
            }
            2 if nodes.len() > 1 => {
                let gone: ksched_framework::node::Node = (&nodes.swap_remove(c.below(nodes.len()))).into();
                for side in [&mut with, &mut without] {
                    side.cache.remove_node(&gone);
                }
            }
            3 => {
                let n = node(c, &format!("x{step}"));
                for side in [&mut with, &mut without] {
                    side.cache.add_node(Arc::new((&n).into()));
                }
                nodes.push(n);
            }
            _ => {}
        }
    }
    Ok(stats)
}
