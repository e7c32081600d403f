//! `ksched bench --faults` under each fault alone and all together: the run's verdict (no pod
//! lost, none bound twice, no node overcommitted, bound pods never reported unschedulable,
//! refused pods carrying a fault-free scheduler's message) must hold, and the fault must
//! actually have fired.

use std::process::Command;

use serde_json::Value;

struct Run {
    chaos: Value,
    pods: u64,
    output: String,
}

fn bench(name: &str, workload: &str, sizes: [&str; 3], faults: &str) -> Run {
    let out = std::env::temp_dir().join(format!("ksched-chaos-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let [nodes, init, pods] = sizes;
    let run = Command::new(env!("CARGO_BIN_EXE_ksched"))
        .args(["bench", "--mode", "local", "--workload", workload, "--nodes", nodes, "--init-pods", init])
        .args(["--pods", pods, "--timeout", "120", "--faults", faults, "--out"])
        .arg(&out)
        .output()
        .expect("running ksched bench");
    let output = format!("{}\n{}", String::from_utf8_lossy(&run.stdout), String::from_utf8_lossy(&run.stderr));
    assert!(run.status.success(), "ksched bench --faults {faults} failed:\n{output}");
    let results: Vec<Value> =
        serde_json::from_slice(&std::fs::read(out.join("results.json")).expect("results.json")).unwrap();
    let _ = std::fs::remove_dir_all(&out);
    let r = &results[0];
    Run { chaos: r["chaos"].clone(), pods: r["pods"].as_u64().unwrap(), output }
}

/// Runs SchedulingBasic (30 nodes, 100 init + 1000 measured pods, all fit: a fraction of a
/// second of scheduling on an idle machine, so periodic faults fire every 100-300 ms) under `faults` and checks the verdict; `fired` are the
/// faults that must have been injected.
fn survives(name: &str, faults: &str, fired: &[&str]) {
    let run = bench(name, "SchedulingBasic", ["30", "100", "1000"], faults);
    let c = &run.chaos;
    for list in [
        "lost",
        "double_bindings",
        "unrecorded_bindings",
        "misplaced",
        "bound_but_unschedulable",
        "overcommitted",
        "wrong_messages",
    ] {
        assert_eq!(c[list], Value::Array(vec![]), "{list}:\n{}", run.output);
    }
    for f in fired {
        assert!(c["injected"][f].as_u64().unwrap_or(0) > 0, "{f} never fired:\n{}", run.output);
    }
    assert_eq!(c["bound"].as_u64(), Some(1100), "every pod fits and must be bound:\n{}", run.output);
    assert_eq!(c["bindings"].as_u64(), Some(1100), "one binding per pod:\n{}", run.output);
    assert!(c["faults"].as_str().unwrap().starts_with("seed=3,"), "the seed is reported for replay: {c}");
}

#[test]
fn api_server_restarts() {
    // Up 150-450 ms between restarts (`every` is jittered by ±50% after each pause): long enough
    // for a relist of the run's ~1100 pods on a loaded debug build. With every=100ms (up 50-150
    // ms) an informer's list could be cut off at every try, its watcher backed off (up to 30 s,
    // as client-go's) and the run stalled for most of its timeout.
    survives("restart", "seed=3,restart:every=300ms:pause=100ms", &["restart"]);
}

#[test]
fn failed_writes() {
    survives("error", "seed=3,error:p=0.2:rate=50", &["error"]);
}

#[test]
fn slow_requests() {
    survives("latency", "seed=3,latency:p=0.5:min=5ms:max=50ms", &["latency"]);
}

#[test]
fn watches_ended_early() {
    survives("watch-end", "seed=3,watch-end:every=100ms", &["watch-end"]);
}

#[test]
fn history_compacted_under_resumed_watches() {
    // Compaction only shows when a watch resumes, so watches end too.
    survives("compact", "seed=3,compact:every=100ms,watch-end:every=100ms", &["compact", "watch-end"]);
}

#[test]
fn bindings_won_by_someone_else() {
    survives("bind-conflict", "seed=3,bind-conflict:p=0.2:rate=50", &["bind-conflict"]);
}

#[test]
fn all_faults_together_with_unschedulable_pods() {
    // Unschedulable: init pods fit, a churn of pods too big for any node is refused, and
    // each refusal's message must be what a fault-free scheduler says on the final cluster.
    let faults = "seed=3,all,restart:every=300ms:pause=100ms,watch-end:every=100ms,compact:every=100ms,error:p=0.1:rate=50,bind-conflict:p=0.1:rate=20";
    // 500 measured pods keep the faults firing for tens of seconds (hundreds of injections);
    // more only lengthen the run.
    let run = bench("all", "Unschedulable", ["30", "100", "500"], faults);
    let c = &run.chaos;
    for list in [
        "lost",
        "double_bindings",
        "unrecorded_bindings",
        "misplaced",
        "bound_but_unschedulable",
        "overcommitted",
        "wrong_messages",
    ] {
        assert_eq!(c[list], Value::Array(vec![]), "{list}:\n{}", run.output);
    }
    assert!(c["refused"].as_u64().unwrap() > 0, "the churned pods are refused:\n{}", run.output);
    assert_eq!(c["messages_checked"], c["refused"], "{}", run.output);
    assert_eq!(c["bound"].as_u64(), Some(100 + run.pods), "{}", run.output);
    for f in ["restart", "error", "latency", "watch-end", "compact", "bind-conflict"] {
        assert!(c["injected"][f].as_u64().unwrap_or(0) > 0, "{f} never fired:\n{}", run.output);
    }
}

#[test]
fn a_burst_of_ten_thousand_pods_under_all_faults() {
    // 100 nodes hold 4000 of them; the other 6000 must be refused, each with the right message.
    let faults = "seed=3,all,restart:every=3s:pause=500ms,watch-end:every=2s,compact:every=2s";
    let run = bench("burst", "SchedulingBasic", ["100", "0", "10000"], faults);
    let c = &run.chaos;
    for list in [
        "lost",
        "double_bindings",
        "unrecorded_bindings",
        "misplaced",
        "bound_but_unschedulable",
        "overcommitted",
        "wrong_messages",
    ] {
        assert_eq!(c[list], Value::Array(vec![]), "{list}:\n{}", run.output);
    }
    assert_eq!(c["bound"].as_u64(), Some(4000), "{}", run.output);
    assert_eq!(c["refused"].as_u64(), Some(6000), "{}", run.output);
    assert_eq!(c["messages_checked"].as_u64(), Some(6000), "{}", run.output);
}
