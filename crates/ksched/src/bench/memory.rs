//! `ksched bench --mode memory`: the resident memory of our `kube-scheduler` as a cluster grows.
//!
//! The embedded API server runs in this process; the scheduler is the `kube-scheduler` binary,
//! a separate process watching it over HTTP, so its resident set is its own and the whole path
//! (HTTP, JSON decode, informers, cache, queue) is measured. Objects look like a real cluster's
//! ([`super::realistic`]). The cluster grows in steps: nodes first, then pods, each pod step
//! created through the API, scheduled, then given a running status as a kubelet would write it.
//! After every step the scheduler is left to settle (its CPU time stops moving) and `VmRSS` /
//! `VmHWM` are read from `/proc/PID/status`. Bytes per node and per pod are the slopes of
//! least-squares fits of the settled RSS. Finally a second scheduler starts on the full cluster
//! (its initial LIST), and its peak is read too.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::Pod;
use ksched_apiserver::{ApiServer, ServerConfig, Store};
use kube::api::{Api, Patch, PatchParams, PostParams};
use parking_lot::Mutex;
use plotters::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::realistic;
use super::templates::{self, NodeTemplate, PodTemplate};
use super::BenchArgs;

/// Concurrent API requests of the load generator (as upstream's `createPods` workers).
const CONCURRENCY: usize = 30;
/// Client queries per second (and burst) of the measured scheduler.
const CLIENT_QPS: u32 = 5000;
/// How often the background sampler reads the scheduler's memory.
const SAMPLE_EVERY: Duration = Duration::from_millis(250);
/// A settled scheduler uses at most this many CPU ticks (10 ms) per [`IDLE_WINDOW`].
const IDLE_TICKS: u64 = 2;
const IDLE_WINDOW: Duration = Duration::from_millis(400);
/// Consecutive idle windows that count as settled.
const IDLE_WINDOWS: usize = 3;

/// Memory of a process, from `/proc/PID/status`.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct ProcMemory {
    /// `VmRSS`, bytes.
    pub rss: u64,
    /// `VmHWM` (peak RSS since the process started), bytes.
    pub hwm: u64,
}

/// Reads `VmRSS` and `VmHWM` of `pid`.
pub fn proc_memory(pid: u32) -> Option<ProcMemory> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        Some(line.split_whitespace().nth(1)?.parse::<u64>().ok()? * 1024)
    };
    Some(ProcMemory { rss: field("VmRSS:")?, hwm: field("VmHWM:")? })
}

/// User + system CPU ticks of `pid`.
fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_whitespace().skip(11);
    Some(f.next()?.parse::<u64>().ok()? + f.next()?.parse::<u64>().ok()?)
}

/// `(pid, parent pid, command name)` of every process.
fn processes() -> Vec<(u32, u32, String)> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.filter_map(|e| {
        let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let (open, close) = (stat.find('(')?, stat.rfind(')')?);
        let comm = stat[open + 1..close].to_string();
        let ppid = stat[close + 1..].split_whitespace().nth(1)?.parse().ok()?;
        Some((pid, ppid, comm))
    })
    .collect()
}

/// The process named `comm` among `root` and its descendants (the scheduler itself when it runs
/// under a wrapper such as heaptrack).
fn find_process(root: u32, comm: &str) -> Option<u32> {
    let all = processes();
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        if all.iter().any(|(pid, _, c)| *pid == p && c == comm) {
            return Some(p);
        }
        frontier.extend(all.iter().filter(|(_, ppid, _)| *ppid == p).map(|(pid, _, _)| *pid));
    }
    None
}

/// A `kube-scheduler` child process.
struct SchedulerProcess {
    child: std::process::Child,
    /// The scheduler's own pid (differs from the child's under a wrapper).
    pid: u32,
}

impl SchedulerProcess {
    fn spawn(bin: &Path, wrapper: &[String], run: usize, kubeconfig: &Path, log: &Path) -> anyhow::Result<Self> {
        let log_file = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
        let (program, mut args): (PathBuf, Vec<String>) = match wrapper.split_first() {
            Some((w, rest)) => (
                PathBuf::from(w),
                rest.iter().map(|a| a.replace("{run}", &run.to_string())).chain([bin.display().to_string()]).collect(),
            ),
            None => (bin.to_path_buf(), Vec::new()),
        };
        // Upstream's default client rate (50 queries per second) would set every step's time,
        // binding and event writes alike; the bench measures the scheduler, as scheduler_perf
        // and the anchors' side-by-side runs do with 5000.
        args.extend([
            format!("--kubeconfig={}", kubeconfig.display()),
            "--leader-elect=false".into(),
            "--secure-port=0".into(),
            format!("--kube-api-qps={CLIENT_QPS}"),
            format!("--kube-api-burst={CLIENT_QPS}"),
        ]);
        let child = std::process::Command::new(&program)
            .args(&args)
            .stdout(log_file.try_clone()?)
            .stderr(log_file)
            .spawn()
            .with_context(|| format!("starting {}", program.display()))?;
        let comm: String =
            bin.file_name().and_then(|n| n.to_str()).unwrap_or("kube-scheduler").chars().take(15).collect();
        let deadline = Instant::now() + Duration::from_secs(30);
        let pid = loop {
            if let Some(pid) = find_process(child.id(), &comm) {
                break pid;
            }
            anyhow::ensure!(Instant::now() < deadline, "no {comm} process under pid {} after 30 s", child.id());
            std::thread::sleep(Duration::from_millis(50));
        };
        Ok(SchedulerProcess { child, pid })
    }

    fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Asks the scheduler to stop (SIGTERM) and waits for the child (a wrapper may take long to
    /// write its profile).
    fn stop(mut self, wait: Duration) -> anyhow::Result<()> {
        let _ = std::process::Command::new("kill").arg("-TERM").arg(self.pid.to_string()).status();
        let deadline = Instant::now() + wait;
        while Instant::now() < deadline {
            if self.child.try_wait()?.is_some() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        self.child.kill()?;
        self.child.wait()?;
        anyhow::bail!("the scheduler did not exit within {wait:?} of SIGTERM; killed")
    }
}

impl Drop for SchedulerProcess {
    // A run that fails half-way must not leave a scheduler behind.
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = std::process::Command::new("kill").arg("-KILL").arg(self.pid.to_string()).status();
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Waits until the process has used (almost) no CPU for a while: it handled every event.
async fn settle(pid: u32, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    let mut idle = 0;
    let mut last = cpu_ticks(pid);
    while Instant::now() < deadline {
        tokio::time::sleep(IDLE_WINDOW).await;
        let now = cpu_ticks(pid);
        match (last, now) {
            (Some(a), Some(b)) if b.saturating_sub(a) <= IDLE_TICKS => idle += 1,
            (Some(_), Some(_)) => idle = 0,
            _ => return false,
        }
        if idle >= IDLE_WINDOWS {
            return true;
        }
        last = now;
    }
    false
}

/// What `--mode memory` fills the cluster with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MemoryObjects {
    /// Kubelet-style nodes and Deployment pods as kube-apiserver stores them (managed fields,
    /// images, volumes, inter-pod affinity): what a real cluster's scheduler holds.
    #[default]
    Realistic,
    /// scheduler_perf's default node and pod (SchedulingBasic's): small objects, for sizes whose
    /// realistic objects the embedded API server cannot hold on the machine (a million pods).
    Basic,
}

impl MemoryObjects {
    fn node(self, index: usize) -> Value {
        match self {
            MemoryObjects::Realistic => realistic::node(index, 1),
            MemoryObjects::Basic => {
                let node = templates::node(NodeTemplate::Default, &format!("node-{index}"), &[]);
                serde_json::to_value(node).expect("a node serializes")
            }
        }
    }

    /// Pod `index`; `seed` varies the realistic pods' random fields.
    fn pod(self, apps: &[realistic::App], index: usize, seed: u64) -> Value {
        match self {
            MemoryObjects::Realistic => realistic::pod(&apps[index % apps.len()], index, seed),
            MemoryObjects::Basic => {
                let ns = format!("team-{}", index % realistic::NAMESPACES);
                let pod = templates::pod(PodTemplate::Default, &ns, &format!("pod-{index}"), &[]);
                serde_json::to_value(pod).expect("a pod serializes")
            }
        }
    }
}

/// One settled measurement.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    /// Nodes in the cluster.
    pub nodes: usize,
    /// Pods in the cluster (all bound and running).
    pub pods: usize,
    /// The scheduler's RSS, MiB.
    pub rss_mib: f64,
    /// The scheduler's peak RSS so far, MiB.
    pub peak_mib: f64,
    /// Seconds from the step's first pod created to its last one bound (pod steps), or from the
    /// scheduler's start to its first pod bound (the cold start).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    /// Pods the step added (pod steps).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub added: Option<usize>,
}

/// A background sample (for the curve).
#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    /// Seconds since the run started.
    pub t_s: f64,
    /// Nodes created so far.
    pub nodes: usize,
    /// Pods bound so far.
    pub pods: usize,
    /// RSS, MiB.
    pub rss_mib: f64,
    /// Peak RSS so far, MiB.
    pub peak_mib: f64,
}

/// A least-squares line `y = intercept + slope * x`.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Fit {
    /// Bytes at x = 0.
    pub intercept: f64,
    /// Bytes per unit of x.
    pub slope: f64,
}

/// Fits `y = a + b x` by least squares; `None` with fewer than two distinct x.
pub fn fit(points: &[(f64, f64)]) -> Option<Fit> {
    let n = points.len() as f64;
    let (sx, sy) = points.iter().fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
    let (mx, my) = (sx / n, sy / n);
    let sxx: f64 = points.iter().map(|(x, _)| (x - mx) * (x - mx)).sum();
    let sxy: f64 = points.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    if points.len() < 2 || sxx == 0.0 {
        return None;
    }
    let slope = sxy / sxx;
    Some(Fit { intercept: my - slope * mx, slope })
}

/// What a memory run measured (`memory.json`).
#[derive(Debug, Clone, Serialize)]
pub struct MemoryReport {
    /// Nodes at the end.
    pub nodes: usize,
    /// Pods at the end.
    pub pods: usize,
    /// The scheduler binary measured.
    pub scheduler: String,
    /// Revision of this checkout.
    pub git_revision: String,
    /// The objects the cluster was made of.
    pub objects: MemoryObjects,
    /// RSS of the scheduler on an empty cluster, MiB.
    pub empty_rss_mib: f64,
    /// Settled points while nodes were added (no pods).
    pub node_points: Vec<Point>,
    /// Settled points while pods were added (all nodes).
    pub pod_points: Vec<Point>,
    /// RSS over nodes (bytes per node = slope).
    pub per_node: Option<Fit>,
    /// RSS over pods (bytes per pod = slope).
    pub per_pod: Option<Fit>,
    /// RSS over pods from the first step with pods on: the steady growth per additional pod,
    /// without the one-time cost of the first pods (queue, caches, allocator pages).
    pub per_additional_pod: Option<Fit>,
    /// A fresh scheduler started on the full cluster: settled RSS and the peak of its initial
    /// list.
    pub cold_start: Option<Point>,
    /// Background samples.
    pub samples: Vec<Sample>,
}

fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

fn point(pid: u32, nodes: usize, pods: usize) -> anyhow::Result<Point> {
    let m = proc_memory(pid).context("reading the scheduler's /proc status")?;
    Ok(Point { nodes, pods, rss_mib: mib(m.rss), peak_mib: mib(m.hwm), seconds: None, added: None })
}

/// Pod steps: `--memory-steps` or tenths/quarters of `--pods`.
fn pod_steps(spec: Option<&str>, pods: usize) -> anyhow::Result<Vec<usize>> {
    let mut steps: Vec<usize> = match spec {
        Some(s) => s
            .split(',')
            .map(|p| p.trim().parse::<usize>().with_context(|| format!("--memory-steps: {p:?} is not a pod count")))
            .collect::<anyhow::Result<_>>()?,
        None => vec![pods / 10, pods / 4, pods / 2, pods * 3 / 4, pods],
    };
    steps.retain(|&s| s > 0);
    steps.sort_unstable();
    steps.dedup();
    anyhow::ensure!(!steps.is_empty(), "no pod step above 0 (--pods {pods})");
    Ok(steps)
}

#[derive(Deserialize)]
struct WatchLine {
    #[serde(rename = "type")]
    ty: String,
    object: WatchObject,
}

#[derive(Deserialize)]
struct WatchObject {
    metadata: WatchMeta,
    #[serde(default)]
    spec: Option<WatchSpec>,
}

#[derive(Deserialize)]
struct WatchMeta {
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: String,
    #[serde(default, rename = "resourceVersion")]
    resource_version: String,
}

#[derive(Deserialize)]
struct WatchSpec {
    #[serde(default, rename = "nodeName")]
    node_name: Option<String>,
}

/// Counts bound pods from the store's watch, in process (no HTTP, no typed decode).
struct BoundPods {
    keys: Mutex<HashSet<String>>,
    count: AtomicUsize,
}

fn watch_bound(store: Store, bound: Arc<BoundPods>, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut after = Some(store.resource_version());
        while !stop.load(Ordering::Relaxed) {
            let Ok(mut stream) = store.watch_kind("v1", "Pod", after) else {
                after = None;
                continue;
            };
            while let Some(frame) = stream.next().await {
                for line in frame.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                    let Ok(ev) = serde_json::from_slice::<WatchLine>(line) else { continue };
                    if ev.ty == "ERROR" {
                        continue;
                    }
                    if let Ok(rv) = ev.object.metadata.resource_version.parse() {
                        after = Some(rv);
                    }
                    let on_node = ev.object.spec.and_then(|s| s.node_name).is_some_and(|n| !n.is_empty());
                    if ev.ty != "DELETED" && on_node {
                        let key = format!("{}/{}", ev.object.metadata.namespace, ev.object.metadata.name);
                        if bound.keys.lock().insert(key) {
                            bound.count.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
}

async fn wait_bound(
    bound: &BoundPods,
    target: usize,
    timeout: Duration,
    sched: &mut SchedulerProcess,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    while bound.count.load(Ordering::Relaxed) < target {
        anyhow::ensure!(sched.alive(), "the scheduler exited (see its log)");
        anyhow::ensure!(
            Instant::now() < deadline,
            "only {} of {target} pods bound after {timeout:?}",
            bound.count.load(Ordering::Relaxed)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// The `kube-scheduler` to measure: `--scheduler-bin`, else the one next to this executable.
fn scheduler_binary(args: &BenchArgs) -> anyhow::Result<PathBuf> {
    if let Some(p) = &args.scheduler_bin {
        return Ok(p.clone());
    }
    let me = std::env::current_exe().context("locating ksched")?;
    let bin = me.with_file_name("kube-scheduler");
    anyhow::ensure!(
        bin.exists(),
        "kube-scheduler not found next to {} (build it: cargo build --release -p ksched-scheduler), or pass --scheduler-bin",
        me.display()
    );
    Ok(bin)
}

/// `ksched bench --mode memory`.
pub async fn run(args: &BenchArgs, revision: &str) -> anyhow::Result<()> {
    let nodes = args.nodes.unwrap_or(5000);
    let pods = args.pods.unwrap_or(30_000);
    let steps = pod_steps(args.memory_steps.as_deref(), pods)?;
    let objects = args.memory_objects;
    let timeout = Duration::from_secs(args.timeout.max(1));
    let bin = scheduler_binary(args)?;
    let wrapper: Vec<String> =
        args.scheduler_wrapper.as_deref().unwrap_or_default().split_whitespace().map(String::from).collect();
    std::fs::create_dir_all(&args.out).with_context(|| format!("creating {}", args.out.display()))?;

    let server = ApiServer::start(ServerConfig {
        listen: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
        ..ServerConfig::default()
    })
    .await?;
    let kubeconfig = args.out.join("memory.kubeconfig");
    server.write_kubeconfig(&kubeconfig)?;
    let client = {
        let kc = kube::config::Kubeconfig::from_yaml(&server.kubeconfig_yaml())?;
        let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await?;
        kube::Client::try_from(cfg)?
    };
    let store = server.store();
    for i in 0..realistic::NAMESPACES {
        store
            .create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": format!("team-{i}")}}))
            .map_err(|e| anyhow::anyhow!("creating namespace team-{i}: {e}"))?;
    }
    let bound = Arc::new(BoundPods { keys: Mutex::new(HashSet::new()), count: AtomicUsize::new(0) });
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = watch_bound(store.clone(), bound.clone(), stop.clone());

    let started = Instant::now();
    let log = args.out.join("memory-scheduler.log");
    let mut sched = SchedulerProcess::spawn(&bin, &wrapper, 1, &kubeconfig, &log)?;
    eprintln!("memory: measuring {} (pid {}), log {}", bin.display(), sched.pid, log.display());
    let nodes_made = Arc::new(AtomicUsize::new(0));
    let samples: Arc<Mutex<Vec<Sample>>> = Arc::default();
    let sampler = {
        let (pid, samples, nodes_made, bound, stop) =
            (sched.pid, samples.clone(), nodes_made.clone(), bound.clone(), stop.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                if let Some(m) = proc_memory(pid) {
                    samples.lock().push(Sample {
                        t_s: started.elapsed().as_secs_f64(),
                        nodes: nodes_made.load(Ordering::Relaxed),
                        pods: bound.count.load(Ordering::Relaxed),
                        rss_mib: mib(m.rss),
                        peak_mib: mib(m.hwm),
                    });
                }
                tokio::time::sleep(SAMPLE_EVERY).await;
            }
        })
    };

    let outcome = async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        settle(sched.pid, timeout).await;
        let empty = point(sched.pid, 0, 0)?;
        eprintln!("memory: empty cluster: RSS {:.1} MiB", empty.rss_mib);

        let mut node_points = vec![empty.clone()];
        let node_steps: Vec<usize> = (1..=4).map(|q| nodes * q / 4).filter(|&n| n > 0).collect();
        let mut made = 0;
        for &target in &node_steps {
            let (store, from) = (store.clone(), made);
            tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
                for i in from..target {
                    store.create(objects.node(i)).map_err(|e| anyhow::anyhow!("creating node {i}: {e}"))?;
                }
                Ok(())
            })
            .await??;
            made = target;
            nodes_made.store(made, Ordering::Relaxed);
            if !settle(sched.pid, timeout).await {
                eprintln!("memory: the scheduler did not settle after {made} nodes");
            }
            let p = point(sched.pid, made, 0)?;
            eprintln!("memory: {made} nodes: RSS {:.1} MiB, peak {:.1} MiB", p.rss_mib, p.peak_mib);
            node_points.push(p);
        }

        let apps = realistic::apps(1);
        let mut pod_points = vec![node_points.last().cloned().unwrap_or(empty.clone())];
        let mut created = 0;
        for &target in &steps {
            let batch: Vec<Value> = (created..target).map(|i| objects.pod(&apps, i, 1)).collect();
            let t0 = Instant::now();
            futures::stream::iter(batch.iter().map(|v| {
                let client = client.clone();
                async move {
                    let pod: Pod = serde_json::from_value(v.clone())?;
                    let ns = pod.metadata.namespace.clone().unwrap_or_default();
                    Api::<Pod>::namespaced(client, &ns)
                        .create(&PostParams::default(), &pod)
                        .await
                        .with_context(|| format!("creating pod {ns}/{}", pod.metadata.name.as_deref().unwrap_or("")))?;
                    anyhow::Ok(())
                }
            }))
            .buffer_unordered(CONCURRENCY)
            .try_collect::<Vec<()>>()
            .await?;
            wait_bound(&bound, target, timeout, &mut sched).await?;
            let scheduled = t0.elapsed();
            // The kubelets start the pods and report them running.
            futures::stream::iter(batch.iter().map(|v| {
                let client = client.clone();
                async move {
                    let ns = v.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default();
                    let name = v.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
                    let patch = json!({"status": realistic::running_status(v, 1)});
                    Api::<Pod>::namespaced(client, ns)
                        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                        .with_context(|| format!("patching the status of pod {ns}/{name}"))?;
                    anyhow::Ok(())
                }
            }))
            .buffer_unordered(CONCURRENCY)
            .try_collect::<Vec<()>>()
            .await?;
            created = target;
            if !settle(sched.pid, timeout).await {
                eprintln!("memory: the scheduler did not settle after {created} pods");
            }
            let mut p = point(sched.pid, nodes, created)?;
            p.seconds = Some(scheduled.as_secs_f64());
            p.added = Some(batch.len());
            eprintln!(
                "memory: {created} pods ({:.1}s to create and bind {}, {:.0} pods/s): RSS {:.1} MiB, peak {:.1} MiB",
                scheduled.as_secs_f64(),
                batch.len(),
                batch.len() as f64 / scheduled.as_secs_f64().max(1e-9),
                p.rss_mib,
                p.peak_mib
            );
            pod_points.push(p);
        }

        // A second scheduler on the full cluster: the initial list of every node and pod.
        sched.stop(Duration::from_secs(600))?;
        // The probe pod is created before the scheduler starts, so the time to its binding is
        // the cold start: the initial list of every node and pod, the caches filled, one cycle.
        let probe = objects.pod(&apps, pods + 1, 2);
        let probe: Pod = serde_json::from_value(probe)?;
        let ns = probe.metadata.namespace.clone().unwrap_or_default();
        Api::<Pod>::namespaced(client.clone(), &ns).create(&PostParams::default(), &probe).await?;
        let started = Instant::now();
        let mut fresh =
            SchedulerProcess::spawn(&bin, &wrapper, 2, &kubeconfig, &args.out.join("memory-scheduler-2.log"))?;
        wait_bound(&bound, created + 1, timeout, &mut fresh).await?;
        let ready = started.elapsed();
        settle(fresh.pid, timeout).await;
        let mut cold = point(fresh.pid, nodes, created)?;
        cold.seconds = Some(ready.as_secs_f64());
        eprintln!(
            "memory: a scheduler started on the full cluster: first pod bound after {:.1}s, RSS {:.1} MiB, peak {:.1} MiB",
            ready.as_secs_f64(),
            cold.rss_mib,
            cold.peak_mib
        );
        fresh.stop(Duration::from_secs(600))?;
        anyhow::Ok((empty, node_points, pod_points, cold))
    }
    .await;
    stop.store(true, Ordering::Relaxed);
    sampler.abort();
    watcher.abort();
    server.shutdown().await;
    let (empty, node_points, pod_points, cold) = outcome?;

    let xy = |ps: &[Point], x: fn(&Point) -> usize| -> Vec<(f64, f64)> {
        ps.iter().map(|p| (x(p) as f64, p.rss_mib * 1048576.0)).collect()
    };
    let report = MemoryReport {
        nodes,
        pods,
        scheduler: bin.display().to_string(),
        git_revision: revision.to_string(),
        objects,
        empty_rss_mib: empty.rss_mib,
        per_node: fit(&xy(&node_points, |p| p.nodes)),
        per_pod: fit(&xy(&pod_points, |p| p.pods)),
        per_additional_pod: fit(&xy(pods_on(&pod_points), |p| p.pods)),
        node_points,
        pod_points,
        cold_start: Some(cold),
        samples: samples.lock().clone(),
    };
    std::fs::write(args.out.join("memory.json"), serde_json::to_vec_pretty(&report)?)?;
    let svg = args.out.join("memory-rss.svg");
    plot(&svg, &report).context("plotting")?;
    print!("{}", summary(&report));
    println!("results: {}, {}", args.out.join("memory.json").display(), svg.display());
    Ok(())
}

/// The printed table and fits.
pub fn summary(r: &MemoryReport) -> String {
    let mut out =
        format!("{:>6} {:>7} {:>10} {:>10} {:>11}\n", "NODES", "PODS", "RSS(MiB)", "PEAK(MiB)", "STEP pods/s");
    for p in r.node_points.iter().chain(r.pod_points.iter().skip(1)) {
        // Pods added over the seconds from their creation to their binding: what the cluster,
        // API server included, sustained for that step.
        let rate = match (p.added, p.seconds) {
            (Some(n), Some(s)) if s > 0.0 => format!("{:.0}", n as f64 / s),
            _ => "-".to_string(),
        };
        out.push_str(&format!("{:>6} {:>7} {:>10.1} {:>10.1} {:>11}\n", p.nodes, p.pods, p.rss_mib, p.peak_mib, rate));
    }
    if let Some(c) = &r.cold_start {
        out.push_str(&format!(
            "restarted on the full cluster ({} nodes, {} pods): RSS {:.1} MiB, peak {:.1} MiB, first pod bound after {}\n",
            c.nodes,
            c.pods,
            c.rss_mib,
            c.peak_mib,
            c.seconds.map_or("-".to_string(), |s| format!("{s:.1}s"))
        ));
    }
    if let Some(f) = r.per_node {
        out.push_str(&format!("per node: {:.0} bytes (fit over {} points)\n", f.slope, r.node_points.len()));
    }
    if let Some(f) = r.per_pod {
        out.push_str(&format!(
            "per pod: {:.0} bytes (fit over {} points; {:.1} MiB at 0 pods)\n",
            f.slope,
            r.pod_points.len(),
            f.intercept / 1048576.0
        ));
    }
    if let Some(f) = r.per_additional_pod {
        let from = pods_on(&r.pod_points);
        out.push_str(&format!(
            "per additional pod: {:.0} bytes (fit over the {} points from {} pods on)\n",
            f.slope,
            from.len(),
            from.first().map_or(0, |p| p.pods)
        ));
    }
    out
}

/// The settled points with pods on the cluster (a fit needs two).
fn pods_on(points: &[Point]) -> &[Point] {
    let first = points.iter().position(|p| p.pods > 0).unwrap_or(points.len());
    &points[first..]
}

/// RSS over pods: background samples while pods were added, the settled points, the fit, and
/// the peak.
fn plot(path: &Path, r: &MemoryReport) -> anyhow::Result<()> {
    let root = SVGBackend::new(path, (960, 540)).into_drawing_area();
    let nodes_done = r.samples.iter().position(|s| s.nodes >= r.nodes).unwrap_or(r.samples.len());
    let curve: Vec<(f64, f64)> = r.samples[nodes_done..].iter().map(|s| (s.pods as f64, s.rss_mib)).collect();
    let peak: Vec<(f64, f64)> = r.samples[nodes_done..].iter().map(|s| (s.pods as f64, s.peak_mib)).collect();
    let x_max = (r.pods as f64).max(1.0) * 1.02;
    let y_max =
        r.samples.iter().map(|s| s.peak_mib).chain(r.cold_start.iter().map(|c| c.peak_mib)).fold(1.0, f64::max) * 1.15;
    let draw = || -> Result<(), Box<dyn std::error::Error + '_>> {
        root.fill(&WHITE)?;
        let title = format!(
            "kube-scheduler RSS with {} nodes: {:.0} bytes/pod, {:.0} bytes/node",
            r.nodes,
            r.per_pod.map_or(0.0, |f| f.slope),
            r.per_node.map_or(0.0, |f| f.slope)
        );
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(32)
            .y_label_area_size(64)
            .build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
        chart.configure_mesh().x_desc("pods bound").y_desc("MiB").draw()?;
        chart
            .draw_series(LineSeries::new(curve, BLUE.stroke_width(1)))?
            .label("RSS (sampled)")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], BLUE));
        chart
            .draw_series(LineSeries::new(peak, RED.stroke_width(1)))?
            .label("peak RSS (VmHWM)")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], RED));
        chart
            .draw_series(r.pod_points.iter().map(|p| Circle::new((p.pods as f64, p.rss_mib), 4, BLACK.filled())))?
            .label("settled RSS")
            .legend(|(x, y)| Circle::new((x + 8, y), 4, BLACK.filled()));
        if let Some(f) = r.per_pod {
            let line = [(0.0, f.intercept / 1048576.0), (x_max, (f.intercept + f.slope * x_max) / 1048576.0)];
            chart
                .draw_series(LineSeries::new(line, GREEN.stroke_width(1)))?
                .label("fit")
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], GREEN));
        }
        if let Some(c) = &r.cold_start {
            chart
                .draw_series(std::iter::once(TriangleMarker::new((c.pods as f64, c.peak_mib), 6, MAGENTA.filled())))?
                .label("peak of a scheduler started on the full cluster")
                .legend(|(x, y)| TriangleMarker::new((x + 8, y), 5, MAGENTA.filled()));
        }
        chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw()?;
        root.present()?;
        Ok(())
    };
    draw().map_err(|e| anyhow::anyhow!("{e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_recovers_a_line() {
        let pts: Vec<(f64, f64)> =
            (0..5).map(|i| (f64::from(i) * 1000.0, 50e6 + 3000.0 * f64::from(i) * 1000.0)).collect();
        let f = fit(&pts).unwrap();
        assert!((f.slope - 3000.0).abs() < 1e-6 && (f.intercept - 50e6).abs() < 1e-3, "{f:?}");
        assert_eq!(fit(&[(1.0, 2.0)]), None);
        assert_eq!(fit(&[(1.0, 2.0), (1.0, 3.0)]), None);
    }

    #[test]
    fn steady_growth_leaves_out_the_first_pods() {
        let pt = |pods: usize, rss_mib: f64| Point {
            nodes: 10,
            pods,
            rss_mib,
            peak_mib: rss_mib,
            seconds: None,
            added: None,
        };
        // 30 MiB for the first 3000 pods, then 3 KiB per pod.
        let points = [
            pt(0, 50.0),
            pt(3000, 80.0),
            pt(6000, 80.0 + 3000.0 * 3.0 / 1024.0),
            Point { seconds: Some(1.5), added: Some(3000), ..pt(9000, 80.0 + 6000.0 * 3.0 / 1024.0) },
        ];
        let xy: Vec<(f64, f64)> = pods_on(&points).iter().map(|p| (p.pods as f64, p.rss_mib * 1048576.0)).collect();
        let steady = fit(&xy).unwrap();
        assert!((steady.slope - 3072.0).abs() < 1e-6, "{steady:?}");
        assert_eq!(pods_on(&points).len(), 3);
        let all: Vec<(f64, f64)> = points.iter().map(|p| (p.pods as f64, p.rss_mib * 1048576.0)).collect();
        let r = MemoryReport {
            nodes: 10,
            pods: 9000,
            scheduler: String::new(),
            git_revision: String::new(),
            objects: MemoryObjects::Basic,
            empty_rss_mib: 20.0,
            node_points: vec![],
            pod_points: points.to_vec(),
            per_node: None,
            per_pod: fit(&all),
            per_additional_pod: Some(steady),
            cold_start: None,
            samples: vec![],
        };
        let text = summary(&r);
        assert!(text.contains("per additional pod: 3072 bytes (fit over the 3 points from 3000 pods on)"), "{text}");
        // The step's rate is its pods over its seconds; steps without a time print none.
        assert!(text.contains("    10    9000       97.6       97.6        2000\n"), "{text}");
        assert!(text.contains("    10    6000       88.8       88.8           -\n"), "{text}");
        assert!(r.per_pod.unwrap().slope > 4000.0, "the whole-range fit includes the first step");
    }

    #[test]
    fn basic_objects_are_scheduler_perfs_and_named_apart() {
        let apps = realistic::apps(1);
        let node: k8s_openapi::api::core::v1::Node = serde_json::from_value(MemoryObjects::Basic.node(7)).unwrap();
        assert_eq!(node.metadata.name.as_deref(), Some("node-7"));
        let pods = node.status.and_then(|s| s.allocatable).and_then(|a| a.get("pods").cloned());
        assert_eq!(pods.map(|q| q.0), Some("110".to_string()), "node-default.yaml's capacity");
        let pod = |i| serde_json::from_value::<Pod>(MemoryObjects::Basic.pod(&apps, i, 1)).unwrap();
        let (a, b) = (pod(3), pod(3 + realistic::NAMESPACES));
        assert_eq!(a.metadata.namespace, b.metadata.namespace);
        assert_ne!(a.metadata.name, b.metadata.name);
        assert!(a.metadata.managed_fields.is_none(), "no managed fields: {a:?}");
        let realistic: Pod = serde_json::from_value(MemoryObjects::Realistic.pod(&apps, 3, 1)).unwrap();
        assert!(realistic.metadata.managed_fields.is_some());
    }

    #[test]
    fn steps_default_to_fractions_and_parse() {
        assert_eq!(pod_steps(None, 30_000).unwrap(), [3000, 7500, 15000, 22500, 30000]);
        assert_eq!(pod_steps(Some("100, 50,100"), 0).unwrap(), [50, 100]);
        let e = pod_steps(Some("10,x"), 0).unwrap_err().to_string();
        assert!(e.contains("--memory-steps") && e.contains("\"x\""), "{e}");
    }

    #[test]
    fn own_memory_is_readable() {
        let m = proc_memory(std::process::id()).unwrap();
        assert!(m.rss > 0 && m.hwm >= m.rss, "{m:?}");
        assert_eq!(find_process(std::process::id(), "no-such-process-name"), None);
    }
}
