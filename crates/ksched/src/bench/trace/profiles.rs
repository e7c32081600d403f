//! The scheduler profiles a trace replay compares: built-in baselines written with upstream
//! plugins only (plus `random`, a score plugin of this harness), and the user's
//! KubeSchedulerConfiguration files.
//!
//! - `default`: upstream's default profile (NodeResourcesFit LeastAllocated on cpu and
//!   memory, BalancedAllocation, DynamicResources, ...), adaptive percentageOfNodesToScore.
//! - `most-allocated`: the default with NodeResourcesFit's MostAllocated strategy (cpu,
//!   memory), the packing a user gets by changing one setting.
//! - `bestfit`: the FGD paper's BestFit (least free cpu and GPU left after placement, half
//!   weight each) as close as upstream plugins express it: MostAllocated over cpu and the
//!   GPU milli mirror resource (weight 1 each), BalancedAllocation off (it spreads), every
//!   node scored. Upstream's NodeResourcesFit counts no DRA device, so GPUs are visible to it
//!   only through the mirror resource; and it normalises by each node's own capacity where the
//!   paper divides by the largest node's, so on mixed node sizes it prefers the fuller node
//!   rather than the smaller one.
//! - `random`: a random feasible node (every node scored by a seeded hash, nothing else).
//! - `fgd`: the FGD paper's policy ([`super::fgd`]) alone, every node scored, ties left to the
//!   scheduler's host selection; `fgd-fixed-order`: the same with the paper's tie-breaking (a
//!   per-seed node order), the way its published figures were made. Both give a share the GPU
//!   left with least room (DynamicResources `deviceSelection: BestFit`).

use std::hash::Hasher as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use ksched_framework::{CycleState, NodeInfo, Plugin, PodInfo, Registry, ScorePlugin, Status};
use ksched_scheduler::config::{self, KubeSchedulerConfiguration};

use super::cluster::GPU_MILLI_RESOURCE;
use super::fgd::{FgdWorkload, FGD_SCORE};

/// Name of the harness's random score plugin.
pub const RANDOM_SCORE: &str = "TraceRandomScore";

/// The built-in baselines, in report order.
pub const BUILT_IN: &[&str] = &["default", "most-allocated", "bestfit", "random", "fgd", "fgd-fixed-order"];

/// A profile to replay the trace with.
#[derive(Debug, Clone)]
pub struct TraceProfile {
    /// Its name in the report.
    pub name: String,
    /// `built-in` or the file it came from.
    pub source: String,
    /// The configuration (defaulted).
    pub config: KubeSchedulerConfiguration,
}

impl TraceProfile {
    /// The scheduler name the trace's pods get: the configuration's first profile's.
    pub fn scheduler_name(&self) -> String {
        self.config
            .profiles
            .first()
            .and_then(|p| p.scheduler_name.clone())
            .unwrap_or_else(|| config::DEFAULT_SCHEDULER_NAME.to_string())
    }
}

fn built_in_yaml(name: &str) -> Option<String> {
    let head = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n";
    let body = match name {
        "default" => "profiles:\n- schedulerName: default-scheduler\n".to_string(),
        "most-allocated" => "profiles:\n- schedulerName: default-scheduler\n  pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      scoringStrategy:\n        type: MostAllocated\n        resources:\n        - {name: cpu, weight: 1}\n        - {name: memory, weight: 1}\n".to_string(),
        "bestfit" => format!(
            "percentageOfNodesToScore: 100\nprofiles:\n- schedulerName: default-scheduler\n  plugins:\n    score:\n      disabled:\n      - name: NodeResourcesBalancedAllocation\n  pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      scoringStrategy:\n        type: MostAllocated\n        resources:\n        - {{name: cpu, weight: 1}}\n        - {{name: {GPU_MILLI_RESOURCE}, weight: 1}}\n"
        ),
        "random" => format!(
            "percentageOfNodesToScore: 100\nprofiles:\n- schedulerName: default-scheduler\n  plugins:\n    score:\n      disabled:\n      - name: '*'\n      enabled:\n      - name: {RANDOM_SCORE}\n"
        ),
        "fgd" | "fgd-fixed-order" => format!(
            "percentageOfNodesToScore: 100\nprofiles:\n- schedulerName: default-scheduler\n  plugins:\n    preScore:\n      enabled:\n      - name: {FGD_SCORE}\n    score:\n      disabled:\n      - name: '*'\n      enabled:\n      - name: {FGD_SCORE}\n  pluginConfig:\n  - name: {FGD_SCORE}\n    args:\n      tieBreak: {}\n  - name: DynamicResources\n    args:\n      deviceSelection: BestFit\n",
            if name == "fgd" { "Scheduler" } else { "FixedNodeOrder" }
        ),
        _ => return None,
    };
    Some(format!("{head}{body}"))
}

fn load(bytes: &[u8], source: &str) -> anyhow::Result<KubeSchedulerConfiguration> {
    let cfg = config::load_config(bytes, source)?;
    config::validate(&cfg).map_err(|e| anyhow::anyhow!("{source}: {e}"))?;
    anyhow::ensure!(!cfg.profiles.is_empty(), "{source}: no profile");
    Ok(cfg)
}

/// A built-in baseline by name.
pub fn built_in(name: &str) -> anyhow::Result<TraceProfile> {
    let yaml = built_in_yaml(name)
        .with_context(|| format!("unknown built-in profile {name:?}; known: {}", BUILT_IN.join(", ")))?;
    Ok(TraceProfile {
        name: name.to_string(),
        source: "built-in".into(),
        config: load(yaml.as_bytes(), &format!("built-in profile {name}"))?,
    })
}

/// A `--config` value: `NAME=FILE`, or `FILE` named after its stem.
pub fn from_arg(arg: &Path) -> anyhow::Result<TraceProfile> {
    let text = arg.to_string_lossy();
    let (name, path) = match text.split_once('=') {
        Some((n, p)) if !n.is_empty() && !n.contains('/') => (n.to_string(), PathBuf::from(p)),
        _ => {
            let stem = arg.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
            anyhow::ensure!(!stem.is_empty(), "--config {text:?}: no file name");
            (stem, arg.to_path_buf())
        }
    };
    let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    let source = path.display().to_string();
    Ok(TraceProfile { name, source: source.clone(), config: load(&bytes, &source)? })
}

/// The profiles of a run: the `--profiles` list (built-ins; `none` for none), then each
/// `--config`. Names must be unique.
pub fn select(built_ins: &str, configs: &[PathBuf]) -> anyhow::Result<Vec<TraceProfile>> {
    let mut out = Vec::new();
    if !built_ins.trim().eq_ignore_ascii_case("none") {
        for name in built_ins.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            out.push(built_in(name)?);
        }
    }
    for c in configs {
        out.push(from_arg(c)?);
    }
    anyhow::ensure!(!out.is_empty(), "no profile to replay (--profiles none and no --config)");
    let mut seen = std::collections::HashSet::new();
    if let Some(d) = out.iter().find(|p| !seen.insert(p.name.clone())) {
        anyhow::bail!("two profiles are named {:?}; name them with --config NAME=FILE", d.name);
    }
    Ok(out)
}

/// The plugin registry of one replay: upstream's in-tree plugins, [`RANDOM_SCORE`] seeded with
/// `seed`, and FGD ([`FGD_SCORE`]) over `fgd`, the replay's target workload and node order.
pub fn registry(seed: u64, fgd: Arc<FgdWorkload>) -> Registry {
    let mut r = ksched_plugins::in_tree_registry();
    r.register(RANDOM_SCORE, move |_, _| Ok(Arc::new(RandomScore { seed }) as Arc<dyn Plugin>))
        .expect("the random score plugin is not in tree");
    r.register(FGD_SCORE, move |args, handle| super::fgd::new(fgd.clone(), args, handle))
        .expect("the FGD plugin is not in tree");
    r
}

/// Scores each node by a hash of the seed, the pod and the node: a random order of the
/// feasible nodes that does not depend on which thread scores which node.
struct RandomScore {
    seed: u64,
}

impl Plugin for RandomScore {
    fn name(&self) -> &str {
        RANDOM_SCORE
    }
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }
}

impl ScorePlugin for RandomScore {
    fn score(&self, _: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        h.write_u64(self.seed);
        h.write(pod.uid().as_bytes());
        h.write(node.name().as_bytes());
        Ok((h.finish() % 101) as i64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_built_in_loads_and_validates() {
        for name in BUILT_IN {
            let p = built_in(name).unwrap();
            assert_eq!(p.scheduler_name(), "default-scheduler");
        }
        let best = built_in("bestfit").unwrap();
        assert_eq!(best.config.percentage_of_nodes_to_score, Some(100));
        let json = config::to_json(&best.config).to_string();
        assert!(json.contains(GPU_MILLI_RESOURCE) && json.contains("MostAllocated"), "{json}");
        assert!(built_in("nope").is_err());
    }

    #[test]
    fn configs_are_named_by_flag_or_file_stem_and_names_are_unique() {
        let dir = std::env::temp_dir().join(format!("ksched-trace-profiles-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("packing.yaml");
        std::fs::write(&f, built_in_yaml("most-allocated").unwrap()).unwrap();
        let by_stem = from_arg(&f).unwrap();
        assert_eq!(by_stem.name, "packing");
        let named = from_arg(Path::new(&format!("mine={}", f.display()))).unwrap();
        assert_eq!(named.name, "mine");
        assert_eq!(named.source, f.display().to_string());
        let all = select("default,random", std::slice::from_ref(&f)).unwrap();
        assert_eq!(all.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["default", "random", "packing"]);
        let dup = select("default", &[PathBuf::from(format!("default={}", f.display()))]).unwrap_err();
        assert!(dup.to_string().contains("two profiles are named \"default\""), "{dup}");
        std::fs::write(&f, "kind: Nope\n").unwrap();
        assert!(from_arg(&f).is_err());
        std::fs::remove_dir_all(&dir).ok();
    }
}
