//! PrioritySort (upstream `framework/plugins/queuesort`): the default QueueSort plugin.

use std::sync::Arc;

use ksched_framework::{Handle, Plugin, QueueSortPlugin, QueuedPodInfo};

use crate::names;

/// Orders the active queue by descending priority, then by queue timestamp.
#[derive(Debug, Default, Clone, Copy)]
pub struct PrioritySort;

/// Builds the plugin; it takes no args.
pub fn new(_args: Option<&serde_json::Value>, _handle: &Handle) -> Result<Arc<dyn Plugin>, String> {
    Ok(Arc::new(PrioritySort))
}

impl Plugin for PrioritySort {
    fn name(&self) -> &str {
        names::PRIORITY_SORT
    }

    fn as_queue_sort(&self) -> Option<&dyn QueueSortPlugin> {
        Some(self)
    }
}

impl QueueSortPlugin for PrioritySort {
    fn less(&self, a: &QueuedPodInfo, b: &QueuedPodInfo) -> bool {
        let (pa, pb) = (a.pod_info.priority, b.pod_info.priority);
        pa > pb || (pa == pb && a.timestamp < b.timestamp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    use crate::helper::testing::{pod, pod_info};
    use serde_json::json;

    fn queued(priority: Option<i32>, at: Instant) -> QueuedPodInfo {
        let spec = match priority {
            Some(p) => json!({"containers": [], "priority": p}),
            None => json!({"containers": []}),
        };
        QueuedPodInfo::new(Arc::new(pod_info(pod(json!({}), spec))), at)
    }

    #[test]
    fn less() {
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_secs(1);
        let cases = [
            ("higher priority first", queued(Some(100), t1), queued(Some(50), t0), true),
            ("lower priority later", queued(Some(50), t0), queued(Some(100), t1), false),
            ("equal priority, earlier first", queued(Some(100), t0), queued(Some(100), t1), true),
            ("equal priority, later not first", queued(Some(100), t1), queued(Some(100), t0), false),
            ("equal priority and timestamp", queued(Some(100), t0), queued(Some(100), t0), false),
            ("unset priority counts as zero", queued(None, t0), queued(Some(0), t1), true),
            ("negative below unset", queued(Some(-1), t0), queued(None, t1), false),
        ];
        for (name, a, b, want) in cases {
            assert_eq!(PrioritySort.less(&a, &b), want, "{name}");
        }
    }
}
