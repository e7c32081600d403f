//! `ksched bench --mode trace-live`: the timeline of `--mode trace-time` in a live cluster, then
//! the same slice through `--mode trace-time`'s in-process replay, and the two compared.
//!
//! The live cluster is two processes besides this one: `ksched apiserver` (the embedded API
//! server and its resource claim controller, as a kube-apiserver with kube-controller-manager's
//! resourceclaim controller) loaded with the objects the in-process replays build (the Nodes,
//! their ResourceSlices, the DeviceClass) plus one ResourceClaimTemplate per GPU pod shape; and
//! the `kube-scheduler` binary with the `--config` file as written (only the kubeconfig added).
//! This process only plays the workload, over HTTP like any client: it creates each pod at its
//! arrival, naming its shape's template (the controller makes the claim), and deletes it once
//! it has run its run time from the binding its watch reported. Deallocating and deleting the
//! claim after that is the controller's part, as in a real cluster.
//!
//! Times are [`timeline::schedule`]'s, the in-process replay's: arrivals `--speedup` times
//! faster, run times `--run-speedup` times shorter. Virtual time is the wall clock from the
//! start, so everything the scheduler does takes time here (and none in process): bindings,
//! backoffs and requeues come milliseconds later, and a pod leaves its run time after its live
//! binding. The GPU allocation over time is read from the claims as the watch reports them.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Args;
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::{watcher, WatchStreamExt as _};
use serde::Serialize;
use serde_json::{json, Value};

use super::cluster::{self, NAMESPACE};
use super::csv::{Trace, GPU_MILLI};
use super::profiles::{self, TraceProfile};
use super::report::quantile;
use super::timeline::{self, PodTimes, Series, TimelineResult};
use crate::bench::BenchArgs;

/// Options of `--mode trace-live`.
#[derive(Args, Debug, Clone)]
pub struct LiveArgs {
    /// `--mode trace-live`: end the live run at this many seconds (virtual, from the first
    /// arrival); both runs are compared up to there. By default it ends when nothing is left
    /// to happen.
    #[arg(long, value_name = "SECONDS")]
    pub until: Option<f64>,
    /// `--mode trace-live`: with no arrival or departure left, end after this many seconds
    /// without a binding; pods still waiting then count as never scheduled.
    #[arg(long, default_value_t = 30.0, value_name = "SECONDS")]
    pub idle_end: f64,
}

/// A child process, killed if still running when dropped.
struct Proc {
    child: Child,
    what: &'static str,
    log: PathBuf,
}

impl Proc {
    fn spawn(what: &'static str, program: &Path, args: &[String], log: PathBuf) -> anyhow::Result<Proc> {
        let out = std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let child = Command::new(program)
            .args(args)
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .with_context(|| format!("starting {}", program.display()))?;
        Ok(Proc { child, what, log })
    }

    /// Waits until its log holds `needle`.
    async fn wait_for(&mut self, needle: &str) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if std::fs::read_to_string(&self.log).unwrap_or_default().contains(needle) {
                return Ok(());
            }
            if let Some(status) = self.child.try_wait()? {
                anyhow::bail!("{} exited ({status}) before logging {needle:?}; see {}", self.what, self.log.display());
            }
            anyhow::ensure!(Instant::now() < deadline, "{} did not log {needle:?} within 60 s", self.what);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Sends `signal`, waits up to 10 s for the exit, then kills.
    fn stop(&mut self, signal: &str) {
        let _ = Command::new("kill").arg(format!("-{signal}")).arg(self.child.id().to_string()).status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if !matches!(self.child.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!("{} did not exit within 10 s of SIG{signal}: killed", self.what);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The objects `ksched apiserver` starts with, as one `List`: the namespace, the DeviceClass,
/// the Nodes and their ResourceSlices as the in-process replays build them (without the fields
/// the API server sets), and a ResourceClaimTemplate per GPU pod shape.
fn cluster_manifest(trace: &Trace, opts: cluster::ObjectOptions) -> anyhow::Result<Value> {
    let mut items = vec![json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})];
    items.push(serde_json::to_value(cluster::device_class())?);
    for n in &trace.nodes {
        items.push(serde_json::to_value(cluster::node(n, opts))?);
        if let Some(s) = cluster::slice(n) {
            items.push(serde_json::to_value(s)?);
        }
    }
    let mut templates = std::collections::BTreeSet::new();
    for p in trace.pods.iter().filter(|p| p.num_gpu > 0) {
        if templates.insert(cluster::template_name(p)) {
            items.push(serde_json::to_value(cluster::claim_template(p))?);
        }
    }
    for item in &mut items {
        if let Some(m) = item.get_mut("metadata").and_then(Value::as_object_mut) {
            for server_set in ["uid", "resourceVersion", "creationTimestamp"] {
                m.remove(server_set);
            }
        }
    }
    Ok(json!({"apiVersion": "v1", "kind": "List", "items": items}))
}

/// The configuration file the binary runs with: `source`'s, with `clientConnection.kubeconfig`.
fn binary_config(source: &Path, kubeconfig: &Path) -> anyhow::Result<Value> {
    let text = std::fs::read_to_string(source).with_context(|| format!("reading {}", source.display()))?;
    let mut v: Value =
        serde_saphyr::from_str(&text).map_err(|e| anyhow::anyhow!("{}: not a YAML object: {e}", source.display()))?;
    let obj = v.as_object_mut().with_context(|| format!("{}: not a YAML object", source.display()))?;
    let cc = obj.entry("clientConnection").or_insert_with(|| json!({}));
    let cc = cc.as_object_mut().with_context(|| format!("{}: clientConnection is not an object", source.display()))?;
    cc.insert("kubeconfig".into(), json!(kubeconfig.display().to_string()));
    Ok(v)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// Departures first at an instant, as in the in-process replay.
    Departure(usize),
    Arrival(usize),
}

/// One pod of the live run.
#[derive(Default)]
struct Life {
    arrived: bool,
    /// Virtual ms and node.
    bound: Option<(i64, String)>,
    /// Virtual ms.
    deleted: Option<i64>,
}

/// The live run's bookkeeping.
struct Driver<'a> {
    trace: &'a Trace,
    times: &'a [PodTimes],
    lives: Vec<Life>,
    index: HashMap<String, usize>,
    events: BinaryHeap<Reverse<(i64, Event)>>,
    capacity: f64,
    /// Claim name: the pod it was made for, allocated.
    claims: HashMap<String, (usize, bool)>,
    allocated: i64,
    waiting: i64,
    timeline: Vec<(f64, f64, f64)>,
    /// Virtual ms of the last binding, claim change or trace event.
    last_change_ms: i64,
    claims_removed: usize,
    claims_deallocated_first: usize,
}

impl Driver<'_> {
    fn milli(&self, i: usize) -> i64 {
        self.trace.pods[i].gpu_request_milli()
    }

    fn sample(&mut self, at_ms: i64) {
        let point = (
            at_ms as f64 / 1000.0,
            self.allocated as f64 * 100.0 / self.capacity,
            self.waiting as f64 * 100.0 / self.capacity,
        );
        if self.timeline.last().is_none_or(|l| l.1 != point.1 || l.2 != point.2) {
            self.timeline.push(point);
        }
    }

    fn on_pod(&mut self, p: &Pod, now: i64) {
        let Some(&i) = p.metadata.name.as_ref().and_then(|n| self.index.get(n)) else { return };
        let node = p.spec.as_ref().and_then(|s| s.node_name.clone()).filter(|n| !n.is_empty());
        if let Some(node) = node.filter(|_| self.lives[i].bound.is_none()) {
            self.lives[i].bound = Some((now, node));
            self.last_change_ms = now;
            self.waiting -= self.milli(i);
            if let Some(run) = self.times[i].run_ms {
                self.events.push(Reverse((now + run, Event::Departure(i))));
            }
            self.sample(now);
        }
    }

    fn on_claim(&mut self, c: &ResourceClaim, deleted: bool, now: i64) {
        let Some(name) = c.metadata.name.clone() else { return };
        let owner = c.metadata.owner_references.iter().flatten().find(|o| o.kind == "Pod");
        let Some(&i) = owner.and_then(|o| self.index.get(&o.name)) else { return };
        let allocated = !deleted && c.status.as_ref().is_some_and(|s| s.allocation.is_some());
        let before = if deleted { self.claims.remove(&name) } else { self.claims.insert(name, (i, allocated)) };
        let was = before.is_some_and(|b| b.1);
        if deleted {
            self.claims_removed += 1;
            if !was {
                self.claims_deallocated_first += 1;
            }
        }
        self.last_change_ms = now;
        if was != allocated {
            self.allocated += if allocated { self.milli(i) } else { -self.milli(i) };
            self.sample(now);
        }
    }

    /// Nothing is waiting, the claims hold what the bound pods present ask, and no claim of a
    /// deleted pod is left.
    fn settled(&self) -> bool {
        let waiting = self.lives.iter().any(|l| l.arrived && l.bound.is_none() && l.deleted.is_none());
        let expected: i64 = (0..self.lives.len())
            .filter(|&i| self.lives[i].bound.is_some() && self.lives[i].deleted.is_none())
            .map(|i| self.milli(i))
            .sum();
        !waiting && expected == self.allocated && !self.claims.values().any(|(i, _)| self.lives[*i].deleted.is_some())
    }
}

/// A pod of a run: name, arrival and binding (virtual seconds; null: never bound), node.
pub type PodBound = (String, f64, Option<f64>, Option<String>);

/// The live run's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct LiveResult {
    /// The configuration's name (`--config NAME=FILE`, or the file's stem).
    pub name: String,
    /// The configuration file.
    pub source: String,
    /// The binary.
    pub scheduler_binary: String,
    /// Pods that arrived.
    pub pods: usize,
    /// Pods bound.
    pub scheduled: usize,
    /// Pods never bound.
    pub never_scheduled: usize,
    /// Pending time (virtual seconds) from arrival to binding: median.
    pub pending_p50_s: f64,
    /// 99th percentile.
    pub pending_p99_s: f64,
    /// Longest.
    pub pending_max_s: f64,
    /// Pods that waited a second or more (every live binding takes some milliseconds).
    pub pods_that_waited: usize,
    /// Highest GPU allocation the claims held (% of capacity).
    pub peak_alloc_pct: f64,
    /// GPU pods deleted.
    pub deleted_gpu_pods: usize,
    /// Claims deleted (by the claim controller).
    pub claims_removed: usize,
    /// Of those, deallocated before they were deleted.
    pub claims_deallocated_first: usize,
    /// Claims of deleted pods still present at the end.
    pub claims_left_of_deleted_pods: usize,
    /// Virtual time when the run ended (seconds).
    pub end_s: f64,
    /// Allocation over time: (seconds, allocated %, waiting demand %), at every change.
    pub timeline: Vec<(f64, f64, f64)>,
    /// Per pod: name, arrival and binding (virtual seconds; null: never bound), and its node.
    pub pods_bound: Vec<PodBound>,
    /// Per pod deleted: name and deletion (virtual seconds).
    pub departures: Vec<(String, f64)>,
}

/// A pod that went differently in the two runs.
#[derive(Debug, Clone, Serialize)]
pub struct PodDifference {
    /// The pod.
    pub pod: String,
    /// Its arrival (virtual seconds, the same in both).
    pub arrival_s: f64,
    /// GPU milli it asks for.
    pub gpu_milli: i64,
    /// Its node live (null: not bound by the horizon).
    pub live_node: Option<String>,
    /// In process.
    pub in_process_node: Option<String>,
    /// Its binding live (virtual seconds).
    pub live_bound_s: Option<f64>,
    /// In process.
    pub in_process_bound_s: Option<f64>,
    /// Pods that went differently before it (in arrival order): when non-zero, it met
    /// another cluster.
    pub earlier_differences: usize,
}

/// The live run against the in-process replay, from 0 to `horizon_s`.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// The end of the comparison (virtual seconds): the live run's end.
    pub horizon_s: f64,
    /// Largest absolute difference of allocated GPUs at any moment.
    pub alloc_diff_max_gpus: f64,
    /// Its time-weighted mean.
    pub alloc_diff_mean_gpus: f64,
    /// Time during which the allocations differed (virtual seconds).
    pub alloc_differs_s: f64,
    /// Time during which the live allocation was none the in-process replay had in the
    /// [`LAG_S`] before (sampled every `STEP_S`): differences that the live run's lag does
    /// not explain.
    pub alloc_differs_beyond_lag_s: f64,
    /// Allocated GPUs at evenly spaced moments: (virtual seconds, live, in process).
    pub samples: Vec<(f64, f64, f64)>,
    /// Pods bound in both runs, on different nodes.
    pub pods_on_different_nodes: usize,
    /// Pods bound (by the horizon) in one run only.
    pub pods_bound_in_one_run_only: usize,
    /// Pods bound in both whose bindings are a second or more apart.
    pub pods_bound_a_second_apart: usize,
    /// Every pod that went differently, in arrival order.
    pub differences: Vec<PodDifference>,
}

/// `results.json` of `--mode trace-live`.
#[derive(Debug, Clone, Serialize)]
pub struct LiveResults {
    /// `trace-live`.
    pub mode: String,
    /// The node list.
    pub trace_nodes: String,
    /// The pod list.
    pub trace_pods: String,
    /// Nodes.
    pub nodes: usize,
    /// GPUs.
    pub gpus: i64,
    /// Speedup of arrivals.
    pub speedup: f64,
    /// Run times are divided by this.
    pub run_speedup: f64,
    /// `git rev-parse --short HEAD`.
    pub git_revision: String,
    /// The live run.
    pub live: LiveResult,
    /// The in-process replay of the same slice.
    pub in_process: TimelineResult,
    /// The two side by side.
    pub comparison: Comparison,
}

/// `ksched bench --mode trace-live`.
pub async fn run(args: &BenchArgs, revision: &str) -> anyhow::Result<()> {
    let t = &args.trace;
    anyhow::ensure!(args.config.len() == 1, "--mode trace-live needs one --config (the scheduler's configuration)");
    let profile = profiles::select("none", &args.config)?.remove(0);
    cluster::check_profile(&profile)?;
    let out = &args.out;
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let (nodes_path, pods_path, trace) = t.load(out)?;
    let times = timeline::schedule(&trace, &t.timeline, "trace-live")?;
    let capacity = trace.gpu_capacity_milli();
    anyhow::ensure!(capacity > 0, "{}: the nodes have no GPU", nodes_path.display());
    let scheduler = match &args.scheduler_bin {
        Some(p) => p.clone(),
        None => std::env::current_exe()?.with_file_name("kube-scheduler"),
    };
    anyhow::ensure!(scheduler.is_file(), "{}: no kube-scheduler binary (--scheduler-bin)", scheduler.display());
    eprintln!(
        "trace live: {} nodes, {} GPUs, {} pods, arrivals {}x faster, run times {}x shorter; {} with {}",
        trace.nodes.len(),
        capacity / GPU_MILLI,
        trace.pods.len(),
        t.timeline.speedup,
        t.timeline.run_speedup,
        scheduler.display(),
        profile.source
    );
    let live = live_run(args, &trace, &times, &profile, &scheduler).await?;
    eprintln!(
        "  live: {} pods, {} never scheduled, peak allocation {:.2}%",
        live.pods, live.never_scheduled, live.peak_alloc_pct
    );
    let rt = tokio::runtime::Handle::current();
    let (tr, p, targs, opts) = (trace.clone(), profile.clone(), t.timeline.clone(), t.object_options());
    let in_process = tokio::task::spawn_blocking(move || timeline::replay(&tr, &p, &targs, opts, &rt)).await??;
    let comparison = compare(&trace, &times, &live, &in_process);
    let r = LiveResults {
        mode: "trace-live".into(),
        trace_nodes: nodes_path.display().to_string(),
        trace_pods: pods_path.display().to_string(),
        nodes: trace.nodes.len(),
        gpus: capacity / GPU_MILLI,
        speedup: t.timeline.speedup,
        run_speedup: t.timeline.run_speedup,
        git_revision: revision.to_string(),
        live,
        in_process,
        comparison,
    };
    let json = out.join("results.json");
    std::fs::write(&json, serde_json::to_vec_pretty(&r)?).with_context(|| format!("writing {}", json.display()))?;
    let svg = out.join("gpu-allocation-over-time.svg");
    let series = [
        Series { name: "live", timeline: &r.live.timeline },
        Series { name: "in process", timeline: &r.in_process.timeline },
    ];
    timeline::plot_series(&svg, &format!("{}: live and in process", pods_path.display()), &series)?;
    print!("{}", table(&r));
    println!("results: {}\nplot: {}", json.display(), svg.display());
    Ok(())
}

/// Starts `ksched apiserver` and the scheduler, plays the pods, stops both.
async fn live_run(
    args: &BenchArgs,
    trace: &Trace,
    times: &[PodTimes],
    profile: &TraceProfile,
    scheduler_bin: &Path,
) -> anyhow::Result<LiveResult> {
    let out = &args.out;
    let opts = args.trace.object_options();
    let manifest = out.join("trace-live-cluster.json");
    std::fs::write(&manifest, serde_json::to_vec(&cluster_manifest(trace, opts)?)?)?;
    let kubeconfig = out.join("trace-live.kubeconfig");
    let _ = std::fs::remove_file(&kubeconfig);
    let ksched = std::env::current_exe()?;
    let server_args: Vec<String> = vec![
        "apiserver".into(),
        "--listen=127.0.0.1:0".into(),
        format!("--kubeconfig-out={}", kubeconfig.display()),
        manifest.display().to_string(),
    ];
    let mut server = Proc::spawn("ksched apiserver", &ksched, &server_args, out.join("trace-live-apiserver.log"))?;
    server.wait_for("serving until Ctrl-C").await?;
    let config = out.join("trace-live-scheduler-config.yaml");
    std::fs::write(&config, serde_json::to_vec_pretty(&binary_config(Path::new(&profile.source), &kubeconfig)?)?)?;
    let sched_args =
        vec![format!("--config={}", config.display()), "--leader-elect=false".into(), "--secure-port=0".into()];
    let mut sched =
        Proc::spawn("kube-scheduler", scheduler_bin, &sched_args, out.join("trace-live-kube-scheduler.log"))?;
    sched.wait_for("caches synced").await?;

    let kc = kube::config::Kubeconfig::read_from(&kubeconfig)?;
    let client = kube::Client::try_from(kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?)?;
    let result = drive(args, trace, times, profile, client).await;
    sched.stop("TERM");
    server.stop("INT");
    let mut r = result?;
    r.scheduler_binary = scheduler_bin.display().to_string();
    Ok(r)
}

async fn drive(
    args: &BenchArgs,
    trace: &Trace,
    times: &[PodTimes],
    profile: &TraceProfile,
    client: kube::Client,
) -> anyhow::Result<LiveResult> {
    let opts = args.trace.object_options();
    let live_args = &args.trace.live;
    let scheduler_name = profile.scheduler_name();
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let claims_api: Api<ResourceClaim> = Api::namespaced(client, NAMESPACE);
    let mut pod_events = watcher(pods_api.clone(), watcher::Config::default()).default_backoff().boxed();
    let mut claim_events = watcher(claims_api, watcher::Config::default()).default_backoff().boxed();
    let mut d = Driver {
        trace,
        times,
        lives: trace.pods.iter().map(|_| Life::default()).collect(),
        index: trace.pods.iter().enumerate().map(|(i, p)| (p.name.clone(), i)).collect(),
        events: times.iter().enumerate().map(|(i, t)| Reverse((t.arrival_ms, Event::Arrival(i)))).collect(),
        capacity: trace.gpu_capacity_milli() as f64,
        claims: HashMap::new(),
        allocated: 0,
        waiting: 0,
        timeline: vec![(0.0, 0.0, 0.0)],
        last_change_ms: 0,
        claims_removed: 0,
        claims_deallocated_first: 0,
    };
    let until_ms = live_args.until.map(|s| (s * 1000.0).round() as i64);
    let idle_end_ms = (live_args.idle_end * 1000.0).round() as i64;
    let t0 = Instant::now();
    let ms = move || t0.elapsed().as_millis() as i64;
    let mut last_report = Instant::now();
    let end = loop {
        let now = ms();
        if until_ms.is_some_and(|u| now >= u) {
            break until_ms.unwrap_or(now);
        }
        while d.events.peek().is_some_and(|e| e.0 .0 <= now) {
            let Some(Reverse((_, ev))) = d.events.pop() else { break };
            match ev {
                Event::Arrival(i) => {
                    let p = &trace.pods[i];
                    let pod = cluster::pod_from_template(p, &p.name, &scheduler_name, opts);
                    pods_api
                        .create(&PostParams::default(), &pod)
                        .await
                        .with_context(|| format!("creating pod {}", p.name))?;
                    d.lives[i].arrived = true;
                    d.waiting += d.milli(i);
                }
                Event::Departure(i) => {
                    let name = &trace.pods[i].name;
                    let dp = DeleteParams { grace_period_seconds: Some(0), ..Default::default() };
                    pods_api.delete(name, &dp).await.with_context(|| format!("deleting pod {name}"))?;
                    d.lives[i].deleted = Some(ms());
                }
            }
            d.last_change_ms = ms();
            d.sample(d.last_change_ms);
        }
        if d.events.is_empty() && (d.settled() || now - d.last_change_ms >= idle_end_ms) {
            break now;
        }
        if last_report.elapsed() >= Duration::from_secs(30) {
            last_report = Instant::now();
            let arrived = d.lives.iter().filter(|l| l.arrived).count();
            eprintln!(
                "  live: {:.1} s, {arrived}/{} arrived, {:.2}% allocated, {:.2}% waiting",
                now as f64 / 1000.0,
                d.lives.len(),
                d.allocated as f64 * 100.0 / d.capacity,
                d.waiting as f64 * 100.0 / d.capacity
            );
        }
        let next = d.events.peek().map_or(200, |e| (e.0 .0 - now).clamp(0, 200));
        tokio::select! {
            ev = pod_events.next() => match ev {
                Some(Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p))) => d.on_pod(&p, ms()),
                Some(Ok(_)) => {}
                Some(Err(e)) => eprintln!("  live: pod watch: {e}"),
                None => anyhow::bail!("the pod watch ended"),
            },
            ev = claim_events.next() => match ev {
                Some(Ok(watcher::Event::Apply(c) | watcher::Event::InitApply(c))) => d.on_claim(&c, false, ms()),
                Some(Ok(watcher::Event::Delete(c))) => d.on_claim(&c, true, ms()),
                Some(Ok(_)) => {}
                Some(Err(e)) => eprintln!("  live: claim watch: {e}"),
                None => anyhow::bail!("the claim watch ended"),
            },
            _ = tokio::time::sleep(Duration::from_millis(next as u64)) => {}
        }
    };
    let pending_s: Vec<f64> = d
        .lives
        .iter()
        .zip(times)
        .filter(|(l, _)| l.arrived)
        .map(|(l, t)| (l.bound.as_ref().map_or(end, |b| b.0) - t.arrival_ms).max(0) as f64 / 1000.0)
        .collect();
    let r2 = |x: f64| (x * 100.0).round() / 100.0;
    let peak = d.timeline.iter().map(|p| p.1).fold(0.0, f64::max);
    let name = |i: usize| trace.pods[i].name.clone();
    Ok(LiveResult {
        name: profile.name.clone(),
        source: profile.source.clone(),
        scheduler_binary: String::new(),
        pods: d.lives.iter().filter(|l| l.arrived).count(),
        scheduled: d.lives.iter().filter(|l| l.bound.is_some()).count(),
        never_scheduled: d.lives.iter().filter(|l| l.arrived && l.bound.is_none()).count(),
        pending_p50_s: r2(quantile(&pending_s, 0.5)),
        pending_p99_s: r2(quantile(&pending_s, 0.99)),
        pending_max_s: r2(pending_s.iter().copied().fold(0.0, f64::max)),
        pods_that_waited: pending_s.iter().filter(|s| **s >= 1.0).count(),
        peak_alloc_pct: r2(peak),
        deleted_gpu_pods: (0..d.lives.len()).filter(|&i| d.lives[i].deleted.is_some() && d.milli(i) > 0).count(),
        claims_removed: d.claims_removed,
        claims_deallocated_first: d.claims_deallocated_first,
        claims_left_of_deleted_pods: d.claims.values().filter(|(i, _)| d.lives[*i].deleted.is_some()).count(),
        end_s: end as f64 / 1000.0,
        pods_bound: (0..d.lives.len())
            .filter(|&i| d.lives[i].arrived)
            .map(|i| {
                let b = d.lives[i].bound.as_ref();
                (name(i), times[i].arrival_ms as f64 / 1000.0, b.map(|b| b.0 as f64 / 1000.0), b.map(|b| b.1.clone()))
            })
            .collect(),
        departures: (0..d.lives.len())
            .filter_map(|i| d.lives[i].deleted.map(|t| (name(i), t as f64 / 1000.0)))
            .collect(),
        timeline: d.timeline,
    })
}

/// How far (virtual seconds) the live run may trail the in-process replay and still count as
/// the same allocation.
pub const LAG_S: f64 = 1.0;

/// The sampling step of that comparison.
const STEP_S: f64 = 0.01;

/// The allocation (milli) of a timeline of percentages at `t` seconds (its value from the last
/// point at or before `t`).
fn alloc_at(timeline: &[(f64, f64, f64)], t: f64, capacity: f64) -> i64 {
    let i = timeline.partition_point(|p| p.0 <= t);
    if i == 0 {
        return 0;
    }
    (timeline[i - 1].1 * capacity / 100.0).round() as i64
}

/// The live run against the in-process replay, up to the live run's end.
pub fn compare(trace: &Trace, times: &[PodTimes], live: &LiveResult, ip: &TimelineResult) -> Comparison {
    let capacity = trace.gpu_capacity_milli() as f64;
    let end = live.end_s;
    let mut ts: Vec<f64> = live.timeline.iter().chain(&ip.timeline).map(|p| p.0).filter(|t| *t < end).collect();
    ts.push(end);
    ts.sort_by(f64::total_cmp);
    ts.dedup();
    let (mut max, mut integral, mut differs) = (0i64, 0.0, 0.0);
    for w in ts.windows(2) {
        let diff = (alloc_at(&live.timeline, w[0], capacity) - alloc_at(&ip.timeline, w[0], capacity)).abs();
        max = max.max(diff);
        integral += diff as f64 * (w[1] - w[0]);
        if diff > 0 {
            differs += w[1] - w[0];
        }
    }
    // Live, everything happens a little later than in process (bindings take milliseconds,
    // and a pod leaves its run time after its later binding): the allocation counts as the
    // same while it equals one the in-process replay had within the last LAG_S.
    let (steps, mut beyond) = ((end / STEP_S).floor() as usize, 0usize);
    for k in 0..steps {
        let t = k as f64 * STEP_S;
        let v = alloc_at(&live.timeline, t, capacity);
        let from = t - LAG_S;
        let (lo, hi) = (ip.timeline.partition_point(|p| p.0 <= from), ip.timeline.partition_point(|p| p.0 <= t));
        let same = (from < 0.0 && v == 0)
            || alloc_at(&ip.timeline, from, capacity) == v
            || ip.timeline[lo..hi].iter().any(|p| (p.1 * capacity / 100.0).round() as i64 == v);
        beyond += usize::from(!same);
    }
    let gpus = |milli: f64| (milli / GPU_MILLI as f64 * 1000.0).round() / 1000.0;
    const SAMPLES: usize = 12;
    let samples = (1..=SAMPLES)
        .map(|k| {
            let t = ((end * k as f64 / SAMPLES as f64) * 1000.0).round() / 1000.0;
            let at = |tl: &[(f64, f64, f64)]| gpus(alloc_at(tl, t, capacity) as f64);
            (t, at(&live.timeline), at(&ip.timeline))
        })
        .collect();
    // Pods in arrival order; a binding after the horizon counts as none.
    let by_horizon = |b: Option<f64>| b.filter(|b| *b <= end);
    let ip_by_name: HashMap<&str, &PodBound> = ip.pods_bound.iter().map(|p| (p.0.as_str(), p)).collect();
    let mut order: Vec<usize> = (0..live.pods_bound.len()).collect();
    order.sort_by_key(|&i| (times[i].arrival_ms, i));
    let (mut differences, mut other_node, mut one_only, mut apart) = (Vec::new(), 0, 0, 0);
    for i in order {
        let l = &live.pods_bound[i];
        let Some(p) = ip_by_name.get(l.0.as_str()) else { continue };
        let (lb, pb) = (by_horizon(l.2), by_horizon(p.2));
        let ip_node = pb.and(p.3.clone());
        let live_node = lb.and(l.3.clone());
        let node_differs = live_node != ip_node;
        let time_differs = matches!((lb, pb), (Some(a), Some(b)) if (a - b).abs() >= 1.0);
        other_node += usize::from(lb.is_some() && pb.is_some() && node_differs);
        one_only += usize::from(lb.is_some() != pb.is_some());
        apart += usize::from(time_differs);
        if node_differs || time_differs {
            differences.push(PodDifference {
                pod: l.0.clone(),
                arrival_s: l.1,
                gpu_milli: trace.pods.iter().find(|t| t.name == l.0).map_or(0, |t| t.gpu_request_milli()),
                live_node,
                in_process_node: ip_node,
                live_bound_s: lb,
                in_process_bound_s: pb,
                earlier_differences: differences.len(),
            });
        }
    }
    Comparison {
        horizon_s: end,
        alloc_diff_max_gpus: gpus(max as f64),
        alloc_diff_mean_gpus: gpus(if end > 0.0 { integral / end } else { 0.0 }),
        alloc_differs_s: (differs * 1000.0).round() / 1000.0,
        alloc_differs_beyond_lag_s: (beyond as f64 * STEP_S * 1000.0).round() / 1000.0,
        samples,
        pods_on_different_nodes: other_node,
        pods_bound_in_one_run_only: one_only,
        pods_bound_a_second_apart: apart,
        differences,
    }
}

/// The stdout report: the two runs side by side, then the allocation over time.
pub fn table(r: &LiveResults) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<12}  {:>6}  {:>6}  {:>6}  {:>5}  {:>9}  {:>9}  {:>10}",
        "RUN", "PODS", "BOUND", "WAITED", "NEVER", "P99 WAIT", "MAX WAIT", "PEAK ALLOC"
    );
    let l = &r.live;
    let _ = writeln!(
        out,
        "{:<12}  {:>6}  {:>6}  {:>6}  {:>5}  {:>8.1}s  {:>8.1}s  {:>9.2}%",
        "live",
        l.pods,
        l.scheduled,
        l.pods_that_waited,
        l.never_scheduled,
        l.pending_p99_s,
        l.pending_max_s,
        l.peak_alloc_pct
    );
    let p = &r.in_process;
    let waited = p.pods_bound.iter().filter(|b| b.2.unwrap_or(p.end_s) - b.1 >= 1.0).count();
    let _ = writeln!(
        out,
        "{:<12}  {:>6}  {:>6}  {:>6}  {:>5}  {:>8.1}s  {:>8.1}s  {:>9.2}%",
        "in process",
        p.pods,
        p.scheduled,
        waited,
        p.never_scheduled,
        p.pending_p99_s,
        p.pending_max_s,
        p.peak_alloc_pct
    );
    let c = &r.comparison;
    let _ = writeln!(out, "allocated GPUs over time (of {}):", r.gpus);
    let _ = writeln!(out, "{:>10}  {:>8}  {:>10}", "SECONDS", "LIVE", "IN PROCESS");
    for (t, a, b) in &c.samples {
        let _ = writeln!(out, "{t:>10.1}  {a:>8.2}  {b:>10.2}");
    }
    let _ = writeln!(
        out,
        "up to {:.1} s: allocations differ by {:.2} GPUs at most, {:.3} on average, during {:.2} s ({:.1}% of the time), \
         {:.2} s of it beyond a {LAG_S} s lag of the live run; \
         {} pods on other nodes, {} bound in one run only, {} bound a second or more apart",
        c.horizon_s,
        c.alloc_diff_max_gpus,
        c.alloc_diff_mean_gpus,
        c.alloc_differs_s,
        if c.horizon_s > 0.0 { c.alloc_differs_s * 100.0 / c.horizon_s } else { 0.0 },
        c.alloc_differs_beyond_lag_s,
        c.pods_on_different_nodes,
        c.pods_bound_in_one_run_only,
        c.pods_bound_a_second_apart
    );
    let _ = writeln!(
        out,
        "claims: {} GPU pods deleted, {} claims deleted, {} of them deallocated first, {} left of deleted pods",
        l.deleted_gpu_pods, l.claims_removed, l.claims_deallocated_first, l.claims_left_of_deleted_pods
    );
    for d in c.differences.iter().take(10) {
        let _ = writeln!(
            out,
            "  {} (arrived {:.1} s, {} milli): live {:?} at {:?}, in process {:?} at {:?}",
            d.pod, d.arrival_s, d.gpu_milli, d.live_node, d.live_bound_s, d.in_process_node, d.in_process_bound_s
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_binary_runs_the_configuration_as_written_plus_the_kubeconfig() {
        let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/gpu-sharing/scheduler-config.yaml");
        let v = binary_config(&example, Path::new("/tmp/kc")).unwrap();
        assert_eq!(v["clientConnection"]["kubeconfig"], "/tmp/kc");
        // What the binary loads is what the in-process replay runs.
        let from_file = profiles::from_arg(&example).unwrap().config;
        let written = ksched_scheduler::config::load_config(v.to_string().as_bytes(), "written").unwrap();
        assert_eq!(
            ksched_scheduler::config::to_json(&written)["profiles"],
            ksched_scheduler::config::to_json(&from_file)["profiles"]
        );
    }

    #[test]
    fn the_cluster_manifest_has_one_template_per_shape_and_no_server_set_fields() {
        let trace = crate::bench::trace::replay::tests::small_trace();
        let m = cluster_manifest(&trace, cluster::ObjectOptions::default()).unwrap();
        let items = m["items"].as_array().unwrap();
        let kinds = |k: &str| items.iter().filter(|i| i["kind"] == k).count();
        assert_eq!(kinds("Node"), trace.nodes.len());
        let shapes: std::collections::HashSet<String> =
            trace.pods.iter().filter(|p| p.num_gpu > 0).map(cluster::template_name).collect();
        assert_eq!(kinds("ResourceClaimTemplate"), shapes.len());
        assert!(items
            .iter()
            .all(|i| i["metadata"].get("uid").is_none() && i["metadata"].get("resourceVersion").is_none()));
    }
}
