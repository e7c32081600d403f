//! `ksched bench`: upstream scheduler_perf's `performance` workloads (`test/integration/scheduler_perf`) against our
//! scheduler, in process, over HTTP to the embedded API server, or against any cluster.
//!
//! Module map: [`workloads`] (the op lists) → [`mod@run`] (executes ops, drives the measured op) over
//! [`cluster`] (in-process or API backends and the pod observer) → [`collector`] (upstream's
//! throughput rules) and [`stats`] (attempt latency, RSS, CPU) → [`report`] (table, JSON, SVG).

pub mod chaos;
pub mod cluster;
pub mod collector;
pub mod memory;
pub mod realistic;
pub mod report;
pub mod run;
pub mod soak;
pub mod stats;
pub mod templates;
pub mod trace;
pub mod workloads;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use ksched_scheduler::config::{self, KubeSchedulerConfiguration};

use cluster::{Backend, BackendOptions};
use report::BenchResult;
use run::{RunSettings, Runner};
use stats::LatencyRecorder;
use workloads::{Workload, WORKLOADS};

/// Where the workloads run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// The scheduler fed from memory (no API server, no HTTP).
    Inprocess,
    /// The embedded API server on 127.0.0.1:0 and our scheduler over HTTP.
    Local,
    /// Any API server (`--kubeconfig`).
    External,
    /// The resident memory of the `kube-scheduler` binary, a separate process watching the
    /// embedded API server, as a realistic cluster grows to `--nodes` and `--pods` (see
    /// [`memory`]); ignores `--workload`.
    Memory,
    /// Placement quality on a GPU cluster trace (`--trace-nodes`, `--trace-pods`), replayed
    /// as the FGD paper did, for several profiles (see [`mod@trace`]); ignores `--workload`.
    Trace,
    /// The same trace in time (its creation and deletion times, arrivals `--speedup` times
    /// faster) through the real scheduling queue (see [`trace::timeline`]).
    TraceTime,
    /// The same timeline in a live cluster: the embedded API server, the resource claim
    /// controller and the `kube-scheduler` binary with `--config`, compared with the
    /// in-process `trace-time` replay (see [`trace::live`]).
    TraceLive,
}

impl Mode {
    fn as_str(self) -> &'static str {
        match self {
            Mode::Inprocess => "inprocess",
            Mode::Local => "local",
            Mode::External => "external",
            Mode::Memory => "memory",
            Mode::Trace => "trace",
            Mode::TraceTime => "trace-time",
            Mode::TraceLive => "trace-live",
        }
    }
}

/// Which scheduler binds the pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SchedulerChoice {
    /// kube-scheduler-rs, started by the bench.
    Ours,
    /// None: whatever scheduler serves the cluster (external mode only).
    None,
}

/// `ksched bench` options.
#[derive(Args, Debug, Clone)]
pub struct BenchArgs {
    /// Workload name(s), comma-separated, or `all` (see `--list`).
    #[arg(long, default_value = "all")]
    pub workload: String,
    /// Nodes (default: the workload's upstream count, 5000 for most).
    #[arg(long)]
    pub nodes: Option<usize>,
    /// Init pods, created and scheduled before measuring (default: upstream's).
    #[arg(long)]
    pub init_pods: Option<usize>,
    /// Measured pods (default: upstream's).
    #[arg(long)]
    pub pods: Option<usize>,
    /// Where to run.
    #[arg(long, value_enum, default_value_t = Mode::Inprocess)]
    pub mode: Mode,
    /// Kubeconfig of the cluster (external mode).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Which scheduler binds the pods.
    #[arg(long, value_enum, default_value_t = SchedulerChoice::Ours)]
    pub scheduler: SchedulerChoice,
    /// Output directory for results.json and the SVG plots.
    #[arg(long, default_value = "bench-results")]
    pub out: PathBuf,
    /// Seed of generated object names.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Timeout of each phase (waiting for init pods, the measured op), in seconds.
    #[arg(long, default_value_t = 600)]
    pub timeout: u64,
    /// A KubeSchedulerConfiguration file (default: upstream defaults, as scheduler_perf).
    /// `--mode trace` takes several, each `NAME=FILE` or `FILE` (named after its stem).
    #[arg(long, value_name = "[NAME=]FILE")]
    pub config: Vec<PathBuf>,
    /// Feature gates of the scheduler under test, as kube-scheduler's `--feature-gates`
    /// (e.g. `OpportunisticBatching=false`); modes inprocess and local.
    #[arg(long, value_name = "NAME=BOOL,...")]
    pub feature_gates: Option<String>,
    /// List the workloads and exit.
    #[arg(long)]
    pub list: bool,
    /// Inject faults into the embedded API server (local mode) and check the outcome: no pod
    /// lost, none bound twice, no node overcommitted (see docs/reliability.md).
    #[arg(long, value_name = "SPEC")]
    pub faults: Option<ksched_apiserver::FaultSpec>,
    /// After the workload, churn for this many seconds (a soak): keep `--pods` pods in
    /// namespace `soak`, replacing `--churn-rate` of them per second, and sample RSS over time.
    #[arg(long, value_name = "SECS")]
    pub duration: Option<u64>,
    /// Pods replaced per second during `--duration`.
    #[arg(long, default_value_t = 100.0)]
    pub churn_rate: f64,
    /// `--mode external`: leave the nodes and pods the workload made on the cluster (to restart
    /// a scheduler on it, or look at it) instead of deleting them at the end.
    #[arg(long)]
    pub keep_objects: bool,
    /// `--mode memory`: pod counts to measure at, comma-separated (default: a tenth, a quarter,
    /// half, three quarters and all of `--pods`).
    #[arg(long, value_name = "N,N,...")]
    pub memory_steps: Option<String>,
    /// `--mode memory`: the objects the cluster is made of.
    #[arg(long, value_enum, default_value_t)]
    pub memory_objects: memory::MemoryObjects,
    /// `--mode memory` and `trace-live`: the `kube-scheduler` binary (default: next to this
    /// executable).
    #[arg(long, value_name = "PATH")]
    pub scheduler_bin: Option<PathBuf>,
    /// `--mode memory`: a command the scheduler runs under, e.g. `"heaptrack -o /tmp/ks-{run}"`
    /// (`{run}` is 1 for the growing cluster, 2 for the restart on the full cluster).
    #[arg(long, value_name = "COMMAND")]
    pub scheduler_wrapper: Option<String>,
    /// Trace modes.
    #[command(flatten)]
    pub trace: trace::TraceArgs,
}

fn load_config(path: Option<&Path>, feature_gates: Option<&str>) -> anyhow::Result<KubeSchedulerConfiguration> {
    let features = match feature_gates {
        None => config::SchedulerFeatures::default(),
        Some(gates) => scheduler_features(gates)?,
    };
    let cfg = match path {
        None => config::default_config_with(&features),
        Some(p) => {
            let bytes = std::fs::read(p).with_context(|| format!("reading {}", p.display()))?;
            config::load_config_with(&bytes, &p.display().to_string(), &features)?
        }
    };
    config::validate_with(&cfg, &features)?;
    Ok(cfg)
}

/// The gates `--feature-gates=<gates>` gives kube-scheduler (same parsing, defaults and checks).
fn scheduler_features(gates: &str) -> anyhow::Result<config::SchedulerFeatures> {
    let opts = ksched_scheduler::options::parse(["kube-scheduler".to_string(), format!("--feature-gates={gates}")])
        .map_err(|e| anyhow::anyhow!("--feature-gates {gates:?}: {e:?}"))?;
    let unknown = opts.unknown_feature_gates();
    anyhow::ensure!(unknown.is_empty(), "--feature-gates: unknown gate(s) {}", unknown.join(", "));
    let errors = opts.validate();
    anyhow::ensure!(errors.is_empty(), "--feature-gates: {}", errors.join("; "));
    Ok(opts.scheduler_features())
}

/// `git rev-parse --short HEAD` in the working directory or the source checkout.
fn git_revision() -> String {
    let try_in = |dir: &Path| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["rev-parse", "--short", "HEAD"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .filter(|s| !s.is_empty())
    };
    try_in(Path::new(".")).or_else(|| try_in(Path::new(env!("CARGO_MANIFEST_DIR")))).unwrap_or_else(|| "unknown".into())
}

fn select(spec: &str) -> anyhow::Result<Vec<&'static Workload>> {
    if spec.eq_ignore_ascii_case("all") {
        return Ok(WORKLOADS.iter().collect());
    }
    spec.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            workloads::find(s).with_context(|| {
                let names: Vec<&str> = WORKLOADS.iter().map(|w| w.name).collect();
                format!("unknown workload {s:?}; known: {}", names.join(", "))
            })
        })
        .collect()
}

/// `ksched bench`.
pub async fn run(args: BenchArgs) -> anyhow::Result<()> {
    if args.list {
        for w in WORKLOADS {
            let d = w.defaults;
            println!(
                "{:<36} nodes={:<5} init={:<6} pods={:<6} ({}){}",
                w.name,
                d.nodes,
                d.init_pods,
                d.pods,
                w.upstream,
                if w.requires.is_empty() { String::new() } else { format!(" needs {}", w.requires.join(", ")) }
            );
        }
        return Ok(());
    }
    anyhow::ensure!(
        args.scheduler == SchedulerChoice::Ours || args.mode == Mode::External,
        "--scheduler none only makes sense with --mode external (nothing else would bind the pods)"
    );
    anyhow::ensure!(args.mode != Mode::External || args.kubeconfig.is_some(), "--mode external needs --kubeconfig");
    anyhow::ensure!(
        !args.keep_objects || args.mode == Mode::External,
        "--keep-objects needs --mode external (in process nothing is deleted, and the embedded API server of --mode local goes with the run)"
    );
    anyhow::ensure!(
        args.faults.is_none() || args.mode == Mode::Local,
        "--faults needs --mode local (faults are injected by the embedded API server)"
    );
    if args.mode == Mode::Trace {
        return trace::run(&args.trace, &args.config, &args.out, &git_revision());
    }
    if args.mode == Mode::TraceTime {
        let rt = tokio::runtime::Handle::current();
        let revision = git_revision();
        return tokio::task::spawn_blocking(move || {
            trace::timeline::run(&args.trace, &args.trace.timeline, &args.config, &args.out, &revision, &rt)
        })
        .await?;
    }
    if args.mode == Mode::TraceLive {
        return trace::live::run(&args, &git_revision()).await;
    }
    anyhow::ensure!(args.config.len() <= 1, "--config: one file only, except with --mode trace");
    if args.mode == Mode::Memory {
        anyhow::ensure!(args.feature_gates.is_none(), "--feature-gates needs --mode inprocess or local");
        return memory::run(&args, &git_revision()).await;
    }
    let selected = select(&args.workload)?;
    let cfg = load_config(args.config.first().map(PathBuf::as_path), args.feature_gates.as_deref())?;
    let registry = ksched_plugins::in_tree_registry();
    std::fs::create_dir_all(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    let settings = RunSettings { timeout: Duration::from_secs(args.timeout.max(1)), seed: args.seed, progress: true };
    let revision = git_revision();
    let mut results = Vec::new();
    let mut skipped = Vec::new();
    let mut failed = Vec::new();
    for w in selected {
        let missing: Vec<&str> = w.requires.iter().copied().filter(|p| registry.get(p).is_none()).collect();
        if !missing.is_empty() {
            let why = format!("{}: skipped, plugin(s) not registered: {}", w.name, missing.join(", "));
            eprintln!("{why}");
            skipped.push(why);
            continue;
        }
        if w.requires.contains(&"DynamicResources") && args.mode != Mode::Inprocess {
            let why = format!("{}: skipped, DRA workloads run with --mode inprocess only", w.name);
            eprintln!("{why}");
            skipped.push(why);
            continue;
        }
        let p = w.params(args.nodes, args.init_pods, args.pods);
        eprintln!(
            "{} ({}): {} nodes, {} init pods, {} measured pods, mode {}",
            w.name,
            w.upstream,
            p.nodes,
            p.init_pods,
            p.pods,
            args.mode.as_str()
        );
        match run_one(w, &p, &args, &cfg, &registry, &settings, &revision).await {
            Ok(r) => {
                eprintln!(
                    "  scheduled {}/{} ({} unschedulable) in {:.2}s; throughput avg {} p50 {} overall {} pods/s",
                    r.scheduled,
                    r.pods,
                    r.unschedulable,
                    r.duration_s,
                    r.throughput_avg.map_or("-".into(), |v| format!("{v:.0}")),
                    r.throughput_p50.map_or("-".into(), |v| format!("{v:.0}")),
                    r.throughput_overall.map_or("-".into(), |v| format!("{v:.0}")),
                );
                for n in &r.notes {
                    eprintln!("  note: {n}");
                }
                if let Some(s) = &r.soak {
                    eprintln!("{}", s.summary());
                }
                if let Some(c) = &r.chaos {
                    eprintln!("{}", c.summary());
                    let v = c.violations();
                    if !v.is_empty() {
                        failed.push(format!("{}: under faults: {}", w.name, v.join("; ")));
                    }
                }
                results.push(r);
                report::write_json(&args.out.join("results.json"), &results)?;
            }
            Err(e) => {
                eprintln!("{}: failed: {e:#}", w.name);
                failed.push(format!("{}: {e:#}", w.name));
            }
        }
    }
    report::write_json(&args.out.join("results.json"), &results)?;
    print!("{}", report::table(&results));
    println!(
        "\nthroughput: upstream's collector (1 s samples, first discarded); '-' = run too short for a sample. \
         OVERALL = pods / time to last bind.\npeak RSS is the whole process's peak so far (it cannot be reset between workloads){}.",
        if args.mode == Mode::Local { "; local mode includes the embedded API server" } else { "" }
    );
    for s in &skipped {
        println!("{s}");
    }
    println!("results: {}", args.out.join("results.json").display());
    anyhow::ensure!(failed.is_empty(), "{} workload(s) failed:\n{}", failed.len(), failed.join("\n"));
    Ok(())
}

async fn run_one(
    w: &Workload,
    p: &workloads::Params,
    args: &BenchArgs,
    cfg: &KubeSchedulerConfiguration,
    registry: &ksched_framework::Registry,
    settings: &RunSettings,
    revision: &str,
) -> anyhow::Result<BenchResult> {
    let recorder = Arc::new(LatencyRecorder::default());
    let cpu0 = stats::cpu_seconds();
    let run_id = format!("{}-{:x}", std::process::id(), std::time::UNIX_EPOCH.elapsed().map_or(0, |d| d.as_micros()));
    let chaos = args.faults.clone().map(chaos::Chaos::new);
    let backend = Backend::start(BackendOptions {
        mode: args.mode,
        our_scheduler: args.scheduler == SchedulerChoice::Ours,
        kubeconfig: args.kubeconfig.as_deref(),
        config: cfg,
        registry,
        metrics: recorder.clone(),
        run_id,
        chaos: chaos.clone(),
    })
    .await?;
    let drainer = chaos.as_ref().map(|c| c.spawn_drainer());
    let mut runner = Runner::new(backend, settings, recorder.clone(), format!("{} {}", w.name, args.mode.as_str()));
    let outcome = runner.run(w, p).await;
    let backend = runner.into_backend();
    let soak_report = match (args.duration, &outcome) {
        (Some(secs), Ok(_)) => {
            let title = format!("{} ({})", w.name, args.mode.as_str());
            let r =
                soak::run(&backend, Duration::from_secs(secs), p.pods.max(1), args.churn_rate, &args.out, &title).await;
            Some(r)
        }
        _ => None,
    };
    let chaos_report = match (&chaos, &outcome) {
        (Some(c), Ok(_)) => {
            let r = chaos_verdict(c, &backend, w, p, cfg, registry, settings.timeout).await;
            Some(r)
        }
        _ => None,
    };
    if let Some(d) = drainer {
        d.abort();
    }
    let cleanup = if args.keep_objects { Ok(()) } else { backend.cleanup().await };
    backend.shutdown().await;
    let rss_after = stats::rss_bytes();
    let m = outcome?;
    cleanup.context("cleaning up")?;
    let chaos_report = chaos_report.transpose()?;
    let soak_report = soak_report.transpose()?;
    let cpu = match (cpu0, stats::cpu_seconds()) {
        (Some(a), Some(b)) => Some(b - a),
        _ => None,
    };
    let mut notes = Vec::new();
    if m.throughput.is_none() {
        notes.push(
            "too short for the throughput collector (no sample after the discarded baseline tick); \
             increase --pods or see throughput_overall"
                .to_string(),
        );
    }
    if m.timed_out {
        notes.push(format!("timed out after {}s with {} pods pending", args.timeout, m.pending));
    }
    notes.extend(m.warnings.iter().map(|w| format!("collector tick: {w}")));
    let last_bind = m.bind_offsets.iter().copied().fold(0.0_f64, f64::max);
    let latency = recorder.percentiles_ms();
    let algorithm = recorder.algorithm_percentiles_ms();
    let svg = args.out.join(format!("{}-{}.svg", w.name, args.mode.as_str()));
    let title = format!("{} ({}, {} nodes)", w.name, args.mode.as_str(), p.nodes);
    if let Err(e) = report::plot(&svg, &title, &m.bind_offsets, &m.progress) {
        notes.push(format!("no plot: {e:#}"));
    }
    let t = m.throughput;
    if let Some(threshold) = workloads::upstream_threshold(w.name) {
        let avg = t.map(|t| t.average);
        notes.push(match avg {
            Some(avg) => {
                format!("upstream threshold {threshold:.0} pods/s: average {avg:.0} pods/s is {:.1}x", avg / threshold)
            }
            None => format!("upstream threshold {threshold:.0} pods/s"),
        });
    }
    Ok(BenchResult {
        workload: w.name.to_string(),
        upstream: w.upstream.to_string(),
        mode: args.mode.as_str().to_string(),
        scheduler: match args.scheduler {
            SchedulerChoice::Ours => "ours".into(),
            SchedulerChoice::None => "none".into(),
        },
        nodes: p.nodes,
        init_pods: p.init_pods,
        pods: p.pods,
        duration_s: m.duration.as_secs_f64(),
        throughput_avg: t.map(|t| t.average),
        throughput_p50: t.map(|t| t.perc50),
        throughput_p90: t.map(|t| t.perc90),
        throughput_p95: t.map(|t| t.perc95),
        throughput_p99: t.map(|t| t.perc99),
        throughput_samples: t.map_or(0, |t| t.samples),
        creation_s: m.creation.map(|d| d.as_secs_f64()),
        throughput_overall: (m.scheduled > 0 && last_bind > 0.0).then(|| m.scheduled as f64 / last_bind),
        attempt_latency_p50_ms: latency.map(|l| l.0),
        attempt_latency_p99_ms: latency.map(|l| l.1),
        algorithm_latency_p50_ms: algorithm.map(|l| l.0),
        algorithm_latency_p99_ms: algorithm.map(|l| l.1),
        attempts: recorder.count(),
        peak_rss_bytes: stats::peak_rss_bytes(),
        rss_after_bytes: rss_after,
        cpu_seconds: cpu,
        scheduled: m.scheduled,
        unschedulable: m.unschedulable,
        pending: m.pending,
        git_revision: revision.to_string(),
        notes,
        chaos: chaos_report,
        soak: soak_report,
    })
}

/// After a `--faults` run: stops the faults, waits until every pod of the run is bound or
/// refused (steady for 2 s), until the scheduler's informers caught up with the API server and
/// its refused pods were retried on that view, then checks the outcome.
async fn chaos_verdict(
    chaos: &chaos::Chaos,
    backend: &Backend,
    w: &Workload,
    p: &workloads::Params,
    cfg: &KubeSchedulerConfiguration,
    registry: &ksched_framework::Registry,
    timeout: Duration,
) -> anyhow::Result<chaos::ChaosReport> {
    chaos.calm();
    let (store, label) = backend.store().context("--faults needs the embedded API server")?;
    backend.settle(&store, (cluster::RUN_LABEL, &label), timeout).await?;
    backend.converge(&store, timeout).await?;
    backend.settle(&store, (cluster::RUN_LABEL, &label), timeout).await?;
    // Messages are compared with a fault-free scheduler on the final cluster only when no node
    // came and went: a pod refused before a node left may rightly keep the older message.
    let node_churn = w.ops(p).iter().any(|op| {
        matches!(op, workloads::Op::Churn { objects, .. } if objects.iter().any(|o| matches!(o, workloads::ChurnObject::Node(_))))
    });
    chaos.verify(&store, (cluster::RUN_LABEL, &label), cfg, registry, !node_churn).await
}
