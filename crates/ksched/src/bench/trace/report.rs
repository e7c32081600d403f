//! Results of a trace replay: `results.json` (per profile, per seed and the median and
//! interquartile range over seeds), the stdout table, and the SVG of unallocated GPU against
//! arrived demand (the FGD paper's Fig. 9a).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use plotters::prelude::*;
use serde::Serialize;

use super::replay::SeedReplay;

/// One seed of one profile.
#[derive(Debug, Clone, Serialize)]
pub struct SeedResult {
    /// The seed.
    pub seed: u64,
    /// Pods in its arrival sequence.
    pub pods: usize,
    /// Pods placed.
    pub placed: usize,
    /// Pods that fit nowhere (dropped).
    pub failed_pods: usize,
    /// Their GPU demand, milli.
    pub failed_gpu_milli: i64,
    /// GPU allocation (% of capacity) at each arrived point (% of capacity).
    pub alloc_pct: BTreeMap<String, f64>,
    /// GPU allocation when every pod of the sequence was tried.
    pub final_alloc_pct: f64,
    /// Wall time of the seed (objects, cycles and checks), seconds.
    pub seconds: f64,
    /// Scheduling cost per pod: CPU time of its cycle, microseconds.
    pub us_per_pod: f64,
    /// CPU per placed pod, microseconds (its whole cycle).
    pub us_per_placed_pod: f64,
    /// Of which assume, Reserve, Permit, PreBind and Bind, microseconds.
    pub us_binding_per_placed_pod: f64,
    /// CPU per pod that fits nowhere (every node filtered), microseconds.
    pub us_per_failed_pod: f64,
    /// Wall time of the cycles per pod, microseconds (more than the CPU time when the
    /// machine is busy with other work).
    pub wall_us_per_pod: f64,
    /// Allocation (%) when the arrived demand first reaches each whole percent from 0 (the
    /// plot's curve; `curve[100]` is `alloc_pct["100"]` unrounded).
    pub curve: Vec<f64>,
}

impl SeedResult {
    /// Summarises a replay.
    pub fn new(seed: u64, r: &SeedReplay, points: &[f64], seconds: f64) -> Self {
        let (failed_pods, failed_gpu_milli) = r.failed();
        let cum = r.cumulative();
        let cap = r.capacity_milli as f64;
        let alloc_pct = points.iter().filter_map(|&p| r.alloc_pct_at(p).map(|a| (point_key(p), round2(a)))).collect();
        let max_arrived = cum.last().map_or(0.0, |c| c.0 as f64 * 100.0 / cap);
        let mut curve = Vec::new();
        let mut k = 0;
        for pct in 0..=(max_arrived.floor() as usize) {
            while k < cum.len() && (cum[k].0 as f64) < pct as f64 / 100.0 * cap {
                k += 1;
            }
            let a = if k == 0 && pct == 0 { 0.0 } else { cum[k.min(cum.len() - 1)].1 as f64 * 100.0 / cap };
            curve.push(a);
        }
        let pods = r.outcomes.len();
        let placed = pods - failed_pods;
        let us = |d: std::time::Duration, n: usize| round2(d.as_secs_f64() * 1e6 / n.max(1) as f64);
        SeedResult {
            seed,
            pods,
            placed,
            failed_pods,
            failed_gpu_milli,
            alloc_pct,
            final_alloc_pct: round2(cum.last().map_or(0.0, |c| c.1 as f64 * 100.0 / cap)),
            seconds: round3(seconds),
            us_per_pod: us(r.cpu, pods),
            us_per_placed_pod: us(r.cpu.saturating_sub(r.failed_cpu), placed),
            us_binding_per_placed_pod: us(r.binding_cpu, placed),
            us_per_failed_pod: us(r.failed_cpu, failed_pods),
            wall_us_per_pod: us(r.elapsed, pods),
            curve,
        }
    }
}

/// One profile over all seeds.
#[derive(Debug, Clone, Serialize)]
pub struct ProfileResult {
    /// Its name.
    pub name: String,
    /// `built-in` or its file.
    pub source: String,
    /// The configuration used (as upstream encodes it, defaults filled in).
    pub config: serde_json::Value,
    /// Median over seeds of the allocation at each arrived point.
    pub median_alloc_pct: BTreeMap<String, f64>,
    /// Interquartile range (Q3 - Q1) over seeds at each arrived point.
    pub iqr_alloc_pct: BTreeMap<String, f64>,
    /// First quartile over seeds at each arrived point.
    pub q1_alloc_pct: BTreeMap<String, f64>,
    /// Third quartile over seeds at each arrived point.
    pub q3_alloc_pct: BTreeMap<String, f64>,
    /// Median failed pods.
    pub median_failed_pods: f64,
    /// Median failed GPU demand, in GPUs.
    pub median_failed_gpus: f64,
    /// Median wall time per seed, seconds.
    pub median_seconds_per_seed: f64,
    /// Median scheduling cost per pod, microseconds.
    pub median_us_per_pod: f64,
    /// Median cost per placed pod, microseconds.
    pub median_us_per_placed_pod: f64,
    /// Median cost per pod that fits nowhere, microseconds.
    pub median_us_per_failed_pod: f64,
    /// Median allocation (%) at every whole arrived percent from 0.
    pub median_curve: Vec<f64>,
    /// Per seed.
    pub seeds: Vec<SeedResult>,
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct TraceResults {
    /// `trace`.
    pub mode: String,
    /// The node list.
    pub trace_nodes: String,
    /// The pod list.
    pub trace_pods: String,
    /// Nodes.
    pub nodes: usize,
    /// GPUs.
    pub gpus: i64,
    /// Pods in the pod list.
    pub trace_pod_count: usize,
    /// Seeds.
    pub seeds: Vec<u64>,
    /// Target of the arrival sequence, times GPU capacity.
    pub inflate: f64,
    /// The arrived points reported (% of GPU capacity).
    pub arrived_points: Vec<f64>,
    /// Seeds replayed at once.
    pub jobs: usize,
    /// `git rev-parse --short HEAD`.
    pub git_revision: String,
    /// How to read the figures.
    pub notes: Vec<String>,
    /// Per profile.
    pub profiles: Vec<ProfileResult>,
    /// The offline packing of the same arrived pods (`--hindsight`), not a scheduler.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hindsight: Option<ReferenceResult>,
    /// An upper bound on the allocation of the same arrived pods (`--bound`), not a scheduler.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bound: Option<ReferenceResult>,
}

/// A reference row beside the profiles, computed from each seed's arrived pods rather than
/// scheduled: the offline packing (`--hindsight`, `hindsight.rs`) or the upper bound
/// (`--bound`, `bound.rs`); median and IQR over seeds like a profile's.
#[derive(Debug, Clone, Serialize)]
pub struct ReferenceResult {
    /// How it packs.
    pub method: String,
    /// Median over seeds at each arrived point.
    pub median_alloc_pct: BTreeMap<String, f64>,
    /// Interquartile range over seeds at each arrived point.
    pub iqr_alloc_pct: BTreeMap<String, f64>,
    /// Per seed, at each arrived point.
    pub seeds: BTreeMap<u64, BTreeMap<String, f64>>,
}

impl ReferenceResult {
    /// The offline packing's description in results.json.
    pub const HINDSIGHT: &'static str =
        "the arrived GPU pods packed offline, largest first, each where it leaves the least room; cpu-only pods left out";
    /// The upper bound's description in results.json.
    pub const BOUND: &'static str = "the configuration linear program over the cluster's GPUs: share sizes per GPU, whole-GPU pods on nodes with enough GPUs; cpu, memory and GPU models left out, so no placement allocates more";

    /// Aggregates the allocation per seed (`per_seed[i][j]`: seed `seeds[i]`, point
    /// `points[j]`; `None` where the sequence does not reach the point).
    pub fn new(method: &str, seeds: &[u64], per_seed: &[Vec<Option<f64>>], points: &[f64]) -> Self {
        let at = |values: &[Option<f64>], round: fn(f64) -> f64| -> BTreeMap<String, f64> {
            points.iter().zip(values).filter_map(|(p, v)| v.map(|v| (point_key(*p), round(v)))).collect()
        };
        // The quartiles are taken over the unrounded figures; each seed's is reported rounded.
        let exact: Vec<BTreeMap<String, f64>> = per_seed.iter().map(|v| at(v, |x| x)).collect();
        let st = point_stats(exact.iter(), points);
        ReferenceResult {
            method: method.into(),
            median_alloc_pct: st.median,
            iqr_alloc_pct: st.iqr,
            seeds: seeds.iter().zip(per_seed).map(|(seed, v)| (*seed, at(v, round2))).collect(),
        }
    }
}

/// The JSON key of an arrived point (`100`, `97.5`).
pub fn point_key(p: f64) -> String {
    format!("{p}")
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// The `q` quantile (0..=1) of `xs`, interpolated linearly between order statistics (R's
/// type 7, numpy's default).
pub fn quantile(xs: &[f64], q: f64) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let h = (v.len() - 1) as f64 * q;
    let (lo, hi) = (h.floor() as usize, h.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (h - lo as f64)
}

/// Quartiles over seeds at each arrived point, from the per-seed figures as reported.
struct PointStats {
    median: BTreeMap<String, f64>,
    iqr: BTreeMap<String, f64>,
    q1: BTreeMap<String, f64>,
    q3: BTreeMap<String, f64>,
}

/// [`PointStats`] of `per_seed` (each seed's allocation by point key); a point is left out
/// unless every seed reaches it.
fn point_stats<'a>(per_seed: impl Iterator<Item = &'a BTreeMap<String, f64>> + Clone, points: &[f64]) -> PointStats {
    let mut st = PointStats { median: BTreeMap::new(), iqr: BTreeMap::new(), q1: BTreeMap::new(), q3: BTreeMap::new() };
    let seeds = per_seed.clone().count();
    for &p in points {
        let k = point_key(p);
        let xs: Vec<f64> = per_seed.clone().filter_map(|s| s.get(&k).copied()).collect();
        if xs.len() != seeds || xs.is_empty() {
            continue;
        }
        let (q1, q3) = (quantile(&xs, 0.25), quantile(&xs, 0.75));
        st.median.insert(k.clone(), round2(quantile(&xs, 0.5)));
        st.iqr.insert(k.clone(), round2(q3 - q1));
        st.q1.insert(k.clone(), round2(q1));
        st.q3.insert(k, round2(q3));
    }
    st
}

/// Aggregates a profile's seeds.
pub fn profile_result(
    name: &str,
    source: &str,
    config: serde_json::Value,
    seeds: Vec<SeedResult>,
    points: &[f64],
) -> ProfileResult {
    let PointStats { median, iqr, q1: q1s, q3: q3s } = point_stats(seeds.iter().map(|s| &s.alloc_pct), points);
    let med = |f: &dyn Fn(&SeedResult) -> f64| quantile(&seeds.iter().map(f).collect::<Vec<_>>(), 0.5);
    let len = seeds.iter().map(|s| s.curve.len()).min().unwrap_or(0);
    let median_curve =
        (0..len).map(|i| round2(quantile(&seeds.iter().map(|s| s.curve[i]).collect::<Vec<_>>(), 0.5))).collect();
    ProfileResult {
        name: name.to_string(),
        source: source.to_string(),
        config,
        median_alloc_pct: median,
        iqr_alloc_pct: iqr,
        q1_alloc_pct: q1s,
        q3_alloc_pct: q3s,
        median_failed_pods: med(&|s| s.failed_pods as f64),
        median_failed_gpus: round2(med(&|s| s.failed_gpu_milli as f64 / 1000.0)),
        median_seconds_per_seed: round3(med(&|s| s.seconds)),
        median_us_per_pod: round2(med(&|s| s.us_per_pod)),
        median_us_per_placed_pod: round2(med(&|s| s.us_per_placed_pod)),
        median_us_per_failed_pod: round2(med(&|s| s.us_per_failed_pod)),
        median_curve,
        seeds,
    }
}

/// The labels of the table's `--hindsight` and `--bound` rows.
const HINDSIGHT_ROW: &str = "(hindsight)";
const BOUND_ROW: &str = "(bound)";

/// A table row's cells: `median (IQR)` at each point, `-` where the seeds do not all reach it.
fn point_cells(out: &mut String, points: &[f64], median: &BTreeMap<String, f64>, iqr: &BTreeMap<String, f64>) {
    for pt in points {
        let k = point_key(*pt);
        let cell = match (median.get(&k), iqr.get(&k)) {
            (Some(m), Some(i)) => format!("{m:.2} ({i:.2})"),
            _ => "-".into(),
        };
        let _ = write!(out, "  {cell:>14}");
    }
}

/// The table printed on stdout: per profile, the median (and IQR) allocation at each point.
pub fn table(r: &TraceResults) -> String {
    let mut out = String::new();
    let references = [
        (HINDSIGHT_ROW, &r.hindsight, "offline packing of the same arrived pods, not a scheduler"),
        (BOUND_ROW, &r.bound, "upper bound: no placement of the same arrived pods allocates more"),
    ];
    let reference_width =
        references.iter().filter(|(_, x, _)| x.is_some()).map(|(label, ..)| label.len()).max().unwrap_or(0);
    let width = r.profiles.iter().map(|p| p.name.len()).max().unwrap_or(7).max(7).max(reference_width);
    let _ = write!(out, "{:<width$}", "PROFILE");
    for p in &r.arrived_points {
        let _ = write!(out, "  {:>14}", format!("@{}%", point_key(*p)));
    }
    let _ = writeln!(out, "  {:>11}  {:>11}  {:>8}  {:>10}", "FAILED PODS", "FAILED GPUS", "S/SEED", "CPU US/POD");
    for p in &r.profiles {
        let _ = write!(out, "{:<width$}", p.name);
        point_cells(&mut out, &r.arrived_points, &p.median_alloc_pct, &p.iqr_alloc_pct);
        let _ = writeln!(
            out,
            "  {:>11}  {:>11.1}  {:>8.2}  {:>10.0}",
            p.median_failed_pods, p.median_failed_gpus, p.median_seconds_per_seed, p.median_us_per_pod
        );
    }
    for (label, reference, what) in references {
        let Some(x) = reference else { continue };
        let _ = write!(out, "{label:<width$}");
        point_cells(&mut out, &r.arrived_points, &x.median_alloc_pct, &x.iqr_alloc_pct);
        let _ = writeln!(out, "  {what}");
    }
    out
}

const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// Colour `i` of the plots.
pub fn colour(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// Unallocated GPU (% of capacity) against arrived demand (% of capacity), the median over
/// seeds per profile, from `from_pct` arrived on; the dashed line is what no fragmentation
/// would leave (every arrived milli allocated while capacity lasts).
pub fn plot_unallocated(path: &Path, title: &str, profiles: &[ProfileResult], from_pct: usize) -> anyhow::Result<()> {
    let max_x = profiles.iter().map(|p| p.median_curve.len()).max().unwrap_or(1).saturating_sub(1).max(from_pct + 1);
    let unalloc = |p: &ProfileResult, i: usize| 100.0 - p.median_curve[i];
    let max_y = profiles
        .iter()
        .flat_map(|p| (from_pct..p.median_curve.len()).map(move |i| unalloc(p, i)))
        .fold(1.0_f64, f64::max)
        .min(100.0);
    let root = SVGBackend::new(path, (960, 600)).into_drawing_area();
    let draw = || -> Result<(), Box<dyn std::error::Error + '_>> {
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(16)
            .x_label_area_size(40)
            .y_label_area_size(56)
            .build_cartesian_2d(from_pct as f64..max_x as f64, 0.0..max_y * 1.05)?;
        chart
            .configure_mesh()
            .x_desc("arrived GPU demand (% of cluster GPU capacity)")
            .y_desc("unallocated GPU (% of capacity)")
            .draw()?;
        let ideal: Vec<(f64, f64)> = (from_pct..=max_x)
            .map(|x| (x as f64, (100.0 - x as f64).max(0.0)))
            .filter(|(_, y)| *y <= max_y * 1.05)
            .collect();
        chart
            .draw_series(DashedLineSeries::new(ideal, 6, 4, BLACK.mix(0.5).stroke_width(1)))?
            .label("no fragmentation")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK.mix(0.5)));
        for (i, p) in profiles.iter().enumerate() {
            let c = colour(i);
            let pts: Vec<(f64, f64)> = (from_pct..p.median_curve.len()).map(|x| (x as f64, unalloc(p, x))).collect();
            chart
                .draw_series(LineSeries::new(pts, c.stroke_width(2)))?
                .label(p.name.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
        }
        chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw()?;
        root.present()?;
        Ok(())
    };
    draw().map_err(|e| anyhow::anyhow!("plotting {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate_like_numpy() {
        let xs = [4.0, 1.0, 3.0, 2.0];
        assert_eq!(quantile(&xs, 0.5), 2.5);
        assert_eq!(quantile(&xs, 0.25), 1.75);
        assert_eq!(quantile(&xs, 0.75), 3.25);
        assert_eq!(quantile(&[7.0], 0.25), 7.0);
        let ten: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(quantile(&ten, 0.5), 5.5);
        assert_eq!(point_key(100.0), "100");
        assert_eq!(point_key(97.5), "97.5");
    }
}
