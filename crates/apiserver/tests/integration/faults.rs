//! Faults on demand: each fault observed from a client's side of the wire.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use ksched_apiserver::faults::Audited;
use ksched_apiserver::{ApiServer, FaultSpec, Faults, RunningServer};
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn start_with(faults: &Faults) -> RunningServer {
    ApiServer::start(ksched_apiserver::ServerConfig { faults: faults.clone(), ..ephemeral() }).await.unwrap()
}

fn spec(s: &str) -> FaultSpec {
    s.parse().unwrap()
}

fn pod_json(name: &str) -> String {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "i"}]}})
    .to_string()
}

async fn create_pod(srv: &RunningServer, name: &str) -> (u16, String) {
    let auth = bearer(srv);
    let headers = [("Authorization", auth.as_str()), ("Content-Type", "application/json")];
    raw(srv, "POST", "/api/v1/namespaces/default/pods", &headers, pod_json(name).as_bytes()).await
}

/// The status line of `GET /version`, or `None` when the connection closed without one.
async fn answer_to_version(srv: &RunningServer) -> Option<String> {
    let mut s = tokio::net::TcpStream::connect(srv.addr()).await.ok()?;
    s.write_all(b"GET /version HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.ok()?;
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out)).await.ok()?.ok()?;
    let text = String::from_utf8_lossy(&out).to_string();
    text.lines().next().filter(|l| !l.is_empty()).map(str::to_string)
}

/// The next watch event that is not a bookmark; `Ok(None)` when the stream ended.
async fn next_event(
    w: &mut (impl futures::Stream<Item = kube::Result<WatchEvent<Pod>>> + Unpin),
) -> kube::Result<Option<WatchEvent<Pod>>> {
    loop {
        match w.try_next().await? {
            Some(WatchEvent::Bookmark(_)) => continue,
            other => return Ok(other),
        }
    }
}

/// The full response head and body of one request.
async fn raw_full(srv: &RunningServer, method: &str, path: &str, body: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(srv.addr()).await.unwrap();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: {}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        bearer(srv),
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out)).await.unwrap().unwrap();
    String::from_utf8_lossy(&out).to_string()
}

#[tokio::test]
async fn injected_errors_answer_writes_without_applying_them() {
    let faults = Faults::new(spec("error:p=1:codes=429:retry-after=3"));
    let srv = start_with(&faults).await;
    let resp = raw_full(&srv, "POST", "/api/v1/namespaces/default/pods", &pod_json("p1")).await;
    assert!(resp.starts_with("HTTP/1.1 429"), "{resp}");
    assert!(resp.to_ascii_lowercase().contains("retry-after: 3\r\n"), "{resp}");
    let body: Value = serde_json::from_str(resp.split_once("\r\n\r\n").unwrap().1).unwrap();
    assert_eq!(body["reason"], "TooManyRequests");
    assert_eq!(body["details"]["retryAfterSeconds"], 3);
    assert!(srv.store().get("v1", "Pod", Some("default"), "p1").is_none(), "the write was not applied");
    // Reads are not writes: served.
    let (code, _) = raw(&srv, "GET", "/api/v1/namespaces/default/pods", &[("Authorization", &bearer(&srv))], b"").await;
    assert_eq!(code, 200);

    faults.set_spec(spec("error:p=1:codes=500"));
    let (code, body) = create_pod(&srv, "p1").await;
    assert_eq!(code, 500, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["reason"], "InternalError");
    assert_eq!(faults.counts().error, 2);

    // Only one client's requests.
    faults.set_spec(spec("error:p=1:codes=500:agent=replica-a"));
    let auth = bearer(&srv);
    let as_agent = |ua: &'static str| [("Authorization", auth.clone()), ("User-Agent", ua.to_string())];
    let post = |headers: [(&'static str, String); 2], name: &'static str| {
        let srv = &srv;
        async move {
            let h: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            raw(srv, "POST", "/api/v1/namespaces/default/pods", &h, pod_json(name).as_bytes()).await.0
        }
    };
    assert_eq!(post(as_agent("kube-scheduler-replica-a/v1.36.0"), "p1").await, 500);
    assert_eq!(post(as_agent("kube-scheduler-replica-b/v1.36.0"), "p1").await, 201);
    srv.shutdown().await;
}

#[tokio::test]
async fn latency_delays_the_chosen_verbs_only() {
    let faults = Faults::new(spec("latency:p=1:min=300ms:max=300ms:verbs=list"));
    let srv = start_with(&faults).await;
    let auth = bearer(&srv);
    let start = Instant::now();
    let (code, _) = raw(&srv, "GET", "/api/v1/namespaces/default/pods", &[("Authorization", &auth)], b"").await;
    assert_eq!(code, 200);
    assert!(start.elapsed() >= Duration::from_millis(300), "the list waited the injected delay");
    assert_eq!(faults.counts().latency, 1);
    assert_eq!(create_pod(&srv, "p").await.0, 201);
    assert_eq!(faults.counts().latency, 1, "creates are not delayed");
    srv.shutdown().await;
}

#[tokio::test]
async fn restart_drops_connections_and_watches_keeps_the_store_and_comes_back() {
    let faults = Faults::new(FaultSpec::default());
    let srv = start_with(&faults).await;
    let client = client(&srv).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(&PostParams::default(), &pod("before", json!({}))).await.unwrap();
    let mut watch = pods.watch(&WatchParams::default(), "0").await.unwrap().boxed();
    assert!(matches!(next_event(&mut watch).await, Ok(Some(WatchEvent::Added(_)))));
    assert!(answer_to_version(&srv).await.is_some_and(|l| l.contains(" 200 ")));

    faults.restart(Duration::from_millis(600));
    // The open watch ends (with an error or a close), not by an event.
    let ended = tokio::time::timeout(Duration::from_secs(5), next_event(&mut watch)).await.expect("watch ends");
    assert!(matches!(ended, Err(_) | Ok(None)), "{ended:?}");
    // While paused, a new connection is closed without an answer.
    assert_eq!(answer_to_version(&srv).await, None, "refused during the pause");
    tokio::time::sleep(Duration::from_millis(700)).await;
    // Back, with the store intact.
    let got = pods.get("before").await.expect("served again after the pause");
    assert_eq!(got.metadata.name.as_deref(), Some("before"));
    let ev = faults.events();
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0].kind, "restart");
    assert_eq!(ev[0].until - ev[0].at, Duration::from_millis(600));
    assert_eq!(faults.counts().restart, 1);
    srv.shutdown().await;
}

#[tokio::test]
async fn watch_end_closes_streams_cleanly_and_on_demand() {
    let faults = Faults::new(spec("watch-end:every=400ms"));
    let srv = start_with(&faults).await;
    let pods: Api<Pod> = Api::namespaced(client(&srv).await, "default");
    let start = Instant::now();
    let mut watch = pods.watch(&WatchParams::default().timeout(290), "0").await.unwrap().boxed();
    let end = tokio::time::timeout(Duration::from_secs(5), next_event(&mut watch)).await.expect("watch ends early");
    assert!(matches!(end, Ok(None)), "a clean end: {end:?}");
    assert!(start.elapsed() >= Duration::from_millis(200), "not before half the mean lifetime");
    assert_eq!(faults.counts().watch_end, 1);

    // On demand, without a lifetime configured.
    faults.set_spec(FaultSpec::default());
    let mut watch = pods.watch(&WatchParams::default().timeout(290), "0").await.unwrap().boxed();
    faults.end_watches();
    let end = tokio::time::timeout(Duration::from_secs(5), next_event(&mut watch)).await.expect("watch ends");
    assert!(matches!(end, Ok(None)), "{end:?}");
    srv.shutdown().await;
}

#[tokio::test]
async fn compaction_makes_resuming_a_watch_gone() {
    let faults = Faults::new(FaultSpec::default());
    let srv = start_with(&faults).await;
    let pods: Api<Pod> = Api::namespaced(client(&srv).await, "default");
    let p = pods.create(&PostParams::default(), &pod("a", json!({}))).await.unwrap();
    let rv = p.metadata.resource_version.unwrap();
    pods.create(&PostParams::default(), &pod("b", json!({}))).await.unwrap();
    // Before compaction the watch resumes and replays b.
    let mut w = pods.watch(&WatchParams::default(), &rv).await.unwrap().boxed();
    assert!(
        matches!(next_event(&mut w).await, Ok(Some(WatchEvent::Added(p))) if p.metadata.name.as_deref() == Some("b"))
    );
    drop(w);
    faults.compact();
    let mut w = pods.watch(&WatchParams::default(), &rv).await.unwrap().boxed();
    match next_event(&mut w).await {
        Ok(Some(WatchEvent::Error(e))) => assert_eq!((e.code, e.reason.as_str()), (410, "Expired"), "{e:?}"),
        other => panic!("expected 410 Expired, got {other:?}"),
    }
    // A relist works and a watch from its resourceVersion resumes.
    let list = pods.list(&Default::default()).await.unwrap();
    let rv = list.metadata.resource_version.unwrap();
    let mut w = pods.watch(&WatchParams::default(), &rv).await.unwrap().boxed();
    pods.create(&PostParams::default(), &pod("c", json!({}))).await.unwrap();
    assert!(
        matches!(next_event(&mut w).await, Ok(Some(WatchEvent::Added(p))) if p.metadata.name.as_deref() == Some("c"))
    );
    srv.shutdown().await;
}

#[tokio::test]
async fn bind_conflict_binds_then_answers_409_and_the_audit_names_authors() {
    let faults = Faults::with_binding_audit(spec("bind-conflict:p=1"));
    let srv = start_with(&faults).await;
    let store = srv.store();
    store.create(serde_json::to_value(node("n1")).unwrap()).unwrap();
    for p in ["p1", "p2"] {
        store.create(serde_json::to_value(pod(p, json!({}))).unwrap()).unwrap();
    }
    let (code, body) = bind(&srv, "default", "p1", "n1", None).await;
    assert_eq!(code, 409, "{body}");
    let status: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        status["message"],
        "Operation cannot be fulfilled on pods/binding \"p1\": pod p1 is already assigned to node \"n1\""
    );
    let bound = store.get("v1", "Pod", Some("default"), "p1").unwrap();
    assert_eq!(bound["spec"]["nodeName"], "n1", "something else bound it");

    faults.set_spec(FaultSpec::default());
    let body = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p2"},
        "target": {"kind": "Node", "name": "n1"}})
    .to_string();
    let auth = bearer(&srv);
    let headers =
        [("Authorization", auth.as_str()), ("User-Agent", "replica-b/v1"), ("Content-Type", "application/json")];
    let (code, _) = raw(&srv, "POST", "/api/v1/namespaces/default/bindings", &headers, body.as_bytes()).await;
    assert_eq!(code, 201);
    // A refused binding is no binding.
    let (code, _) = bind(&srv, "default", "p2", "n1", None).await;
    assert_eq!(code, 409);
    // A lease write is audited with its holder.
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "l", "namespace": "kube-system"}, "spec": {"holderIdentity": "me"}})
    .to_string();
    let headers =
        [("Authorization", auth.as_str()), ("User-Agent", "replica-c/v1"), ("Content-Type", "application/json")];
    let (code, _) =
        raw(&srv, "POST", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases", &headers, lease.as_bytes())
            .await;
    assert_eq!(code, 201);
    let audit = faults.take_audit();
    assert_eq!(
        audit.last().map(|r| (&r.what, r.author.as_str())),
        Some((
            &Audited::Lease { namespace: "kube-system".into(), name: "l".into(), holder: "me".into() },
            "replica-c/v1"
        ))
    );
    let log: Vec<(String, String, String)> = audit
        .into_iter()
        .filter_map(|r| match r.what {
            Audited::Binding { name, node, .. } => Some((name, node, r.author)),
            Audited::Lease { .. } => None,
        })
        .collect();
    assert_eq!(
        log,
        [
            ("p1".to_string(), "n1".to_string(), "fault:bind-conflict".to_string()),
            ("p2".to_string(), "n1".to_string(), "replica-b/v1".to_string())
        ]
    );
    assert!(faults.take_audit().is_empty(), "taken once");
    assert_eq!(faults.counts().bind_conflict, 1);
    srv.shutdown().await;
}

#[tokio::test]
async fn periodic_faults_fire_on_their_own() {
    let faults = Faults::new(spec("seed=5,restart:every=300ms:pause=100ms,compact:every=200ms"));
    let srv = start_with(&faults).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let c = faults.counts();
    assert!(c.restart >= 1 && c.compact >= 2, "{c:?}");
    assert_eq!(faults.spec().seed, Some(5));
    srv.shutdown().await;
}
