//! Gang throughput of the pod-group cycle, in process: `GANGS` pod groups of `SIZE` pods (1 cpu
//! each, minCount = SIZE) on `NODES` nodes over 50 zones, created at once after the nodes.
//! Prints gangs/s and pods/s from the first pod group's creation to the last binding.
//!
//! `cargo run --release -p ksched-scheduler --example gang_bench -- [NODES] [GANGS] [SIZE] [topology] [past-upstream]`
//! (`topology`: each gang must land in one zone, TopologyAwareWorkloadScheduling on;
//! `past-upstream`: GangScheduling's opt-in args `allOrNothing`, `gangPreemption`,
//! `reserveAfterSeconds: 30`, and with `topology` TopologyPlacementGenerator's `bestFit`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use ksched_scheduler::config::{default_config_with, PluginArgs, PluginConfig, SchedulerFeatures};
use ksched_scheduler::inprocess::InProcessCluster;
use serde_json::json;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, d: usize| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(d);
    let (nodes, gangs, size) = (arg(0, 5000), arg(1, 1000), arg(2, 8));
    let topology = args.iter().any(|a| a == "topology");
    let past_upstream = args.iter().any(|a| a == "past-upstream");
    let features = SchedulerFeatures {
        generic_workload: true,
        gang_scheduling: true,
        topology_aware_workload_scheduling: topology,
        ..SchedulerFeatures::default()
    };
    let mut cfg = default_config_with(&features);
    if past_upstream {
        let mut set = |name: &str, args: serde_json::Value| {
            cfg.profiles[0].plugin_config.push(PluginConfig { name: name.into(), args: PluginArgs::Unknown(args) });
        };
        set("GangScheduling", json!({"allOrNothing": true, "gangPreemption": true, "reserveAfterSeconds": 30}));
        if topology {
            set("TopologyPlacementGenerator", json!({"bestFit": true}));
        }
    }
    let registry = ksched_plugins::in_tree_registry();
    let mut c = InProcessCluster::new(&cfg, &registry, Arc::new(ksched_scheduler::metrics::NoopMetrics))?;
    for i in 0..nodes {
        c.apply_node(serde_json::from_value::<ksched_framework::node::Node>(json!({
            "metadata": {"name": format!("node-{i}"), "labels": {"zone": format!("zone-{}", i % 50)}},
            "status": {"allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"}}
        }))?);
    }
    c.start();
    let start = Instant::now();
    for g in 0..gangs {
        let mut spec = json!({"schedulingPolicy": {"gang": {"minCount": size}}});
        if topology {
            spec["schedulingConstraints"] = json!({"topology": [{"key": "zone"}]});
        }
        c.apply_pod_group(serde_json::from_value(
            json!({"metadata": {"name": format!("gang-{g}"), "namespace": "default"}, "spec": spec}),
        )?);
        for p in 0..size {
            c.apply_pod(serde_json::from_value::<ksched_framework::pod::Pod>(json!({
                "metadata": {"name": format!("gang-{g}-{p}"), "namespace": "default"},
                "spec": {"schedulingGroup": {"podGroupName": format!("gang-{g}")},
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}
            }))?);
        }
    }
    let total = gangs * size;
    while c.bound() < total && start.elapsed() < Duration::from_secs(600) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let secs = start.elapsed().as_secs_f64();
    let bound = c.bound();
    println!(
        "{gangs} gangs x {size} pods on {nodes} nodes{}{}: {bound}/{total} pods bound in {secs:.2}s = {:.1} gangs/s, {:.0} pods/s",
        if topology { " (one zone each)" } else { "" },
        if past_upstream { " (past-upstream args)" } else { "" },
        bound as f64 / size as f64 / secs,
        bound as f64 / secs
    );
    c.stop().await;
    Ok(())
}
