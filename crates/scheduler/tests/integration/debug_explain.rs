//! `/debug/explain/{namespace}/{pod}` on the secure port: behind the same delegated
//! authentication and authorization as `/metrics`, read-only, explaining a pending pod of the
//! running scheduler with the same message as its PodScheduled condition.

use crate::common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use ksched_apiserver::ApiServer;
use ksched_scheduler::metrics::PrometheusMetrics;
use ksched_scheduler::server::{serve, ServerConfig, ServerState};
use rustls::pki_types::ServerName;
use serde_json::{json, Value};

struct Reply {
    status: u16,
    content_type: String,
    body: String,
}

/// One HTTPS GET on a fresh connection.
async fn get(addr: SocketAddr, path: &str, token: Option<&str>) -> Reply {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let tls = common::insecure_tls_connector().connect(ServerName::try_from("localhost").unwrap(), tcp).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await.unwrap();
    tokio::spawn(conn);
    let mut req = hyper::Request::get(path).header("host", "localhost");
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    let resp = sender.send_request(req.body(Empty::<Bytes>::new()).unwrap()).await.unwrap();
    let status = resp.status().as_u16();
    let content_type = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    Reply { status, content_type, body: String::from_utf8_lossy(&body).into_owned() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explains_a_pending_pod_behind_delegated_auth() {
    let api = ApiServer::start(ksched_apiserver::ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        ..Default::default()
    })
    .await
    .unwrap();
    let store = api.store();
    store
        .create(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "small"},
            "status": {"allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"}}}))
        .unwrap();
    store
        .create(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "big", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "2"}}}]}}))
        .unwrap();
    let kubeconfig = std::env::temp_dir().join(format!("ksched-debug-explain-{}.kubeconfig", std::process::id()));
    api.write_kubeconfig(&kubeconfig).unwrap();

    let kc = kube::config::Kubeconfig::from_yaml(&api.kubeconfig_yaml()).unwrap();
    let client =
        kube::Client::try_from(kube::Config::from_custom_kubeconfig(kc, &Default::default()).await.unwrap()).unwrap();
    let cfg = ksched_scheduler::config::default_config();
    let running = ksched_scheduler::app::start(client, &cfg, &ksched_plugins::in_tree_registry()).await.unwrap();

    let state = ServerState::new(Arc::new(PrometheusMetrics::new()));
    let _ = state.explain.set(ksched_scheduler::explain::live::handler(&cfg, &running.scheduler));
    let server_cfg = ServerConfig {
        bind_address: "127.0.0.1".parse().unwrap(),
        secure_port: std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port(),
        in_cluster_fallback: false,
        authentication_skip_lookup: true,
        authentication_kubeconfig: Some(kubeconfig.clone()),
        authorization_kubeconfig: Some(kubeconfig.clone()),
        ..ServerConfig::default()
    };
    let handle = serve(server_cfg, state).await.unwrap();
    let addr = handle.local_addr().unwrap();

    let start = Instant::now();
    let condition = loop {
        let pod = store.get("v1", "Pod", Some("default"), "big").unwrap();
        let msg = pod
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|cs| cs.iter().find(|c| c["type"] == "PodScheduled"))
            .and_then(|c| c["message"].as_str().map(str::to_string));
        if let Some(m) = msg {
            break m;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "the scheduler never reported the pod");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };

    let path = "/debug/explain/default/big";
    // Exactly the authn/authz outcome of /metrics, for anonymous and bad credentials.
    for token in [None, Some("not-the-token")] {
        let metrics = get(addr, "/metrics", token).await.status;
        assert_eq!(get(addr, path, token).await.status, metrics, "token {token:?}");
    }
    assert_eq!(get(addr, path, Some("not-the-token")).await.status, 401);
    let token = api.token().to_string();
    let r = get(addr, path, Some(&token)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.content_type, "application/json");
    let ex: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(ex["verdict"], "Unschedulable");
    assert_eq!(ex["message"].as_str(), Some(condition.as_str()));
    assert_eq!(ex["fitsIf"][0]["change"], "1 cpu is freed");
    let r = get(addr, "/debug/explain/default/big?o=table", Some(&token)).await;
    assert!(r.body.contains("fits on small if 1 cpu is freed"), "{}", r.body);
    assert_eq!(get(addr, "/debug/explain/default/nope", Some(&token)).await.status, 404);
    // Read-only: the pod is still pending and unbound.
    let pod = store.get("v1", "Pod", Some("default"), "big").unwrap();
    assert!(pod.pointer("/spec/nodeName").is_none());
    // And the scheduler's own view is intact: a node with room arrives, the pod goes there.
    store
        .create(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "roomy"},
            "status": {"allocatable": {"cpu": "4", "memory": "4Gi", "pods": "10"}}}))
        .unwrap();
    let start = Instant::now();
    loop {
        let pod = store.get("v1", "Pod", Some("default"), "big").unwrap();
        if let Some(n) = pod.pointer("/spec/nodeName").and_then(Value::as_str) {
            assert_eq!(n, "roomy");
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "the pod was not scheduled after explaining it");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    handle.shutdown(Duration::from_secs(5)).await;
    running.shutdown(Duration::from_secs(5)).await;
    api.shutdown().await;
    std::fs::remove_file(&kubeconfig).ok();
}
