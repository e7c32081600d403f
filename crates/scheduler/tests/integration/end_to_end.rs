//! End to end: the embedded API server on an ephemeral port, our scheduler talking to it over
//! HTTP with the default configuration.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ksched_apiserver::{ApiServer, RunningServer, ServerConfig, Store};
use ksched_scheduler::app::{self, RunningScheduler};
use ksched_scheduler::config;
use serde_json::{json, Value};

struct Cluster {
    server: RunningServer,
    store: Store,
    scheduler: Option<RunningScheduler>,
}

impl Cluster {
    async fn start() -> Cluster {
        let listen: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let server = ApiServer::start(ServerConfig { listen, ..ServerConfig::default() }).await.unwrap();
        let store = server.store();
        Cluster { server, store, scheduler: None }
    }

    async fn run_scheduler(&mut self) {
        let kc = kube::config::Kubeconfig::from_yaml(&self.server.kubeconfig_yaml()).unwrap();
        let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await.unwrap();
        let client = kube::Client::try_from(cfg).unwrap();
        let sched_cfg = config::default_config();
        let registry = ksched_plugins::in_tree_registry();
        self.scheduler = Some(app::start(client, &sched_cfg, &registry).await.unwrap());
    }

    fn pod(&self, ns: &str, name: &str) -> Value {
        self.store.get("v1", "Pod", Some(ns), name).unwrap_or(Value::Null)
    }

    fn node_of(&self, ns: &str, name: &str) -> Option<String> {
        self.pod(ns, name).pointer("/spec/nodeName").and_then(Value::as_str).map(str::to_string)
    }

    fn condition_message(&self, ns: &str, name: &str) -> Option<String> {
        let p = self.pod(ns, name);
        p.pointer("/status/conditions")?
            .as_array()?
            .iter()
            .find(|c| c["type"] == "PodScheduled" && c["status"] == "False")
            .and_then(|c| c["message"].as_str().map(str::to_string))
    }

    fn events_for(&self, name: &str, reason: &str) -> Vec<String> {
        self.store
            .list("events.k8s.io/v1", "Event", None)
            .into_iter()
            .filter(|e| e.pointer("/regarding/name").and_then(Value::as_str) == Some(name) && e["reason"] == reason)
            .filter_map(|e| e["note"].as_str().map(str::to_string))
            .collect()
    }

    async fn wait_for<T>(&self, what: &str, timeout: Duration, mut f: impl FnMut(&Cluster) -> Option<T>) -> T {
        let start = Instant::now();
        loop {
            if let Some(v) = f(self) {
                return v;
            }
            assert!(start.elapsed() < timeout, "timed out after {timeout:?} waiting for {what}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn stop(mut self) {
        if let Some(s) = self.scheduler.take() {
            s.shutdown(Duration::from_secs(5)).await;
        }
        self.server.shutdown().await;
    }
}

fn node(name: &str, cpu: &str, mem: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": cpu, "memory": mem, "pods": "110"},
                   "capacity": {"cpu": cpu, "memory": mem, "pods": "110"}}})
}

fn pod(name: &str, cpu: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_are_bound_to_feasible_nodes() {
    let mut c = Cluster::start().await;
    c.store.create(node("small", "1", "4Gi")).unwrap();
    c.store.create(node("big", "8", "16Gi")).unwrap();
    for i in 0..5 {
        c.store.create(pod(&format!("p{i}"), "1")).unwrap();
    }
    c.run_scheduler().await;
    let nodes = c
        .wait_for("all pods bound", Duration::from_secs(20), |c| {
            (0..5).map(|i| c.node_of("default", &format!("p{i}"))).collect::<Option<Vec<_>>>()
        })
        .await;
    // 5 cpu requested: "small" has room for one at most.
    assert!(nodes.iter().filter(|n| *n == "small").count() <= 1, "{nodes:?}");
    assert!(nodes.iter().all(|n| n == "small" || n == "big"));
    let ev = c.wait_for("Scheduled event", Duration::from_secs(5), |c| c.events_for("p0", "Scheduled").pop()).await;
    assert_eq!(ev, format!("Successfully assigned default/p0 to {}", nodes[0]));
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unschedulable_pod_gets_upstream_message_in_condition_and_event() {
    let mut c = Cluster::start().await;
    c.store.create(node("n1", "1", "4Gi")).unwrap();
    c.store.create(node("n2", "2", "4Gi")).unwrap();
    let mut cordoned = node("n3", "8", "16Gi");
    cordoned["spec"] = json!({"unschedulable": true});
    c.store.create(cordoned).unwrap();
    c.store.create(pod("big", "4")).unwrap();
    c.run_scheduler().await;
    // Every node is unresolvable here (4 cpu exceeds n1's and n2's whole allocatable), so
    // preemption has no node to try.
    let want = "0/3 nodes are available: 1 node(s) were unschedulable, 2 Insufficient cpu. no new claims to deallocate, preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.";
    let msg =
        c.wait_for("PodScheduled=False", Duration::from_secs(20), |c| c.condition_message("default", "big")).await;
    assert_eq!(msg, want);
    let ev = c
        .wait_for("FailedScheduling event", Duration::from_secs(5), |c| c.events_for("big", "FailedScheduling").pop())
        .await;
    assert_eq!(ev, want);
    let p = c.pod("default", "big");
    let cond =
        p["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "PodScheduled").unwrap().clone();
    assert_eq!(cond["reason"], "Unschedulable");
    assert!(p.pointer("/spec/nodeName").is_none());
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_pods_racing_for_the_last_slot_never_both_land() {
    let mut c = Cluster::start().await;
    c.store.create(node("only", "1", "4Gi")).unwrap();
    c.store.create(pod("a", "800m")).unwrap();
    c.store.create(pod("b", "800m")).unwrap();
    c.run_scheduler().await;
    c.wait_for("one bound, one refused", Duration::from_secs(20), |c| {
        let bound = ["a", "b"].iter().filter(|p| c.node_of("default", p).is_some()).count();
        let refused = ["a", "b"].iter().filter(|p| c.condition_message("default", p).is_some()).count();
        (bound == 1 && refused == 1).then_some(())
    })
    .await;
    // and it stays that way
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let bound = ["a", "b"].iter().filter(|p| c.node_of("default", p).is_some()).count();
    assert_eq!(bound, 1);
    let loser = if c.node_of("default", "a").is_some() { "b" } else { "a" };
    assert_eq!(
        c.condition_message("default", loser).unwrap(),
        "0/1 nodes are available: 1 Insufficient cpu. no new claims to deallocate, preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    );
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_added_later_unblocks_a_waiting_pod() {
    let mut c = Cluster::start().await;
    c.store.create(pod("waiting", "1")).unwrap();
    c.run_scheduler().await;
    let msg =
        c.wait_for("no nodes message", Duration::from_secs(20), |c| c.condition_message("default", "waiting")).await;
    assert_eq!(msg, "no nodes available to schedule pods");
    let added = Instant::now();
    c.store.create(node("late", "2", "4Gi")).unwrap();
    let n = c.wait_for("pod bound to the new node", Duration::from_secs(15), |c| c.node_of("default", "waiting")).await;
    assert_eq!(n, "late");
    // NodeAdd requeues it immediately or after its (1 s) backoff, never after the 5 min flush.
    assert!(added.elapsed() < Duration::from_secs(5), "took {:?}", added.elapsed());
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_of_other_schedulers_are_left_alone_but_counted() {
    let mut c = Cluster::start().await;
    c.store.create(node("n", "2", "4Gi")).unwrap();
    let mut other = pod("other", "100m");
    other["spec"]["schedulerName"] = json!("someone-else");
    c.store.create(other).unwrap();
    let mut bound = pod("bound-elsewhere", "1500m");
    bound["spec"]["nodeName"] = json!("n");
    c.store.create(bound).unwrap();
    c.store.create(pod("mine", "1")).unwrap();
    c.run_scheduler().await;
    let msg = c.wait_for("mine refused", Duration::from_secs(20), |c| c.condition_message("default", "mine")).await;
    assert_eq!(
        msg,
        "0/1 nodes are available: 1 Insufficient cpu. no new claims to deallocate, preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.",
        "the pre-bound pod's 1500m must count"
    );
    assert!(c.node_of("default", "other").is_none());
    assert!(c.condition_message("default", "other").is_none());
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_scheduler_frees_its_queue_and_pods() {
    let mut c = Cluster::start().await;
    c.store.create(node("n1", "2", "4Gi")).unwrap();
    c.store.create(pod("p0", "1")).unwrap();
    c.run_scheduler().await;
    c.wait_for("p0 bound", Duration::from_secs(20), |c| c.node_of("default", "p0")).await;
    let running = c.scheduler.as_ref().unwrap();
    let queue = std::sync::Arc::downgrade(&running.scheduler.queue);
    let pods = std::sync::Arc::downgrade(&running.pods);
    c.stop().await;
    // Aborted informer tasks drop their state on the runtime shortly after.
    let start = Instant::now();
    while (queue.strong_count() > 0 || pods.strong_count() > 0) && start.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(queue.strong_count(), 0, "the scheduling queue outlived its scheduler (a reference cycle)");
    assert_eq!(pods.strong_count(), 0, "the pod store outlived its scheduler");
}

/// With an extender configured the scheduler keeps whole pods (`Projection::Full`): over HTTP,
/// the pod watcher decodes the API's object, and the extender is sent every field of it, not
/// only those the scheduler's own pod type has.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extenders_are_sent_the_whole_pod_over_http() {
    use axum::routing::post;
    use axum::{Json, Router};
    use std::sync::{Arc, Mutex};

    let seen = Arc::new(Mutex::new(Vec::<Value>::new()));
    let s = seen.clone();
    let app = Router::new().route(
        "/filter",
        post(move |Json(args): Json<Value>| {
            let s = s.clone();
            async move {
                s.lock().unwrap().push(args["Pod"].clone());
                Json(json!({"Nodes": args["Nodes"].clone()}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let mut c = Cluster::start().await;
    c.store.create(node("n1", "4", "8Gi")).unwrap();
    let mut p = pod("p", "100m");
    p["spec"]["containers"][0]["env"] = json!([{"name": "MODE", "value": "fast"}]);
    p["spec"]["serviceAccountName"] = json!("builder");
    c.store.create(p).unwrap();

    let kc = kube::config::Kubeconfig::from_yaml(&c.server.kubeconfig_yaml()).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await.unwrap();
    let client = kube::Client::try_from(cfg).unwrap();
    let mut sched_cfg = config::default_config();
    sched_cfg.extenders = vec![serde_json::from_value(json!({"urlPrefix": url, "filterVerb": "filter"})).unwrap()];
    c.scheduler = Some(app::start(client, &sched_cfg, &ksched_plugins::in_tree_registry()).await.unwrap());

    let node = c.wait_for("p bound", Duration::from_secs(20), |c| c.node_of("default", "p")).await;
    assert_eq!(node, "n1");
    let sent = seen.lock().unwrap().first().cloned().expect("the extender was called");
    assert_eq!(sent["spec"]["containers"][0]["env"][0]["value"], "fast");
    assert_eq!(sent["spec"]["serviceAccountName"], "builder");
    assert_eq!(sent["metadata"]["name"], "p");
    assert!(sent["metadata"].get("managedFields").is_none());
    c.stop().await;
}
