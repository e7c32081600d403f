//! `ksched bench --mode trace`: placement quality on a GPU cluster trace (Alibaba's
//! `cluster-trace-gpu-v2023` format), replayed as the FGD paper (USENIX ATC'23) did, through the
//! real framework and plugins, for several scheduler profiles side by side.
//!
//! Module map: [`csv`] (the trace files) → [`arrivals`] (the seeded shuffle and inflation) and
//! [`cluster`] (Nodes, ResourceSlices, Pods, ResourceClaims) → [`replay`] (one synchronous
//! scheduling cycle per pod) → [`accounting`] (the end-of-seed checks) → [`report`] (JSON,
//! table, SVG). [`profiles`] holds the built-in baselines, [`hindsight`] the offline packing
//! and [`bound`] the upper bound that `--hindsight` and `--bound` report beside them;
//! [`timeline`] is the second mode,
//! `--mode trace-time`, which replays the trace's own times through the real scheduling queue;
//! [`live`] the third, `--mode trace-live`: the same timeline against `ksched apiserver` and the
//! `kube-scheduler` binary, compared with `--mode trace-time`'s replay.

pub mod accounting;
pub mod arrivals;
pub mod bound;
pub mod cluster;
pub mod csv;
pub mod fgd;
pub mod hindsight;
pub mod live;
pub mod profiles;
pub mod replay;
pub mod report;
pub mod timeline;
pub mod variants;

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::Context as _;
use clap::Args;

use cluster::ObjectOptions;
use csv::Trace;
use profiles::TraceProfile;
use report::{SeedResult, TraceResults};

/// Options of the trace modes (`ksched bench --mode trace|trace-time`).
#[derive(Args, Debug, Clone)]
pub struct TraceArgs {
    /// The trace's node list (`sn,cpu_milli,memory_mib,gpu,model`).
    #[arg(long, value_name = "CSV")]
    pub trace_nodes: Option<PathBuf>,
    /// The trace's pod list (`name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,...]`).
    #[arg(long, value_name = "CSV")]
    pub trace_pods: Option<PathBuf>,
    /// Seeds of the arrival sequences: `42-51`, `1,5,9`.
    #[arg(long, default_value = "42-51", value_name = "LIST")]
    pub seeds: String,
    /// Arrival sequences run until the GPU demand reaches this multiple of the capacity.
    #[arg(long, default_value_t = 1.3)]
    pub inflate: f64,
    /// Built-in profiles to compare, comma-separated (`default`, `most-allocated`, `bestfit`,
    /// `random`, `fgd`, `fgd-fixed-order`), or `none`; `--config` adds more.
    #[arg(long, default_value = "default,most-allocated,bestfit,random", value_name = "LIST")]
    pub profiles: String,
    /// Arrived points reported (% of GPU capacity).
    #[arg(long, default_value = "90,95,100,110,120,130", value_name = "LIST")]
    pub arrived: String,
    /// Also pack each seed's arrived pods offline, largest first ([`hindsight`]), and report
    /// that allocation beside the profiles: what the same pods reach when known in advance.
    #[arg(long)]
    pub hindsight: bool,
    /// Also report an upper bound on each seed's allocation ([`bound`]): what no placement of
    /// the same arrived pods exceeds.
    #[arg(long)]
    pub bound: bool,
    /// Seeds replayed at once (default: the number of CPUs).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// How the pod list writes its times: `s` or `ms` (numbers), `iso` (ISO-8601 date-times),
    /// or `auto` (detected, and the detection reported).
    #[arg(long, value_enum, default_value_t = csv::TimeUnit::Auto, value_name = "UNIT")]
    pub time_unit: csv::TimeUnit,
    /// Leave out the node-level GPU milli resource (`ksched.dev/gpu-milli`) that lets
    /// NodeResourcesFit see GPUs (the `bestfit` baseline needs it).
    #[arg(long)]
    pub no_gpu_milli_resource: bool,
    /// Replay a variant of the pod list instead, resampled by the FGD paper's method
    /// (`share:80`, `multi:30`, `spec:20`, `cpu:200`; see [`variants`]); the list replayed is
    /// written to the output directory.
    #[arg(long, value_name = "FAMILY:LEVEL")]
    pub variant: Option<variants::Variant>,
    /// Seed of the variant's draws.
    #[arg(long, default_value_t = 1)]
    pub variant_seed: u64,
    /// For `--variant spec:X`: a pod list whose pods carry the GPU models they were restricted
    /// to (the trace's `gpuspec33` list).
    #[arg(long, value_name = "CSV")]
    pub variant_spec_source: Option<PathBuf>,
    /// Replay on a cluster of this many nodes made from the trace's node mix: the node list
    /// repeated (names suffixed `-r2`, `-r3`, ...) and cut at this size. Arrivals follow the
    /// capacity (`--inflate` times it), so the pods scale with it.
    #[arg(long, value_name = "N")]
    pub scale_nodes: Option<usize>,
    /// Replay only these rows of the pod list: `START:COUNT`, the first row being 0 (the
    /// Alibaba trace's rows are in creation order).
    #[arg(long, value_name = "START:COUNT")]
    pub slice: Option<Slice>,
    /// `--mode trace-time` options.
    #[command(flatten)]
    pub timeline: timeline::TimelineArgs,
    /// `--mode trace-live` options.
    #[command(flatten)]
    pub live: live::LiveArgs,
}

/// Rows `start..start + count` of a pod list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slice {
    /// The first row (0: the first after the header).
    pub start: usize,
    /// How many.
    pub count: usize,
}

impl std::str::FromStr for Slice {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("{s:?}: expected START:COUNT, two non-negative integers (e.g. 0:300)");
        let (a, b) = s.split_once(':').ok_or_else(bad)?;
        let start = a.trim().parse().map_err(|_| bad())?;
        let count: usize = b.trim().parse().map_err(|_| bad())?;
        if count == 0 {
            return Err(format!("{s:?}: COUNT must be at least 1"));
        }
        Ok(Slice { start, count })
    }
}

impl Slice {
    /// Keeps the slice's rows of `pods`; `file` names the pod list in errors.
    pub fn apply(&self, pods: &mut Vec<csv::TracePod>, file: &std::path::Path) -> anyhow::Result<()> {
        let n = pods.len();
        let end = self.start.checked_add(self.count).filter(|e| *e <= n).with_context(|| {
            format!(
                "--slice {}:{}: {} has {n} pod rows (0 to {})",
                self.start,
                self.count,
                file.display(),
                n.saturating_sub(1)
            )
        })?;
        pods.truncate(end);
        pods.drain(..self.start);
        Ok(())
    }
}

impl TraceArgs {
    fn paths(&self) -> anyhow::Result<(PathBuf, PathBuf)> {
        match (&self.trace_nodes, &self.trace_pods) {
            (Some(n), Some(p)) => Ok((n.clone(), p.clone())),
            _ => anyhow::bail!("--mode trace needs --trace-nodes NODES.csv and --trace-pods PODS.csv"),
        }
    }

    /// Reads the trace, printing on stderr what the reading noted (the time unit detected,
    /// renamed pods, GPU models no node has); with `--variant`, the pods are the variant's,
    /// also written to `out` (the returned pod path names that file).
    fn load(&self, out: &std::path::Path) -> anyhow::Result<(PathBuf, PathBuf, Trace)> {
        let (nodes, pods) = self.paths()?;
        let (mut trace, notes) = Trace::load_with(&nodes, &pods, self.time_unit)?;
        for n in notes {
            eprintln!("{n}");
        }
        if let Some(size) = self.scale_nodes {
            anyhow::ensure!(size > 0, "--scale-nodes: at least one node");
            trace.nodes = scaled_nodes(&trace.nodes, size);
            eprintln!("cluster scaled to {size} nodes from the node list's mix");
        }
        if let Some(s) = self.slice {
            s.apply(&mut trace.pods, &pods)?;
            eprintln!("pod rows {} to {} of {}", s.start, s.start + s.count - 1, pods.display());
        }
        let Some(variant) = self.variant else { return Ok((nodes, pods, trace)) };
        let source = match &self.variant_spec_source {
            Some(p) => {
                let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
                Some(csv::parse_pods_with(&text, &p.display().to_string(), self.time_unit)?.pods)
            }
            None => None,
        };
        eprintln!("{}: {}", pods.display(), variants::Composition::of(&trace.pods));
        trace.pods = variants::resample(&trace.pods, variant, self.variant_seed, source.as_deref())?;
        let stem = pods.file_stem().map_or_else(|| "pods".into(), |s| s.to_string_lossy().into_owned());
        let file = format!("{stem}-{}-s{}.csv", variant.to_string().replace(':', ""), self.variant_seed);
        std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
        let written = out.join(file);
        variants::write_csv(&trace.pods, &written)?;
        eprintln!(
            "variant {variant} (seed {}): {}; written to {}",
            self.variant_seed,
            variants::Composition::of(&trace.pods),
            written.display()
        );
        Ok((nodes, written, trace))
    }

    /// The profiles of the run (`--profiles`, then each `--config`), each checked against
    /// the objects the replay builds.
    fn profiles(&self, configs: &[PathBuf]) -> anyhow::Result<Vec<TraceProfile>> {
        // `--hindsight` or `--bound` with `--profiles none`: only the reference rows.
        if (self.hindsight || self.bound) && self.profiles.trim().eq_ignore_ascii_case("none") && configs.is_empty() {
            return Ok(Vec::new());
        }
        let profiles = profiles::select(&self.profiles, configs)?;
        for p in &profiles {
            cluster::check_profile(p)?;
        }
        Ok(profiles)
    }

    fn object_options(&self) -> ObjectOptions {
        ObjectOptions { gpu_milli_resource: !self.no_gpu_milli_resource }
    }

    fn points(&self) -> anyhow::Result<Vec<f64>> {
        let pts: Vec<f64> = self
            .arrived
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| s.parse::<f64>().ok().filter(|v| v.is_finite() && *v > 0.0))
            .collect::<Option<_>>()
            .with_context(|| format!("--arrived {:?}: expected positive percentages", self.arrived))?;
        anyhow::ensure!(!pts.is_empty(), "--arrived: no point");
        Ok(pts)
    }

    fn jobs(&self) -> usize {
        self.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).max(1)
    }
}

/// `nodes` repeated to `size` nodes (the copies' names suffixed `-r2`, `-r3`, ...).
fn scaled_nodes(nodes: &[csv::TraceNode], size: usize) -> Vec<csv::TraceNode> {
    (0..size)
        .map(|i| {
            let mut n = nodes[i % nodes.len()].clone();
            let round = i / nodes.len();
            if round > 0 {
                n.name = format!("{}-r{}", n.name, round + 1);
            }
            n
        })
        .collect()
}

/// The configuration a profile runs with in the harness: filtering and scoring on the
/// replaying thread (`parallelism: 1`; seeds run in parallel instead). Placements do not
/// depend on parallelism: the filter walk keeps walk order whatever the threads.
fn harness_config(p: &TraceProfile) -> ksched_scheduler::config::KubeSchedulerConfiguration {
    let mut cfg = p.config.clone();
    cfg.parallelism = Some(1);
    cfg
}

/// `ksched bench --mode trace`.
pub fn run(args: &TraceArgs, configs: &[PathBuf], out: &std::path::Path, revision: &str) -> anyhow::Result<()> {
    let (nodes_path, pods_path, trace) = args.load(out)?;
    let seeds = arrivals::parse_seeds(&args.seeds)?;
    let points = args.points()?;
    let profiles = args.profiles(configs)?;
    let jobs = args.jobs();
    let opts = args.object_options();
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let capacity = trace.gpu_capacity_milli();
    anyhow::ensure!(capacity > 0, "{}: the nodes have no GPU", nodes_path.display());
    eprintln!(
        "trace: {} nodes, {} GPUs, {} pods ({}); {} profile(s) x {} seed(s), inflate {}, {} at a time",
        trace.nodes.len(),
        capacity / csv::GPU_MILLI,
        trace.pods.len(),
        pods_path.display(),
        profiles.len(),
        seeds.len(),
        args.inflate,
        jobs
    );
    let sequences: Vec<Vec<usize>> =
        seeds.iter().map(|&s| arrivals::sequence(&trace.pods, capacity, args.inflate, s)).collect::<Result<_, _>>()?;

    let node_names: Vec<String> = trace.nodes.iter().map(|n| n.name.clone()).collect();
    // (profile, seed) jobs, taken in order by `jobs` threads.
    let work: Vec<(usize, usize)> = (0..profiles.len()).flat_map(|p| (0..seeds.len()).map(move |s| (p, s))).collect();
    let next = AtomicUsize::new(0);
    let done: Mutex<Vec<Option<anyhow::Result<SeedResult>>>> = Mutex::new((0..work.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..jobs.min(work.len()) {
            scope.spawn(|| loop {
                let j = next.fetch_add(1, Ordering::Relaxed);
                let Some(&(pi, si)) = work.get(j) else { break };
                let (p, seed) = (&profiles[pi], seeds[si]);
                let start = Instant::now();
                let cfg = harness_config(p);
                let fgd = Arc::new(fgd::FgdWorkload::new(&trace.pods, &sequences[si], &node_names, seed));
                let r = replay::replay(&trace, &sequences[si], &cfg, &p.scheduler_name(), &profiles::registry(seed, fgd), opts)
                    .map(|r| SeedResult::new(seed, &r, &points, start.elapsed().as_secs_f64()))
                    .with_context(|| format!("profile {} seed {seed}", p.name));
                match &r {
                    Ok(s) => eprintln!(
                        "  {} seed {seed}: {} pods, {} failed ({:.1} GPUs); allocation {} (end {:.2}%); {:.2}s, {:.0} us CPU/pod ({:.0} placed, {:.0} failed)",
                        p.name,
                        s.pods,
                        s.failed_pods,
                        s.failed_gpu_milli as f64 / 1000.0,
                        points
                            .iter()
                            .filter_map(|pt| s.alloc_pct.get(&report::point_key(*pt)).map(|v| format!("@{}% {v:.2}%", report::point_key(*pt))))
                            .collect::<Vec<_>>()
                            .join(", "),
                        s.final_alloc_pct,
                        s.seconds,
                        s.us_per_pod,
                        s.us_per_placed_pod,
                        s.us_per_failed_pod
                    ),
                    Err(e) => eprintln!("  {} seed {seed}: FAILED: {e:#}", p.name),
                }
                done.lock().expect("results lock")[j] = Some(r);
            });
        }
    });
    let mut done = done.into_inner().expect("results lock");
    let mut failures = Vec::new();
    let mut results = Vec::new();
    for (pi, p) in profiles.iter().enumerate() {
        let mut per_seed = Vec::new();
        for si in 0..seeds.len() {
            let j = pi * seeds.len() + si;
            match done[j].take() {
                Some(Ok(s)) => per_seed.push(s),
                Some(Err(e)) => failures.push(format!("{e:#}")),
                None => failures.push(format!("profile {} seed {}: not run", p.name, seeds[si])),
            }
        }
        let config = ksched_scheduler::config::to_json(&p.config);
        results.push(report::profile_result(&p.name, &p.source, config, per_seed, &points));
    }
    let hindsight = args.hindsight.then(|| {
        let per_seed: Vec<Vec<Option<f64>>> = sequences
            .iter()
            .map(|seq| hindsight::at_points(&trace.nodes, &trace.pods, seq, capacity, &points))
            .collect();
        report::ReferenceResult::new(report::ReferenceResult::HINDSIGHT, &seeds, &per_seed, &points)
    });
    let bound = if args.bound {
        let per_seed = sequences
            .iter()
            .map(|seq| bound::at_points(&trace.nodes, &trace.pods, seq, capacity, &points))
            .collect::<anyhow::Result<Vec<_>>>()?;
        Some(report::ReferenceResult::new(report::ReferenceResult::BOUND, &seeds, &per_seed, &points))
    } else {
        None
    };
    let r = TraceResults {
        mode: "trace".into(),
        trace_nodes: nodes_path.display().to_string(),
        trace_pods: pods_path.display().to_string(),
        nodes: trace.nodes.len(),
        gpus: capacity / csv::GPU_MILLI,
        trace_pod_count: trace.pods.len(),
        seeds: seeds.clone(),
        inflate: args.inflate,
        arrived_points: points.clone(),
        jobs,
        git_revision: revision.to_string(),
        notes: vec![
            "alloc_pct: GPU milli allocated / GPU capacity, taken when the cumulative GPU request of the pods tried so far (failed ones included) first reaches the arrived point".into(),
            "seconds: wall time of one seed (objects, cycles, checks); us_per_pod: CPU time of the scheduling cycles per pod (the replaying thread's), wall_us_per_pod the same in wall time".into(),
            "each profile runs with parallelism 1 (seeds run in parallel instead); placements do not depend on it".into(),
        ],
        profiles: results,
        hindsight,
        bound,
    };
    let json = out.join("results.json");
    std::fs::write(&json, serde_json::to_vec_pretty(&r)?).with_context(|| format!("writing {}", json.display()))?;
    let svg = out.join("unallocated-gpu.svg");
    let title = format!(
        "{} on {} ({} nodes, {} GPUs): median of {} seed(s)",
        pods_path.file_name().map_or_else(|| pods_path.display().to_string(), |f| f.to_string_lossy().into_owned()),
        nodes_path.file_name().map_or_else(|| nodes_path.display().to_string(), |f| f.to_string_lossy().into_owned()),
        r.nodes,
        r.gpus,
        seeds.len()
    );
    let plotted: Vec<_> = r.profiles.iter().filter(|p| !p.median_curve.is_empty()).cloned().collect();
    if let Err(e) = report::plot_unallocated(&svg, &title, &plotted, 80) {
        eprintln!("no plot: {e:#}");
    }
    println!(
        "GPU allocation (% of capacity) at arrived demand (% of capacity): median over {} seed(s) (IQR)",
        seeds.len()
    );
    print!("{}", report::table(&r));
    println!("results: {}\nplot: {}", json.display(), svg.display());
    anyhow::ensure!(failures.is_empty(), "{} replay(s) failed:\n{}", failures.len(), failures.join("\n"));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pods(n: usize) -> Vec<csv::TracePod> {
        let row = "openb-pod-{i},1000,1024,0,0,,LS,Running,{i},{j},{i}";
        let text = std::iter::once(
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"
                .to_string(),
        )
        .chain((0..n).map(|i| row.replace("{i}", &i.to_string()).replace("{j}", &(i + 10).to_string())))
        .collect::<Vec<_>>()
        .join("\n");
        csv::parse_pods_with(&text, "pods.csv", csv::TimeUnit::S).unwrap().pods
    }

    #[test]
    fn a_slice_keeps_its_rows_and_refuses_rows_the_list_lacks() {
        let file = std::path::Path::new("pods.csv");
        let mut p = pods(10);
        "2:3".parse::<Slice>().unwrap().apply(&mut p, file).unwrap();
        let names: Vec<&str> = p.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["openb-pod-2", "openb-pod-3", "openb-pod-4"]);
        let e = "8:3".parse::<Slice>().unwrap().apply(&mut pods(10), file).unwrap_err();
        assert_eq!(e.to_string(), "--slice 8:3: pods.csv has 10 pod rows (0 to 9)");
        assert_eq!(
            "300".parse::<Slice>().unwrap_err(),
            "\"300\": expected START:COUNT, two non-negative integers (e.g. 0:300)"
        );
        assert_eq!("0:0".parse::<Slice>().unwrap_err(), "\"0:0\": COUNT must be at least 1");
        assert!("-1:5".parse::<Slice>().is_err());
    }
}
