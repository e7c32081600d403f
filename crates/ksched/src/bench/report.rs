//! Results: one JSON object per workload run, a table for people, an SVG per run.

use std::path::Path;

use anyhow::Context as _;
use plotters::prelude::*;
use serde::Serialize;

/// One workload run (`results.json` is an array of these).
#[derive(Debug, Clone, Serialize)]
pub struct BenchResult {
    /// Test-case name.
    pub workload: String,
    /// The upstream workload whose shape and default counts this mirrors.
    pub upstream: String,
    /// `inprocess`, `local` or `external`.
    pub mode: String,
    /// `ours` or `none`.
    pub scheduler: String,
    /// Nodes.
    pub nodes: usize,
    /// Init pods.
    pub init_pods: usize,
    /// Measured pods.
    pub pods: usize,
    /// Seconds from the measured op's start to its end.
    pub duration_s: f64,
    /// Collector Average (pods/s); null when the run was too short for a sample.
    pub throughput_avg: Option<f64>,
    /// Collector Perc50.
    pub throughput_p50: Option<f64>,
    /// Collector Perc90.
    pub throughput_p90: Option<f64>,
    /// Collector Perc95.
    pub throughput_p95: Option<f64>,
    /// Collector Perc99.
    pub throughput_p99: Option<f64>,
    /// Collector samples.
    pub throughput_samples: usize,
    /// Seconds until every measured pod was created (pace setter when close to `duration_s`).
    pub creation_s: Option<f64>,
    /// Measured pods scheduled / seconds from the measured op's start to the last bind.
    pub throughput_overall: Option<f64>,
    /// Median scheduling-attempt latency (ms) during the measured op.
    pub attempt_latency_p50_ms: Option<f64>,
    /// 99th percentile scheduling-attempt latency (ms).
    pub attempt_latency_p99_ms: Option<f64>,
    /// Median scheduling-algorithm latency (ms): snapshot, filter and score, without the wait
    /// for the binding cycle that attempts include.
    pub algorithm_latency_p50_ms: Option<f64>,
    /// 99th percentile scheduling-algorithm latency (ms).
    pub algorithm_latency_p99_ms: Option<f64>,
    /// Attempts recorded.
    pub attempts: usize,
    /// Peak RSS of the whole bench process so far (it cannot be reset between workloads).
    pub peak_rss_bytes: Option<u64>,
    /// Resident set size after this workload's cluster was shut down (what it left behind).
    pub rss_after_bytes: Option<u64>,
    /// CPU seconds (user + system, whole process) spent during this workload.
    pub cpu_seconds: Option<f64>,
    /// Measured pods bound.
    pub scheduled: usize,
    /// Measured pods refused (PodScheduled=False, Unschedulable) and not bound.
    pub unschedulable: usize,
    /// Measured pods neither bound nor refused (only after a timeout).
    pub pending: usize,
    /// `git rev-parse --short HEAD`, or "unknown".
    pub git_revision: String,
    /// Caveats (too-short run, tick-timing warnings, timeouts).
    pub notes: Vec<String>,
    /// What a `--faults` run injected and proved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chaos: Option<super::chaos::ChaosReport>,
    /// What a `--duration` soak measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub soak: Option<super::soak::SoakReport>,
}

fn num(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.0}"))
}

fn ms(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.2}"))
}

/// The human table.
pub fn table(results: &[BenchResult]) -> String {
    let header = [
        "WORKLOAD",
        "MODE",
        "NODES",
        "INIT",
        "PODS",
        "AVG/s",
        "P50/s",
        "P90/s",
        "P99/s",
        "OVERALL/s",
        "LAT50ms",
        "LAT99ms",
        "SCHED",
        "UNSCHED",
        "CPU s",
        "PEAK RSS",
    ];
    let rows: Vec<Vec<String>> = results
        .iter()
        .map(|r| {
            vec![
                r.workload.clone(),
                r.mode.clone(),
                r.nodes.to_string(),
                r.init_pods.to_string(),
                r.pods.to_string(),
                num(r.throughput_avg),
                num(r.throughput_p50),
                num(r.throughput_p90),
                num(r.throughput_p99),
                num(r.throughput_overall),
                ms(r.attempt_latency_p50_ms),
                ms(r.attempt_latency_p99_ms),
                r.scheduled.to_string(),
                r.unschedulable.to_string(),
                r.cpu_seconds.map_or_else(|| "-".into(), |c| format!("{c:.1}")),
                r.peak_rss_bytes.map_or_else(|| "-".into(), |b| format!("{:.0}MiB", b as f64 / 1048576.0)),
            ]
        })
        .collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|i| rows.iter().map(|r| r[i].len()).chain([header[i].len()]).max().unwrap_or(0))
        .collect();
    let line = |cells: Vec<&str>| {
        cells
            .iter()
            .enumerate()
            .map(|(i, c)| if i < 2 { format!("{c:<w$}", w = widths[i]) } else { format!("{c:>w$}", w = widths[i]) })
            .collect::<Vec<_>>()
            .join("  ")
    };
    let mut out = line(header.to_vec());
    out.push('\n');
    for r in &rows {
        out.push_str(&line(r.iter().map(String::as_str).collect()));
        out.push('\n');
    }
    out
}

/// Writes `results` as a JSON array.
pub fn write_json(path: &Path, results: &[BenchResult]) -> anyhow::Result<()> {
    let bytes = serde_json::to_vec_pretty(results)?;
    std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))
}

/// Pods scheduled per second in buckets: 1 s wide for runs of 10 s or more, else a twentieth of
/// the run (a sub-second run would otherwise be a single bar).
fn rate_buckets(bind_offsets: &[f64], duration: f64) -> (f64, Vec<(f64, f64)>) {
    let width = if duration >= 10.0 { 1.0 } else { (duration / 20.0).max(0.001) };
    let n = ((duration / width).ceil() as usize).max(1);
    let mut counts = vec![0usize; n];
    for &t in bind_offsets {
        let i = ((t / width) as usize).min(n - 1);
        counts[i] += 1;
    }
    (width, counts.iter().enumerate().map(|(i, &c)| ((i as f64 + 0.5) * width, c as f64 / width)).collect())
}

/// Plots pods scheduled over time (top) and throughput (bottom: per bucket, and the collector's
/// samples when there are any) into an SVG.
pub fn plot(path: &Path, title: &str, bind_offsets: &[f64], samples: &[(f64, usize, f64)]) -> anyhow::Result<()> {
    let duration = bind_offsets.iter().copied().fold(0.0_f64, f64::max).max(0.001);
    let (width, buckets) = rate_buckets(bind_offsets, duration);
    let root = SVGBackend::new(path, (960, 720)).into_drawing_area();
    let draw =
        || -> Result<(), Box<dyn std::error::Error + '_>> {
            root.fill(&WHITE)?;
            let (top, bottom) = root.split_vertically(360);
            // Keep at most ~2000 points: an SVG with 50,000 segments is slow to open.
            let step = (bind_offsets.len() / 2000).max(1);
            let mut curve: Vec<(f64, f64)> = vec![(0.0, 0.0)];
            curve.extend(
                bind_offsets
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| i % step == 0 || *i + 1 == bind_offsets.len())
                    .map(|(i, &t)| (t, (i + 1) as f64)),
            );
            let mut chart = ChartBuilder::on(&top)
                .caption(format!("{title}: pods scheduled"), ("sans-serif", 18))
                .margin(12)
                .x_label_area_size(32)
                .y_label_area_size(64)
                .build_cartesian_2d(0.0..duration * 1.02, 0.0..(bind_offsets.len().max(1) as f64 * 1.05))?;
            chart.configure_mesh().x_desc("seconds since measured pods started").y_desc("pods").draw()?;
            chart.draw_series(LineSeries::new(curve, BLUE.stroke_width(2)))?;

            let max_rate = buckets.iter().map(|b| b.1).chain(samples.iter().map(|s| s.2)).fold(1.0_f64, f64::max);
            let mut chart = ChartBuilder::on(&bottom)
                .caption(
                    format!("throughput (pods/s; bars: {width:.3}s buckets, dots: 1s collector samples)"),
                    ("sans-serif", 16),
                )
                .margin(12)
                .x_label_area_size(32)
                .y_label_area_size(64)
                .build_cartesian_2d(0.0..duration * 1.02, 0.0..max_rate * 1.1)?;
            chart.configure_mesh().x_desc("seconds").y_desc("pods/s").draw()?;
            chart.draw_series(buckets.iter().map(|&(x, y)| {
                Rectangle::new([(x - width / 2.0, 0.0), (x + width / 2.0, y)], GREEN.mix(0.5).filled())
            }))?;
            chart.draw_series(samples.iter().map(|&(t, _, r)| Circle::new((t, r), 4, RED.filled())))?;
            root.present()?;
            Ok(())
        };
    draw().map_err(|e| anyhow::anyhow!("plotting {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_every_bind() {
        let binds: Vec<f64> = (0..100).map(|i| f64::from(i) * 0.01).collect();
        let (w, b) = rate_buckets(&binds, 0.99);
        assert_eq!(b.len(), 20);
        let total: f64 = b.iter().map(|x| x.1 * w).sum();
        assert!((total - 100.0).abs() < 1e-6);
        let (w, b) = rate_buckets(&[0.5, 11.2], 11.2);
        assert_eq!(w, 1.0);
        assert_eq!(b.len(), 12);
    }

    #[test]
    fn plots_and_tables() {
        let dir = std::env::temp_dir().join(format!("ksched-bench-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("x.svg");
        let binds: Vec<f64> = (0..500).map(|i| f64::from(i) * 0.004).collect();
        plot(&p, "T", &binds, &[(1.0, 250, 250.0)]).unwrap();
        let svg = std::fs::read_to_string(&p).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("pods scheduled"), "{}", &svg[..200.min(svg.len())]);
        plot(&p, "empty", &[], &[]).unwrap();
        std::fs::remove_dir_all(&dir).ok();
    }
}
