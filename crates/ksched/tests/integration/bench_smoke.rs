//! `ksched bench` at tiny scale: every runnable workload in process and against the embedded API
//! server, every measured pod accounted for, results.json complete.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

const REQUIRED_KEYS: &[&str] = &[
    "workload",
    "mode",
    "nodes",
    "init_pods",
    "pods",
    "throughput_avg",
    "throughput_p50",
    "throughput_p90",
    "throughput_p99",
    "attempt_latency_p50_ms",
    "attempt_latency_p99_ms",
    "algorithm_latency_p50_ms",
    "algorithm_latency_p99_ms",
    "peak_rss_bytes",
    "cpu_seconds",
    "scheduled",
    "unschedulable",
    "git_revision",
];

fn workloads() -> Vec<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_ksched")).args(["bench", "--list"]).output().expect("running ksched");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

fn bench(mode: &str, out: &Path) -> (Vec<Value>, String) {
    let run = Command::new(env!("CARGO_BIN_EXE_ksched"))
        .args(["bench", "--workload", "all", "--nodes", "10", "--init-pods", "5", "--pods", "20", "--timeout", "30"])
        .args(["--mode", mode, "--out"])
        .arg(out)
        .output()
        .expect("running ksched bench");
    let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
    assert!(run.status.success(), "ksched bench --mode {mode} failed:\n{stdout}\n{stderr}");
    let json = std::fs::read(out.join("results.json")).expect("results.json");
    let results: Vec<Value> = serde_json::from_slice(&json).expect("results.json parses");
    (results, format!("{stdout}\n{stderr}"))
}

fn check(mode: &str) {
    let out = std::env::temp_dir().join(format!("ksched-bench-smoke-{mode}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let (results, output) = bench(mode, &out);
    let all = workloads();
    let skipped: Vec<&String> = all.iter().filter(|w| output.contains(&format!("{w}: skipped, "))).collect();
    assert!(all.iter().any(|w| w == "SchedulingBasic"), "{all:?}");
    assert_eq!(results.len() + skipped.len(), all.len(), "every workload ran or was skipped with a reason:\n{output}");
    for r in &results {
        let name = r["workload"].as_str().unwrap();
        for k in REQUIRED_KEYS {
            assert!(r.get(*k).is_some(), "{name}: missing {k}");
        }
        assert_eq!(r["mode"], mode);
        assert_eq!(r["pods"], 20);
        let (scheduled, unschedulable) = (r["scheduled"].as_u64().unwrap(), r["unschedulable"].as_u64().unwrap());
        if name.starts_with("SteadyState") {
            // steady state keeps 20 pods pending for its duration: at least those get scheduled
            assert!(scheduled + unschedulable >= 20, "{name}: the steady state kept pods coming: {r}");
        } else {
            assert_eq!(scheduled + unschedulable, 20, "{name}: every measured pod accounted for: {r}");
        }
        assert!(r["git_revision"].as_str().is_some_and(|s| !s.is_empty()));
        assert!(r["peak_rss_bytes"].as_u64().unwrap() > 0);
        assert!(out.join(format!("{name}-{mode}.svg")).is_file(), "{name}: plot");
        if scheduled > 0 {
            assert!(r["attempt_latency_p50_ms"].as_f64().is_some(), "{name}: latency recorded: {r}");
        }
    }
    let basic = results.iter().find(|r| r["workload"] == "SchedulingBasic").expect("SchedulingBasic ran");
    assert_eq!(basic["scheduled"], 20);
    // 10 nodes, hostname anti-affinity, 5 init pods: only 5 measured pods fit.
    if let Some(anti) = results.iter().find(|r| r["workload"] == "SchedulingPodAntiAffinity") {
        assert_eq!((anti["scheduled"].as_u64(), anti["unschedulable"].as_u64()), (Some(5), Some(15)), "{anti}");
    }
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn every_workload_inprocess() {
    check("inprocess");
}

#[test]
fn every_workload_local() {
    check("local");
}

/// Against an external cluster, the workload's nodes and pods are deleted at the end unless
/// `--keep-objects` asks to leave them (to restart a scheduler on the full cluster).
#[test]
fn external_mode_leaves_the_objects_only_when_asked() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(ksched_apiserver::ApiServer::start(ksched_apiserver::ServerConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            ..Default::default()
        }))
        .expect("the embedded API server starts");
    let dir = std::env::temp_dir().join(format!("ksched-bench-keep-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    let counts = || {
        let store = server.store();
        (store.list("v1", "Node", None).len(), store.list("v1", "Pod", None).len())
    };
    for keep in [false, true] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ksched"));
        cmd.args(["bench", "--mode", "external", "--workload", "SchedulingBasic", "--nodes", "3"])
            .args(["--init-pods", "2", "--pods", "4", "--timeout", "60", "--kubeconfig"])
            .arg(&kubeconfig)
            .arg("--out")
            .arg(dir.join(format!("out-{keep}")));
        if keep {
            cmd.arg("--keep-objects");
        }
        let run = cmd.output().expect("running ksched bench");
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        let expected = if keep { (3, 6) } else { (0, 0) };
        assert_eq!(counts(), expected, "nodes and pods left with keep={keep}");
    }
    rt.block_on(server.shutdown());
    let _ = std::fs::remove_dir_all(&dir);
    // Elsewhere the flag would do nothing: refused, not ignored.
    let run = Command::new(env!("CARGO_BIN_EXE_ksched"))
        .args(["bench", "--mode", "inprocess", "--workload", "SchedulingBasic", "--keep-objects"])
        .output()
        .expect("running ksched bench");
    assert!(!run.status.success());
    assert!(String::from_utf8_lossy(&run.stderr).contains("--keep-objects needs --mode external"));
}
