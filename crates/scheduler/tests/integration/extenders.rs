//! HTTP extenders against a real extender server (axum on an ephemeral loopback port), with the
//! in-process cluster.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::routing::post;
use axum::{Json, Router};
use ksched_framework::node::Node;
use ksched_scheduler::config::{self, Extender};
use ksched_scheduler::inprocess::InProcessCluster;
use parking_lot::Mutex;
use serde_json::{json, Value};

fn node(name: &str) -> Node {
    serde_json::from_value(json!({"metadata": {"name": name},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}))
    .unwrap()
}

/// The API's pod (what a client creates), with fields the scheduler's own type does not keep.
fn pod(name: &str) -> k8s_openapi::api::core::v1::Pod {
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "i", "env": [{"name": "MODE", "value": "fast"}],
            "resources": {"requests": {"cpu": "100m"}}}], "serviceAccountName": "sa"}}))
    .unwrap()
}

/// Starts an extender server with the given routes; returns its URL.
async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

fn extender(url: &str, f: impl FnOnce(&mut Extender)) -> Extender {
    let mut e: Extender = serde_json::from_value(json!({"urlPrefix": url})).unwrap();
    f(&mut e);
    e
}

async fn cluster(extenders: Vec<Extender>, nodes: &[&str], pods: &[&str]) -> InProcessCluster {
    let mut cfg = config::default_config();
    cfg.extenders = extenders;
    let mut c = InProcessCluster::new(
        &cfg,
        &ksched_plugins::in_tree_registry(),
        Arc::new(ksched_scheduler::metrics::NoopMetrics),
    )
    .unwrap();
    for n in nodes {
        c.apply_node(node(n));
    }
    for p in pods {
        c.apply_pod(pod(p));
    }
    c.start();
    c
}

async fn wait<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < Duration::from_secs(15), "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn condition(c: &InProcessCluster, name: &str) -> Option<(String, String)> {
    let p = c.pod("default", name)?;
    let cond = p
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False")?
        .clone();
    Some((cond.reason.unwrap_or_default(), cond.message.unwrap_or_default()))
}

fn names(args: &Value) -> Vec<String> {
    args["Nodes"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filter_removes_nodes_and_reports_their_reasons() {
    let seen = Arc::new(Mutex::new(Vec::<Value>::new()));
    let s = seen.clone();
    let app = Router::new().route(
        "/filter",
        post(move |Json(args): Json<Value>| {
            let s = s.clone();
            async move {
                s.lock().push(args.clone());
                let keep: Vec<Value> = args["Nodes"]["items"].as_array().unwrap().iter().filter(|n| n["metadata"]["name"] == "b").cloned().collect();
                // reply with lower-case keys: Go decodes case-insensitively
                Json(json!({"nodes": {"items": keep}, "failedNodes": {"a": "extender says no"}, "FailedAndUnresolvableNodes": {"c": "never"}}))
            }
        }),
    );
    let url = serve(app).await;
    let c = cluster(vec![extender(&url, |e| e.filter_verb = "filter".into())], &["a", "b", "c"], &["p"]).await;
    let placements = wait("p bound", || c.placements().get("default/p").cloned()).await;
    assert_eq!(placements, "b");
    let args = seen.lock()[0].clone();
    assert_eq!(args["Pod"]["metadata"]["name"], "p");
    // Extenders are sent the whole pod, not the scheduler's projection of it.
    assert_eq!(args["Pod"]["spec"]["containers"][0]["env"][0]["value"], "fast");
    assert_eq!(args["Pod"]["spec"]["serviceAccountName"], "sa");
    assert_eq!(args["Pod"]["spec"]["schedulerName"], "default-scheduler");
    assert!(args["Pod"]["metadata"]["uid"].is_string());
    let mut got = names(&args);
    got.sort();
    assert_eq!(got, ["a", "b", "c"]);
    assert!(args["NodeNames"].is_null());
    c.stop().await;

    // every node removed: the FitError lists the extender's reasons
    let app = Router::new().route(
        "/filter",
        post(|| async {
            Json(json!({"FailedNodes": {"a": "extender says no"}, "FailedAndUnresolvableNodes": {"b": "never"}}))
        }),
    );
    let url = serve(app).await;
    let c = cluster(vec![extender(&url, |e| e.filter_verb = "filter".into())], &["a", "b"], &["q"]).await;
    let (reason, msg) = wait("q refused", || condition(&c, "q")).await;
    assert_eq!(reason, "Unschedulable");
    assert!(msg.starts_with("0/2 nodes are available: 1 extender says no, 1 never."), "{msg}");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prioritize_is_weighted_and_node_cache_capable_sends_names() {
    let seen = Arc::new(Mutex::new(Vec::<Value>::new()));
    let s = seen.clone();
    let app = Router::new().route(
        "/prioritize",
        post(move |Json(args): Json<Value>| {
            let s = s.clone();
            async move {
                s.lock().push(args);
                Json(json!([{"Host": "a", "Score": 0}, {"Host": "c", "Score": 10}]))
            }
        }),
    );
    let url = serve(app).await;
    let ext = extender(&url, |e| {
        e.prioritize_verb = "prioritize".into();
        e.weight = 5;
        e.node_cache_capable = true;
    });
    let c = cluster(vec![ext], &["a", "b", "c"], &["p"]).await;
    assert_eq!(wait("p bound", || c.placements().get("default/p").cloned()).await, "c");
    let args = seen.lock()[0].clone();
    let mut got: Vec<String> = serde_json::from_value(args["NodeNames"].clone()).unwrap();
    got.sort();
    assert_eq!(got, ["a", "b", "c"]);
    assert!(args["Nodes"].is_null());
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bind_verb_binds_instead_of_the_default_binder() {
    let seen = Arc::new(Mutex::new(Vec::<Value>::new()));
    let s = seen.clone();
    let app = Router::new().route(
        "/bind",
        post(move |Json(args): Json<Value>| {
            let s = s.clone();
            async move {
                s.lock().push(args);
                Json(json!({"Error": ""}))
            }
        }),
    );
    let url = serve(app).await;
    let c = cluster(vec![extender(&url, |e| e.bind_verb = "bind".into())], &["a"], &["p"]).await;
    let args = wait("bind call", || seen.lock().first().cloned()).await;
    assert_eq!(args["PodName"], "p");
    assert_eq!(args["PodNamespace"], "default");
    assert_eq!(args["Node"], "a");
    assert!(args["PodUID"].as_str().is_some_and(|u| !u.is_empty()));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(c.placements().is_empty(), "the default binder must not have bound the pod");
    assert!(condition(&c, "p").is_none());
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_timeouts_and_ignorable_extenders() {
    // 500 from a non-ignorable filter: a scheduler error with upstream's text
    let app =
        Router::new().route("/filter", post(|| async { (axum::http::StatusCode::INTERNAL_SERVER_ERROR, "boom") }));
    let url = serve(app).await;
    let c = cluster(vec![extender(&url, |e| e.filter_verb = "filter".into())], &["a"], &["p"]).await;
    let (reason, msg) = wait("p error", || condition(&c, "p")).await;
    assert_eq!(reason, "SchedulerError");
    assert_eq!(msg, format!("failed filter with extender at URL {url}/filter, code 500"));
    c.stop().await;

    // a filter slower than httpTimeout
    let app = Router::new().route(
        "/filter",
        post(|| async {
            tokio::time::sleep(Duration::from_secs(3)).await;
            Json(json!({}))
        }),
    );
    let url = serve(app).await;
    let ext = extender(&url, |e| {
        e.filter_verb = "filter".into();
        e.http_timeout = "200ms".parse().unwrap();
    });
    let c = cluster(vec![ext], &["a"], &["p"]).await;
    let (reason, msg) = wait("p timeout", || condition(&c, "p")).await;
    assert_eq!(reason, "SchedulerError");
    assert!(msg.contains("deadline exceeded"), "{msg}");
    c.stop().await;

    // an ignorable extender that is down is skipped
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let a = l.local_addr().unwrap();
        drop(l);
        format!("http://{a}")
    };
    let ext = extender(&dead, |e| {
        e.filter_verb = "filter".into();
        e.prioritize_verb = "prioritize".into();
        e.weight = 1;
        e.ignorable = true;
    });
    let c = cluster(vec![ext], &["a"], &["p"]).await;
    assert_eq!(wait("p bound", || c.placements().get("default/p").cloned()).await, "a");
    c.stop().await;
}

/// A pod with a priority, bound to `node` when given.
fn prio_pod(name: &str, cpu: &str, priority: i32, node: Option<&str>) -> k8s_openapi::api::core::v1::Pod {
    let mut p = pod(name);
    let spec = p.spec.as_mut().unwrap();
    spec.priority = Some(priority);
    spec.node_name = node.map(str::to_string);
    spec.containers[0]
        .resources
        .as_mut()
        .unwrap()
        .requests
        .as_mut()
        .unwrap()
        .insert("cpu".into(), k8s_openapi::apimachinery::pkg::api::resource::Quantity(cpu.into()));
    p
}

/// Two full nodes; `low-a` on `a` is less important than `low-b` on `b`, so the dry run alone
/// would preempt on `a`. The extender's preempt verb keeps only `b`, naming its victim by UID.
async fn preempt_verb_keeps_one_node(node_cache_capable: bool) {
    let seen = Arc::new(Mutex::new(Vec::<Value>::new()));
    let s = seen.clone();
    let app = Router::new().route(
        "/preempt",
        post(move |Json(args): Json<Value>| {
            let s = s.clone();
            async move {
                s.lock().push(args.clone());
                let victims =
                    if node_cache_capable { &args["NodeNameToMetaVictims"] } else { &args["NodeNameToVictims"] };
                let uids: Vec<Value> = victims["b"]["Pods"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| if node_cache_capable { p["UID"].clone() } else { p["metadata"]["uid"].clone() })
                    .map(|uid| json!({"UID": uid}))
                    .collect();
                Json(json!({"NodeNameToMetaVictims": {"b": {"Pods": uids, "NumPDBViolations": 0}}}))
            }
        }),
    );
    let url = serve(app).await;
    let ext = extender(&url, |e| {
        e.preempt_verb = "preempt".into();
        e.node_cache_capable = node_cache_capable;
    });
    let mut cfg = config::default_config();
    cfg.extenders = vec![ext];
    let mut c = InProcessCluster::new(
        &cfg,
        &ksched_plugins::in_tree_registry(),
        Arc::new(ksched_scheduler::metrics::NoopMetrics),
    )
    .unwrap();
    c.apply_node(node("a"));
    c.apply_node(node("b"));
    c.apply_pod(prio_pod("low-a", "4", 10, Some("a")));
    c.apply_pod(prio_pod("low-b", "4", 100, Some("b")));
    c.start();
    let uid = |name: &str| c.pod("default", name).unwrap().metadata.uid.clone().unwrap();
    let (uid_a, uid_b) = (uid("low-a"), uid("low-b"));
    c.apply_pod(prio_pod("vip", "4", 1000, None));

    let nnn = |c: &InProcessCluster| {
        c.pod("default", "vip")?.status.as_ref()?.nominated_node_name.clone().filter(|n| !n.is_empty())
    };
    assert_eq!(wait("vip nominated", || nnn(&c)).await, "b");
    assert_eq!(wait("vip bound", || c.placements().get("default/vip").cloned()).await, "b");
    assert!(c.pod("default", "low-b").is_none(), "the victim the extender kept is deleted");
    assert!(c.pod("default", "low-a").is_some(), "the node the extender dropped is untouched");

    let calls = seen.lock().clone();
    assert_eq!(calls.len(), 1, "{calls:?}");
    let args = &calls[0];
    assert_eq!(args["Pod"]["metadata"]["name"], "vip");
    if node_cache_capable {
        assert!(args["NodeNameToVictims"].is_null());
        assert_eq!(
            args["NodeNameToMetaVictims"],
            json!({"a": {"Pods": [{"UID": uid_a}], "NumPDBViolations": 0},
                   "b": {"Pods": [{"UID": uid_b}], "NumPDBViolations": 0}})
        );
    } else {
        assert!(args["NodeNameToMetaVictims"].is_null());
        let victims = &args["NodeNameToVictims"];
        assert_eq!(victims.as_object().unwrap().len(), 2);
        for (node, name, uid) in [("a", "low-a", &uid_a), ("b", "low-b", &uid_b)] {
            let pods = victims[node]["Pods"].as_array().unwrap();
            assert_eq!(pods.len(), 1);
            assert_eq!(pods[0]["metadata"]["name"], name);
            assert_eq!(&pods[0]["metadata"]["uid"], uid);
            assert_eq!(pods[0]["spec"]["nodeName"], node);
            assert_eq!(victims[node]["NumPDBViolations"], 0);
        }
    }
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preempt_verb_narrows_candidates_with_full_victims() {
    preempt_verb_keeps_one_node(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preempt_verb_narrows_candidates_with_meta_victims_when_node_cache_capable() {
    preempt_verb_keeps_one_node(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preempt_verb_error_fails_preemption_unless_ignorable() {
    let app =
        Router::new().route("/preempt", post(|| async { (axum::http::StatusCode::INTERNAL_SERVER_ERROR, "boom") }));
    let url = serve(app).await;
    for ignorable in [false, true] {
        let ext = extender(&url, |e| {
            e.preempt_verb = "preempt".into();
            e.ignorable = ignorable;
        });
        let c = cluster(vec![ext], &["a"], &[]).await;
        c.apply_pod(prio_pod("low", "4", 10, Some("a")));
        c.apply_pod(prio_pod("vip", "4", 1000, None));
        if ignorable {
            assert_eq!(wait("vip bound", || c.placements().get("default/vip").cloned()).await, "a");
            assert!(c.pod("default", "low").is_none());
        } else {
            let (reason, msg) = wait("vip refused", || condition(&c, "vip")).await;
            assert_eq!(reason, "Unschedulable");
            let want = format!("preemption: failed preempt with extender at URL {url}/preempt, code 500");
            assert!(msg.contains(&want), "{msg}");
            tokio::time::sleep(Duration::from_millis(200)).await;
            assert!(c.pod("default", "low").is_some(), "nothing is evicted");
            assert!(c.placements().is_empty());
        }
        c.stop().await;
    }
}

/// An extended resource an extender manages with `ignoredByScheduler` is the extender's to
/// check: NodeResourcesFit does not count it, so a pod asking for it fits nodes that do not
/// advertise it (upstream's TestSchedulerExtender, `foo.com/bar`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_an_extender_manages_and_ignores_are_not_fit_checked() {
    let app = Router::new().route(
        "/filter",
        post(|Json(args): Json<Value>| async move { Json(json!({"Nodes": args["Nodes"], "FailedNodes": {}})) }),
    );
    let url = serve(app).await;
    let managed = |ignored: bool| {
        extender(&url, |e| {
            e.filter_verb = "filter".into();
            e.managed_resources =
                vec![config::ExtenderManagedResource { name: "example.com/foo".into(), ignored_by_scheduler: ignored }];
        })
    };
    let wants_foo: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "i", "resources": {
            "requests": {"example.com/foo": "1"}, "limits": {"example.com/foo": "1"}}}]}}))
    .unwrap();

    let c = cluster(vec![managed(true)], &["a", "b"], &[]).await;
    c.apply_pod(wants_foo.clone());
    let placement = wait("p bound", || c.placements().get("default/p").cloned()).await;
    assert!(["a", "b"].contains(&placement.as_str()), "{placement}");
    c.stop().await;

    // Managed but not ignored: the scheduler still counts it, and no node has any.
    let c = cluster(vec![managed(false)], &["a", "b"], &[]).await;
    c.apply_pod(wants_foo);
    let (reason, msg) = wait("p refused", || condition(&c, "p")).await;
    assert_eq!(reason, "Unschedulable");
    assert!(msg.starts_with("0/2 nodes are available: 2 Insufficient example.com/foo."), "{msg}");
    c.stop().await;
}

/// A pending pod as kube-apiserver v1.36 writes one that `kubectl apply` created: managedFields,
/// the last-applied annotation, the service-account token volume and its mount.
fn applied_pod() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"annotations\":{},\"labels\":{\"app\":\"web\"},\"name\":\"applied\",\"namespace\":\"default\"},\"spec\":{\"containers\":[{\"image\":\"registry.k8s.io/pause:3.10\",\"name\":\"web\",\"resources\":{\"requests\":{\"cpu\":\"100m\"}}}]}}\n"},
        "creationTimestamp": "2026-11-28T21:00:28Z", "generation": 1, "labels": {"app": "web"},
        "managedFields": [{"apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:annotations": {".": {},
            "f:kubectl.kubernetes.io/last-applied-configuration": {}}, "f:labels": {".": {}, "f:app": {}}},
            "f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {".": {}, "f:image": {}, "f:name": {}}}}},
            "manager": "kubectl-client-side-apply", "operation": "Update", "time": "2026-11-28T21:00:28Z"}],
        "name": "applied", "namespace": "default", "resourceVersion": "213", "uid": "4a42b9bf-c883-4fb9-8cdc-12892751f159"},
    "spec": {"containers": [{"image": "registry.k8s.io/pause:3.10", "imagePullPolicy": "IfNotPresent", "name": "web",
            "resources": {"requests": {"cpu": "100m"}}, "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File", "volumeMounts": [{"mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                "name": "kube-api-access-vhx7g", "readOnly": true}]}],
        "dnsPolicy": "ClusterFirst", "enableServiceLinks": true, "restartPolicy": "Always", "schedulerName": "default-scheduler",
        "securityContext": {}, "serviceAccount": "default", "serviceAccountName": "default", "terminationGracePeriodSeconds": 30,
        "tolerations": [{"effect": "NoExecute", "key": "node.kubernetes.io/not-ready", "operator": "Exists", "tolerationSeconds": 300}],
        "volumes": [{"name": "kube-api-access-vhx7g", "projected": {"defaultMode": 420, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"items": [{"key": "ca.crt", "path": "ca.crt"}], "name": "kube-root-ca.crt"}},
            {"downwardAPI": {"items": [{"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}, "path": "namespace"}]}}]}}]},
    "status": {"phase": "Pending", "qosClass": "Burstable"}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extenders_get_a_kept_pod_whole_but_its_managed_fields() {
    let seen = Arc::new(Mutex::new(Vec::<Value>::new()));
    let s = seen.clone();
    let app = Router::new().route(
        "/filter",
        post(move |Json(args): Json<Value>| {
            let s = s.clone();
            async move {
                s.lock().push(args.clone());
                let keep: Vec<Value> = args["Nodes"]["items"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|n| n["metadata"]["name"] == "b")
                    .cloned()
                    .collect();
                Json(json!({"Nodes": {"items": keep}, "FailedNodes": {"a": "extender says no"}}))
            }
        }),
    );
    let url = serve(app).await;
    let c = cluster(vec![extender(&url, |e| e.filter_verb = "filter".into())], &["a", "b"], &[]).await;
    let api: k8s_openapi::api::core::v1::Pod = serde_json::from_value(applied_pod()).unwrap();
    c.apply_pod(api.clone());
    assert_eq!(wait("applied bound", || c.placements().get("default/applied").cloned()).await, "b");

    // Kept without managedFields, everything else as sent.
    let kept = c.pod("default", "applied").unwrap();
    let whole = kept.object.as_deref().expect("extenders configured: the whole pod is kept");
    assert!(!whole.json().contains("managedFields"), "{}", whole.json());
    assert!(whole.json().contains("last-applied-configuration") && whole.json().contains("kube-api-access-vhx7g"));

    // The extender got the pod as decoded, but its managedFields (and the resourceVersion,
    // which the in-process API server sets).
    let mut expected = applied_pod();
    expected["metadata"].as_object_mut().unwrap().remove("managedFields");
    let mut sent = seen.lock()[0]["Pod"].clone();
    for v in [&mut expected, &mut sent] {
        v["metadata"].as_object_mut().unwrap().remove("resourceVersion");
    }
    assert_eq!(sent, expected);
    c.stop().await;
}
