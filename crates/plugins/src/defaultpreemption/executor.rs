//! Actuating a preemption asynchronously (SchedulerAsyncPreemption): clear the nominations of
//! lower-priority pods on the node, evict the victims (all but the last in parallel, then the
//! last), and keep the preemptor gated at PreEnqueue meanwhile. The preemptor is a pod, or a
//! pod group preempting as a whole (workload-aware preemption, "node" `cluster`).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};

use ksched_framework::client::ApiError;
use ksched_framework::handle::SchedulerView;
use ksched_framework::kobj::KObj;
use ksched_framework::pod::Pod;
use ksched_framework::pod_info::pod_priority;
use ksched_framework::podgroup::{pod_group_priority, PodGroup};
use ksched_framework::runtime::WaitingPod;
use ksched_framework::{Framework, Handle, PodInfo};

use super::PreemptionMetrics;

/// Condition reason set on victims.
pub const REASON_PREEMPTION_BY_SCHEDULER: &str = "PreemptionByScheduler";
/// Condition type set on victims.
pub const CONDITION_DISRUPTION_TARGET: &str = "DisruptionTarget";

#[derive(Default)]
struct Preempting {
    /// Preemptors whose eviction task has not finished.
    running: HashSet<String>,
    /// Preemptor UID -> (namespace, name) of the last victim, once its eviction started.
    last_victim: HashMap<String, (String, String)>,
}

/// Who the victims make room for.
#[derive(Clone)]
pub enum Preemptor {
    /// One pod.
    Pod(Arc<Pod>),
    /// A pod group as a whole, with its members being scheduled.
    PodGroup {
        /// The group.
        group: Arc<PodGroup>,
        /// Its members.
        pods: Vec<Arc<Pod>>,
    },
}

impl Preemptor {
    /// The key PreEnqueue gating looks up: the pod's UID, or the group's (its namespace/name
    /// when it has none).
    pub fn key(&self) -> String {
        match self {
            Preemptor::Pod(p) => p.metadata.uid.clone().unwrap_or_default(),
            Preemptor::PodGroup { group, .. } => pod_group_key(group),
        }
    }

    /// Upstream's preemptor type in event and condition messages.
    fn kind(&self) -> &'static str {
        match self {
            Preemptor::Pod(_) => "pod",
            Preemptor::PodGroup { .. } => "podgroup",
        }
    }

    fn priority(&self) -> i32 {
        match self {
            Preemptor::Pod(p) => pod_priority(p),
            Preemptor::PodGroup { group, .. } => pod_group_priority(group),
        }
    }

    /// The pods to requeue when the preemption is over.
    fn pods(&self) -> Vec<Arc<Pod>> {
        match self {
            Preemptor::Pod(p) => vec![p.clone()],
            Preemptor::PodGroup { pods, .. } => pods.clone(),
        }
    }

    fn kobj(&self) -> KObj<'_> {
        match self {
            Preemptor::Pod(p) => KObj::of(&**p),
            Preemptor::PodGroup { group, .. } => KObj::of(&**group),
        }
    }

    /// The object events name as related (the recorder only relates pods).
    fn related_pod(&self) -> Option<&Pod> {
        match self {
            Preemptor::Pod(p) => Some(p),
            Preemptor::PodGroup { .. } => None,
        }
    }

    fn first_pod(&self) -> Option<&Arc<Pod>> {
        match self {
            Preemptor::Pod(p) => Some(p),
            Preemptor::PodGroup { pods, .. } => pods.first(),
        }
    }
}

/// The gating key of a pod group: its UID, or namespace/name when it has none.
pub fn pod_group_key(pg: &PodGroup) -> String {
    match pg.metadata.uid.as_deref().filter(|u| !u.is_empty()) {
        Some(uid) => uid.to_string(),
        None => format!(
            "{}/{}",
            pg.metadata.namespace.as_deref().unwrap_or("default"),
            pg.metadata.name.as_deref().unwrap_or_default()
        ),
    }
}

/// How one victim is removed.
enum Eviction {
    /// The victim waits at Permit: reject it in memory, no API call.
    InMemory(Arc<WaitingPod>),
    /// Mark it with the DisruptionTarget condition, then delete it.
    Api,
}

/// Runs evictions and tracks which preemptors are still waiting for them.
pub struct Executor {
    handle: Handle,
    plugin_name: String,
    metrics: Arc<PreemptionMetrics>,
    state: Mutex<Preempting>,
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executor").field("plugin", &self.plugin_name).finish_non_exhaustive()
    }
}

impl Executor {
    /// An executor acting on behalf of `plugin_name`.
    pub fn new(handle: Handle, plugin_name: &str, metrics: Arc<PreemptionMetrics>) -> Self {
        Executor { handle, plugin_name: plugin_name.to_string(), metrics, state: Mutex::new(Preempting::default()) }
    }

    fn lock(&self) -> MutexGuard<'_, Preempting> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// True while the preemptor's evictions are being issued. Once the last victim's eviction has
    /// started, the preemptor is released as soon as that victim is gone or terminating, so the
    /// deletion event that requeues it is never missed.
    pub fn is_pod_running_preemption(&self, uid: &str) -> bool {
        let st = self.lock();
        if !st.running.contains(uid) {
            return false;
        }
        let Some((ns, name)) = st.last_victim.get(uid) else { return true };
        let Some(view) = self.handle.scheduler() else { return true };
        match view.get_pod(ns, name) {
            None => false,
            Some(p) => p.metadata.deletion_timestamp.is_none(),
        }
    }

    /// True while a pod group's evictions are being issued (see
    /// [`Executor::is_pod_running_preemption`]).
    pub fn is_pod_group_running_preemption(&self, pg: &PodGroup) -> bool {
        self.is_pod_running_preemption(&pod_group_key(pg))
    }

    /// Evicts `victims` from `node` for the pod `preemptor` in the background.
    pub fn actuate(self: &Arc<Self>, fw: &Framework, node: &str, victims: &[Arc<PodInfo>], preemptor: Arc<Pod>) {
        self.actuate_for(fw, node, victims, Preemptor::Pod(preemptor));
    }

    /// Evicts `victims` (from `node`; upstream names a pod group's domain `cluster`) for
    /// `preemptor` in the background.
    pub fn actuate_for(self: &Arc<Self>, fw: &Framework, node: &str, victims: &[Arc<PodInfo>], preemptor: Preemptor) {
        let victims: Vec<(Arc<PodInfo>, Eviction)> = victims
            .iter()
            // Graceful deletion already started: another call would change nothing.
            .filter(|v| v.pod.metadata.deletion_timestamp.is_none())
            .map(|v| {
                let how = match fw.get_waiting_pod(v.uid()) {
                    Some(wp) => Eviction::InMemory(wp),
                    None => Eviction::Api,
                };
                (v.clone(), how)
            })
            .collect();
        if victims.is_empty() {
            return;
        }
        self.metrics.victims.fetch_add(victims.len() as u64, Ordering::Relaxed);
        self.metrics.actuations.fetch_add(1, Ordering::Relaxed);
        let uid = preemptor.key();
        self.lock().running.insert(uid.clone());
        let scheduler_name = preemptor
            .first_pod()
            .and_then(|p| p.spec.as_ref())
            .and_then(|s| s.scheduler_name.clone())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| fw.profile_name().to_string());
        let ctx = Arc::new(EvictionContext {
            handle: self.handle.clone(),
            plugin_name: self.plugin_name.clone(),
            node: node.to_string(),
            scheduler_name,
            preemptor,
        });
        let this = self.clone();
        (self.handle.spawner)(Box::pin(async move {
            let mut failed = false;
            if let Err(e) = ctx.clear_lower_priority_nominations().await {
                tracing::warn!(node = %ctx.node, error = %e, "cannot clear nominatedNodeName of lower-priority pods");
                failed = true;
            }
            let (last, rest) = victims.split_last().expect("victims is not empty");
            let mut evict_last = true;
            if !rest.is_empty() {
                let results = futures::future::join_all(rest.iter().map(|(v, how)| ctx.evict(v, how))).await;
                if let Some(e) = results.into_iter().find_map(Result::err) {
                    tracing::warn!(error = %e, "error during async preemption");
                    failed = true;
                    // Skipping the last victim lets the preemptor retry sooner.
                    evict_last = false;
                }
            }
            if evict_last {
                let key = (last.0.namespace().to_string(), last.0.name().to_string());
                this.lock().last_victim.insert(uid.clone(), key);
                if let Err(e) = ctx.evict(&last.0, &last.1).await {
                    tracing::warn!(error = %e, "error during async preemption of the last victim");
                    failed = true;
                }
            }
            {
                let mut st = this.lock();
                st.running.remove(&uid);
                st.last_victim.remove(&uid);
            }
            let Some(view) = ctx.handle.scheduler() else { return };
            if failed {
                // The preemptor may wait in the unschedulable pool for a deletion that never
                // comes.
                tracing::debug!(node = %ctx.node, "re-activating the preemptor after a failed preemption");
                view.activate(&ctx.preemptor.pods());
            } else if victims_gone(view.as_ref(), &victims) {
                // Normally the victims' deletion events requeue the preemptor, the gate having
                // lifted once the last victim was gone or terminating. But a victim can be
                // gone (deleted at once, or by an earlier attempt's eviction) before its
                // eviction here started: its event then found the preemptor gated and no other
                // will come. Only a preemptor still held by this gate is released, so no
                // attempt is added where the events already did their job.
                view.release_gated(&ctx.preemptor.pods(), &this.plugin_name);
            }
        }));
    }
}

/// True when no victim evicted through the API is left in the informer's view, so no deletion
/// event is still to come for them (victims rejected in memory never get one).
fn victims_gone(view: &dyn SchedulerView, victims: &[(Arc<PodInfo>, Eviction)]) -> bool {
    victims
        .iter()
        .filter(|(_, how)| matches!(how, Eviction::Api))
        .all(|(v, _)| view.get_pod(v.namespace(), v.name()).is_none_or(|p| p.metadata.uid.as_deref() != Some(v.uid())))
}

/// What an eviction task needs, shared by its victims.
struct EvictionContext {
    handle: Handle,
    plugin_name: String,
    node: String,
    scheduler_name: String,
    preemptor: Preemptor,
}

impl EvictionContext {
    /// Lower-priority pods nominated to the node may no longer fit there; dropping their
    /// nomination lets them look elsewhere sooner.
    async fn clear_lower_priority_nominations(&self) -> Result<(), String> {
        let Some(view) = self.handle.scheduler() else { return Ok(()) };
        let prio = self.preemptor.priority();
        let mut errors = Vec::new();
        for p in view.nominated_pods_for_node(&self.node) {
            if p.priority() >= prio {
                continue;
            }
            let nnn = p.pod.status.as_ref().and_then(|s| s.nominated_node_name.as_deref()).unwrap_or_default();
            if nnn.is_empty() {
                continue;
            }
            let patch = serde_json::json!({"status": {"nominatedNodeName": null}});
            if let Err(e) = self.handle.client.patch_pod_status(p.namespace(), p.name(), patch).await {
                errors.push(e.message);
            }
        }
        match errors.len() {
            0 => Ok(()),
            1 => Err(errors.remove(0)),
            _ => Err(format!("[{}]", errors.join(", "))),
        }
    }

    /// Evicts one victim and records the Preempted event (not when it was already gone).
    async fn evict(&self, victim: &Arc<PodInfo>, how: &Eviction) -> Result<(), ApiError> {
        let mut note = format!("Preempted by {} {} on node {}", self.preemptor.kind(), self.preemptor.key(), self.node);
        match how {
            Eviction::InMemory(wp) => {
                wp.preempt(&self.plugin_name, "preempted");
                note.push_str(" (in kube-scheduler memory).");
            }
            Eviction::Api => {
                let message = format!(
                    "{}: preempting to accommodate a higher priority {}",
                    self.scheduler_name,
                    self.preemptor.kind()
                );
                if let Some(patch) = disruption_target_patch(&victim.pod, &message) {
                    match self.handle.client.patch_pod_status(victim.namespace(), victim.name(), patch).await {
                        Ok(()) => {}
                        Err(e) if e.is_not_found() => return Ok(()),
                        Err(e) => return Err(e),
                    }
                }
                // Upstream deletes by name without preconditions.
                let (preemptor, target) =
                    (self.preemptor.kobj(), KObj { namespace: victim.namespace(), name: victim.name() });
                match self.handle.client.delete_pod(victim.namespace(), victim.name(), None).await {
                    Ok(()) => {}
                    Err(e) if e.is_not_found() => {
                        tracing::debug!(v = 2, preemptor = ?preemptor, victim = ?target, node = %self.node, "Victim Pod is already deleted");
                        return Ok(());
                    }
                    Err(e) => {
                        tracing::error!(error = %e.message, pod = ?target, preemptor = ?preemptor, "Tried to preempted pod");
                        return Err(e);
                    }
                }
                tracing::debug!(v = 2, preemptor = ?preemptor, victim = ?target, node = %self.node, "Preemptor Pod preempted victim Pod");
            }
        }
        self.handle.recorder.record(
            &victim.pod,
            self.preemptor.related_pod(),
            "Normal",
            "Preempted",
            "Preempting",
            &note,
        );
        Ok(())
    }
}

/// The status patch adding `DisruptionTarget=True` (reason PreemptionByScheduler); `None` when
/// the victim already carries exactly that condition.
pub fn disruption_target_patch(victim: &Pod, message: &str) -> Option<serde_json::Value> {
    let generation = victim.metadata.generation.filter(|g| *g != 0);
    let existing = victim
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == CONDITION_DISRUPTION_TARGET));
    let unchanged = existing.is_some_and(|c| {
        c.status == "True"
            && c.reason.as_deref() == Some(REASON_PREEMPTION_BY_SCHEDULER)
            && c.message.as_deref() == Some(message)
            && c.observed_generation.filter(|g| *g != 0) == generation
            && c.last_probe_time.is_none()
    });
    if unchanged {
        return None;
    }
    // The transition time only moves when the status flips.
    let transition = match existing {
        Some(c) if c.status == "True" => c.last_transition_time.as_ref().map(|t| t.0),
        _ => None,
    }
    .unwrap_or_else(super::candidates::now);
    let mut cond = serde_json::json!({
        "type": CONDITION_DISRUPTION_TARGET,
        "status": "True",
        "reason": REASON_PREEMPTION_BY_SCHEDULER,
        "message": message,
        "lastProbeTime": null,
        "lastTransitionTime": transition.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
    });
    if let Some(g) = generation {
        cond["observedGeneration"] = serde_json::json!(g);
    }
    Some(serde_json::json!({"status": {"conditions": [cond]}}))
}
