//! ImageLocality (upstream `framework/plugins/imagelocality`): favours nodes that already hold the pod's images, weighting each image
//! by how widely it has spread across the cluster.
//!
//! The score weighs images by the number of nodes in the cycle's snapshot, which the framework
//! records in `CycleState::num_all_nodes`. Upstream has no PreScore here; ours only precomputes the
//! pod's normalised image names once per cycle instead of once per node.

use std::sync::Arc;

use ksched_framework::node_info::ImageStateSummary;
use ksched_framework::pod::Pod;
use ksched_framework::{
    CycleState, Handle, NodeInfo, Plugin, PodInfo, PreScorePlugin, ScorePlugin, Status, MAX_NODE_SCORE,
};

use crate::names::IMAGE_LOCALITY;

const MB: i64 = 1024 * 1024;
/// Image sums below this score 0: smaller images are cheap to pull anyway.
const MIN_THRESHOLD: i64 = 23 * MB;
/// Per-container image sum at which the score saturates.
const MAX_CONTAINER_THRESHOLD: i64 = 1000 * MB;

/// CycleState key of the per-pod data ImageLocality precomputes.
pub const STATE_KEY: &str = "PreScoreImageLocality";

/// The CRI-compliant name the pod's image reference is looked up by: `:latest` is appended when
/// the reference has no tag (no ':' after the last '/'). Digests (`name@sha256:...`) are kept.
///
/// Node image states are keyed by the names the kubelet reports in `node.status.images[].names`,
/// verbatim; only the pod side is normalised.
pub fn normalized_image_name(name: &str) -> String {
    let tagged = match (name.rfind(':'), name.rfind('/')) {
        (Some(colon), Some(slash)) => colon > slash,
        (Some(_), None) => true,
        (None, _) => false,
    };
    if tagged {
        name.to_string()
    } else {
        format!("{name}:latest")
    }
}

/// What Score needs, computed once per cycle.
#[derive(Debug, Clone)]
struct State(Arc<PodImages>);

#[derive(Debug)]
struct PodImages {
    /// Nodes in the snapshot (0 when unknown).
    total_nodes: usize,
    /// Normalised images of init containers, containers and image volumes, in that order.
    images: Vec<String>,
    /// Init containers plus containers (image volumes do not raise the ceiling).
    num_containers: usize,
}

impl PodImages {
    fn new(pod: &Pod, total_nodes: usize) -> Self {
        let Some(spec) = pod.spec.as_ref() else { return PodImages { total_nodes, images: vec![], num_containers: 0 } };
        let init = spec.init_containers.as_deref().unwrap_or_default();
        let containers = init.iter().chain(spec.containers.iter()).map(|c| c.image.as_deref().unwrap_or_default());
        let volumes = spec
            .volumes
            .iter()
            .flatten()
            .filter_map(|v| v.image.as_ref())
            .map(|i| i.reference.as_deref().unwrap_or_default());
        PodImages {
            total_nodes,
            images: containers.chain(volumes).map(normalized_image_name).collect(),
            num_containers: init.len() + spec.containers.len(),
        }
    }

    fn score(&self, node: &NodeInfo) -> i64 {
        let sum: i64 =
            self.images.iter().filter_map(|i| node.image_states.get(i.as_str())).map(|s| self.scaled(s)).sum();
        calculate_priority(sum, self.num_containers)
    }

    /// The image size scaled by its spread, so an image present everywhere does not make every
    /// pod gravitate to the same few nodes.
    fn scaled(&self, state: &ImageStateSummary) -> i64 {
        // An unknown (0) or stale total must not inflate the spread past 1.
        let total = self.total_nodes.max(state.num_nodes());
        let spread = state.num_nodes() as f64 / total as f64;
        (state.size as f64 * spread) as i64
    }
}

/// Maps the summed image score into [0, 100] between the thresholds.
fn calculate_priority(sum: i64, num_containers: usize) -> i64 {
    let max_threshold = MAX_CONTAINER_THRESHOLD * num_containers as i64;
    let clamped = if sum < MIN_THRESHOLD {
        MIN_THRESHOLD
    } else if sum > max_threshold {
        max_threshold
    } else {
        sum
    };
    MAX_NODE_SCORE * (clamped - MIN_THRESHOLD) / (max_threshold - MIN_THRESHOLD)
}

/// The ImageLocality plugin.
#[derive(Debug, Default)]
pub struct ImageLocality;

/// Builds the plugin; it takes no args.
pub fn new(_args: Option<&serde_json::Value>, _handle: &Handle) -> Result<Arc<dyn Plugin>, String> {
    Ok(Arc::new(ImageLocality))
}

impl Plugin for ImageLocality {
    fn name(&self) -> &str {
        IMAGE_LOCALITY
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

/// Scores depend on the pod's image names.
impl ksched_framework::SignPlugin for ImageLocality {
    fn sign_pod(
        &self,
        pod: &ksched_framework::PodInfo,
        sig: &mut ksched_framework::batch::SignatureBuilder,
    ) -> ksched_framework::Status {
        sig.fragment(ksched_framework::batch::signature::IMAGE_NAMES, |w| {
            ksched_framework::batch::signature::image_names(&pod.pod, w)
        });
        ksched_framework::Status::success()
    }
}

impl PreScorePlugin for ImageLocality {
    fn pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        nodes: &[&NodeInfo],
        _snapshot: &ksched_framework::Snapshot,
    ) -> Status {
        // Outside a full cycle (no snapshot size recorded) the feasible nodes stand in for it.
        let total = if state.num_all_nodes > 0 { state.num_all_nodes } else { nodes.len() };
        state.write(STATE_KEY, State(Arc::new(PodImages::new(&pod.pod, total))));
        Status::success()
    }
}

impl ScorePlugin for ImageLocality {
    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        match state.read::<State>(STATE_KEY) {
            Ok(State(images)) => Ok(images.score(node)),
            // Without any per-cycle data the cluster size is unknown: images count at full size.
            Err(_) => Ok(PodImages::new(&pod.pod, 0).score(node)),
        }
    }

    fn score_nodes(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: &[&NodeInfo],
        out: &mut [i64],
    ) -> Result<(), (usize, Status)> {
        let computed;
        let images = match state.read::<State>(STATE_KEY) {
            Ok(State(images)) => images,
            Err(_) => {
                computed = PodImages::new(&pod.pod, 0);
                &computed
            }
        };
        for (node, o) in nodes.iter().zip(out) {
            *o = images.score(node);
        }
        Ok(())
    }
}

/// Score reads what PreScore derives from the pod (every image of init containers, containers
/// and image volumes, in order, and the container count) and the snapshot's node count.
impl ksched_framework::MemoPlugin for ImageLocality {
    fn memo_inputs(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        w: &mut ksched_framework::batch::FragmentWriter<'_>,
    ) -> bool {
        let images = PodImages::new(&pod.pod, state.num_all_nodes);
        w.count(images.total_nodes);
        w.count(images.num_containers);
        w.count(images.images.len());
        images.images.iter().for_each(|i| w.str(i));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ksched_framework::node::Node;
    use ksched_framework::Snapshot;
    use serde_json::{json, Value};
    use std::collections::HashMap;

    #[test]
    fn normalized_image_names() {
        let digest = "root@sha256:4813494d137e1631bba301d5acab6e7bb7aa74ce1185d456565ef51d737677b2";
        let cases = [
            ("add :latest postfix 1", "root", "root:latest"),
            ("add :latest postfix 2", "gcr.io:5000/root", "gcr.io:5000/root:latest"),
            ("keep it as is 1", "root:tag", "root:tag"),
            ("keep it as is 2", digest, digest),
            ("registry port and tag", "gcr.io:5000/root:v1", "gcr.io:5000/root:v1"),
            ("empty", "", ":latest"),
        ];
        for (name, input, want) in cases {
            assert_eq!(normalized_image_name(input), want, "{name}");
        }
    }

    /// Nodes with image states the way the cache builds them: keyed by reported name, with the
    /// number of nodes reporting each name.
    fn nodes(statuses: &[(&str, Value)]) -> Vec<NodeInfo> {
        let objs: Vec<Node> = statuses
            .iter()
            .map(|(name, images)| {
                serde_json::from_value(json!({"metadata": {"name": name}, "status": {"images": images}})).unwrap()
            })
            .collect();
        let mut holders: HashMap<String, usize> = HashMap::new();
        for n in &objs {
            for img in n.status.as_ref().and_then(|s| s.images.as_ref()).into_iter().flatten() {
                for name in img.names.iter().flatten() {
                    *holders.entry(name.clone()).or_default() += 1;
                }
            }
        }
        objs.into_iter()
            .map(|n| {
                let mut ni = NodeInfo::new(Arc::new(n.clone()));
                for img in n.status.as_ref().and_then(|s| s.images.as_ref()).into_iter().flatten() {
                    for name in img.names.iter().flatten() {
                        ni.image_states.insert(Arc::new(ImageStateSummary::new(
                            name.as_str(),
                            img.size_bytes.unwrap_or(0),
                            holders[name],
                        )));
                    }
                }
                ni
            })
            .collect()
    }

    fn images(list: &[(&[&str], i64)]) -> Value {
        Value::Array(list.iter().map(|(names, mb)| json!({"names": names, "sizeBytes": mb * MB})).collect())
    }

    fn pod(spec: Value) -> PodInfo {
        PodInfo::new(Arc::new(serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).unwrap()))
    }

    fn containers(imgs: &[&str]) -> Value {
        Value::Array(imgs.iter().enumerate().map(|(i, img)| json!({"name": format!("c{i}"), "image": img})).collect())
    }

    #[test]
    fn scores() {
        let n403002000 = images(&[
            (&["gcr.io/40:latest", "gcr.io/40:v1", "gcr.io/40:v1"], 40),
            (&["gcr.io/300:latest", "gcr.io/300:v1"], 300),
            (&["gcr.io/2000:latest"], 2000),
        ]);
        let n25010 = images(&[(&["gcr.io/250:latest"], 250), (&["gcr.io/10:latest", "gcr.io/10:v1"], 10)]);
        let n60040900 =
            images(&[(&["gcr.io/600:latest"], 600), (&["gcr.io/40:latest"], 40), (&["gcr.io/900:latest"], 900)]);
        let n300600900 =
            images(&[(&["gcr.io/300:latest"], 300), (&["gcr.io/600:latest"], 600), (&["gcr.io/900:latest"], 900)]);
        let n400030 = images(&[(&["gcr.io/4000:latest"], 4000), (&["gcr.io/30:latest"], 30)]);
        let n203040 = images(&[(&["gcr.io/20:latest"], 20), (&["gcr.io/30:latest"], 30), (&["gcr.io/40:latest"], 40)]);
        let none = json!([]);
        type Case<'a> = (&'a str, Value, Vec<(&'a str, Value)>, Vec<i64>);
        let cases: Vec<Case> = vec![
            (
                "two images spread on two nodes, prefer the larger image one",
                json!({"containers": containers(&["gcr.io/40", "gcr.io/250"])}),
                vec![("node1", n403002000.clone()), ("node2", n25010.clone())],
                vec![0, 5],
            ),
            (
                "two images on one node, prefer this node",
                json!({"containers": containers(&["gcr.io/40", "gcr.io/300"])}),
                vec![("node1", n403002000.clone()), ("node2", n25010.clone())],
                vec![7, 0],
            ),
            (
                "if exceed limit, use limit",
                json!({"containers": containers(&["gcr.io/10", "gcr.io/4000"])}),
                vec![("node1", n400030.clone()), ("node2", n25010.clone())],
                vec![100, 0],
            ),
            (
                "if exceed limit, use limit (with node which has no images present)",
                json!({"containers": containers(&["gcr.io/10", "gcr.io/4000"])}),
                vec![("node1", n400030.clone()), ("node2", n25010.clone()), ("node3", none.clone())],
                vec![66, 0, 0],
            ),
            (
                "pod with multiple large images, node2 is preferred",
                json!({"containers": containers(&["gcr.io/300", "gcr.io/600", "gcr.io/900"])}),
                vec![("node1", n60040900.clone()), ("node2", n300600900.clone()), ("node3", none.clone())],
                vec![32, 36, 0],
            ),
            (
                "pod with multiple small images",
                json!({"containers": containers(&["gcr.io/30", "gcr.io/40"])}),
                vec![("node1", n203040.clone()), ("node2", n400030.clone())],
                vec![1, 0],
            ),
            (
                "pod with ImageVolume",
                json!({"containers": containers(&["gcr.io/30"]), "volumes": [{"name": "iv", "image": {"reference": "gcr.io/300"}}]}),
                vec![("node1", n300600900.clone()), ("node2", n400030.clone())],
                vec![12, 0],
            ),
            (
                "include InitContainers: two images spread on two nodes, prefer the larger image one",
                json!({"containers": containers(&["gcr.io/30"]), "initContainers": containers(&["gcr.io/300"])}),
                vec![("node1", n403002000.clone()), ("node2", n203040.clone())],
                vec![6, 0],
            ),
            (
                "tagged reference matches its own tag only",
                json!({"containers": containers(&["gcr.io/300:v1"])}),
                vec![("node1", n403002000.clone()), ("node2", n300600900.clone())],
                vec![12, 0],
            ),
        ];
        for (name, spec, statuses, want) in cases {
            let infos = nodes(&statuses);
            let snapshot = Snapshot::from_node_infos(infos.clone());
            let incoming = pod(spec);
            let mut state = CycleState::new();
            state.num_all_nodes = snapshot.num_nodes();
            assert!(ImageLocality
                .pre_score(
                    &mut state,
                    &incoming,
                    &ksched_framework::node_refs(&snapshot.node_info_list[..1]),
                    &snapshot
                )
                .is_success());
            let got: Vec<i64> = infos.iter().map(|n| ImageLocality.score(&state, &incoming, n).unwrap()).collect();
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn total_nodes_comes_from_the_snapshot_not_the_feasible_nodes() {
        // gcr.io/300 (300 MiB) is on 1 of 2 nodes: 100 * (150 MiB - 23 MiB) / (1000 MiB - 23 MiB) = 12.
        let infos = nodes(&[("a", images(&[(&["gcr.io/300:latest"], 300)])), ("b", json!([]))]);
        let snapshot = Snapshot::from_node_infos(infos.clone());
        let incoming = pod(json!({"containers": containers(&["gcr.io/300"])}));
        let mut state = CycleState::new();
        state.num_all_nodes = snapshot.num_nodes(); // what the framework records at PreFilter
                                                    // only node a is feasible; the score still weighs by the snapshot's 2 nodes
        assert!(ImageLocality
            .pre_score(&mut state, &incoming, &ksched_framework::node_refs(&snapshot.node_info_list[..1]), &snapshot)
            .is_success());
        assert_eq!(ImageLocality.score(&state, &incoming, &infos[0]), Ok(12));
        // outside a framework cycle the feasible count is the fallback
        let mut state = CycleState::new();
        assert!(ImageLocality
            .pre_score(&mut state, &incoming, &ksched_framework::node_refs(&snapshot.node_info_list[..1]), &snapshot)
            .is_success());
        assert_eq!(ImageLocality.score(&state, &incoming, &infos[0]), Ok(28));
        // with no cycle state at all the image counts at full size
        assert_eq!(ImageLocality.score(&CycleState::new(), &incoming, &infos[0]), Ok(28));
    }

    #[test]
    fn priority_clamps() {
        let cases = [
            ("below min", 10 * MB, 1, 0),
            ("at min", MIN_THRESHOLD, 1, 0),
            ("at max", 1000 * MB, 1, 100),
            ("above max", 5000 * MB, 2, 100),
            // upstream quirk: with no containers the ceiling is 0 and any sum above it scores 100
            ("no containers", 5000 * MB, 0, 100),
            ("no containers, small sum", MB, 0, 0),
        ];
        for (name, sum, n, want) in cases {
            assert_eq!(calculate_priority(sum, n), want, "{name}");
        }
    }

    #[test]
    fn factory() {
        let pl = new(None, &Handle::for_tests()).unwrap();
        assert_eq!(pl.name(), "ImageLocality");
        assert!(pl.as_score().is_some() && pl.as_filter().is_none());
    }
}
