//! The frameworks an explanation runs: built read-only from a configuration (`ksched explain`),
//! or borrowed from a running scheduler (`/debug/explain`).

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use futures::future::BoxFuture;
use ksched_framework::client::{ApiClient, ApiError};
use ksched_framework::handle::{EventRecorder, NoopRecorder, SchedulerView, Spawner};
use ksched_framework::listers::ClusterLister;
use ksched_framework::pod::Pod;
use ksched_framework::podgroup::PodGroups;
use ksched_framework::{ExtensionPoint, Framework, PodInfo, Registry, Snapshot};
use ksched_plugins::defaultpreemption::DefaultPreemption;

use super::{explain, ExplainInput, Explanation};
use crate::config::KubeSchedulerConfiguration;
use crate::schedule_one::NominatedPods;
use crate::scheduler::Profile;

/// An API client that refuses every write: explanations never bind, patch or evict.
#[derive(Debug, Default)]
pub struct ReadOnlyClient;

fn refused(what: &str) -> BoxFuture<'static, Result<(), ApiError>> {
    let message = format!("{what}: refused, explanations are read-only");
    Box::pin(async move { Err(ApiError { code: 0, message }) })
}

impl ApiClient for ReadOnlyClient {
    fn bind(&self, _: &Pod, _: &str) -> BoxFuture<'static, Result<(), ApiError>> {
        refused("binding")
    }
    fn patch_pod_status(&self, _: &str, _: &str, _: serde_json::Value) -> BoxFuture<'static, Result<(), ApiError>> {
        refused("patching pod status")
    }
    fn delete_pod(&self, _: &str, _: &str, _: Option<&str>) -> BoxFuture<'static, Result<(), ApiError>> {
        refused("deleting a pod")
    }
}

struct ExplainProfile {
    framework: Arc<Framework>,
    percentage: Option<i32>,
    preemption: Option<DefaultPreemption>,
}

/// Every profile's framework, ready to explain pods.
pub struct Explainer {
    profiles: HashMap<String, ExplainProfile>,
    percentage_of_nodes_to_score: i32,
}

fn preemption_args(cfg: &KubeSchedulerConfiguration, profile: &str) -> Option<serde_json::Value> {
    let p = cfg.profiles.iter().find(|p| p.scheduler_name.as_deref().unwrap_or("default-scheduler") == profile)?;
    p.plugin_config.iter().find(|pc| pc.name == "DefaultPreemption").and_then(|pc| pc.args.to_json())
}

impl Explainer {
    /// Builds every profile of a defaulted `cfg` with a client that refuses writes.
    pub fn new(
        cfg: &KubeSchedulerConfiguration,
        registry: &Registry,
        lister: Arc<dyn ClusterLister>,
    ) -> anyhow::Result<Self> {
        let client: Arc<dyn ApiClient> = Arc::new(ReadOnlyClient);
        let recorder = |_: &str| -> Arc<dyn EventRecorder> { Arc::new(NoopRecorder) };
        let view: Arc<OnceLock<Arc<dyn SchedulerView>>> = Arc::new(OnceLock::new());
        // Nothing asynchronous may run: only PostFilter actuation spawns, and it is never called.
        let spawner: Spawner = Arc::new(|_| {});
        let profiles = crate::app::build_profiles(cfg, registry, client, &recorder, lister, view, spawner, &[])?;
        Ok(Self::from_profiles(cfg, &profiles))
    }

    /// Explains with a running scheduler's frameworks (their plugins hold no per-cycle state
    /// outside the CycleState, so a concurrent read-only cycle is safe).
    pub fn from_profiles(cfg: &KubeSchedulerConfiguration, profiles: &HashMap<String, Profile>) -> Self {
        let profiles = profiles
            .iter()
            .map(|(name, p)| {
                let fw = p.framework.clone();
                let preemption = fw
                    .list_plugins(ExtensionPoint::PostFilter)
                    .iter()
                    .any(|n| n == "DefaultPreemption")
                    .then(|| DefaultPreemption::new(preemption_args(cfg, name).as_ref(), fw.handle()).ok())
                    .flatten();
                (name.clone(), ExplainProfile { framework: fw, percentage: p.percentage_of_nodes_to_score, preemption })
            })
            .collect();
        Explainer { profiles, percentage_of_nodes_to_score: cfg.percentage_of_nodes_to_score.unwrap_or(0) }
    }

    /// The PodGroups the profiles' plugins read (one view shared by every profile), for an
    /// explainer built from a configuration to be given the cluster's groups and members.
    pub fn pod_groups(&self) -> Option<Arc<PodGroups>> {
        self.profiles.values().next().map(|p| p.framework.handle().pod_groups.clone())
    }

    /// True when one of the profiles is the pod's schedulerName.
    pub fn responsible_for(&self, pod: &Pod) -> bool {
        self.profiles.contains_key(scheduler_name(pod))
    }

    /// Explains `pod` against `snapshot` with its profile's framework.
    pub fn explain(
        &self,
        snapshot: &Snapshot,
        pod: &PodInfo,
        nominated: &NominatedPods,
    ) -> Result<Explanation, String> {
        let name = scheduler_name(&pod.pod);
        let p = self
            .profiles
            .get(name)
            .ok_or_else(|| format!("pod {} has schedulerName {name:?}, which no profile serves", pod.key()))?;
        let input = ExplainInput {
            framework: &p.framework,
            percentage_of_nodes_to_score: p.percentage.unwrap_or(self.percentage_of_nodes_to_score),
            snapshot,
            nominated,
            preemption: p.preemption.as_ref(),
        };
        Ok(explain(&input, pod))
    }
}

fn scheduler_name(pod: &Pod) -> &str {
    pod.spec.as_ref().and_then(|s| s.scheduler_name.as_deref()).unwrap_or("default-scheduler")
}

/// Nominated pods (pending pods with `status.nominatedNodeName`) that matter for `pod`: on nodes
/// of the snapshot, priority at least the pod's, not the pod itself.
pub fn nominated_from_pods(pods: &[Arc<PodInfo>], pod: &PodInfo, snapshot: &Snapshot) -> NominatedPods {
    let mut out = NominatedPods::new();
    for p in pods {
        if p.uid() == pod.uid() || p.priority() < pod.priority() || p.node_name().is_some() {
            continue;
        }
        let Some(nnn) = p.pod.status.as_ref().and_then(|s| s.nominated_node_name.as_deref()).filter(|n| !n.is_empty())
        else {
            continue;
        };
        if snapshot.index.contains_key(nnn) {
            out.entry(nnn.to_string()).or_default().push(p.clone());
        }
    }
    out
}
