//! KubeSchedulerConfiguration decoding (YAML/JSON, v1) and validation: errors, never panics.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(cfg) = ksched_scheduler::config::load_config(data, "fuzz.yaml") {
        let _ = ksched_scheduler::config::validate(&cfg);
        let _ = ksched_scheduler::config::to_yaml(&cfg);
    }
});
