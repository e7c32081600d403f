//! Executes one workload's ops against a [`Backend`] and measures the measured op.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use indicatif::{ProgressBar, ProgressStyle};
use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};

use super::cluster::{key, Backend, ChurnHandle, PodItem};
use super::collector::{Progress, ThroughputCollector, ThroughputSummary, SAMPLE_INTERVAL};
use super::stats::LatencyRecorder;
use super::templates::{self, NodeTemplate};
use super::workloads::{ChurnMode, ChurnObject, Op, Params, Workload};

/// Unmeasured pods built and created at a time (each costs the bench about 10 KB until created).
const CREATE_SLICE: usize = 10_000;
/// How often progress is polled between collector ticks.
const POLL: Duration = Duration::from_millis(100);
/// How often unbound pods' statuses are re-read in process.
const STATUS_POLL: Duration = Duration::from_millis(500);
/// How long all pods must stay accounted for (bound or refused) before a phase counts as done
/// while some are refused: a refused pod may still be scheduled once something changes.
const SETTLE: Duration = Duration::from_secs(1);

/// Run-wide settings.
pub struct RunSettings {
    /// Per-phase timeout.
    pub timeout: Duration,
    /// Name randomness.
    pub seed: u64,
    /// Show progress bars.
    pub progress: bool,
}

/// What the measured op produced.
#[derive(Debug, Default)]
pub struct Measurement {
    /// Collector summary (`None`: too short for a sample).
    pub throughput: Option<ThroughputSummary>,
    /// Collector samples: (seconds since the measured op started, pods scheduled, pods/s).
    pub progress: Vec<(f64, usize, f64)>,
    /// Collector warnings.
    pub warnings: Vec<String>,
    /// Seconds from measured-op start to each measured pod's bind, in order.
    pub bind_offsets: Vec<f64>,
    /// Measured pods bound.
    pub scheduled: usize,
    /// Measured pods refused and not bound at the end.
    pub unschedulable: usize,
    /// Measured pods neither.
    pub pending: usize,
    /// From measured-op start to the end of the measurement.
    pub duration: Duration,
    /// From measured-op start until every measured pod was created (`None`: creation did not
    /// finish). Close to `duration` means creation, not scheduling, set the pace.
    pub creation: Option<Duration>,
    /// Whether the phase timed out.
    pub timed_out: bool,
}

/// Unique names like upstream's `generateName` (prefix + 5 random characters).
struct Names {
    rng: StdRng,
    used: HashSet<String>,
}

impl Names {
    fn new(seed: u64) -> Self {
        Names { rng: StdRng::seed_from_u64(seed), used: HashSet::new() }
    }

    fn next(&mut self, prefix: &str) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        loop {
            let suffix: String = (0..5).map(|_| ALPHABET[self.rng.random_range(0..ALPHABET.len())] as char).collect();
            let name = format!("{prefix}{suffix}");
            if self.used.insert(name.clone()) {
                return name;
            }
        }
    }
}

fn pod_prefix(t: templates::PodTemplate) -> &'static str {
    use templates::PodTemplate as T;
    match t {
        T::Default | T::LowPriority => "pod-",
        T::HighPriority => "pod-high-priority-",
        T::HighPriorityLargeCpu => "pod-h-",
        T::Gated => "gated-pod-",
        T::Light => "light-pod-",
        T::PodAntiAffinity => "anti-affinity-pod-",
        T::PodAffinity => "affinity-pod-",
        T::PreferredPodAffinity => "preferred-affinity-pod-",
        T::PreferredPodAntiAffinity => "preferred-anti-affinity-pod-",
        T::NodeAffinity => "node-affinity-",
        T::TopologySpreading | T::PreferredTopologySpreading => "spreading-pod-",
        T::ClaimTemplate => "test-dra",
    }
}

fn bar(settings: &RunSettings, len: usize, label: &str) -> ProgressBar {
    if !settings.progress {
        return ProgressBar::hidden();
    }
    let b = ProgressBar::new(len as u64);
    b.set_style(
        ProgressStyle::with_template("{spinner} {prefix:>40} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    b.set_prefix(label.to_string());
    b
}

/// Executes a workload; returns the measurement of its measured op.
pub struct Runner<'a> {
    backend: Backend,
    settings: &'a RunSettings,
    recorder: Arc<LatencyRecorder>,
    names: Names,
    /// Pod keys created per namespace (for `deletePods`).
    by_namespace: HashMap<String, Vec<String>>,
    /// Every pod created by `createPods` so far (for barriers).
    all_keys: Vec<String>,
    background: Vec<tokio::task::JoinHandle<()>>,
    label: String,
    /// Names of the nodes created so far (DRA slices go to them).
    node_names: Vec<String>,
}

impl<'a> Runner<'a> {
    /// A runner over a started backend.
    pub fn new(backend: Backend, settings: &'a RunSettings, recorder: Arc<LatencyRecorder>, label: String) -> Self {
        Runner {
            backend,
            settings,
            recorder,
            names: Names::new(settings.seed),
            by_namespace: HashMap::new(),
            all_keys: Vec::new(),
            background: Vec::new(),
            label,
            node_names: Vec::new(),
        }
    }

    /// Runs every op of `w` for `p`.
    pub async fn run(&mut self, w: &Workload, p: &Params) -> anyhow::Result<Measurement> {
        let mut measurement = None;
        for (i, op) in w.ops(p).into_iter().enumerate() {
            let r = self.op(i, op).await.with_context(|| format!("{}: op {i}", w.name))?;
            if r.is_some() {
                measurement = r;
            }
        }
        self.stop_background();
        measurement.context("the workload has no measured op")
    }

    /// Stops churn and deleters.
    pub fn stop_background(&mut self) {
        for t in self.background.drain(..) {
            t.abort();
        }
    }

    /// The backend, for shutdown.
    pub fn into_backend(mut self) -> Backend {
        self.stop_background();
        self.backend
    }

    async fn op(&mut self, index: usize, op: Op) -> anyhow::Result<Option<Measurement>> {
        let default_ns = format!("namespace-{index}");
        let extra = self.backend.extra_labels();
        match op {
            Op::CreateNodes { count, template, label } => {
                let nodes = (0..count)
                    .map(|i| {
                        let name = match template {
                            NodeTemplate::WithName => "scheduler-perf-node".to_string(),
                            _ => self.names.next("scheduler-perf-"),
                        };
                        self.node_names.push(name.clone());
                        let mut labels = extra.clone();
                        if let Some((k, values)) = label {
                            labels.push((k.to_string(), values[i % values.len()].to_string()));
                        }
                        templates::node(template, &name, &labels)
                    })
                    .collect();
                self.backend.create_nodes(nodes, template == NodeTemplate::Csi).await?;
            }
            Op::CreateNamespaces { prefix, count } => {
                for i in 0..count {
                    self.backend.create_namespace(&format!("{prefix}-{i}")).await?;
                }
            }
            Op::CreatePods { count, template, namespace, measured, no_wait, volume } => {
                let ns = namespace.map(str::to_string).unwrap_or(default_ns);
                self.backend.create_namespace(&ns).await?;
                let existing = self.by_namespace.get(&ns).map_or(0, Vec::len);
                // Pods nobody measures are built and created a slice at a time: a million pods
                // built up front would hold the bench at about 10 GB.
                let slice = if measured { count } else { CREATE_SLICE };
                let mut keys: Vec<String> = Vec::with_capacity(count);
                let mut start = 0;
                loop {
                    let end = (start + slice).min(count);
                    let items: Vec<PodItem> = (start..end)
                        .map(|i| {
                            let name = self.names.next(pod_prefix(template));
                            let pod = templates::pod(template, &ns, &name, &extra);
                            match volume {
                                None => PodItem { pod, volume: None },
                                Some(kind) => {
                                    // Claims are numbered per namespace, PVs prefixed with it (upstream).
                                    let claim = format!("pvc-{}", existing + i);
                                    let pv = format!("{ns}-pv-{}", existing + i);
                                    let vol = templates::bound_volume(kind, &ns, &claim, &pv, &extra);
                                    PodItem { pod: templates::with_claim(pod, &claim), volume: Some(vol) }
                                }
                            }
                        })
                        .collect();
                    let created: Vec<String> = items.iter().map(|it| key(&it.pod)).collect();
                    self.by_namespace.entry(ns.clone()).or_default().extend(created.iter().cloned());
                    self.all_keys.extend(created.iter().cloned());
                    if measured {
                        return self.measure(&ns, items, created).await.map(Some);
                    }
                    self.backend.create_pods(items).await?;
                    keys.extend(created);
                    start = end;
                    if start >= count {
                        break;
                    }
                }
                if !no_wait {
                    let label = format!("{} init {ns}", self.label);
                    self.wait_accounted(&keys, &label).await?;
                }
            }
            Op::Churn { mode, objects, interval_ms } => {
                self.backend.create_namespace(&default_ns).await?;
                self.spawn_churn(mode, objects, interval_ms, default_ns, extra);
            }
            Op::DraDriver { devices_per_node } => {
                let c = self.backend.in_process()?;
                c.apply_device_class(templates::dra_class());
                for n in &self.node_names {
                    c.apply_resource_slice(templates::dra_slice(n, devices_per_node));
                }
            }
            Op::DraClaimTemplate { namespace } => {
                let c = self.backend.in_process()?;
                self.backend.create_namespace(namespace).await?;
                c.apply_resource_claim_template(templates::dra_claim_template(namespace));
            }
            Op::DraAllocatedClaims { count, namespace } => {
                self.backend.create_namespace(namespace).await?;
                self.allocate_claims(count, namespace)?;
            }
            Op::SteadyState { count, template, namespace, seconds } => {
                return self.measure_steady(count, template, namespace, Duration::from_secs(seconds)).await.map(Some);
            }
            Op::BarrierAttempted => {
                self.backend.barrier(&self.all_keys, self.settings.timeout).await?;
            }
            Op::DeletePods { namespace, per_second } => {
                let keys = self.by_namespace.get(namespace).cloned().unwrap_or_default();
                let backend = self.backend.clone();
                self.background.push(tokio::spawn(async move {
                    let mut tick = tokio::time::interval(Duration::from_secs(1) / per_second.max(1));
                    for k in keys {
                        tick.tick().await;
                        let (ns, name) = k.split_once('/').unwrap_or(("default", &k));
                        if let Err(e) = backend.delete_pod(ns, name).await {
                            tracing::warn!(error = %e, "bench deletePods");
                        }
                    }
                }));
            }
        }
        Ok(None)
    }

    fn spawn_churn(
        &mut self,
        mode: ChurnMode,
        objects: &'static [ChurnObject],
        interval_ms: u64,
        ns: String,
        extra: Vec<(String, String)>,
    ) {
        let backend = self.backend.clone();
        let mut names = Names::new(self.settings.seed ^ 0x9e37_79b9_7f4a_7c15);
        self.background.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(interval_ms));
            // Go's ticker fires first after one interval.
            tick.tick().await;
            let mut live: Vec<Option<ChurnHandle>> = vec![None; objects.len()];
            loop {
                tick.tick().await;
                for (slot, obj) in live.iter_mut().zip(objects) {
                    if mode == ChurnMode::Recreate {
                        if let Some(h) = slot.take() {
                            if let Err(e) = backend.delete_churn(&h).await {
                                tracing::warn!(error = %e, "bench churn delete");
                            }
                            continue;
                        }
                    }
                    let h = match obj {
                        ChurnObject::Node(t) => {
                            let name = names.next("node-churn-");
                            ChurnHandle::Node(Box::new(templates::node(*t, &name, &extra)))
                        }
                        ChurnObject::Pod(t) => {
                            let name = names.next(pod_prefix(*t));
                            ChurnHandle::Pod(Box::new(templates::pod(*t, &ns, &name, &extra)))
                        }
                        ChurnObject::Service => ChurnHandle::Service(Box::new(templates::churn_service(
                            &ns,
                            &names.next("service-churn-"),
                            &extra,
                        ))),
                    };
                    match backend.create_churn(h).await {
                        Ok(h) if mode == ChurnMode::Recreate => *slot = Some(h),
                        Ok(_) => {}
                        Err(e) => tracing::warn!(error = %e, "bench churn create"),
                    }
                }
            }
        }));
    }

    /// `resourceclaim.yaml` × `count`, each allocated on the first of the shuffled nodes
    /// where it fits and written back (upstream's `allocResourceClaims`).
    fn allocate_claims(&mut self, count: usize, namespace: &str) -> anyhow::Result<()> {
        use ksched_dra::allocator::{AllocatedState, Allocator, Features};
        let c = self.backend.in_process()?;
        let nodes: Vec<ksched_framework::node::Node> =
            self.node_names.iter().map(|n| templates::node(NodeTemplate::Default, n, &[]).into()).collect();
        let cel = Arc::new(ksched_dra::cel::CelCache::new());
        let slices = c.lister.resource_slices.list();
        let mut state = AllocatedState::default();
        let mut rng = StdRng::seed_from_u64(self.settings.seed ^ 0xd1a);
        for i in 0..count {
            let claim =
                c.apply_resource_claim(templates::dra_claim(namespace, i)).map_err(|e| anyhow::anyhow!("{e}"))?;
            let lister = c.lister.clone();
            let classes = move |n: &str| lister.device_classes.get(None, n);
            let allocator = Allocator::new(
                Features::default(),
                Arc::new(state.clone()),
                Arc::new(classes),
                slices.clone(),
                cel.clone(),
            );
            let mut order: Vec<usize> = (0..nodes.len()).collect();
            for j in (1..order.len()).rev() {
                order.swap(j, rng.random_range(0..=j));
            }
            let mut done = false;
            for &n in &order {
                let found = allocator.allocate(&nodes[n], &[&claim], None).map_err(|e| anyhow::anyhow!("{e:?}"))?;
                if let Some(mut results) = found {
                    let allocation = results.remove(0);
                    state.add_allocation(&allocation);
                    let mut claim = claim.clone();
                    claim.status.get_or_insert_with(Default::default).allocation = Some(allocation);
                    c.apply_resource_claim(claim).map_err(|e| anyhow::anyhow!("{e}"))?;
                    done = true;
                    break;
                }
            }
            anyhow::ensure!(done, "could not allocate claim {i} out of {count}");
        }
        Ok(())
    }

    /// The steady-state measured op: `count` pods kept pending for `duration`; each scheduled
    /// pod is deleted (freeing its claim) and replaced.
    async fn measure_steady(
        &mut self,
        count: usize,
        template: templates::PodTemplate,
        namespace: &str,
        duration: Duration,
    ) -> anyhow::Result<Measurement> {
        self.backend.create_namespace(namespace).await?;
        let observed = self.backend.observed();
        let mut outstanding: Vec<String> = Vec::new();
        let new_pods = |runner: &mut Self, n: usize| -> Vec<PodItem> {
            (0..n)
                .map(|_| {
                    let name = runner.names.next(pod_prefix(template));
                    PodItem { pod: templates::pod(template, namespace, &name, &[]), volume: None }
                })
                .collect()
        };
        self.recorder.set_enabled(true);
        let start = Instant::now();
        let first = new_pods(self, count);
        outstanding.extend(first.iter().map(|it| key(&it.pod)));
        self.backend.create_pods(first).await?;
        let mut collector = ThroughputCollector::new();
        let mut next_tick = start + SAMPLE_INTERVAL;
        let mut scheduled = 0usize;
        let mut bind_offsets = Vec::new();
        let end = start + duration;
        while Instant::now() < end {
            tokio::time::sleep(Duration::from_millis(1)).await;
            self.backend.refresh(&[])?;
            let done: Vec<(String, Instant)> = {
                let o = observed.lock();
                outstanding.iter().filter_map(|k| o.bound.get(k).map(|t| (k.clone(), *t))).collect()
            };
            if !done.is_empty() {
                outstanding.retain(|k| !done.iter().any(|(d, _)| d == k));
                for (k, at) in &done {
                    let (ns, name) = k.split_once('/').unwrap_or((namespace, k));
                    self.backend.delete_pod(ns, name).await?;
                    bind_offsets.push(at.saturating_duration_since(start).as_secs_f64());
                }
                scheduled += done.len();
                let more = new_pods(self, done.len());
                outstanding.extend(more.iter().map(|it| key(&it.pod)));
                self.backend.create_pods(more).await?;
            }
            let now = Instant::now();
            if now >= next_tick {
                collector.tick(now, scheduled);
                while next_tick <= now {
                    next_tick += SAMPLE_INTERVAL;
                }
            }
        }
        self.recorder.set_enabled(false);
        Ok(Measurement {
            throughput: collector.summary(),
            progress: collector
                .progress()
                .iter()
                .map(|p: &Progress| (p.at.saturating_duration_since(start).as_secs_f64(), p.scheduled, p.rate))
                .collect(),
            warnings: collector.warnings().to_vec(),
            bind_offsets,
            scheduled,
            unschedulable: 0,
            pending: outstanding.len(),
            duration: start.elapsed(),
            creation: None,
            timed_out: false,
        })
    }

    /// Waits until every pod of `keys` is bound or refused (and stays so for [`SETTLE`] when
    /// some are refused).
    async fn wait_accounted(&self, keys: &[String], label: &str) -> anyhow::Result<()> {
        let pb = bar(self.settings, keys.len(), label);
        let deadline = Instant::now() + self.settings.timeout;
        let observed = self.backend.observed();
        let mut settled_since: Option<Instant> = None;
        loop {
            self.backend.refresh(keys)?;
            let (bound, refused) = observed.lock().accounted(keys);
            pb.set_position(bound as u64);
            pb.set_message(format!("{refused} unschedulable"));
            if bound == keys.len() {
                break;
            }
            if bound + refused == keys.len() {
                let since = *settled_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= SETTLE {
                    break;
                }
            } else {
                settled_since = None;
            }
            if Instant::now() >= deadline {
                pb.finish_and_clear();
                let stuck = observed.lock().unaccounted(keys);
                anyhow::bail!(
                    "{label}: {} of {} pods neither scheduled nor unschedulable after {:?}: {}",
                    keys.len() - bound - refused,
                    keys.len(),
                    self.settings.timeout,
                    self.backend.describe_keys(&stuck).join("; ")
                );
            }
            tokio::time::sleep(POLL).await;
        }
        pb.finish_and_clear();
        Ok(())
    }

    /// The measured op: creates the pods while the collector ticks every second.
    async fn measure(&mut self, ns: &str, items: Vec<PodItem>, keys: Vec<String>) -> anyhow::Result<Measurement> {
        let pb = bar(self.settings, keys.len(), &format!("{} measured", self.label));
        let observed = self.backend.observed();
        let total = keys.len();
        let baseline = observed.lock().bound_by_ns.get(ns).map_or(0, Vec::len);
        self.recorder.set_enabled(true);
        let start = Instant::now();
        let backend = self.backend.clone();
        let mut creator = Some(tokio::spawn(async move { backend.create_pods(items).await }));
        let mut created = false;
        let mut creation = None;
        let mut collector = ThroughputCollector::new();
        let mut next_tick = start + SAMPLE_INTERVAL;
        let mut next_status = start + STATUS_POLL;
        let mut settled_since: Option<Instant> = None;
        let deadline = start + self.settings.timeout;
        let mut timed_out = false;
        loop {
            let wake = next_tick.min(Instant::now() + POLL);
            tokio::time::sleep_until(wake.into()).await;
            let now = Instant::now();
            if creator.as_ref().is_some_and(|c| c.is_finished()) {
                if let Some(c) = creator.take() {
                    c.await.context("pod creator panicked")??;
                }
                created = true;
                creation = Some(now - start);
            }
            let check: &[String] = if created && now >= next_status {
                next_status = now + STATUS_POLL;
                &keys
            } else {
                &[]
            };
            self.backend.refresh(check)?;
            let (scheduled, refused) = {
                let o = observed.lock();
                let bound = o.bound_by_ns.get(ns).map_or(0, Vec::len) - baseline;
                let refused = o.unschedulable.iter().filter(|k| k.split('/').next() == Some(ns)).count();
                (bound, refused)
            };
            if now >= next_tick {
                collector.tick(now, scheduled);
                // Like Go's ticker: missed ticks are dropped, not replayed.
                while next_tick <= now {
                    next_tick += SAMPLE_INTERVAL;
                }
            }
            pb.set_position(scheduled as u64);
            pb.set_message(format!("{refused} unschedulable"));
            if created && scheduled == total {
                break;
            }
            if created && scheduled + refused >= total {
                let since = *settled_since.get_or_insert(now);
                if since.elapsed() >= SETTLE {
                    break;
                }
            } else {
                settled_since = None;
            }
            if now >= deadline {
                timed_out = true;
                let stuck = observed.lock().unaccounted(&keys);
                for line in self.backend.describe_keys(&stuck) {
                    eprintln!("  pending at the timeout: {line}");
                }
                break;
            }
        }
        let end = Instant::now();
        self.recorder.set_enabled(false);
        pb.finish_and_clear();
        if let Some(c) = creator {
            c.abort();
        }
        let o = observed.lock();
        let bind_offsets: Vec<f64> = o
            .bound_by_ns
            .get(ns)
            .map(|v| v[baseline..].iter().map(|t| t.saturating_duration_since(start).as_secs_f64()).collect())
            .unwrap_or_default();
        let scheduled = keys.iter().filter(|k| o.bound.contains_key(*k)).count();
        let unschedulable = keys.iter().filter(|k| o.unschedulable.contains(*k)).count();
        Ok(Measurement {
            throughput: collector.summary(),
            progress: collector
                .progress()
                .iter()
                .map(|p: &Progress| (p.at.saturating_duration_since(start).as_secs_f64(), p.scheduled, p.rate))
                .collect(),
            warnings: collector.warnings().to_vec(),
            bind_offsets,
            scheduled,
            unschedulable,
            pending: total - scheduled - unschedulable,
            duration: end - start,
            creation,
            timed_out,
        })
    }
}
