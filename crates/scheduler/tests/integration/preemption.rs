//! Preemption end to end: the embedded API server, our scheduler with the default configuration,
//! a high-priority pod that only fits by evicting lower-priority ones.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use ksched_apiserver::{ApiServer, RunningServer, ServerConfig, Store};
use ksched_framework::pod::Pod;
use ksched_scheduler::app::{self, RunningScheduler};
use ksched_scheduler::config;
use kube::api::{Api, WatchEvent, WatchParams};
use serde_json::{json, Value};

/// One watch event, reduced to what the assertions need.
#[derive(Debug, Clone)]
struct Seen {
    kind: String,
    name: String,
    marked: bool,
    nnn: String,
    bound: String,
}

struct Cluster {
    server: RunningServer,
    store: Store,
    client: Option<kube::Client>,
    scheduler: Option<RunningScheduler>,
}

impl Cluster {
    async fn start() -> Cluster {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        let listen: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let server = ApiServer::start(ServerConfig { listen, ..ServerConfig::default() }).await.unwrap();
        let store = server.store();
        priority_classes(&store);
        let kc = kube::config::Kubeconfig::from_yaml(&server.kubeconfig_yaml()).unwrap();
        let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await.unwrap();
        let client = kube::Client::try_from(cfg).unwrap();
        Cluster { server, store, client: Some(client), scheduler: None }
    }

    async fn run_scheduler(&mut self) {
        let client = self.client.clone().unwrap();
        let registry = ksched_plugins::in_tree_registry();
        self.scheduler = Some(app::start(client, &config::default_config(), &registry).await.unwrap());
    }

    /// Records, per pod name, whether any watch event showed it with DisruptionTarget=True, and
    /// the names of deleted pods, in order.
    fn watch_pods(&self) -> Arc<Mutex<Vec<Seen>>> {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let api: Api<Pod> = Api::namespaced(self.client.clone().unwrap(), "default");
        let out = seen.clone();
        tokio::spawn(async move {
            let stream = api.watch(&WatchParams::default(), "0").await.unwrap();
            let mut stream = stream.boxed();
            while let Ok(Some(ev)) = stream.try_next().await {
                let (kind, pod) = match ev {
                    WatchEvent::Added(p) => ("ADDED", p),
                    WatchEvent::Modified(p) => ("MODIFIED", p),
                    WatchEvent::Deleted(p) => ("DELETED", p),
                    _ => continue,
                };
                let marked = pod.status.as_ref().and_then(|s| s.conditions.as_ref()).is_some_and(|cs| {
                    cs.iter().any(|c| {
                        c.type_ == "DisruptionTarget"
                            && c.status == "True"
                            && c.reason.as_deref() == Some("PreemptionByScheduler")
                    })
                });
                let nnn = pod.status.as_ref().and_then(|s| s.nominated_node_name.clone()).unwrap_or_default();
                let bound = pod.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default();
                let name = pod.metadata.name.clone().unwrap_or_default();
                out.lock().unwrap().push(Seen { kind: kind.to_string(), name, marked, nnn, bound });
            }
        });
        seen
    }

    fn pod(&self, name: &str) -> Option<Value> {
        self.store.get("v1", "Pod", Some("default"), name)
    }

    fn node_of(&self, name: &str) -> Option<String> {
        self.pod(name)?.pointer("/spec/nodeName").and_then(Value::as_str).map(str::to_string)
    }

    fn events_for(&self, name: &str, reason: &str) -> Vec<Value> {
        self.store
            .list("events.k8s.io/v1", "Event", None)
            .into_iter()
            .filter(|e| e.pointer("/regarding/name").and_then(Value::as_str) == Some(name) && e["reason"] == reason)
            .collect()
    }

    async fn wait_for<T>(&self, what: &str, timeout: Duration, mut f: impl FnMut(&Cluster) -> Option<T>) -> T {
        let start = Instant::now();
        loop {
            if let Some(v) = f(self) {
                return v;
            }
            assert!(start.elapsed() < timeout, "timed out after {timeout:?} waiting for {what}");
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    async fn stop(mut self) {
        if let Some(s) = self.scheduler.take() {
            s.shutdown(Duration::from_secs(5)).await;
        }
        self.server.shutdown().await;
    }
}

/// PriorityClasses `prio-<n>` for the priorities the tests use (admission resolves them).
fn priority_classes(store: &Store) {
    for v in [10, 100, 1000, 2000] {
        store
            .create(json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                "metadata": {"name": format!("prio-{v}")}, "value": v}))
            .unwrap();
    }
}

fn node(name: &str, cpu: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": cpu, "memory": "4Gi", "pods": "110"},
                   "capacity": {"cpu": cpu, "memory": "4Gi", "pods": "110"}}})
}

fn pod(name: &str, cpu: &str, priority: i32, node: Option<&str>, labels: Value) -> Value {
    let mut p = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {"priorityClassName": format!("prio-{priority}"), "containers": [{"name": "c", "image": "busybox",
            "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]}});
    if let Some(n) = node {
        p["spec"]["nodeName"] = json!(n);
    }
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn high_priority_pod_preempts_the_least_important_victims_and_binds() {
    let mut c = Cluster::start().await;
    c.store.create(node("n1", "2")).unwrap();
    c.store.create(node("n2", "2")).unwrap();
    // n1's victims are less important than n2's, so n1 is the best candidate.
    c.store.create(pod("low-a", "1", 10, Some("n1"), json!({}))).unwrap();
    c.store.create(pod("low-b", "1", 10, Some("n1"), json!({}))).unwrap();
    c.store.create(pod("mid-a", "1", 100, Some("n2"), json!({}))).unwrap();
    c.store.create(pod("mid-b", "1", 100, Some("n2"), json!({}))).unwrap();
    let seen = c.watch_pods();
    c.run_scheduler().await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    c.store.create(pod("vip", "2", 1000, None, json!({}))).unwrap();

    let node = c.wait_for("vip bound", Duration::from_secs(30), |c| c.node_of("vip")).await;
    assert_eq!(node, "n1");
    assert!(c.pod("low-a").is_none() && c.pod("low-b").is_none(), "victims deleted");
    assert!(c.pod("mid-a").is_some() && c.pod("mid-b").is_some(), "n2 untouched");

    let vip_uid = c.pod("vip").unwrap()["metadata"]["uid"].as_str().unwrap().to_string();
    for victim in ["low-a", "low-b"] {
        let ev =
            c.wait_for("Preempted event", Duration::from_secs(5), |c| c.events_for(victim, "Preempted").pop()).await;
        assert_eq!(ev["note"], format!("Preempted by pod {vip_uid} on node n1"));
        assert_eq!(ev["action"], "Preempting");
        assert_eq!(ev["type"], "Normal");
        assert_eq!(ev.pointer("/related/name").and_then(Value::as_str), Some("vip"));
        // The DisruptionTarget condition was visible before the deletion.
        let log = seen.lock().unwrap().clone();
        let marked = log.iter().position(|e| e.kind == "MODIFIED" && e.name == victim && e.marked);
        let deleted = log.iter().position(|e| e.kind == "DELETED" && e.name == victim);
        assert!(matches!((marked, deleted), (Some(a), Some(b)) if a < b), "{victim}: {log:?}");
    }
    // The preemptor was nominated to n1 before it was bound there.
    let log = seen.lock().unwrap().clone();
    let nominated = log.iter().position(|e| e.name == "vip" && e.nnn == "n1" && e.bound.is_empty());
    let bound = log.iter().position(|e| e.name == "vip" && e.bound == "n1");
    assert!(matches!((nominated, bound), (Some(a), Some(b)) if a < b), "{log:?}");
    let failed = c.events_for("vip", "FailedScheduling");
    assert!(!failed.is_empty(), "the preempting cycle itself fails");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pdb_protected_victim_is_avoided_when_another_candidate_exists() {
    let mut c = Cluster::start().await;
    c.store.create(node("n1", "1")).unwrap();
    c.store.create(node("n2", "1")).unwrap();
    // n1's victim is the least important but protected by an exhausted budget.
    c.store.create(pod("guarded", "1", 10, Some("n1"), json!({"app": "guarded"}))).unwrap();
    c.store.create(pod("plain", "1", 100, Some("n2"), json!({"app": "plain"}))).unwrap();
    c.store
        .create(json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "guard", "namespace": "default"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
            "status": {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}}))
        .unwrap();
    c.run_scheduler().await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    c.store.create(pod("vip", "1", 1000, None, json!({}))).unwrap();

    let node = c.wait_for("vip bound", Duration::from_secs(30), |c| c.node_of("vip")).await;
    assert_eq!(node, "n2");
    assert!(c.pod("guarded").is_some());
    assert!(c.pod("plain").is_none());
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_victims_message_and_preemption_policy_never() {
    let mut c = Cluster::start().await;
    c.store.create(node("n1", "1")).unwrap();
    c.store.create(pod("peer", "1", 1000, Some("n1"), json!({}))).unwrap();
    c.run_scheduler().await;
    c.store.create(pod("same", "1", 1000, None, json!({}))).unwrap();
    // Priority admission takes preemptionPolicy from the class (a contradicting pod is refused).
    c.store
        .create(json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": "prio-2000-never"}, "value": 2000, "preemptionPolicy": "Never"}))
        .unwrap();
    let mut never = pod("never", "1", 2000, None, json!({}));
    never["spec"]["priorityClassName"] = json!("prio-2000-never");
    c.store.create(never).unwrap();
    let msg = |c: &Cluster, name: &str| {
        c.pod(name)?
            .pointer("/status/conditions")?
            .as_array()?
            .iter()
            .find(|x| x["type"] == "PodScheduled")
            .and_then(|x| x["message"].as_str().map(str::to_string))
    };
    let same = c.wait_for("same refused", Duration::from_secs(20), |c| msg(c, "same")).await;
    assert_eq!(
        same,
        "0/1 nodes are available: 1 Insufficient cpu. no new claims to deallocate, preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    );
    let never = c.wait_for("never refused", Duration::from_secs(20), |c| msg(c, "never")).await;
    assert_eq!(
        never,
        "0/1 nodes are available: 1 Insufficient cpu. no new claims to deallocate, preemption: not eligible due to preemptionPolicy=Never."
    );
    assert!(c.pod("peer").is_some());
    c.stop().await;
}
