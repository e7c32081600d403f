//! What the scheduler keeps per node and per bound pod, in heap bytes, for objects as a given
//! API server writes them.
//!
//! Takes one node and one pod as the server returned them (`kubectl get -o json`; a `List` is
//! read by its first item), makes `NODES` nodes and `PODS` pods bound round-robin to them from
//! those templates (each with its own name, uid and resourceVersion of the template's lengths),
//! decodes each from JSON text as the watchers do, and feeds it to an in-process scheduler (the
//! real event handlers, pod store, cache, queue and snapshot). A counting allocator over the
//! binaries' own (mimalloc) tracks the live heap: bytes requested, and bytes of the allocator's
//! slots (each request rounded up to its size class), and the high-water mark of the bytes
//! requested. Prints, per node and per pod: the most heap decoding and keeping one object takes
//! at once (its decode's transient peak), the kept object alone (decoded and projected as the
//! event handlers keep it, without the scheduler), and everything the scheduler holds for it
//! (pod store, cache, snapshot, the object itself).
//!
//! With `--full` the scheduler keeps whole objects, as it does when extenders are configured
//! (one is configured here; no pod is pending, so it is never called): the watchers then
//! decode the API's types and keep them beside the kept fields.
//!
//! `cargo run --release -p ksched-scheduler --example object_cost -- NODE.json POD.json [NODES] [PODS] [--full]`

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ksched_framework::node::Node;
use ksched_framework::pod::Pod;
use ksched_scheduler::allocator::MiMalloc;
use ksched_scheduler::config::Extender;
use ksched_scheduler::inprocess::InProcessCluster;
use ksched_scheduler::projection::Projection;
use serde_json::Value;

/// Live bytes requested, and live bytes of the slots that hold them.
static REQUESTED: AtomicI64 = AtomicI64::new(0);
static SLOTS: AtomicI64 = AtomicI64::new(0);
/// High-water mark of [`REQUESTED`] since the last [`reset_peak`].
static PEAK: AtomicI64 = AtomicI64::new(0);

fn grew(by: i64) {
    let now = REQUESTED.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

fn reset_peak() -> i64 {
    let now = REQUESTED.load(Ordering::Relaxed);
    PEAK.store(now, Ordering::Relaxed);
    now
}

struct Counting;

fn usable(p: *mut u8) -> i64 {
    // SAFETY: `p` is a live allocation of mimalloc's.
    unsafe { libmimalloc_sys::mi_usable_size(p.cast()) as i64 }
}

// SAFETY: forwards to mimalloc unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = MiMalloc.alloc(l);
        if !p.is_null() {
            grew(l.size() as i64);
            SLOTS.fetch_add(usable(p), Ordering::Relaxed);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let p = MiMalloc.alloc_zeroed(l);
        if !p.is_null() {
            grew(l.size() as i64);
            SLOTS.fetch_add(usable(p), Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        REQUESTED.fetch_sub(l.size() as i64, Ordering::Relaxed);
        SLOTS.fetch_sub(usable(p), Ordering::Relaxed);
        MiMalloc.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let before = usable(p);
        let q = MiMalloc.realloc(p, l, new);
        if !q.is_null() {
            grew(new as i64 - l.size() as i64);
            SLOTS.fetch_add(usable(q) - before, Ordering::Relaxed);
        }
        q
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn live() -> (i64, i64) {
    (REQUESTED.load(Ordering::Relaxed), SLOTS.load(Ordering::Relaxed))
}

/// The first item of a `List`, or the object itself.
fn object(path: &str) -> anyhow::Result<Value> {
    let v: Value = serde_json::from_slice(&std::fs::read(path)?)?;
    Ok(match v.get("items").and_then(Value::as_array) {
        Some(items) => items.first().cloned().ok_or_else(|| anyhow::anyhow!("{path}: empty list"))?,
        None => v,
    })
}

/// `template` with its last `digits.len()` characters replaced by `digits` (left-padded with
/// zeros), so that generated names and uids keep the template's lengths.
fn numbered(template: &str, i: usize) -> String {
    let digits = i.to_string();
    let keep = template.len().saturating_sub(digits.len().max(6));
    format!("{}{:0>width$}", &template[..keep], digits, width = template.len() - keep)
}

fn set(v: &mut Value, path: &[&str], to: Value) {
    let mut at = v;
    for k in &path[..path.len() - 1] {
        at = &mut at[*k];
    }
    at[path[path.len() - 1]] = to;
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    path.iter().try_fold(v, |v, k| v.get(*k)).and_then(Value::as_str).unwrap_or("")
}

async fn settle() {
    // The idle scheduling loop brings the snapshot up to date with the cache.
    tokio::time::sleep(Duration::from_millis(1500)).await;
}

/// Decodes a pod as the pod watcher does under `full` (whole objects) or not.
fn decode_pod(text: &[u8], full: bool) -> anyhow::Result<Pod> {
    Ok(if full {
        Pod::with_object(serde_json::from_slice::<k8s_openapi::api::core::v1::Pod>(text)?)
    } else {
        serde_json::from_slice::<Pod>(text)?
    })
}

/// Decodes a node as the node watcher does.
fn decode_node(text: &[u8], full: bool) -> anyhow::Result<Node> {
    Ok(if full {
        Node::with_object(serde_json::from_slice::<k8s_openapi::api::core::v1::Node>(text)?)
    } else {
        serde_json::from_slice::<Node>(text)?
    })
}

/// The JSON text of node `i` made from `t`.
fn node_text(t: &Value, name: &str, uid_t: &str, i: usize) -> anyhow::Result<Vec<u8>> {
    let mut n = t.clone();
    set(&mut n, &["metadata", "name"], name.into());
    set(&mut n, &["metadata", "uid"], numbered(uid_t, i).into());
    if n["metadata"]["labels"].get("kubernetes.io/hostname").is_some() {
        set(&mut n, &["metadata", "labels", "kubernetes.io/hostname"], name.into());
    }
    Ok(serde_json::to_vec(&n)?)
}

/// The JSON text of pod `i` made from `t`, bound to `node`.
fn pod_text(t: &Value, name_t: &str, uid_t: &str, i: usize, node: &str) -> anyhow::Result<Vec<u8>> {
    let mut p = t.clone();
    set(&mut p, &["metadata", "name"], numbered(name_t, i).into());
    set(&mut p, &["metadata", "uid"], numbered(uid_t, i).into());
    set(&mut p, &["spec", "nodeName"], node.into());
    Ok(serde_json::to_vec(&p)?)
}

/// Bytes per object between two readings.
fn per(a: (i64, i64), b: (i64, i64), n: usize) -> (f64, f64) {
    let n = n.max(1) as f64;
    ((b.0 - a.0) as f64 / n, (b.1 - a.1) as f64 / n)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let full = args.iter().any(|a| a == "--full");
    args.retain(|a| a != "--full");
    let (Some(node_file), Some(pod_file)) = (args.first(), args.get(1)) else {
        anyhow::bail!("usage: object_cost NODE.json POD.json [NODES] [PODS] [--full]");
    };
    let nodes: usize = args.get(2).map(|a| a.parse()).transpose()?.unwrap_or(5000).max(1);
    let pods: usize = args.get(3).map(|a| a.parse()).transpose()?.unwrap_or(30000);
    let (node_t, pod_t) = (object(node_file)?, object(pod_file)?);
    let node_name_t = str_at(&node_t, &["metadata", "name"]).to_string();
    let node_uid_t = str_at(&node_t, &["metadata", "uid"]).to_string();
    let pod_name_t = str_at(&pod_t, &["metadata", "name"]).to_string();
    let pod_uid_t = str_at(&pod_t, &["metadata", "uid"]).to_string();
    let node_names: Vec<String> = (0..nodes).map(|i| numbered(&node_name_t, i)).collect();
    let projection = if full { Projection::Full } else { Projection::Scheduling };
    let (node_json, pod_json) = (node_text(&node_t, &node_names[0], &node_uid_t, 0)?.len(), {
        pod_text(&pod_t, &pod_name_t, &pod_uid_t, 0, &node_names[0])?.len()
    });
    println!(
        "{nodes} nodes from {node_file} ({node_json} B of JSON), {pods} pods from {pod_file} ({pod_json} B), {}",
        if full { "whole objects (extender configured)" } else { "scheduling projection" }
    );

    // The kept objects alone, as the event handlers keep them, and each decode's peak.
    let mut kept_nodes = Vec::with_capacity(nodes);
    let mut kept_pods: Vec<Arc<Pod>> = Vec::with_capacity(pods);
    let (mut node_peak, mut pod_peak) = (0, 0);
    let before = live();
    for (i, name) in node_names.iter().enumerate() {
        let text = node_text(&node_t, name, &node_uid_t, i)?;
        let at = reset_peak();
        kept_nodes.push(projection.node(decode_node(&text, full)?));
        node_peak = node_peak.max(PEAK.load(Ordering::Relaxed) - at);
    }
    let after_nodes = live();
    for i in 0..pods {
        let text = pod_text(&pod_t, &pod_name_t, &pod_uid_t, i, &node_names[i % nodes])?;
        let at = reset_peak();
        kept_pods.push(Arc::new(projection.pod(decode_pod(&text, full)?)));
        pod_peak = pod_peak.max(PEAK.load(Ordering::Relaxed) - at);
    }
    let after_pods = live();
    let (n, p) = (per(before, after_nodes, nodes), per(after_nodes, after_pods, pods));
    println!("kept object alone, requested / slots: node {:.0} / {:.0} B, pod {:.0} / {:.0} B", n.0, n.1, p.0, p.1);
    println!("decode peak (decoded object and what is kept of it, at once): node {node_peak} B, pod {pod_peak} B");
    drop((kept_nodes, kept_pods));

    // Through an in-process scheduler: the real event handlers, pod store, cache and snapshot.
    let mut cfg = ksched_scheduler::config::default_config();
    if full {
        cfg.extenders.push(Extender {
            url_prefix: "http://127.0.0.1:9/never-called".into(),
            filter_verb: "filter".into(),
            ..Default::default()
        });
    }
    let registry = ksched_plugins::in_tree_registry();
    let mut c = InProcessCluster::new(&cfg, &registry, Arc::new(ksched_scheduler::metrics::NoopMetrics))?;
    c.start();
    settle().await;
    let base = live();
    for (i, name) in node_names.iter().enumerate() {
        c.apply_node(decode_node(&node_text(&node_t, name, &node_uid_t, i)?, full)?);
    }
    settle().await;
    let after_nodes = live();
    for i in 0..pods {
        c.apply_pod(decode_pod(&pod_text(&pod_t, &pod_name_t, &pod_uid_t, i, &node_names[i % nodes])?, full)?);
    }
    settle().await;
    let after_pods = live();
    let mib = |b: i64| b as f64 / (1024.0 * 1024.0);
    println!(
        "scheduler's live heap, requested / slots: start {:.1} / {:.1} MiB, + nodes {:.1} / {:.1} MiB, + pods {:.1} / {:.1} MiB",
        mib(base.0),
        mib(base.1),
        mib(after_nodes.0),
        mib(after_nodes.1),
        mib(after_pods.0),
        mib(after_pods.1)
    );
    let (n, p) = (per(base, after_nodes, nodes), per(after_nodes, after_pods, pods));
    println!(
        "in the scheduler, requested / slots: per node {:.0} / {:.0} B, per pod {:.0} / {:.0} B",
        n.0, n.1, p.0, p.1
    );
    c.stop().await;
    Ok(())
}
