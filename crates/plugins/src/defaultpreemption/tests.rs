use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use ksched_framework::client::{ApiClient, ApiError};
use ksched_framework::extender::{Extender, NodeToVictims, Victims};
use ksched_framework::handle::{EventRecorder, SchedulerView, Spawner};
use ksched_framework::listers::MemoryLister;
use ksched_framework::node::Node;
use ksched_framework::plugin_config::Plugins;
use ksched_framework::pod::Pod;
use ksched_framework::{Code, CycleState, Framework, Handle, NodeInfo, NodeToStatus, PodInfo, Registry, Snapshot};
use serde_json::{json, Value};

use super::candidates::{select_victims_on_node, split_by_pdb_violation};
use super::*;

const LOW: i32 = 0;
const MID: i32 = 100;
const HIGH: i32 = 1000;
const VERY_HIGH: i32 = 10000;

#[derive(Default)]
struct FakeView {
    pods: Mutex<HashMap<(String, String), Arc<Pod>>>,
    nominated: Mutex<HashMap<String, Vec<Arc<PodInfo>>>>,
    activated: Mutex<Vec<String>>,
    released: Mutex<Vec<String>>,
}

impl SchedulerView for FakeView {
    fn nominated_pods_for_node(&self, node: &str) -> Vec<Arc<PodInfo>> {
        self.nominated.lock().unwrap().get(node).cloned().unwrap_or_default()
    }
    fn get_pod(&self, namespace: &str, name: &str) -> Option<Arc<Pod>> {
        self.pods.lock().unwrap().get(&(namespace.to_string(), name.to_string())).cloned()
    }
    fn activate(&self, pods: &[Arc<Pod>]) {
        let mut a = self.activated.lock().unwrap();
        a.extend(pods.iter().map(|p| p.metadata.name.clone().unwrap_or_default()));
    }
    fn release_gated(&self, pods: &[Arc<Pod>], plugin: &str) {
        let mut r = self.released.lock().unwrap();
        r.extend(pods.iter().map(|p| format!("{} by {plugin}", p.metadata.name.as_deref().unwrap_or_default())));
    }
}

#[derive(Default)]
struct FakeClient {
    calls: Mutex<Vec<String>>,
    fail_delete_of: Option<String>,
}

impl ApiClient for FakeClient {
    fn bind(&self, _: &Pod, _: &str) -> BoxFuture<'static, Result<(), ApiError>> {
        Box::pin(async { Ok(()) })
    }
    fn patch_pod_status(&self, ns: &str, name: &str, patch: Value) -> BoxFuture<'static, Result<(), ApiError>> {
        self.calls.lock().unwrap().push(format!("patch {ns}/{name} {patch}"));
        Box::pin(async { Ok(()) })
    }
    fn delete_pod(&self, ns: &str, name: &str, uid: Option<&str>) -> BoxFuture<'static, Result<(), ApiError>> {
        self.calls.lock().unwrap().push(format!("delete {ns}/{name} {uid:?}"));
        let fail = self.fail_delete_of.as_deref() == Some(name);
        Box::pin(async move {
            if fail {
                Err(ApiError { code: 500, message: "boom".into() })
            } else {
                Ok(())
            }
        })
    }
}

#[derive(Default)]
struct FakeRecorder(Mutex<Vec<String>>);

impl EventRecorder for FakeRecorder {
    fn record(&self, regarding: &Pod, related: Option<&Pod>, type_: &str, reason: &str, action: &str, note: &str) {
        let name = |p: &Pod| p.metadata.name.clone().unwrap_or_default();
        self.0.lock().unwrap().push(format!(
            "{} {type_} {reason} {action} related={} {note}",
            name(regarding),
            related.map(name).unwrap_or_default()
        ));
    }
}

/// Futures handed to the spawner; `run_spawned` drives them, so tests can look in between.
#[derive(Default)]
struct Deferred(Mutex<Vec<BoxFuture<'static, ()>>>);

struct Env {
    handle: Handle,
    view: Arc<FakeView>,
    client: Arc<FakeClient>,
    recorder: Arc<FakeRecorder>,
    lister: Arc<MemoryLister>,
    deferred: Arc<Deferred>,
    fw: Framework,
}

impl Env {
    fn new() -> Env {
        Env::with_client(FakeClient::default())
    }

    fn with_client(client: FakeClient) -> Env {
        let view = Arc::new(FakeView::default());
        let client = Arc::new(client);
        let recorder = Arc::new(FakeRecorder::default());
        let lister = Arc::new(MemoryLister::default());
        let deferred = Arc::new(Deferred::default());
        let d = deferred.clone();
        let spawner: Spawner = Arc::new(move |f| d.0.lock().unwrap().push(f));
        let mut handle = Handle::for_tests();
        handle.client = client.clone();
        handle.recorder = recorder.clone();
        handle.lister = lister.clone();
        handle.spawner = spawner;
        let _ = handle.scheduler.set(view.clone());
        let mut r = Registry::new();
        r.register(names::PRIORITY_SORT, crate::prioritysort::new).unwrap();
        r.register(names::DEFAULT_BINDER, crate::defaultbinder::new).unwrap();
        r.register(names::NODE_UNSCHEDULABLE, crate::nodeunschedulable::new).unwrap();
        r.register(names::NODE_RESOURCES_FIT, crate::noderesources::fit::new).unwrap();
        r.register(names::DEFAULT_PREEMPTION, super::new).unwrap();
        let plugins: Plugins = serde_json::from_value(json!({"multiPoint": {"enabled": [
            {"name": "PrioritySort"}, {"name": "NodeUnschedulable"}, {"name": "NodeResourcesFit"},
            {"name": "DefaultPreemption"}, {"name": "DefaultBinder"}]}}))
        .unwrap();
        let fw = Framework::new(&r, "default-scheduler", &plugins, &[], handle.clone()).unwrap();
        Env { handle, view, client, recorder, lister, deferred, fw }
    }

    fn plugin(&self, args: Option<Value>) -> DefaultPreemption {
        DefaultPreemption::new(args.as_ref(), &self.handle).unwrap().with_fixed_offset(0)
    }

    fn run_spawned(&self) {
        let fs: Vec<_> = self.deferred.0.lock().unwrap().drain(..).collect();
        for f in fs {
            futures::executor::block_on(f);
        }
    }

    fn calls(&self) -> Vec<String> {
        self.client.calls.lock().unwrap().clone()
    }

    fn events(&self) -> Vec<String> {
        self.recorder.0.lock().unwrap().clone()
    }

    fn add_pdb(&self, pdb: Value) {
        let pdb: PodDisruptionBudget = serde_json::from_value(pdb).unwrap();
        self.lister.pdbs.write().push(Arc::new(pdb));
    }

    /// Runs PreFilter and Filter like a scheduling cycle, then the plugin's PostFilter.
    fn post_filter(
        &self,
        pl: &DefaultPreemption,
        pod: &Pod,
        snapshot: &Snapshot,
        statuses: Option<NodeToStatus>,
    ) -> (Option<PostFilterResult>, Status) {
        self.view.pods.lock().unwrap().insert(key(pod), Arc::new(pod.clone()));
        let pi = PodInfo::new(Arc::new(pod.clone()));
        let mut state = CycleState::new();
        let (_, s, _) = self.fw.run_pre_filter(&mut state, &pi, snapshot);
        assert!(s.is_success(), "{s}");
        let statuses = statuses.unwrap_or_else(|| {
            let mut m = NodeToStatus::default();
            for n in snapshot.list() {
                let s = self.fw.run_filter_plugins(&state, &pi, n);
                if !s.is_success() {
                    m.statuses.insert(n.name().to_string(), s);
                }
            }
            m
        });
        pl.post_filter(&self.fw, &mut state, &pi, snapshot, &statuses)
    }
}

fn key(p: &Pod) -> (String, String) {
    (p.metadata.namespace.clone().unwrap_or_else(|| "default".into()), p.metadata.name.clone().unwrap_or_default())
}

fn mk_pod(name: &str, prio: i32, node: Option<&str>, cpu: &str) -> Pod {
    let mut spec = json!({"priority": prio, "containers": [{"name": "c", "image": "i",
        "resources": {"requests": {"cpu": cpu}}}]});
    if let Some(n) = node {
        spec["nodeName"] = json!(n);
    }
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default", "uid": name}, "spec": spec}))
        .unwrap()
}

fn with_labels(mut p: Pod, labels: &[(&str, &str)]) -> Pod {
    p.metadata.labels = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    p
}

fn with_start(mut p: Pod, ts: &str) -> Pod {
    let mut status = p.status.take().unwrap_or_default();
    status.start_time = Some(serde_json::from_value(json!(ts)).unwrap());
    p.status = Some(status);
    p
}

fn mk_node(name: &str, cpu: &str, pods: &str) -> Node {
    serde_json::from_value(json!({"metadata": {"name": name},
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": pods}}}))
    .unwrap()
}

fn snapshot(nodes: Vec<Node>, pods: &[Pod]) -> Snapshot {
    let infos = nodes
        .into_iter()
        .map(|n| {
            let name = n.metadata.name.clone().unwrap();
            let mut ni = NodeInfo::new(Arc::new(n));
            for p in pods.iter().filter(|p| p.spec.as_ref().unwrap().node_name.as_deref() == Some(name.as_str())) {
                ni.add_pod(Arc::new(PodInfo::new(Arc::new(p.clone()))));
            }
            ni
        })
        .collect();
    Snapshot::from_node_infos(infos)
}

fn nominated(r: &Option<PostFilterResult>) -> Option<(String, NominatingMode)> {
    r.as_ref().and_then(|r| r.nominating_info.as_ref()).map(|n| (n.nominated_node_name.clone(), n.mode))
}

fn statuses(explicit: &[(&str, Status)]) -> NodeToStatus {
    let mut m = NodeToStatus::default();
    for (n, s) in explicit {
        m.statuses.insert(n.to_string(), s.clone());
    }
    m
}

#[test]
fn post_filter_table() {
    let u = || Status::new(Code::Unschedulable, Vec::<String>::new());
    let uau = || Status::new(Code::UnschedulableAndUnresolvable, Vec::<String>::new());
    type Case = (&'static str, Pod, Vec<Pod>, Vec<Node>, Option<NodeToStatus>, Option<&'static str>, &'static str);
    let cases: Vec<Case> = vec![
        (
            "pod with higher priority can be made schedulable",
            mk_pod("p", HIGH, None, "0"),
            vec![mk_pod("p1", LOW, Some("node1"), "0")],
            vec![mk_node("node1", "1", "1")],
            None,
            Some("node1"),
            "",
        ),
        (
            "pod with tied priority is still unschedulable",
            mk_pod("p", LOW, None, "0"),
            vec![mk_pod("p1", LOW, Some("node1"), "0")],
            vec![mk_node("node1", "1", "1")],
            None,
            Some(""),
            "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.",
        ),
        (
            "preemption respects UnschedulableAndUnresolvable statuses",
            mk_pod("p", HIGH, None, "0"),
            vec![mk_pod("p1", LOW, Some("node1"), "0")],
            vec![mk_node("node1", "1", "1")],
            Some(statuses(&[("node1", uau())])),
            Some(""),
            "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
        ),
        (
            "absent nodes are UnschedulableAndUnresolvable",
            mk_pod("p", HIGH, None, "0"),
            vec![mk_pod("p1", LOW, Some("node1"), "0")],
            vec![mk_node("node1", "1", "1")],
            Some(NodeToStatus::default()),
            Some(""),
            "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
        ),
        (
            "pod can be made schedulable on one node",
            mk_pod("p", MID, None, "0"),
            vec![mk_pod("p1", HIGH, Some("node1"), "0"), mk_pod("p2", LOW, Some("node2"), "0")],
            vec![mk_node("node1", "1", "1"), mk_node("node2", "1", "1")],
            None,
            Some("node2"),
            "",
        ),
        (
            "no candidate: not enough cpu even without the low priority pods",
            mk_pod("p", HIGH, None, "3"),
            vec![mk_pod("p1", LOW, Some("node1"), "0"), mk_pod("p2", LOW, Some("node2"), "0")],
            vec![mk_node("node1", "200m", "10"), mk_node("node2", "200m", "10")],
            // Explicit U statuses as upstream's table: our fit filter itself reports requests
            // beyond allocatable as unresolvable.
            Some(statuses(&[("node1", u()), ("node2", u())])),
            Some(""),
            "preemption: 0/2 nodes are available: 2 Insufficient cpu.",
        ),
        (
            "no candidate, mixed reasons",
            mk_pod("p", HIGH, None, "3"),
            vec![
                mk_pod("p1", HIGH, Some("node1"), "0"),
                mk_pod("p2", LOW, Some("node2"), "0"),
                mk_pod("p3", HIGH, Some("node3"), "0"),
            ],
            vec![mk_node("node1", "8", "1"), mk_node("node2", "200m", "10"), mk_node("node3", "8", "1")],
            Some(statuses(&[("node1", u()), ("node2", u()), ("node3", u())])),
            Some(""),
            "preemption: 0/3 nodes are available: 1 Insufficient cpu, 2 No preemption victims found for incoming pod.",
        ),
        (
            "no candidate, two unresolvable nodes",
            mk_pod("p", HIGH, None, "3"),
            vec![mk_pod("p1", LOW, Some("node1"), "0"), mk_pod("p2", LOW, Some("node2"), "0")],
            vec![
                mk_node("node1", "200m", "10"),
                mk_node("node2", "200m", "10"),
                mk_node("node3", "200m", "10"),
                mk_node("node4", "200m", "10"),
            ],
            Some(statuses(&[("node1", u()), ("node2", u()), ("node4", uau())])),
            Some(""),
            "preemption: 0/4 nodes are available: 2 Insufficient cpu, 2 Preemption is not helpful for scheduling.",
        ),
    ];
    for (name, pod, pods, nodes, st, want_node, want_msg) in cases {
        let env = Env::new();
        let snap = snapshot(nodes, &pods);
        let (r, s) = env.post_filter(&env.plugin(None), &pod, &snap, st);
        assert_eq!(nominated(&r).map(|n| n.0), want_node.map(str::to_string), "{name}");
        if want_msg.is_empty() {
            assert!(s.is_success(), "{name}: {s}");
        } else {
            assert_eq!((s.code(), s.message().as_str()), (Code::Unschedulable, want_msg), "{name}");
        }
    }
}

#[test]
fn min_highest_priority_node_wins_among_equal_pdb_violations() {
    let env = Env::new();
    env.add_pdb(json!({"metadata": {"name": "violating", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"pdb": "violating"}}}, "status": {"disruptionsAllowed": 0,
        "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}}));
    env.add_pdb(json!({"metadata": {"name": "non-violating", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"pdb": "ok"}}}, "status": {"disruptionsAllowed": i32::MAX,
        "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}}));
    let pods = vec![
        with_labels(mk_pod("p1", HIGH, Some("node1"), "0"), &[("pdb", "ok")]),
        with_labels(mk_pod("p2", LOW, Some("node1"), "0"), &[("pdb", "violating")]),
        with_labels(mk_pod("p3", MID, Some("node2"), "0"), &[("pdb", "violating")]),
    ];
    let snap = snapshot(vec![mk_node("node1", "1", "1"), mk_node("node2", "1", "1")], &pods);
    let (r, s) = env.post_filter(&env.plugin(None), &mk_pod("p", VERY_HIGH, None, "0"), &snap, None);
    assert!(s.is_success(), "{s}");
    assert_eq!(nominated(&r), Some(("node2".to_string(), NominatingMode::Override)));
}

#[test]
fn pdb_respecting_candidate_is_preferred() {
    let env = Env::new();
    env.add_pdb(json!({"metadata": {"name": "guard", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "guarded"}}}, "status": {"disruptionsAllowed": 0,
        "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}}));
    // node1's victim is protected but less important; node2's is unprotected.
    let pods = vec![
        with_labels(mk_pod("guarded", LOW, Some("node1"), "0"), &[("app", "guarded")]),
        with_labels(mk_pod("free", MID, Some("node2"), "0"), &[("app", "free")]),
    ];
    let snap = snapshot(vec![mk_node("node1", "1", "1"), mk_node("node2", "1", "1")], &pods);
    let (r, s) = env.post_filter(&env.plugin(None), &mk_pod("p", HIGH, None, "0"), &snap, None);
    assert!(s.is_success());
    assert_eq!(nominated(&r).unwrap().0, "node2");
}

#[test]
fn preemption_policy_never_and_terminating_victims_make_the_pod_ineligible() {
    let env = Env::new();
    let snap = snapshot(vec![mk_node("node1", "1", "1")], &[mk_pod("p1", LOW, Some("node1"), "0")]);
    let mut never = mk_pod("p", HIGH, None, "0");
    never.spec.as_mut().unwrap().preemption_policy = Some("Never".into());
    let (r, s) = env.post_filter(&env.plugin(None), &never, &snap, None);
    assert!(r.is_none());
    assert_eq!(
        (s.code(), s.message()),
        (Code::Unschedulable, "preemption: not eligible due to preemptionPolicy=Never.".into())
    );

    let mut victim = mk_pod("p1", LOW, Some("node1"), "0");
    victim.metadata.deletion_timestamp = Some(serde_json::from_value(json!("2024-01-01T00:00:00Z")).unwrap());
    victim.status = Some(
        serde_json::from_value(json!({"conditions": [{"type": "DisruptionTarget", "status": "True",
            "reason": "PreemptionByScheduler"}]}))
        .unwrap(),
    );
    let snap = snapshot(vec![mk_node("node1", "1", "1")], &[victim]);
    let mut nominated_pod = mk_pod("p", HIGH, None, "0");
    nominated_pod.status = Some(serde_json::from_value(json!({"nominatedNodeName": "node1"})).unwrap());
    let (r, s) = env.post_filter(&env.plugin(None), &nominated_pod, &snap, None);
    assert!(r.is_none());
    assert_eq!(s.message(), "preemption: not eligible due to a terminating pod on the nominated node.");

    // An unresolvable nominated node makes the pod eligible again (and then no node helps).
    let st = statuses(&[("node1", Status::unresolvable("gone"))]);
    let (r, s) = env.post_filter(&env.plugin(None), &nominated_pod, &snap, Some(st));
    assert_eq!(s.message(), "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.");
    assert_eq!(nominated(&r), Some((String::new(), NominatingMode::Override)));
}

#[test]
fn lower_priority_small_pod_is_reprieved() {
    let env = Env::new();
    let pods = vec![mk_pod("mid", MID, Some("n"), "500m"), mk_pod("low", LOW, Some("n"), "200m")];
    let snap = snapshot(vec![mk_node("n", "1", "10")], &pods);
    let pi = PodInfo::new(Arc::new(mk_pod("p", HIGH, None, "600m")));
    let mut state = CycleState::new();
    let _ = env.fw.run_pre_filter(&mut state, &pi, &snap);
    let mut node = NodeInfo::clone(&snap.list()[0]);
    let (victims, violations) = select_victims_on_node(&env.fw, &mut state, &pi, &mut node, &[], &[]).unwrap();
    assert_eq!(victims.iter().map(|v| v.name()).collect::<Vec<_>>(), ["mid"]);
    assert_eq!(violations, 0);
    // The scratch node keeps the reprieved pod only.
    assert_eq!(node.requested.milli_cpu, 200);
}

#[test]
fn victims_are_ordered_by_priority_then_start_time() {
    let env = Env::new();
    let pods = vec![
        with_start(mk_pod("late", MID, Some("n"), "400m"), "2024-01-02T00:00:00Z"),
        mk_pod("unstarted", MID, Some("n"), "400m"),
        with_start(mk_pod("early", MID, Some("n"), "400m"), "2024-01-01T00:00:00Z"),
        mk_pod("low", LOW, Some("n"), "400m"),
    ];
    let snap = snapshot(vec![mk_node("n", "1600m", "10")], &pods);
    let pi = PodInfo::new(Arc::new(mk_pod("p", HIGH, None, "1600m")));
    let mut state = CycleState::new();
    let _ = env.fw.run_pre_filter(&mut state, &pi, &snap);
    let mut node = NodeInfo::clone(&snap.list()[0]);
    let (victims, _) = select_victims_on_node(&env.fw, &mut state, &pi, &mut node, &[], &[]).unwrap();
    assert_eq!(victims.iter().map(|v| v.name()).collect::<Vec<_>>(), ["early", "late", "unstarted", "low"]);
}

#[test]
fn pdb_violating_victims_are_reprieved_first() {
    let env = Env::new();
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({"metadata": {"name": "g", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "g"}}}, "status": {"disruptionsAllowed": 0,
        "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}}))
    .unwrap();
    // Either pod alone makes room; the protected one is tried first and stays.
    let pods = vec![
        mk_pod("plain", MID, Some("n"), "500m"),
        with_labels(mk_pod("guarded", LOW, Some("n"), "500m"), &[("app", "g")]),
    ];
    let snap = snapshot(vec![mk_node("n", "1", "10")], &pods);
    let pi = PodInfo::new(Arc::new(mk_pod("p", HIGH, None, "500m")));
    let mut state = CycleState::new();
    let _ = env.fw.run_pre_filter(&mut state, &pi, &snap);
    let mut node = NodeInfo::clone(&snap.list()[0]);
    let (victims, violations) =
        select_victims_on_node(&env.fw, &mut state, &pi, &mut node, &[Arc::new(pdb)], &[]).unwrap();
    assert_eq!(victims.iter().map(|v| v.name()).collect::<Vec<_>>(), ["plain"]);
    assert_eq!(violations, 0);
}

#[test]
fn pdb_split_consumes_budgets_and_skips_disrupted_pods() {
    let pdb = |name: &str, sel: Value, allowed: i32, disrupted: Value| -> Arc<PodDisruptionBudget> {
        Arc::new(
            serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default"},
                "spec": {"selector": sel}, "status": {"disruptionsAllowed": allowed, "disruptedPods": disrupted,
                "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}}))
            .unwrap(),
        )
    };
    let pi = |name: &str, labels: &[(&str, &str)]| {
        Arc::new(PodInfo::new(Arc::new(with_labels(mk_pod(name, 0, Some("n"), "0"), labels))))
    };
    let pods = vec![
        pi("a", &[("app", "x")]),
        pi("b", &[("app", "x")]),
        pi("c", &[("app", "x")]),
        pi("d", &[("app", "y")]),
        pi("e", &[]),
    ];
    let names = |v: &[Arc<PodInfo>]| v.iter().map(|p| p.name().to_string()).collect::<Vec<_>>();
    // One disruption allowed: the first matching pod uses it, the rest violate.
    let (v, nv) = split_by_pdb_violation(&pods, &[pdb("x", json!({"matchLabels": {"app": "x"}}), 1, json!({}))]);
    assert_eq!(
        (names(&v), names(&nv)),
        (vec!["b".to_string(), "c".into()], vec!["a".to_string(), "d".into(), "e".into()])
    );
    // A pod already in disruptedPods does not consume the budget.
    let (v, _) = split_by_pdb_violation(
        &pods,
        &[pdb("x", json!({"matchLabels": {"app": "x"}}), 1, json!({"a": "2024-01-01T00:00:00Z"}))],
    );
    assert_eq!(names(&v), ["c"]);
    // An empty selector matches nothing.
    let (v, _) = split_by_pdb_violation(&pods, &[pdb("all", json!({}), 0, json!({}))]);
    assert!(v.is_empty());
    // Other namespaces never match.
    let mut other = (*pdb("x", json!({"matchLabels": {"app": "x"}}), 0, json!({}))).clone();
    other.metadata.namespace = Some("other".into());
    let (v, _) = split_by_pdb_violation(&pods, &[Arc::new(other)]);
    assert!(v.is_empty());
}

fn cand(name: &str, violations: i64, victims: &[(i32, Option<&str>)]) -> Candidate {
    let victims = victims
        .iter()
        .enumerate()
        .map(|(i, (prio, start))| {
            let p = mk_pod(&format!("{name}-{i}"), *prio, Some(name), "0");
            let p = match start {
                Some(t) => with_start(p, t),
                None => p,
            };
            Arc::new(PodInfo::new(Arc::new(p)))
        })
        .collect();
    Candidate { name: name.to_string(), victims, num_pdb_violations: violations }
}

#[test]
fn candidate_selection_criteria_in_order() {
    let t1 = Some("2024-01-01T00:00:00Z");
    let t2 = Some("2024-01-02T00:00:00Z");
    let cases: Vec<(&str, Vec<Candidate>, &str)> = vec![
        ("fewest PDB violations", vec![cand("a", 1, &[(LOW, t1)]), cand("b", 0, &[(MID, t1), (MID, t1)])], "b"),
        ("lowest highest priority", vec![cand("a", 0, &[(MID, t1)]), cand("b", 0, &[(LOW, t1), (LOW, t1)])], "b"),
        ("smallest priority sum", vec![cand("a", 0, &[(MID, t1), (LOW, t1)]), cand("b", 0, &[(MID, t1)])], "b"),
        (
            "negative priorities still count per pod",
            vec![cand("a", 0, &[(-10, t1), (-10, t1)]), cand("b", 0, &[(-10, t1)])],
            "b",
        ),
        (
            "fewest victims",
            vec![cand("a", 0, &[(MID, t1), (LOW, t1), (LOW, t1)]), cand("b", 0, &[(MID, t1), (LOW, t1)])],
            "b",
        ),
        (
            "latest start among the highest-priority victims",
            vec![cand("a", 0, &[(MID, t1), (LOW, t2)]), cand("b", 0, &[(MID, t2), (LOW, t1)])],
            "b",
        ),
        ("unstarted counts as now", vec![cand("a", 0, &[(MID, t2)]), cand("b", 0, &[(MID, None)])], "b"),
        ("full tie takes the first", vec![cand("a", 0, &[(MID, t1)]), cand("b", 0, &[(MID, t1)])], "a"),
    ];
    for (name, cands, want) in cases {
        assert_eq!(cands[pick_one_node_for_preemption(&cands)].name, want, "{name}");
    }
}

#[test]
fn num_candidates_and_offset() {
    let env = Env::new();
    let cases = [
        // (percentage, absolute, nodes, want)
        (10, 100, 10, 10),
        (10, 100, 1000, 100),
        (40, 10, 1000, 400),
        (0, 5, 3, 3),
        (50, 0, 7, 3),
        (10, 1, 5, 1),
    ];
    for (pct, abs, nodes, want) in cases {
        let pl = env.plugin(Some(json!({"minCandidateNodesPercentage": pct, "minCandidateNodesAbsolute": abs})));
        assert_eq!(pl.calculate_num_candidates(nodes), want, "{pct}% {abs} of {nodes}");
    }
    let pl = DefaultPreemption::new(None, &env.handle).unwrap();
    for n in 1..20 {
        assert!(pl.offset_and_num_candidates(n).0 < n);
    }
    let pl = DefaultPreemption::new(None, &env.handle).unwrap().with_fixed_offset(7);
    assert_eq!(pl.offset_and_num_candidates(5), (2, 5));
}

#[test]
fn dry_run_stops_after_enough_candidates_walking_from_the_offset() {
    let env = Env::new();
    let pods = vec![mk_pod("v1", LOW, Some("node1"), "0"), mk_pod("v2", LOW, Some("node2"), "0")];
    let snap = snapshot(vec![mk_node("node1", "1", "1"), mk_node("node2", "1", "1")], &pods);
    let args = json!({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 1});
    for (offset, want) in [(0, "node1"), (1, "node2")] {
        let pl = DefaultPreemption::new(Some(&args), &env.handle).unwrap().with_fixed_offset(offset);
        let (r, s) = env.post_filter(&pl, &mk_pod("p", HIGH, None, "0"), &snap, None);
        assert!(s.is_success());
        assert_eq!(nominated(&r).unwrap().0, want);
    }
}

#[test]
fn actuation_marks_deletes_records_and_gates_until_done() {
    let env = Env::new();
    let pods = vec![mk_pod("v1", LOW, Some("node1"), "500m"), mk_pod("v2", LOW, Some("node1"), "500m")];
    for p in &pods {
        env.view.pods.lock().unwrap().insert(key(p), Arc::new(p.clone()));
    }
    // A lower-priority pod nominated to the node loses its nomination; a higher one keeps it.
    let mut low_nominee = mk_pod("low-nominee", LOW, None, "0");
    low_nominee.status = Some(serde_json::from_value(json!({"nominatedNodeName": "node1"})).unwrap());
    let mut high_nominee = mk_pod("high-nominee", VERY_HIGH, None, "0");
    high_nominee.status = Some(serde_json::from_value(json!({"nominatedNodeName": "node1"})).unwrap());
    env.view.nominated.lock().unwrap().insert(
        "node1".into(),
        vec![Arc::new(PodInfo::new(Arc::new(low_nominee))), Arc::new(PodInfo::new(Arc::new(high_nominee)))],
    );
    let snap = snapshot(vec![mk_node("node1", "2", "10")], &pods);
    let pl = env.plugin(None);
    let preemptor = mk_pod("p", HIGH, None, "2");
    let (r, s) = env.post_filter(&pl, &preemptor, &snap, None);
    assert!(s.is_success(), "{s}");
    assert_eq!(nominated(&r), Some(("node1".to_string(), NominatingMode::Override)));
    let pi = PodInfo::new(Arc::new(preemptor));
    assert_eq!(pl.pre_enqueue(&pi).message(), WAITING_FOR_PREEMPTION);
    assert_eq!(pl.pre_enqueue(&pi).code(), Code::UnschedulableAndUnresolvable);
    assert!(env.calls().is_empty(), "evictions run in the background");

    env.run_spawned();
    let calls = env.calls();
    assert_eq!(calls[0], r#"patch default/low-nominee {"status":{"nominatedNodeName":null}}"#);
    let v1_patch = calls.iter().find(|c| c.starts_with("patch default/v1 ")).unwrap();
    let patch: Value = serde_json::from_str(v1_patch.trim_start_matches("patch default/v1 ")).unwrap();
    let cond = &patch["status"]["conditions"][0];
    assert_eq!(cond["type"], "DisruptionTarget");
    assert_eq!(cond["status"], "True");
    assert_eq!(cond["reason"], "PreemptionByScheduler");
    assert_eq!(cond["message"], "default-scheduler: preempting to accommodate a higher priority pod");
    let pos = |c: &str| calls.iter().position(|x| x == c).unwrap();
    assert!(pos("delete default/v1 None") > calls.iter().position(|x| x.starts_with("patch default/v1 ")).unwrap());
    assert!(pos("delete default/v2 None") > 0);
    assert_eq!(calls.len(), 5);
    let mut events = env.events();
    events.sort();
    assert_eq!(
        events,
        [
            "v1 Normal Preempted Preempting related=p Preempted by pod p on node node1",
            "v2 Normal Preempted Preempting related=p Preempted by pod p on node node1",
        ]
    );
    assert!(pl.pre_enqueue(&pi).is_success());
    // Successful evictions leave the requeue to the victims' deletion events, as upstream: the
    // victims are still in the informer's view, so their events are yet to come.
    assert!(env.view.activated.lock().unwrap().is_empty());
    assert!(env.view.released.lock().unwrap().is_empty());
    assert_eq!(pl.metrics().victims.load(Ordering::Relaxed), 2);
    assert_eq!(pl.metrics().attempts.load(Ordering::Relaxed), 1);
}

#[test]
fn victims_gone_before_their_eviction_release_a_preemptor_held_by_the_gate() {
    // The victims' deletion events already arrived (an earlier attempt's eviction deleted them
    // at once) while the preemptor was gated: no event is left to requeue it.
    let env = Env::new();
    let pods = vec![mk_pod("v1", LOW, Some("node1"), "500m"), mk_pod("v2", LOW, Some("node1"), "500m")];
    let snap = snapshot(vec![mk_node("node1", "1", "10")], &pods);
    let pl = env.plugin(None);
    let (_, s) = env.post_filter(&pl, &mk_pod("p", HIGH, None, "1"), &snap, None);
    assert!(s.is_success(), "{s}");
    env.run_spawned();
    assert_eq!(*env.view.released.lock().unwrap(), ["p by DefaultPreemption"]);
    assert!(env.view.activated.lock().unwrap().is_empty(), "not an extra attempt");
    assert!(pl.pre_enqueue(&PodInfo::new(Arc::new(mk_pod("p", HIGH, None, "1")))).is_success());
}

#[test]
fn gate_lifts_once_the_last_victim_is_gone_and_failures_reactivate() {
    let env = Env::with_client(FakeClient { fail_delete_of: Some("v1".into()), ..Default::default() });
    let pods = vec![mk_pod("v1", LOW, Some("node1"), "500m"), mk_pod("v2", LOW, Some("node1"), "500m")];
    let snap = snapshot(vec![mk_node("node1", "1", "10")], &pods);
    let pl = env.plugin(None);
    let (_, s) = env.post_filter(&pl, &mk_pod("p", HIGH, None, "1"), &snap, None);
    assert!(s.is_success());
    env.run_spawned();
    // The first victim failed, so the last one was skipped and the preemptor re-activated.
    assert!(!env.calls().iter().any(|c| c.starts_with("delete default/v2")), "{:?}", env.calls());
    assert_eq!(*env.view.activated.lock().unwrap(), ["p"]);
    let pi = PodInfo::new(Arc::new(mk_pod("p", HIGH, None, "1")));
    assert!(pl.pre_enqueue(&pi).is_success());

    // While the last victim's eviction is pending, the gate follows that victim's existence.
    let ex = pl.executor();
    assert!(!ex.is_pod_running_preemption("nobody"));
}

#[test]
fn already_terminating_victims_are_not_deleted_again() {
    let env = Env::new();
    let mut v = mk_pod("v1", LOW, Some("node1"), "1");
    v.metadata.deletion_timestamp = Some(serde_json::from_value(json!("2024-01-01T00:00:00Z")).unwrap());
    let snap = snapshot(vec![mk_node("node1", "1", "10")], &[v]);
    let pl = env.plugin(None);
    let (r, s) = env.post_filter(&pl, &mk_pod("p", HIGH, None, "1"), &snap, None);
    assert!(s.is_success());
    assert_eq!(nominated(&r).unwrap().0, "node1");
    assert!(env.deferred.0.lock().unwrap().is_empty());
    assert!(pl.pre_enqueue(&PodInfo::new(Arc::new(mk_pod("p", HIGH, None, "1")))).is_success());
}

#[test]
fn disruption_target_patch_is_skipped_when_already_present() {
    let msg = "default-scheduler: preempting to accommodate a higher priority pod";
    let mut p = mk_pod("v", LOW, Some("n"), "0");
    p.metadata.generation = Some(3);
    let patch = executor::disruption_target_patch(&p, msg).unwrap();
    assert_eq!(patch["status"]["conditions"][0]["observedGeneration"], 3);
    p.status = Some(
        serde_json::from_value(json!({"conditions": [{"type": "DisruptionTarget", "status": "True",
            "reason": "PreemptionByScheduler", "message": msg, "observedGeneration": 3,
            "lastTransitionTime": "2024-01-01T00:00:00Z"}]}))
        .unwrap(),
    );
    assert!(executor::disruption_target_patch(&p, msg).is_none());
}

#[test]
fn args_events_and_registration() {
    let h = Handle::for_tests();
    assert_eq!(DefaultPreemption::new(None, &h).unwrap().args(), &DefaultPreemptionArgs::default());
    assert!(new(Some(&json!({"minCandidateNodesPercentage": 5, "bogus": 1})), &h).is_err());
    let err = new(Some(&json!({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0})), &h).err().unwrap();
    assert_eq!(
        err,
        "[minCandidateNodesPercentage: Invalid value: 0: cannot be zero at the same time as minCandidateNodesAbsolute, minCandidateNodesAbsolute: Invalid value: 0: cannot be zero at the same time as minCandidateNodesPercentage]"
    );
    let err = new(Some(&json!({"minCandidateNodesPercentage": 101})), &h).err().unwrap();
    assert_eq!(err, "minCandidateNodesPercentage: Invalid value: 101: not in valid range [0, 100]");
    let err = new(Some(&json!({"minCandidateNodesAbsolute": -1})), &h).err().unwrap();
    assert_eq!(err, "minCandidateNodesAbsolute: Invalid value: -1: not in valid range [0, inf)");
    let a = DefaultPreemptionArgs::decode(Some(&json!({"kind": "DefaultPreemptionArgs",
        "apiVersion": "kubescheduler.config.k8s.io/v1", "minCandidateNodesPercentage": null})))
    .unwrap();
    assert_eq!(a, DefaultPreemptionArgs::default());

    let pl = DefaultPreemption::new(None, &h).unwrap();
    let events = pl.events_to_register().unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].event.label(), "PodDelete");
    let hint = events[0].hint.as_ref().unwrap();
    assert_eq!(hint(&Pod::default(), None, None).unwrap(), QueueingHint::QueueSkip);

    let env = Env::new();
    use ksched_framework::ExtensionPoint as E;
    assert_eq!(env.fw.list_plugins(E::PostFilter), ["DefaultPreemption"]);
    assert_eq!(env.fw.list_plugins(E::PreEnqueue), ["DefaultPreemption"]);
}

type Answer = Box<dyn Fn(&NodeToVictims, &Snapshot) -> Result<NodeToVictims, String> + Send + Sync>;

/// One preempt call's victims as (node, victim names, PDB violations), by node.
type Sent = Vec<(String, Vec<String>, i64)>;

/// An extender whose preempt verb answers with `answer` and records what it was sent.
struct FakeExtender {
    name: &'static str,
    ignorable: bool,
    preempt: bool,
    interested: bool,
    answer: Answer,
    seen: Mutex<Vec<Sent>>,
}

impl FakeExtender {
    fn new(
        name: &'static str,
        answer: impl Fn(&NodeToVictims, &Snapshot) -> Result<NodeToVictims, String> + Send + Sync + 'static,
    ) -> Self {
        FakeExtender {
            name,
            ignorable: false,
            preempt: true,
            interested: true,
            answer: Box::new(answer),
            seen: Mutex::default(),
        }
    }

    fn ignorable(mut self) -> Self {
        self.ignorable = true;
        self
    }

    /// What each call was sent.
    fn seen(&self) -> Vec<Sent> {
        self.seen.lock().unwrap().clone()
    }
}

impl Extender for FakeExtender {
    fn name(&self) -> &str {
        self.name
    }
    fn is_ignorable(&self) -> bool {
        self.ignorable
    }
    fn supports_preemption(&self) -> bool {
        self.preempt
    }
    fn is_interested(&self, _: &Pod) -> bool {
        self.interested
    }
    fn process_preemption(&self, _: &Pod, victims: &NodeToVictims, nodes: &Snapshot) -> Result<NodeToVictims, String> {
        self.seen.lock().unwrap().push(summary(victims));
        (self.answer)(victims, nodes)
    }
}

fn summary(m: &NodeToVictims) -> Sent {
    let mut out: Vec<_> = m
        .iter()
        .map(|(n, v)| (n.clone(), v.pods.iter().map(|p| p.name().to_string()).collect(), v.num_pdb_violations))
        .collect();
    out.sort();
    out
}

/// An answer keeping only `nodes` of the extender's input, with their victims.
fn keep(nodes: &'static [&'static str]) -> impl Fn(&NodeToVictims, &Snapshot) -> Result<NodeToVictims, String> {
    move |m, _| Ok(m.iter().filter(|(n, _)| nodes.contains(&n.as_str())).map(|(n, v)| (n.clone(), v.clone())).collect())
}

/// The victims `names` of `node`, taken from the snapshot as an extender's answer resolves them.
fn victims_on(snap: &Snapshot, node: &str, names: &[&str]) -> Victims {
    let ni = snap.get(node).unwrap();
    let pods = names.iter().map(|n| ni.pods.iter().find(|p| p.name() == *n).unwrap().clone()).collect();
    Victims { pods, num_pdb_violations: 0 }
}

impl Env {
    fn plugin_with_extenders(&self, extenders: &[&Arc<FakeExtender>]) -> DefaultPreemption {
        let mut handle = self.handle.clone();
        handle.extenders = extenders.iter().map(|e| (*e).clone() as Arc<dyn Extender>).collect();
        DefaultPreemption::new(None, &handle).unwrap().with_fixed_offset(0)
    }
}

/// Two full nodes with one low-priority pod each; without extenders node1 wins the tie.
fn two_equal_nodes() -> (Snapshot, Pod) {
    let pods = vec![mk_pod("v1", LOW, Some("node1"), "1"), mk_pod("v2", LOW, Some("node2"), "1")];
    (snapshot(vec![mk_node("node1", "1", "10"), mk_node("node2", "1", "10")], &pods), mk_pod("p", HIGH, None, "1"))
}

fn deletions(env: &Env) -> Vec<String> {
    env.calls().into_iter().filter(|c| c.starts_with("delete ")).collect()
}

#[test]
fn extender_narrows_the_candidates() {
    let env = Env::new();
    let (snap, pod) = two_equal_nodes();
    let (r, s) = env.post_filter(&env.plugin(None), &pod, &snap, None);
    assert!(s.is_success(), "{s}");
    assert_eq!(nominated(&r).unwrap().0, "node1", "the tie goes to node1 without extenders");

    let env = Env::new();
    let ext = Arc::new(FakeExtender::new("drop-node1", keep(&["node2"])));
    let (r, s) = env.post_filter(&env.plugin_with_extenders(&[&ext]), &pod, &snap, None);
    assert!(s.is_success(), "{s}");
    assert_eq!(nominated(&r), Some(("node2".to_string(), NominatingMode::Override)));
    let sent = vec![("node1".to_string(), vec!["v1".to_string()], 0), ("node2".to_string(), vec!["v2".to_string()], 0)];
    assert_eq!(ext.seen(), [sent]);
    env.run_spawned();
    assert_eq!(deletions(&env), ["delete default/v2 None"]);
}

#[test]
fn extenders_are_chained_in_order_and_their_victims_replace_the_dry_run_ones() {
    let env = Env::new();
    // The dry run evicts v1b (v1a is reprieved first); the extender prefers to evict v1a.
    let pods = vec![mk_pod("v1a", LOW, Some("node1"), "500m"), mk_pod("v1b", LOW, Some("node1"), "500m")];
    let snap = snapshot(vec![mk_node("node1", "1", "10")], &pods);
    let first = Arc::new(FakeExtender::new("first", |_, snap| {
        Ok(NodeToVictims::from([(
            "node1".to_string(),
            Victims { num_pdb_violations: 3, ..victims_on(snap, "node1", &["v1a"]) },
        )]))
    }));
    let second = Arc::new(FakeExtender::new("second", keep(&["node1"])));
    let pl = env.plugin_with_extenders(&[&first, &second]);
    let (r, s) = env.post_filter(&pl, &mk_pod("p", HIGH, None, "500m"), &snap, None);
    assert!(s.is_success(), "{s}");
    assert_eq!(nominated(&r).unwrap().0, "node1");
    assert_eq!(first.seen(), [vec![("node1".to_string(), vec!["v1b".to_string()], 0)]]);
    assert_eq!(second.seen(), [vec![("node1".to_string(), vec!["v1a".to_string()], 3)]], "sees the first one's answer");
    env.run_spawned();
    assert_eq!(deletions(&env), ["delete default/v1a None"]);
}

#[test]
fn extender_errors_skip_ignorable_extenders_and_fail_otherwise() {
    let (snap, pod) = two_equal_nodes();
    let env = Env::new();
    let broken = Arc::new(FakeExtender::new("broken", |_, _| Err("extender down".into())).ignorable());
    let narrowing = Arc::new(FakeExtender::new("narrowing", keep(&["node2"])));
    let (r, s) = env.post_filter(&env.plugin_with_extenders(&[&broken, &narrowing]), &pod, &snap, None);
    assert!(s.is_success(), "{s}");
    assert_eq!(nominated(&r).unwrap().0, "node2");
    assert_eq!(broken.seen().len(), 1);
    assert_eq!(narrowing.seen().len(), 1, "the next extender still runs, on the unchanged candidates");

    let env = Env::new();
    let broken = Arc::new(FakeExtender::new("broken", |_, _| Err("extender down".into())));
    let later = Arc::new(FakeExtender::new("later", keep(&["node2"])));
    let (r, s) = env.post_filter(&env.plugin_with_extenders(&[&broken, &later]), &pod, &snap, None);
    assert!(r.is_none());
    assert_eq!(s.code(), Code::Error);
    assert_eq!(s.message(), "preemption: extender down");
    assert!(later.seen().is_empty());
    env.run_spawned();
    assert!(env.calls().is_empty(), "nothing is evicted");
}

#[test]
fn nodes_without_victims_in_an_answer_are_an_error_unless_the_extender_is_ignorable() {
    let (snap, pod) = two_equal_nodes();
    let no_victims = |_: &NodeToVictims, snap: &Snapshot| {
        Ok(NodeToVictims::from([
            ("node1".to_string(), Victims::default()),
            ("node2".to_string(), victims_on(snap, "node2", &["v2"])),
        ]))
    };
    let env = Env::new();
    let ext = Arc::new(FakeExtender::new("strict", no_victims));
    let (r, s) = env.post_filter(&env.plugin_with_extenders(&[&ext]), &pod, &snap, None);
    assert!(r.is_none());
    assert_eq!(s.code(), Code::Error);
    assert_eq!(s.message(), r#"preemption: expected at least one victim pod on node "node1""#);

    let env = Env::new();
    let ext = Arc::new(FakeExtender::new("lenient", no_victims).ignorable());
    let (r, s) = env.post_filter(&env.plugin_with_extenders(&[&ext]), &pod, &snap, None);
    assert!(s.is_success(), "{s}");
    assert_eq!(nominated(&r).unwrap().0, "node2", "the node without victims is dropped");
}

#[test]
fn extenders_without_preempt_verb_or_interest_are_not_called() {
    let (snap, pod) = two_equal_nodes();
    let env = Env::new();
    let mut uninterested = FakeExtender::new("uninterested", keep(&["node2"]));
    uninterested.interested = false;
    let mut no_verb = FakeExtender::new("no-verb", keep(&["node2"]));
    no_verb.preempt = false;
    let (uninterested, no_verb) = (Arc::new(uninterested), Arc::new(no_verb));
    let (r, s) = env.post_filter(&env.plugin_with_extenders(&[&uninterested, &no_verb]), &pod, &snap, None);
    assert!(s.is_success(), "{s}");
    assert_eq!(nominated(&r).unwrap().0, "node1");
    assert!(uninterested.seen().is_empty() && no_verb.seen().is_empty());
}

#[test]
fn an_empty_answer_ends_preemption_without_candidates() {
    let (snap, pod) = two_equal_nodes();
    let env = Env::new();
    let none = Arc::new(FakeExtender::new("none", |_, _| Ok(NodeToVictims::new())));
    let later = Arc::new(FakeExtender::new("later", keep(&["node1"])));
    let pl = env.plugin_with_extenders(&[&none, &later]);
    let (r, s) = env.post_filter(&pl, &pod, &snap, None);
    assert!(r.is_none(), "the nomination is left alone");
    assert_eq!(s.code(), Code::Unschedulable);
    assert_eq!(s.message(), "preemption: no candidate node for preemption");
    assert!(later.seen().is_empty(), "no extender runs after the candidates are gone");
    env.run_spawned();
    assert!(env.calls().is_empty());
    assert!(pl.pre_enqueue(&PodInfo::new(Arc::new(pod))).is_success(), "nothing to wait for");
}

#[test]
fn candidates_keep_their_walk_order_and_added_nodes_come_last() {
    let ext: Arc<dyn Extender> = Arc::new(FakeExtender::new("reorder", |m, snap| {
        let mut out = m.clone();
        out.insert("node0".to_string(), victims_on(snap, "node0", &["v0"]));
        Ok(out)
    }));
    let pods = vec![mk_pod("v0", LOW, Some("node0"), "0")];
    let snap = snapshot(vec![mk_node("node0", "1", "10")], &pods);
    let found = vec![cand("c", 0, &[(LOW, None)]), cand("a", 0, &[(LOW, None)]), cand("b", 0, &[(LOW, None)])];
    let out = extenders::call_extenders(&[ext], &mk_pod("p", HIGH, None, "0"), found, &snap).unwrap();
    let names: Vec<&str> = out.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["c", "a", "b", "node0"]);
    assert_eq!(out[3].victims[0].name(), "v0");
}
