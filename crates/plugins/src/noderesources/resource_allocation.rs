//! The machinery shared by the resource scorers: which resources to look at, the pod's request of
//! each, and the node's allocatable/allocated amounts.

use ksched_framework::resource::{is_scalar_resource_name, Resource, CPU, EPHEMERAL_STORAGE, MEMORY};
use ksched_framework::{NodeInfo, PodInfo};

use super::args::ResourceSpec;

/// How a configured resource name maps onto the resource vectors.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Cpu,
    Memory,
    EphemeralStorage,
    /// Looked up among the scalar resources (any other name, including `pods`, which is never
    /// a scalar and therefore never scored).
    Other {
        scalar: bool,
    },
}

/// A configured resource, resolved once at construction.
#[derive(Debug, Clone)]
pub(crate) struct ScoredResource {
    name: String,
    kind: Kind,
    /// The configured weight.
    pub weight: i64,
}

impl ScoredResource {
    fn amount(&self, r: &Resource) -> i64 {
        match self.kind {
            Kind::Cpu => r.milli_cpu,
            Kind::Memory => r.memory,
            Kind::EphemeralStorage => r.ephemeral_storage,
            Kind::Other { .. } => r.scalar_resources.get(&self.name).copied().unwrap_or(0),
        }
    }
}

/// One resource's inputs to a scorer, for a node where it has non-zero allocatable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Entry {
    /// Weight of the resource.
    pub weight: i64,
    /// Node allocatable.
    pub allocatable: i64,
    /// What the node's pods already request.
    pub allocated: i64,
    /// `allocated` plus the incoming pod's request.
    pub requested: i64,
}

/// The resource list of a scorer and whether it reads raw requests or the non-zero defaulted ones.
#[derive(Debug, Clone)]
pub(crate) struct ResourceAllocation {
    resources: Vec<ScoredResource>,
    /// Raw requests for cpu/memory (BalancedAllocation) instead of the 100m/200MiB defaults (Fit).
    use_requested: bool,
    /// Whether the list is exactly cpu then memory (the default), which
    /// [`ResourceAllocation::cpu_memory_entries`] serves without the generic per-resource walk.
    cpu_memory: bool,
}

impl ResourceAllocation {
    /// Resolves the configured resources.
    pub fn new(resources: &[ResourceSpec], use_requested: bool) -> Self {
        let resources = resources
            .iter()
            .map(|r| ScoredResource {
                name: r.name.clone(),
                kind: match r.name.as_str() {
                    CPU => Kind::Cpu,
                    MEMORY => Kind::Memory,
                    EPHEMERAL_STORAGE => Kind::EphemeralStorage,
                    n => Kind::Other { scalar: is_scalar_resource_name(n) },
                },
                weight: r.weight,
            })
            .collect::<Vec<_>>();
        let cpu_memory = matches!(resources.as_slice(), [c, m] if c.kind == Kind::Cpu && m.kind == Kind::Memory);
        ResourceAllocation { resources, use_requested, cpu_memory }
    }

    /// True when no resource is configured (upstream then fails scoring).
    pub fn is_empty(&self) -> bool {
        self.resources.is_empty()
    }

    /// The pod's request of every configured resource, aligned with the configuration.
    pub fn pod_requests(&self, pod: &PodInfo) -> Vec<i64> {
        let reqs = if self.use_requested { &pod.requests } else { &pod.non_zero_requests };
        self.resources.iter().map(|r| r.amount(reqs)).collect()
    }

    /// The scorer inputs of every resource the node can be scored on: resources the node has no
    /// allocatable of are left out, and so are scalar resources the pod does not request.
    pub fn entries<'a>(&'a self, node: &'a NodeInfo, pod_requests: &'a [i64]) -> impl Iterator<Item = Entry> + 'a {
        self.resources.iter().zip(pod_requests).filter_map(move |(r, &pod_req)| {
            if pod_req == 0 && matches!(r.kind, Kind::Other { scalar: true }) {
                return None;
            }
            let allocatable = r.amount(&node.allocatable);
            if allocatable == 0 {
                return None;
            }
            let allocated = match r.kind {
                Kind::Cpu => self.allocated_cpu_memory(node).0,
                Kind::Memory => self.allocated_cpu_memory(node).1,
                _ => r.amount(&node.requested),
            };
            Some(Entry { weight: r.weight, allocatable, allocated, requested: allocated + pod_req })
        })
    }
}

impl ResourceAllocation {
    /// [`ResourceAllocation::entries`] for the default cpu+memory list, as a fixed pair (`None`
    /// where the node has no allocatable of the resource); `None` for any other list. Scoring runs
    /// for every feasible node of every pod, and the fixed shape keeps it branch-light.
    #[inline]
    pub fn cpu_memory_entries(&self, node: &NodeInfo, pod_requests: &[i64]) -> Option<[Option<Entry>; 2]> {
        if !self.cpu_memory {
            return None;
        }
        let [pod_cpu, pod_memory] = pod_requests else { return None };
        let (cpu, memory) = self.allocated_cpu_memory(node);
        let entry = |weight: i64, allocatable: i64, allocated: i64, pod_req: i64| {
            (allocatable != 0).then_some(Entry { weight, allocatable, allocated, requested: allocated + pod_req })
        };
        Some([
            entry(self.resources[0].weight, node.allocatable.milli_cpu, cpu, *pod_cpu),
            entry(self.resources[1].weight, node.allocatable.memory, memory, *pod_memory),
        ])
    }

    /// The scorer inputs of a whole placement (pod-group cycle): per resource, the nodes'
    /// summed allocatable and allocations, and `group_requests` plus those allocations as the
    /// request. A scalar resource the group does not request is left out, as for one node.
    pub fn placement_entries(&self, group_requests: &[i64], nodes: &[std::sync::Arc<NodeInfo>]) -> Vec<Entry> {
        let n = self.resources.len();
        let mut requested = group_requests.to_vec();
        requested.resize(n, 0);
        let (mut allocatable, mut allocated) = (vec![0i64; n], vec![0i64; n]);
        for node in nodes {
            let (cpu, memory) = self.allocated_cpu_memory(node);
            for (i, r) in self.resources.iter().enumerate() {
                if requested[i] == 0 && matches!(r.kind, Kind::Other { scalar: true }) {
                    continue;
                }
                let a = r.amount(&node.allocatable);
                if a == 0 {
                    continue;
                }
                let used = match r.kind {
                    Kind::Cpu => cpu,
                    Kind::Memory => memory,
                    _ => r.amount(&node.requested),
                };
                allocatable[i] += a;
                allocated[i] += used;
                requested[i] += used;
            }
        }
        (0..n)
            .filter(|&i| allocatable[i] != 0)
            .map(|i| Entry {
                weight: self.resources[i].weight,
                allocatable: allocatable[i],
                allocated: allocated[i],
                requested: requested[i],
            })
            .collect()
    }

    /// The cpu and memory already allocated on the node: the raw sums, or the sums with
    /// non-zero defaults (only cpu and memory have such an aggregate).
    #[inline]
    fn allocated_cpu_memory(&self, node: &NodeInfo) -> (i64, i64) {
        if self.use_requested {
            (node.requested.milli_cpu, node.requested.memory)
        } else {
            (node.non_zero_requested.milli_cpu, node.non_zero_requested.memory)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::noderesources::testutil::{node_info, pod};
    use serde_json::json;

    #[test]
    fn entries_skip_unrequested_scalars_and_zero_allocatable() {
        let specs = [
            ResourceSpec::new("cpu", 1),
            ResourceSpec::new("memory", 2),
            ResourceSpec::new("example.com/gpu", 3),
            ResourceSpec::new("example.com/fpga", 4),
            ResourceSpec::new("ephemeral-storage", 5),
            ResourceSpec::new("pods", 6),
        ];
        let existing = pod(json!({"cpu": "1", "ephemeral-storage": "10"}));
        let node = node_info(
            json!({"cpu": "4", "memory": "1Gi", "example.com/gpu": "8", "example.com/fpga": "2", "pods": "10", "ephemeral-storage": "100"}),
            &[existing],
        );
        let incoming = pod(json!({"example.com/gpu": "1"}));
        let fit = ResourceAllocation::new(&specs, false);
        let reqs = fit.pod_requests(&incoming);
        assert_eq!(reqs, vec![100, 200 << 20, 1, 0, 0, 0]);
        let got: Vec<Entry> = fit.entries(&node, &reqs).collect();
        assert_eq!(
            got,
            vec![
                Entry { weight: 1, allocatable: 4000, allocated: 1000, requested: 1100 },
                Entry { weight: 2, allocatable: 1 << 30, allocated: 200 << 20, requested: 400 << 20 },
                Entry { weight: 3, allocatable: 8, allocated: 0, requested: 1 },
                Entry { weight: 5, allocatable: 100, allocated: 10, requested: 10 },
            ]
        );
        let balanced = ResourceAllocation::new(&specs, true);
        let reqs = balanced.pod_requests(&incoming);
        assert_eq!(reqs, vec![0, 0, 1, 0, 0, 0]);
        let got: Vec<Entry> = balanced.entries(&node, &reqs).collect();
        assert_eq!(got[1], Entry { weight: 2, allocatable: 1 << 30, allocated: 0, requested: 0 });
        assert_eq!(balanced.cpu_memory_entries(&node, &reqs), None, "not the default list");
    }

    #[test]
    fn cpu_memory_entries_match_the_generic_walk() {
        let specs = [ResourceSpec::new("cpu", 3), ResourceSpec::new("memory", 5)];
        let existing = pod(json!({"cpu": "1", "memory": "1Gi"}));
        let incoming = [pod(json!({"cpu": "250m"})), pod(json!({})), pod(json!({"memory": "2Gi"}))];
        let nodes = [
            node_info(json!({"cpu": "4", "memory": "8Gi"}), std::slice::from_ref(&existing)),
            node_info(json!({"cpu": "4"}), std::slice::from_ref(&existing)),
            node_info(json!({"memory": "8Gi"}), &[]),
            node_info(json!({}), &[existing]),
        ];
        for use_requested in [false, true] {
            let alloc = ResourceAllocation::new(&specs, use_requested);
            for p in &incoming {
                let reqs = alloc.pod_requests(p);
                for n in &nodes {
                    let fast: Vec<Entry> =
                        alloc.cpu_memory_entries(n, &reqs).expect("default list").into_iter().flatten().collect();
                    let generic: Vec<Entry> = alloc.entries(n, &reqs).collect();
                    assert_eq!(fast, generic, "use_requested={use_requested}");
                }
            }
        }
        let swapped = ResourceAllocation::new(&[ResourceSpec::new("memory", 1), ResourceSpec::new("cpu", 1)], false);
        assert!(swapped.cpu_memory_entries(&nodes[0], &[0, 0]).is_none());
    }
}
