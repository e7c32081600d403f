//! The memo of unchanged nodes' results (`ksched_framework::memo`) must never change a decision:
//! the same pods on the same cluster, scheduled by the default profile with and without it,
//! get the same node, the same scores and the same failure messages, while nodes change under
//! them (pods bound and deleted, labels, taints and images updated, nodes added and removed).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use k8s_openapi::api::core::v1 as api;
use ksched_framework::handle::{ExtensionPoint, FrameworkMetrics, NoClient, NoopRecorder};
use ksched_framework::listers::MemoryLister;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use super::*;
use crate::cache::Cache;

fn default_framework() -> Arc<Framework> {
    framework_with_metrics(Arc::new(ksched_framework::handle::NoopMetrics))
}

fn framework_with_metrics(metrics: Arc<dyn FrameworkMetrics>) -> Arc<Framework> {
    let cfg = crate::config::default_config();
    let profiles = crate::app::build_profiles_with_metrics(
        &cfg,
        &ksched_plugins::in_tree_registry(),
        Arc::new(NoClient),
        &|_| Arc::new(NoopRecorder),
        Arc::new(MemoryLister::default()),
        Arc::new(OnceLock::new()),
        ksched_framework::handle::thread_spawner(),
        metrics,
        &[],
    )
    .unwrap();
    profiles["default-scheduler"].framework.clone()
}

/// Counts the Filter plugin calls a sampled cycle times.
#[derive(Default)]
struct FilterTimings(AtomicU64);

impl FrameworkMetrics for FilterTimings {
    fn plugin_duration(&self, _: &str, point: ExtensionPoint, _: Code, _: f64) {
        if point == ExtensionPoint::Filter {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
}

const IMAGES: [&str; 3] = ["registry.k8s.io/app:1", "registry.k8s.io/db:2", "registry.k8s.io/big:3"];

fn node(rng: &mut StdRng, name: &str) -> api::Node {
    let cpu = [2, 4, 8, 16][rng.random_range(0..4)];
    let mut taints = vec![];
    if rng.random_bool(0.15) {
        taints.push(json!({"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}));
    }
    if rng.random_bool(0.3) {
        taints.push(json!({"key": "spot", "effect": "PreferNoSchedule"}));
    }
    let images: Vec<_> = IMAGES
        .iter()
        .enumerate()
        .filter(|_| rng.random_bool(0.3))
        .map(|(i, name)| json!({"names": [name], "sizeBytes": 300_000_000i64 * (i as i64 + 1)}))
        .collect();
    let zone = ["a", "b", "c"][rng.random_range(0..3)];
    let tier = ["web", "batch"][rng.random_range(0..2)];
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "zone": zone, "tier": tier}},
        "spec": {"unschedulable": rng.random_bool(0.05), "taints": taints},
        "status": {
            "allocatable": {"cpu": cpu.to_string(), "memory": format!("{}Gi", cpu * 4), "pods": "16"},
            "images": images,
        },
    }))
    .unwrap()
}

/// A pod from one of a few shapes, so that signatures repeat as they do in a real queue.
fn pod(rng: &mut StdRng, name: &str) -> api::Pod {
    let shape = rng.random_range(0..7);
    let cpu = ["100m", "500m", "1", "3"][shape % 4];
    let mut spec = json!({
        "schedulerName": "default-scheduler",
        "containers": [{"name": "c", "image": IMAGES[shape % 3],
            "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
    });
    match shape {
        1 => spec["tolerations"] = json!([{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]),
        2 => spec["nodeSelector"] = json!({"tier": "web"}),
        3 => {
            spec["affinity"] = json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 5, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}}
            ]}})
        }
        4 => spec["containers"][0]["ports"] = json!([{"containerPort": 80, "hostPort": 8080}]),
        5 => spec["tolerations"] = json!([{"key": "spot", "operator": "Exists"}]),
        _ => {}
    }
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "uid": name},
        "spec": spec,
    }))
    .unwrap()
}

/// One cluster and the framework scheduling on it.
struct Side {
    fw: Arc<Framework>,
    cache: Cache,
    snapshot: Snapshot,
    alg: SchedulingAlgorithm,
}

impl Side {
    fn new(memo: bool) -> Self {
        Self::with_framework(default_framework(), memo)
    }

    fn with_framework(fw: Arc<Framework>, memo: bool) -> Self {
        fw.set_memo(memo);
        Side { fw, cache: Cache::new(), snapshot: Snapshot::default(), alg: SchedulingAlgorithm::default() }
    }

    /// Schedules `p` and binds it where it went; the outcome as text.
    fn schedule(&mut self, p: &api::Pod, sampled: bool) -> String {
        self.cache.update_snapshot(&mut self.snapshot).unwrap();
        let pi = PodInfo::new(Arc::new(p.into()));
        let mut state = CycleState::new();
        // A cycle that times its plugin calls takes the timed path through the walk.
        state.record_plugin_metrics = sampled;
        let r = self.alg.schedule_pod(&self.fw, None, &mut state, &pi, &self.snapshot, &Default::default());
        match r {
            Ok(r) => {
                let mut bound = p.clone();
                bound.spec.as_mut().unwrap().node_name = Some(r.suggested_host.clone());
                self.cache.add_pod(Arc::new((&bound).into())).unwrap();
                let scores = r.scores.map(|s| (s.plugin_names, s.scores, s.totals));
                format!("{} of {}/{} {scores:?}", r.suggested_host, r.feasible_nodes, r.evaluated_nodes)
            }
            Err(ScheduleError::Fit(e)) => e.message(),
            Err(e) => format!("error: {e:?}"),
        }
    }
}

#[test]
fn reused_results_decide_exactly_as_running_the_plugins() {
    let mut rng = StdRng::seed_from_u64(7);
    let (mut with, mut without) = (Side::new(true), Side::new(false));
    let mut nodes: Vec<api::Node> = (0..240).map(|i| node(&mut rng, &format!("n{i}"))).collect();
    for n in &nodes {
        for side in [&mut with, &mut without] {
            side.cache.add_node(Arc::new(n.into()));
        }
    }
    let mut bound: Vec<api::Pod> = Vec::new();
    let (mut placed, mut failed) = (0, 0);
    for i in 0..1500 {
        let p = pod(&mut rng, &format!("p{i}"));
        let sampled = i % 5 == 0;
        let (a, b) = (with.schedule(&p, sampled), without.schedule(&p, sampled));
        assert_eq!(a, b, "pod {i}");
        if a.starts_with('n') {
            placed += 1;
            let mut p = p;
            p.spec.as_mut().unwrap().node_name = Some(a.split(' ').next().unwrap().to_string());
            bound.push(p);
        } else {
            failed += 1;
        }
        // The cluster changes under the memo between cycles.
        match rng.random_range(0..40) {
            0 if !bound.is_empty() => {
                let gone = bound.swap_remove(rng.random_range(0..bound.len()));
                let gone: Arc<ksched_framework::pod::Pod> = Arc::new((&gone).into());
                with.cache.remove_pod(&gone).unwrap();
                without.cache.remove_pod(&gone).unwrap();
            }
            1 => {
                // Relabel, retaint or re-image one node in place.
                let k = rng.random_range(0..nodes.len());
                let old: Arc<ksched_framework::node::Node> = Arc::new((&nodes[k]).into());
                let name = nodes[k].metadata.name.clone().unwrap();
                nodes[k] = node(&mut rng, &name);
                for side in [&mut with, &mut without] {
                    side.cache.update_node(&old, Arc::new((&nodes[k]).into()));
                }
            }
            2 if nodes.len() > 200 => {
                let gone = nodes.swap_remove(rng.random_range(0..nodes.len()));
                let gone: ksched_framework::node::Node = (&gone).into();
                with.cache.remove_node(&gone);
                without.cache.remove_node(&gone);
            }
            3 => {
                let n = node(&mut rng, &format!("x{i}"));
                for side in [&mut with, &mut without] {
                    side.cache.add_node(Arc::new((&n).into()));
                }
                nodes.push(n);
            }
            _ => {}
        }
    }
    // The run must have exercised both outcomes, or the comparison proves little.
    assert!(placed > 500 && failed > 50, "placed {placed}, failed {failed}");
}

#[test]
fn a_sampled_cycle_times_only_the_filter_calls_it_makes() {
    // 100 nodes: every cycle walks them all, so the second pod meets the first one's results
    // everywhere except on the node the first pod was bound to.
    let plain = |name: &str| -> api::Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default", "uid": name},
            "spec": {"schedulerName": "default-scheduler", "containers": [{"name": "c", "image": IMAGES[0],
                "resources": {"requests": {"cpu": "100m", "memory": "1Gi"}}}]},
        }))
        .unwrap()
    };
    let timings = |memo: bool| {
        let counter = Arc::new(FilterTimings::default());
        let mut side = Side::with_framework(framework_with_metrics(counter.clone()), memo);
        for i in 0..100 {
            let n: api::Node = serde_json::from_value(json!({
                "metadata": {"name": format!("n{i}")},
                "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
            }))
            .unwrap();
            side.cache.add_node(Arc::new((&n).into()));
        }
        let first = side.schedule(&plain("a"), false);
        assert!(first.starts_with('n'), "{first}");
        assert_eq!(counter.0.load(Ordering::Relaxed), 0, "an unsampled cycle times nothing");
        let second = side.schedule(&plain("b"), true);
        assert!(second.starts_with('n'), "{second}");
        counter.0.load(Ordering::Relaxed)
    };
    let (with, without) = (timings(true), timings(false));
    assert!(without > 0);
    // Without the memo every node runs every filter; with it, only the changed node does.
    assert_eq!(with * 100, without, "with the memo {with}, without {without}");
}

/// Random clusters, configurations and pod sequences (see [`super::memo_check`]): every decision
/// is the same with and without the memo. `MEMO_CHECK_SEQUENCES` and `MEMO_CHECK_FIRST_SEED`
/// run other seeds (the `memo` fuzz target runs far more).
fn check_seeds(range: std::ops::Range<u64>) {
    let var = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    let range = match (var("MEMO_CHECK_FIRST_SEED"), var("MEMO_CHECK_SEQUENCES")) {
        (None, None) => range,
        (first, n) => {
            let first = first.unwrap_or(0) + range.start;
            first..first + n.unwrap_or(range.end - range.start)
        }
    };
    let mut total = super::memo_check::Stats::default();
    for seed in range {
        match super::memo_check::run(&mut super::memo_check::Seeded::new(seed), Default::default()) {
            Ok(s) => {
                total.placed += s.placed;
                total.failed += s.failed;
                total.memo_hits += s.memo_hits;
            }
            Err(m) => panic!("seed {seed}: the memo changed a decision\n{m}"),
        }
    }
    // The runs must have placed pods, failed some, and taken results from the memo often, or
    // the comparison proves little.
    let attempts = total.placed + total.failed;
    assert!(total.placed * 3 > attempts && total.failed * 20 > attempts, "{total:?}");
    assert!(total.memo_hits * 10 > attempts, "{total:?}");
}

// Two tests of a thousand sequences each, so that the test harness runs them side by side.
#[test]
fn random_sequences_decide_the_same_with_and_without_the_memo() {
    check_seeds(0..1000);
}

#[test]
fn more_random_sequences_decide_the_same_with_and_without_the_memo() {
    check_seeds(1000..2000);
}
