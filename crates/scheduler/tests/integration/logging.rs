//! `--logging-format=json`: every line the binary writes is one component-base JSON object,
//! and the lines operators grep for carry upstream's message and keys.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ksched_apiserver::{ApiServer, ServerConfig};
use serde_json::{json, Value};

fn pod(name: &str, cpu: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu}}}]}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_carry_upstreams_messages_and_keys() {
    let listen: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let server = ApiServer::start(ServerConfig { listen, ..ServerConfig::default() }).await.unwrap();
    let kubeconfig = std::env::temp_dir().join(format!("kube-scheduler-logging-{}.kubeconfig", std::process::id()));
    server.write_kubeconfig(&kubeconfig).unwrap();
    let store = server.store();
    store
        .create(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
            "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"}}}))
        .unwrap();
    store.create(pod("fits", "1")).unwrap();
    store.create(pod("too-big", "100")).unwrap();

    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_kube-scheduler"))
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .args(["--logging-format=json", "-v=2", "--bind-address=127.0.0.1"])
        .arg(format!("--secure-port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel::<String>();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });

    let wanted = [
        "Attempting to acquire leader lease...",
        "Successfully acquired lease",
        "Successfully bound pod to node",
        "Unable to schedule pod; no fit; waiting",
    ];
    let mut raw: Vec<String> = Vec::new();
    let mut lines: Vec<Value> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !wanted.iter().all(|w| lines.iter().any(|l| l["msg"] == *w)) {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                let v: Value =
                    serde_json::from_str(&line).unwrap_or_else(|e| panic!("not a JSON log line ({e}): {line}"));
                lines.push(v);
                raw.push(line);
            }
            Err(_) => {
                let _ = child.kill();
                let msgs: Vec<&Value> = lines.iter().map(|l| &l["msg"]).collect();
                panic!("missing some of {wanted:?}; got {msgs:?}");
            }
        }
    }
    let _ = child.kill();
    let _ = child.wait();

    for (l, r) in lines.iter().zip(&raw) {
        assert!(r.starts_with("{\"ts\":") && r.contains(",\"caller\":"), "{r}");
        assert!(l["ts"].as_f64().unwrap() > 1.0e12, "ts is epoch milliseconds: {r}");
    }
    let bound_raw = raw.iter().find(|r| r.contains("\"Successfully bound pod to node\"")).unwrap();
    let order = [
        "\"ts\":",
        "\"caller\":",
        "\"msg\":",
        "\"v\":",
        "\"pod\":",
        "\"node\":",
        "\"evaluatedNodes\":",
        "\"feasibleNodes\":",
    ];
    let pos: Vec<usize> = order.iter().map(|k| bound_raw.find(k).unwrap()).collect();
    assert!(pos.windows(2).all(|w| w[0] < w[1]), "keys out of order: {bound_raw}");
    let find = |m: &str| lines.iter().find(|l| l["msg"] == m).unwrap().clone();

    let bound = find("Successfully bound pod to node");
    assert_eq!(bound.as_object().unwrap().len(), order.len(), "{bound}");
    assert_eq!(bound["v"], 2);
    assert_eq!(bound["pod"], json!({"name": "fits", "namespace": "default"}));
    assert_eq!(bound["node"], "n1");
    assert_eq!(bound["evaluatedNodes"], 1);
    assert_eq!(bound["feasibleNodes"], 1);

    let nofit = find("Unable to schedule pod; no fit; waiting");
    assert_eq!(nofit["v"], 2);
    assert_eq!(nofit["pod"], json!({"name": "too-big", "namespace": "default"}));
    // The FitError message (its full text is pinned by the FailedScheduling tests).
    assert!(nofit["err"].as_str().unwrap().starts_with("0/1 nodes are available: 1 Insufficient cpu."), "{nofit}");

    for m in ["Attempting to acquire leader lease...", "Successfully acquired lease"] {
        let l = find(m);
        assert_eq!(l["v"], 0, "{l}");
        assert_eq!(l["lock"], "kube-system/kube-scheduler", "{l}");
    }
    let _ = std::fs::remove_file(&kubeconfig);
    server.shutdown().await;
}
