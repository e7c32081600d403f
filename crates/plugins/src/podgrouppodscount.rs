//! PodGroupPodsCount (upstream `framework/plugins/podgrouppodscount`, alpha): prefers placements that fit more of the group's pods,
//! counting the members already placed.

use std::sync::Arc;

use ksched_framework::podgroup::{PodGroupAssignments, PodGroupInfo};
use ksched_framework::{Handle, PlacementScorePlugin, Plugin, Snapshot, Status, MAX_NODE_SCORE, MIN_NODE_SCORE};

use crate::names;

/// The PodGroupPodsCount plugin.
pub struct PodGroupPodsCount {
    handle: Handle,
}

/// Builds the plugin; it takes no args.
pub fn new(_args: Option<&serde_json::Value>, handle: &Handle) -> Result<Arc<dyn Plugin>, String> {
    Ok(Arc::new(PodGroupPodsCount { handle: handle.clone() }))
}

impl Plugin for PodGroupPodsCount {
    fn name(&self) -> &str {
        names::POD_GROUP_PODS_COUNT
    }

    fn as_placement_score(&self) -> Option<&dyn PlacementScorePlugin> {
        Some(self)
    }
}

impl PlacementScorePlugin for PodGroupPodsCount {
    fn score_placement(
        &self,
        group: &PodGroupInfo,
        assignments: &PodGroupAssignments,
        _snapshot: &Snapshot,
    ) -> Result<i64, Status> {
        let placed = self.handle.pod_groups.scheduled_pods_count(&group.namespace, &group.name);
        Ok((placed + assignments.proposed.len()) as i64)
    }

    fn has_normalize(&self) -> bool {
        true
    }

    /// Relative to the best placement (not to minCount, so that close counts score close).
    fn normalize_placement_scores(&self, _group: &PodGroupInfo, scores: &mut [i64]) -> Status {
        let max = scores.iter().copied().max().unwrap_or(0);
        if max == 0 {
            return Status::error("no pods from pod group are assigned to any of the candidate placements");
        }
        for s in scores.iter_mut() {
            *s = MIN_NODE_SCORE + *s * (MAX_NODE_SCORE - MIN_NODE_SCORE) / max;
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ksched_framework::podgroup::{Placement, ProposedAssignment};
    use ksched_framework::PodInfo;

    fn assignments(n: usize) -> PodGroupAssignments {
        let pod = Arc::new(PodInfo::new(Arc::new(Default::default())));
        PodGroupAssignments {
            placement: Arc::new(Placement { name: "p".into(), nodes: vec![], fallback: false }),
            proposed: (0..n).map(|_| ProposedAssignment { pod: pod.clone(), node: "n".into() }).collect(),
        }
    }

    #[test]
    fn scores_count_proposed_and_placed_pods_relative_to_the_best() {
        let pl = PodGroupPodsCount { handle: Handle::for_tests() };
        let group = PodGroupInfo { namespace: "ns".into(), name: "g".into(), unscheduled_pods: vec![] };
        let mut scores: Vec<i64> = [4, 3, 1]
            .iter()
            .map(|n| pl.score_placement(&group, &assignments(*n), &Snapshot::default()).unwrap())
            .collect();
        assert_eq!(scores, [4, 3, 1]);
        assert!(pl.normalize_placement_scores(&group, &mut scores).is_success());
        assert_eq!(scores, [100, 75, 25]);
        let mut zeros = vec![0, 0];
        let s = pl.normalize_placement_scores(&group, &mut zeros);
        assert_eq!(s.message(), "no pods from pod group are assigned to any of the candidate placements");
    }
}
