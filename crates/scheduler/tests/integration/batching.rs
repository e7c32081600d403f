//! Opportunistic batching end to end, in process: a burst of identical replicas that fit one
//! per node (a host port) lands on the same nodes with batching on as with it off, and with it
//! on most of them take the previous cycle's hint instead of filtering and scoring again.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ksched_framework::node::Node;
use ksched_framework::pod::Pod;
use ksched_scheduler::config::{self, SchedulerFeatures};
use ksched_scheduler::inprocess::InProcessCluster;
use serde_json::json;

/// Nodes; fewer than 100, so every cycle evaluates every node (no rotating partial walk).
const NODES: usize = 30;
/// Replicas: every node takes one, the last two fit nowhere.
const REPLICAS: usize = NODES + 2;

/// PodTopologySpread without default constraints: with upstream's system defaults it refuses to
/// sign every pod, and the default profile never batches.
const CONFIG: &str = "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  pluginConfig:
  - name: PodTopologySpread
    args:
      defaultingType: List
";

/// Node `i` is sized so that a replica (1 cpu, 1 GiB) leaves it `60 + i` percent free in both
/// resources: NodeResourcesFit ranks the nodes strictly, with no tie for the heap to break.
fn node(i: usize) -> Node {
    let free = 60 + i as u64;
    let size = |request: u64| (100 * request).div_ceil(100 - free);
    serde_json::from_value(json!({"metadata": {"name": format!("node-{i:02}"),
        "labels": {"kubernetes.io/hostname": format!("node-{i:02}")}},
        "status": {"allocatable": {"cpu": format!("{}m", size(1000)), "memory": size(1 << 30).to_string(), "pods": "110"}}}))
    .unwrap()
}

/// A replica as a ReplicaSet makes them: same labels, one container with a host port.
fn replica(i: usize) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": format!("web-{i:02}"), "namespace": "default",
            "labels": {"app": "web", "pod-template-hash": "5d4f8"}},
        "spec": {"containers": [{"name": "web", "image": "nginx:1.27",
            "ports": [{"containerPort": 80, "hostPort": 8080, "protocol": "TCP"}],
            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]}}))
    .unwrap()
}

/// Schedules the burst; returns the placements and the pods placed on their hint.
async fn run(batching: bool) -> (BTreeMap<String, String>, u64) {
    let features = SchedulerFeatures { opportunistic_batching: batching, ..Default::default() };
    let cfg = config::load_config_with(CONFIG.as_bytes(), "batching.yaml", &features).unwrap();
    let mut c = InProcessCluster::new(
        &cfg,
        &ksched_plugins::in_tree_registry(),
        Arc::new(ksched_scheduler::metrics::NoopMetrics),
    )
    .unwrap();
    for i in 0..NODES {
        c.apply_node(node(i));
    }
    // All queued before the loop starts: consecutive cycles, as a ReplicaSet's burst.
    for i in 0..REPLICAS {
        c.apply_pod(replica(i));
    }
    c.start();
    let start = Instant::now();
    while c.bound() < NODES {
        assert!(start.elapsed() < Duration::from_secs(30), "only {} of {NODES} replicas bound", c.bound());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The two replicas left over fail, and would fail again; let their first cycles finish.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let fw = c.scheduler.profiles["default-scheduler"].framework.clone();
    let placements: BTreeMap<String, String> = c.placements().into_iter().collect();
    c.stop().await;
    (placements, fw.batched_pods())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_one_per_node_land_where_they_would_without_batching() {
    let (without, batched_off) = run(false).await;
    let (with, batched_on) = run(true).await;
    assert_eq!(batched_off, 0);
    assert_eq!(without.len(), NODES, "{without:?}");
    // Highest score first: the emptiest node takes the first replica.
    assert_eq!(without["default/web-00"], format!("node-{:02}", NODES - 1));
    assert_eq!(with, without, "batching changed placements");
    // Each full cycle's ranking serves the replicas after it (until the cache is 500 ms old).
    assert!(batched_on > 0, "no replica was placed on a hint");
}

// ---- signatures of the default plugins ----

/// The default profile's framework under `cfg` (the cluster is never started).
fn profile(cfg: &config::KubeSchedulerConfiguration) -> (InProcessCluster, Arc<ksched_framework::Framework>) {
    let c = InProcessCluster::new(
        cfg,
        &ksched_plugins::in_tree_registry(),
        Arc::new(ksched_scheduler::metrics::NoopMetrics),
    )
    .unwrap();
    let fw = c.scheduler.profiles["default-scheduler"].framework.clone();
    (c, fw)
}

/// A change to a pod's JSON.
type Edit = Box<dyn FnOnce(&mut serde_json::Value)>;

/// A replica with `edit` applied to its JSON.
fn variant(edit: impl FnOnce(&mut serde_json::Value)) -> ksched_framework::PodInfo {
    let mut v = serde_json::to_value(replica(7)).unwrap();
    v["spec"]["schedulerName"] = json!("default-scheduler");
    edit(&mut v);
    ksched_framework::PodInfo::new(Arc::new(serde_json::from_value(v).unwrap()))
}

#[tokio::test]
async fn replicas_share_a_signature_that_covers_what_plugins_read() {
    let features = SchedulerFeatures::default();
    let (_c, fw) = profile(&config::load_config_with(CONFIG.as_bytes(), "batching.yaml", &features).unwrap());
    let sign = |p: &ksched_framework::PodInfo| fw.sign_pod(p);
    let base = sign(&variant(|_| {})).expect("a plain replica is signed");

    // What no plugin reads, or reads in a canonical form, leaves the signature alone.
    let same: Vec<(&str, Edit)> = vec![
        ("another name", Box::new(|v| v["metadata"]["name"] = json!("web-99"))),
        (
            "tolerations in another order",
            Box::new(|v| {
                let t = v["spec"]["tolerations"].as_array_mut().unwrap();
                t.reverse();
            }),
        ),
        (
            "a ConfigMap volume",
            Box::new(|v| {
                v["spec"]["volumes"] = json!([{"name": "cfg-1", "configMap": {"name": "web-1"}}]);
            }),
        ),
    ];
    for (what, edit) in same {
        assert_eq!(sign(&variant(edit)).as_ref(), Some(&base), "{what}");
    }
    let image = |name: &'static str| sign(&variant(move |v| v["spec"]["containers"][0]["image"] = json!(name)));
    assert_eq!(image("nginx"), image("nginx:latest"), "the implicit :latest tag");
    assert_ne!(image("nginx"), Some(base.clone()));
    let required = |terms: serde_json::Value| json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}});
    let t1 = json!({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]});
    let t2 = json!({"matchExpressions": [{"key": "disk", "operator": "Exists"}]});
    let t1_reordered = json!({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b", "a"]}]});
    let ab = sign(&variant(|v| v["spec"]["affinity"] = required(json!([t1.clone(), t2.clone()])))).unwrap();
    let ba = sign(&variant(|v| v["spec"]["affinity"] = required(json!([t2, t1_reordered])))).unwrap();
    assert_eq!(ab, ba, "node affinity terms and values are sets");
    assert_ne!(ab, base);

    // What a plugin reads changes it.
    let differ: Vec<(&str, Edit)> = vec![
        ("requests", Box::new(|v| v["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("2"))),
        ("host port", Box::new(|v| v["spec"]["containers"][0]["ports"][0]["hostPort"] = json!(9090))),
        ("node selector", Box::new(|v| v["spec"]["nodeSelector"] = json!({"disk": "ssd"}))),
        ("labels", Box::new(|v| v["metadata"]["labels"]["app"] = json!("api"))),
        ("tolerations", Box::new(|v| v["spec"]["tolerations"][0]["tolerationSeconds"] = json!(30))),
        ("image", Box::new(|v| v["spec"]["containers"][0]["image"] = json!("nginx:1.28"))),
        (
            "a PVC volume",
            Box::new(|v| {
                v["spec"]["volumes"] = json!([{"name": "data", "persistentVolumeClaim": {"claimName": "data-0"}}]);
            }),
        ),
        ("node name", Box::new(|v| v["spec"]["nodeName"] = json!("node-01"))),
    ];
    for (what, edit) in differ {
        let s = sign(&variant(edit)).unwrap_or_else(|| panic!("{what}: unsigned"));
        assert_ne!(s, base, "{what}");
    }
}

#[tokio::test]
async fn plugins_refuse_pods_whose_placement_depends_on_other_pods() {
    let features = SchedulerFeatures::default();
    let (_c, fw) = profile(&config::load_config_with(CONFIG.as_bytes(), "batching.yaml", &features).unwrap());
    let unbatchable: Vec<(&str, Edit)> = vec![
        (
            "InterPodAffinity: pod anti-affinity",
            Box::new(|v| {
                v["spec"]["affinity"] = json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}]}});
            }),
        ),
        ("InterPodAffinity: an empty pod affinity", Box::new(|v| v["spec"]["affinity"] = json!({"podAffinity": {}}))),
        (
            "PodTopologySpread: spread constraints",
            Box::new(|v| {
                v["spec"]["topologySpreadConstraints"] = json!([{"maxSkew": 1, "topologyKey": "zone",
                "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}}}]);
            }),
        ),
        (
            "DynamicResources: resource claims",
            Box::new(|v| {
                v["spec"]["resourceClaims"] = json!([{"name": "gpu", "resourceClaimName": "gpu-0"}]);
            }),
        ),
    ];
    for (what, edit) in unbatchable {
        assert_eq!(fw.sign_pod(&variant(edit)), None, "{what}");
    }
}

#[tokio::test]
async fn the_default_profile_signs_no_pod_and_the_gate_turns_signing_off() {
    // PodTopologySpread's system default constraints: upstream's default profile never batches.
    let (_c, fw) = profile(&config::default_config());
    assert!(fw.batching());
    assert_eq!(fw.sign_pod(&variant(|_| {})), None);
    let off = SchedulerFeatures { opportunistic_batching: false, ..Default::default() };
    let (_c, fw) = profile(&config::load_config_with(CONFIG.as_bytes(), "batching.yaml", &off).unwrap());
    assert!(!fw.batching());
    assert_eq!(fw.sign_pod(&variant(|_| {})), None);
}

// ---- upstream's batching scenarios (test/integration/scheduler/batch), one pod at a time ----

/// A filter without Sign (upstream's `nosign` test plugin): its profile never batches.
struct NoSign;
/// A filter whose Sign refuses every pod (upstream's `emptysign`).
struct RefusingSign;

impl ksched_framework::Plugin for NoSign {
    fn name(&self) -> &str {
        "nosign"
    }
    fn as_filter(&self) -> Option<&dyn ksched_framework::FilterPlugin> {
        Some(self)
    }
}
impl ksched_framework::FilterPlugin for NoSign {
    fn filter(
        &self,
        _: &ksched_framework::CycleState,
        _: &ksched_framework::PodInfo,
        _: &ksched_framework::NodeInfo,
    ) -> ksched_framework::Status {
        ksched_framework::Status::success()
    }
}
impl ksched_framework::Plugin for RefusingSign {
    fn name(&self) -> &str {
        "emptysign"
    }
    fn as_filter(&self) -> Option<&dyn ksched_framework::FilterPlugin> {
        Some(self)
    }
    fn as_sign(&self) -> Option<&dyn ksched_framework::SignPlugin> {
        Some(self)
    }
}
impl ksched_framework::FilterPlugin for RefusingSign {
    fn filter(
        &self,
        _: &ksched_framework::CycleState,
        _: &ksched_framework::PodInfo,
        _: &ksched_framework::NodeInfo,
    ) -> ksched_framework::Status {
        ksched_framework::Status::success()
    }
}
impl ksched_framework::SignPlugin for RefusingSign {
    fn sign_pod(
        &self,
        _: &ksched_framework::PodInfo,
        _: &mut ksched_framework::batch::SignatureBuilder,
    ) -> ksched_framework::Status {
        ksched_framework::Status::unschedulable("")
    }
}

/// Four profiles as upstream's test sets them up: the default, a copy, and two with a test
/// filter that keeps them from signing.
const SCENARIO_CONFIG: &str = "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  pluginConfig:
  - name: PodTopologySpread
    args:
      defaultingType: List
- schedulerName: mysched
  pluginConfig:
  - name: PodTopologySpread
    args:
      defaultingType: List
- schedulerName: nosign
  plugins:
    filter:
      enabled:
      - name: nosign
  pluginConfig:
  - name: PodTopologySpread
    args:
      defaultingType: List
- schedulerName: emptysign
  plugins:
    filter:
      enabled:
      - name: emptysign
  pluginConfig:
  - name: PodTopologySpread
    args:
      defaultingType: List
";

struct PodDef {
    name: &'static str,
    node_selector: Option<&'static str>,
    /// Preferred nodes, the first with the highest weight.
    node_affinity: &'static [&'static str],
    scheduler: &'static str,
    /// `None`: the pod stays unschedulable.
    expected_node: Option<&'static str>,
    expect_batched: bool,
}

const fn pod_def(name: &'static str, affinity: &'static [&'static str], node: &'static str, batched: bool) -> PodDef {
    PodDef {
        name,
        node_selector: None,
        node_affinity: affinity,
        scheduler: "default-scheduler",
        expected_node: Some(node),
        expect_batched: batched,
    }
}

/// `(name, labels "forpod" value, max pods)`.
type NodeDef = (&'static str, Option<&'static str>, u32);

const N123: &[&str] = &["n1", "n2", "n3"];
const N12: &[&str] = &["n1", "n2"];
const N43: &[&str] = &["n4", "n3"];
const ONE_EACH: &[NodeDef] = &[("n3", None, 1), ("n2", None, 1), ("n1", None, 1)];
const ONE_EACH_4: &[NodeDef] = &[("n4", None, 1), ("n3", None, 1), ("n2", None, 1), ("n1", None, 1)];

fn scenarios() -> Vec<(&'static str, Vec<PodDef>, &'static [NodeDef])> {
    let with = |mut p: PodDef, f: &dyn Fn(&mut PodDef)| {
        f(&mut p);
        p
    };
    vec![
        ("one pod one node", vec![pod_def("p1", &[], "n1", false)], &[("n1", None, 1)]),
        (
            "distinct pods on distinct nodes",
            (1..=3)
                .map(|i| {
                    let (name, sel, node) = [("p1", "1", "n1"), ("p2", "2", "n2"), ("p3", "3", "n3")][i - 1];
                    with(pod_def(name, &[], node, false), &|p| p.node_selector = Some(sel))
                })
                .collect(),
            &[("n3", Some("3"), 10), ("n2", Some("2"), 10), ("n1", Some("1"), 10)],
        ),
        (
            "three pod batch",
            vec![pod_def("p1", N123, "n1", false), pod_def("p2", N123, "n2", true), pod_def("p3", N123, "n3", true)],
            ONE_EACH,
        ),
        (
            "two consecutive batches",
            vec![
                pod_def("p1", N12, "n1", false),
                pod_def("p2", N12, "n2", true),
                pod_def("p3", N43, "n4", false),
                pod_def("p4", N43, "n3", true),
            ],
            ONE_EACH_4,
        ),
        (
            "multiple pods per node means no batching",
            vec![
                pod_def("p1", N12, "n1", false),
                pod_def("p2", N12, "n1", false),
                pod_def("p3", N43, "n4", false),
                pod_def("p4", N43, "n4", false),
            ],
            &[("n4", None, 2), ("n3", None, 2), ("n2", None, 2), ("n1", None, 2)],
        ),
        (
            "no batching between schedulers",
            vec![
                pod_def("p1", N123, "n1", false),
                with(pod_def("p2", N123, "n2", false), &|p| p.scheduler = "mysched"),
            ],
            ONE_EACH,
        ),
        (
            "no batching missing sign",
            vec![
                with(pod_def("p1", N123, "n1", false), &|p| p.scheduler = "nosign"),
                with(pod_def("p2", N123, "n2", false), &|p| p.scheduler = "nosign"),
            ],
            ONE_EACH,
        ),
        (
            "no batching empty sign",
            vec![
                with(pod_def("p1", N123, "n1", false), &|p| p.scheduler = "emptysign"),
                with(pod_def("p2", N123, "n2", false), &|p| p.scheduler = "emptysign"),
            ],
            ONE_EACH,
        ),
        (
            "unschedulable pod",
            vec![pod_def("p1", &[], "n1", false), with(pod_def("p2", &[], "n1", false), &|p| p.expected_node = None)],
            &[("n1", None, 1)],
        ),
    ]
}

fn scenario_node(&(name, forpod, max_pods): &NodeDef) -> Node {
    let resources = json!({"cpu": "100", "memory": "4Gi", "pods": max_pods.to_string()});
    let labels = forpod.map_or(json!({}), |v| json!({"forpod": v}));
    serde_json::from_value(json!({"metadata": {"name": name, "labels": labels},
        "status": {"capacity": resources, "allocatable": resources}}))
    .unwrap()
}

fn scenario_pod(d: &PodDef) -> Pod {
    let n = d.node_affinity.len();
    let preferred: Vec<_> = d
        .node_affinity
        .iter()
        .enumerate()
        .map(|(i, node)| {
            json!({"weight": n - i, "preference": {"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node]}]}})
        })
        .collect();
    let mut spec = json!({"schedulerName": d.scheduler,
        "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred}},
        "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": {"cpu": "10", "memory": "4194304"}}}]});
    if let Some(v) = d.node_selector {
        spec["nodeSelector"] = json!({"forpod": v});
    }
    serde_json::from_value(json!({"metadata": {"name": d.name, "namespace": "default"}, "spec": spec})).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_batch_scenarios() {
    let mut registry = ksched_plugins::in_tree_registry();
    registry.register("nosign", |_, _| Ok(Arc::new(NoSign) as Arc<dyn ksched_framework::Plugin>)).unwrap();
    registry.register("emptysign", |_, _| Ok(Arc::new(RefusingSign) as Arc<dyn ksched_framework::Plugin>)).unwrap();
    let cfg = config::load_config(SCENARIO_CONFIG.as_bytes(), "batch.yaml").unwrap();
    for (name, pods, nodes) in scenarios() {
        let mut c = InProcessCluster::new(&cfg, &registry, Arc::new(ksched_scheduler::metrics::NoopMetrics)).unwrap();
        for n in nodes {
            c.apply_node(scenario_node(n));
        }
        c.start();
        let fw = c.scheduler.profiles["default-scheduler"].framework.clone();
        for d in &pods {
            let before = fw.batched_pods();
            c.apply_pod(scenario_pod(d));
            let key = format!("default/{}", d.name);
            let start = Instant::now();
            let placed = loop {
                if let Some(node) = c.placements().get(&key) {
                    break Some(node.clone());
                }
                let failed = c.pod("default", d.name).and_then(|p| p.status.clone()).is_some_and(|s| {
                    s.conditions.iter().flatten().any(|c| c.type_ == "PodScheduled" && c.status == "False")
                });
                if failed || start.elapsed() > Duration::from_secs(10) {
                    break None;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            };
            assert_eq!(placed.as_deref(), d.expected_node, "{name}: {}", d.name);
            assert_eq!(fw.batched_pods() > before, d.expect_batched, "{name}: {} batched", d.name);
        }
        c.stop().await;
    }
}

// ---- the real binary: the four metric families after a burst ----

/// A hostPort replica as `kubectl get pod -o yaml` shows one of a ReplicaSet's pods.
fn api_replica(i: usize) -> serde_json::Value {
    let mut v = serde_json::to_value(replica(i)).unwrap();
    v["apiVersion"] = json!("v1");
    v["kind"] = json!("Pod");
    v["metadata"]["generateName"] = json!("web-5d4f8-");
    v["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d4f8",
        "uid": "6f1c2f0e-3b9e-4c55-9a51-8f0e1a2b3c4d", "controller": true, "blockOwnerDeletion": true}]);
    v["spec"]["schedulerName"] = json!("default-scheduler");
    v["spec"]["restartPolicy"] = json!("Always");
    v["spec"]["dnsPolicy"] = json!("ClusterFirst");
    v["spec"]["terminationGracePeriodSeconds"] = json!(30);
    v["spec"]["enableServiceLinks"] = json!(true);
    v["spec"]["priority"] = json!(0);
    v["spec"]["preemptionPolicy"] = json!("PreemptLowerPriority");
    v["spec"]["volumes"] = json!([{"name": format!("kube-api-access-{i:05}"), "projected": {"defaultMode": 420,
        "sources": [{"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}]);
    v
}

/// Sum of the samples of `series` (a metric name with an optional label prefix).
fn sum_samples(text: &str, series: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(series))
        .filter_map(|l| l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()))
        .sum()
}

/// Runs the `kube-scheduler` binary with the batching profile on a burst of replicas (all
/// created before it starts) and returns its `/metrics` text once they are bound.
async fn binary_burst(gates: &str) -> String {
    use ksched_apiserver::{ApiServer, ServerConfig};
    let dir = std::env::temp_dir().join(format!("ksched-batching-{}-{}", std::process::id(), gates.len()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let server = ApiServer::start(ServerConfig { listen: "127.0.0.1:0".parse().unwrap(), ..ServerConfig::default() })
        .await
        .unwrap();
    let kubeconfig = dir.join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    let config = dir.join("config.yaml");
    std::fs::write(&config, format!("{CONFIG}clientConnection:\n  kubeconfig: {}\n", kubeconfig.display())).unwrap();
    let store = server.store();
    for i in 0..NODES {
        let mut n = serde_json::to_value(node(i)).unwrap();
        n["apiVersion"] = json!("v1");
        n["kind"] = json!("Node");
        store.create(n).unwrap();
    }
    // One replica of another ReplicaSet (other labels and host port) in the middle of the
    // burst: its signature differs, so the pods on either side of it flush the cache.
    for i in 0..NODES {
        store.create(api_replica(i)).unwrap();
        if i == NODES / 2 {
            let mut other = api_replica(i);
            other["metadata"]["name"] = json!(format!("web-{i:02}-canary"));
            other["metadata"]["labels"]["app"] = json!("web-canary");
            other["spec"]["containers"][0]["ports"][0]["hostPort"] = json!(9090);
            store.create(other).unwrap();
        }
    }
    let port = crate::observability::free_port();
    let mut scheduler = std::process::Command::new(env!("CARGO_BIN_EXE_kube-scheduler"))
        .arg(format!("--config={}", config.display()))
        .arg("--bind-address=127.0.0.1")
        .arg(format!("--secure-port={port}"))
        .arg("--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics")
        .arg(format!("--feature-gates={gates}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        let bound = store
            .list("v1", "Pod", Some("default"))
            .iter()
            .filter(|p| p.pointer("/spec/nodeName").and_then(serde_json::Value::as_str).is_some_and(|n| !n.is_empty()))
            .count();
        if bound == NODES + 1 {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "only {bound} of {} pods bound", NODES + 1);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (_, text) = crate::observability::scrape(port, "/metrics", None).await;
    let _ = scheduler.kill();
    let _ = scheduler.wait();
    server.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_replicas_feeds_the_four_batching_families_of_the_binary() {
    let text = binary_burst("OpportunisticBatching=true").await;
    let profile = r#"profile="default-scheduler""#;
    let hint_used = sum_samples(&text, &format!(r#"scheduler_batch_attempts_total{{{profile},result="hint_used"}}"#));
    let no_hint = sum_samples(&text, &format!(r#"scheduler_batch_attempts_total{{{profile},result="no_hint"}}"#));
    assert!(hint_used > 0.0, "no replica placed on its hint:\n{text}");
    assert!(no_hint > 0.0, "the first replica has no hint:\n{text}");
    let incompatible = format!(r#"scheduler_batch_cache_flushed_total{{{profile},reason="pod_incompatible"}}"#);
    assert!(sum_samples(&text, &incompatible) > 0.0, "the canary flushed nothing:\n{text}");
    let hinted = sum_samples(
        &text,
        r#"scheduler_get_node_hint_duration_seconds_count{hinted="hint",profile="default-scheduler"}"#,
    );
    assert_eq!(hinted, hint_used, "every hint given was used");
    let stores =
        sum_samples(&text, r#"scheduler_store_schedule_results_duration_seconds_count{profile="default-scheduler"}"#);
    assert_eq!(stores, (NODES + 1) as f64, "one store per successful cycle");
    assert!(text.contains(
        r#"scheduler_get_node_hint_duration_seconds_bucket{hinted="hint",profile="default-scheduler",le="1e-05"}"#
    ));

    // With the gate off the families stay empty.
    let text = binary_burst("OpportunisticBatching=false").await;
    for family in [
        "scheduler_batch_attempts_total{",
        "scheduler_batch_cache_flushed_total{",
        "scheduler_get_node_hint_duration_seconds_count{",
        "scheduler_store_schedule_results_duration_seconds_count{",
    ] {
        assert!(!text.contains(family), "{family} has samples with the gate off");
    }
}
