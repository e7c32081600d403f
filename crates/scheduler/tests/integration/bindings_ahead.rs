//! A burst of pending pods against an API server that binds slowly: at most
//! `MAX_CONCURRENT_BINDINGS` bind calls are in flight, the scheduling loop stops taking pods
//! while `MAX_BINDINGS_AHEAD` binding cycles wait (each holds an assumed copy of its pod, its
//! cycle state and a suspended task), and every pod is bound once the server catches up.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use ksched_framework::client::{ApiClient, ApiError};
use ksched_framework::node::Node;
use ksched_framework::pod::Pod;
use ksched_scheduler::inprocess::InProcessCluster;
use ksched_scheduler::scheduler::{MAX_BINDINGS_AHEAD, MAX_CONCURRENT_BINDINGS};
use serde_json::json;
use tokio::sync::Semaphore;

/// Pods of the burst: more than the loop may run ahead of the bindings.
const PODS: usize = MAX_BINDINGS_AHEAD + 1000;

/// Holds every binding until `release` has a permit for it.
struct HeldBindings {
    inner: Arc<dyn ApiClient>,
    release: Arc<Semaphore>,
    started: Arc<AtomicUsize>,
}

impl ApiClient for HeldBindings {
    fn bind(&self, pod: &Pod, node: &str) -> BoxFuture<'static, Result<(), ApiError>> {
        self.started.fetch_add(1, Ordering::SeqCst);
        let (release, bind) = (self.release.clone(), self.inner.bind(pod, node));
        Box::pin(async move {
            let _held = release.acquire().await;
            bind.await
        })
    }
    fn patch_pod_status(
        &self,
        ns: &str,
        name: &str,
        patch: serde_json::Value,
    ) -> BoxFuture<'static, Result<(), ApiError>> {
        self.inner.patch_pod_status(ns, name, patch)
    }
    fn delete_pod(&self, ns: &str, name: &str, uid: Option<&str>) -> BoxFuture<'static, Result<(), ApiError>> {
        self.inner.delete_pod(ns, name, uid)
    }
}

async fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_loop_waits_for_slow_bindings_and_binds_every_pod() {
    let release = Arc::new(Semaphore::new(0));
    let started = Arc::new(AtomicUsize::new(0));
    let (r, s) = (release.clone(), started.clone());
    let cfg = ksched_scheduler::config::default_config();
    let mut c = InProcessCluster::with_client_wrapper(
        &cfg,
        &ksched_plugins::in_tree_registry(),
        Arc::new(ksched_scheduler::metrics::NoopMetrics),
        move |inner| Arc::new(HeldBindings { inner, release: r, started: s }),
    )
    .unwrap();
    for i in 0..20 {
        c.apply_node(
            serde_json::from_value::<Node>(json!({"metadata": {"name": format!("node-{i}")},
                "status": {"allocatable": {"cpu": "1000", "memory": "1000Gi", "pods": "1000"}}}))
            .unwrap(),
        );
    }
    for i in 0..PODS {
        c.apply_pod(
            serde_json::from_value::<Pod>(json!({"metadata": {"name": format!("p-{i}"), "namespace": "default"},
                "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "10m"}}}]}}))
            .unwrap(),
        );
    }
    c.start();

    let started_all = || started.load(Ordering::SeqCst) >= MAX_CONCURRENT_BINDINGS;
    wait_for("the first bindings", Duration::from_secs(60), started_all).await;
    let ahead = || c.scheduler.cache.size().assumed_pods >= MAX_BINDINGS_AHEAD;
    wait_for("the loop to run ahead", Duration::from_secs(60), ahead).await;
    // Room for the loop to go on if nothing held it back.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let assumed = c.scheduler.cache.size().assumed_pods;
    assert!(assumed <= MAX_BINDINGS_AHEAD, "{assumed} pods assumed while their bindings wait");
    assert_eq!(started.load(Ordering::SeqCst), MAX_CONCURRENT_BINDINGS, "bindings in flight");
    assert_eq!(c.bound(), 0);

    release.add_permits(PODS);
    wait_for("every pod bound", Duration::from_secs(120), || c.bound() == PODS).await;
    assert_eq!(c.placements().len(), PODS, "each pod bound once");
    wait_for("no pod left assumed", Duration::from_secs(60), || c.scheduler.cache.size().assumed_pods == 0).await;
    c.stop().await;
}
