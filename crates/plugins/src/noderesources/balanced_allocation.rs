//! NodeResourcesBalancedAllocation (upstream `framework/plugins/noderesources`): favours nodes whose resource usage stays balanced
//! across resources, scoring the change in balance the pod causes.

use std::sync::Arc;

use ksched_framework::{
    CycleState, Handle, NodeInfo, Plugin, PodInfo, PreScorePlugin, ScorePlugin, Status, MAX_NODE_SCORE,
};

use super::args::{aggregate, NodeResourcesBalancedAllocationArgs};
use super::resource_allocation::ResourceAllocation;
use crate::names::NODE_RESOURCES_BALANCED_ALLOCATION;

/// CycleState key of the per-resource pod requests computed at PreScore.
pub const PRE_SCORE_STATE_KEY: &str = "PreScoreNodeResourcesBalancedAllocation";

#[derive(Debug, Clone)]
struct PreScoreState(Arc<[i64]>);

/// The NodeResourcesBalancedAllocation plugin.
#[derive(Debug)]
pub struct BalancedAllocation {
    allocation: ResourceAllocation,
    classes: super::fit::DeviceClasses,
}

/// Builds NodeResourcesBalancedAllocation from its (v1, possibly partial) args; they are defaulted
/// then validated.
pub fn new(args: Option<&serde_json::Value>, handle: &Handle) -> Result<Arc<dyn Plugin>, String> {
    let mut args: NodeResourcesBalancedAllocationArgs = ksched_framework::registry::decode_args(args)?;
    args.set_defaults();
    let mut plugin = BalancedAllocation::from_args(&args)?;
    plugin.classes = super::fit::DeviceClasses(Some(handle.lister.clone()));
    Ok(Arc::new(plugin))
}

impl BalancedAllocation {
    /// Builds the plugin from already-defaulted args, validating them.
    pub fn from_args(args: &NodeResourcesBalancedAllocationArgs) -> Result<BalancedAllocation, String> {
        if let Some(err) = aggregate(&args.validate("")) {
            return Err(err);
        }
        // Balance is about actual usage, so raw requests (no 100m/200MiB defaults) on both sides.
        Ok(BalancedAllocation {
            allocation: ResourceAllocation::new(&args.resources, true),
            classes: super::fit::DeviceClasses::default(),
        })
    }

    fn score_with(&self, node: &NodeInfo, pod_requests: &[i64]) -> Result<i64, Status> {
        if self.allocation.is_empty() {
            return Err(Status::error("resources not found"));
        }
        // One pass computes the balance with and without the pod (a second one only for more
        // than two resources): the entries stay in registers.
        let (mut with_pod, mut without_pod) = (Fractions::default(), Fractions::default());
        if let Some(pair) = self.allocation.cpu_memory_entries(node, pod_requests) {
            for e in pair.into_iter().flatten() {
                with_pod.push(e.requested, e.allocatable);
                without_pod.push(e.allocated, e.allocatable);
            }
            return Ok(combine(with_pod.balance(0.0), without_pod.balance(0.0)));
        }
        for e in self.allocation.entries(node, pod_requests) {
            with_pod.push(e.requested, e.allocatable);
            without_pod.push(e.allocated, e.allocatable);
        }
        let (with_pod, without_pod) = if with_pod.n > 2 {
            let (mut dev_with, mut dev_without) = (0.0, 0.0);
            let (mean_with, mean_without) = (with_pod.mean(), without_pod.mean());
            for e in self.allocation.entries(node, pod_requests) {
                dev_with += squared_deviation(e.requested, e.allocatable, mean_with);
                dev_without += squared_deviation(e.allocated, e.allocatable, mean_without);
            }
            (with_pod.balance(dev_with), without_pod.balance(dev_without))
        } else {
            (with_pod.balance(0.0), without_pod.balance(0.0))
        };
        Ok(combine(with_pod, without_pod))
    }
}

/// Both balances lie in [50, 100]; their difference is folded back into [50, 100] so a neutral
/// placement scores about 75.
fn combine(with_pod: i64, without_pod: i64) -> i64 {
    MAX_NODE_SCORE / 2 + (MAX_NODE_SCORE / 2 + with_pod - without_pod) / 2
}

/// `min(1, used/allocatable)`, upstream's per-resource fraction.
fn fraction(used: i64, allocatable: i64) -> f64 {
    (used as f64 / allocatable as f64).min(1.0)
}

fn squared_deviation(used: i64, allocatable: i64, mean: f64) -> f64 {
    let d = fraction(used, allocatable) - mean;
    d * d
}

/// Running sums of the fractions of one side (with or without the pod).
#[derive(Default)]
struct Fractions {
    n: usize,
    total: f64,
    first: f64,
    second: f64,
}

impl Fractions {
    fn push(&mut self, used: i64, allocatable: i64) {
        let f = fraction(used, allocatable);
        match self.n {
            0 => self.first = f,
            1 => self.second = f,
            _ => {}
        }
        self.total += f;
        self.n += 1;
    }

    fn mean(&self) -> f64 {
        self.total / self.n as f64
    }

    /// `(1 − std) × 100` truncated, where std is the population standard deviation of the
    /// fractions (|f1 − f2| / 2 for exactly two, 0 for fewer; from `sum_sq_dev`, the summed
    /// squared deviations from the mean, for more). The float operations are upstream's, in the
    /// same order.
    fn balance(&self, sum_sq_dev: f64) -> i64 {
        let std = match self.n {
            0 | 1 => 0.0,
            2 => ((self.first - self.second) / 2.0).abs(),
            n => (sum_sq_dev / n as f64).sqrt(),
        };
        ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
    }
}

impl Plugin for BalancedAllocation {
    fn name(&self) -> &str {
        NODE_RESOURCES_BALANCED_ALLOCATION
    }
    fn as_sign(&self) -> Option<&dyn ksched_framework::SignPlugin> {
        Some(self)
    }
    fn as_memo(&self) -> Option<&dyn ksched_framework::MemoPlugin> {
        Some(self)
    }
    fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
        Some(self)
    }
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }
}

/// Scores depend on the pod's requests.
impl ksched_framework::SignPlugin for BalancedAllocation {
    fn sign_pod(
        &self,
        pod: &ksched_framework::PodInfo,
        sig: &mut ksched_framework::batch::SignatureBuilder,
    ) -> ksched_framework::Status {
        super::fit::sign_requests(&self.classes, pod, sig)
    }
}

impl PreScorePlugin for BalancedAllocation {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _nodes: &[&NodeInfo],
        _snapshot: &ksched_framework::Snapshot,
    ) -> Status {
        let reqs = self.allocation.pod_requests(pod);
        // Best-effort pods would otherwise all pile onto the same most-balanced node.
        if reqs.iter().all(|&r| r == 0) {
            return Status::skip();
        }
        state.write(PRE_SCORE_STATE_KEY, PreScoreState(reqs.into()));
        Status::success()
    }
}

impl ScorePlugin for BalancedAllocation {
    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        if let Ok(PreScoreState(reqs)) = state.read::<PreScoreState>(PRE_SCORE_STATE_KEY) {
            return self.score_with(node, reqs);
        }
        let reqs = self.allocation.pod_requests(pod);
        if reqs.iter().all(|&r| r == 0) {
            return Ok(0);
        }
        self.score_with(node, &reqs)
    }

    fn score_nodes(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: &[&NodeInfo],
        out: &mut [i64],
    ) -> Result<(), (usize, Status)> {
        let computed;
        let reqs: &[i64] = match state.read::<PreScoreState>(PRE_SCORE_STATE_KEY) {
            Ok(PreScoreState(reqs)) => reqs,
            Err(_) => {
                computed = self.allocation.pod_requests(pod);
                if computed.iter().all(|&r| r == 0) {
                    out.fill(0);
                    return Ok(());
                }
                &computed
            }
        };
        ksched_framework::score_each(nodes, out, |node| self.score_with(node, reqs))
    }
}

/// Score reads the amounts of the balanced resources PreScore computes from the pod.
impl ksched_framework::MemoPlugin for BalancedAllocation {
    fn memo_inputs(
        &self,
        _state: &CycleState,
        pod: &PodInfo,
        w: &mut ksched_framework::batch::FragmentWriter<'_>,
    ) -> bool {
        ksched_framework::memo::write_amounts(&self.allocation.pod_requests(pod), w);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::noderesources::args::ResourceSpec;
    use crate::noderesources::testutil::{node_info, pod};
    use ksched_framework::Code;
    use serde_json::{json, Value};

    fn plugin(resources: &[(&str, i64)]) -> BalancedAllocation {
        let args = NodeResourcesBalancedAllocationArgs {
            resources: resources.iter().map(|&(n, w)| ResourceSpec::new(n, w)).collect(),
        };
        BalancedAllocation::from_args(&args).unwrap()
    }

    struct Case {
        name: &'static str,
        pod: Value,
        nodes: Vec<(Value, Vec<Value>)>,
        resources: &'static [(&'static str, i64)],
        run_pre_score: bool,
        want: Vec<i64>,
    }

    const CPU_MEM: &[(&str, i64)] = &[("cpu", 1), ("memory", 1)];
    const CPU_MEM_GPU: &[(&str, i64)] = &[("cpu", 1), ("memory", 1), ("nvidia.com/gpu", 1)];

    fn cap(cpu_milli: i64, mem: i64) -> Value {
        json!({"cpu": format!("{cpu_milli}m"), "memory": mem.to_string(), "pods": "100"})
    }

    fn cap_gpu(cpu_milli: i64, mem: i64, gpu: i64) -> Value {
        let mut v = cap(cpu_milli, mem);
        v["nvidia.com/gpu"] = json!(gpu.to_string());
        v
    }

    #[test]
    fn scores() {
        // Pods are a list of per-container requests; the upstream cases in comments give the
        // balances before and after the pod lands.
        let two_containers = json!([{"cpu": "1000m", "memory": "2000"}, {"cpu": "2000m", "memory": "3000"}]);
        let cpu_only = json!([{"cpu": "1000m"}, {"cpu": "2000m"}]);
        let cases = vec![
            Case {
                // node1: 100 -> 87, node2: 100 -> 100
                name: "nothing scheduled, resources requested, differently sized nodes",
                pod: two_containers.clone(),
                nodes: vec![(cap(4000, 10000), vec![]), (cap(6000, 10000), vec![])],
                resources: CPU_MEM,
                run_pre_score: true,
                want: vec![68, 75],
            },
            Case {
                // node1: 85 -> 82, node2: 97 -> 95
                name: "resources requested, pods scheduled with resources",
                pod: two_containers.clone(),
                nodes: vec![(cap(10000, 20000), vec![cpu_only.clone()]), (cap(10000, 20000), vec![two_containers.clone()])],
                resources: CPU_MEM,
                run_pre_score: true,
                want: vec![73, 74],
            },
            Case {
                name: "resources requested, pods scheduled with resources, differently sized nodes",
                pod: two_containers.clone(),
                nodes: vec![(cap(10000, 20000), vec![cpu_only.clone()]), (cap(10000, 50000), vec![two_containers.clone()])],
                resources: CPU_MEM,
                run_pre_score: true,
                want: vec![73, 70],
            },
            Case {
                // node1: 50 -> 100, node2: 100 -> 50
                name: "resources requested, pods scheduled with resources, nodes to reach min/max score",
                pod: json!([{"memory": "2000"}, {"memory": "3000"}]),
                nodes: vec![(cap(3000, 5000), vec![cpu_only.clone()]), (cap(3000, 5000), vec![])],
                resources: CPU_MEM,
                run_pre_score: true,
                want: vec![100, 50],
            },
            Case {
                name: "requested resources at node capacity",
                pod: cpu_only.clone(),
                nodes: vec![(cap(6000, 10000), vec![cpu_only.clone()]), (cap(6000, 10000), vec![two_containers.clone()])],
                resources: CPU_MEM,
                run_pre_score: true,
                want: vec![62, 62],
            },
            Case {
                // three fractions: population standard deviation
                name: "scalar resource is included in the score computation if pod requests the scalar resource",
                pod: json!([{"cpu": "0", "memory": "0", "nvidia.com/gpu": "1"}]),
                nodes: vec![
                    (
                        cap_gpu(3500, 40000, 8),
                        vec![json!([{"cpu": "1000m", "memory": "2000"}, {"cpu": "2000m", "memory": "3000", "nvidia.com/gpu": "3"}])],
                    ),
                    (cap_gpu(3500, 40000, 8), vec![two_containers.clone()]),
                ],
                resources: CPU_MEM_GPU,
                run_pre_score: true,
                want: vec![75, 76],
            },
            Case {
                name: "scalar resource is not included in the score computation if pod doesn't request the scalar resource",
                pod: two_containers.clone(),
                nodes: vec![(cap_gpu(3500, 40000, 8), vec![]), (cap(3500, 40000), vec![])],
                resources: CPU_MEM_GPU,
                run_pre_score: true,
                want: vec![56, 56],
            },
            Case {
                name: "resources requested, pods scheduled with resources if PreScore not called",
                pod: two_containers.clone(),
                nodes: vec![(cap(10000, 20000), vec![cpu_only.clone()]), (cap(10000, 20000), vec![two_containers.clone()])],
                resources: CPU_MEM,
                run_pre_score: false,
                want: vec![73, 74],
            },
            Case {
                name: "best-effort pod without PreScore scores 0",
                pod: json!([{}]),
                nodes: vec![(cap(10000, 20000), vec![cpu_only.clone()])],
                resources: CPU_MEM,
                run_pre_score: false,
                want: vec![0],
            },
            Case {
                // only cpu has allocatable: a single fraction has no deviation
                name: "single scored resource is always balanced",
                pod: cpu_only.clone(),
                nodes: vec![(json!({"cpu": "10", "pods": "10"}), vec![])],
                resources: CPU_MEM,
                run_pre_score: true,
                want: vec![75],
            },
        ];
        for c in cases {
            let pl = plugin(c.resources);
            let incoming = pod(c.pod.clone());
            let mut state = CycleState::new();
            if c.run_pre_score {
                assert_eq!(
                    pl.pre_score(&mut state, &incoming, &[], &ksched_framework::Snapshot::default()),
                    Status::success(),
                    "{}",
                    c.name
                );
            }
            let got: Vec<i64> = c
                .nodes
                .iter()
                .map(|(alloc, pods)| {
                    let pods: Vec<_> = pods.iter().map(|p| pod(p.clone())).collect();
                    pl.score(&state, &incoming, &node_info(alloc.clone(), &pods)).unwrap()
                })
                .collect();
            assert_eq!(got, c.want, "{}", c.name);
        }
    }

    #[test]
    fn pre_score_skips_best_effort_pods() {
        let pl = plugin(CPU_MEM);
        let cases = [
            ("no requests", json!([{}]), Code::Skip),
            ("explicit zero requests", json!([{"cpu": "0", "memory": "0"}]), Code::Skip),
            ("unconfigured resource only", json!([{"example.com/foo": "1"}]), Code::Skip),
            ("cpu request", json!([{"cpu": "1m"}]), Code::Success),
        ];
        for (name, p, want) in cases {
            let mut state = CycleState::new();
            assert_eq!(
                pl.pre_score(&mut state, &pod(p), &[], &ksched_framework::Snapshot::default()).code(),
                want,
                "{name}"
            );
        }
    }

    #[test]
    fn factory_defaults_and_validates() {
        let h = Handle::for_tests();
        assert!(new(None, &h).is_ok());
        assert!(new(Some(&json!({"resources": [{"name": "cpu"}]})), &h).is_ok());
        assert_eq!(
            new(Some(&json!({"resources": [{"name": "cpu", "weight": 2}, {"name": "cpu", "weight": 3}]})), &h)
                .err()
                .unwrap(),
            "[resources[0].weight: Invalid value: 2: must be 1, resources[1].name: Duplicate value: \"cpu\", resources[1].weight: Invalid value: 3: must be 1]"
        );
        assert!(new(Some(&json!({"unknown": 1})), &h).is_err());
    }
}
