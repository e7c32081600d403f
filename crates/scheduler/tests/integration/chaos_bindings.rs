//! The real `kube-scheduler` binary while its bindings are slowed down on purpose: a pod or a
//! node deleted while a binding to it is in flight, then an API server restart. The process
//! survives, `/readyz` answers ok, no pod is bound twice and freed room is reused. And a pod
//! deleted while the API server is down: the scheduler's relist forgets it and goes on seeing
//! pods; a pod refused while status writes fail: its condition lands once they go through.

use crate::common;

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use ksched_apiserver::faults::Audited;
use ksched_apiserver::{ApiServer, FaultSpec, Faults, RunningServer, ServerConfig};
use rustls::pki_types::ServerName;
use serde_json::{json, Value};

/// Accepts the scheduler's self-signed serving certificate.
/// `GET /readyz` on the scheduler's secure port: (status, body).
async fn readyz(port: u16) -> Option<(u16, String)> {
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.ok()?;
    let tls = common::insecure_tls_connector().connect(ServerName::try_from("localhost").ok()?, tcp).await.ok()?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await.ok()?;
    tokio::spawn(conn);
    let req = hyper::Request::get("/readyz?verbose").header("host", "localhost").body(Empty::<Bytes>::new()).ok()?;
    let resp = sender.send_request(req).await.ok()?;
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await.ok()?.to_bytes();
    Some((status, String::from_utf8_lossy(&body).into_owned()))
}

struct Fixture {
    server: RunningServer,
    faults: Faults,
    child: Child,
    log: std::path::PathBuf,
    port: u16,
    bindings: Vec<(String, String)>,
}

impl Fixture {
    async fn start() -> Fixture {
        let faults = Faults::with_binding_audit(FaultSpec::default());
        let listen: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let server =
            ApiServer::start(ServerConfig { listen, faults: faults.clone(), ..ServerConfig::default() }).await.unwrap();
        // Per fixture, not per process: the tests of this file run at once, and a scheduler
        // reading another test's kubeconfig would schedule that test's pods.
        static FIXTURES: AtomicUsize = AtomicUsize::new(0);
        let id = format!("{}-{}", std::process::id(), FIXTURES.fetch_add(1, Ordering::Relaxed));
        let dir = std::env::temp_dir();
        let kubeconfig = dir.join(format!("ksched-chaos-bindings-{id}.kubeconfig"));
        server.write_kubeconfig(&kubeconfig).unwrap();
        let log = dir.join(format!("ksched-chaos-bindings-{id}.log"));
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new(env!("CARGO_BIN_EXE_kube-scheduler"))
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg("--leader-elect=false")
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--secure-port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::from(std::fs::File::create(&log).unwrap()))
            .spawn()
            .unwrap();
        Fixture { server, faults, child, log, port, bindings: Vec::new() }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn node(&self, name: &str) {
        self.server
            .store()
            .create(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                "status": {"allocatable": {"cpu": "1", "memory": "4Gi", "pods": "110"}}}))
            .unwrap();
    }

    fn pod(&self, name: &str) {
        self.pod_requesting(name, "1");
    }

    fn pod_requesting(&self, name: &str, cpu: &str) {
        self.server
            .store()
            .create(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
                "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu}}}]}}))
            .unwrap();
    }

    /// True once the pod says the scheduler found no node for it.
    fn refused(&self, pod: &str) -> bool {
        let Some(p) = self.server.store().get("v1", "Pod", Some("default"), pod) else { return false };
        p.pointer("/status/conditions").and_then(Value::as_array).is_some_and(|cs| {
            cs.iter().any(|c| c["type"] == "PodScheduled" && c["status"] == "False" && c["reason"] == "Unschedulable")
        })
    }

    /// True once a FailedScheduling event names the pod.
    fn failed_scheduling(&self, pod: &str) -> bool {
        self.server.store().list("events.k8s.io/v1", "Event", None).iter().any(|e| {
            e.pointer("/regarding/name").and_then(Value::as_str) == Some(pod) && e["reason"] == "FailedScheduling"
        })
    }

    async fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while readyz(self.port).await.is_none_or(|(s, _)| s != 200) {
            assert!(Instant::now() < deadline, "never ready:\n{}", self.log());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn node_of(&self, pod: &str) -> Option<String> {
        let p = self.server.store().get("v1", "Pod", Some("default"), pod)?;
        p.pointer("/spec/nodeName").and_then(Value::as_str).map(str::to_string)
    }

    fn collect(&mut self) {
        for r in self.faults.take_audit() {
            if let Audited::Binding { name, node, .. } = r.what {
                self.bindings.push((name, node));
            }
        }
    }

    async fn wait<T>(&mut self, what: &str, mut f: impl FnMut(&mut Self) -> Option<T>) -> T {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(v) = f(self) {
                return v;
            }
            assert!(self.child.try_wait().unwrap().is_none(), "the scheduler died:\n{}", self.log());
            assert!(Instant::now() < deadline, "timed out waiting for {what}; log:\n{}", self.log());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Slows the scheduler's creates (its bindings) by a second, creates `pod`, and waits
    /// until its binding is held.
    async fn pod_with_held_binding(&mut self, pod: &str) {
        let before = self.faults.counts().latency;
        self.faults.set_spec("latency:p=1:min=1s:max=1s:verbs=create:agent=kube-scheduler/".parse().unwrap());
        self.pod(pod);
        self.wait("a binding held by the injected latency", |f| (f.faults.counts().latency > before).then_some(()))
            .await;
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletions_during_bindings_and_an_api_server_restart() {
    let mut f = Fixture::start().await;
    f.node("n1");
    f.wait_ready().await;

    // A pod deleted while its binding is in flight: the binding fails, nothing is bound, and
    // the room it was assumed to take is free again.
    f.pod_with_held_binding("doomed").await;
    f.server.store().delete("v1", "Pod", Some("default"), "doomed").unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    f.faults.set_spec(FaultSpec::default());
    f.pod("next");
    let node = f.wait("next bound", |f| f.node_of("next")).await;
    assert_eq!(node, "n1", "the deleted pod's room on n1 was freed");

    // A node deleted while a binding to it is in flight: the API server accepts the binding
    // (as upstream's does), and later pods go to live nodes only.
    // (First let next's Scheduled event out: it is a create too.)
    tokio::time::sleep(Duration::from_millis(500)).await;
    f.node("n2");
    f.pod_with_held_binding("orphan").await;
    f.server.store().delete("v1", "Node", None, "n2").unwrap();
    let node = f.wait("orphan bound", |f| f.node_of("orphan")).await;
    assert_eq!(node, "n2");
    f.faults.set_spec(FaultSpec::default());
    f.node("n3");
    f.pod("after");
    let node = f.wait("after bound", |f| f.node_of("after")).await;
    assert_eq!(node, "n3", "nothing goes to the deleted node");

    // The API server restarts: the scheduler reconnects, keeps binding and stays ready.
    f.faults.restart(Duration::from_secs(1));
    tokio::time::sleep(Duration::from_millis(1200)).await;
    f.node("n4");
    f.pod("post-restart");
    let node = f.wait("a pod bound after the restart", |f| f.node_of("post-restart")).await;
    assert_eq!(node, "n4");
    let port = f.port;
    let (status, body) = readyz(port).await.expect("/readyz answers");
    assert_eq!(status, 200, "{body}");
    assert!(body.ends_with("readyz check passed\n"), "{body}");

    f.collect();
    let mut names: Vec<&str> = f.bindings.iter().map(|(n, _)| n.as_str()).collect();
    names.sort();
    assert_eq!(names, ["after", "next", "orphan", "post-restart"], "each bound once, the deleted pod never");
    assert!(f.child.try_wait().unwrap().is_none(), "the scheduler survived:\n{}", f.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_deleted_while_the_api_server_is_down() {
    let mut f = Fixture::start().await;
    f.node("n1");
    f.wait_ready().await;
    // Two pods too big for the node: the scheduler's pod informer holds them.
    f.pod_requesting("gone", "2");
    f.pod_requesting("kept", "2");
    f.wait("both pods refused", |f| (f.refused("gone") && f.refused("kept")).then_some(())).await;

    // Down for a second, during which one of them is deleted and the watch history compacted:
    // the pod watch cannot resume, and its relist comes back without the deleted pod.
    f.faults.restart(Duration::from_secs(1));
    let store = f.server.store();
    store.delete("v1", "Pod", Some("default"), "gone").unwrap();
    store.compact();

    // A pod created now is seen by that relist or by the watch after it; one created once it
    // is bound comes after the relist, so only a pod informer still running after the relist
    // sees it.
    f.pod_requesting("probe", "100m");
    f.wait("a pod created during the outage bound", |f| f.node_of("probe")).await;
    f.pod_requesting("after", "100m");
    let node = f.wait("a pod created after the relist bound", |f| f.node_of("after")).await;
    assert_eq!(node, "n1");
    assert!(!f.refused("probe") && f.refused("kept"));
    assert!(f.child.try_wait().unwrap().is_none(), "the scheduler survived:\n{}", f.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_is_reported_after_a_long_status_write_outage() {
    let mut f = Fixture::start().await;
    f.node("n1");
    f.wait_ready().await;
    // Every status patch fails; creates (events, bindings) go through.
    f.faults.set_spec("error:p=1:codes=500:verbs=patch:rate=1000".parse().unwrap());
    f.pod_requesting("big", "2");
    f.wait("big tried (its FailedScheduling event)", |f| f.failed_scheduling("big").then_some(())).await;
    // Longer than the 30 s the failure handler used to keep trying. Nothing else would report
    // the refusal: the pod waits for a cluster change, or for the 5-minute leftover flush.
    tokio::time::sleep(Duration::from_secs(40)).await;
    assert!(!f.refused("big"), "a status patch went through during the outage");
    f.faults.set_spec(FaultSpec::default());
    f.wait("big reported unschedulable once status writes go through", |f| f.refused("big").then_some(())).await;
    assert!(f.child.try_wait().unwrap().is_none(), "the scheduler survived:\n{}", f.log());
}
