//! The checks run at the end of every replay, independent of the scheduler's own bookkeeping:
//! they recompute from the placements and from the claims as the API holds them that no GPU
//! gives out more than its 1000 milli, no node more cpu or memory than it has, every placed
//! pod's GPUs are in its claim's status (allocation results on its node, consumed capacity,
//! the pod in `reservedFor`), no dropped pod holds a GPU, and the milli the claims consume add
//! up to what the harness counts as allocated.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::resource::v1::ResourceClaim;

use super::cluster::{claim_name, device_name, CAPACITY, DRIVER};
use super::csv::{TraceNode, TracePod, GPU_MILLI};

/// Where one pod instance of a replay went.
#[derive(Debug, Clone)]
pub struct Placement {
    /// Instance name.
    pub name: String,
    /// Instance UID.
    pub uid: String,
    /// The node, or `None` when it fit nowhere.
    pub node: Option<String>,
    /// The trace pod it is an instance of.
    pub pod: TracePod,
}

fn consumed_milli(r: &k8s_openapi::api::resource::v1::DeviceRequestAllocationResult) -> Result<i64, String> {
    let q = r
        .consumed_capacity
        .as_ref()
        .and_then(|c| c.get(CAPACITY))
        .ok_or_else(|| format!("device {}/{}: no consumedCapacity[{CAPACITY}]", r.pool, r.device))?;
    ksched_framework::quantity::value(&q.0)
        .map_err(|e| format!("device {}/{}: consumedCapacity {:?}: {e}", r.pool, r.device, q.0))
}

/// Every violation found (empty when the state is consistent).
pub fn check(
    nodes: &[TraceNode],
    placements: &[Placement],
    claims: &HashMap<String, Arc<ResourceClaim>>,
    harness_allocated_milli: i64,
) -> Vec<String> {
    let mut v = Vec::new();
    let by_name: HashMap<&str, &TraceNode> = nodes.iter().map(|n| (n.name.as_str(), n)).collect();
    let mut cpu: HashMap<&str, i64> = HashMap::new();
    let mut mem: HashMap<&str, i64> = HashMap::new();
    let mut device_use: BTreeMap<(String, String), i64> = BTreeMap::new();
    let mut claimed_total = 0i64;
    for pl in placements {
        let claim = claims.get(&claim_name(&pl.name));
        let allocation = claim.and_then(|c| c.status.as_ref()).and_then(|s| s.allocation.as_ref());
        let Some(node_name) = pl.node.as_deref() else {
            if allocation.is_some() {
                v.push(format!("pod {} was dropped but its claim is allocated", pl.name));
            }
            continue;
        };
        let Some(node) = by_name.get(node_name) else {
            v.push(format!("pod {} placed on unknown node {node_name}", pl.name));
            continue;
        };
        *cpu.entry(node_name).or_default() += pl.pod.cpu_milli;
        *mem.entry(node_name).or_default() += pl.pod.memory_mib;
        if pl.pod.num_gpu == 0 {
            if claim.is_some() {
                v.push(format!("pod {} uses no GPU but has a claim", pl.name));
            }
            continue;
        }
        let Some(claim) = claim else {
            v.push(format!("pod {} uses {} GPU(s) but has no claim", pl.name, pl.pod.num_gpu));
            continue;
        };
        let Some(allocation) = allocation else {
            v.push(format!("pod {} is on {node_name} but its claim has no allocation", pl.name));
            continue;
        };
        let reserved = claim.status.as_ref().and_then(|s| s.reserved_for.as_ref());
        if !reserved.is_some_and(|r| r.iter().any(|c| c.uid == pl.uid)) {
            v.push(format!("pod {}: its claim is not reserved for it", pl.name));
        }
        let results: Vec<_> = allocation.devices.iter().flat_map(|d| d.results.iter().flatten()).collect();
        if results.len() as i64 != pl.pod.num_gpu {
            v.push(format!("pod {}: {} device(s) allocated, it uses {}", pl.name, results.len(), pl.pod.num_gpu));
        }
        let want = pl.pod.gpu_milli;
        let mut seen = Vec::new();
        for r in results {
            if r.driver != DRIVER || r.pool != node_name {
                v.push(format!(
                    "pod {} on {node_name}: device {}/{}/{} is not one of its node's",
                    pl.name, r.driver, r.pool, r.device
                ));
                continue;
            }
            if !(0..node.gpus).any(|i| device_name(i) == r.device) {
                v.push(format!("pod {}: {node_name} has no device {}", pl.name, r.device));
                continue;
            }
            if seen.contains(&r.device) {
                v.push(format!("pod {}: device {} allocated twice to it", pl.name, r.device));
            }
            seen.push(r.device.clone());
            if !pl.pod.gpu_spec.is_empty() && !pl.pod.gpu_spec.contains(&node.model) {
                v.push(format!(
                    "pod {} accepts {} but got a {} on {node_name}",
                    pl.name,
                    pl.pod.gpu_spec.join("|"),
                    node.model
                ));
            }
            match consumed_milli(r) {
                Ok(m) => {
                    if m != want {
                        v.push(format!(
                            "pod {}: consumes {m} milli of {}/{}, it uses {want}",
                            pl.name, r.pool, r.device
                        ));
                    }
                    *device_use.entry((r.pool.clone(), r.device.clone())).or_default() += m;
                    claimed_total += m;
                }
                Err(e) => v.push(format!("pod {}: {e}", pl.name)),
            }
        }
    }
    for ((pool, device), used) in &device_use {
        if *used > GPU_MILLI {
            v.push(format!("GPU {pool}/{device} gives out {used} milli (more than {GPU_MILLI})"));
        }
    }
    for n in nodes {
        let (c, m) = (cpu.get(n.name.as_str()).copied().unwrap_or(0), mem.get(n.name.as_str()).copied().unwrap_or(0));
        if c > n.cpu_milli {
            v.push(format!("node {}: pods request {c}m cpu, it has {}m", n.name, n.cpu_milli));
        }
        if m > n.memory_mib {
            v.push(format!("node {}: pods request {m}Mi memory, it has {}Mi", n.name, n.memory_mib));
        }
    }
    if claimed_total != harness_allocated_milli {
        v.push(format!(
            "the claims consume {claimed_total} milli in all, the harness counts {harness_allocated_milli} allocated"
        ));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str, gpus: i64) -> TraceNode {
        TraceNode { name: name.into(), cpu_milli: 8000, memory_mib: 16384, gpus, model: "T4".into() }
    }

    fn tpod(num_gpu: i64, milli: i64, cpu: i64) -> TracePod {
        TracePod::with_requests("p", cpu, 1024, num_gpu, milli, &[])
    }

    fn claim(pod: &str, uid: &str, devices: &[(&str, &str, &str)]) -> (String, Arc<ResourceClaim>) {
        let results: Vec<_> = devices
            .iter()
            .map(|(pool, dev, milli)| {
                json!({"request": "gpu", "driver": DRIVER, "pool": pool, "device": dev,
                    "consumedCapacity": {CAPACITY: milli}, "shareID": "s"})
            })
            .collect();
        let c: ResourceClaim = serde_json::from_value(json!({
            "metadata": {"name": claim_name(pod), "namespace": "trace"},
            "spec": {"devices": {"requests": []}},
            "status": {"allocation": {"devices": {"results": results}},
                "reservedFor": [{"resource": "pods", "name": pod, "uid": uid}]}
        }))
        .unwrap();
        (claim_name(pod), Arc::new(c))
    }

    fn placed(name: &str, node: Option<&str>, pod: TracePod) -> Placement {
        Placement { name: name.into(), uid: format!("{name}-uid"), node: node.map(str::to_string), pod }
    }

    /// Two pods sharing gpu-0 of n1, one whole-GPU pod on gpu-1.
    fn consistent() -> (Vec<TraceNode>, Vec<Placement>, HashMap<String, Arc<ResourceClaim>>) {
        let nodes = vec![node("n1", 2), node("n2", 1)];
        let pl = vec![
            placed("a", Some("n1"), tpod(1, 600, 1000)),
            placed("b", Some("n1"), tpod(1, 400, 1000)),
            placed("c", Some("n1"), tpod(1, 1000, 1000)),
            placed("d", None, tpod(1, 500, 1000)),
        ];
        let claims = [
            claim("a", "a-uid", &[("n1", "gpu-0", "600")]),
            claim("b", "b-uid", &[("n1", "gpu-0", "400")]),
            claim("c", "c-uid", &[("n1", "gpu-1", "1000")]),
        ]
        .into_iter()
        .collect();
        (nodes, pl, claims)
    }

    #[test]
    fn a_consistent_state_passes() {
        let (nodes, pl, claims) = consistent();
        assert_eq!(check(&nodes, &pl, &claims, 2000), Vec::<String>::new());
    }

    #[test]
    fn an_overcommitted_gpu_is_reported() {
        let (nodes, mut pl, mut claims) = consistent();
        pl.push(placed("e", Some("n1"), tpod(1, 300, 1000)));
        claims.extend([claim("e", "e-uid", &[("n1", "gpu-0", "300")])]);
        let v = check(&nodes, &pl, &claims, 2300);
        assert_eq!(v, ["GPU n1/gpu-0 gives out 1300 milli (more than 1000)"]);
    }

    #[test]
    fn an_overcommitted_node_is_reported() {
        let (nodes, mut pl, claims) = consistent();
        pl.push(placed("cpu-hog", Some("n1"), tpod(0, 0, 6000)));
        let v = check(&nodes, &pl, &claims, 2000);
        assert_eq!(v, ["node n1: pods request 9000m cpu, it has 8000m"]);
    }

    #[test]
    fn an_allocation_missing_from_the_claims_is_reported() {
        let (nodes, pl, mut claims) = consistent();
        let mut c = (*claims["b-gpu"]).clone();
        c.status = None;
        claims.insert("b-gpu".into(), Arc::new(c));
        let v = check(&nodes, &pl, &claims, 2000);
        assert!(v.contains(&"pod b is on n1 but its claim has no allocation".to_string()), "{v:?}");
        assert!(v.iter().any(|m| m.starts_with("the claims consume 1600 milli")), "{v:?}");
    }

    #[test]
    fn a_wrong_count_or_consumption_or_node_is_reported() {
        let (nodes, pl, mut claims) = consistent();
        claims.extend([claim("a", "a-uid", &[("n2", "gpu-0", "500")])]);
        let v = check(&nodes, &pl, &claims, 2000);
        assert_eq!(
            v,
            [
                format!("pod a on n1: device {DRIVER}/n2/gpu-0 is not one of its node's"),
                "the claims consume 1400 milli in all, the harness counts 2000 allocated".to_string()
            ]
        );
        let (nodes, pl, mut claims) = consistent();
        claims.extend([claim("c", "c-uid", &[("n1", "gpu-1", "700")])]);
        let v = check(&nodes, &pl, &claims, 2000);
        assert_eq!(v[0], "pod c: consumes 700 milli of n1/gpu-1, it uses 1000");
    }

    #[test]
    fn a_dropped_pod_holding_a_gpu_and_a_harness_miscount_are_reported() {
        let (nodes, pl, mut claims) = consistent();
        claims.extend([claim("d", "d-uid", &[("n2", "gpu-0", "500")])]);
        let v = check(&nodes, &pl, &claims, 2000);
        assert_eq!(v, ["pod d was dropped but its claim is allocated"]);
        let (nodes, pl, claims) = consistent();
        assert_eq!(
            check(&nodes, &pl, &claims, 2100),
            ["the claims consume 2000 milli in all, the harness counts 2100 allocated"]
        );
    }

    #[test]
    fn a_claim_not_reserved_for_its_pod_is_reported() {
        let (nodes, pl, mut claims) = consistent();
        claims.extend([claim("a", "someone-else", &[("n1", "gpu-0", "600")])]);
        assert_eq!(check(&nodes, &pl, &claims, 2000), ["pod a: its claim is not reserved for it"]);
    }
}
