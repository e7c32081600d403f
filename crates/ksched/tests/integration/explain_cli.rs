//! `ksched explain` through a live API server (`ksched local` on the example cluster), on the
//! manifests it loaded and on kubectl's dump of it: the aggregate line is the one the scheduler
//! wrote, and explaining writes nothing.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A `ksched local` child, stopped when the test ends, also by a failed assertion.
struct Local(std::process::Child);

impl Drop for Local {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Every kind the scheduler reads, for `kubectl get`.
const DUMPED: &str = "namespaces,nodes,pods,priorityclasses,storageclasses,pv,pvc,pdb,deviceclasses,resourceslices,resourceclaims,resourceclaimtemplates,podgroups";

/// The kubectl versions CI installs (`.ci/install-kubectl`), newest first.
fn kubectls() -> Vec<PathBuf> {
    let tools = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/tools");
    ["1.37.1", "1.36.4"]
        .iter()
        .map(|v| {
            let bin = tools.join(format!("kubectl-{v}/bin/kubectl"));
            assert!(bin.exists(), "kubectl {v} is missing at {}: run .ci/install-kubectl", bin.display());
            bin
        })
        .collect()
}

#[test]
fn explains_pending_pods_of_a_live_cluster_with_the_schedulers_message() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let kubeconfig = std::env::temp_dir().join(format!("ksched-explain-cli-{}.kubeconfig", std::process::id()));
    let mut local = Local(
        Command::new(env!("CARGO_BIN_EXE_ksched"))
            .current_dir(root)
            .args(["local", "--listen", "127.0.0.1:0", "--kubeconfig-out"])
            .arg(&kubeconfig)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting ksched local"),
    );
    let stdout = local.0.stdout.take().unwrap();
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

    // From what kubectl dumps of the settled cluster (`get -A -o yaml`, a `List` with uids,
    // statuses, managed fields): the pending pods whose last attempt saw the cluster as it
    // settled get the scheduler's own message (others, such as wants-b200, were last tried
    // while pods were still being bound, and no event of the later bindings requeued them), and
    // a bound pod whose claim was made from a template fits where it is, with that claim.
    let dump = std::env::temp_dir().join(format!("ksched-explain-cli-{}.dump.yaml", std::process::id()));
    let settled = ["default/arm-3", "default/huge", "default/port-clash", "default/tiny-4", "default/zone-d-only"];
    for kubectl in kubectls() {
        let out = Command::new(&kubectl)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["get", "-A", "-o", "yaml", DUMPED])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        std::fs::write(&dump, &out.stdout).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_ksched"))
            .arg("explain")
            .arg(&dump)
            .args(settled)
            .args(["batch/wants-b200", "batch/llm-train-0", "-o", "json"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{}: {text}\n{}", kubectl.display(), String::from_utf8_lossy(&out.stderr));
        let exs: serde_json::Value = serde_json::from_str(&text).unwrap();
        for (i, key) in settled.iter().enumerate() {
            let pod = key.split_once('/').unwrap().1;
            assert_eq!(exs[i]["message"].as_str().unwrap_or_default(), scheduler_message(pod), "{key}");
        }
        let b200 = &exs[settled.len()];
        assert_eq!(b200["verdict"], "Unschedulable", "{b200:#}");
        assert!(b200["message"].as_str().unwrap().contains("cannot allocate all claims"), "{b200:#}");
        let train = &exs[settled.len() + 1];
        assert_eq!((&train["verdict"], &train["boundTo"]), (&"Schedulable".into(), &"node-a4".into()), "{train:#}");
        assert_eq!(train["selectedNode"], "node-a4", "{train:#}");
    }
    let _ = std::fs::remove_file(&dump);

    drop(local);
    let _ = std::fs::remove_file(&kubeconfig);
}

/// Runs `ksched local` on `dir` until it settles: its table (the placement and the scheduler's
/// message per pod).
fn local_table(dir: &Path, kubeconfig: &Path) -> Vec<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_ksched"))
        .arg("local")
        .arg(dir)
        .args(["--exit-when-idle", "--listen", "127.0.0.1:0", "--kubeconfig-out"])
        .arg(kubeconfig)
        .output()
        .expect("running ksched local");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout.lines().map(str::to_string).collect()
}

#[test]
fn explains_dra_pods_from_manifest_files_as_the_live_scheduler_decides() {
    // The example's nodes, its DRA objects and pods and its gangs: nothing else competes for the
    // nodes, so when the scheduler tries batch/wants-b200 does not change what it sees.
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/cluster"));
    let dir = std::env::temp_dir().join(format!("ksched-explain-dra-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let manifests = dir.join("manifests");
    std::fs::create_dir_all(&manifests).unwrap();
    for f in ["00-namespaces.yaml", "10-nodes.yaml", "31-dra.yaml", "32-gangs.yaml"] {
        std::fs::copy(root.join(f), manifests.join(f)).unwrap();
    }
    let table = local_table(&manifests, &dir.join("kubeconfig"));
    let row = |pod: &str| -> &str {
        table
            .iter()
            .find(|l| l.split_whitespace().nth(1) == Some(pod))
            .unwrap_or_else(|| panic!("no row for {pod}: {table:#?}"))
    };
    let live = row("wants-b200");
    let live = &live[live.find("0/").expect("a FailedScheduling message")..];
    assert!(live.contains("cannot allocate all claims"), "{live}");

    let explain = |path: &Path, pods: &[&str]| -> serde_json::Value {
        let out = Command::new(env!("CARGO_BIN_EXE_ksched"))
            .arg("explain")
            .arg(path)
            .args(pods)
            .args(["-o", "json"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_str(&text).unwrap()
    };
    // Claims by name, claims the controller makes from a template, the extended-resource form:
    // each pod goes where the live scheduler put it (its only feasible node).
    let placed = ["llm-train-0", "llm-train-1", "big-model", "notebook", "legacy-gpu"];
    let keys: Vec<String> =
        placed.iter().map(|p| format!("batch/{p}")).chain(["batch/wants-b200".to_string()]).collect();
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    let exs = explain(&manifests, &keys);
    for (i, pod) in placed.iter().enumerate() {
        let node = row(pod).split_whitespace().nth(2).unwrap();
        assert_eq!(exs[i]["selectedNode"], node, "{pod}: {:#}", exs[i]);
    }
    assert_eq!(exs[placed.len()]["message"].as_str().unwrap(), live);
    // The whole example cluster, as issue #28 reported it: the same message.
    let ex = explain(root, &["batch/wants-b200"]);
    assert_eq!(ex["message"].as_str().unwrap(), live);
    let _ = std::fs::remove_dir_all(&dir);
}
