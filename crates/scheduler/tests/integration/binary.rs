//! The `kube-scheduler` binary with upstream-style flags against the embedded API server.

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ksched_apiserver::{ApiServer, ServerConfig};
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_schedules_with_kubeconfig_and_exits_cleanly_on_sigterm() {
    let listen: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let server = ApiServer::start(ServerConfig { listen, ..ServerConfig::default() }).await.unwrap();
    let kubeconfig = std::env::temp_dir().join(format!("kube-scheduler-bin-{}.kubeconfig", std::process::id()));
    server.write_kubeconfig(&kubeconfig).unwrap();
    let store = server.store();
    store
        .create(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
            "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"}}}))
        .unwrap();
    store
        .create(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}]}}))
        .unwrap();

    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_kube-scheduler"))
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg("--leader-elect=false")
        .arg("--bind-address=127.0.0.1")
        .arg(format!("--secure-port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let node = loop {
        let p = store.get("v1", "Pod", Some("default"), "p").unwrap_or(Value::Null);
        if let Some(n) = p.pointer("/spec/nodeName").and_then(Value::as_str) {
            break n.to_string();
        }
        if start.elapsed() > Duration::from_secs(20) || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!("pod not bound; scheduler stderr:\n{}", String::from_utf8_lossy(&out.stderr));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(node, "n1");
    // the secure port serves (health, metrics: see tests/serving.rs for the endpoints)
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_ok(), "nothing listens on --secure-port {port}");

    // SIGTERM: graceful stop, exit 0.
    let pid = child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "scheduler did not exit after SIGTERM");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.success(), "exit status {status:?}");
    let _ = std::fs::remove_file(&kubeconfig);
    server.shutdown().await;
}

#[test]
fn a_bad_config_file_fails_before_touching_the_api() {
    let cfg = std::env::temp_dir().join(format!("bad-config-{}.yaml", std::process::id()));
    std::fs::write(
        &cfg,
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nparallelism: 0\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_kube-scheduler"))
        .arg(format!("--config={}", cfg.display()))
        .arg("--kubeconfig=/nonexistent")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("parallelism: Invalid value: 0: should be an integer value greater than zero"), "{stderr}");
    let _ = std::fs::remove_file(&cfg);
}
