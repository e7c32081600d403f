//! The `performance` workloads of upstream scheduler_perf (its `*/performance-config.yaml`) as op lists.
//! Default counts are those of the 5000-node `performance` variant of each test case.

use super::templates::{NodeTemplate, PodTemplate, VolumeKind};

/// Workload sizes; CLI flags override the defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    /// Nodes (`initNodes`).
    pub nodes: usize,
    /// Init pods (`initPods`; `gatedPods` for SchedulingWhileGated, whose `deletingPods` is twice that).
    pub init_pods: usize,
    /// Measured pods (`measurePods`).
    pub pods: usize,
}

/// How a churn op treats its objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChurnMode {
    /// Create one object per template every interval, forever.
    Create,
    /// Alternately create and delete one object per template every interval.
    Recreate,
}

/// What a churn op creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChurnObject {
    /// A node.
    Node(NodeTemplate),
    /// A pod.
    Pod(PodTemplate),
    /// `churn/service-default.yaml`.
    Service,
}

/// One step of a workload (upstream's opcodes).
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// `createNodes`; labels `key` round-robin over `values` when given.
    CreateNodes {
        /// How many.
        count: usize,
        /// Shape.
        template: NodeTemplate,
        /// `labelNodePrepareStrategy`.
        label: Option<(&'static str, &'static [&'static str])>,
    },
    /// `createNamespaces`: `<prefix>-0 … <prefix>-(count-1)`.
    CreateNamespaces {
        /// Name prefix.
        prefix: &'static str,
        /// How many.
        count: usize,
    },
    /// `createPods` (namespace `namespace-<op index>` unless given).
    CreatePods {
        /// How many.
        count: usize,
        /// Shape.
        template: PodTemplate,
        /// Namespace override.
        namespace: Option<&'static str>,
        /// `collectMetrics`: this is the measured op.
        measured: bool,
        /// `skipWaitToCompletion`: do not wait for the pods to be scheduled.
        no_wait: bool,
        /// One pre-bound PV/PVC per pod.
        volume: Option<VolumeKind>,
    },
    /// `churn` in the op's namespace, until the workload ends.
    Churn {
        /// Create or recreate.
        mode: ChurnMode,
        /// Objects made every interval.
        objects: &'static [ChurnObject],
        /// Interval.
        interval_ms: u64,
    },
    /// `barrier` with `stageRequirement: Attempted` over all pods so far.
    BarrierAttempted,
    /// DRA `createResourceDriver` (one ResourceSlice per node created so far, `maxClaimsPerNode`
    /// devices each) and `deviceclass.yaml`.
    DraDriver {
        /// Devices per node.
        devices_per_node: usize,
    },
    /// `resourceclaimtemplate.yaml` in a namespace.
    DraClaimTemplate {
        /// The namespace.
        namespace: &'static str,
    },
    /// `resourceclaim.yaml` × count, then `allocResourceClaims` (allocated on random nodes).
    DraAllocatedClaims {
        /// How many.
        count: usize,
        /// The namespace.
        namespace: &'static str,
    },
    /// `createPods` with `steadyState`: keeps `count` pods of `template` in the queue for
    /// `seconds`, deleting each as it is scheduled and creating a replacement (measured).
    SteadyState {
        /// Pods kept pending.
        count: usize,
        /// Shape.
        template: PodTemplate,
        /// The namespace.
        namespace: &'static str,
        /// How long.
        seconds: u64,
    },
    /// `deletePods` of a namespace at a rate, in the background.
    DeletePods {
        /// The namespace (upstream op index based).
        namespace: &'static str,
        /// Rate.
        per_second: u32,
    },
}

/// A benchmark workload.
#[derive(Debug, Clone, Copy)]
pub struct Workload {
    /// Test-case name (upstream's).
    pub name: &'static str,
    /// The upstream workload whose counts are the defaults.
    pub upstream: &'static str,
    /// Default sizes.
    pub defaults: Params,
    /// Node count fixed by the workload (`--nodes` is ignored).
    pub fixed_nodes: Option<usize>,
    /// Plugins that must be registered for the workload to mean anything.
    pub requires: &'static [&'static str],
    build: fn(&Params) -> Vec<Op>,
}

impl Workload {
    /// The ops for `p`.
    pub fn ops(&self, p: &Params) -> Vec<Op> {
        (self.build)(p)
    }

    /// Defaults with the overrides applied.
    pub fn params(&self, nodes: Option<usize>, init_pods: Option<usize>, pods: Option<usize>) -> Params {
        Params {
            nodes: self.fixed_nodes.or(nodes).unwrap_or(self.defaults.nodes),
            init_pods: init_pods.unwrap_or(self.defaults.init_pods),
            pods: pods.unwrap_or(self.defaults.pods),
        }
    }
}

const ZONE: &str = "topology.kubernetes.io/zone";

fn nodes(count: usize) -> Op {
    Op::CreateNodes { count, template: NodeTemplate::Default, label: None }
}

fn nodes_labelled(count: usize, values: &'static [&'static str]) -> Op {
    Op::CreateNodes { count, template: NodeTemplate::Default, label: Some((ZONE, values)) }
}

fn pods(count: usize, template: PodTemplate, namespace: Option<&'static str>) -> Op {
    Op::CreatePods { count, template, namespace, measured: false, no_wait: false, volume: None }
}

fn measured(count: usize, template: PodTemplate, namespace: Option<&'static str>) -> Op {
    Op::CreatePods { count, template, namespace, measured: true, no_wait: false, volume: None }
}

fn sched_namespaces(count: usize) -> Op {
    Op::CreateNamespaces { prefix: "sched", count }
}

/// Init pods in `sched-0`, measured pods in `sched-1`, both of `template` (affinity test cases).
fn affinity_case(p: &Params, template: PodTemplate, zone1: bool) -> Vec<Op> {
    vec![
        if zone1 { nodes_labelled(p.nodes, &["zone1"]) } else { nodes(p.nodes) },
        sched_namespaces(2),
        pods(p.init_pods, template, Some("sched-0")),
        measured(p.pods, template, Some("sched-1")),
    ]
}

fn volume_case(p: &Params, kind: VolumeKind) -> Vec<Op> {
    let template = if kind == VolumeKind::Csi { NodeTemplate::Csi } else { NodeTemplate::Default };
    let with_volume = |count, measured| Op::CreatePods {
        count,
        template: PodTemplate::Default,
        namespace: None,
        measured,
        no_wait: false,
        volume: Some(kind),
    };
    vec![
        Op::CreateNodes { count: p.nodes, template, label: None },
        with_volume(p.init_pods, false),
        with_volume(p.pods, true),
    ]
}

const fn params(nodes: usize, init_pods: usize, pods: usize) -> Params {
    Params { nodes, init_pods, pods }
}

/// Upstream's throughput threshold (pods/s, SchedulerQueueingHints on as in v1.36) for the
/// workloads that have one at their default size.
pub fn upstream_threshold(name: &str) -> Option<f64> {
    match name {
        "SchedulingWithResourceClaimTemplate" => Some(56.0),
        "SteadyStateClusterResourceClaimTemplateEmpty" => Some(64.0),
        "SteadyStateClusterResourceClaimTemplateHalf" | "SteadyStateClusterResourceClaimTemplateFull" => Some(60.0),
        _ => None,
    }
}

/// `dra/SchedulingWithResourceClaimTemplate`: 10 devices per node, claims from templates.
fn dra_template_case(p: &Params) -> Vec<Op> {
    vec![
        nodes(p.nodes),
        Op::DraDriver { devices_per_node: 10 },
        Op::DraClaimTemplate { namespace: "init" },
        pods(p.init_pods, PodTemplate::ClaimTemplate, Some("init")),
        Op::DraClaimTemplate { namespace: "test" },
        measured(p.pods, PodTemplate::ClaimTemplate, Some("test")),
    ]
}

/// `dra/SteadyStateClusterResourceClaimTemplate`: `init_pods` claims allocated up front
/// (upstream's `initClaims`), then 10 pods kept pending for 10 s.
fn dra_steady_case(p: &Params) -> Vec<Op> {
    vec![
        nodes(p.nodes),
        Op::DraDriver { devices_per_node: 10 },
        Op::DraAllocatedClaims { count: p.init_pods, namespace: "init" },
        Op::DraClaimTemplate { namespace: "test" },
        Op::SteadyState { count: p.pods, template: PodTemplate::ClaimTemplate, namespace: "test", seconds: 10 },
    ]
}

const VOLUME_PLUGINS: &[&str] = &["VolumeBinding", "VolumeRestrictions", "VolumeZone", "NodeVolumeLimits"];

/// Every workload, in upstream's order.
pub const WORKLOADS: &[Workload] = &[
    Workload {
        name: "SchedulingBasic",
        upstream: "misc/SchedulingBasic/5000Nodes_10000Pods",
        defaults: params(5000, 1000, 10000),
        fixed_nodes: None,
        requires: &[],
        build: |p| {
            vec![
                nodes(p.nodes),
                pods(p.init_pods, PodTemplate::Default, None),
                measured(p.pods, PodTemplate::Default, None),
            ]
        },
    },
    Workload {
        name: "SchedulingPodAntiAffinity",
        upstream: "affinity/SchedulingPodAntiAffinity/5000Nodes_2000Pods",
        defaults: params(5000, 1000, 2000),
        fixed_nodes: None,
        requires: &["InterPodAffinity"],
        build: |p| affinity_case(p, PodTemplate::PodAntiAffinity, false),
    },
    Workload {
        name: "SchedulingPodAffinity",
        upstream: "affinity/SchedulingPodAffinity/5000Nodes_5000Pods",
        defaults: params(5000, 5000, 5000),
        fixed_nodes: None,
        requires: &["InterPodAffinity"],
        build: |p| affinity_case(p, PodTemplate::PodAffinity, true),
    },
    Workload {
        name: "SchedulingPreferredPodAffinity",
        upstream: "affinity/SchedulingPreferredPodAffinity/5000Nodes_5000Pods",
        defaults: params(5000, 5000, 5000),
        fixed_nodes: None,
        requires: &["InterPodAffinity"],
        build: |p| affinity_case(p, PodTemplate::PreferredPodAffinity, false),
    },
    Workload {
        name: "SchedulingPreferredPodAntiAffinity",
        upstream: "affinity/SchedulingPreferredPodAntiAffinity/5000Nodes_5000Pods",
        defaults: params(5000, 5000, 5000),
        fixed_nodes: None,
        requires: &["InterPodAffinity"],
        build: |p| affinity_case(p, PodTemplate::PreferredPodAntiAffinity, false),
    },
    Workload {
        name: "SchedulingNodeAffinity",
        upstream: "affinity/SchedulingNodeAffinity/5000Nodes_10000Pods",
        defaults: params(5000, 5000, 10000),
        fixed_nodes: None,
        requires: &["NodeAffinity"],
        build: |p| {
            vec![
                nodes_labelled(p.nodes, &["zone1"]),
                pods(p.init_pods, PodTemplate::NodeAffinity, None),
                measured(p.pods, PodTemplate::NodeAffinity, None),
            ]
        },
    },
    Workload {
        name: "TopologySpreading",
        upstream: "topology_spreading/TopologySpreading/5000Nodes_5000Pods",
        defaults: params(5000, 5000, 5000),
        fixed_nodes: None,
        requires: &["PodTopologySpread"],
        build: |p| {
            vec![
                nodes_labelled(p.nodes, &["moon-1", "moon-2", "moon-3"]),
                pods(p.init_pods, PodTemplate::Default, None),
                measured(p.pods, PodTemplate::TopologySpreading, None),
            ]
        },
    },
    Workload {
        name: "PreferredTopologySpreading",
        upstream: "topology_spreading/PreferredTopologySpreading/5000Nodes_5000Pods",
        defaults: params(5000, 5000, 5000),
        fixed_nodes: None,
        requires: &["PodTopologySpread"],
        build: |p| {
            vec![
                nodes_labelled(p.nodes, &["moon-1", "moon-2", "moon-3"]),
                pods(p.init_pods, PodTemplate::Default, None),
                measured(p.pods, PodTemplate::PreferredTopologySpreading, None),
            ]
        },
    },
    Workload {
        name: "MixedSchedulingBasePod",
        upstream: "affinity/MixedSchedulingBasePod/5000Nodes_5000Pods",
        defaults: params(5000, 2000, 5000),
        fixed_nodes: None,
        requires: &["InterPodAffinity"],
        build: |p| {
            let ns = Some("sched-0");
            vec![
                nodes_labelled(p.nodes, &["zone1"]),
                sched_namespaces(1),
                pods(p.init_pods, PodTemplate::Default, ns),
                pods(p.init_pods, PodTemplate::PodAffinity, ns),
                pods(p.init_pods, PodTemplate::PodAntiAffinity, ns),
                pods(p.init_pods, PodTemplate::PreferredPodAffinity, ns),
                pods(p.init_pods, PodTemplate::PreferredPodAntiAffinity, ns),
                measured(p.pods, PodTemplate::Default, None),
            ]
        },
    },
    Workload {
        name: "Unschedulable",
        upstream: "misc/Unschedulable/5kNodes/100Init/10kPods",
        defaults: params(5000, 100, 10000),
        fixed_nodes: None,
        requires: &[],
        build: |p| {
            vec![
                nodes(p.nodes),
                pods(p.init_pods, PodTemplate::Default, None),
                Op::Churn {
                    mode: ChurnMode::Create,
                    objects: &[ChurnObject::Pod(PodTemplate::HighPriorityLargeCpu)],
                    interval_ms: 200,
                },
                measured(p.pods, PodTemplate::Default, None),
            ]
        },
    },
    Workload {
        name: "SchedulingWhileGated",
        upstream: "misc/SchedulingWhileGated/1Node_10000GatedPods",
        defaults: params(1, 10000, 20000),
        fixed_nodes: Some(1),
        requires: &["SchedulingGates"],
        build: |p| {
            vec![
                Op::CreateNodes { count: 1, template: NodeTemplate::WithName, label: None },
                Op::CreatePods {
                    count: p.init_pods,
                    template: PodTemplate::Gated,
                    namespace: None,
                    measured: false,
                    no_wait: true,
                    volume: None,
                },
                Op::BarrierAttempted,
                // deletingPods keeps upstream's ratio to gatedPods (20000 : 10000).
                pods(2 * p.init_pods, PodTemplate::Light, None),
                Op::DeletePods { namespace: "namespace-3", per_second: 50 },
                measured(p.pods, PodTemplate::Light, None),
            ]
        },
    },
    Workload {
        name: "PreemptionAsync",
        upstream: "misc/PreemptionAsync/5000Nodes",
        defaults: params(5000, 20000, 5000),
        fixed_nodes: None,
        requires: &["DefaultPreemption"],
        build: |p| {
            vec![
                nodes(p.nodes),
                pods(p.init_pods, PodTemplate::LowPriority, None),
                Op::Churn {
                    mode: ChurnMode::Create,
                    objects: &[ChurnObject::Pod(PodTemplate::HighPriority)],
                    interval_ms: 200,
                },
                measured(p.pods, PodTemplate::Default, None),
            ]
        },
    },
    Workload {
        name: "SchedulingWithMixedChurn",
        upstream: "misc/SchedulingWithMixedChurn/5000Nodes_10000Pods",
        defaults: params(5000, 0, 10000),
        fixed_nodes: None,
        requires: &[],
        build: |p| {
            vec![
                nodes(p.nodes),
                Op::Churn {
                    mode: ChurnMode::Recreate,
                    objects: &[
                        ChurnObject::Node(NodeTemplate::Churn),
                        ChurnObject::Pod(PodTemplate::HighPriorityLargeCpu),
                        ChurnObject::Service,
                    ],
                    interval_ms: 1000,
                },
                measured(p.pods, PodTemplate::Default, None),
            ]
        },
    },
    Workload {
        name: "SchedulingCSIPVs",
        upstream: "volumes/SchedulingCSIPVs/5000Nodes_5000Pods",
        defaults: params(5000, 5000, 5000),
        fixed_nodes: None,
        requires: VOLUME_PLUGINS,
        build: |p| volume_case(p, VolumeKind::Csi),
    },
    Workload {
        name: "SchedulingInTreePVs",
        upstream: "volumes/SchedulingInTreePVs/5000Nodes_2000Pods",
        defaults: params(5000, 1000, 2000),
        fixed_nodes: None,
        requires: VOLUME_PLUGINS,
        build: |p| volume_case(p, VolumeKind::InTreeAws),
    },
    Workload {
        name: "SchedulingWithResourceClaimTemplate",
        upstream: "dra/SchedulingWithResourceClaimTemplate/5000pods_500nodes_QueueingHintsEnabled",
        defaults: params(500, 2500, 2500),
        fixed_nodes: None,
        requires: &["DynamicResources"],
        build: dra_template_case,
    },
    Workload {
        name: "SteadyStateClusterResourceClaimTemplateEmpty",
        upstream: "dra/SteadyStateClusterResourceClaimTemplate/empty_500nodes_QueueingHintsEnabled",
        defaults: params(500, 0, 10),
        fixed_nodes: None,
        requires: &["DynamicResources"],
        build: dra_steady_case,
    },
    Workload {
        name: "SteadyStateClusterResourceClaimTemplateHalf",
        upstream: "dra/SteadyStateClusterResourceClaimTemplate/half_500nodes_QueueingHintsEnabled",
        defaults: params(500, 2500, 10),
        fixed_nodes: None,
        requires: &["DynamicResources"],
        build: dra_steady_case,
    },
    Workload {
        name: "SteadyStateClusterResourceClaimTemplateFull",
        upstream: "dra/SteadyStateClusterResourceClaimTemplate/full_500nodes_QueueingHintsEnabled",
        defaults: params(500, 4990, 10),
        fixed_nodes: None,
        requires: &["DynamicResources"],
        build: dra_steady_case,
    },
];

/// The workload called `name` (case-insensitive).
pub fn find(name: &str) -> Option<&'static Workload> {
    WORKLOADS.iter().find(|w| w.name.eq_ignore_ascii_case(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_workload_has_exactly_one_measured_op() {
        for w in WORKLOADS {
            let ops = w.ops(&w.defaults);
            let n = ops
                .iter()
                .filter(|o| matches!(o, Op::CreatePods { measured: true, .. } | Op::SteadyState { .. }))
                .count();
            assert_eq!(n, 1, "{}", w.name);
        }
    }

    #[test]
    fn overrides_respect_fixed_node_counts() {
        let gated = find("schedulingwhilegated").unwrap();
        assert_eq!(gated.params(Some(5000), None, None), params(1, 10000, 20000));
        let basic = find("SchedulingBasic").unwrap();
        assert_eq!(basic.params(Some(10), Some(5), Some(20)), params(10, 5, 20));
        assert_eq!(basic.params(None, None, None), params(5000, 1000, 10000));
    }
}
