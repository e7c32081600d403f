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
