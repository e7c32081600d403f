//! `ksched local` on the bundled example cluster, as a user runs it.

use std::process::Command;

fn run_local() -> (String, String, bool) {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let kubeconfig = std::env::temp_dir().join(format!("ksched-local-test-{}.kubeconfig", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_ksched"))
        .current_dir(root)
        .args(["local", "--exit-when-idle", "--listen", "127.0.0.1:0", "--kubeconfig-out"])
        .arg(&kubeconfig)
        .output()
        .expect("running ksched");
    let _ = std::fs::remove_file(&kubeconfig);
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.success(),
    )
}

fn row<'a>(stdout: &'a str, ns: &str, pod: &str) -> Option<&'a str> {
    stdout.lines().find(|l| {
        let mut f = l.split_whitespace();
        f.next() == Some(ns) && f.next() == Some(pod)
    })
}

#[test]
fn example_cluster_placements_and_messages() {
    let (stdout, stderr, ok) = run_local();
    assert!(ok, "ksched local failed:\n{stdout}\n{stderr}");
    let first: Vec<&str> = stdout.lines().take(2).collect();
    assert!(first[0].starts_with("API server listening on https://127.0.0.1:"), "{first:?}");
    assert!(first[1].starts_with("kubeconfig written to "), "{first:?}");

    let expect_refused = [
        ("default", "arm-3", "0/15 nodes are available: 1 Insufficient cpu, 1 node(s) were unschedulable, 6 node(s) had untolerated taint(s), 7 node(s) didn't match Pod's node affinity/selector. no new claims to deallocate, preemption: 0/15 nodes are available: 1 No preemption victims found for incoming pod, 14 Preemption is not helpful for scheduling."),
        ("default", "tiny-4", "0/15 nodes are available: 1 Too many pods, 1 node(s) were unschedulable, 6 node(s) had untolerated taint(s), 7 node(s) didn't match Pod's node affinity/selector. no new claims to deallocate, preemption: 0/15 nodes are available: 1 No preemption victims found for incoming pod, 14 Preemption is not helpful for scheduling."),
        ("default", "huge", "0/15 nodes are available: 1 node(s) were unschedulable, 7 Insufficient cpu, 7 Insufficient memory, 7 node(s) had untolerated taint(s). no new claims to deallocate, preemption: 0/15 nodes are available: 15 Preemption is not helpful for scheduling."),
        ("default", "port-clash", "0/15 nodes are available: 1 node(s) didn't have free ports for the requested pod ports, 1 node(s) were unschedulable, 6 node(s) didn't match Pod's node affinity/selector, 7 node(s) had untolerated taint(s). no new claims to deallocate, preemption: 0/15 nodes are available: 1 No preemption victims found for incoming pod, 14 Preemption is not helpful for scheduling."),
        ("default", "zone-d-only", "0/15 nodes are available: 1 node(s) were unschedulable, 7 node(s) didn't match Pod's node affinity/selector, 7 node(s) had untolerated taint(s). no new claims to deallocate, preemption: 0/15 nodes are available: 15 Preemption is not helpful for scheduling."),
        ("default", "gated-1", "waiting for scheduling gates: [example.com/quota-check]"),
    ];
    for (ns, pod, msg) in expect_refused {
        let r = row(&stdout, ns, pod).unwrap_or_else(|| panic!("no row for {ns}/{pod} in:\n{stdout}"));
        assert!(r.contains("<none>") && r.ends_with(msg), "{ns}/{pod}: {r}");
    }
    // placements the plugins force
    for (pod, node) in [
        ("arm-1", "node-c1"),
        ("arm-2", "node-c1"),
        ("tiny-1", "node-a3"),
        ("port-holder", "node-b1"),
        ("cache", "node-a1"),
    ] {
        let r = row(&stdout, "default", pod).unwrap();
        assert!(r.contains(node), "{pod} should be on {node}: {r}");
    }
    for i in 1..=4 {
        let r = row(&stdout, "batch", &format!("gpu-train-{i}")).unwrap();
        assert!(r.contains("node-a4") || r.contains("node-c3"), "gpu pods need GPU nodes: {r}");
    }
    for i in 1..=6 {
        if let Some(r) = row(&stdout, "shop", &format!("db-{i}")).filter(|r| !r.contains("<none>")) {
            assert!(["node-a2", "node-b2", "node-c2"].iter().any(|n| r.contains(n)), "db pods need SSD nodes: {r}");
        }
    }
    // the cordoned node never receives a pod from the scheduler
    assert!(!stdout.lines().any(|l| l.contains("node-b3")), "{stdout}");
    assert!(stdout.contains("of 91 pods scheduled"), "{stdout}");
    // the pre-training gang lands whole in zone-b, the only zone with 8 free GPUs
    for i in 0..8 {
        let r = row(&stdout, "batch", &format!("llm-pretrain-{i}")).unwrap();
        assert!(r.contains("gpu-b1") || r.contains("gpu-b2"), "llm-pretrain-{i} should be in zone-b: {r}");
    }
    // the fine-tuning gang waits whole: 4 members would fit (zone-c's 4 GPUs), 4 would not
    let waiting = "pod group is unschedulable, waiting for minCount pods from a gang to be scheduled, one or more plugins asked to wait and no plugin rejected pod";
    let finetune: Vec<&str> = (0..8).map(|i| row(&stdout, "batch", &format!("llm-finetune-{i}")).unwrap()).collect();
    assert!(finetune.iter().all(|r| r.contains("<none>")), "{finetune:#?}");
    assert_eq!(finetune.iter().filter(|r| r.ends_with(waiting)).count(), 4, "{finetune:#?}");
    assert_eq!(
        finetune
            .iter()
            .filter(|r| r.contains("0/15 nodes are available: ") && r.contains("3 Insufficient nvidia.com/gpu"))
            .count(),
        4,
        "{finetune:#?}"
    );

    let node = |ns: &str, pod: &str| -> String {
        row(&stdout, ns, pod).and_then(|r| r.split_whitespace().nth(2)).unwrap_or("<missing>").to_string()
    };
    // InterPodAffinity: required anti-affinity spreads the redis pods, affinity joins the client.
    let redis: Vec<String> = (1..=3).map(|i| node("default", &format!("redis-{i}"))).collect();
    assert!(redis.iter().all(|n| n.starts_with("node-")), "{redis:?}");
    assert_eq!(redis.iter().collect::<std::collections::HashSet<_>>().len(), 3, "{redis:?}");
    assert!(redis.contains(&node("default", "redis-client")), "client not with a redis pod: {stdout}");
    // PodTopologySpread (maxSkew 1 over zones): one frontend per zone (node-<zone letter><n>).
    let zones: std::collections::HashSet<char> =
        (1..=3).map(|i| node("default", &format!("frontend-{i}")).chars().nth(5).unwrap_or('?')).collect();
    assert_eq!(zones, ['a', 'b', 'c'].into_iter().collect(), "{stdout}");
    // DynamicResources: the fake GPU driver's devices (examples/cluster/31-dra.yaml).
    for (pod, want) in [
        ("llm-train-0", "node-a4"),
        ("llm-train-1", "node-a4"),
        ("big-model", "node-c3"),
        ("notebook", "node-c3"),
        ("legacy-gpu", "node-c3"),
    ] {
        assert_eq!(node("batch", pod), want, "{stdout}");
    }
    let b200 = row(&stdout, "batch", "wants-b200").unwrap();
    // How many nodes say "Insufficient cpu" rather than "cannot allocate all claims" depends on
    // which pods were bound at its last attempt (claims of templates arrive asynchronously), so
    // only the parts that do not depend on timing are pinned.
    assert!(b200.contains("<none>"), "{b200}");
    assert!(b200.contains("0/15 nodes are available: 1 node(s) were unschedulable, "), "{b200}");
    assert!(b200.contains(" node(s) had untolerated taint(s), "), "{b200}");
    assert!(
        b200.contains(" cannot allocate all claims. still not schedulable, preemption: 0/15 nodes are available: "),
        "{b200}"
    );
    let claim = |name: &str| stdout.lines().find(|l| l.split_whitespace().nth(1) == Some(name)).unwrap_or_default();
    assert!(
        claim("big-memory-gpu").contains("allocated")
            && claim("big-memory-gpu").contains("gpu.example.com/node-c3/gpu-"),
        "{stdout}"
    );
    assert!(claim("half-gpu").ends_with("gpu.example.com/node-c3/gpu-2-half-0"), "{stdout}");
    assert!(claim("b200").contains("pending"), "{stdout}");
    let train: Vec<&str> =
        stdout.lines().filter(|l| l.contains("llm-train-0-gpus-") && l.contains("allocated")).collect();
    assert_eq!(train.len(), 1, "{stdout}");
    assert!(train[0].contains("llm-train-0") && train[0].matches("gpu.example.com/node-a4/").count() == 2, "{stdout}");
    // DefaultPreemption: urgent evicted placeholder (deleted, so no longer listed) on node-c4.
    assert_eq!(node("default", "urgent"), "node-c4", "{stdout}");
    assert!(row(&stdout, "default", "placeholder").is_none(), "{stdout}");
}

#[test]
fn a_broken_manifest_is_reported_with_its_file_and_exits_non_zero() {
    let dir = std::env::temp_dir().join(format!("ksched-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("bad.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n  namespace: default\nspec: {containers: []}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: web-y}\nspec:\n  containers:\n  - name: c\n    image: i\n    resources: {requests: {cpu: abc}}\n---\napiVersion: v1\nkind: Node\nmetadata: {name: fine}\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ksched"))
        .args(["local", "--exit-when-idle", "--listen", "127.0.0.1:0", "--kubeconfig-out"])
        .arg(dir.join("k"))
        .arg(&dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("bad.yaml#1: Pod default/x: spec.containers: Required value"), "{stderr}");
    assert!(
        stderr.contains("bad.yaml#2: Pod default/web-y: spec.containers[0].resources.requests[cpu]: Invalid value: \"abc\": quantities must match the regular expression"),
        "the field is named: {stderr}"
    );
    assert!(stderr.contains("2 of the manifests' objects were refused; nothing was loaded"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `ksched local` on examples/gpu-sharing with the policy's configuration (docs/gpu-sharing.md).
fn run_gpu_sharing(config: Option<&str>) -> String {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let kubeconfig = std::env::temp_dir().join(format!("ksched-gpu-sharing-{}.kubeconfig", std::process::id()));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ksched"));
    cmd.current_dir(root)
        .args(["local", "--exit-when-idle", "--listen", "127.0.0.1:0", "--kubeconfig-out"])
        .arg(&kubeconfig);
    if let Some(c) = config {
        cmd.args(["--config", c]);
    }
    let out = cmd.arg("examples/gpu-sharing/cluster").output().expect("running ksched");
    let _ = std::fs::remove_file(&kubeconfig);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "ksched local failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout
}

#[test]
fn gpu_sharing_example_schedules_every_pod_with_the_policy() {
    let stdout = run_gpu_sharing(Some("examples/gpu-sharing/scheduler-config.yaml"));
    assert!(stdout.contains("\n8 of 8 pods scheduled, 0 unschedulable"), "{stdout}");
    let node =
        |pod: &str| row(&stdout, "ml", pod).and_then(|r| r.split_whitespace().nth(2)).unwrap_or("<none>").to_string();
    // Each 2-GPU job has a node with two whole GPUs.
    let nodes: Vec<String> = ["train-a", "train-b", "train-c"].iter().map(|p| node(p)).collect();
    assert!(nodes.iter().all(|n| n.starts_with("gpu-node-")), "{stdout}");
    // Every claim is allocated: 2 + 2 whole GPUs for the jobs, 1 for train-c, one device for
    // each of the four fractions (7 GPUs' worth on 8: the fractions had to share).
    let devices: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("ResourceClaims:"))
        .filter(|l| l.contains(" allocated "))
        .flat_map(|l| l.rsplit("  ").next().unwrap_or_default().split(", "))
        .collect();
    assert_eq!(devices.len(), 2 + 2 + 1 + 4, "{stdout}");
}

/// The same cluster under the default profile strands GPUs: the fractions spread over fresh GPUs
/// and a 2-GPU job is left without a node (what the example is for).
#[test]
fn gpu_sharing_example_strands_a_gpu_job_under_the_default_profile() {
    let stdout = run_gpu_sharing(None);
    assert!(stdout.contains("\n7 of 8 pods scheduled, 1 unschedulable"), "{stdout}");
}
