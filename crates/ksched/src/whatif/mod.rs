//! `ksched whatif`: replays a cluster's pods through a baseline and a new scheduler configuration
//! (each from the same empty cluster) and reports what would move.

mod replay;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Args;
use k8s_openapi::api::core::v1::Pod;
use plotters::prelude::*;
use serde::Serialize;

use crate::source::ClusterCopy;
pub use replay::{replay, Outcome, Replay};

/// `ksched whatif` options.
#[derive(Args, Debug, Clone)]
pub struct WhatifArgs {
    /// The configuration to evaluate.
    #[arg(long)]
    pub config: PathBuf,
    /// The configuration to compare against (default: upstream defaults).
    #[arg(long)]
    pub baseline: Option<PathBuf>,
    /// Read the cluster through this kubeconfig (read-only).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Manifest files or directories to read the cluster from.
    pub paths: Vec<PathBuf>,
    /// Also write report.json and SVG charts to this directory.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Utilization of a node or zone, in percent of allocatable (one decimal).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Default)]
pub struct Utilization {
    /// Requested cpu.
    pub cpu: f64,
    /// Requested memory.
    pub memory: f64,
}

/// Totals of one replay.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Pods placed.
    pub placed: usize,
    /// Pods that fit nowhere.
    pub unschedulable: usize,
    /// Preemptions made.
    pub preemptions: usize,
    /// Pods they evicted.
    pub victims: usize,
    /// Per zone (`topology.kubernetes.io/zone`).
    pub zones: BTreeMap<String, Utilization>,
}

/// A pod whose outcome differs.
#[derive(Debug, Clone, Serialize)]
pub struct Change {
    /// `namespace/name`.
    pub pod: String,
    /// Baseline outcome (node, or `unschedulable: <message>`, or `preempted by <pod>`).
    pub baseline: String,
    /// New outcome.
    pub new: String,
}

/// Per node utilization under both configurations.
#[derive(Debug, Clone, Serialize)]
pub struct NodeRow {
    /// The node.
    pub node: String,
    /// Its zone.
    pub zone: String,
    /// Under the baseline.
    pub baseline: Utilization,
    /// Under the new configuration.
    pub new: Utilization,
}

/// Spread of one workload across zones: the largest minus the smallest pod count.
#[derive(Debug, Clone, Serialize)]
pub struct Skew {
    /// Owner (`namespace/Kind/name`) or `namespace/app=<label>`.
    pub workload: String,
    /// Under the baseline.
    pub baseline: i64,
    /// Under the new configuration.
    pub new: i64,
}

/// The whole comparison; identical inputs give an identical report.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Pods replayed.
    pub pods: usize,
    /// Baseline totals.
    pub baseline: Summary,
    /// New totals.
    pub new: Summary,
    /// Pods placed on different nodes.
    pub moved: Vec<Change>,
    /// Pods placed under the baseline that fit nowhere under the new configuration.
    pub became_unschedulable: Vec<Change>,
    /// Pods that fit nowhere under the baseline and are placed under the new configuration.
    pub became_schedulable: Vec<Change>,
    /// Every node.
    pub nodes: Vec<NodeRow>,
    /// Workloads whose zone skew is not zero under either configuration.
    pub skew: Vec<Skew>,
    /// Winning total scores, baseline then new, one per placed pod (for the histogram).
    #[serde(skip)]
    pub scores: (Vec<i64>, Vec<i64>),
}

fn describe(o: &Outcome) -> String {
    match o {
        Outcome::Placed { node, .. } => node.clone(),
        Outcome::Unschedulable(m) => format!("unschedulable: {m}"),
        Outcome::Preempted { by } => format!("preempted by {by}"),
    }
}

fn pct(used: i64, alloc: i64) -> f64 {
    if alloc <= 0 {
        return 0.0;
    }
    (used as f64 * 1000.0 / alloc as f64).round() / 10.0
}

fn zone_of(labels: Option<&BTreeMap<String, String>>) -> String {
    labels.and_then(|l| l.get("topology.kubernetes.io/zone")).cloned().unwrap_or_else(|| "(none)".into())
}

/// `namespace/Kind/name` of the owner, else `namespace/app=<label>`.
fn workload(p: &Pod) -> Option<String> {
    let ns = p.metadata.namespace.as_deref().unwrap_or("default");
    if let Some(o) = p.metadata.owner_references.as_ref().and_then(|o| o.first()) {
        return Some(format!("{ns}/{}/{}", o.kind, o.name));
    }
    p.metadata.labels.as_ref().and_then(|l| l.get("app")).map(|a| format!("{ns}/app={a}"))
}

/// Compares two replays of `cluster`.
pub fn compare(cluster: &ClusterCopy, base: &Replay, new: &Replay) -> Report {
    let alloc: BTreeMap<String, (i64, i64, String)> = cluster
        .nodes
        .iter()
        .map(|n| {
            let a = n.status.as_ref().and_then(|s| s.allocatable.as_ref());
            let q = |k: &str, milli: bool| {
                a.and_then(|a| a.get(k))
                    .and_then(|q| {
                        if milli {
                            ksched_framework::quantity::milli_value(&q.0).ok()
                        } else {
                            ksched_framework::quantity::value(&q.0).ok()
                        }
                    })
                    .unwrap_or(0)
            };
            (
                n.metadata.name.clone().unwrap_or_default(),
                (q("cpu", true), q("memory", false), zone_of(n.metadata.labels.as_ref())),
            )
        })
        .collect();
    let util = |r: &Replay, node: &str| {
        let (c, m) = r.requested.get(node).copied().unwrap_or((0, 0));
        let (ac, am, _) = alloc.get(node).cloned().unwrap_or_default();
        Utilization { cpu: pct(c, ac), memory: pct(m, am) }
    };
    let nodes: Vec<NodeRow> = alloc
        .iter()
        .map(|(name, (_, _, zone))| NodeRow {
            node: name.clone(),
            zone: zone.clone(),
            baseline: util(base, name),
            new: util(new, name),
        })
        .collect();
    let summary = |r: &Replay| {
        let mut zones: BTreeMap<String, (i64, i64, i64, i64)> = BTreeMap::new();
        for (name, (ac, am, zone)) in &alloc {
            let (c, m) = r.requested.get(name).copied().unwrap_or((0, 0));
            let z = zones.entry(zone.clone()).or_default();
            z.0 += c;
            z.1 += m;
            z.2 += ac;
            z.3 += am;
        }
        Summary {
            placed: r.outcomes.iter().filter(|(_, o)| matches!(o, Outcome::Placed { .. })).count(),
            unschedulable: r.outcomes.iter().filter(|(_, o)| matches!(o, Outcome::Unschedulable(_))).count(),
            preemptions: r.preemptions,
            victims: r.victims,
            zones: zones
                .into_iter()
                .map(|(z, (c, m, ac, am))| (z, Utilization { cpu: pct(c, ac), memory: pct(m, am) }))
                .collect(),
        }
    };
    let new_by_pod: BTreeMap<&str, &Outcome> = new.outcomes.iter().map(|(k, o)| (k.as_str(), o)).collect();
    let (mut moved, mut worse, mut better) = (Vec::new(), Vec::new(), Vec::new());
    for (pod, b) in &base.outcomes {
        let Some(n) = new_by_pod.get(pod.as_str()) else { continue };
        let change = Change { pod: pod.clone(), baseline: describe(b), new: describe(n) };
        match (b, *n) {
            (Outcome::Placed { node: x, .. }, Outcome::Placed { node: y, .. }) if x != y => moved.push(change),
            (Outcome::Placed { .. }, Outcome::Unschedulable(_) | Outcome::Preempted { .. }) => worse.push(change),
            (Outcome::Unschedulable(_) | Outcome::Preempted { .. }, Outcome::Placed { .. }) => better.push(change),
            _ => {}
        }
    }
    // Zone skew per workload, over every zone that has nodes.
    let zones: std::collections::BTreeSet<&String> = alloc.values().map(|v| &v.2).collect();
    let pods: BTreeMap<String, &Pod> = cluster
        .pods
        .iter()
        .map(|p| {
            (
                format!(
                    "{}/{}",
                    p.metadata.namespace.as_deref().unwrap_or("default"),
                    p.metadata.name.as_deref().unwrap_or("")
                ),
                p,
            )
        })
        .collect();
    let skews = |r: &Replay| {
        let mut counts: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
        for (key, o) in &r.outcomes {
            let (Outcome::Placed { node, .. }, Some(w)) = (o, pods.get(key).and_then(|p| workload(p))) else {
                continue;
            };
            let zone = alloc.get(node).map(|a| &a.2);
            let entry = counts.entry(w).or_insert_with(|| zones.iter().map(|z| ((*z).clone(), 0)).collect());
            if let Some(z) = zone.and_then(|z| entry.get_mut(z)) {
                *z += 1;
            }
        }
        counts
            .into_iter()
            .map(|(w, c)| {
                let max = c.values().copied().max().unwrap_or(0);
                let min = c.values().copied().min().unwrap_or(0);
                (w, max - min)
            })
            .collect::<BTreeMap<String, i64>>()
    };
    let (sb, sn) = (skews(base), skews(new));
    let mut names: std::collections::BTreeSet<&String> = sb.keys().collect();
    names.extend(sn.keys());
    let skew = names
        .into_iter()
        .map(|w| Skew {
            workload: w.clone(),
            baseline: sb.get(w).copied().unwrap_or(0),
            new: sn.get(w).copied().unwrap_or(0),
        })
        .filter(|s| s.baseline != 0 || s.new != 0)
        .collect();
    let winning = |r: &Replay| {
        r.outcomes
            .iter()
            .filter_map(|(_, o)| match o {
                Outcome::Placed { score, .. } => *score,
                _ => None,
            })
            .collect::<Vec<i64>>()
    };
    Report {
        pods: base.outcomes.len(),
        baseline: summary(base),
        new: summary(new),
        moved,
        became_unschedulable: worse,
        became_schedulable: better,
        nodes,
        skew,
        scores: (winning(base), winning(new)),
    }
}

/// The report as a terminal table (times are appended by the caller: they are not part of the
/// deterministic report).
pub fn table(r: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{} pods replayed from an empty cluster under both configurations\n", r.pods);
    let w = r
        .skew
        .iter()
        .map(|s| s.workload.len() + "zone skew ".len())
        .chain(r.baseline.zones.keys().map(|z| z.len() + "zone  cpu/memory".len()))
        .max()
        .unwrap_or(0)
        .max(21);
    let _ = writeln!(out, "{:w$}  {:>12}  {:>12}", "", "BASELINE", "NEW");
    let row = |out: &mut String, k: &str, a: String, b: String| {
        let _ = writeln!(out, "{k:w$}  {a:>12}  {b:>12}");
    };
    row(&mut out, "placed", r.baseline.placed.to_string(), r.new.placed.to_string());
    row(&mut out, "unschedulable", r.baseline.unschedulable.to_string(), r.new.unschedulable.to_string());
    row(
        &mut out,
        "preemptions (victims)",
        format!("{} ({})", r.baseline.preemptions, r.baseline.victims),
        format!("{} ({})", r.new.preemptions, r.new.victims),
    );
    for (z, u) in &r.baseline.zones {
        let n = r.new.zones.get(z).copied().unwrap_or_default();
        row(
            &mut out,
            &format!("zone {z} cpu/memory"),
            format!("{:.1}/{:.1}%", u.cpu, u.memory),
            format!("{:.1}/{:.1}%", n.cpu, n.memory),
        );
    }
    for s in &r.skew {
        row(&mut out, &format!("zone skew {}", s.workload), s.baseline.to_string(), s.new.to_string());
    }
    let list = |out: &mut String, title: &str, changes: &[Change]| {
        if changes.is_empty() {
            return;
        }
        let _ = writeln!(out, "\n{title} ({}):", changes.len());
        let wp = changes.iter().map(|c| c.pod.len()).max().unwrap_or(0).max(3);
        let _ = writeln!(out, "  {:wp$}  BASELINE -> NEW", "POD");
        for c in changes {
            let _ = writeln!(out, "  {:wp$}  {} -> {}", c.pod, c.baseline, c.new);
        }
    };
    list(&mut out, "Placements that differ", &r.moved);
    list(&mut out, "Became unschedulable", &r.became_unschedulable);
    list(&mut out, "Became schedulable", &r.became_schedulable);
    if r.moved.is_empty() && r.became_unschedulable.is_empty() && r.became_schedulable.is_empty() {
        out.push_str("\nNo pod changes placement.\n");
    }
    out
}

/// Writes report.json, utilization.svg and scores.svg into `dir`.
pub fn write_out(dir: &Path, r: &Report) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let json = serde_json::to_string_pretty(r)? + "\n";
    std::fs::write(dir.join("report.json"), json).with_context(|| format!("writing {}", dir.display()))?;
    plot_utilization(&dir.join("utilization.svg"), r)?;
    plot_scores(&dir.join("scores.svg"), r)?;
    Ok(())
}

fn plot_utilization(path: &Path, r: &Report) -> anyhow::Result<()> {
    let n = r.nodes.len().max(1);
    let width = (240 + n * 14).clamp(640, 4000) as u32;
    let root = SVGBackend::new(path, (width, 420)).into_drawing_area();
    let draw = || -> Result<(), Box<dyn std::error::Error + '_>> {
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption("cpu requested per node, % of allocatable (blue: baseline, red: new)", ("sans-serif", 16))
            .margin(12)
            .x_label_area_size(32)
            .y_label_area_size(48)
            .build_cartesian_2d(0.0..n as f64, 0.0..100.0)?;
        chart.configure_mesh().disable_x_mesh().x_desc("nodes (by name)").y_desc("% cpu").draw()?;
        chart.draw_series(r.nodes.iter().enumerate().map(|(i, row)| {
            let x = i as f64;
            Rectangle::new([(x + 0.1, 0.0), (x + 0.5, row.baseline.cpu.min(100.0))], BLUE.mix(0.6).filled())
        }))?;
        chart.draw_series(r.nodes.iter().enumerate().map(|(i, row)| {
            let x = i as f64;
            Rectangle::new([(x + 0.5, 0.0), (x + 0.9, row.new.cpu.min(100.0))], RED.mix(0.6).filled())
        }))?;
        root.present()?;
        Ok(())
    };
    draw().map_err(|e| anyhow::anyhow!("plotting {}: {e}", path.display()))
}

fn plot_scores(path: &Path, r: &Report) -> anyhow::Result<()> {
    const BUCKETS: usize = 20;
    let max = r.scores.0.iter().chain(&r.scores.1).copied().max().unwrap_or(1).max(1);
    let hist = |v: &[i64]| {
        let mut h = [0usize; BUCKETS];
        for &s in v {
            h[((s.max(0) as usize) * BUCKETS / (max as usize + 1)).min(BUCKETS - 1)] += 1;
        }
        h
    };
    let (hb, hn) = (hist(&r.scores.0), hist(&r.scores.1));
    let top = hb.iter().chain(&hn).copied().max().unwrap_or(1).max(1);
    let root = SVGBackend::new(path, (800, 420)).into_drawing_area();
    let draw = || -> Result<(), Box<dyn std::error::Error + '_>> {
        root.fill(&WHITE)?;
        let bucket = (max + 1) as f64 / BUCKETS as f64;
        let mut chart = ChartBuilder::on(&root)
            .caption("winning total score per placed pod (blue: baseline, red: new)", ("sans-serif", 16))
            .margin(12)
            .x_label_area_size(32)
            .y_label_area_size(48)
            .build_cartesian_2d(0.0..(max + 1) as f64, 0.0..top as f64 * 1.1)?;
        chart.configure_mesh().x_desc("total score").y_desc("pods").draw()?;
        chart.draw_series(hb.iter().enumerate().map(|(i, &c)| {
            let x = i as f64 * bucket;
            Rectangle::new([(x, 0.0), (x + bucket / 2.0, c as f64)], BLUE.mix(0.6).filled())
        }))?;
        chart.draw_series(hn.iter().enumerate().map(|(i, &c)| {
            let x = i as f64 * bucket + bucket / 2.0;
            Rectangle::new([(x, 0.0), (x + bucket / 2.0, c as f64)], RED.mix(0.6).filled())
        }))?;
        root.present()?;
        Ok(())
    };
    draw().map_err(|e| anyhow::anyhow!("plotting {}: {e}", path.display()))
}

/// `ksched whatif`.
pub async fn run(args: WhatifArgs) -> anyhow::Result<()> {
    let new_cfg = crate::explain::load_config(Some(args.config.as_path()))?;
    let base_cfg = crate::explain::load_config(args.baseline.as_deref())?;
    let cluster = ClusterCopy::load(args.kubeconfig.as_deref(), &args.paths).await?;
    let base = replay(&cluster, &base_cfg)?;
    let new = replay(&cluster, &new_cfg)?;
    let report = compare(&cluster, &base, &new);
    print!("{}", table(&report));
    println!(
        "\ntime: baseline {:.1} ms, new {:.1} ms",
        base.elapsed.as_secs_f64() * 1e3,
        new.elapsed.as_secs_f64() * 1e3
    );
    if let Some(dir) = &args.out {
        write_out(dir, &report)?;
        println!("wrote {}/report.json, utilization.svg, scores.svg", dir.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ksched_framework::listers::MemoryLister;
    use serde_json::json;
    use std::sync::Arc;

    fn cluster() -> ClusterCopy {
        let node = |name: &str, zone: &str| {
            serde_json::from_value(json!({"metadata": {"name": name, "labels": {
                    "kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone}},
                "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}))
            .unwrap()
        };
        let pod = |name: &str, cpu: &str| {
            serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default", "uid": name,
                    "labels": {"app": "web"}},
                "spec": {"schedulerName": "default-scheduler",
                    "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu}}}]}}))
            .unwrap()
        };
        ClusterCopy {
            nodes: vec![node("n1", "a"), node("n2", "b")],
            pods: vec![pod("p1", "1"), pod("p2", "1"), pod("p3", "1"), pod("p4", "1"), pod("p5", "3")],
            lister: Arc::new(MemoryLister::default()),
            pod_groups: Vec::new(),
        }
    }

    fn most_allocated() -> ksched_scheduler::config::KubeSchedulerConfiguration {
        let yaml = br#"
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    score:
      disabled: [{name: NodeResourcesBalancedAllocation}]
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
        resources: [{name: cpu, weight: 1}]
"#;
        let cfg = ksched_scheduler::config::load_config(yaml, "new.yaml").unwrap();
        ksched_scheduler::config::validate(&cfg).unwrap();
        cfg
    }

    #[test]
    fn packing_instead_of_spreading_moves_the_known_pods() {
        let c = cluster();
        let base = replay(&c, &ksched_scheduler::config::default_config()).unwrap();
        let new = replay(&c, &most_allocated()).unwrap();
        let r = compare(&c, &base, &new);
        let moved: Vec<(&str, &str, &str)> =
            r.moved.iter().map(|m| (m.pod.as_str(), m.baseline.as_str(), m.new.as_str())).collect();
        // LeastAllocated alternates n1, n2; MostAllocated fills n1 first.
        assert_eq!(moved, [("default/p2", "n2", "n1"), ("default/p4", "n2", "n1")]);
        // With 2 cpu left on each node p5 (3 cpu) fits nowhere; packed, n2 is empty.
        assert_eq!(r.became_schedulable.len(), 1);
        assert_eq!(r.became_schedulable[0].pod, "default/p5");
        assert_eq!(r.became_schedulable[0].new, "n2");
        assert!(r.became_schedulable[0]
            .baseline
            .starts_with("unschedulable: 0/2 nodes are available: 2 Insufficient cpu."));
        assert_eq!((r.baseline.placed, r.baseline.unschedulable), (4, 1));
        assert_eq!((r.new.placed, r.new.unschedulable), (5, 0));
        let n1 = r.nodes.iter().find(|n| n.node == "n1").unwrap();
        assert_eq!((n1.baseline.cpu, n1.new.cpu), (50.0, 100.0));
        let skew: Vec<(&str, i64, i64)> = r.skew.iter().map(|s| (s.workload.as_str(), s.baseline, s.new)).collect();
        assert_eq!(skew, [("default/app=web", 0, 3)]);
        let text = table(&r);
        assert!(text.contains("Placements that differ (2):"), "{text}");
    }

    #[test]
    fn reports_are_identical_byte_for_byte() {
        let c = cluster();
        let dir = std::env::temp_dir().join(format!("ksched-whatif-{}", std::process::id()));
        let mut outputs = Vec::new();
        for run in 0..2 {
            let base = replay(&c, &ksched_scheduler::config::default_config()).unwrap();
            let new = replay(&c, &most_allocated()).unwrap();
            let r = compare(&c, &base, &new);
            let d = dir.join(run.to_string());
            write_out(&d, &r).unwrap();
            let files: Vec<Vec<u8>> = ["report.json", "utilization.svg", "scores.svg"]
                .iter()
                .map(|f| std::fs::read(d.join(f)).unwrap())
                .collect();
            assert!(files.iter().all(|f| !f.is_empty()));
            outputs.push((table(&r), files));
        }
        std::fs::remove_dir_all(&dir).ok();
        assert!(outputs[0] == outputs[1], "two runs differ");
    }
}
