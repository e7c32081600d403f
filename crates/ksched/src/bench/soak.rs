//! `ksched bench --duration SECS`: after the workload, a churn soak against the embedded API
//! server. A constant population of pods is kept in namespace `soak`: every tick the oldest
//! are deleted and as many new ones created (`--churn-rate` per second), so the cluster's
//! size stays flat and any growth of the process is a leak. Resident memory is sampled over
//! time (printed, in `results.json` and plotted to `soak-rss.svg`); the verdict compares the
//! peak after warm-up (the first fifth of the run) with the peak during it.
//!
//! The embedded API server keeps Events forever (kube-apiserver drops them after
//! `--event-ttl`, 1 h by default); the soak deletes those older than a minute so the store's
//! size stays as flat as the cluster's.

use std::collections::VecDeque;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use plotters::prelude::*;
use serde::Serialize;
use serde_json::Value;

use super::cluster::{key, Backend, PodItem};
use super::stats;
use super::templates::{self, PodTemplate};

/// The namespace the soak churns.
pub const SOAK_NAMESPACE: &str = "soak";
/// Fraction of the run counted as warm-up.
const WARMUP: f64 = 0.2;
/// Events older than this are deleted (a short `--event-ttl`).
const EVENT_TTL: Duration = Duration::from_secs(60);
const TICK: Duration = Duration::from_millis(100);

/// One resident-memory sample.
#[derive(Debug, Clone, Serialize)]
pub struct RssSample {
    /// Seconds since the soak started.
    pub t_s: f64,
    /// Resident set size, MiB.
    pub rss_mib: f64,
    /// Soak pods created so far.
    pub created: u64,
    /// Soak pods bound so far.
    pub bound: u64,
}

/// What the soak measured (`results.json` field `soak`).
#[derive(Debug, Clone, Serialize)]
pub struct SoakReport {
    /// Seconds churned.
    pub duration_s: f64,
    /// Pods kept alive.
    pub population: usize,
    /// Pods created (and as many deleted, but for the population) per second asked.
    pub churn_rate: f64,
    /// Pods created.
    pub created: u64,
    /// Pods seen bound.
    pub bound: u64,
    /// Pods deleted.
    pub deleted: u64,
    /// Peak RSS during warm-up, MiB.
    pub warmup_peak_mib: f64,
    /// Peak RSS after warm-up, MiB.
    pub peak_after_warmup_mib: f64,
    /// RSS at the end, MiB.
    pub final_mib: f64,
    /// (peak after warm-up − peak during warm-up) / peak during warm-up, in percent.
    pub growth_percent: f64,
    /// The samples.
    pub samples: Vec<RssSample>,
}

impl SoakReport {
    /// The human summary.
    pub fn summary(&self) -> String {
        format!(
            "  soak: {:.0}s, {} pods kept, {} created / {} bound / {} deleted; RSS warm-up peak {:.0} MiB, \
             peak after warm-up {:.0} MiB ({:+.1}%), final {:.0} MiB",
            self.duration_s,
            self.population,
            self.created,
            self.bound,
            self.deleted,
            self.warmup_peak_mib,
            self.peak_after_warmup_mib,
            self.growth_percent,
            self.final_mib
        )
    }
}

fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

/// Unique soak pod names.
struct Names(u64);

impl Names {
    fn next(&mut self) -> String {
        self.0 += 1;
        format!("soak-{:08}", self.0)
    }
}

/// Runs the soak for `duration`, keeping `population` pods and replacing `rate` per second.
pub async fn run(
    backend: &Backend,
    duration: Duration,
    population: usize,
    rate: f64,
    out: &Path,
    title: &str,
) -> anyhow::Result<SoakReport> {
    backend.create_namespace(SOAK_NAMESPACE).await?;
    let extra = backend.extra_labels();
    let observed = backend.observed();
    let mut names = Names(0);
    let make = |names: &mut Names| {
        let pod = templates::pod(PodTemplate::Default, SOAK_NAMESPACE, &names.next(), &extra);
        PodItem { pod, volume: None }
    };
    let mut live: VecDeque<String> = VecDeque::new();
    let first: Vec<PodItem> = (0..population).map(|_| make(&mut names)).collect();
    live.extend(first.iter().map(|it| key(&it.pod)));
    backend.create_pods(first).await?;
    let (mut created, mut deleted, mut bound) = (population as u64, 0u64, 0u64);

    let start = Instant::now();
    let every = (duration / 200).clamp(Duration::from_secs(1), Duration::from_secs(30));
    let mut next_sample = start;
    let mut next_prune = start + Duration::from_secs(10);
    let mut samples: Vec<RssSample> = Vec::new();
    let mut owed = 0.0_f64;
    let mut tick = tokio::time::interval(TICK);
    println!("soak: {population} pods kept, {rate} replaced per second, for {duration:?}; RSS every {every:?}");
    while start.elapsed() < duration {
        tick.tick().await;
        backend.refresh(&[])?;
        owed += rate * TICK.as_secs_f64();
        let n = owed.floor() as usize;
        owed -= n as f64;
        // Replace the oldest pods that are done (bound or refused); never shrink below the
        // population while the scheduler is behind.
        let mut gone = Vec::new();
        {
            let mut o = observed.lock();
            while gone.len() < n {
                let Some(k) = live.front() else { break };
                let decided = o.bound.contains_key(k) || o.unschedulable.contains(k);
                if !decided {
                    break;
                }
                if o.bound.contains_key(k) {
                    bound += 1;
                }
                let k = live.pop_front().unwrap_or_default();
                o.forget(&k);
                gone.push(k);
            }
        }
        for k in &gone {
            let (ns, name) = k.split_once('/').unwrap_or((SOAK_NAMESPACE, k));
            backend.delete_pod(ns, name).await?;
        }
        deleted += gone.len() as u64;
        let fresh: Vec<PodItem> = (0..gone.len()).map(|_| make(&mut names)).collect();
        live.extend(fresh.iter().map(|it| key(&it.pod)));
        created += fresh.len() as u64;
        if !fresh.is_empty() {
            backend.create_pods(fresh).await?;
        }
        let now = Instant::now();
        if now >= next_prune {
            next_prune = now + Duration::from_secs(10);
            prune_events(backend);
        }
        if now >= next_sample {
            next_sample += every;
            let rss = stats::rss_bytes().map_or(0.0, mib);
            let s = RssSample { t_s: (now - start).as_secs_f64(), rss_mib: rss, created, bound };
            println!("soak t={:>6.0}s rss={:>7.1} MiB created={} bound={}", s.t_s, s.rss_mib, s.created, s.bound);
            samples.push(s);
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    let warm = elapsed * WARMUP;
    let peak = |f: &dyn Fn(&RssSample) -> bool| samples.iter().filter(|s| f(s)).map(|s| s.rss_mib).fold(0.0, f64::max);
    let warmup_peak_mib = peak(&|s| s.t_s <= warm);
    let peak_after_warmup_mib = peak(&|s| s.t_s > warm);
    let final_mib = stats::rss_bytes().map_or(0.0, mib);
    let growth_percent =
        if warmup_peak_mib > 0.0 { (peak_after_warmup_mib - warmup_peak_mib) / warmup_peak_mib * 100.0 } else { 0.0 };
    let report = SoakReport {
        duration_s: elapsed,
        population,
        churn_rate: rate,
        created,
        bound,
        deleted,
        warmup_peak_mib,
        peak_after_warmup_mib,
        final_mib,
        growth_percent,
        samples,
    };
    plot(&out.join("soak-rss.svg"), title, &report, warm).context("plotting the soak")?;
    Ok(report)
}

/// Deletes Events older than [`EVENT_TTL`] from the embedded API server.
fn prune_events(backend: &Backend) {
    let Some((store, _)) = backend.store() else { return };
    let cutoff = chrono::Utc::now() - chrono::Duration::from_std(EVENT_TTL).unwrap_or_default();
    for e in store.list("v1", "Event", None) {
        let created = e
            .pointer("/metadata/creationTimestamp")
            .and_then(Value::as_str)
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok());
        if created.is_some_and(|t| t < cutoff) {
            let ns = e.pointer("/metadata/namespace").and_then(Value::as_str);
            let name = e.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
            let _ = store.delete("v1", "Event", ns, name);
        }
    }
}

fn plot(path: &Path, title: &str, r: &SoakReport, warm: f64) -> anyhow::Result<()> {
    let root = SVGBackend::new(path, (960, 480)).into_drawing_area();
    let t_max = r.samples.last().map_or(1.0, |s| s.t_s).max(1.0);
    let y_max = r.samples.iter().map(|s| s.rss_mib).fold(1.0, f64::max) * 1.15;
    let draw = || -> Result<(), Box<dyn std::error::Error + '_>> {
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(format!("{title}: resident memory during the churn soak"), ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(32)
            .y_label_area_size(64)
            .build_cartesian_2d(0.0..t_max * 1.02, 0.0..y_max)?;
        chart.configure_mesh().x_desc("seconds since the soak started").y_desc("RSS (MiB)").draw()?;
        chart.draw_series(std::iter::once(Rectangle::new([(0.0, 0.0), (warm, y_max)], BLACK.mix(0.06).filled())))?;
        chart.draw_series(LineSeries::new(r.samples.iter().map(|s| (s.t_s, s.rss_mib)), BLUE.stroke_width(2)))?;
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(warm, r.warmup_peak_mib), (t_max, r.warmup_peak_mib)],
            RED.stroke_width(1),
        )))?;
        root.present()?;
        Ok(())
    };
    draw().map_err(|e| anyhow::anyhow!("{e}"))
}
