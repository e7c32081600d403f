//! `ksched bench --mode trace` and `--mode trace-time` on the committed small trace
//! (`tests/data/trace-small`): the command a user runs, its table, results.json and plots, and
//! the refusal of a malformed trace.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/trace-small")
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

#[test]
fn trace_mode_compares_profiles_over_seeds() {
    let out = tmp("paper");
    let cfg = out.join("packing.yaml");
    std::fs::write(
        &cfg,
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: my-scheduler\n  pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      scoringStrategy:\n        type: MostAllocated\n",
    )
    .unwrap();
    let (nodes, pods) = (data().join("nodes.csv"), data().join("pods.csv"));
    let o = ksched(&[
        "bench",
        "--mode",
        "trace",
        "--trace-nodes",
        nodes.to_str().unwrap(),
        "--trace-pods",
        pods.to_str().unwrap(),
        "--seeds",
        "1-3",
        "--profiles",
        "default,bestfit",
        "--config",
        &format!("mine={}", cfg.display()),
        "--out",
        out.to_str().unwrap(),
    ]);
    let all = text(&o);
    assert!(o.status.success(), "{all}");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("PROFILE") && stdout.contains("@100%") && stdout.contains("@130%"), "{stdout}");
    for p in ["default", "bestfit", "mine"] {
        assert!(stdout.lines().any(|l| l.starts_with(p)), "no row for {p}:\n{stdout}");
    }
    let r: Value = serde_json::from_slice(&std::fs::read(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(r["gpus"], 22);
    assert_eq!(r["seeds"], serde_json::json!([1, 2, 3]));
    let profiles = r["profiles"].as_array().unwrap();
    assert_eq!(profiles.len(), 3);
    let capacity = 22_000.0;
    for p in profiles {
        let seeds = p["seeds"].as_array().unwrap();
        assert_eq!(seeds.len(), 3);
        for s in seeds {
            // Every pod is placed or failed; the sequence reached 130% of capacity.
            assert_eq!(s["placed"].as_u64().unwrap() + s["failed_pods"].as_u64().unwrap(), s["pods"].as_u64().unwrap());
            let allocated = s["final_alloc_pct"].as_f64().unwrap() * capacity / 100.0;
            let failed = s["failed_gpu_milli"].as_f64().unwrap();
            assert!(allocated + failed >= 1.3 * capacity - 0.5, "{s}");
            assert!(allocated <= capacity, "{s}");
            assert!(s["alloc_pct"]["130"].as_f64().unwrap() <= 100.0);
        }
        let m = &p["median_alloc_pct"];
        for k in ["90", "95", "100", "110", "120", "130"] {
            assert!(m[k].as_f64().is_some(), "{} has no median at {k}: {m}", p["name"]);
            assert!(p["iqr_alloc_pct"][k].as_f64().unwrap() >= 0.0);
        }
        assert!(p["config"]["profiles"].is_array(), "the configuration used is recorded");
    }
    assert_eq!(profiles[2]["name"], "mine");
    assert_eq!(profiles[2]["config"]["profiles"][0]["schedulerName"], "my-scheduler");
    let svg = std::fs::read_to_string(out.join("unallocated-gpu.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("bestfit"), "{}", &svg[..200.min(svg.len())]);
    std::fs::remove_dir_all(&out).ok();
}

#[test]
fn a_malformed_trace_is_refused_with_file_line_and_column() {
    let out = tmp("bad");
    let pods = out.join("pods.csv");
    std::fs::write(
        &pods,
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli\nopenb-pod-0,1000,1024,1,500\nopenb-pod-1,1000,lots,1,500\n",
    )
    .unwrap();
    let nodes = data().join("nodes.csv");
    let o = ksched(&[
        "bench",
        "--mode",
        "trace",
        "--trace-nodes",
        nodes.to_str().unwrap(),
        "--trace-pods",
        pods.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&format!("{}:3: column \"memory_mib\": invalid value \"lots\"", pods.display())), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    std::fs::remove_dir_all(&out).ok();
}

#[test]
fn trace_time_mode_reports_waiting_per_profile() {
    let out = tmp("time");
    let (nodes, pods) = (data().join("nodes.csv"), data().join("pods.csv"));
    let o = ksched(&[
        "bench",
        "--mode",
        "trace-time",
        "--trace-nodes",
        nodes.to_str().unwrap(),
        "--trace-pods",
        pods.to_str().unwrap(),
        "--speedup",
        "1",
        "--profiles",
        "default,bestfit",
        "--out",
        out.to_str().unwrap(),
    ]);
    let all = text(&o);
    assert!(o.status.success(), "{all}");
    let r: Value = serde_json::from_slice(&std::fs::read(out.join("results.json")).unwrap()).unwrap();
    let p = r["profiles"].as_array().unwrap();
    assert_eq!(p.len(), 2);
    for x in p {
        assert_eq!(x["pods"], 24);
        assert_eq!(x["never_scheduled"], 0);
        assert!(x["pending_gpu_hours"].as_f64().unwrap() > 0.0, "{x}");
        assert!(x["pending_p99_s"].as_f64().unwrap() >= x["pending_p50_s"].as_f64().unwrap());
    }
    assert!(p[1]["pending_gpu_hours"].as_f64() < p[0]["pending_gpu_hours"].as_f64(), "bestfit waits less: {all}");
    assert!(std::fs::read_to_string(out.join("gpu-allocation-over-time.svg")).unwrap().starts_with("<svg"));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("P99 WAIT") && stdout.contains("GPU-H WAIT"), "{stdout}");
    // The five-column lists have no times: the timed mode refuses them.
    let short = out.join("short.csv");
    std::fs::write(&short, "name,cpu_milli,memory_mib,num_gpu,gpu_milli\nopenb-pod-0,1000,1024,1,500\n").unwrap();
    let o = ksched(&[
        "bench",
        "--mode",
        "trace-time",
        "--trace-nodes",
        nodes.to_str().unwrap(),
        "--trace-pods",
        short.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("needs creation_time and deletion_time"), "{}", text(&o));
    std::fs::remove_dir_all(&out).ok();
}
