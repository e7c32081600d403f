//! The scheduler against an API server that does not serve `resource.k8s.io` (as an API server
//! emulating an older version): it must start, sync and schedule, watching only the APIs the
//! enabled feature gates need and the server serves.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use ksched_scheduler::{app, config};
use parking_lot::Mutex;
use serde_json::json;

const TOKEN: &str = "served-apis-token";

/// The embedded API server without `resource.k8s.io`: its paths answer what kube-apiserver
/// answers for a group it does not serve, a 404 whose body is the root path list (JSON, but not
/// a `Status`). Returns the URL, the store and the paths asked for under that group.
async fn server_without_dra() -> (String, ksched_apiserver::Store, Arc<Mutex<Vec<String>>>) {
    let (router, store) = ksched_apiserver::fuzzing::router_for_tests(TOKEN);
    let asked = Arc::new(Mutex::new(Vec::new()));
    let seen = asked.clone();
    let router = router.layer(middleware::from_fn(move |req: Request, next: Next| {
        let seen = seen.clone();
        async move {
            let path = req.uri().path().to_string();
            if path.starts_with("/apis/resource.k8s.io") {
                seen.lock().push(path);
                let index = json!({"paths": ["/api", "/api/v1", "/apis", "/apis/apps", "/apis/apps/v1", "/healthz"]});
                return (http::StatusCode::NOT_FOUND, axum::Json(index)).into_response();
            }
            let resp: Response = next.run(req).await;
            resp
        }
    }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    (url, store, asked)
}

/// The scheduler's own client (`clientConnection.kubeconfig`), as the binary builds it.
async fn client(url: &str) -> kube::Client {
    let path = std::env::temp_dir().join(format!("served-apis-{}-{}.kubeconfig", std::process::id(), url.len()));
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {url}\n\
         users:\n- name: u\n  user:\n    token: {TOKEN}\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n\
         current-context: x\n"
    );
    std::fs::write(&path, kubeconfig).unwrap();
    let cc = config::ClientConnectionConfiguration {
        kubeconfig: path.display().to_string(),
        qps: -1.0,
        ..Default::default()
    };
    let client = ksched_scheduler::options::client::kube_client(&cc, "").await.unwrap();
    let _ = std::fs::remove_file(&path);
    client
}

/// Starts a scheduler with `features` against the server and schedules one pod; panics when
/// the scheduler does not get through its initial sync.
async fn schedules_one_pod(features: config::SchedulerFeatures) -> Vec<String> {
    let (url, store, asked) = server_without_dra().await;
    store
        .create(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
            "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"}}}))
        .unwrap();
    store
        .create(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}]}}))
        .unwrap();
    let cfg = config::default_config_with(&features);
    let started = tokio::time::timeout(
        Duration::from_secs(20),
        app::start(client(&url).await, &cfg, &ksched_plugins::in_tree_registry()),
    )
    .await
    .expect("the scheduler never finished its initial sync")
    .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let pod = store.get("v1", "Pod", Some("default"), "p").unwrap();
        if pod.pointer("/spec/nodeName").and_then(|n| n.as_str()) == Some("n1") {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "pod not bound: {pod}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    started.shutdown(Duration::from_secs(1)).await;
    let paths = asked.lock().clone();
    paths
}

/// DynamicResourceAllocation off (its default when emulating 1.33): no DRA watch at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dra_gate_off_starts_no_dra_watches() {
    let off = config::SchedulerFeatures { dynamic_resource_allocation: false, ..Default::default() };
    let asked = schedules_one_pod(off).await;
    assert!(asked.is_empty(), "asked for resource.k8s.io with the gate off: {asked:?}");
}

/// DynamicResourceAllocation on but the API not served: readiness does not wait for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dra_api_not_served_does_not_block_the_sync() {
    let asked = schedules_one_pod(config::SchedulerFeatures::default()).await;
    assert_eq!(asked, ["/apis/resource.k8s.io/v1"], "only the discovery of the group version");
}
