//! The framework runtime: builds a profile's plugin lists (MultiPoint expansion, weights) and
//! runs the extension points with upstream's semantics (upstream `framework/runtime/framework.go`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::cycle_state::CycleState;
use crate::events::{ActionType, ClusterEvent, ClusterEventWithHint, EventResource, QueueingHint};
use crate::handle::{ExtensionPoint, Handle};
use crate::interface::*;
use crate::memo::{EvaluationMemo, EvaluationMemos, MemoKey};
use crate::node_info::NodeInfo;
use crate::parallelize::ParallelSite;
use crate::plugin_config::{PluginRef, PluginSet, Plugins};
use crate::pod_info::PodInfo;
use crate::registry::Registry;
use crate::snapshot::Snapshot;
use crate::status::{Code, Status};

/// Fewest nodes a scoring task gets: below this, waking another thread costs more than it saves.
const SCORE_CHUNK_MIN: usize = 128;
/// Score's chunks of nodes (with the memo, of the nodes it did not have: the same work a node).
static SCORE_SITE: ParallelSite = ParallelSite::new();

type PluginArc = Arc<dyn Plugin>;

/// A Filter plugin that runs this cycle.
pub struct ActiveFilter<'a> {
    /// The plugin (for its name).
    pub plugin: &'a PluginArc,
    /// Its Filter extension point.
    pub filter: &'a dyn FilterPlugin,
    /// The filter bound to the cycle state and pod it was resolved for, with them: used only
    /// when [`Framework::run_filters`] is given those same objects.
    bound: Option<(BoundFilter<'a>, &'a CycleState, &'a PodInfo)>,
}

/// One profile's instantiated plugins, in execution order per extension point.
pub struct Framework {
    profile_name: String,
    handle: Handle,
    plugins: BTreeMap<String, PluginArc>,
    pre_enqueue: Vec<PluginArc>,
    queue_sort: Vec<PluginArc>,
    pre_filter: Vec<PluginArc>,
    filter: Vec<PluginArc>,
    post_filter: Vec<PluginArc>,
    pre_score: Vec<PluginArc>,
    /// Per PreFilter and PreScore plugin, in order: whether it has no binding-cycle extension
    /// point, so its cycle state is dropped before the binding cycle (fixed at construction, read
    /// every cycle).
    pre_filter_scheduling_only: Vec<bool>,
    pre_score_scheduling_only: Vec<bool>,
    score: Vec<(PluginArc, i64)>,
    reserve: Vec<PluginArc>,
    permit: Vec<PluginArc>,
    pre_bind: Vec<PluginArc>,
    bind: Vec<PluginArc>,
    post_bind: Vec<PluginArc>,
    placement_generate: Vec<PluginArc>,
    placement_score: Vec<(PluginArc, i64)>,
    enqueue_events: BTreeMap<String, Vec<ClusterEventWithHint>>,
    waiting_pods: Arc<WaitingPods>,
    /// The batching cache; `None` when OpportunisticBatching is off (see [`crate::batch`]).
    pub(crate) batch: Option<Mutex<crate::batch::OpportunisticBatch>>,
    /// The plugins that sign pods, in upstream's order (PreFilter, Filter, PreScore, Score
    /// plugins, each once); `None` when the profile cannot sign.
    pub(crate) signers: Option<Vec<PluginArc>>,
    /// Filter and Score results of unchanged nodes (see [`crate::memo`]); `None` when the
    /// profile has extenders or no node-local plugin.
    memo: Option<Mutex<EvaluationMemos>>,
    /// Set by [`Framework::set_memo`]`(false)`.
    memo_off: std::sync::atomic::AtomicBool,
    /// Nodes whose Filter verdict a cycle took from the memo, since the profile was built.
    memo_reused: std::sync::atomic::AtomicU64,
    /// The node-local Filter and Score plugins, each once: their inputs make the memo's key.
    memo_plugins: Vec<PluginArc>,
}

/// Whether the memo may stand in for `p`: it is node-local and writes the inputs it reads.
fn is_node_local(p: &PluginArc) -> bool {
    p.as_memo().is_some()
}

/// The pods Permit made wait, by UID: one map per profile, shared by its framework and (through
/// the handle) its plugins, which allow or reject them.
#[derive(Default)]
pub struct WaitingPods(Mutex<HashMap<String, Arc<WaitingPod>>>);

impl WaitingPods {
    /// The waiting pod with this UID.
    pub fn get(&self, uid: &str) -> Option<Arc<WaitingPod>> {
        self.0.lock().get(uid).cloned()
    }

    /// Every waiting pod.
    pub fn list(&self) -> Vec<Arc<WaitingPod>> {
        self.0.lock().values().cloned().collect()
    }

    fn insert(&self, uid: &str, wp: Arc<WaitingPod>) {
        self.0.lock().insert(uid.to_string(), wp);
    }

    fn remove(&self, uid: &str) {
        self.0.lock().remove(uid);
    }
}

impl std::fmt::Debug for Framework {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Framework").field("profile", &self.profile_name).field("plugins", &self.plugins.keys()).finish()
    }
}

/// Interface names used in construction errors, as upstream spells them.
#[derive(Clone, Copy)]
enum Point {
    PreEnqueue,
    QueueSort,
    PreFilter,
    Filter,
    PostFilter,
    PreScore,
    Score,
    Reserve,
    Permit,
    PreBind,
    Bind,
    PostBind,
    PlacementGenerate,
    PlacementScore,
}

impl Point {
    fn iface(self) -> &'static str {
        match self {
            Point::PreEnqueue => "PreEnqueuePlugin",
            Point::QueueSort => "QueueSortPlugin",
            Point::PreFilter => "PreFilterPlugin",
            Point::Filter => "FilterPlugin",
            Point::PostFilter => "PostFilterPlugin",
            Point::PreScore => "PreScorePlugin",
            Point::Score => "ScorePlugin",
            Point::Reserve => "ReservePlugin",
            Point::Permit => "PermitPlugin",
            Point::PreBind => "PreBindPlugin",
            Point::Bind => "BindPlugin",
            Point::PostBind => "PostBindPlugin",
            Point::PlacementGenerate => "PlacementGeneratePlugin",
            Point::PlacementScore => "PlacementScorePlugin",
        }
    }

    fn implemented_by(self, p: &dyn Plugin) -> bool {
        match self {
            Point::PreEnqueue => p.as_pre_enqueue().is_some(),
            Point::QueueSort => p.as_queue_sort().is_some(),
            Point::PreFilter => p.as_pre_filter().is_some(),
            Point::Filter => p.as_filter().is_some(),
            Point::PostFilter => p.as_post_filter().is_some(),
            Point::PreScore => p.as_pre_score().is_some(),
            Point::Score => p.as_score().is_some(),
            Point::Reserve => p.as_reserve().is_some(),
            Point::Permit => p.as_permit().is_some(),
            Point::PreBind => p.as_pre_bind().is_some(),
            Point::Bind => p.as_bind().is_some(),
            Point::PostBind => p.as_post_bind().is_some(),
            Point::PlacementGenerate => p.as_placement_generate().is_some(),
            Point::PlacementScore => p.as_placement_score().is_some(),
        }
    }
}

fn point_sets(p: &Plugins) -> [(Point, &PluginSet); 14] {
    [
        (Point::PreEnqueue, &p.pre_enqueue),
        (Point::QueueSort, &p.queue_sort),
        (Point::PreFilter, &p.pre_filter),
        (Point::Filter, &p.filter),
        (Point::PostFilter, &p.post_filter),
        (Point::PreScore, &p.pre_score),
        (Point::Score, &p.score),
        (Point::Reserve, &p.reserve),
        (Point::Permit, &p.permit),
        (Point::PreBind, &p.pre_bind),
        (Point::Bind, &p.bind),
        (Point::PostBind, &p.post_bind),
        (Point::PlacementGenerate, &p.placement_generate),
        (Point::PlacementScore, &p.placement_score),
    ]
}

/// Scores of the feasible nodes: per-plugin normalised scores, weights and weighted totals,
/// aligned with the node list.
#[derive(Debug, Clone, Default)]
pub struct ScoreResult {
    /// Names of the plugins that scored, in order.
    pub plugin_names: Vec<String>,
    /// Weight of each plugin in `plugin_names`.
    pub weights: Vec<i64>,
    /// `scores[p * nodes + n]` = normalised score (0–100) of plugin p for node n.
    pub scores: Vec<i64>,
    /// Σ over plugins of weight × score, per node.
    pub totals: Vec<i64>,
}

impl ScoreResult {
    /// Weight × normalised score of plugin `plugin` for node `node`.
    pub fn weighted(&self, plugin: usize, node: usize) -> i64 {
        self.scores[plugin * self.totals.len() + node] * self.weights[plugin]
    }
}

impl Framework {
    /// Builds a profile: instantiates each needed plugin once, expands MultiPoint, checks weights.
    pub fn new(
        registry: &Registry,
        profile_name: &str,
        plugins: &Plugins,
        plugin_args: &[(String, serde_json::Value)],
        handle: Handle,
    ) -> Result<Framework, String> {
        let mut args: HashMap<&str, &serde_json::Value> = HashMap::new();
        for (name, a) in plugin_args {
            if args.insert(name.as_str(), a).is_some() {
                return Err(format!("repeated config for plugin {name}"));
            }
        }
        // Instantiate every plugin referenced anywhere, once.
        let mut needed: Vec<&str> = plugins.multi_point.enabled.iter().map(|p| p.name.as_str()).collect();
        for (_, set) in point_sets(plugins) {
            needed.extend(set.enabled.iter().map(|p| p.name.as_str()));
        }
        let mut instances: BTreeMap<String, PluginArc> = BTreeMap::new();
        for name in needed {
            if instances.contains_key(name) {
                continue;
            }
            let Some(factory) = registry.get(name) else { continue };
            let p =
                factory(args.get(name).copied(), &handle).map_err(|e| format!("initializing plugin {name:?}: {e}"))?;
            instances.insert(name.to_string(), p);
        }

        let waiting_pods = handle.waiting_pods.clone();
        let mut fw = Framework {
            profile_name: profile_name.to_string(),
            handle,
            plugins: BTreeMap::new(),
            pre_enqueue: vec![],
            queue_sort: vec![],
            pre_filter: vec![],
            filter: vec![],
            post_filter: vec![],
            pre_score: vec![],
            pre_filter_scheduling_only: vec![],
            pre_score_scheduling_only: vec![],
            score: vec![],
            reserve: vec![],
            permit: vec![],
            pre_bind: vec![],
            bind: vec![],
            post_bind: vec![],
            placement_generate: vec![],
            placement_score: vec![],
            enqueue_events: BTreeMap::new(),
            waiting_pods,
            batch: None,
            signers: None,
            memo: None,
            memo_plugins: Vec::new(),
            memo_off: Default::default(),
            memo_reused: Default::default(),
        };

        // Score weights: explicit score list first, then MultiPoint; first occurrence wins.
        let mut weights: HashMap<&str, i64> = HashMap::new();
        for p in plugins.score.enabled.iter().chain(&plugins.multi_point.enabled) {
            weights.entry(p.name.as_str()).or_insert_with(|| i64::from(p.weight.unwrap_or(0)).max(1));
        }

        for (point, set) in point_sets(plugins) {
            let list = expand(point, set, &plugins.multi_point, &instances)?;
            match point {
                Point::PreEnqueue => fw.pre_enqueue = list,
                Point::QueueSort => fw.queue_sort = list,
                Point::PreFilter => fw.pre_filter = list,
                Point::Filter => fw.filter = list,
                Point::PostFilter => fw.post_filter = list,
                Point::PreScore => fw.pre_score = list,
                Point::Score => {
                    let mut total: i64 = 0;
                    for p in list {
                        let w = weights.get(p.name()).copied().unwrap_or(1);
                        total = total
                            .checked_add(
                                w.checked_mul(MAX_NODE_SCORE).ok_or("total score of Score plugins could overflow")?,
                            )
                            .ok_or("total score of Score plugins could overflow")?;
                        fw.score.push((p, w));
                    }
                }
                Point::Reserve => fw.reserve = list,
                Point::Permit => fw.permit = list,
                Point::PreBind => fw.pre_bind = list,
                Point::Bind => fw.bind = list,
                Point::PostBind => fw.post_bind = list,
                Point::PlacementGenerate => fw.placement_generate = list,
                Point::PlacementScore => {
                    let mut placement_weights: HashMap<&str, i64> = HashMap::new();
                    for p in plugins.placement_score.enabled.iter().chain(&plugins.multi_point.enabled) {
                        placement_weights
                            .entry(p.name.as_str())
                            .or_insert_with(|| i64::from(p.weight.unwrap_or(0)).max(1));
                    }
                    fw.placement_score = list
                        .into_iter()
                        .map(|p| (p.clone(), placement_weights.get(p.name()).copied().unwrap_or(1)))
                        .collect();
                }
            }
        }
        if fw.placement_generate.len() > 1 {
            return Err(format!(
                "at most one placement generate plugin is allowed for profile with scheduler name {profile_name:?}"
            ));
        }
        if fw.queue_sort.len() != 1 {
            return Err(format!(
                "only one queue sort plugin required for profile with scheduler name {profile_name:?}, but got {}",
                fw.queue_sort.len()
            ));
        }
        if fw.bind.is_empty() {
            return Err(format!("at least one bind plugin is needed for profile with scheduler name {profile_name:?}"));
        }
        fw.register_enqueue_events();
        if fw.handle.features.opportunistic_batching {
            fw.batch = Some(Mutex::new(crate::batch::OpportunisticBatch::new()));
            fw.signers = fw.signing_plugins();
        }
        fw.init_memo();
        fw.pre_filter_scheduling_only = fw.pre_filter.iter().map(|p| !fw.in_binding_cycle(p.name())).collect();
        fw.pre_score_scheduling_only = fw.pre_score.iter().map(|p| !fw.in_binding_cycle(p.name())).collect();
        fw.plugins = instances;
        Ok(fw)
    }

    fn register_enqueue_events(&mut self) {
        let mut seen = HashSet::new();
        let relevant = self
            .pre_enqueue
            .iter()
            .chain(&self.pre_filter)
            .chain(&self.filter)
            .chain(&self.reserve)
            .chain(&self.permit);
        for p in relevant {
            if !seen.insert(p.name().to_string()) {
                continue;
            }
            let mut events = p
                .events_to_register()
                .unwrap_or_else(|| vec![ClusterEventWithHint::new(EventResource::Wildcard, ActionType::ALL)]);
            // Plugins written before UpdateNodeTaint existed relied on NodeAdd for untainting.
            let has_node_add = events
                .iter()
                .any(|e| e.event.resource == EventResource::Node && e.event.action.intersects(ActionType::ADD));
            let has_taint = events.iter().any(|e| {
                e.event.resource == EventResource::Node && e.event.action.intersects(ActionType::UPDATE_NODE_TAINT)
            });
            if has_node_add && !has_taint {
                events.push(ClusterEventWithHint::new(EventResource::Node, ActionType::UPDATE_NODE_TAINT));
            }
            self.enqueue_events.insert(p.name().to_string(), events);
        }
    }

    /// The plugins whose Sign makes the pod signature (upstream `computeBatchablePlugins`), or
    /// `None` when the profile has extenders or a PreFilter, Filter, PreScore or Score plugin
    /// that does not sign: such a profile never batches.
    fn signing_plugins(&self) -> Option<Vec<PluginArc>> {
        if !self.handle.extenders.is_empty() {
            tracing::info!(profile = %self.profile_name, "Disabling signatures for profile because it has extenders configured.");
            return None;
        }
        let candidates =
            self.pre_filter.iter().chain(&self.filter).chain(&self.pre_score).chain(self.score.iter().map(|(p, _)| p));
        let mut seen = HashSet::new();
        let (mut signers, mut unsupported) = (Vec::new(), Vec::new());
        for p in candidates.filter(|p| seen.insert(p.name())) {
            match p.as_sign() {
                Some(_) => signers.push(p.clone()),
                None => unsupported.push(p.name()),
            }
        }
        if !unsupported.is_empty() {
            tracing::info!(profile = %self.profile_name, plugins = ?unsupported, "Disabling signatures for profile because plugins do not support it.");
            return None;
        }
        Some(signers)
    }

    /// Turns the reuse of unchanged nodes' Filter and Score results on (the default, where the
    /// profile allows it) or off. Outcomes are the same either way; tests compare the two.
    pub fn set_memo(&self, on: bool) {
        self.memo_off.store(!on, std::sync::atomic::Ordering::Relaxed);
        if let Some(m) = &self.memo {
            m.lock().clear();
        }
    }

    /// Counts `nodes` whose Filter verdict the filter walk took from the memo.
    pub fn record_memo_reuse(&self, nodes: u64) {
        if nodes > 0 {
            self.memo_reused.fetch_add(nodes, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Nodes whose Filter verdict was taken from the memo since the profile was built (the
    /// differential check uses it to tell that the memo was exercised).
    pub fn memo_reused(&self) -> u64 {
        self.memo_reused.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Sets up the memo for a profile without extenders that has node-local plugins (at most 64
    /// Filter and Score plugins each, for the key's bit sets).
    fn init_memo(&mut self) {
        let node_local = |p: &&PluginArc| is_node_local(p);
        if !self.handle.extenders.is_empty() || self.filter.len() > 64 || self.score.len() > 64 {
            return;
        }
        let mut seen = HashSet::new();
        let candidates = self.filter.iter().chain(self.score.iter().map(|(p, _)| p));
        self.memo_plugins =
            candidates.filter(node_local).filter(|p| seen.insert(p.name().to_string())).cloned().collect();
        if !self.memo_plugins.is_empty() {
            self.memo = Some(Mutex::new(EvaluationMemos::default()));
        }
    }

    /// The memo's key for this cycle, or `None` when the cycle may not use it: the cycle is a
    /// pod group's, a Filter plugin that is not node-local runs, or a node-local plugin cannot
    /// write its inputs exactly. Called after PreFilter.
    ///
    /// Cycles that sample plugin durations use it too: a duration is observed per plugin call,
    /// and a node taken from the memo makes no call. Running every plugin on every node there
    /// (a tenth of the cycles) was half of the per-node cost at 30,000 nodes.
    pub fn memo_key(&self, state: &CycleState, pod: &PodInfo, num_nodes: usize) -> Option<MemoKey> {
        self.memo.as_ref()?;
        if state.pod_group_cycle.is_some() || self.memo_off.load(std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        let mut filters = 0u64;
        for (i, p) in self.filter.iter().enumerate() {
            if state.skip_filter_plugins.contains(p.name()) {
                continue;
            }
            if !is_node_local(p) {
                return None;
            }
            filters |= 1 << i;
        }
        // The image epoch is read before any score is computed: a count that changes later
        // makes the next cycle's key differ.
        let image_epoch = crate::node_info::image_epoch();
        let mut inputs = Vec::with_capacity(128);
        let mut w = crate::batch::FragmentWriter::new(&mut inputs);
        for p in &self.memo_plugins {
            w.str(p.name());
            if !p.as_memo()?.memo_inputs(state, pod, &mut w) {
                return None;
            }
        }
        Some(MemoKey { inputs: inputs.into(), filters, num_nodes, image_epoch })
    }

    /// The memo for `key`, started for a cycle (see [`crate::memo`]).
    pub fn memo(&self, key: &MemoKey) -> Option<parking_lot::MappedMutexGuard<'_, EvaluationMemo>> {
        let memos = self.memo.as_ref()?.lock();
        Some(parking_lot::MutexGuard::map(memos, |m| m.for_key(key)))
    }

    /// The profile (scheduler) name.
    pub fn profile_name(&self) -> &str {
        &self.profile_name
    }

    /// The handle given to plugins.
    pub fn handle(&self) -> &Handle {
        &self.handle
    }

    /// A plugin instance by name.
    pub fn plugin(&self, name: &str) -> Option<&PluginArc> {
        self.plugins.get(name)
    }

    /// Events each plugin registered, by plugin name (for the queue's hint evaluation).
    pub fn enqueue_events(&self) -> &BTreeMap<String, Vec<ClusterEventWithHint>> {
        &self.enqueue_events
    }

    /// Names of the plugins enabled at an extension point, in order (for explanations and tests).
    pub fn list_plugins(&self, point: ExtensionPoint) -> Vec<String> {
        let names = |v: &Vec<PluginArc>| v.iter().map(|p| p.name().to_string()).collect();
        match point {
            ExtensionPoint::PreEnqueue => names(&self.pre_enqueue),
            ExtensionPoint::PreFilter => names(&self.pre_filter),
            ExtensionPoint::Filter => names(&self.filter),
            ExtensionPoint::PostFilter => names(&self.post_filter),
            ExtensionPoint::PreScore => names(&self.pre_score),
            ExtensionPoint::Score => self.score.iter().map(|(p, w)| format!("{}({w})", p.name())).collect(),
            ExtensionPoint::Reserve | ExtensionPoint::Unreserve => names(&self.reserve),
            ExtensionPoint::Permit => names(&self.permit),
            ExtensionPoint::PreBind | ExtensionPoint::PreBindPreFlight => names(&self.pre_bind),
            ExtensionPoint::Bind => names(&self.bind),
            ExtensionPoint::PostBind => names(&self.post_bind),
            ExtensionPoint::PlacementGenerate => names(&self.placement_generate),
            ExtensionPoint::PlacementScore => {
                self.placement_score.iter().map(|(p, w)| format!("{}({w})", p.name())).collect()
            }
            _ => vec![],
        }
    }

    /// True when the profile has Score plugins.
    pub fn has_score_plugins(&self) -> bool {
        !self.score.is_empty()
    }

    /// True when the profile has PostFilter plugins.
    pub fn has_post_filter_plugins(&self) -> bool {
        !self.post_filter.is_empty()
    }

    /// True when the profile has Filter plugins.
    pub fn has_filter_plugins(&self) -> bool {
        !self.filter.is_empty()
    }

    fn observe(&self, point: ExtensionPoint, start: Instant, code: Code) {
        self.handle.metrics.extension_point_duration(&self.profile_name, point, code, start.elapsed().as_secs_f64());
    }

    /// Start of a plugin call on a sampled cycle (upstream times plugins on 10% of cycles).
    /// Plugin calls are timed with the CPU's time-stamp counter (`quanta`): a sampled cycle at
    /// 30,000 nodes reads the clock for every plugin on 1,500 nodes, and the system clock's read
    /// (25 ns here, 10 ns for the counter) was a sixth of the scheduling thread.
    #[inline]
    fn plugin_start(state: &CycleState) -> Option<quanta::Instant> {
        state.record_plugin_metrics.then(quanta::Instant::now)
    }

    /// `scheduler_plugin_execution_duration_seconds` for a call started by [`Self::plugin_start`].
    #[inline]
    fn plugin_done(&self, start: Option<quanta::Instant>, plugin: &str, point: ExtensionPoint, code: Code) {
        if let Some(t) = start {
            let seconds = quanta::Instant::now().duration_since(t).as_secs_f64();
            self.handle.metrics.plugin_duration(plugin, point, code, seconds);
        }
    }

    /// [`Self::plugin_done`] for one of several calls made back to back: the end of this call
    /// is returned as the start of the next. On a sampled cycle the filter walk times every
    /// plugin on every node, and one clock read per call instead of two is a few percent of
    /// the scheduling thread.
    #[inline]
    fn plugin_done_then_next(
        &self,
        start: Option<quanta::Instant>,
        plugin: &str,
        point: ExtensionPoint,
        code: Code,
    ) -> Option<quanta::Instant> {
        let t = start?;
        let now = quanta::Instant::now();
        self.handle.metrics.plugin_duration(plugin, point, code, now.duration_since(t).as_secs_f64());
        Some(now)
    }

    /// `scheduler_plugin_evaluation_total` of one plugin at one extension point.
    pub fn record_plugin_evaluations(&self, plugin: &str, point: ExtensionPoint, count: u64) {
        if count > 0 {
            self.handle.metrics.plugin_evaluations(&self.profile_name, plugin, point, count);
        }
    }

    /// PreEnqueue plugins in order; the first non-success gates the pod (plugin recorded).
    pub fn run_pre_enqueue(&self, pod: &PodInfo) -> Status {
        for p in &self.pre_enqueue {
            let Some(pe) = p.as_pre_enqueue() else { continue };
            let s = pe.pre_enqueue(pod);
            if !s.is_success() {
                return s.with_plugin(p.name());
            }
        }
        Status::success()
    }

    /// QueueSort's Less.
    pub fn less(&self, a: &QueuedPodInfo, b: &QueuedPodInfo) -> bool {
        self.queue_sort[0].as_queue_sort().is_some_and(|q| q.less(a, b))
    }

    /// Name of the QueueSort plugin.
    pub fn queue_sort_name(&self) -> &str {
        self.queue_sort[0].name()
    }

    /// Runs PreFilter plugins. Returns the merged result, the status, and the plugins that
    /// rejected (for requeue hints).
    pub fn run_pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
    ) -> (Option<PreFilterResult>, Status, Vec<String>) {
        let start = Instant::now();
        state.num_all_nodes = snapshot.num_nodes();
        let mut result: Option<PreFilterResult> = None;
        let mut narrowing: Vec<String> = Vec::new();
        let mut rejectors = Vec::new();
        let mut last_unsched: Option<Status> = None;
        for (p, &scheduling_only) in self.pre_filter.iter().zip(&self.pre_filter_scheduling_only) {
            let Some(pf) = p.as_pre_filter() else { continue };
            let t = Self::plugin_start(state);
            state.writer_is_scheduling_only = scheduling_only;
            let (r, s) = pf.pre_filter(state, pod, snapshot);
            state.writer_is_scheduling_only = false;
            self.plugin_done(t, p.name(), ExtensionPoint::PreFilter, s.code());
            self.record_plugin_evaluations(p.name(), ExtensionPoint::PreFilter, 1);
            if s.is_skip() {
                state.skip_filter_plugins.insert(p.name().to_string());
                continue;
            }
            if !s.is_success() {
                if s.code() == Code::UnschedulableAndUnresolvable {
                    rejectors.push(p.name().to_string());
                    self.observe(ExtensionPoint::PreFilter, start, s.code());
                    return (None, s.with_plugin(p.name()), rejectors);
                }
                if s.code() == Code::Unschedulable {
                    rejectors.push(p.name().to_string());
                    last_unsched = Some(s.with_plugin(p.name()));
                    continue;
                }
                let err = Status::error(format!("running PreFilter plugin {:?}: {}", p.name(), s.message()))
                    .with_plugin(p.name());
                self.observe(ExtensionPoint::PreFilter, start, Code::Error);
                return (None, err, rejectors);
            }
            if let Some(r) = r.filter(|r| !r.all_nodes()) {
                narrowing.push(p.name().to_string());
                let merged = match &result {
                    Some(prev) => prev.merge(&r),
                    None => r,
                };
                if merged.node_names.as_ref().is_some_and(|n| n.is_empty()) {
                    let msg = if narrowing.len() == 1 {
                        format!("node(s) didn't satisfy plugin {}", narrowing[0])
                    } else {
                        format!("node(s) didn't satisfy plugin(s) [{}] simultaneously", narrowing.join(" "))
                    };
                    self.observe(ExtensionPoint::PreFilter, start, Code::UnschedulableAndUnresolvable);
                    return (Some(merged), Status::unresolvable(msg).with_plugin(p.name()), narrowing);
                }
                result = Some(merged);
            }
        }
        if let Some(s) = last_unsched {
            self.observe(ExtensionPoint::PreFilter, start, s.code());
            return (None, s, rejectors);
        }
        self.observe(ExtensionPoint::PreFilter, start, Code::Success);
        (result, Status::success(), narrowing)
    }

    /// The Filter plugins active this cycle (not skipped by their PreFilter), resolved once so
    /// that the per-node loop makes one dynamic call per plugin.
    pub fn active_filters<'a>(&'a self, state: &CycleState) -> Vec<ActiveFilter<'a>> {
        self.filter
            .iter()
            .filter(|p| !state.skip_filter_plugins.contains(p.name()))
            .filter_map(|p| p.as_filter().map(|filter| ActiveFilter { plugin: p, filter, bound: None }))
            .collect()
    }

    /// [`Framework::active_filters`], each bound to `state` and `pod` where the plugin supports
    /// it ([`FilterPlugin::bind_cycle`]), for a walk over many nodes with an unchanging state.
    pub fn bound_filters<'a>(&'a self, state: &'a CycleState, pod: &'a PodInfo) -> Vec<ActiveFilter<'a>> {
        let mut filters = self.active_filters(state);
        for f in &mut filters {
            f.bound = f.filter.bind_cycle(state, pod).map(|b| (b, state, pod));
        }
        filters
    }

    /// Runs the given filters on one node, stopping at the first failure.
    pub fn run_filters(
        &self,
        filters: &[ActiveFilter<'_>],
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
    ) -> Status {
        let mut t = Self::plugin_start(state);
        for ActiveFilter { plugin: p, filter: f, bound } in filters {
            let s = match bound {
                Some((b, s, p)) if std::ptr::eq(*s, state) && std::ptr::eq(*p, pod) => b(node),
                _ => f.filter(state, pod, node),
            };
            t = self.plugin_done_then_next(t, p.name(), ExtensionPoint::Filter, s.code());
            if s.is_success() {
                s.discard();
            } else {
                if !s.is_rejected() {
                    return Status::error(format!("running {:?} filter plugin: {}", p.name(), s.message()))
                        .with_plugin(p.name());
                }
                return s.with_plugin(p.name());
            }
        }
        Status::success()
    }

    /// Runs every active Filter plugin on one node.
    pub fn run_filter_plugins(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let filters = self.active_filters(state);
        self.run_filters(&filters, state, pod, node)
    }

    /// Filters with nominated pods (upstream `RunFilterPluginsWithNominatedPods`): `nominated` are the pods nominated to this node with
    /// priority ≥ the pod's; pass 1 runs with them added, pass 2 without; both must pass.
    pub fn run_filters_with_nominated_pods(
        &self,
        filters: &[ActiveFilter<'_>],
        state: &CycleState,
        pod: &PodInfo,
        node: &NodeInfo,
        nominated: &[Arc<PodInfo>],
    ) -> Status {
        if nominated.is_empty() {
            return self.run_filters(filters, state, pod, node);
        }
        let mut state_with = state.clone();
        let mut node_with = node.clone();
        for np in nominated {
            node_with.add_pod(np.clone());
            let s = self.run_pre_filter_extension_add_pod(&mut state_with, pod, np, &node_with);
            if !s.is_success() {
                return s;
            }
        }
        let s = self.run_filters(filters, &state_with, pod, &node_with);
        if !s.is_success() {
            return s;
        }
        self.run_filters(filters, state, pod, node)
    }

    /// AddPod extensions of the non-skipped PreFilter plugins.
    pub fn run_pre_filter_extension_add_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        to_add: &Arc<PodInfo>,
        node: &NodeInfo,
    ) -> Status {
        for p in &self.pre_filter {
            if state.skip_filter_plugins.contains(p.name()) {
                continue;
            }
            let Some(ext) = p.as_pre_filter().and_then(|pf| pf.extensions()) else { continue };
            let s = ext.add_pod(state, pod, to_add, node);
            if !s.is_success() {
                return Status::error(format!("running AddPod on PreFilter plugin {:?}: {}", p.name(), s.message()));
            }
        }
        Status::success()
    }

    /// RemovePod extensions of the non-skipped PreFilter plugins.
    pub fn run_pre_filter_extension_remove_pod(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        to_remove: &Arc<PodInfo>,
        node: &NodeInfo,
    ) -> Status {
        for p in &self.pre_filter {
            if state.skip_filter_plugins.contains(p.name()) {
                continue;
            }
            let Some(ext) = p.as_pre_filter().and_then(|pf| pf.extensions()) else { continue };
            let s = ext.remove_pod(state, pod, to_remove, node);
            if !s.is_success() {
                return Status::error(format!("running RemovePod on PreFilter plugin {:?}: {}", p.name(), s.message()));
            }
        }
        Status::success()
    }

    /// PostFilter plugins until one succeeds; Unschedulable results accumulate their reasons.
    pub fn run_post_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        snapshot: &Snapshot,
        statuses: &NodeToStatus,
    ) -> (Option<PostFilterResult>, Status) {
        let start = Instant::now();
        if state.skip_all_post_filters {
            self.observe(ExtensionPoint::PostFilter, start, Code::Unschedulable);
            return (None, Status::unschedulable("All PostFilter plugins are skipped"));
        }
        let mut reasons: Vec<String> = Vec::new();
        let mut rejector: Option<String> = None;
        let mut result: Option<PostFilterResult> = None;
        for p in &self.post_filter {
            let Some(pf) = p.as_post_filter() else { continue };
            let t = Self::plugin_start(state);
            let (r, s) = pf.post_filter(self, state, pod, snapshot, statuses);
            self.plugin_done(t, p.name(), ExtensionPoint::PostFilter, s.code());
            if s.is_success() {
                self.observe(ExtensionPoint::PostFilter, start, Code::Success);
                return (r, s);
            }
            if s.code() == Code::UnschedulableAndUnresolvable {
                self.observe(ExtensionPoint::PostFilter, start, s.code());
                return (r, s.with_plugin(p.name()));
            }
            if !s.is_rejected() {
                self.observe(ExtensionPoint::PostFilter, start, Code::Error);
                // Upstream passes the plugin's error through unwrapped; it becomes the message.
                return (None, Status::error(s.message()).with_plugin(p.name()));
            }
            reasons.extend(s.all_reasons());
            rejector.get_or_insert_with(|| p.name().to_string());
            if let Some(r) = r.filter(|r| r.nominating_info.as_ref().is_some_and(|n| n.mode != NominatingMode::Noop)) {
                result = Some(r);
            }
        }
        let mut s = Status::new(Code::Unschedulable, reasons);
        if let Some(r) = rejector {
            s.set_plugin(r);
        }
        self.observe(ExtensionPoint::PostFilter, start, s.code());
        (result, s)
    }

    /// Whether the plugin has a binding-cycle extension point (Reserve and Unreserve, Permit,
    /// PreBind, Bind, PostBind), so may read its own cycle state after the scheduling cycle.
    fn in_binding_cycle(&self, name: &str) -> bool {
        [&self.reserve, &self.permit, &self.pre_bind, &self.bind, &self.post_bind]
            .iter()
            .any(|list| list.iter().any(|p| p.name() == name))
    }

    /// PreScore plugins over the feasible nodes.
    pub fn run_pre_score(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        nodes: &[&NodeInfo],
        snapshot: &Snapshot,
    ) -> Status {
        let start = Instant::now();
        for (p, &scheduling_only) in self.pre_score.iter().zip(&self.pre_score_scheduling_only) {
            let Some(ps) = p.as_pre_score() else { continue };
            let t = Self::plugin_start(state);
            state.writer_is_scheduling_only = scheduling_only;
            let s = ps.pre_score(state, pod, nodes, snapshot);
            state.writer_is_scheduling_only = false;
            self.plugin_done(t, p.name(), ExtensionPoint::PreScore, s.code());
            self.record_plugin_evaluations(p.name(), ExtensionPoint::PreScore, 1);
            if s.is_skip() {
                state.skip_score_plugins.insert(p.name().to_string());
                continue;
            }
            if !s.is_success() {
                self.observe(ExtensionPoint::PreScore, start, Code::Error);
                return Status::error(format!("running PreScore plugin {:?}: {}", p.name(), s.message()));
            }
        }
        self.observe(ExtensionPoint::PreScore, start, Code::Success);
        Status::success()
    }

    /// Score + NormalizeScore + weights over the feasible nodes, in parallel per chunk of nodes.
    pub fn run_score(&self, state: &CycleState, pod: &PodInfo, nodes: &[&NodeInfo]) -> Result<ScoreResult, Status> {
        self.run_score_memo(state, pod, nodes, None)
    }

    /// [`Framework::run_score`], taking the raw scores of unchanged nodes from the memo when the
    /// cycle has a memo key and the nodes' snapshot indices (`memo`), and every Score plugin that
    /// runs is node-local.
    pub fn run_score_memo(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: &[&NodeInfo],
        memo: Option<(&MemoKey, &[usize])>,
    ) -> Result<ScoreResult, Status> {
        let start = Instant::now();
        let active: Vec<&(PluginArc, i64)> =
            self.score.iter().filter(|(p, _)| !state.skip_score_plugins.contains(p.name())).collect();
        let n = nodes.len();
        let p = active.len();
        let mut result = ScoreResult {
            plugin_names: active.iter().map(|(p, _)| p.name().to_string()).collect(),
            weights: active.iter().map(|(_, w)| *w).collect(),
            scores: vec![0; n * p],
            totals: vec![0; n],
        };
        // No nodes: nothing to chunk (a zero chunk length would be invalid below).
        if p == 0 || n == 0 {
            self.observe(ExtensionPoint::Score, start, Code::Success);
            return Ok(result);
        }
        let error = match memo
            .and_then(|(key, idx)| self.memo_scores(state, pod, nodes, &active, &mut result.scores, key, idx))
        {
            Some(error) => error,
            None => self.raw_scores(state, pod, nodes, &active, &mut result.scores),
        };
        for (pl, _) in &active {
            self.record_plugin_evaluations(pl.name(), ExtensionPoint::Score, n as u64);
        }
        if let Some(s) = error {
            self.observe(ExtensionPoint::Score, start, Code::Error);
            return Err(s);
        }
        for ((pl, w), scores) in active.iter().zip(result.scores.chunks_mut(n)) {
            let sp = pl.as_score().expect("score list holds score plugins");
            if sp.has_normalize() {
                let s = sp.normalize_score(state, pod, nodes, scores);
                if !s.is_success() {
                    self.observe(ExtensionPoint::Score, start, Code::Error);
                    return Err(Status::error(format!("plugin {:?} failed with: {}", pl.name(), s.message())));
                }
            }
            if let Some(v) = scores.iter().find(|v| !(MIN_NODE_SCORE..=MAX_NODE_SCORE).contains(*v)) {
                self.observe(ExtensionPoint::Score, start, Code::Error);
                return Err(Status::error(format!(
                    "plugin {:?} returns an invalid score {v}, it should in the range of [{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] after normalizing",
                    pl.name()
                )));
            }
            for (t, v) in result.totals.iter_mut().zip(scores.iter()) {
                *t += v * w;
            }
        }
        self.observe(ExtensionPoint::Score, start, Code::Success);
        Ok(result)
    }

    /// Raw scores of `nodes` by the `active` Score plugins into `out` (plugin-major, `nodes.len()`
    /// per plugin); the error of the lowest-indexed failing node, if any.
    fn raw_scores(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: &[&NodeInfo],
        active: &[&(PluginArc, i64)],
        out: &mut [i64],
    ) -> Option<Status> {
        // Nodes are cut into chunks scored in parallel; within a chunk each plugin scores the
        // whole run at once (one cycle-state read per plugin and chunk, and the chunk's nodes stay
        // in cache from one plugin to the next). Each chunk writes straight into its columns of
        // the plugin-major rows, handed out as one slice per (chunk, plugin). The first error
        // (lowest node index, so the outcome does not depend on thread timing) wins.
        let (n, p) = (nodes.len(), active.len());
        let chunk = self.handle.parallelizer.chunk_size(n).max(SCORE_CHUNK_MIN).min(n);
        let mut rows: Vec<std::slice::ChunksMut<'_, i64>> =
            out.chunks_mut(n).map(|row| row.chunks_mut(chunk)).collect();
        let mut cells: Vec<&mut [i64]> = Vec::with_capacity(n.div_ceil(chunk) * p);
        while let Some(first) = rows[0].next() {
            cells.push(first);
            cells.extend(rows[1..].iter_mut().map(|r| r.next().expect("rows have equal length")));
        }
        let first_error: Mutex<Option<(usize, Status)>> = Mutex::new(None);
        self.handle.parallelizer.for_each_chunk(&SCORE_SITE, &mut cells, p, |k, outs| {
            let lo = k * chunk;
            let run = &nodes[lo..(lo + chunk).min(n)];
            for ((pl, _), out) in active.iter().zip(outs.iter_mut()) {
                let sp = pl.as_score().expect("score list holds score plugins");
                let t = Self::plugin_start(state);
                let r = sp.score_nodes(state, pod, run, out);
                let code = r.as_ref().map_or(Code::Error, |()| Code::Success);
                self.plugin_done(t, pl.name(), ExtensionPoint::Score, code);
                if let Err((i, s)) = r {
                    let mut e = first_error.lock();
                    if e.as_ref().is_none_or(|(k, _)| lo + i < *k) {
                        *e = Some((
                            lo + i,
                            Status::error(format!("plugin {:?} failed with: {}", pl.name(), s.message())),
                        ));
                    }
                    return;
                }
            }
        });
        drop(cells);
        first_error.into_inner().map(|(_, s)| s)
    }

    /// [`Framework::raw_scores`] with the memo: kept scores for unchanged nodes, the plugins run
    /// on the others only (in node order, so the first error is the same), and their scores
    /// kept. `None` when the memo cannot serve this cycle: a Score plugin that runs is not
    /// node-local, or the memo is not the cycle's.
    #[allow(clippy::too_many_arguments)]
    fn memo_scores(
        &self,
        state: &CycleState,
        pod: &PodInfo,
        nodes: &[&NodeInfo],
        active: &[&(PluginArc, i64)],
        out: &mut [i64],
        key: &MemoKey,
        indices: &[usize],
    ) -> Option<Option<Status>> {
        if indices.len() != nodes.len() || active.iter().any(|(p, _)| !is_node_local(p)) {
            return None;
        }
        let mut memos = self.memo.as_ref()?.lock();
        let memo = memos.get(key)?;
        let set = self
            .score
            .iter()
            .enumerate()
            .filter(|(_, (p, _))| !state.skip_score_plugins.contains(p.name()))
            .fold(0u64, |set, (i, _)| set | 1 << i);
        let (n, p) = (nodes.len(), active.len());
        memo.begin_scores(set, p);
        let mut misses = Vec::new();
        for (k, (node, &i)) in nodes.iter().zip(indices).enumerate() {
            match memo.scores(i, node) {
                Some(kept) => kept.iter().enumerate().for_each(|(j, v)| out[j * n + k] = *v),
                None => misses.push(k),
            }
        }
        if misses.is_empty() {
            return Some(None);
        }
        let missed: Vec<&NodeInfo> = misses.iter().map(|&k| nodes[k]).collect();
        let m = missed.len();
        let mut fresh = vec![0; m * p];
        if let Some(error) = self.raw_scores(state, pod, &missed, active, &mut fresh) {
            return Some(Some(error));
        }
        for (r, &k) in misses.iter().enumerate() {
            (0..p).for_each(|j| out[j * n + k] = fresh[j * m + r]);
            memo.record_scores(indices[k], nodes[k], (0..p).map(|j| fresh[j * m + r]));
        }
        Some(None)
    }

    /// Reserve plugins in order; on failure the caller must run `run_unreserve`.
    pub fn run_reserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> Status {
        let start = Instant::now();
        for p in &self.reserve {
            let Some(r) = p.as_reserve() else { continue };
            let t = Self::plugin_start(state);
            let s = r.reserve(state, pod, node);
            self.plugin_done(t, p.name(), ExtensionPoint::Reserve, s.code());
            if !s.is_success() {
                self.observe(ExtensionPoint::Reserve, start, s.code());
                if s.is_rejected() {
                    return s.with_plugin(p.name());
                }
                return Status::error(format!("running Reserve plugin {:?}: {}", p.name(), s.message()))
                    .with_plugin(p.name());
            }
        }
        self.observe(ExtensionPoint::Reserve, start, Code::Success);
        Status::success()
    }

    /// Unreserve of every Reserve plugin, in reverse order.
    pub fn run_unreserve(&self, state: &mut CycleState, pod: &PodInfo, node: &str) {
        let start = Instant::now();
        for p in self.reserve.iter().rev() {
            if let Some(r) = p.as_reserve() {
                r.unreserve(state, pod, node);
            }
        }
        self.observe(ExtensionPoint::Unreserve, start, Code::Success);
    }

    /// Permit plugins. A Wait result registers the pod as waiting (see [`Framework::wait_on_permit`]).
    pub fn run_permit(&self, state: &mut CycleState, pod: &Arc<PodInfo>, node: &str) -> Status {
        match self.evaluate_permit(state, pod, node) {
            Ok(Some((waits, status))) => {
                let wp = Arc::new(WaitingPod::new(pod.clone(), node, waits));
                self.waiting_pods.insert(pod.uid(), wp);
                status
            }
            Ok(None) => Status::success(),
            Err(s) => s,
        }
    }

    /// Permit plugins without registering a waiting pod: Success, Wait (the last waiting
    /// plugin's status plus upstream's "asked to wait" reason), or the rejection. The pod-group
    /// cycle asks Permit whether the group would be admitted before anything binds.
    pub fn run_permit_check(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> Status {
        match self.evaluate_permit(state, pod, node) {
            Ok(Some((_, status))) => status,
            Ok(None) => Status::success(),
            Err(s) => s,
        }
    }

    /// Runs the Permit plugins in order: the waiting plugins' (capped) timeouts with the Wait
    /// status, nothing when all allow, or the first rejection / error.
    #[allow(clippy::type_complexity)]
    fn evaluate_permit(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        node: &str,
    ) -> Result<Option<(HashMap<String, Duration>, Status)>, Status> {
        let start = Instant::now();
        let mut waits: HashMap<String, Duration> = HashMap::new();
        let mut wait_status: Option<Status> = None;
        for p in &self.permit {
            let Some(pp) = p.as_permit() else { continue };
            let t = Self::plugin_start(state);
            let (s, timeout) = pp.permit(state, pod, node);
            self.plugin_done(t, p.name(), ExtensionPoint::Permit, s.code());
            if s.is_wait() {
                waits.insert(p.name().to_string(), timeout.min(MAX_PERMIT_TIMEOUT));
                wait_status = Some(s);
                continue;
            }
            if !s.is_success() {
                self.observe(ExtensionPoint::Permit, start, s.code());
                if s.is_rejected() {
                    return Err(s.with_plugin(p.name()));
                }
                return Err(Status::error(format!("running Permit plugin {:?}: {}", p.name(), s.message()))
                    .with_plugin(p.name()));
            }
        }
        let Some(mut status) = wait_status else {
            self.observe(ExtensionPoint::Permit, start, Code::Success);
            return Ok(None);
        };
        status.push_reason("one or more plugins asked to wait and no plugin rejected pod");
        self.observe(ExtensionPoint::Permit, start, Code::Wait);
        Ok(Some((waits, status)))
    }

    /// The waiting pod with this UID, if Permit made it wait.
    pub fn get_waiting_pod(&self, uid: &str) -> Option<Arc<WaitingPod>> {
        self.waiting_pods.get(uid)
    }

    /// All waiting pods.
    pub fn waiting_pods(&self) -> Vec<Arc<WaitingPod>> {
        self.waiting_pods.list()
    }

    /// Waits until every waiting Permit plugin allows the pod, one rejects it, or a timeout
    /// expires. Returns Success immediately for pods that are not waiting.
    pub async fn wait_on_permit(
        &self,
        uid: &str,
        sleep: impl Fn(Duration) -> futures::future::BoxFuture<'static, ()>,
    ) -> Status {
        let Some(wp) = self.get_waiting_pod(uid) else { return Status::success() };
        let status = loop {
            // Listen before looking: an allow landing between the look and the listen would
            // otherwise wake nobody, and the pod would sit out its whole timeout (a gang member
            // waited 5 minutes at Permit after the rest of its gang had bound).
            let rx = wp.changed();
            if let Some(s) = wp.result() {
                break s;
            }
            let now = Instant::now();
            match wp.earliest_deadline() {
                Some((plugin, deadline, waited)) if deadline <= now => {
                    let waited = crate::gofmt::duration(waited);
                    wp.reject(&plugin, &format!("rejected due to timeout after waiting {waited} at plugin {plugin}"));
                }
                Some((_, deadline, _)) => {
                    let timer = sleep(deadline - now);
                    futures::pin_mut!(timer);
                    let _ = futures::future::select(rx, timer).await;
                }
                None => break Status::success(),
            }
        };
        self.waiting_pods.remove(uid);
        status
    }

    /// PreBindPreFlight of every PreBind plugin; records skipped ones. Returns Skip when all skip.
    pub fn run_pre_bind_pre_flights(&self, state: &mut CycleState, pod: &PodInfo, node: &str) -> Status {
        let mut any = false;
        for p in &self.pre_bind {
            let Some(pb) = p.as_pre_bind() else { continue };
            let s = pb.pre_bind_pre_flight(state, pod, node);
            match s.code() {
                Code::Skip => {
                    state.skip_pre_bind_plugins.insert(p.name().to_string());
                }
                Code::Success => any = true,
                _ => {
                    return Status::error(format!("running PreBindPreFlight {:?}: {}", p.name(), s.message()))
                        .with_plugin(p.name())
                }
            }
        }
        if any {
            Status::success()
        } else {
            Status::skip()
        }
    }

    /// PreBind plugins (not skipped by their preflight), in order; the first failure aborts.
    pub async fn run_pre_bind(&self, state: &CycleState, pod: &PodInfo, node: &str) -> Status {
        let start = Instant::now();
        for p in &self.pre_bind {
            if state.skip_pre_bind_plugins.contains(p.name()) {
                continue;
            }
            let Some(pb) = p.as_pre_bind() else { continue };
            let t = Self::plugin_start(state);
            let s = pb.pre_bind(state, pod, node).await;
            self.plugin_done(t, p.name(), ExtensionPoint::PreBind, s.code());
            if !s.is_success() {
                self.observe(ExtensionPoint::PreBind, start, s.code());
                if s.is_rejected() {
                    return s.with_plugin(p.name());
                }
                return Status::error(format!("running PreBind plugin {:?}: {}", p.name(), s.message()))
                    .with_plugin(p.name());
            }
        }
        self.observe(ExtensionPoint::PreBind, start, Code::Success);
        Status::success()
    }

    /// Bind plugins until one returns non-Skip.
    pub async fn run_bind(&self, state: &CycleState, pod: &PodInfo, node: &str) -> Status {
        let start = Instant::now();
        for p in &self.bind {
            let Some(b) = p.as_bind() else { continue };
            let t = Self::plugin_start(state);
            let s = b.bind(state, pod, node).await;
            self.plugin_done(t, p.name(), ExtensionPoint::Bind, s.code());
            if s.is_skip() {
                continue;
            }
            self.observe(ExtensionPoint::Bind, start, s.code());
            if !s.is_success() {
                if s.is_rejected() {
                    return s.with_plugin(p.name());
                }
                return Status::error(format!("binding rejected: running Bind plugin {:?}: {}", p.name(), s.message()))
                    .with_plugin(p.name());
            }
            return s;
        }
        self.observe(ExtensionPoint::Bind, start, Code::Skip);
        Status::skip()
    }

    /// PostBind plugins.
    pub fn run_post_bind(&self, state: &CycleState, pod: &PodInfo, node: &str) {
        let start = Instant::now();
        for p in &self.post_bind {
            if let Some(pb) = p.as_post_bind() {
                pb.post_bind(state, pod, node);
            }
        }
        self.observe(ExtensionPoint::PostBind, start, Code::Success);
    }

    /// PlacementGenerate (pod-group cycle): the placements to try the group in; without a
    /// plugin, the parent placement alone. No placement is Unschedulable, as upstream.
    pub fn run_placement_generate(
        &self,
        group: &crate::podgroup::PodGroupInfo,
        parent: crate::podgroup::Placement,
        snapshot: &Snapshot,
    ) -> Result<Vec<crate::podgroup::Placement>, Status> {
        let start = Instant::now();
        let Some(p) = self.placement_generate.first() else {
            self.observe(ExtensionPoint::PlacementGenerate, start, Code::Success);
            return Ok(vec![parent]);
        };
        let Some(pg) = p.as_placement_generate() else { return Ok(vec![parent]) };
        let result = pg.generate_placements(group, &parent, snapshot);
        let out = match result {
            Err(s) => Err(s.with_plugin(p.name())),
            Ok(v) if v.is_empty() => Err(Status::unschedulable("no feasible placements found").with_plugin(p.name())),
            Ok(v) => Ok(v),
        };
        let code = out.as_ref().map_or_else(Status::code, |_| Code::Success);
        self.observe(ExtensionPoint::PlacementGenerate, start, code);
        out
    }

    /// True when the profile has PlacementScore plugins.
    pub fn has_placement_score_plugins(&self) -> bool {
        !self.placement_score.is_empty()
    }

    /// PlacementScore (pod-group cycle): weighted totals, one per entry of `assignments`.
    pub fn run_placement_score(
        &self,
        group: &crate::podgroup::PodGroupInfo,
        assignments: &[crate::podgroup::PodGroupAssignments],
        snapshot: &Snapshot,
    ) -> Result<Vec<i64>, Status> {
        let start = Instant::now();
        let mut totals = vec![0i64; assignments.len()];
        for (p, weight) in &self.placement_score {
            let Some(ps) = p.as_placement_score() else { continue };
            let mut scores = Vec::with_capacity(assignments.len());
            for a in assignments {
                match ps.score_placement(group, a, snapshot) {
                    Ok(s) => scores.push(s),
                    Err(s) => {
                        self.observe(ExtensionPoint::PlacementScore, start, Code::Error);
                        return Err(Status::error(format!(
                            "running PlacementScore plugins: plugin {:?} failed with: {}",
                            p.name(),
                            s.message()
                        )));
                    }
                }
            }
            if ps.has_normalize() {
                let s = ps.normalize_placement_scores(group, &mut scores);
                if !s.is_success() {
                    self.observe(ExtensionPoint::PlacementScore, start, Code::Error);
                    return Err(Status::error(format!(
                        "running NormalizePlacementScore on PlacementScore plugins: plugin {:?} failed with: {}",
                        p.name(),
                        s.message()
                    )));
                }
            }
            for (t, s) in totals.iter_mut().zip(&scores) {
                if !(MIN_NODE_SCORE..=MAX_NODE_SCORE).contains(s) {
                    self.observe(ExtensionPoint::PlacementScore, start, Code::Error);
                    return Err(Status::error(format!(
                        "applying score defaultWeights on PlacementScore plugins: plugin {:?} returns an invalid score {s}, it should in the range of [{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] after normalizing",
                        p.name()
                    )));
                }
                *t += s * weight;
            }
        }
        self.observe(ExtensionPoint::PlacementScore, start, Code::Success);
        Ok(totals)
    }

    /// Evaluates the hints of `plugins` for an event; true when any says Queue.
    pub fn event_may_help(
        &self,
        plugin: &str,
        pod: &crate::pod::Pod,
        event: &ClusterEvent,
        old: Option<&crate::events::EventObject>,
        new: Option<&crate::events::EventObject>,
    ) -> bool {
        let Some(regs) = self.enqueue_events.get(plugin) else { return false };
        regs.iter().filter(|r| r.event.matches(event)).any(|r| match &r.hint {
            None => true,
            Some(h) => !matches!(h(pod, old, new), Ok(QueueingHint::QueueSkip)),
        })
    }
}

fn expand(
    point: Point,
    set: &PluginSet,
    multi: &PluginSet,
    instances: &BTreeMap<String, PluginArc>,
) -> Result<Vec<PluginArc>, String> {
    let lookup = |r: &PluginRef| -> Result<PluginArc, String> {
        let p = instances.get(&r.name).ok_or_else(|| format!("{} {:?} does not exist", point.iface(), r.name))?;
        if !point.implemented_by(p.as_ref()) {
            return Err(format!(
                "plugin {:?} does not extend {} plugin",
                r.name,
                point.iface().trim_end_matches("Plugin")
            ));
        }
        Ok(p.clone())
    };
    let explicit: Vec<&PluginRef> = set.enabled.iter().collect();
    let explicit_names: HashSet<&str> = explicit.iter().map(|r| r.name.as_str()).collect();
    let mut seen_explicit = HashSet::new();
    for r in &explicit {
        if !seen_explicit.insert(r.name.as_str()) {
            return Err(format!("plugin {:?} already registered as {:?}", r.name, point.iface()));
        }
    }
    let mut multi_only: Vec<PluginArc> = Vec::new();
    let mut overridden: HashSet<&str> = HashSet::new();
    if !set.disables_all() {
        let mut seen_multi = HashSet::new();
        for r in &multi.enabled {
            let Some(p) = instances.get(&r.name) else {
                return Err(format!("{} {:?} does not exist", point.iface(), r.name));
            };
            if !point.implemented_by(p.as_ref()) || set.disables(&r.name) {
                continue;
            }
            if !seen_multi.insert(r.name.as_str()) {
                return Err(format!("plugin {:?} already registered as {:?}", r.name, point.iface()));
            }
            if explicit_names.contains(r.name.as_str()) {
                overridden.insert(r.name.as_str());
            } else {
                multi_only.push(p.clone());
            }
        }
    }
    let mut out = Vec::new();
    for r in explicit.iter().filter(|r| overridden.contains(r.name.as_str())) {
        out.push(lookup(r)?);
    }
    out.extend(multi_only);
    for r in explicit.iter().filter(|r| !overridden.contains(r.name.as_str())) {
        out.push(lookup(r)?);
    }
    Ok(out)
}

/// A pod that Permit asked to wait, with one pending entry per waiting plugin.
pub struct WaitingPod {
    pod: Arc<PodInfo>,
    node: String,
    pending: Mutex<HashMap<String, (Instant, Duration)>>,
    result: Mutex<Option<Status>>,
    notify: Mutex<Vec<futures::channel::oneshot::Sender<()>>>,
}

impl WaitingPod {
    fn new(pod: Arc<PodInfo>, node: &str, waits: HashMap<String, Duration>) -> Self {
        let now = Instant::now();
        let waits = waits.into_iter();
        WaitingPod {
            pod,
            node: node.to_string(),
            pending: Mutex::new(waits.map(|(k, d)| (k, (now + d, d))).collect()),
            result: Mutex::new(None),
            notify: Mutex::new(Vec::new()),
        }
    }

    /// The waiting pod.
    pub fn pod(&self) -> &Arc<PodInfo> {
        &self.pod
    }

    /// The node it was assumed on.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// Names of plugins still to allow.
    pub fn pending_plugins(&self) -> Vec<String> {
        self.pending.lock().keys().cloned().collect()
    }

    fn wake(&self) {
        for tx in self.notify.lock().drain(..) {
            let _ = tx.send(());
        }
    }

    fn changed(&self) -> futures::channel::oneshot::Receiver<()> {
        let (tx, rx) = futures::channel::oneshot::channel();
        self.notify.lock().push(tx);
        rx
    }

    fn result(&self) -> Option<Status> {
        self.result.lock().clone()
    }

    fn earliest_deadline(&self) -> Option<(String, Instant, Duration)> {
        self.pending.lock().iter().min_by_key(|(_, (d, _))| *d).map(|(k, (d, w))| (k.clone(), *d, *w))
    }

    /// A plugin allows the pod; once all have, it proceeds.
    pub fn allow(&self, plugin: &str) {
        let mut pending = self.pending.lock();
        pending.remove(plugin);
        if pending.is_empty() {
            self.result.lock().get_or_insert_with(Status::success);
        }
        drop(pending);
        self.wake();
    }

    /// A plugin rejects the pod (Unschedulable with the message).
    pub fn reject(&self, plugin: &str, msg: &str) {
        self.result.lock().get_or_insert_with(|| Status::unschedulable(msg).with_plugin(plugin));
        self.wake();
    }

    /// Preemption removes the pod (Error "preempted").
    pub fn preempt(&self, plugin: &str, msg: &str) {
        self.result.lock().get_or_insert_with(|| Status::error(msg).with_plugin(plugin));
        self.wake();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handle::Handle;
    use crate::node::Node;
    use crate::plugin_config::{PluginRef, PluginSet, Plugins};
    use crate::pod::Pod;
    use crate::registry::Registry;

    /// Scores node `n<i>` as `i % 101` through the per-node default of `score_nodes`.
    struct ByIndex;
    /// Scores `100 - i % 101` with its own `score_nodes`.
    struct Batched;
    /// Fails on nodes 333 and ≥ 700.
    struct FailsSome;
    /// The queue sort and bind plugins every profile needs.
    struct Basics;

    impl Plugin for Basics {
        fn name(&self) -> &str {
            "Basics"
        }
        fn as_queue_sort(&self) -> Option<&dyn QueueSortPlugin> {
            Some(self)
        }
        fn as_bind(&self) -> Option<&dyn BindPlugin> {
            Some(self)
        }
    }
    impl QueueSortPlugin for Basics {
        fn less(&self, _: &QueuedPodInfo, _: &QueuedPodInfo) -> bool {
            false
        }
    }
    impl BindPlugin for Basics {
        fn bind<'a>(&'a self, _: &'a CycleState, _: &'a PodInfo, _: &'a str) -> futures::future::BoxFuture<'a, Status> {
            Box::pin(async { Status::success() })
        }
    }

    fn index(node: &NodeInfo) -> i64 {
        node.name()[1..].parse().unwrap()
    }

    impl Plugin for ByIndex {
        fn name(&self) -> &str {
            "ByIndex"
        }
        fn as_score(&self) -> Option<&dyn ScorePlugin> {
            Some(self)
        }
    }
    impl ScorePlugin for ByIndex {
        fn score(&self, _: &CycleState, _: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
            Ok(index(node) % 101)
        }
    }
    impl Plugin for Batched {
        fn name(&self) -> &str {
            "Batched"
        }
        fn as_score(&self) -> Option<&dyn ScorePlugin> {
            Some(self)
        }
    }
    impl ScorePlugin for Batched {
        fn score(&self, _: &CycleState, _: &PodInfo, _: &NodeInfo) -> Result<i64, Status> {
            unreachable!("scored through score_nodes")
        }
        fn score_nodes(
            &self,
            _: &CycleState,
            _: &PodInfo,
            nodes: &[&NodeInfo],
            out: &mut [i64],
        ) -> Result<(), (usize, Status)> {
            for (n, o) in nodes.iter().zip(out) {
                *o = 100 - index(n) % 101;
            }
            Ok(())
        }
    }
    impl Plugin for FailsSome {
        fn name(&self) -> &str {
            "FailsSome"
        }
        fn as_score(&self) -> Option<&dyn ScorePlugin> {
            Some(self)
        }
    }
    impl ScorePlugin for FailsSome {
        fn score(&self, _: &CycleState, _: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
            match index(node) {
                i if i == 333 || i >= 700 => Err(Status::error(format!("bad node {i}"))),
                _ => Ok(0),
            }
        }
    }

    fn framework(score: &[(&str, i32)]) -> Framework {
        let mut r = Registry::new();
        r.register("ByIndex", |_, _| Ok(Arc::new(ByIndex) as Arc<dyn Plugin>)).unwrap();
        r.register("Batched", |_, _| Ok(Arc::new(Batched) as Arc<dyn Plugin>)).unwrap();
        r.register("FailsSome", |_, _| Ok(Arc::new(FailsSome) as Arc<dyn Plugin>)).unwrap();
        r.register("Basics", |_, _| Ok(Arc::new(Basics) as Arc<dyn Plugin>)).unwrap();
        let basics =
            || PluginSet { enabled: vec![PluginRef { name: "Basics".into(), weight: None }], disabled: vec![] };
        let plugins = Plugins {
            queue_sort: basics(),
            bind: basics(),
            score: PluginSet {
                enabled: score.iter().map(|(n, w)| PluginRef { name: n.to_string(), weight: Some(*w) }).collect(),
                disabled: vec![],
            },
            ..Default::default()
        };
        let handle = Handle { parallelizer: crate::parallelize::Parallelizer::new(2), ..Handle::for_tests() };
        Framework::new(&r, "p", &plugins, &[], handle).unwrap()
    }

    fn nodes(n: usize) -> Vec<Arc<NodeInfo>> {
        (0..n)
            .map(|i| {
                let node: Node =
                    serde_json::from_value(serde_json::json!({"metadata": {"name": format!("n{i}")}})).unwrap();
                Arc::new(NodeInfo::new(Arc::new(node)))
            })
            .collect()
    }

    #[test]
    fn chunked_scores_land_on_their_nodes() {
        let fw = framework(&[("ByIndex", 2), ("Batched", 1)]);
        let pod = PodInfo::new(Arc::new(Pod::default()));
        // 1000 nodes span several chunks, the last one partial; no nodes gives empty rows.
        for n in [0, 1, 5, 129, 1000] {
            let nodes = nodes(n);
            let r = fw.run_score(&CycleState::new(), &pod, &crate::node_refs(&nodes)).unwrap();
            assert_eq!(r.plugin_names, ["ByIndex", "Batched"]);
            for i in 0..n {
                let by_index = (i as i64 % 101) * 2;
                let batched = 100 - i as i64 % 101;
                assert_eq!(r.weighted(0, i), by_index, "ByIndex of node {i} of {n}");
                assert_eq!(r.weighted(1, i), batched, "Batched of node {i} of {n}");
                assert_eq!(r.totals[i], by_index + batched);
            }
        }
    }

    #[test]
    fn the_lowest_failing_node_reports_the_error() {
        let fw = framework(&[("ByIndex", 1), ("FailsSome", 1)]);
        let pod = PodInfo::new(Arc::new(Pod::default()));
        let err = fw.run_score(&CycleState::new(), &pod, &crate::node_refs(&nodes(1000))).unwrap_err();
        assert_eq!(err.message(), "plugin \"FailsSome\" failed with: bad node 333");
    }

    /// Rejects every node, saying whether it ran bound to the cycle or through `filter`.
    struct Binds;
    impl Plugin for Binds {
        fn name(&self) -> &str {
            "Binds"
        }
        fn as_filter(&self) -> Option<&dyn FilterPlugin> {
            Some(self)
        }
    }
    impl FilterPlugin for Binds {
        fn filter(&self, _: &CycleState, _: &PodInfo, _: &NodeInfo) -> Status {
            Status::unschedulable("per node")
        }
        fn bind_cycle<'a>(&'a self, _: &'a CycleState, _: &'a PodInfo) -> Option<BoundFilter<'a>> {
            Some(Box::new(|_: &NodeInfo| Status::unschedulable("bound")))
        }
    }

    #[test]
    fn bound_filters_run_only_with_the_state_and_pod_they_were_bound_to() {
        let mut r = Registry::new();
        r.register("Binds", |_, _| Ok(Arc::new(Binds) as Arc<dyn Plugin>)).unwrap();
        r.register("Basics", |_, _| Ok(Arc::new(Basics) as Arc<dyn Plugin>)).unwrap();
        let set = |n: &str| PluginSet { enabled: vec![PluginRef { name: n.into(), weight: None }], disabled: vec![] };
        let plugins =
            Plugins { queue_sort: set("Basics"), bind: set("Basics"), filter: set("Binds"), ..Default::default() };
        let fw = Framework::new(&r, "p", &plugins, &[], Handle::for_tests()).unwrap();
        let (state, other_state) = (CycleState::new(), CycleState::new());
        let pod = PodInfo::new(Arc::new(Pod::default()));
        let other_pod = PodInfo::new(Arc::new(Pod::default()));
        let node = &nodes(1)[0];
        let message = |s: Status| s.reasons().join(",");

        let bound = fw.bound_filters(&state, &pod);
        assert_eq!(message(fw.run_filters(&bound, &state, &pod, node)), "bound");
        assert_eq!(message(fw.run_filters(&bound, &other_state, &pod, node)), "per node");
        assert_eq!(message(fw.run_filters(&bound, &state, &other_pod, node)), "per node");
        let unbound = fw.active_filters(&state);
        assert_eq!(message(fw.run_filters(&unbound, &state, &pod, node)), "per node");
        // With nominated pods the first pass runs on a copy of the state: never bound.
        let nominated = [Arc::new(PodInfo::new(Arc::new(Pod::default())))];
        let s = fw.run_filters_with_nominated_pods(&bound, &state, &pod, node, &nominated);
        assert_eq!(message(s), "per node");
    }

    /// Writes "PreFilter<name>" and "PreScore<name>"; with `reserves`, also has a Reserve point.
    struct Writer {
        name: &'static str,
        reserves: bool,
    }

    impl Plugin for Writer {
        fn name(&self) -> &str {
            self.name
        }
        fn as_pre_filter(&self) -> Option<&dyn PreFilterPlugin> {
            Some(self)
        }
        fn as_pre_score(&self) -> Option<&dyn PreScorePlugin> {
            Some(self)
        }
        fn as_reserve(&self) -> Option<&dyn ReservePlugin> {
            self.reserves.then_some(self as &dyn ReservePlugin)
        }
    }
    impl PreFilterPlugin for Writer {
        fn pre_filter(&self, state: &mut CycleState, _: &PodInfo, _: &Snapshot) -> (Option<PreFilterResult>, Status) {
            state.write(format!("PreFilter{}", self.name), 1u8);
            (None, Status::success())
        }
    }
    impl PreScorePlugin for Writer {
        fn pre_score(&self, state: &mut CycleState, _: &PodInfo, _: &[&NodeInfo], _: &Snapshot) -> Status {
            state.write(format!("PreScore{}", self.name), 2u8);
            Status::success()
        }
    }
    impl ReservePlugin for Writer {
        fn reserve(&self, state: &mut CycleState, _: &PodInfo, _: &str) -> Status {
            state.write(format!("Reserve{}", self.name), 3u8);
            Status::success()
        }
        fn unreserve(&self, _: &mut CycleState, _: &PodInfo, _: &str) {}
    }

    #[test]
    fn the_binding_cycle_keeps_only_the_state_of_binding_plugins() {
        let mut r = Registry::new();
        r.register("Basics", |_, _| Ok(Arc::new(Basics) as Arc<dyn Plugin>)).unwrap();
        r.register("Counts", |_, _| Ok(Arc::new(Writer { name: "Counts", reserves: false }) as Arc<dyn Plugin>))
            .unwrap();
        r.register("Volumes", |_, _| Ok(Arc::new(Writer { name: "Volumes", reserves: true }) as Arc<dyn Plugin>))
            .unwrap();
        let set = |names: &[&str]| PluginSet {
            enabled: names.iter().map(|n| PluginRef { name: n.to_string(), weight: None }).collect(),
            disabled: vec![],
        };
        let plugins = Plugins {
            queue_sort: set(&["Basics"]),
            bind: set(&["Basics"]),
            pre_filter: set(&["Counts", "Volumes"]),
            pre_score: set(&["Counts", "Volumes"]),
            reserve: set(&["Volumes"]),
            ..Default::default()
        };
        let fw = Framework::new(&r, "p", &plugins, &[], Handle::for_tests()).unwrap();
        let pod = PodInfo::new(Arc::new(Pod::default()));
        let nodes = nodes(2);
        let snapshot = Snapshot::from_node_infos(nodes.iter().map(|n| (**n).clone()).collect());
        let mut state = CycleState::new();
        state.write("Framework", 0u8);
        assert!(fw.run_pre_filter(&mut state, &pod, &snapshot).1.is_success());
        assert!(fw.run_pre_score(&mut state, &pod, &crate::node_refs(&nodes), &snapshot).is_success());
        assert!(fw.run_reserve(&mut state, &pod, "n0").is_success());
        // Counts rewrites its key outside PreFilter: that value is no longer scheduling-only.
        let mut rewritten = state.clone();
        rewritten.write("PreScoreCounts", 9u8);
        assert_eq!(state.len(), 6);

        state.drop_scheduling_only_state();
        for key in ["Framework", "PreFilterVolumes", "PreScoreVolumes", "ReserveVolumes"] {
            assert!(state.read::<u8>(key).is_ok(), "{key} is kept for the binding cycle");
        }
        for key in ["PreFilterCounts", "PreScoreCounts"] {
            assert!(state.read::<u8>(key).is_err(), "{key} is dropped");
        }
        assert_eq!(state.len(), 4);

        rewritten.drop_scheduling_only_state();
        assert_eq!(rewritten.read::<u8>("PreScoreCounts"), Ok(&9));
        assert!(rewritten.read::<u8>("PreFilterCounts").is_err());
    }
}
