//! `ZonePreference`: an example out-of-tree plugin.
//!
//! - Filter: with `requireZone`, nodes without the zone label are refused.
//! - Score: nodes in one of `preferredZones` score 100, others 0.
//!
//! Args (in `pluginConfig`):
//! ```yaml
//! - name: ZonePreference
//!   args:
//!     zoneLabel: topology.kubernetes.io/zone   # default
//!     preferredZones: [zone-a]
//!     requireZone: true
//! ```

use std::sync::Arc;

use ksched_framework::registry::decode_args;
use ksched_framework::{
    CycleState, FilterPlugin, Handle, NodeInfo, Plugin, PodInfo, ScorePlugin, Status, MAX_NODE_SCORE,
};
use serde::Deserialize;

/// The plugin's name in configuration.
pub const NAME: &str = "ZonePreference";

/// The plugin's arguments.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ZonePreferenceArgs {
    /// Node label holding the zone.
    pub zone_label: String,
    /// Zones to favour.
    pub preferred_zones: Vec<String>,
    /// Refuse nodes that have no zone label.
    pub require_zone: bool,
}

impl Default for ZonePreferenceArgs {
    fn default() -> Self {
        ZonePreferenceArgs {
            zone_label: "topology.kubernetes.io/zone".into(),
            preferred_zones: vec![],
            require_zone: false,
        }
    }
}

/// The plugin.
#[derive(Debug)]
pub struct ZonePreference {
    args: ZonePreferenceArgs,
}

/// Factory, as registered with the scheduler command builder.
pub fn new(args: Option<&serde_json::Value>, _handle: &Handle) -> Result<Arc<dyn Plugin>, String> {
    let args: ZonePreferenceArgs = decode_args(args)?;
    if args.zone_label.is_empty() {
        return Err("zoneLabel: Required value".into());
    }
    Ok(Arc::new(ZonePreference { args }))
}

impl Plugin for ZonePreference {
    fn name(&self) -> &str {
        NAME
    }
    fn as_filter(&self) -> Option<&dyn FilterPlugin> {
        Some(self)
    }
    fn as_score(&self) -> Option<&dyn ScorePlugin> {
        Some(self)
    }
}

impl FilterPlugin for ZonePreference {
    fn filter(&self, _state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Status {
        if self.args.require_zone && !node.labels().contains_key(&self.args.zone_label) {
            // Preemption cannot add a label: unresolvable.
            return Status::unresolvable(format!("node(s) had no {} label", self.args.zone_label));
        }
        Status::success()
    }
}

impl ScorePlugin for ZonePreference {
    fn score(&self, _state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let preferred =
            node.labels().get(&self.args.zone_label).is_some_and(|z| self.args.preferred_zones.iter().any(|p| p == z));
        Ok(if preferred { MAX_NODE_SCORE } else { 0 })
    }
}
