//! `ksched explain`: why a pod goes (or cannot go) where it does, per node and plugin, against a
//! read-only copy of a cluster.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context as _;
use clap::Args;
use ksched_framework::PodInfo;
use ksched_scheduler::config::{self, KubeSchedulerConfiguration};
use ksched_scheduler::explain::render::{self, NodeFilter};
use ksched_scheduler::explain::{nominated_from_pods, Explainer, Explanation};

use crate::source::ClusterCopy;

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// Grouped text.
    Table,
    /// JSON (one document per pod; an array for several pods).
    Json,
    /// YAML.
    Yaml,
}

/// `ksched explain` options.
#[derive(Args, Debug, Clone)]
pub struct ExplainArgs {
    /// Manifest files or directories to read the cluster from (arguments that exist on disk),
    /// then the pods to explain: `namespace/name` or `name` (namespace `default`).
    #[arg(required = true, value_name = "PATHS... POD")]
    pub args: Vec<String>,
    /// Read the cluster through this kubeconfig instead (read-only: lists, never writes).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// A KubeSchedulerConfiguration file (default: upstream defaults).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// List nodes one per line: all, failed or feasible (default: grouped only).
    #[arg(long)]
    pub nodes: Option<NodeFilter>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
}

/// Loads and validates a configuration file, or upstream's defaults.
pub fn load_config(path: Option<&std::path::Path>) -> anyhow::Result<KubeSchedulerConfiguration> {
    let cfg = match path {
        None => config::default_config(),
        Some(p) => {
            let bytes = std::fs::read(p).with_context(|| format!("reading {}", p.display()))?;
            config::load_config(&bytes, &p.display().to_string())?
        }
    };
    config::validate(&cfg)?;
    Ok(cfg)
}

/// Explains each pod of `keys` against `cluster`.
pub fn explain_pods(
    cluster: &ClusterCopy,
    cfg: &KubeSchedulerConfiguration,
    keys: &[String],
) -> anyhow::Result<Vec<Explanation>> {
    let registry = ksched_plugins::in_tree_registry();
    let explainer = Explainer::new(cfg, &registry, cluster.lister.clone())?;
    if let Some(groups) = explainer.pod_groups() {
        cluster.track_pod_groups(cfg, &groups);
    }
    let snapshot = cluster.snapshot(None)?;
    let pending: Vec<Arc<PodInfo>> = cluster
        .pods
        .iter()
        .filter(|p| crate::source::node_name(p).is_none())
        .map(|p| Arc::new(PodInfo::new(Arc::new(p.into()))))
        .collect();
    keys.iter()
        .map(|key| {
            let pod = cluster.find_pod(key)?;
            // A bound pod is explained as if it were new: unbound, on the cluster without it.
            let bound_to = crate::source::node_name(pod).map(str::to_string);
            let mut unbound = pod.clone();
            let own;
            let snap = match &bound_to {
                Some(_) => {
                    unbound.spec.get_or_insert_with(Default::default).node_name = None;
                    own = cluster.snapshot(Some(&crate::source::pod_key(pod)))?;
                    &own
                }
                None => &snapshot,
            };
            let pi = PodInfo::new(Arc::new(unbound.into()));
            let nominated = nominated_from_pods(&pending, &pi, snap);
            let mut ex = explainer.explain(snap, &pi, &nominated).map_err(|e| anyhow::anyhow!(e))?;
            ex.bound_to = bound_to;
            Ok(ex)
        })
        .collect()
}

/// Renders explanations in the chosen format.
pub fn render_all(mut exs: Vec<Explanation>, output: Output, nodes: Option<NodeFilter>) -> anyhow::Result<String> {
    let filter = nodes.unwrap_or_default();
    Ok(match output {
        Output::Table => exs.iter().map(|e| render::table(e, filter)).collect::<Vec<_>>().join("\n---\n\n"),
        Output::Json | Output::Yaml => {
            // Structured output keeps every node unless --nodes narrows it.
            for e in &mut exs {
                render::filter_nodes(e, nodes.unwrap_or(NodeFilter::All));
            }
            let json = if exs.len() == 1 { serde_json::to_value(&exs[0])? } else { serde_json::to_value(&exs)? };
            if output == Output::Json {
                serde_json::to_string_pretty(&json)? + "\n"
            } else {
                serde_saphyr::to_string(&json).map_err(|e| anyhow::anyhow!("encoding YAML: {e}"))?
            }
        }
    })
}

/// Splits positional arguments into existing paths and pod names.
pub fn split_paths(args: &[String]) -> (Vec<PathBuf>, Vec<String>) {
    let (paths, pods): (Vec<&String>, Vec<&String>) = args.iter().partition(|a| std::path::Path::new(a).exists());
    (paths.into_iter().map(PathBuf::from).collect(), pods.into_iter().cloned().collect())
}

/// `ksched explain`.
pub async fn run(args: ExplainArgs) -> anyhow::Result<()> {
    let cfg = load_config(args.config.as_deref())?;
    let (paths, pods) = split_paths(&args.args);
    if pods.is_empty() {
        anyhow::bail!("name at least one pod to explain (namespace/name)");
    }
    let cluster = ClusterCopy::load(args.kubeconfig.as_deref(), &paths).await?;
    let exs = explain_pods(&cluster, &cfg, &pods)?;
    print!("{}", render_all(exs, args.output, args.nodes)?);
    Ok(())
}

/// `ksched bench explain`-style measurement: explains one pod on a synthetic cluster of `nodes`
/// nodes `iterations` times and prints the time per explanation.
pub fn benchmark(nodes: usize, iterations: usize) -> anyhow::Result<()> {
    let cluster = crate::source::synthetic(nodes)?;
    let cfg = config::default_config();
    let keys = vec!["default/probe-fits".to_string(), "default/probe-too-big".to_string()];
    let registry = ksched_plugins::in_tree_registry();
    let t0 = Instant::now();
    let explainer = Explainer::new(&cfg, &registry, cluster.lister.clone())?;
    let snapshot = cluster.snapshot(None)?;
    println!("setup (profiles + snapshot of {nodes} nodes): {:.1} ms", t0.elapsed().as_secs_f64() * 1e3);
    for key in &keys {
        let pod = cluster.find_pod(key)?;
        let pi = PodInfo::new(Arc::new(pod.into()));
        let nominated = Default::default();
        let mut times = Vec::with_capacity(iterations);
        let mut last = None;
        for _ in 0..iterations.max(1) {
            let t = Instant::now();
            let ex = explainer.explain(&snapshot, &pi, &nominated).map_err(|e| anyhow::anyhow!(e))?;
            times.push(t.elapsed().as_secs_f64());
            last = Some(ex);
        }
        times.sort_by(f64::total_cmp);
        let ex = last.expect("at least one iteration");
        println!(
            "explain {key} on {nodes} nodes: median {:.1} ms, max {:.1} ms over {} runs ({:?}, {} fixes)",
            times[times.len() / 2] * 1e3,
            times[times.len() - 1] * 1e3,
            times.len(),
            ex.verdict,
            ex.fits_if.len()
        );
    }
    Ok(())
}
