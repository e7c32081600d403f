//! Shared helpers for the integration tests: servers on ephemeral ports and clients.
#![allow(dead_code)]

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use ksched_apiserver::{ApiServer, RunningServer, ServerConfig};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Config for a server on an ephemeral loopback port.
pub fn ephemeral() -> ServerConfig {
    ServerConfig { listen: "127.0.0.1:0".parse().unwrap(), ..ServerConfig::default() }
}

pub async fn start() -> RunningServer {
    ApiServer::start(ephemeral()).await.expect("server starts")
}

/// A `kube` client configured exactly as an external program would be: from the kubeconfig (HTTPS).
pub async fn client(srv: &RunningServer) -> kube::Client {
    let kc = Kubeconfig::from_yaml(&srv.kubeconfig_yaml()).expect("kubeconfig parses");
    let cfg = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await.expect("kubeconfig loads");
    kube::Client::try_from(cfg).expect("client builds")
}

/// A `kube` client over plain HTTP with the bearer token (in-process use).
pub fn http_client(srv: &RunningServer, token: Option<&str>) -> kube::Client {
    let mut cfg = kube::Config::new(srv.url().parse().unwrap());
    cfg.auth_info.token = token.map(|t| t.to_string().into());
    cfg.read_timeout = Some(Duration::from_secs(30));
    kube::Client::try_from(cfg).expect("client builds")
}

/// One plain HTTP/1.1 request; returns (status, body).
pub async fn raw(
    srv: &RunningServer,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(srv.addr()).await.unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    s.write_all(body).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out)).await.expect("response in time").unwrap();
    let text = String::from_utf8_lossy(&out).to_string();
    let status = text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}

pub fn bearer(srv: &RunningServer) -> String {
    format!("Bearer {}", srv.token())
}

pub fn pod(name: &str, labels: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}
    }))
    .unwrap()
}

pub fn node(name: &str) -> Node {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
            "nodeInfo": {"kubeletVersion": "v1.36.0", "architecture": "amd64", "bootID": "", "containerRuntimeVersion": "containerd://2.0",
                "kernelVersion": "6.1", "kubeProxyVersion": "", "machineID": "", "operatingSystem": "linux", "osImage": "Linux", "systemUUID": ""}}
    }))
    .unwrap()
}

/// Binds `pod` to `node` through the pods/binding subresource.
pub async fn bind(srv: &RunningServer, ns: &str, pod: &str, node: &str, uid: Option<&str>) -> (u16, String) {
    let mut meta = json!({"name": pod, "namespace": ns});
    if let Some(uid) = uid {
        meta["uid"] = json!(uid);
    }
    let body =
        json!({"apiVersion": "v1", "kind": "Binding", "metadata": meta, "target": {"kind": "Node", "name": node}});
    raw(
        srv,
        "POST",
        &format!("/api/v1/namespaces/{ns}/pods/{pod}/binding"),
        &[("Authorization", &bearer(srv)), ("Content-Type", "application/json")],
        body.to_string().as_bytes(),
    )
    .await
}
