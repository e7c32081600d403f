//! Text rendering of an [`Explanation`]: grouped so that thousands of nodes stay readable.

use std::fmt::Write as _;

use super::{Explanation, RejectionGroup, Verdict};

/// Which nodes to list one per line (the grouped summary is always printed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NodeFilter {
    /// No per-node list.
    #[default]
    None,
    /// Every node.
    All,
    /// Rejected nodes.
    Failed,
    /// Feasible nodes.
    Feasible,
}

impl std::str::FromStr for NodeFilter {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "all" => Ok(NodeFilter::All),
            "failed" => Ok(NodeFilter::Failed),
            "feasible" => Ok(NodeFilter::Feasible),
            "none" => Ok(NodeFilter::None),
            other => Err(format!("--nodes must be one of all, failed, feasible (got {other:?})")),
        }
    }
}

/// Node names printed inline in a group before `(+N more)`.
const NAMES_INLINE: usize = 5;
/// Score rows printed before `(+N more)` unless every node is asked for.
const SCORE_ROWS: usize = 10;

/// Drops per-node entries that `filter` does not ask for (for JSON and YAML output).
pub fn filter_nodes(ex: &mut Explanation, filter: NodeFilter) {
    match filter {
        NodeFilter::All => {}
        NodeFilter::None => ex.nodes.clear(),
        NodeFilter::Failed => ex.nodes.retain(|n| !n.feasible),
        NodeFilter::Feasible => ex.nodes.retain(|n| n.feasible),
    }
}

fn names(nodes: &[String]) -> String {
    let mut s = nodes.iter().take(NAMES_INLINE).cloned().collect::<Vec<_>>().join(", ");
    if nodes.len() > NAMES_INLINE {
        let _ = write!(s, " (+{} more)", nodes.len() - NAMES_INLINE);
    }
    s
}

fn groups_table(out: &mut String, indent: &str, groups: &[RejectionGroup]) {
    let wp = groups.iter().map(|g| g.plugin.len()).max().unwrap_or(0).max("PLUGIN".len());
    let wr = groups.iter().map(|g| g.reason.len()).max().unwrap_or(0).max("REASON".len());
    let wc = groups.iter().map(|g| g.count.to_string().len()).max().unwrap_or(0).max("NODES".len());
    let _ = writeln!(out, "{indent}{:wp$}  {:wr$}  {:>wc$}  EXAMPLES", "PLUGIN", "REASON", "NODES");
    for g in groups {
        let _ = writeln!(out, "{indent}{:wp$}  {:wr$}  {:>wc$}  {}", g.plugin, g.reason, g.count, names(&g.nodes));
    }
}

/// The explanation as text.
pub fn table(ex: &Explanation, filter: NodeFilter) -> String {
    let mut out = String::new();
    let verdict = match ex.verdict {
        Verdict::Schedulable => "schedulable",
        Verdict::Unschedulable => "unschedulable",
        Verdict::Error => "error",
    };
    let _ = write!(out, "Pod {} (profile {}): {verdict}", ex.pod, ex.profile);
    if let Some(n) = &ex.selected_node {
        let _ = write!(out, ", would go to {n}");
    }
    if let Some(b) = &ex.bound_to {
        let _ = write!(out, " (bound to {b})");
    }
    out.push('\n');
    if let Some(m) = &ex.message {
        let _ = writeln!(out, "  {m}");
    }
    let feasible = ex.scores.as_ref().map_or(0, |s| s.nodes.len());
    let _ = writeln!(out, "\nNodes: {} total, {feasible} feasible, {} rejected", ex.num_nodes, ex.num_nodes - feasible);
    if let Some(pf) = &ex.pre_filter {
        let _ = writeln!(out, "  PreFilter {} rejected every node: {}", pf.plugin, pf.reasons.join(", "));
    } else if !ex.rejections.is_empty() {
        groups_table(&mut out, "  ", &ex.rejections);
    }
    if filter != NodeFilter::None {
        let rows: Vec<_> = ex
            .nodes
            .iter()
            .filter(|n| match filter {
                NodeFilter::Failed => !n.feasible,
                NodeFilter::Feasible => n.feasible,
                _ => true,
            })
            .collect();
        let wn = rows.iter().map(|n| n.node.len()).max().unwrap_or(0).max("NODE".len());
        let wp = rows.iter().filter_map(|n| n.rejected_by.as_ref().map(|r| r.plugin.len())).max().unwrap_or(0).max(6);
        let _ = writeln!(out, "\n  {:wn$}  {:8}  {:wp$}  REASON", "NODE", "RESULT", "PLUGIN");
        for n in rows {
            match &n.rejected_by {
                None => {
                    let _ = writeln!(out, "  {:wn$}  {:8}  {:wp$}", n.node, "feasible", "");
                }
                Some(r) => {
                    let _ =
                        writeln!(out, "  {:wn$}  {:8}  {:wp$}  {}", n.node, "rejected", r.plugin, r.reasons.join(", "));
                }
            }
        }
    }
    if let Some(scores) = &ex.scores {
        let _ = writeln!(out, "\nScores (raw/normalized/weighted per plugin, weight in brackets):");
        let heads: Vec<String> = scores.plugins.iter().map(|p| format!("{}[{}]", p.name, p.weight)).collect();
        let cells: Vec<Vec<String>> = scores
            .nodes
            .iter()
            .map(|n| (0..heads.len()).map(|k| format!("{}/{}/{}", n.raw[k], n.normalized[k], n.weighted[k])).collect())
            .collect();
        let wn = scores.nodes.iter().map(|n| n.node.len()).max().unwrap_or(0).max("NODE".len());
        let widths: Vec<usize> = heads
            .iter()
            .enumerate()
            .map(|(k, h)| cells.iter().map(|c| c[k].len()).max().unwrap_or(0).max(h.len()))
            .collect();
        let mut line = format!("  {:wn$}", "NODE");
        for (h, w) in heads.iter().zip(&widths) {
            let _ = write!(line, "  {h:>w$}");
        }
        let _ = writeln!(out, "{line}  TOTAL");
        let limit = if filter == NodeFilter::None { SCORE_ROWS } else { usize::MAX };
        for (n, c) in scores.nodes.iter().zip(&cells).take(limit) {
            let mut line = format!("  {:wn$}", n.node);
            for (v, w) in c.iter().zip(&widths) {
                let _ = write!(line, "  {v:>w$}");
            }
            let _ = writeln!(out, "{line}  {}", n.total);
        }
        if scores.nodes.len() > limit {
            let _ = writeln!(out, "  (+{} more nodes; --nodes feasible lists them all)", scores.nodes.len() - limit);
        }
    }
    if let Some(w) = &ex.winner {
        let _ = writeln!(out, "\nWinner: {} ({})", w.node, w.why);
        if !w.tied_with.is_empty() {
            let _ = writeln!(out, "  tied with: {}", names(&w.tied_with));
        }
    }
    if ex.verdict == Verdict::Unschedulable {
        if ex.fits_if.is_empty() {
            let _ = writeln!(out, "\nFits if: no single change found that the framework confirms");
        } else {
            let _ = writeln!(out, "\nFits if (each confirmed by re-running the framework):");
            for f in &ex.fits_if {
                let mut s = f.sentence();
                if f.nodes.len() > 1 {
                    let _ = write!(s, ": {}", names(&f.nodes));
                }
                let _ = writeln!(out, "  - {s}");
            }
        }
    }
    if let Some(p) = &ex.preemption {
        let _ = writeln!(out, "\nPreemption:");
        if let Some(r) = &p.not_eligible {
            let _ = writeln!(out, "  the pod may not preempt: {r}");
        }
        if let Some(c) = &p.chosen {
            let _ = writeln!(out, "  DefaultPreemption would evict on {}: {}", c.node, c.victims.join(", "));
            if let Some(why) = &p.why {
                let _ = writeln!(out, "  why: {why}");
            }
            for other in p.candidates.iter().filter(|o| o.node != c.node) {
                let _ = writeln!(out, "  other candidate {}: {}", other.node, other.victims.join(", "));
            }
        } else if p.not_eligible.is_none() {
            let _ = writeln!(out, "  no node where evicting lower-priority pods would help");
        }
        if !p.not_candidates.is_empty() && p.not_eligible.is_none() {
            let _ = writeln!(out, "  not candidates:");
            groups_table(&mut out, "    ", &p.not_candidates);
        }
    }
    for n in &ex.notes {
        let _ = writeln!(out, "\nNote: {n}");
    }
    out
}
