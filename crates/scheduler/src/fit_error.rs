//! FitError and the aggregated FailedScheduling message (upstream `framework.FitError`).

use std::collections::BTreeSet;

use ksched_framework::interface::NodeToStatus;
use ksched_framework::Status;

/// Error text when the cluster has no nodes.
pub const NO_NODES_AVAILABLE: &str = "no nodes available to schedule pods";

/// Why no node fits: per-node statuses and the plugins that rejected the pod.
#[derive(Debug, Clone, Default)]
pub struct Diagnosis {
    /// Per-node statuses (explicit plus the status of absent nodes).
    pub node_to_status: NodeToStatus,
    /// Plugins that rejected the pod (drives requeue hints).
    pub unschedulable_plugins: BTreeSet<String>,
    /// Plugins that returned Pending.
    pub pending_plugins: BTreeSet<String>,
    /// Message of a PreFilter rejection (then per-node reasons are not listed).
    pub pre_filter_msg: String,
    /// Message of the PostFilter plugins (e.g. preemption), appended verbatim.
    pub post_filter_msg: String,
}

impl Diagnosis {
    /// Records the plugin of a rejecting status.
    pub fn add_plugin_status(&mut self, s: &Status) {
        let Some(p) = s.plugin() else { return };
        if s.code() == ksched_framework::Code::Pending {
            self.pending_plugins.insert(p.to_string());
        } else if s.is_rejected() {
            self.unschedulable_plugins.insert(p.to_string());
        }
    }
}

/// No node can host the pod.
#[derive(Debug, Clone)]
pub struct FitError {
    /// Number of nodes in the snapshot (1 for Reserve/Permit rejections).
    pub num_all_nodes: usize,
    /// The diagnosis.
    pub diagnosis: Diagnosis,
}

impl FitError {
    /// The message of upstream's `FitError.Error()`:
    /// `0/N nodes are available: <prefilter msg | sorted reason histogram>. <postfilter msg>`.
    pub fn message(&self) -> String {
        let d = &self.diagnosis;
        ksched_framework::interface::fit_error_message(
            self.num_all_nodes,
            &d.node_to_status,
            &d.pre_filter_msg,
            &d.post_filter_msg,
        )
    }
}

/// Truncates an event note to 1024 bytes as upstream's recorder does (1020 + " ...").
pub fn truncate_event_note(msg: &str) -> String {
    const MAX: usize = 1024;
    if msg.len() <= MAX {
        return msg.to_string();
    }
    let mut cut = MAX - 4;
    while !msg.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{} ...", &msg[..cut])
}

#[cfg(test)]
mod tests {
    use super::*;
    use ksched_framework::Code;

    fn statuses(pairs: &[(&str, Status)]) -> NodeToStatus {
        let mut n = NodeToStatus::default();
        for (k, s) in pairs {
            n.statuses.insert(k.to_string(), s.clone());
        }
        n
    }

    #[test]
    fn histogram_is_sorted_as_strings() {
        let mut pairs = vec![];
        let names: Vec<String> = (0..12).map(|i| format!("n{i}")).collect();
        for (i, name) in names.iter().enumerate() {
            let s = if i < 10 {
                Status::unschedulable("Insufficient cpu")
            } else {
                Status::unresolvable("node(s) had untolerated taint(s)")
            };
            pairs.push((name.as_str(), s));
        }
        let fe = FitError {
            num_all_nodes: 12,
            diagnosis: Diagnosis { node_to_status: statuses(&pairs), ..Default::default() },
        };
        assert_eq!(fe.message(), "0/12 nodes are available: 10 Insufficient cpu, 2 node(s) had untolerated taint(s).");
    }

    #[test]
    fn multi_reason_statuses_and_absent_nodes() {
        let mut s = Status::unschedulable("Insufficient cpu");
        s.push_reason("Insufficient memory");
        let mut n = statuses(&[("a", s)]);
        n.absent = Status::new(Code::UnschedulableAndUnresolvable, ["node(s) didn't satisfy plugin(s) [NodeAffinity]"]);
        let fe = FitError { num_all_nodes: 5000, diagnosis: Diagnosis { node_to_status: n, ..Default::default() } };
        assert_eq!(
            fe.message(),
            "0/5000 nodes are available: 1 Insufficient cpu, 1 Insufficient memory, 4999 node(s) didn't satisfy plugin(s) [NodeAffinity]."
        );
    }

    #[test]
    fn prefilter_message_replaces_histogram_and_postfilter_is_appended() {
        let d = Diagnosis {
            pre_filter_msg: "persistentvolumeclaim \"data\" not found".into(),
            post_filter_msg: "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.".into(),
            node_to_status: statuses(&[("a", Status::unschedulable("ignored"))]),
            ..Default::default()
        };
        let fe = FitError { num_all_nodes: 3, diagnosis: d };
        assert_eq!(
            fe.message(),
            "0/3 nodes are available: persistentvolumeclaim \"data\" not found. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
        );
    }

    #[test]
    fn event_notes_are_truncated_to_1024_bytes() {
        let long = "x".repeat(2000);
        let t = truncate_event_note(&long);
        assert_eq!(t.len(), 1024);
        assert!(t.ends_with(" ..."));
        assert_eq!(truncate_event_note("short"), "short");
    }
}
