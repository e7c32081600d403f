//! `ksched bench --mode trace` and `--mode trace-time` on the committed small trace
//! (`tests/data/trace-small`): the command a user runs, its table, results.json and plots, the
//! refusal of a malformed trace or a mismatched policy, and traces as users export them.
//!
//! The figures are checked against what they are computed from (the per-seed values, the
//! per-pod waits, the trace itself), recomputed here independently of `report.rs`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/trace-small")
}

fn policy_config() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/gpu-sharing/scheduler-config.yaml")
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ksched-trace-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn ksched(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ksched")).args(args).output().expect("running ksched")
}

fn text(o: &Output) -> String {
    format!("{}\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// `ksched bench --mode MODE --trace-nodes NODES --trace-pods PODS --out OUT` and `extra`.
fn bench(mode: &str, nodes: &Path, pods: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "bench",
        "--mode",
        mode,
        "--trace-nodes",
        nodes.to_str().unwrap(),
        "--trace-pods",
        pods.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    ksched(&args)
}

fn results(out: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(out.join("results.json")).unwrap()).unwrap()
}

/// numpy's default quantile (linear interpolation between the order statistics, R's type 7):
/// the value at rank `q * (n - 1)` of the sorted values.
fn np_quantile(values: &[f64], q: f64) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let rank = q * (v.len() - 1) as f64;
    let below = rank.floor() as usize;
    match v.get(below + 1) {
        Some(next) => v[below] + (next - v[below]) * (rank - below as f64),
        None => v[below],
    }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// The pod list's columns by name, one map per row (the committed files have no quotes).
fn csv_rows(path: &Path) -> Vec<HashMap<String, String>> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    lines.map(|l| header.iter().map(|h| h.to_string()).zip(l.split(',').map(str::to_string)).collect()).collect()
}

#[test]
fn np_quantile_is_numpys() {
    // numpy.quantile([1, 2, 3, 4], [0.25, 0.5, 0.75]) = [1.75, 2.5, 3.25]; of [5] anything is 5.
    assert_eq!(np_quantile(&[4.0, 1.0, 3.0, 2.0], 0.25), 1.75);
    assert_eq!(np_quantile(&[4.0, 1.0, 3.0, 2.0], 0.5), 2.5);
    assert_eq!(np_quantile(&[4.0, 1.0, 3.0, 2.0], 0.75), 3.25);
    assert_eq!(np_quantile(&[5.0], 0.75), 5.0);
    // numpy.quantile([10, 20, 40], 0.99) = 39.6
    assert!((np_quantile(&[40.0, 10.0, 20.0], 0.99) - 39.6).abs() < 1e-9);
}

#[test]
fn trace_mode_figures_follow_from_the_seeds_and_the_table_prints_them() {
    let out = tmp("paper");
    let cfg = out.join("packing.yaml");
    std::fs::write(
        &cfg,
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: my-scheduler\n  pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      scoringStrategy:\n        type: MostAllocated\n",
    )
    .unwrap();
    let mine = format!("mine={}", cfg.display());
    let (nodes, pods) = (data().join("nodes.csv"), data().join("pods.csv"));
    let o =
        bench("trace", &nodes, &pods, &out, &["--seeds", "1-4", "--profiles", "default,bestfit", "--config", &mine]);
    let all = text(&o);
    assert!(o.status.success(), "{all}");
    let r = results(&out);
    assert_eq!(r["gpus"], 22);
    assert_eq!(r["seeds"], serde_json::json!([1, 2, 3, 4]));
    let profiles = r["profiles"].as_array().unwrap();
    assert_eq!(
        profiles.iter().map(|p| p["name"].as_str().unwrap()).collect::<Vec<_>>(),
        ["default", "bestfit", "mine"]
    );
    let capacity = 22_000.0;
    let points = ["90", "95", "100", "110", "120", "130"];
    // Per seed, what every profile must agree on: the sequence's length and its GPU demand.
    let mut per_seed: HashMap<u64, (u64, f64)> = HashMap::new();
    for p in profiles {
        let seeds = p["seeds"].as_array().unwrap();
        assert_eq!(seeds.len(), 4);
        for s in seeds {
            let pods = s["pods"].as_u64().unwrap();
            assert_eq!(s["placed"].as_u64().unwrap() + s["failed_pods"].as_u64().unwrap(), pods, "{s}");
            let demand = f(&s["final_alloc_pct"]) * capacity / 100.0 + f(&s["failed_gpu_milli"]);
            let seen = per_seed.entry(s["seed"].as_u64().unwrap()).or_insert((pods, demand));
            assert_eq!(seen.0, pods, "{} seed {}: another sequence than another profile's", p["name"], s["seed"]);
            // final_alloc_pct is rounded to 0.01% of the capacity: 1.1 milli either way.
            let rounding = capacity * 0.005 / 100.0 + 1e-6;
            assert!(
                (seen.1 - demand).abs() <= 2.0 * rounding,
                "{} seed {}: demand {demand} against {}",
                p["name"],
                s["seed"],
                seen.1
            );
            // The sequence's demand crosses 130% of the capacity at its last pod (a pod asks 4 GPUs at most).
            assert!(demand >= 1.3 * capacity - rounding && demand < 1.3 * capacity + 4000.0 + rounding, "{s}");
            // Each point's allocation is the seed's curve at that arrived percent.
            let curve: Vec<f64> = s["curve"].as_array().unwrap().iter().map(f).collect();
            assert!(curve.len() >= 131, "{s}");
            for k in points {
                let i: usize = k.parse().unwrap();
                assert_eq!(f(&s["alloc_pct"][k]), round2(curve[i]), "{} seed {} at {k}%", p["name"], s["seed"]);
            }
            assert!(curve.windows(2).all(|w| w[0] <= w[1]), "allocation never drops without departures: {curve:?}");
        }
        // The medians and quartiles are numpy's over the seeds.
        for k in points {
            let xs: Vec<f64> = seeds.iter().map(|s| f(&s["alloc_pct"][k])).collect();
            let (q1, med, q3) = (np_quantile(&xs, 0.25), np_quantile(&xs, 0.5), np_quantile(&xs, 0.75));
            let name = &p["name"];
            assert_eq!(f(&p["median_alloc_pct"][k]), round2(med), "{name} median at {k}%: {xs:?}");
            assert_eq!(f(&p["q1_alloc_pct"][k]), round2(q1), "{name} Q1 at {k}%: {xs:?}");
            assert_eq!(f(&p["q3_alloc_pct"][k]), round2(q3), "{name} Q3 at {k}%: {xs:?}");
            assert!((f(&p["iqr_alloc_pct"][k]) - (q3 - q1)).abs() <= 0.005 + 1e-9, "{name} IQR at {k}%: {xs:?}");
        }
        let failed: Vec<f64> = seeds.iter().map(|s| f(&s["failed_pods"])).collect();
        assert_eq!(f(&p["median_failed_pods"]), np_quantile(&failed, 0.5));
        let failed_gpus: Vec<f64> = seeds.iter().map(|s| f(&s["failed_gpu_milli"]) / 1000.0).collect();
        assert_eq!(f(&p["median_failed_gpus"]), round2(np_quantile(&failed_gpus, 0.5)));
        let curves: Vec<Vec<f64>> =
            seeds.iter().map(|s| s["curve"].as_array().unwrap().iter().map(f).collect()).collect();
        let median_curve: Vec<f64> = p["median_curve"].as_array().unwrap().iter().map(f).collect();
        assert_eq!(median_curve.len(), curves.iter().map(Vec::len).min().unwrap());
        for (i, m) in median_curve.iter().enumerate() {
            assert_eq!(*m, round2(np_quantile(&curves.iter().map(|c| c[i]).collect::<Vec<_>>(), 0.5)), "{i}%");
        }
        assert!(p["config"]["profiles"].is_array(), "the configuration used is recorded");
    }
    assert_eq!(profiles[2]["config"]["profiles"][0]["schedulerName"], "my-scheduler");

    // The table prints the JSON's figures: each cell "median (IQR)", then the failed pods and GPUs.
    let stdout = String::from_utf8_lossy(&o.stdout);
    let mut lines = stdout.lines();
    assert!(lines.next().unwrap().starts_with("GPU allocation (% of capacity) at arrived demand"), "{stdout}");
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(header[..7], ["PROFILE", "@90%", "@95%", "@100%", "@110%", "@120%", "@130%"], "{stdout}");
    for p in profiles {
        let name = p["name"].as_str().unwrap();
        let row = stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no row {name}"));
        let cells: Vec<&str> = row.split_whitespace().collect();
        for (i, k) in points.iter().enumerate() {
            let (m, iqr) = (cells[1 + 2 * i], cells[2 + 2 * i]);
            assert_eq!(m, format!("{:.2}", f(&p["median_alloc_pct"][*k])), "{name} @{k}%: {row}");
            assert_eq!(iqr, format!("({:.2})", f(&p["iqr_alloc_pct"][*k])), "{name} @{k}%: {row}");
        }
        assert_eq!(cells[13].parse::<f64>().unwrap(), f(&p["median_failed_pods"]), "{row}");
        assert_eq!(cells[14], format!("{:.1}", f(&p["median_failed_gpus"])), "{row}");
    }
    let svg = std::fs::read_to_string(out.join("unallocated-gpu.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("bestfit"), "{}", &svg[..200.min(svg.len())]);
    std::fs::remove_dir_all(&out).ok();
}

/// The repository's policy (`examples/gpu-sharing/scheduler-config.yaml`, the configuration every
/// published figure of the policy comes from) on the small trace, pinned exactly: the replay is
/// deterministic given the seed. These values change whenever the policy changes (the
/// configuration, DeviceFragmentation, the allocator's best fit): re-derive them then,
/// deliberately, from a run of the command below, and say in the commit why they moved.
///
/// On this trace every GPU pod but the T4 ones fits one node only, so what the pin sees is how
/// the policy packs the T4 halves (its best-fit tie-break, the allocator) and where it puts
/// the cpu-only pods; the measure's finer costs never decide here (a build scoring by best
/// fit alone gives the same allocations on seeds 1-200). The replay test
/// `the_policy_avoids_stranding_gpus_where_bestfit_and_least_allocated_do_not` covers those.
#[test]
fn the_policy_replays_the_small_trace_exactly() {
    let out = tmp("policy");
    let (nodes, pods) = (data().join("nodes.csv"), data().join("pods.csv"));
    let policy = format!("policy={}", policy_config().display());
    // Seeds where the policy's placements differ from the default profile's (on many seeds of
    // this small trace they coincide: most of its GPU pods fit one node only).
    let o = bench(
        "trace",
        &nodes,
        &pods,
        &out,
        &["--seeds", "4,22,26", "--profiles", "default,bestfit", "--config", &policy],
    );
    assert!(o.status.success(), "{}", text(&o));
    let r = results(&out);
    let (default, bestfit, policy) = (&r["profiles"][0], &r["profiles"][1], &r["profiles"][2]);
    assert_eq!(policy["name"], "policy");
    assert_eq!(policy["source"], policy_config().display().to_string());
    let pinned = PINNED_POLICY;
    assert_eq!(policy["seeds"].as_array().unwrap().len(), pinned.len());
    for (s, pin) in policy["seeds"].as_array().unwrap().iter().zip(pinned) {
        let Pinned { seed, pods, failed_pods, failed_gpu_milli, final_alloc, alloc } = *pin;
        assert_eq!(s["seed"], seed);
        assert_eq!(
            (s["pods"].as_u64().unwrap(), s["failed_pods"].as_u64().unwrap(), s["failed_gpu_milli"].as_i64().unwrap()),
            (pods, failed_pods, failed_gpu_milli),
            "seed {seed}: {s}"
        );
        assert_eq!(f(&s["final_alloc_pct"]), final_alloc, "seed {seed}: {s}");
        let got: Vec<f64> = ["90", "95", "100", "110", "120", "130"].iter().map(|k| f(&s["alloc_pct"][k])).collect();
        assert_eq!(got, alloc, "seed {seed}: {s}");
    }
    // Not pinned: on the same sequences the policy allocates at least what the default
    // profile and bestfit do at every point (it keeps the T4 halves together, where the
    // default profile spreads them, and off the GPUs whole-GPU pods need).
    for baseline in [default, bestfit] {
        for (p, d) in policy["seeds"].as_array().unwrap().iter().zip(baseline["seeds"].as_array().unwrap()) {
            assert_eq!(p["pods"], d["pods"], "the same sequence");
            for k in ["90", "95", "100", "110", "120", "130"] {
                assert!(
                    f(&p["alloc_pct"][k]) >= f(&d["alloc_pct"][k]),
                    "seed {} at {k}%: {p} against {} {d}",
                    p["seed"],
                    baseline["name"]
                );
            }
        }
    }
    std::fs::remove_dir_all(&out).ok();
}

/// One seed of the policy on the small trace.
#[derive(Clone, Copy)]
struct Pinned {
    seed: u64,
    /// Pods of the sequence.
    pods: u64,
    failed_pods: u64,
    failed_gpu_milli: i64,
    /// Allocation (%) once every pod was tried.
    final_alloc: f64,
    /// Allocation (%) at 90, 95, 100, 110, 120 and 130% arrived.
    alloc: [f64; 6],
}

const PINNED_POLICY: &[Pinned] = &[
    Pinned {
        seed: 4,
        pods: 30,
        failed_pods: 10,
        failed_gpu_milli: 11_600,
        final_alloc: 77.27,
        alloc: [63.64, 65.91, 75.0, 75.0, 75.0, 77.27],
    },
    Pinned {
        seed: 22,
        pods: 34,
        failed_pods: 14,
        failed_gpu_milli: 11_600,
        final_alloc: 77.27,
        alloc: [75.0, 75.0, 75.0, 75.0, 75.0, 77.27],
    },
    Pinned {
        seed: 26,
        pods: 30,
        failed_pods: 9,
        failed_gpu_milli: 14_300,
        final_alloc: 77.27,
        alloc: [50.91, 52.27, 61.36, 63.64, 77.27, 77.27],
    },
];

#[test]
fn a_malformed_trace_is_refused_with_file_line_and_column() {
    let out = tmp("bad");
    let nodes = data().join("nodes.csv");
    for (rows, want) in [
        (
            "openb-pod-0,1000,1024,1,500\nopenb-pod-1,1000,lots,1,500\n",
            ":3: column \"memory_mib\": invalid value \"lots\"",
        ),
        (
            "openb-pod-0,1000,1024,1,500\nopenb-pod-1,6000.5,1024,1,500\n",
            ":3: column \"cpu_milli\": invalid value \"6000.5\": expected an integer: it has a fractional part",
        ),
    ] {
        let pods = out.join("pods.csv");
        std::fs::write(&pods, format!("name,cpu_milli,memory_mib,num_gpu,gpu_milli\n{rows}")).unwrap();
        let o = bench("trace", &nodes, &pods, &out, &[]);
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(&format!("{}{want}", pods.display())), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    std::fs::remove_dir_all(&out).ok();
}

#[test]
fn trace_time_figures_follow_from_the_waits_and_the_checks_are_reported() {
    let out = tmp("time");
    let (nodes, pods) = (data().join("nodes.csv"), data().join("pods.csv"));
    let o = bench(
        "trace-time",
        &nodes,
        &pods,
        &out,
        &["--speedup", "1", "--profiles", "default,bestfit", "--check-every", "7"],
    );
    let all = text(&o);
    assert!(o.status.success(), "{all}");
    let rows = csv_rows(&pods);
    let by_name: HashMap<&str, &HashMap<String, String>> = rows.iter().map(|r| (r["name"].as_str(), r)).collect();
    let gpu_milli = |name: &str| -> f64 {
        let r = by_name[name];
        r["num_gpu"].parse::<f64>().unwrap() * r["gpu_milli"].parse::<f64>().unwrap()
    };
    let r = results(&out);
    assert_eq!(r["pods_without_deletion_time"], 0);
    let p = r["profiles"].as_array().unwrap();
    assert_eq!(p.len(), 2);
    let stdout = String::from_utf8_lossy(&o.stdout);
    for x in p {
        let name = x["name"].as_str().unwrap();
        let end = f(&x["end_s"]);
        let bound = x["pods_bound"].as_array().unwrap();
        assert_eq!(bound.len(), rows.len());
        let mut waits = Vec::new();
        let mut gpu_hours = 0.0;
        for b in bound {
            let pod = b[0].as_str().unwrap();
            // Speedup 1: each pod arrives at its creation_time.
            assert_eq!(f(&b[1]), by_name[pod]["creation_time"].parse::<f64>().unwrap(), "{name} {b}");
            let wait = b[2].as_f64().unwrap_or(end) - f(&b[1]);
            assert!(wait >= 0.0, "{name} {b}");
            gpu_hours += gpu_milli(pod) / 1000.0 * wait / 3600.0;
            waits.push(wait);
        }
        assert_eq!(x["pods"], rows.len());
        assert_eq!(x["never_scheduled"], bound.iter().filter(|b| b[2].is_null()).count());
        assert_eq!(x["scheduled"], bound.iter().filter(|b| !b[2].is_null()).count());
        assert_eq!(x["pods_that_waited"], waits.iter().filter(|w| **w > 0.0).count(), "{name}");
        let close = |key: &str, want: f64| {
            assert!(
                (f(&x[key]) - want).abs() <= 0.005 + 1e-9,
                "{name} {key}: {} against {want} from {waits:?}",
                x[key]
            );
        };
        close("pending_p50_s", np_quantile(&waits, 0.5));
        close("pending_p90_s", np_quantile(&waits, 0.9));
        close("pending_p99_s", np_quantile(&waits, 0.99));
        close("pending_max_s", waits.iter().copied().fold(0.0, f64::max));
        close("pending_gpu_hours", gpu_hours);
        // The peak is the highest allocation of the timeline, and its state was checked.
        let timeline: Vec<(f64, f64)> =
            x["timeline"].as_array().unwrap().iter().map(|t| (f(&t[0]), f(&t[1]))).collect();
        let peak = timeline.iter().map(|t| t.1).fold(0.0, f64::max);
        close("peak_alloc_pct", peak);
        let i = timeline.iter().position(|t| t.1 == peak).unwrap();
        assert_eq!(timeline[i].0, f(&x["peak_alloc_s"]), "{name}: when the peak was reached");
        let drop = timeline[i..].iter().find(|t| t.1 != peak).unwrap();
        assert!(drop.1 < peak);
        assert_eq!(
            drop.0,
            f(&x["peak_check_s"]),
            "{name}: the peak's state is checked as the allocation drops from it"
        );
        // Every pod arrived and left: 2 events each, a periodic check every 7, the peak's and
        // the end's.
        assert_eq!(x["never_scheduled"], 0);
        assert_eq!(x["check_every"], 7);
        assert_eq!(x["accounting_checks"], 2 * rows.len() / 7 + 2, "{name}");
        // The table prints the JSON's figures.
        let row = stdout.lines().find(|l| l.split_whitespace().next() == Some(name)).unwrap();
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(
            cells[1..4],
            [x["pods"].to_string(), x["pods_that_waited"].to_string(), x["never_scheduled"].to_string()]
        );
        assert_eq!(cells[4], format!("{:.0}s", f(&x["pending_p50_s"])), "{row}");
        assert_eq!(cells[5], format!("{:.0}s", f(&x["pending_p99_s"])), "{row}");
        assert_eq!(cells[7], format!("{:.1}", f(&x["pending_gpu_hours"])), "{row}");
        assert_eq!(cells[8], format!("{:.2}%", f(&x["peak_alloc_pct"])), "{row}");
    }
    // With the default profile the two half T4s land on different nodes and the two-T4 pod
    // waits for them to leave; bestfit puts them together (docs/placement-quality.md).
    assert!(f(&p[1]["pending_gpu_hours"]) < f(&p[0]["pending_gpu_hours"]), "bestfit waits less: {all}");
    assert!(std::fs::read_to_string(out.join("gpu-allocation-over-time.svg")).unwrap().starts_with("<svg"));
    assert!(stdout.contains("P99 WAIT") && stdout.contains("GPU-H WAIT"), "{stdout}");
    // The five-column lists have no times: the timed mode refuses them.
    let short = out.join("short.csv");
    std::fs::write(&short, "name,cpu_milli,memory_mib,num_gpu,gpu_milli\nopenb-pod-0,1000,1024,1,500\n").unwrap();
    let o = bench("trace-time", &nodes, &short, &out, &[]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("pod openb-pod-0: --mode trace-time needs creation_time"),
        "{}",
        text(&o)
    );
    std::fs::remove_dir_all(&out).ok();
}

/// A pod list as users export it: floats in integer columns, ISO-8601 times with offsets and
/// fractions, a pod recreated under its name, a pod still running when the export was taken,
/// a `gpu_spec` naming a model this cluster lacks.
const EXPORTED: &str = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,creation_time,deletion_time\n\
    train-a,4000.0,8192.0,1.0,1000.0,T4,2023-05-01T12:00:00Z,2023-05-01T12:10:00Z\n\
    share-b,2000,4096,1,500,A100|T4,2023-05-01T14:00:05+02:00,2023-05-01T12:20:00.500Z\n\
    train-a,4000,8192,1,1000,T4,2023-05-01T12:30:00Z,2023-05-01T12:40:00Z\n\
    serve-c,2000,4096,1,250,,2023-05-01T12:01:00Z,\n\
    h100-d,2000,4096,1,1000,H100,2023-05-01T12:02:00Z,2023-05-01T12:03:00Z\n";

#[test]
fn traces_as_users_export_them_load_and_what_was_decided_is_said() {
    let out = tmp("exported");
    let nodes = data().join("nodes.csv");
    let pods = out.join("exported.csv");
    std::fs::write(&pods, EXPORTED).unwrap();
    let o =
        bench("trace-time", &nodes, &pods, &out, &["--speedup", "1", "--profiles", "default", "--check-every", "1"]);
    let all = text(&o);
    assert!(o.status.success(), "{all}");
    let err = String::from_utf8_lossy(&o.stderr);
    let file = pods.display().to_string();
    for said in [
        format!("{file}: times read as ISO-8601 date-times (--time-unit auto: line 2, column \"creation_time\": \"2023-05-01T12:00:00Z\")"),
        format!("{file}: 1 row(s) reuse the name of an earlier pod (1 name(s)): each row is its own pod (recreated), renamed with a suffix -r2, -r3, ... (the first: line 4, \"train-a\" as \"train-a-r2\")"),
        format!("{file}: warning: gpu_spec names GPU model(s) no node has (the nodes have G2, P100, T4, V100M32): A100 (line 3), H100 (line 6); those pods cannot use them, and 1 of them accept no model of the nodes, so they fit nowhere and count as failed demand (line 6)"),
        format!("{file}: 1 pod(s) have no deletion_time (still running when the trace ended): once bound they stay until the end of the replay (serve-c)"),
    ] {
        assert!(err.contains(&said), "missing {said:?} in:\n{err}");
    }
    let r = results(&out);
    assert_eq!(r["pods_without_deletion_time"], 1);
    let x = &r["profiles"][0];
    assert_eq!(x["pods"], 5);
    let bound: HashMap<&str, (f64, Option<f64>)> = x["pods_bound"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b[0].as_str().unwrap(), (f(&b[1]), b[2].as_f64())))
        .collect();
    // Virtual time 0 is the first creation (12:00:00Z); share-b was created at 12:00:05Z.
    assert_eq!(bound["train-a"], (0.0, Some(0.0)));
    assert_eq!(bound["share-b"], (5.0, Some(5.0)));
    assert_eq!(bound["train-a-r2"], (1800.0, Some(1800.0)));
    assert_eq!(bound["serve-c"], (60.0, Some(60.0)));
    // The H100 pod fits nowhere: it waits until the end and counts as never scheduled.
    assert_eq!(bound["h100-d"], (120.0, None));
    assert_eq!(x["never_scheduled"], 1);
    // serve-c never leaves: the allocation ends at its quarter of a GPU.
    let last = x["timeline"].as_array().unwrap().last().unwrap().clone();
    assert!((f(&last[1]) - 250.0 * 100.0 / 22_000.0).abs() < 1e-9, "{last}");
    // Five arrivals, three departures, one check after each, the peak's (1750 milli from
    // t=60 s until train-a leaves at 600 s) and the end's.
    assert_eq!(x["peak_check_s"].as_f64(), Some(600.0));
    assert_eq!(x["accounting_checks"], 10);

    // The paper's mode ignores times but reads the same file, with the same notes.
    let o = bench("trace", &nodes, &pods, &out, &["--seeds", "1", "--profiles", "default"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("warning: gpu_spec names GPU model(s) no node has"),
        "{}",
        text(&o)
    );

    // Told the wrong unit, or given times written two ways: refused with the line.
    let o = bench("trace-time", &nodes, &pods, &out, &["--time-unit", "s"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("{file}:2: column \"creation_time\": invalid value \"2023-05-01T12:00:00Z\": expected a number of seconds (--time-unit s)")),
        "{err}"
    );
    std::fs::write(&pods, EXPORTED.replace("2023-05-01T12:30:00Z", "1682944200")).unwrap();
    let o = bench("trace-time", &nodes, &pods, &out, &[]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&format!("{file}:4: column \"creation_time\": invalid value \"1682944200\": a number, but line 2 (column \"creation_time\") has an ISO-8601 time with an offset")), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    std::fs::remove_dir_all(&out).ok();
}

#[test]
fn a_policy_for_another_device_class_or_capacity_is_refused() {
    let out = tmp("class");
    let (nodes, pods) = (data().join("nodes.csv"), data().join("pods.csv"));
    let policy = std::fs::read_to_string(policy_config()).unwrap();
    for (from, to, want) in [
        (
            "deviceClassName: gpu.ksched.dev",
            "deviceClassName: gpu.example.com",
            "DeviceFragmentation measures DeviceClass \"gpu.example.com\", but the replay's GPUs are in DeviceClass \"gpu.ksched.dev\"",
        ),
        (
            "capacity: milligpu",
            "capacity: memory",
            "DeviceFragmentation measures the consumable capacity \"memory\", but the replay's GPUs share their capacity \"milligpu\"",
        ),
    ] {
        assert!(policy.contains(from), "the example changed: {from:?} is gone");
        let cfg = out.join("mine.yaml");
        std::fs::write(&cfg, policy.replace(from, to)).unwrap();
        let arg = format!("mine={}", cfg.display());
        for mode in ["trace", "trace-time"] {
            let o = bench(mode, &nodes, &pods, &out, &["--profiles", "none", "--config", &arg, "--seeds", "1"]);
            assert!(!o.status.success(), "{mode}: {}", text(&o));
            let err = String::from_utf8_lossy(&o.stderr);
            let head = format!("{}: profile \"mine\" (schedulerName \"default-scheduler\"): {want}", cfg.display());
            assert!(err.contains(&head), "{mode}: expected {head:?} in:\n{err}");
        }
    }
    std::fs::remove_dir_all(&out).ok();
}

#[test]
fn hindsight_is_reported_beside_the_profiles_and_alone() {
    let (nodes, pods) = (data().join("nodes.csv"), data().join("pods.csv"));
    let out = tmp("hindsight");
    let o = bench("trace", &nodes, &pods, &out, &["--seeds", "1-4", "--profiles", "none", "--hindsight"]);
    let all = text(&o);
    assert!(o.status.success(), "{all}");
    let r = results(&out);
    assert_eq!(r["profiles"].as_array().unwrap().len(), 0, "only the packing was asked for");
    let h = &r["hindsight"];
    let seeds = h["seeds"].as_object().unwrap();
    assert_eq!(seeds.keys().collect::<Vec<_>>(), ["1", "2", "3", "4"]);
    let row = all.lines().find(|l| l.starts_with("(hindsight)")).unwrap_or_else(|| panic!("no table row: {all}"));
    for (k, point) in ["90", "100", "130"].iter().zip([90.0, 100.0, 130.0]) {
        let xs: Vec<f64> = seeds.values().map(|s| f(&s[*k])).collect();
        for x in &xs {
            // Never more than arrived, nor than the capacity.
            assert!(*x > 0.0 && *x <= f64::min(point, 100.0) + 1e-9, "@{k}%: {x}");
        }
        let median = round2(np_quantile(&xs, 0.5));
        assert_eq!(f(&h["median_alloc_pct"][*k]), median, "@{k}%");
        assert!(row.contains(&format!("{median:.2} (")), "{row}");
    }
    // Without the flag there is no such entry.
    let out = tmp("no-hindsight");
    let o = bench("trace", &nodes, &pods, &out, &["--seeds", "1", "--profiles", "default"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(results(&out).get("hindsight").is_none());
    assert!(!text(&o).contains("(hindsight)"));
    // Nothing to replay and no packing asked for: refused as before.
    let o = bench("trace", &nodes, &pods, &out, &["--seeds", "1", "--profiles", "none"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("no profile to replay"), "{}", text(&o));
}

#[test]
fn the_bound_is_above_every_profile_and_the_packing_seed_by_seed() {
    let (nodes, pods) = (data().join("nodes.csv"), data().join("pods.csv"));
    let out = tmp("bound");
    let args = ["--seeds", "1-4", "--profiles", "default,fgd-fixed-order", "--hindsight", "--bound"];
    let o = bench("trace", &nodes, &pods, &out, &args);
    let all = text(&o);
    assert!(o.status.success(), "{all}");
    let r = results(&out);
    let b = &r["bound"];
    assert!(all.lines().any(|l| l.starts_with("(bound)")), "no table row: {all}");
    for (seed, at) in b["seeds"].as_object().unwrap() {
        let want: u64 = seed.parse().unwrap();
        for k in ["90", "100", "130"] {
            let bound = f(&at[k]);
            // (The pod that reaches a point may take the arrived demand well past it on this
            // small cluster, so only the capacity bounds it.)
            assert!(bound <= 100.0 + 0.01, "seed {seed} @{k}%: {bound} above the capacity");
            let mut others = vec![f(&r["hindsight"]["seeds"][seed][k])];
            for p in r["profiles"].as_array().unwrap() {
                let s = p["seeds"].as_array().unwrap().iter().find(|s| s["seed"].as_u64() == Some(want)).unwrap();
                others.push(f(&s["alloc_pct"][k]));
            }
            for x in others {
                assert!(x <= bound + 0.01, "seed {seed} @{k}%: {x} above the bound {bound}");
            }
        }
    }
    // The exact values are the unit tests' (`bound.rs`); without the flag there is no entry.
    assert!(r.get("bound").is_some());
    let out = tmp("no-bound");
    let o = bench("trace", &nodes, &pods, &out, &["--seeds", "1", "--profiles", "none", "--hindsight"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(results(&out).get("bound").is_none());
    assert!(!text(&o).contains("(bound)"));
}
