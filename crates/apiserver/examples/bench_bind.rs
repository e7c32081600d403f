//! Rough throughput check: binds N pending pods through the HTTP API with a
//! pod watcher attached, the way a scheduler would.
//! `cargo run --release -p ksched-apiserver --example bench_bind -- [PODS] [CONCURRENCY] [http|https]`

use std::time::Instant;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use ksched_apiserver::{ApiServer, ServerConfig};
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::watcher;
use serde_json::json;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let pods_n: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(10_000);
    let concurrency: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(32);
    let tls = args.next().as_deref() == Some("https");
    let srv = ApiServer::start(ServerConfig { listen: "127.0.0.1:0".parse()?, ..Default::default() }).await?;
    let store = srv.store();
    let t = Instant::now();
    for i in 0..pods_n {
        store
            .create(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("p{i}"), "labels": {"app": "bench"}},
                "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}))
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    println!("created {pods_n} pods in-process in {:?}", t.elapsed());

    let client = if tls {
        let kc = Kubeconfig::from_yaml(&srv.kubeconfig_yaml())?;
        kube::Client::try_from(kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?)?
    } else {
        let mut cfg = kube::Config::new(srv.url().parse()?);
        cfg.auth_info.token = Some(srv.token().to_string().into());
        kube::Client::try_from(cfg)?
    };
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let watch = tokio::spawn({
        let pods = pods.clone();
        async move {
            let mut bound = 0usize;
            let mut s = watcher(pods, watcher::Config::default()).boxed();
            while let Ok(Some(ev)) = s.try_next().await {
                if let watcher::Event::Apply(p) = ev {
                    if p.spec.and_then(|s| s.node_name).is_some() {
                        bound += 1;
                        if bound == pods_n {
                            return bound;
                        }
                    }
                }
            }
            bound
        }
    });
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let t = Instant::now();
    futures::stream::iter(0..pods_n)
        .map(|i| {
            let pods = pods.clone();
            async move {
                let b = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": format!("p{i}")},
                    "target": {"kind": "Node", "name": format!("n{}", i % 100)}});
                pods.create_subresource::<_, serde_json::Value>("binding", &format!("p{i}"), &PostParams::default(), &b)
                    .await
            }
        })
        .buffer_unordered(concurrency)
        .try_for_each(|_| async { Ok(()) })
        .await?;
    let bind_time = t.elapsed();
    let seen = watch.await?;
    println!(
        "bound {pods_n} pods in {bind_time:?} ({:.0}/s, {}), watcher saw {seen} bound after {:?}",
        pods_n as f64 / bind_time.as_secs_f64(),
        if tls { "https" } else { "http" },
        t.elapsed()
    );
    srv.shutdown().await;
    Ok(())
}
