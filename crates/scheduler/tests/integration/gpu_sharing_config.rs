//! The opt-in GPU-sharing policy's configuration (`examples/gpu-sharing/scheduler-config.yaml`,
//! docs/gpu-sharing.md): the `kube-scheduler` binary loads and validates it as is, its profile
//! builds with DeviceFragmentation scoring, bad args fail with the field named, and the default
//! profile never contains the policy.

use std::process::Command;
use std::sync::{Arc, OnceLock};

use ksched_framework::handle::{NoClient, NoopRecorder};
use ksched_framework::listers::MemoryLister;
use ksched_framework::ExtensionPoint;
use ksched_scheduler::app;
use ksched_scheduler::config;

const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/gpu-sharing/scheduler-config.yaml");

fn frameworks(cfg: &config::KubeSchedulerConfiguration) -> anyhow::Result<Arc<ksched_framework::Framework>> {
    let profiles = app::build_profiles(
        cfg,
        &ksched_plugins::in_tree_registry(),
        Arc::new(NoClient),
        &|_| Arc::new(NoopRecorder),
        Arc::new(MemoryLister::default()),
        Arc::new(OnceLock::new()),
        ksched_framework::handle::thread_spawner(),
        &[],
    )?;
    Ok(profiles["default-scheduler"].framework.clone())
}

fn load(text: &str) -> config::KubeSchedulerConfiguration {
    let cfg = config::load_config(text.as_bytes(), "scheduler-config.yaml").unwrap_or_else(|e| panic!("{e}"));
    config::validate(&cfg).unwrap_or_else(|e| panic!("{e}"));
    cfg
}

#[test]
fn the_binary_accepts_the_example_config_as_is() {
    let out_path = std::env::temp_dir().join(format!("ksched-gpu-sharing-{}.yaml", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_kube-scheduler"))
        .args(["--config", EXAMPLE, &format!("--write-config-to={}", out_path.display())])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let written = std::fs::read_to_string(&out_path).unwrap();
    let _ = std::fs::remove_file(&out_path);
    assert!(written.contains("deviceSelection: BestFit"), "{written}");
    assert!(written.contains("deviceClassName: gpu.ksched.dev"), "{written}");
    assert!(written.contains("percentageOfNodesToScore: 100"), "{written}");

    // A misspelt strategy is a validation error naming the field, exit 1.
    let bad = std::fs::read_to_string(EXAMPLE).unwrap().replace("deviceSelection: BestFit", "deviceSelection: Best");
    let bad_path = std::env::temp_dir().join(format!("ksched-gpu-sharing-bad-{}.yaml", std::process::id()));
    std::fs::write(&bad_path, bad).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_kube-scheduler"))
        .args(["--config", &bad_path.display().to_string(), "--write-config-to=/dev/null"])
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&bad_path);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    // klog quotes the error, so its quotes come escaped.
    assert!(
        err.contains(
            r#"profiles[0].pluginConfig[1].args.deviceSelection: Unsupported value: \"Best\": supported values"#
        ),
        "{err}"
    );
}

#[test]
fn the_example_profile_scores_with_device_fragmentation() {
    let cfg = load(&std::fs::read_to_string(EXAMPLE).unwrap());
    let fw = frameworks(&cfg).unwrap();
    // Score plugins are listed with their weights.
    let score = fw.list_plugins(ExtensionPoint::Score);
    assert!(score.iter().any(|p| p == "DeviceFragmentation(10)"), "{score:?}");
    assert!(!score.iter().any(|p| p.starts_with("NodeResources")), "{score:?}");
    assert!(fw.list_plugins(ExtensionPoint::PreFilter).iter().any(|p| p == "DeviceFragmentation"));
    assert!(fw.list_plugins(ExtensionPoint::Filter).iter().any(|p| p == "NodeResourcesFit"), "fit still filters");
}

#[test]
fn bad_device_fragmentation_args_fail_the_profile_with_the_field_named() {
    let text = std::fs::read_to_string(EXAMPLE)
        .unwrap()
        .replace("deviceClassName: gpu.ksched.dev", "deviceClassName: GPU")
        .replace("capacity: milligpu", "capacity: milligpu\n          resources: [cpu, gpu]");
    let Err(err) = frameworks(&load(&text)) else { panic!("bad args are refused") };
    let err = err.to_string();
    assert!(err.contains("creating profile for scheduler name default-scheduler"), "{err}");
    assert!(err.contains(r#"deviceClassName: Invalid value: "GPU""#), "{err}");
    assert!(err.contains(r#"resources[1]: Unsupported value: "gpu": supported values: "cpu", "memory""#), "{err}");
    let unknown = std::fs::read_to_string(EXAMPLE).unwrap().replace("capacity: milligpu", "capacityName: milligpu");
    let Err(err) = frameworks(&load(&unknown)) else { panic!("unknown fields are refused") };
    let err = err.to_string();
    assert!(err.contains("unknown field `capacityName`"), "{err}");
}

#[test]
fn the_default_profile_has_no_device_fragmentation() {
    let fw = frameworks(&config::default_config()).unwrap();
    for point in [ExtensionPoint::PreFilter, ExtensionPoint::PreScore, ExtensionPoint::Score] {
        assert!(!fw.list_plugins(point).iter().any(|p| p == "DeviceFragmentation"), "{point:?}");
    }
}

/// What DeviceFragmentation's weight does beside the default scorers that stay in the
/// example profile. Two nodes with one 1000-milligpu GPU each; a 600 share sits on `packed`.
/// A 400 share fills `packed` exactly, and the policy scores it 100 there and 0 on `fresh`
/// (where it would break a whole GPU). Against it, the pod may prefer `fresh` through node
/// affinity (NodeAffinity, weight 2: 200 points), a PreferNoSchedule taint on `packed`
/// (TaintToleration, weight 3: 300 points) and soft topology spread away from the 600's node
/// (PodTopologySpread, weight 2: 200 points). With weight 10 the policy's 1000 points outweigh
/// all three together (700); with a weight below their sum they decide.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_policy_weight_against_the_other_scorers() {
    use ksched_scheduler::inprocess::InProcessCluster;
    use serde_json::json;

    #[derive(Clone, Copy)]
    struct Prefs {
        affinity: bool,
        taint: bool,
        spread: bool,
    }
    const NONE: Prefs = Prefs { affinity: false, taint: false, spread: false };
    const ALL: Prefs = Prefs { affinity: true, taint: true, spread: true };

    async fn placement(weight: u32, prefs: Prefs) -> String {
        let text = std::fs::read_to_string(EXAMPLE).unwrap().replace("weight: 10", &format!("weight: {weight}"));
        let cfg = load(&text);
        let mut c = InProcessCluster::new(
            &cfg,
            &ksched_plugins::in_tree_registry(),
            Arc::new(ksched_scheduler::metrics::NoopMetrics),
        )
        .unwrap();
        for name in ["packed", "fresh"] {
            let taints = if prefs.taint && name == "packed" {
                json!([{"key": "maintenance", "effect": "PreferNoSchedule"}])
            } else {
                json!([])
            };
            c.apply_node(
                serde_json::from_value::<ksched_framework::node::Node>(json!({"metadata": {"name": name,
                    "labels": {"kubernetes.io/hostname": name}}, "spec": {"taints": taints},
                    "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"}}}))
                .unwrap(),
            );
            c.apply_resource_slice(
                serde_json::from_value(json!({"metadata": {"name": format!("{name}-gpus")}, "spec": {
                    "driver": "gpu.ksched.dev", "nodeName": name, "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                    "devices": [{"name": "gpu-0", "allowMultipleAllocations": true, "attributes": {"model": {"string": "T4"}},
                        "capacity": {"milligpu": {"value": "1000"}}}]}}))
                .unwrap(),
            );
        }
        c.apply_device_class(
            serde_json::from_value(json!({"metadata": {"name": "gpu.ksched.dev"}, "spec": {"selectors": [
                {"cel": {"expression": "device.driver == 'gpu.ksched.dev'"}}]}}))
            .unwrap(),
        );
        let claim = |name: &str, milli: i64| {
            serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default"}, "spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "gpu.ksched.dev", "allocationMode": "ExactCount", "count": 1,
                    "capacity": {"requests": {"milligpu": milli.to_string()}}}}]}}}))
            .unwrap()
        };
        let pod = |name: &str, extra: serde_json::Value| -> ksched_framework::pod::Pod {
            let mut spec = json!({"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}],
                "resourceClaims": [{"name": "gpu", "resourceClaimName": name}]});
            for (k, v) in extra.as_object().unwrap() {
                spec[k] = v.clone();
            }
            serde_json::from_value(
                json!({"metadata": {"name": name, "namespace": "default", "labels": {"app": "x"}}, "spec": spec}),
            )
            .unwrap()
        };
        c.apply_resource_claim(claim("first", 600)).unwrap();
        c.apply_pod(pod(
            "first",
            json!({"nodeSelector": {"kubernetes.io/hostname": "packed"},
            "tolerations": [{"key": "maintenance", "operator": "Exists"}]}),
        ));
        c.start();
        let wait = |c: &InProcessCluster, n: usize| {
            let start = std::time::Instant::now();
            while c.bound() < n {
                assert!(start.elapsed() < std::time::Duration::from_secs(20), "timed out");
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        };
        wait(&c, 1);
        let mut extra = serde_json::Map::new();
        if prefs.affinity {
            extra.insert(
                "affinity".into(),
                json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "preference": {"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": ["fresh"]}]}}]}}),
            );
        }
        if prefs.spread {
            extra.insert(
                "topologySpreadConstraints".into(),
                json!([{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchLabels": {"app": "x"}}}]),
            );
        }
        c.apply_resource_claim(claim("second", 400)).unwrap();
        c.apply_pod(pod("second", serde_json::Value::Object(extra)));
        wait(&c, 2);
        let node = c.placements()["default/second"].clone();
        c.stop().await;
        node
    }

    // Alone, the policy fills the GPU the 600 left, at any weight.
    assert_eq!(placement(1, NONE).await, "packed");
    assert_eq!(placement(10, NONE).await, "packed");
    // One preference of the pod against it: weight 1 (100 points) loses to any of them.
    for one in [Prefs { affinity: true, ..NONE }, Prefs { taint: true, ..NONE }, Prefs { spread: true, ..NONE }] {
        assert_eq!(placement(1, one).await, "fresh");
        assert_eq!(placement(10, one).await, "packed");
    }
    // All three together are worth 700 points: weight 10 still decides, weight 6 does not.
    assert_eq!(placement(10, ALL).await, "packed");
    assert_eq!(placement(6, ALL).await, "fresh");
}
