//! The part of kube-controller-manager's resource claim controller that clusters without one
//! (`ksched local`, `ksched apiserver`, `ksched bench --mode trace-live`, `ksched explain` and
//! `whatif` on manifest files, tests) need, behaving as upstream's does:
//!
//! - a pod that names a ResourceClaimTemplate gets its claim (`<pod>-<claim>-` generated name,
//!   owned by the pod, annotated with the claim entry), recorded in
//!   `status.resourceClaimStatuses`;
//! - a claim's reservations (`status.reservedFor`) for pods that will not run any more are
//!   removed: pods deleted, replaced by a pod of the same name, done (`Succeeded` or `Failed`),
//!   or deleted before being scheduled;
//! - a claim that loses its last reservation that way is deallocated: its allocation cleared,
//!   then the delete-protection finalizer removed, so that its devices are free for other
//!   claims as soon as the pod is gone;
//! - an unreserved claim made for a pod is deleted once that pod is done, and once it is gone.
//!   Upstream leaves the second case to the garbage collector (the claim is owned by the pod);
//!   no garbage collector runs where this controller does, so it does that part too.

use std::collections::{HashMap, HashSet, VecDeque};

use futures::StreamExt;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};
use ksched_dra::claim::{
    claim_from_template, is_controlled_by, missing_template_claims, FINALIZER, POD_CLAIM_NAME_ANNOTATION,
};
use ksched_framework::pod::Pod;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::{watcher, WatchStreamExt as _};

/// Deleted pods remembered, so that a reservation for one is dropped without asking the API
/// server whether the pod exists (upstream remembers 500).
const DELETED_REMEMBERED: usize = 4096;

/// Runs the controller until the task is aborted.
pub fn spawn(client: kube::Client) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let pods = watcher(Api::<Pod>::all(client.clone()), watcher::Config::default())
            .default_backoff()
            .map(|e| Ev::Pod(Box::new(e)))
            .boxed();
        let claims = watcher(Api::<ResourceClaim>::all(client.clone()), watcher::Config::default())
            .default_backoff()
            .map(|e| Ev::Claim(Box::new(e)))
            .boxed();
        // One loop for both kinds: each event is handled to the end before the next, so the
        // cached state is never written by two handlers at once.
        let mut events = futures::stream::select(pods, claims);
        let mut c = Controller::new(client);
        while let Some(ev) = events.next().await {
            let result = match ev {
                Ev::Pod(e) => match *e {
                    Ok(e) => c.on_pod(e).await,
                    Err(e) => Err(e.to_string()),
                },
                Ev::Claim(e) => match *e {
                    Ok(e) => c.on_claim(e).await,
                    Err(e) => Err(e.to_string()),
                },
            };
            if let Err(e) = result {
                tracing::warn!(error = %e, "resource claim controller");
            }
        }
    })
}

/// An event of either watch (boxed: a pod is large, and events wait in the merged stream).
enum Ev {
    Pod(Box<Result<watcher::Event<Pod>, watcher::Error>>),
    Claim(Box<Result<watcher::Event<ResourceClaim>, watcher::Error>>),
}

/// What the controller knows of a pod.
#[derive(Debug, Clone)]
struct PodRef {
    namespace: String,
    /// Will not run (any more): a reservation for it is released.
    done: bool,
}

/// Whether the pod a reservation or an owner reference names may still use a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PodState {
    MayRun,
    Done,
    Gone,
}

/// UIDs of recently deleted pods, oldest forgotten first.
#[derive(Default)]
struct RecentUids {
    order: VecDeque<String>,
    set: HashSet<String>,
}

impl RecentUids {
    fn add(&mut self, uid: String) {
        if self.set.insert(uid.clone()) {
            self.order.push_back(uid);
            if self.order.len() > DELETED_REMEMBERED {
                if let Some(old) = self.order.pop_front() {
                    self.set.remove(&old);
                }
            }
        }
    }

    fn contains(&self, uid: &str) -> bool {
        self.set.contains(uid)
    }
}

type Key = (String, String);

struct Controller {
    client: kube::Client,
    /// Pods by UID, as the pod watcher last reported them.
    pods: HashMap<String, PodRef>,
    /// The UIDs seen since the pod watcher started (re)listing: at the end of the list, the
    /// pods known before but not listed were deleted meanwhile.
    relisting: Option<HashSet<String>>,
    deleted: RecentUids,
    /// Claims by namespace and name, as the claim watcher last reported them or as written here.
    claims: HashMap<Key, ResourceClaim>,
    /// Claims by the UID of the pod that controls them.
    owned: HashMap<String, HashSet<Key>>,
    /// The claim watcher has listed every claim: `claims` can be trusted to find a claim
    /// made earlier for a pod.
    claims_listed: bool,
}

fn ns_of(pod: &Pod) -> String {
    pod.metadata.namespace.clone().unwrap_or_else(|| "default".into())
}

fn key_of(claim: &ResourceClaim) -> Key {
    (
        claim.metadata.namespace.clone().unwrap_or_else(|| "default".into()),
        claim.metadata.name.clone().unwrap_or_default(),
    )
}

/// The pod will not run (any more): upstream's `isPodDone`, a terminal phase or deleted before
/// being scheduled.
fn pod_done(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    let unscheduled = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_none_or(str::is_empty);
    matches!(phase, Some("Succeeded" | "Failed")) || (pod.metadata.deletion_timestamp.is_some() && unscheduled)
}

/// The pod that controls a claim made for it: name and UID.
fn owning_pod(claim: &ResourceClaim) -> Option<(String, String)> {
    claim
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true) && o.api_version == "v1" && o.kind == "Pod")
        .map(|o| (o.name.clone(), o.uid.clone()))
}

fn has_finalizer(claim: &ResourceClaim) -> bool {
    claim.metadata.finalizers.iter().flatten().any(|f| f == FINALIZER)
}

/// A write that lost a race (the claim changed or went away meanwhile): the watch brings the
/// newer state, which is handled then.
fn lost_race(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409 || s.code == 404)
}

impl Controller {
    fn new(client: kube::Client) -> Self {
        Controller {
            client,
            pods: HashMap::new(),
            relisting: None,
            deleted: RecentUids::default(),
            claims: HashMap::new(),
            owned: HashMap::new(),
            claims_listed: false,
        }
    }

    async fn on_pod(&mut self, e: watcher::Event<Pod>) -> Result<(), String> {
        match e {
            watcher::Event::Init => {
                self.relisting = Some(HashSet::new());
                Ok(())
            }
            watcher::Event::InitApply(p) => {
                if let (Some(seen), Some(uid)) = (self.relisting.as_mut(), p.metadata.uid.clone()) {
                    seen.insert(uid);
                }
                self.pod_changed(p).await
            }
            watcher::Event::InitDone => {
                let seen = self.relisting.take().unwrap_or_default();
                let gone: Vec<String> = self.pods.keys().filter(|u| !seen.contains(*u)).cloned().collect();
                for uid in gone {
                    if let Some(p) = self.pods.remove(&uid) {
                        self.deleted.add(uid.clone());
                        self.release_claims_of(&uid, &p.namespace, &[]).await?;
                    }
                }
                Ok(())
            }
            watcher::Event::Apply(p) => self.pod_changed(p).await,
            watcher::Event::Delete(p) => {
                let uid = p.metadata.uid.clone().unwrap_or_default();
                self.pods.remove(&uid);
                self.deleted.add(uid.clone());
                self.release_claims_of(&uid, &ns_of(&p), &claim_names_of(&p)).await
            }
        }
    }

    async fn pod_changed(&mut self, p: Pod) -> Result<(), String> {
        let uid = p.metadata.uid.clone().unwrap_or_default();
        let done = pod_done(&p);
        let known = PodRef { namespace: ns_of(&p), done };
        self.pods.insert(uid.clone(), known);
        if done {
            return self.release_claims_of(&uid, &ns_of(&p), &claim_names_of(&p)).await;
        }
        self.sync_pod(&p).await
    }

    async fn on_claim(&mut self, e: watcher::Event<ResourceClaim>) -> Result<(), String> {
        match e {
            watcher::Event::Init => Ok(()),
            watcher::Event::InitDone => {
                self.claims_listed = true;
                Ok(())
            }
            watcher::Event::Apply(c) | watcher::Event::InitApply(c) => {
                self.remember(c.clone());
                self.sync_claim(c).await
            }
            watcher::Event::Delete(c) => {
                self.forget(&key_of(&c));
                Ok(())
            }
        }
    }

    fn remember(&mut self, c: ResourceClaim) {
        let key = key_of(&c);
        if let Some((_, uid)) = owning_pod(&c) {
            self.owned.entry(uid).or_default().insert(key.clone());
        }
        self.claims.insert(key, c);
    }

    fn forget(&mut self, key: &Key) {
        if let Some(old) = self.claims.remove(key) {
            if let Some((_, uid)) = owning_pod(&old) {
                if let Some(set) = self.owned.get_mut(&uid) {
                    set.remove(key);
                    if set.is_empty() {
                        self.owned.remove(&uid);
                    }
                }
            }
        }
    }

    /// Syncs every claim the pod names or controls: the pod will not run, so its reservations
    /// go, and the claims made for it with them.
    async fn release_claims_of(&mut self, uid: &str, ns: &str, names: &[String]) -> Result<(), String> {
        let mut keys: Vec<Key> = names.iter().map(|n| (ns.to_string(), n.clone())).collect();
        keys.extend(self.owned.get(uid).into_iter().flatten().cloned());
        keys.sort();
        keys.dedup();
        for key in keys {
            if let Some(c) = self.claims.get(&key).cloned() {
                self.sync_claim(c).await?;
            }
        }
        Ok(())
    }

    /// Whether the pod `ns/name` with `uid` may still use a claim.
    async fn pod_state(&self, ns: &str, name: &str, uid: &str) -> Result<PodState, String> {
        if let Some(p) = self.pods.get(uid) {
            return Ok(if p.done { PodState::Done } else { PodState::MayRun });
        }
        if self.deleted.contains(uid) {
            return Ok(PodState::Gone);
        }
        // Not seen yet: the pod watch may lag behind the claim's. Releasing the claim of a pod
        // being scheduled would be wrong, so the API server decides.
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        match pods.get_opt(name).await.map_err(|e| format!("get pod {ns}/{name}: {e}"))? {
            Some(p) if p.metadata.uid.as_deref() == Some(uid) => {
                Ok(if pod_done(&p) { PodState::Done } else { PodState::MayRun })
            }
            _ => Ok(PodState::Gone),
        }
    }

    /// Upstream's `syncClaim`: drops the reservations of pods that will not run, deallocates a
    /// claim that lost its last one, and deletes an unreserved claim made for a pod that is done
    /// or gone.
    async fn sync_claim(&mut self, claim: ResourceClaim) -> Result<(), String> {
        let (ns, name) = key_of(&claim);
        let reserved = claim.status.as_ref().and_then(|s| s.reserved_for.clone()).unwrap_or_default();
        let mut valid = Vec::with_capacity(reserved.len());
        for r in &reserved {
            let is_pod = r.api_group.as_deref().unwrap_or_default().is_empty() && r.resource == "pods";
            // Other consumers are not tracked here: their reservations stay.
            if !is_pod || self.pod_state(&ns, &r.name, &r.uid).await? == PodState::MayRun {
                valid.push(r.clone());
            }
        }
        let api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), &ns);
        let mut current = claim;
        let being_deleted = current.metadata.deletion_timestamp.is_some();
        if valid.len() < reserved.len() || (valid.is_empty() && being_deleted && has_finalizer(&current)) {
            let mut next = current.clone();
            let deallocate = valid.is_empty() && has_finalizer(&next);
            let status = next.status.get_or_insert_with(Default::default);
            status.reserved_for = (!valid.is_empty()).then(|| valid.clone());
            // Unused now: the devices go back to the pool, and a later consumer gets a fresh
            // allocation (wherever it is scheduled) instead of this one's node. Only claims the
            // scheduler allocated (those carry the finalizer) are deallocated here.
            if deallocate {
                status.allocation = None;
            }
            if next.status != current.status {
                current = match api.replace_status(&name, &PostParams::default(), &next).await {
                    Ok(c) => c,
                    Err(e) if lost_race(&e) => return Ok(()),
                    Err(e) => return Err(format!("update ResourceClaim {ns}/{name} status: {e}")),
                };
                self.remember(current.clone());
            }
            let unallocated = current.status.as_ref().is_none_or(|s| s.allocation.is_none());
            if unallocated && has_finalizer(&current) {
                let mut next = current.clone();
                next.metadata.finalizers.get_or_insert_with(Vec::new).retain(|f| f != FINALIZER);
                current = match api.replace(&name, &PostParams::default(), &next).await {
                    Ok(c) => c,
                    Err(e) if lost_race(&e) => return Ok(()),
                    Err(e) => return Err(format!("remove the finalizer of ResourceClaim {ns}/{name}: {e}")),
                };
                self.remember(current.clone());
            }
        }
        if !valid.is_empty() {
            return Ok(());
        }
        let Some((owner, owner_uid)) = owning_pod(&current) else { return Ok(()) };
        if self.pod_state(&ns, &owner, &owner_uid).await? == PodState::MayRun {
            return Ok(());
        }
        let uid = current.metadata.uid.clone();
        let dp =
            DeleteParams { preconditions: Some(Preconditions { uid, resource_version: None }), ..Default::default() };
        match api.delete(&name, &dp).await {
            Ok(_) => {
                self.forget(&(ns, name));
                Ok(())
            }
            Err(e) if lost_race(&e) => Ok(()),
            Err(e) => Err(format!("delete ResourceClaim {ns}/{name} of pod {owner}: {e}")),
        }
    }

    async fn sync_pod(&mut self, pod: &Pod) -> Result<(), String> {
        if pod.metadata.deletion_timestamp.is_some() || missing_template_claims(pod).is_empty() {
            return Ok(());
        }
        let mut existing: Vec<ResourceClaim> = if self.claims_listed {
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            self.owned.get(&uid).into_iter().flatten().filter_map(|k| self.claims.get(k).cloned()).collect()
        } else {
            // Until the claim watcher has listed them all, a claim made for this pod before a
            // restart may be missing from the cache: ask the API server.
            let claims_api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), &ns_of(pod));
            claims_api.list(&ListParams::default()).await.map_err(|e| e.to_string())?.items
        };
        let before = existing.len();
        let r = sync_pod_with(&self.client, pod, &mut existing).await;
        // The claims made now, before their watch events: a retry must find them.
        for c in existing.drain(before..) {
            self.remember(c);
        }
        r
    }
}

/// The claims a pod names: `resourceClaimName` entries and the generated claims its status
/// records.
fn claim_names_of(pod: &Pod) -> Vec<String> {
    let mut names: Vec<String> = pod
        .spec
        .as_ref()
        .and_then(|s| s.resource_claims.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|pc| pc.resource_claim_name.clone())
        .collect();
    let statuses = pod.status.as_ref().and_then(|s| s.resource_claim_statuses.as_ref());
    names.extend(statuses.into_iter().flatten().filter_map(|s| s.resource_claim_name.clone()));
    names
}

/// The claim made for the entry earlier, if its status update did not land.
fn existing_claim<'a>(claims: &'a [ResourceClaim], pod: &Pod, entry: &str) -> Option<&'a ResourceClaim> {
    claims.iter().find(|c| {
        is_controlled_by(c, pod)
            && c.metadata.annotations.as_ref().and_then(|a| a.get(POD_CLAIM_NAME_ANNOTATION)).map(String::as_str)
                == Some(entry)
    })
}

/// One pass over every pod, as the controller makes when it starts, for tools that load a
/// cluster and then read it (`ksched explain` and `ksched whatif` on manifest files). Returns
/// what kept pods waiting (a template that does not exist, as with the running controller).
pub async fn sync_all(client: &kube::Client) -> Result<Vec<String>, String> {
    let pods: Api<Pod> = Api::all(client.clone());
    let claims: Api<ResourceClaim> = Api::all(client.clone());
    // Listed once: per pod, as the running controller does, is quadratic in the pods.
    let mut existing = claims.list(&ListParams::default()).await.map_err(|e| e.to_string())?.items;
    let mut problems = Vec::new();
    for pod in pods.list(&ListParams::default()).await.map_err(|e| e.to_string())?.items {
        if let Err(e) = sync_pod_with(client, &pod, &mut existing).await {
            problems.push(format!("pod {}/{}: {e}", ns_of(&pod), pod.metadata.name.as_deref().unwrap_or_default()));
        }
    }
    Ok(problems)
}

/// Makes the pod's missing template claims (reusing those made earlier, among `existing`, to
/// which new ones are added) and records them in its status.
async fn sync_pod_with(client: &kube::Client, pod: &Pod, existing: &mut Vec<ResourceClaim>) -> Result<(), String> {
    if pod.metadata.deletion_timestamp.is_some() {
        return Ok(());
    }
    let missing = missing_template_claims(pod);
    if missing.is_empty() {
        return Ok(());
    }
    let ns = ns_of(pod);
    let name = pod.metadata.name.clone().unwrap_or_default();
    let claims_api: Api<ResourceClaim> = Api::namespaced(client.clone(), &ns);
    let templates: Api<ResourceClaimTemplate> = Api::namespaced(client.clone(), &ns);
    let mut statuses: Vec<serde_json::Value> = pod
        .status
        .as_ref()
        .and_then(|s| s.resource_claim_statuses.as_ref())
        .into_iter()
        .flatten()
        .map(|s| serde_json::json!({"name": s.name, "resourceClaimName": s.resource_claim_name}))
        .collect();
    let before = statuses.len();
    for (entry, template) in missing {
        let claim_name = match existing_claim(existing, pod, &entry) {
            Some(c) => c.metadata.name.clone(),
            None => {
                let t = match templates.get(&template).await {
                    Ok(t) => t,
                    // The template may come later; the pod waits, as with the real controller.
                    Err(e) => return Err(format!("resource claim template {template:?}: {e}")),
                };
                let claim = claim_from_template(pod, &entry, &t);
                let created = claims_api.create(&PostParams::default(), &claim).await.map_err(|e| {
                    format!("create ResourceClaim {}: {e}", claim.metadata.generate_name.unwrap_or_default())
                })?;
                let name = created.metadata.name.clone();
                existing.push(created);
                name
            }
        };
        statuses.push(serde_json::json!({"name": entry, "resourceClaimName": claim_name}));
    }
    if statuses.len() == before {
        return Ok(());
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let patch = serde_json::json!({"status": {"resourceClaimStatuses": statuses}});
    pods.patch_status(&name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map(|_| ())
        .map_err(|e| format!("update pod {ns}/{name} ResourceClaimStatuses: {e}"))
}
