//! Trace variants by the FGD paper's resampling: pod lists that emphasise one kind of workload
//! (GPU-sharing pods, multi-GPU pods, pods restricted to GPU models, cpu-only pods), drawn from
//! a real list's own pods, so that a policy can be designed on some variants and judged on
//! others it never saw.
//!
//! The published variants of the Alibaba trace show the method: `gpushareX` keeps the number of
//! pods and redraws the GPU pods so that the sharing pods ask for X% of the GPU request;
//! `multigpuX` keeps every pod and appends multi-GPU pods until they ask for X% of it;
//! `gpuspecX` restricts X% of the GPU pods to the models the production cluster gave them
//! (`gpuspec33` holds that assignment for the default list). `cpu:X` scales the number of
//! cpu-only pods by X%. Draws use [`SplitMix64`] with the variant seed, so a family, level and
//! seed name the same list in every build.

use std::collections::{BTreeMap, HashSet};
use std::fmt;

use anyhow::Context as _;

use super::arrivals::SplitMix64;
use super::csv::TracePod;

/// The kind of workload a variant emphasises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Sharing pods ask for this % of the GPU request.
    Share,
    /// Multi-GPU pods ask for this % of the GPU request.
    Multi,
    /// This % of the GPU pods are restricted to GPU models.
    Spec,
    /// This % of the list's cpu-only pods.
    Cpu,
}

/// A variant: a family and its level (a percentage).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Variant {
    /// What it emphasises.
    pub family: Family,
    /// How much (percent).
    pub level: f64,
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self.family {
            Family::Share => "share",
            Family::Multi => "multi",
            Family::Spec => "spec",
            Family::Cpu => "cpu",
        };
        write!(f, "{name}:{}", self.level)
    }
}

impl std::str::FromStr for Variant {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<Variant> {
        let (family, level) =
            s.split_once(':').with_context(|| format!("--variant {s:?}: expected FAMILY:LEVEL, e.g. share:80"))?;
        let family = match family {
            "share" => Family::Share,
            "multi" => Family::Multi,
            "spec" => Family::Spec,
            "cpu" => Family::Cpu,
            _ => anyhow::bail!("--variant {s:?}: unknown family {family:?} (share, multi, spec or cpu)"),
        };
        let level: f64 = level
            .parse()
            .ok()
            .filter(|l: &f64| l.is_finite())
            .with_context(|| format!("--variant {s:?}: {level:?} is not a number"))?;
        let max = if family == Family::Cpu { 1000.0 } else { 100.0 };
        anyhow::ensure!(
            (0.0..=max).contains(&level) && !(family == Family::Multi && level >= 100.0),
            "--variant {s:?}: the level is a percentage (0-{max}{})",
            if family == Family::Multi { ", below 100" } else { "" }
        );
        Ok(Variant { family, level })
    }
}

fn is_cpu_only(p: &TracePod) -> bool {
    p.gpu_request_milli() == 0
}

fn is_multi(p: &TracePod) -> bool {
    p.num_gpu > 1 && !p.shares_gpu()
}

fn draw<'a>(rng: &mut SplitMix64, from: &[&'a TracePod]) -> &'a TracePod {
    from[rng.below(from.len())]
}

/// What a pod list is made of, as the variants measure it.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Composition {
    /// Pods.
    pub pods: usize,
    /// Pods without GPU.
    pub cpu_only: usize,
    /// % of the GPU request asked by sharing pods.
    pub share_pct: f64,
    /// % of the GPU request asked by multi-GPU pods.
    pub multi_pct: f64,
    /// % of the GPU pods restricted to GPU models.
    pub spec_pct: f64,
}

impl Composition {
    /// The composition of `pods`.
    pub fn of(pods: &[TracePod]) -> Composition {
        let request: i64 = pods.iter().map(TracePod::gpu_request_milli).sum();
        let of_request = |f: &dyn Fn(&TracePod) -> bool| -> f64 {
            let part: i64 = pods.iter().filter(|p| f(p)).map(TracePod::gpu_request_milli).sum();
            if request == 0 {
                0.0
            } else {
                100.0 * part as f64 / request as f64
            }
        };
        let gpu_pods = pods.iter().filter(|p| !is_cpu_only(p)).count();
        let restricted = pods.iter().filter(|p| !is_cpu_only(p) && !p.gpu_spec.is_empty()).count();
        Composition {
            pods: pods.len(),
            cpu_only: pods.len() - gpu_pods,
            share_pct: of_request(&TracePod::shares_gpu),
            multi_pct: of_request(&is_multi),
            spec_pct: if gpu_pods == 0 { 0.0 } else { 100.0 * restricted as f64 / gpu_pods as f64 },
        }
    }
}

impl fmt::Display for Composition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} pods ({} cpu-only); sharing pods ask {:.1}% of the GPU request, multi-GPU pods {:.1}%; {:.1}% of the GPU pods restricted to models",
            self.pods, self.cpu_only, self.share_pct, self.multi_pct, self.spec_pct
        )
    }
}

/// Resamples `pods` into `variant` with `seed`. `spec_source`, needed by the `spec` family
/// only, is a list whose pods carry the models the cluster restricted them to: where it has a
/// pod of the same name, that pod's restriction is the one kept; new restrictions are drawn
/// from its restricted pods asking for as many GPUs the same way (sharing or whole).
pub fn resample(
    pods: &[TracePod],
    variant: Variant,
    seed: u64,
    spec_source: Option<&[TracePod]>,
) -> anyhow::Result<Vec<TracePod>> {
    let mut rng = SplitMix64::new(seed);
    let x = variant.level / 100.0;
    let cpu_only: Vec<&TracePod> = pods.iter().filter(|p| is_cpu_only(p)).collect();
    let sharing: Vec<&TracePod> = pods.iter().filter(|p| p.shares_gpu()).collect();
    let whole: Vec<&TracePod> = pods.iter().filter(|p| !is_cpu_only(p) && !p.shares_gpu()).collect();
    let mut out: Vec<TracePod> = match variant.family {
        Family::Share => {
            anyhow::ensure!(
                (x == 0.0 || !sharing.is_empty()) && (x == 1.0 || !whole.is_empty()),
                "--variant {variant}: the list needs sharing and whole-GPU pods to draw from"
            );
            let mean =
                |v: &[&TracePod]| v.iter().map(|p| p.gpu_request_milli()).sum::<i64>() as f64 / v.len().max(1) as f64;
            let (ms, mw) = (mean(&sharing), mean(&whole));
            let n = sharing.len() + whole.len();
            // k sharing pods of mean request ms among n: k ms / (k ms + (n - k) mw) = x.
            let k = if x >= 1.0 { n } else { ((n as f64) * x * mw / (x * mw + (1.0 - x) * ms)).round() as usize };
            let mut out: Vec<TracePod> = cpu_only.iter().map(|p| (*p).clone()).collect();
            out.extend((0..k).map(|_| draw(&mut rng, &sharing).clone()));
            out.extend((k..n).map(|_| draw(&mut rng, &whole).clone()));
            out
        }
        Family::Multi => {
            let multi: Vec<&TracePod> = pods.iter().filter(|p| is_multi(p)).collect();
            anyhow::ensure!(!multi.is_empty(), "--variant {variant}: the list has no multi-GPU pod to draw from");
            let mut out: Vec<TracePod> = pods.to_vec();
            let request = |o: &[TracePod]| o.iter().map(TracePod::gpu_request_milli).sum::<i64>() as f64;
            let multi_request =
                |o: &[TracePod]| o.iter().filter(|p| is_multi(p)).map(TracePod::gpu_request_milli).sum::<i64>() as f64;
            while multi_request(&out) / request(&out) < x {
                out.push(draw(&mut rng, &multi).clone());
            }
            // Below the list's own share: drop multi-GPU pods at random until it is reached.
            while multi_request(&out) > 0.0 && multi_request(&out) / request(&out) > x {
                let at: Vec<usize> = (0..out.len()).filter(|&i| is_multi(&out[i])).collect();
                let drop = at[rng.below(at.len())];
                let p = out.remove(drop);
                if multi_request(&out) / request(&out) < x {
                    out.insert(drop, p);
                    break;
                }
            }
            out
        }
        Family::Spec => {
            let source = spec_source
                .context("--variant spec:X needs --variant-spec-source: a pod list with the models pods are restricted to (gpuspec33)")?;
            let by_name: BTreeMap<&str, &TracePod> = source.iter().map(|p| (p.name.as_str(), p)).collect();
            let kind = |p: &TracePod| (p.num_gpu, p.shares_gpu());
            let mut specs: BTreeMap<(i64, bool), Vec<&Vec<String>>> = BTreeMap::new();
            for p in source.iter().filter(|p| !is_cpu_only(p) && !p.gpu_spec.is_empty()) {
                specs.entry(kind(p)).or_default().push(&p.gpu_spec);
            }
            anyhow::ensure!(!specs.is_empty(), "--variant-spec-source: no pod of the list is restricted to GPU models");
            let mut out: Vec<TracePod> = pods
                .iter()
                .map(|p| {
                    let mut p = p.clone();
                    if p.gpu_spec.is_empty() {
                        if let Some(s) = by_name.get(p.name.as_str()).filter(|s| kind(s) == kind(&p)) {
                            p.gpu_spec = s.gpu_spec.clone();
                        }
                    }
                    p
                })
                .collect();
            let gpu: Vec<usize> = (0..out.len()).filter(|&i| !is_cpu_only(&out[i])).collect();
            let target = (x * gpu.len() as f64).round() as usize;
            let mut restricted: Vec<usize> = gpu.iter().copied().filter(|&i| !out[i].gpu_spec.is_empty()).collect();
            let mut free: Vec<usize> = gpu.iter().copied().filter(|&i| out[i].gpu_spec.is_empty()).collect();
            while restricted.len() > target {
                let i = restricted.swap_remove(rng.below(restricted.len()));
                out[i].gpu_spec.clear();
            }
            while restricted.len() < target && !free.is_empty() {
                let i = free.swap_remove(rng.below(free.len()));
                // A kind the source never restricted stays free: a drawn restriction must be
                // one a pod like it really had (an 8-GPU pod restricted to 2-GPU models would
                // fit nowhere).
                let Some(options) = specs.get(&kind(&out[i])) else { continue };
                out[i].gpu_spec = options[rng.below(options.len())].clone();
                restricted.push(i);
            }
            out
        }
        Family::Cpu => {
            let mut out: Vec<TracePod> = pods.iter().filter(|p| !is_cpu_only(p)).cloned().collect();
            let want = (x * cpu_only.len() as f64).round() as usize;
            let mut order: Vec<usize> = (0..cpu_only.len()).collect();
            for i in (1..order.len()).rev() {
                order.swap(i, rng.below(i + 1));
            }
            out.extend(order.iter().take(want).map(|&i| cpu_only[i].clone()));
            if want > cpu_only.len() {
                anyhow::ensure!(!cpu_only.is_empty(), "--variant {variant}: the list has no cpu-only pod to draw from");
                out.extend((cpu_only.len()..want).map(|_| draw(&mut rng, &cpu_only).clone()));
            }
            out
        }
    };
    // Pods drawn twice are two pods: names stay unique.
    let mut seen: HashSet<String> = HashSet::new();
    for p in &mut out {
        if !seen.insert(p.name.clone()) {
            let base = p.name.clone();
            let mut k = 2;
            while !seen.insert(format!("{base}-v{k}")) {
                k += 1;
            }
            p.name = format!("{base}-v{k}");
        }
    }
    Ok(out)
}

/// Writes a pod list in the trace's CSV format (times in the list's own units: seconds from
/// the trace's start).
pub fn write_csv(pods: &[TracePod], path: &std::path::Path) -> anyhow::Result<()> {
    let mut s = String::from("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n");
    let secs = |ms: Option<i64>| ms.map(|v| (v / 1000).to_string()).unwrap_or_default();
    for p in pods {
        s.push_str(&format!(
            "{},{},{},{},{},{},{},{},{},{},{}\n",
            p.name,
            p.cpu_milli,
            p.memory_mib,
            p.num_gpu,
            p.gpu_milli,
            p.gpu_spec.join("|"),
            p.qos,
            p.pod_phase,
            secs(p.creation_ms),
            secs(p.deletion_ms),
            secs(p.scheduled_ms)
        ));
    }
    std::fs::write(path, s).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, cpu: i64, num_gpu: i64, milli: i64, spec: &[&str]) -> TracePod {
        TracePod {
            name: name.into(),
            cpu_milli: cpu,
            memory_mib: 1024,
            num_gpu,
            gpu_milli: milli,
            gpu_spec: spec.iter().map(|s| s.to_string()).collect(),
            qos: String::new(),
            pod_phase: String::new(),
            creation_ms: Some(0),
            deletion_ms: None,
            scheduled_ms: None,
        }
    }

    /// 100 pods: 20 cpu-only, 40 sharing (500m), 36 whole single GPUs, 4 of 4 GPUs.
    fn list() -> Vec<TracePod> {
        let mut v = Vec::new();
        for i in 0..100 {
            let name = format!("p{i}");
            v.push(match i % 25 {
                0..=4 => pod(&name, 4000, 0, 0, &[]),
                5..=14 => pod(&name, 2000, 1, 500, &[]),
                15 => pod(&name, 16000, 4, 1000, &[]),
                _ => pod(&name, 8000, 1, 1000, &[]),
            });
        }
        v
    }

    #[test]
    fn variants_parse_and_refuse_nonsense() {
        assert_eq!("share:80".parse::<Variant>().unwrap(), Variant { family: Family::Share, level: 80.0 });
        assert_eq!("cpu:200".parse::<Variant>().unwrap().level, 200.0);
        for bad in ["share", "share:x", "gpu:50", "share:120", "multi:100", "spec:-1"] {
            assert!(bad.parse::<Variant>().is_err(), "{bad}");
        }
    }

    #[test]
    fn each_family_reaches_its_level_and_keeps_the_rest() {
        let base = list();
        let c = Composition::of(&base);
        assert_eq!((c.pods, c.cpu_only), (100, 20));
        // Without the 4-GPU pods every whole pod asks the same, so the count of sharing pods
        // alone decides the share: it must land within one pod's request of the target.
        let singles: Vec<TracePod> = base.iter().filter(|p| p.num_gpu <= 1).cloned().collect();
        for level in [30.0, 60.0, 90.0] {
            let v = resample(&singles, Variant { family: Family::Share, level }, 7, None).unwrap();
            let c = Composition::of(&v);
            assert_eq!((c.pods, c.cpu_only), (96, 20), "share:{level} keeps the pod count and the cpu-only pods");
            assert!((c.share_pct - level).abs() < 2.0, "share:{level} gave {c}");
        }
        let v = resample(&base, Variant { family: Family::Multi, level: 40.0 }, 7, None).unwrap();
        let c = Composition::of(&v);
        assert!(c.multi_pct >= 40.0 && c.pods > 100, "{c}");
        assert!(base.iter().all(|p| v.iter().any(|q| q == p)), "multi: every original pod stays");
        let v = resample(&base, Variant { family: Family::Multi, level: 5.0 }, 7, None).unwrap();
        let c = Composition::of(&v);
        // Down from the list's 22.2%: multi-GPU pods leave until one more would take it
        // below 5% (one 4-GPU pod is 6.7% of what is left).
        assert!(c.multi_pct >= 5.0 && c.multi_pct < 10.0 && c.pods == 97, "{c}");
        let v = resample(&base, Variant { family: Family::Cpu, level: 250.0 }, 7, None).unwrap();
        assert_eq!(Composition::of(&v).cpu_only, 50);
        let v = resample(&base, Variant { family: Family::Cpu, level: 50.0 }, 7, None).unwrap();
        assert_eq!((Composition::of(&v).cpu_only, v.len()), (10, 90));
        let names: HashSet<&str> = v.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names.len(), v.len(), "names stay unique");
    }

    #[test]
    fn restrictions_come_from_the_source_and_fit_the_pod() {
        let base = list();
        // The source restricts the first sharing pods to T4 and the 4-GPU pods to G2.
        let source: Vec<TracePod> = base
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let mut p = p.clone();
                if p.shares_gpu() && i < 40 {
                    p.gpu_spec = vec!["T4".into()];
                }
                if p.num_gpu == 4 {
                    p.gpu_spec = vec!["G2".into()];
                }
                p
            })
            .collect();
        let source_pct = Composition::of(&source).spec_pct;
        for level in [5.0, 50.0] {
            let v = resample(&base, Variant { family: Family::Spec, level }, 3, Some(&source)).unwrap();
            let c = Composition::of(&v);
            assert!((c.spec_pct - level).abs() < 1.3, "spec:{level} gave {c} (source {source_pct})");
            for p in v.iter().filter(|p| !p.gpu_spec.is_empty()) {
                let want = if p.num_gpu == 4 { "G2" } else { "T4" };
                assert_eq!(p.gpu_spec, [want], "{} got a restriction of another kind of pod", p.name);
            }
        }
        // Whole single-GPU pods were never restricted in the source, so they stay free.
        let v = resample(&base, Variant { family: Family::Spec, level: 90.0 }, 3, Some(&source)).unwrap();
        assert!(v.iter().filter(|p| p.num_gpu == 1 && !p.shares_gpu()).all(|p| p.gpu_spec.is_empty()));
        assert!(resample(&base, Variant { family: Family::Spec, level: 20.0 }, 3, None).is_err());
    }

    #[test]
    fn a_seed_names_one_list() {
        let base = list();
        let v = Variant { family: Family::Share, level: 70.0 };
        let a = resample(&base, v, 11, None).unwrap();
        assert_eq!(a, resample(&base, v, 11, None).unwrap());
        assert_ne!(a, resample(&base, v, 12, None).unwrap());
        // Pinned: the first drawn GPU pods of seed 11 (a change here changes every variant).
        let first: Vec<&str> = a[20..26].iter().map(|p| p.name.as_str()).collect();
        assert_eq!(first, PINNED_SHARE70_SEED11);
    }

    const PINNED_SHARE70_SEED11: [&str; 6] = ["p32", "p30", "p60", "p55", "p11", "p57"];
}
