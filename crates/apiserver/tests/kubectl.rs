//! Compatibility with the real kubectl (skipped when /usr/bin/kubectl is absent).

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};

const KUBECTL: &str = "/usr/bin/kubectl";

struct Kubectl {
    kubeconfig: PathBuf,
}

impl Kubectl {
    /// Runs kubectl; returns (success, stdout, stderr).
    async fn run(&self, args: &[&str]) -> (bool, String, String) {
        let out = tokio::time::timeout(
            Duration::from_secs(60),
            tokio::process::Command::new(KUBECTL)
                .arg("--kubeconfig")
                .arg(&self.kubeconfig)
                .args(args)
                .env("HOME", self.kubeconfig.parent().unwrap())
                .kill_on_drop(true)
                .output(),
        )
        .await
        .expect("kubectl finished in time")
        .expect("kubectl runs");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    }

    async fn ok(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.run(args).await;
        assert!(ok, "kubectl {args:?} failed:\nstdout: {out}\nstderr: {err}");
        out
    }
}

fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ksched-apiserver-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Whitespace-split cells of the row starting with `name`.
fn row(table: &str, name: &str) -> Vec<String> {
    table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no row {name} in:\n{table}"))
        .split_whitespace()
        .map(String::from)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_apply_describe_delete() {
    if !Path::new(KUBECTL).exists() {
        eprintln!("skipping: {KUBECTL} not found");
        return;
    }
    let srv = start().await;
    let dir = scratch_dir("kubectl");
    let kubeconfig = dir.join("kubeconfig");
    srv.write_kubeconfig(&kubeconfig).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&kubeconfig).unwrap().permissions().mode() & 0o777, 0o600);
    }
    let k = Kubectl { kubeconfig };

    let out = k.ok(&["get", "namespaces"]).await;
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        assert_eq!(row(&out, ns)[1], "Active", "{out}");
    }

    srv.store().create(serde_json::to_value(node("n1")).unwrap()).unwrap();
    let out = k.ok(&["get", "nodes"]).await;
    assert_eq!(row(&out, "n1")[..2], ["n1", "Ready"], "{out}");
    let out = k.ok(&["get", "no", "-o", "wide"]).await;
    assert!(out.contains("CONTAINER-RUNTIME") && out.contains("containerd://2.0"), "{out}");

    let manifest = dir.join("pod.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web-1\n  labels:\n    app: web\nspec:\n  containers:\n  - name: nginx\n    image: nginx:1.27\n",
    )
    .unwrap();
    let out = k.ok(&["apply", "-f", manifest.to_str().unwrap()]).await;
    assert_eq!(out.trim(), "pod/web-1 created");
    let out = k.ok(&["apply", "-f", manifest.to_str().unwrap()]).await;
    assert_eq!(out.trim(), "pod/web-1 unchanged");
    let pod = srv.store().get("v1", "Pod", Some("default"), "web-1").expect("pod stored");
    assert!(pod["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"].is_string());

    let out = k.ok(&["get", "pods", "-o", "wide"]).await;
    assert_eq!(row(&out, "web-1")[6], "<none>", "unbound pod has no NODE:\n{out}");

    assert_eq!(bind(&srv, "default", "web-1", "n1", None).await.0, 201);
    srv.store()
        .create(json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "web-1.1", "namespace": "default"},
            "eventTime": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": "default", "name": "web-1",
                "uid": pod["metadata"]["uid"]},
            "reason": "Scheduled", "note": "Successfully assigned default/web-1 to n1", "type": "Normal",
            "action": "Binding", "reportingController": "default-scheduler", "reportingInstance": "x"}))
        .unwrap();

    let out = k.ok(&["get", "pods", "-o", "wide"]).await;
    let header: Vec<&str> = out.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header[..7], ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE"]);
    let r = row(&out, "web-1");
    assert_eq!((r[1].as_str(), r[2].as_str(), r[6].as_str()), ("0/1", "Pending", "n1"), "{out}");

    let out = k.ok(&["get", "pod", "web-1", "-o", "yaml"]).await;
    assert!(out.contains("nodeName: n1") && out.contains("schedulerName: default-scheduler"), "{out}");

    let out = k.ok(&["describe", "pod", "web-1"]).await;
    assert!(out.lines().any(|l| l.starts_with("Node:") && l.contains("n1")), "{out}");
    assert!(out.contains("Successfully assigned default/web-1 to n1"), "describe shows scheduler events:\n{out}");
    assert!(out.contains("default-scheduler"), "{out}");

    let out = k.ok(&["get", "events"]).await;
    assert!(out.contains("pod/web-1") && out.contains("Scheduled"), "{out}");

    let out = k.ok(&["label", "pod", "web-1", "tier=front"]).await;
    assert_eq!(out.trim(), "pod/web-1 labeled");
    let out = k.ok(&["get", "pods", "-l", "tier=front", "-o", "name"]).await;
    assert_eq!(out.trim(), "pod/web-1");

    let (ok, _, err) = k.run(&["get", "pod", "missing"]).await;
    assert!(!ok && err.contains("pods \"missing\" not found"), "{err}");

    let out = k.ok(&["delete", "pod", "web-1"]).await;
    assert_eq!(out.trim(), "pod \"web-1\" deleted");
    assert!(srv.store().get("v1", "Pod", Some("default"), "web-1").is_none());

    let _ = std::fs::remove_dir_all(&dir);
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_watch_streams_changes() {
    if !Path::new(KUBECTL).exists() {
        eprintln!("skipping: {KUBECTL} not found");
        return;
    }
    let srv = start().await;
    let dir = scratch_dir("kubectl-watch");
    let kubeconfig = dir.join("kubeconfig");
    srv.write_kubeconfig(&kubeconfig).unwrap();
    let store = srv.store();
    store
        .create(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "w1"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}))
        .unwrap();
    let mut child = tokio::process::Command::new(KUBECTL)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["get", "pods", "-w", "-o", "wide", "--request-timeout=0"])
        .env("HOME", &dir)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut next_row = async || -> String {
        loop {
            let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
                .await
                .expect("kubectl printed in time")
                .unwrap()
                .expect("kubectl still running");
            if line.starts_with("w1") {
                return line;
            }
        }
    };
    let initial = next_row().await;
    assert!(initial.contains("<none>"), "unbound at first: {initial}");
    assert_eq!(bind(&srv, "default", "w1", "n9", None).await.0, 201);
    let update = next_row().await;
    let cells: Vec<&str> = update.split_whitespace().collect();
    assert_eq!(cells[6], "n9", "the watched update shows the node: {update}");
    child.kill().await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    srv.shutdown().await;
}
