//! Replays a cluster's pods through one configuration, in process and synchronously: the real
//! frameworks and filter/score walk, a cache that counts every placed pod, and DefaultPreemption's
//! plan applied when a pod fits nowhere. No randomness: ties go to walk order, preemption walks
//! every node from the first.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use ksched_framework::client::ApiClient;
use ksched_framework::handle::{EventRecorder, NoopRecorder, SchedulerView, Spawner};
use ksched_framework::{CycleState, ExtensionPoint, PodInfo, Snapshot};
use ksched_plugins::defaultpreemption::DefaultPreemption;
use ksched_scheduler::cache::Cache;
use ksched_scheduler::config::KubeSchedulerConfiguration;
use ksched_scheduler::explain::ReadOnlyClient;
use ksched_scheduler::schedule_one::{ScheduleError, SchedulingAlgorithm};

use crate::source::ClusterCopy;

/// Where one pod ended up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Placed on a node (the node, and the winning total score when nodes were scored).
    Placed { node: String, score: Option<i64> },
    /// Fits nowhere: the FailedScheduling message.
    Unschedulable(String),
    /// Evicted by a later pod's preemption.
    Preempted { by: String },
}

/// The result of one replay.
#[derive(Debug, Clone, Default)]
pub struct Replay {
    /// Outcome per pod (`namespace/name`), in replay order.
    pub outcomes: Vec<(String, Outcome)>,
    /// Preemptions made (one per preemptor).
    pub preemptions: usize,
    /// Pods evicted by them.
    pub victims: usize,
    /// Wall time of the replay (not part of the deterministic report).
    pub elapsed: Duration,
    /// Requested cpu (millicores) and memory (bytes) per node after the replay.
    pub requested: BTreeMap<String, (i64, i64)>,
}

/// The order pods are replayed in: bound pods by creation, then pending ones by creation.
pub fn replay_order(cluster: &ClusterCopy) -> Vec<&Pod> {
    let (bound, pending): (Vec<&Pod>, Vec<&Pod>) = cluster
        .pods
        .iter()
        .filter(|p| !crate::source::finished(p))
        .partition(|p| crate::source::node_name(p).is_some());
    bound.into_iter().chain(pending).collect()
}

/// Replays every pod of `cluster` through `cfg` from an empty cluster (nodes only).
pub fn replay(cluster: &ClusterCopy, cfg: &KubeSchedulerConfiguration) -> anyhow::Result<Replay> {
    let registry = ksched_plugins::in_tree_registry();
    let client: Arc<dyn ApiClient> = Arc::new(ReadOnlyClient);
    let recorder = |_: &str| -> Arc<dyn EventRecorder> { Arc::new(NoopRecorder) };
    let view: Arc<OnceLock<Arc<dyn SchedulerView>>> = Arc::new(OnceLock::new());
    let spawner: Spawner = Arc::new(|_| {});
    let profiles = ksched_scheduler::app::build_profiles(
        cfg,
        &registry,
        client,
        &recorder,
        cluster.lister.clone(),
        view,
        spawner,
        &[],
    )?;
    let preemption: HashMap<&str, DefaultPreemption> = profiles
        .iter()
        .filter(|(_, p)| p.framework.list_plugins(ExtensionPoint::PostFilter).iter().any(|n| n == "DefaultPreemption"))
        .filter_map(|(name, p)| {
            let args = cfg
                .profiles
                .iter()
                .find(|pr| pr.scheduler_name.as_deref().unwrap_or("default-scheduler") == name)
                .and_then(|pr| pr.plugin_config.iter().find(|pc| pc.name == "DefaultPreemption"))
                .and_then(|pc| pc.args.to_json());
            DefaultPreemption::new(args.as_ref(), p.framework.handle()).ok().map(|d| (name.as_str(), d))
        })
        .collect();

    // The pod groups as the scheduler's informers show them when the replay starts: every
    // member known, none placed (the replay records its placements).
    let groups = profiles
        .values()
        .next()
        .map(|p| p.framework.handle().pod_groups.clone())
        .filter(|_| cfg.features.generic_workload);
    if let Some(g) = &groups {
        for pg in &cluster.pod_groups {
            g.upsert(pg.clone());
        }
        for p in replay_order(cluster) {
            let mut unbound = p.clone();
            unbound.spec.get_or_insert_with(Default::default).node_name = None;
            g.observe_pod(None, Some(&Arc::new((&unbound).into())));
        }
    }

    let cache = Cache::new();
    for n in &cluster.nodes {
        cache.add_node(Arc::new(n.into()));
    }
    let mut alg = SchedulingAlgorithm {
        percentage_of_nodes_to_score: cfg.percentage_of_nodes_to_score.unwrap_or(0),
        ..Default::default()
    };
    let mut snapshot = Snapshot::default();
    let mut out = Replay::default();
    let mut index: HashMap<String, usize> = HashMap::new();
    let start = Instant::now();
    for original in replay_order(cluster) {
        let mut pod = original.clone();
        let key = format!(
            "{}/{}",
            pod.metadata.namespace.as_deref().unwrap_or("default"),
            pod.metadata.name.as_deref().unwrap_or("")
        );
        let spec = pod.spec.get_or_insert_with(Default::default);
        spec.node_name = None;
        let profile_name = spec.scheduler_name.clone().unwrap_or_else(|| "default-scheduler".into());
        if let Some(st) = pod.status.as_mut() {
            st.nominated_node_name = None;
        }
        let Some(profile) = profiles.get(&profile_name) else {
            // Not ours in this configuration: it stays where another scheduler put it.
            if crate::source::node_name(original).is_some() {
                let _ = cache.add_pod(Arc::new(original.into()));
            }
            continue;
        };
        let fw = &profile.framework;
        let pi = PodInfo::new(Arc::new((&pod).into()));
        let attempt = |alg: &mut SchedulingAlgorithm, snapshot: &mut Snapshot| {
            cache.update_snapshot(snapshot).map_err(|e| anyhow::anyhow!("snapshot: {e}"))?;
            let mut state = CycleState::new();
            let r = alg.schedule_pod(
                fw,
                profile.percentage_of_nodes_to_score,
                &mut state,
                &pi,
                snapshot,
                &Default::default(),
            );
            anyhow::Ok((r, state))
        };
        let (mut result, state) = attempt(&mut alg, &mut snapshot)?;
        if let Err(ScheduleError::Fit(fe)) = &result {
            let mut message = fe.message();
            if fw.has_post_filter_plugins() {
                let (msg, plan) = ksched_scheduler::explain::post_filter_dry_run(
                    fw,
                    preemption.get(profile_name.as_str()),
                    &state,
                    &pi,
                    &snapshot,
                    &fe.diagnosis.node_to_status,
                );
                let mut d = fe.diagnosis.clone();
                d.post_filter_msg = msg;
                message =
                    ksched_scheduler::fit_error::FitError { num_all_nodes: fe.num_all_nodes, diagnosis: d }.message();
                if let Some(c) = plan.as_ref().and_then(|p| p.chosen.map(|i| &p.candidates[i])) {
                    for v in &c.victims {
                        let _ = cache.remove_pod(&v.pod);
                        if let Some(g) = &groups {
                            g.forget(&v.pod);
                        }
                        if let Some(&i) = index.get(&v.key()) {
                            out.outcomes[i].1 = Outcome::Preempted { by: key.clone() };
                        }
                        out.victims += 1;
                    }
                    out.preemptions += 1;
                    result = attempt(&mut alg, &mut snapshot)?.0;
                }
            }
            if result.is_err() {
                result = Err(ScheduleError::Internal(message));
            }
        }
        let outcome = match result {
            Ok(r) => {
                let score = r.scores.as_ref().and_then(|s| s.totals.iter().copied().max());
                let mut bound = pod.clone();
                bound.spec.get_or_insert_with(Default::default).node_name = Some(r.suggested_host.clone());
                if let Some(g) = &groups {
                    g.assume(&pi.pod, &r.suggested_host);
                }
                cache.add_pod(Arc::new(bound.into())).map_err(|e| anyhow::anyhow!("placing {key}: {e}"))?;
                Outcome::Placed { node: r.suggested_host, score }
            }
            Err(e) => Outcome::Unschedulable(e.message()),
        };
        index.insert(key.clone(), out.outcomes.len());
        out.outcomes.push((key, outcome));
    }
    out.elapsed = start.elapsed();
    cache.update_snapshot(&mut snapshot).map_err(|e| anyhow::anyhow!("snapshot: {e}"))?;
    for ni in snapshot.list() {
        out.requested.insert(ni.name().to_string(), (ni.requested.milli_cpu, ni.requested.memory));
    }
    Ok(out)
}
