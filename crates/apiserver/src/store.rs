//! The in-memory object store: objects, the global resourceVersion, the
//! event history used to resume watches, and watch fan-out.
//!
//! One `RwLock` guards all state so that a write, its history entry and its
//! delivery to watchers are atomic with respect to lists and watch
//! registration — a watch started from a list's resourceVersion can never
//! miss or duplicate an event. Objects are kept both as `Arc<Value>` (for
//! selectors and patching) and as their serialized JSON (so GET, LIST and
//! watch replay are memcpy).

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::RwLock;
use rand::Rng;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::admission::AdmissionContext;
use crate::convert;
use crate::error::ApiError;
use crate::resources::{self, def, ids, Backing, ResourceId, RESOURCES};
use crate::strategy;
use crate::watch::{encode_line, EventType, Format, LiveEvent, Pending, WatchStream};

/// Tunables for the store.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// How many events are kept for resuming watches from a resourceVersion.
    pub history_capacity: usize,
    /// Per-watcher queue length; a watcher that falls this far behind is dropped.
    pub watch_buffer: usize,
    /// Interval between BOOKMARK events for watches that allow them.
    pub bookmark_interval: Duration,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig { history_capacity: 200_000, watch_buffer: 100_000, bookmark_interval: Duration::from_secs(1) }
    }
}

/// A stored object: parsed and serialized forms of the same version.
#[derive(Clone, Debug)]
pub(crate) struct Stored {
    pub value: Arc<Value>,
    pub json: Bytes,
}

struct HistEntry {
    rv: u64,
    bucket: ResourceId,
    ty: EventType,
    key: String,
    json: Bytes,
    prev: Option<Bytes>,
}

struct WatcherSlot {
    /// Key prefix (`ns/`) for namespaced watches.
    prefix: Option<String>,
    tx: mpsc::Sender<Arc<LiveEvent>>,
}

#[derive(Default)]
struct Bucket {
    objs: BTreeMap<String, Stored>,
    watchers: Vec<WatcherSlot>,
}

struct State {
    rv: u64,
    buckets: Vec<Bucket>,
    history: VecDeque<HistEntry>,
    /// Every event with rv > floor is still in `history`.
    floor: u64,
}

pub(crate) struct Inner {
    state: RwLock<State>,
    /// The last rv whose events have been handed to all watchers.
    pub(crate) rv: AtomicU64,
    closed: AtomicBool,
    cfg: StoreConfig,
}

/// A cheap, cloneable handle to the server's object store.
#[derive(Clone)]
pub struct Store {
    pub(crate) inner: Arc<Inner>,
}

/// Where a watch starts.
#[derive(Debug, Clone, Copy)]
pub(crate) enum WatchStart {
    /// Send the current state as ADDED events, then stream. With
    /// `end_bookmark`, mark the end of the initial events with a bookmark.
    State { end_bookmark: bool },
    /// Replay events after this resourceVersion, then stream.
    After(u64),
}

/// One page of a list.
pub(crate) struct ListPage {
    pub items: Vec<Stored>,
    pub rv: u64,
    pub continue_token: Option<String>,
}

/// What to delete in a collection delete / list.
pub(crate) struct ListQuery<'a> {
    pub namespace: Option<&'a str>,
    pub filter: &'a dyn Fn(&Value) -> bool,
    pub limit: Option<usize>,
    pub continue_token: Option<&'a str>,
}

fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Storage key: `ns/name` for namespaced objects, `name` otherwise. Names
/// cannot contain `/`, so keys of one namespace form a contiguous range.
fn key_for(ns: Option<&str>, name: &str) -> String {
    match ns {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_string(),
    }
}

fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get("metadata").and_then(|m| m.get(field)).and_then(Value::as_str)
}

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<String> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> =
        (0..s.len()).step_by(2).map(|i| s.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok())).collect();
    String::from_utf8(bytes?).ok()
}

fn parse_continue(token: &str) -> Result<(u64, String), ApiError> {
    let bad = || ApiError::bad_request(format!("continue key is not valid: {token:?}"));
    let (rv, key) = token.split_once(':').ok_or_else(bad)?;
    Ok((rv.parse().map_err(|_| bad())?, unhex(key).ok_or_else(bad)?))
}

fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..5).map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char).collect()
}

impl State {
    /// Records a write: bumps the rv, stamps it into `obj`, updates the
    /// bucket, appends history and fans the event out.
    fn commit(
        &mut self,
        inner: &Inner,
        bucket: ResourceId,
        key: String,
        ty: EventType,
        mut obj: Value,
        prev: Option<Stored>,
    ) -> Stored {
        self.rv += 1;
        let rv = self.rv;
        if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
        }
        let (line, json) = encode_line(ty.as_str(), &obj);
        let stored = Stored { value: Arc::new(obj), json };
        let b = &mut self.buckets[bucket];
        if ty == EventType::Deleted {
            b.objs.remove(&key);
        } else {
            b.objs.insert(key.clone(), stored.clone());
        }
        if !b.watchers.is_empty() {
            let ev = Arc::new(LiveEvent {
                rv,
                ty,
                obj: stored.value.clone(),
                prev: prev.as_ref().map(|p| p.value.clone()),
                line,
            });
            b.watchers.retain(|w| {
                if w.tx.is_closed() {
                    return false;
                }
                if w.prefix.as_ref().is_some_and(|p| !key.starts_with(p.as_str())) {
                    return true;
                }
                // A full queue means the watcher fell behind: drop it so its
                // stream ends and the client relists instead of stalling us.
                w.tx.try_send(ev.clone()).is_ok()
            });
        }
        if inner.cfg.history_capacity > 0 {
            while self.history.len() >= inner.cfg.history_capacity {
                match self.history.pop_front() {
                    Some(old) => self.floor = old.rv,
                    None => break,
                }
            }
            self.history.push_back(HistEntry {
                rv,
                bucket,
                ty,
                key,
                json: stored.json.clone(),
                prev: prev.map(|p| p.json),
            });
        } else {
            self.floor = rv;
        }
        inner.rv.store(rv, Ordering::Release);
        stored
    }

    fn namespace_exists(&self, ns: &str) -> bool {
        self.buckets[ids::namespaces()].objs.contains_key(ns)
    }
}

impl AdmissionContext for Store {
    fn priority_classes(&self) -> Vec<Arc<Value>> {
        self.inner.state.read().priority_classes()
    }

    fn node(&self, name: &str) -> Option<Arc<Value>> {
        self.inner.state.read().node(name)
    }

    fn storage_classes(&self) -> Vec<Arc<Value>> {
        self.inner.state.read().storage_classes()
    }

    fn limit_ranges(&self, namespace: &str) -> Vec<Arc<Value>> {
        self.inner.state.read().limit_ranges(namespace)
    }
}

/// For admission inside a write (the state is then already locked).
impl AdmissionContext for State {
    fn priority_classes(&self) -> Vec<Arc<Value>> {
        self.buckets[ids::priority_classes()].objs.values().map(|s| s.value.clone()).collect()
    }

    fn node(&self, name: &str) -> Option<Arc<Value>> {
        self.buckets[ids::nodes()].objs.get(name).map(|s| s.value.clone())
    }

    fn storage_classes(&self) -> Vec<Arc<Value>> {
        let Some(rid) = resources::by_kind("storage.k8s.io/v1", "StorageClass") else { return Vec::new() };
        self.buckets[rid].objs.values().map(|s| s.value.clone()).collect()
    }

    fn limit_ranges(&self, namespace: &str) -> Vec<Arc<Value>> {
        let Some(rid) = resources::by_kind("v1", "LimitRange") else { return Vec::new() };
        let prefix = format!("{namespace}/");
        let objs = self.buckets[rid].objs.iter();
        objs.filter(|(k, _)| k.starts_with(&prefix)).map(|(_, s)| s.value.clone()).collect()
    }
}

/// Built-in priority classes that exist in every cluster.
pub(crate) fn builtin_priority_classes() -> Vec<Value> {
    [("system-cluster-critical", 2_000_000_000), ("system-node-critical", 2_000_001_000)]
        .into_iter()
        .map(|(name, value)| {
            json!({
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name},
                "value": value,
                "preemptionPolicy": "PreemptLowerPriority",
                "description": "Used for system critical pods that must not be moved from their current node."
            })
        })
        .collect()
}

/// Converts a stored object into the shape of the API it is read through.
pub(crate) fn view_out(rid: ResourceId) -> Option<fn(&Value) -> Value> {
    (rid == ids::events_v1()).then_some(convert::core_to_event_v1 as fn(&Value) -> Value)
}

/// Converts an object written through `rid` into its stored shape.
pub(crate) fn view_in(rid: ResourceId, obj: Value) -> Value {
    if rid == ids::events_v1() {
        convert::event_v1_to_core(obj)
    } else {
        obj
    }
}

impl Store {
    /// Creates a store with the default namespaces and built-in priority classes.
    pub(crate) fn new(cfg: StoreConfig) -> Self {
        let store = Store {
            inner: Arc::new(Inner {
                state: RwLock::new(State {
                    rv: 0,
                    buckets: (0..RESOURCES.len()).map(|_| Bucket::default()).collect(),
                    history: VecDeque::new(),
                    floor: 0,
                }),
                rv: AtomicU64::new(0),
                closed: AtomicBool::new(false),
                cfg,
            }),
        };
        let mut seed: Vec<Value> = ["default", "kube-system", "kube-public", "kube-node-lease"]
            .into_iter()
            .map(|n| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}))
            .collect();
        seed.extend(builtin_priority_classes());
        for obj in seed {
            if let Err(e) = store.create(obj) {
                tracing::error!(error = %e, "seeding the store failed");
            }
        }
        store
    }

    /// Stops all watches and refuses new ones (used on shutdown).
    pub(crate) fn close(&self) {
        self.inner.closed.store(true, Ordering::Release);
        let mut st = self.inner.state.write();
        for b in &mut st.buckets {
            b.watchers.clear();
        }
    }

    /// Drops the watch history, as etcd compaction does: resuming a watch from an earlier
    /// resourceVersion then gets 410 Expired and the client relists.
    pub fn compact(&self) {
        let mut st = self.inner.state.write();
        st.history.clear();
        st.floor = st.rv;
    }

    /// True once the server shut down.
    pub(crate) fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::Acquire)
    }

    /// The current global resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.inner.state.read().rv
    }

    /// Creates an object given as JSON; `apiVersion`/`kind` select the
    /// resource. Applies the same defaulting and validation as a POST.
    /// Namespaced objects without a namespace go to `default`.
    pub fn create(&self, obj: Value) -> Result<Value, ApiError> {
        let rid = rid_of(&obj)?;
        let d = def(rid);
        let ns = if d.namespaced {
            Some(meta_str(&obj, "namespace").filter(|s| !s.is_empty()).unwrap_or("default").to_string())
        } else {
            None
        };
        let stored = self.create_in(rid, ns.as_deref(), obj, false)?;
        Ok(self.render(rid, &stored.value))
    }

    /// Lists objects of a kind, optionally within one namespace.
    pub fn list(&self, api_version: &str, kind: &str, namespace: Option<&str>) -> Vec<Value> {
        let Some(rid) = resources::by_kind(api_version, kind) else {
            return Vec::new();
        };
        let q = ListQuery { namespace, filter: &|_| true, limit: None, continue_token: None };
        match self.list_in(rid, &q) {
            Ok(page) => page.items.iter().map(|s| self.render(rid, &s.value)).collect(),
            Err(_) => Vec::new(),
        }
    }

    /// Gets one object by kind, namespace and name.
    pub fn get(&self, api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
        let rid = resources::by_kind(api_version, kind)?;
        let ns = if def(rid).namespaced { Some(namespace.unwrap_or("default")) } else { None };
        self.get_in(rid, ns, name).ok().map(|s| self.render(rid, &s.value))
    }

    /// Deletes one object by kind, namespace and name, returning its final state.
    pub fn delete(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Value, ApiError> {
        let rid = resources::by_kind(api_version, kind)
            .ok_or_else(|| ApiError::bad_request(format!("no resource for {api_version} {kind}")))?;
        let ns = if def(rid).namespaced { Some(namespace.unwrap_or("default")) } else { None };
        let stored = self.delete_in(rid, ns, name, None, false)?;
        Ok(self.render(rid, &stored.value))
    }

    fn render(&self, rid: ResourceId, obj: &Value) -> Value {
        match view_out(rid) {
            Some(f) => f(obj),
            None => obj.clone(),
        }
    }

    /// Gets a stored object.
    pub(crate) fn get_in(&self, rid: ResourceId, ns: Option<&str>, name: &str) -> Result<Stored, ApiError> {
        let sid = resources::storage_id(rid);
        let st = self.inner.state.read();
        st.buckets[sid]
            .objs
            .get(&key_for(ns, name))
            .cloned()
            .ok_or_else(|| ApiError::not_found(&def(rid).group_resource(), name))
    }

    /// Lists stored objects matching `q`, in key order, paginated.
    pub(crate) fn list_in(&self, rid: ResourceId, q: &ListQuery<'_>) -> Result<ListPage, ApiError> {
        let sid = resources::storage_id(rid);
        let cont = q.continue_token.filter(|t| !t.is_empty()).map(parse_continue).transpose()?;
        let st = self.inner.state.read();
        let objs = &st.buckets[sid].objs;
        let prefix = q.namespace.map(|ns| format!("{ns}/"));
        let lower = match (&cont, &prefix) {
            (Some((_, k)), _) => std::ops::Bound::Excluded(k.clone()),
            (None, Some(p)) => std::ops::Bound::Included(p.clone()),
            (None, None) => std::ops::Bound::Unbounded,
        };
        let limit = q.limit.filter(|l| *l > 0).unwrap_or(usize::MAX);
        let mut items = Vec::new();
        let mut continue_token = None;
        let list_rv = cont.as_ref().map_or(st.rv, |(rv, _)| *rv);
        let mut last_key: Option<&String> = None;
        for (k, s) in objs.range((lower, std::ops::Bound::Unbounded)) {
            if let Some(p) = &prefix {
                if !k.starts_with(p.as_str()) {
                    break;
                }
            }
            if !(q.filter)(&s.value) {
                continue;
            }
            if items.len() == limit {
                if let Some(last) = last_key {
                    continue_token = Some(format!("{list_rv}:{}", hex(last)));
                }
                break;
            }
            items.push(s.clone());
            last_key = Some(k);
        }
        Ok(ListPage { items, rv: list_rv, continue_token })
    }

    /// Admits (defaults/validates) and creates an object through resource `rid`;
    /// a `metadata.resourceVersion` in `obj` is dropped (in-process loaders hand
    /// over objects exported from a cluster).
    pub(crate) fn create_in(
        &self,
        rid: ResourceId,
        ns: Option<&str>,
        obj: Value,
        dry_run: bool,
    ) -> Result<Stored, ApiError> {
        self.create_checked(rid, ns, obj, dry_run, false)
    }

    /// [`Self::create_in`] for a POST: like upstream's storage, refuses an object
    /// that carries a non-zero resourceVersion (after admission and validation,
    /// and not on dry runs, whose storage never checks it).
    pub(crate) fn create_from_request(
        &self,
        rid: ResourceId,
        ns: Option<&str>,
        obj: Value,
        dry_run: bool,
    ) -> Result<Stored, ApiError> {
        self.create_checked(rid, ns, obj, dry_run, true)
    }

    fn create_checked(
        &self,
        rid: ResourceId,
        ns: Option<&str>,
        obj: Value,
        dry_run: bool,
        refuse_resource_version: bool,
    ) -> Result<Stored, ApiError> {
        let d = def(rid);
        let mut obj = view_in(rid, obj);
        if !obj.is_object() {
            return Err(ApiError::bad_request("the request body must be a JSON object"));
        }
        obj["apiVersion"] = json!(if rid == ids::events_v1() { "v1".to_string() } else { d.api_version() });
        obj["kind"] = json!(d.kind);
        if !obj.get("metadata").is_some_and(Value::is_object) {
            obj["metadata"] = json!({});
        }
        if let (Some(ns), Some(meta)) = (ns, obj["metadata"].as_object_mut()) {
            meta.insert("namespace".into(), json!(ns));
        }
        let sid = resources::storage_id(rid);
        let obj = strategy::admit_create(sid, obj, self)?;
        // Upstream's versioner reads the string as an unsigned number; anything
        // else counts as unset.
        let rv = meta_str(&obj, "resourceVersion").and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        if refuse_resource_version && !dry_run && rv != 0 {
            return Err(ApiError::unknown("resourceVersion should not be set on objects to be created"));
        }
        self.insert_new(rid, ns, obj, dry_run)
    }

    fn insert_new(&self, rid: ResourceId, ns: Option<&str>, mut obj: Value, dry_run: bool) -> Result<Stored, ApiError> {
        let d = def(rid);
        let sid = resources::storage_id(rid);
        let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
            return Err(ApiError::bad_request("metadata must be an object"));
        };
        for f in ["resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"] {
            meta.remove(f);
        }
        meta.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
        meta.insert("creationTimestamp".into(), json!(now_rfc3339()));
        let generate = meta.get("generateName").and_then(Value::as_str).map(String::from);
        let given = meta.get("name").and_then(Value::as_str).filter(|s| !s.is_empty()).map(String::from);

        let mut st = self.inner.state.write();
        if let Some(ns) = ns {
            if !st.namespace_exists(ns) {
                return Err(ApiError::not_found("namespaces", ns));
            }
            if d.kind != "Namespace" {
                let terminating = st.buckets[ids::namespaces()]
                    .objs
                    .get(ns)
                    .is_some_and(|n| n.value.pointer("/metadata/deletionTimestamp").is_some());
                if terminating {
                    return Err(ApiError::forbidden(
                        &d.group_resource(),
                        given.as_deref().unwrap_or_default(),
                        &format!("unable to create new content in namespace {ns} because it is being terminated"),
                    ));
                }
            }
        }
        let name = match (given, generate) {
            (Some(n), _) => n,
            (None, Some(prefix)) => {
                let mut attempt = 0;
                loop {
                    let candidate = format!("{prefix}{}", random_suffix());
                    if !st.buckets[sid].objs.contains_key(&key_for(ns, &candidate)) || attempt > 16 {
                        break candidate;
                    }
                    attempt += 1;
                }
            }
            (None, None) => {
                return Err(ApiError::invalid(d.kind, "", vec![crate::error::Cause::required("metadata.name")]))
            }
        };
        obj["metadata"]["name"] = json!(name);
        // Kinds whose strategy does not set it keep whatever the client sent, as upstream.
        if strategy::tracks_generation(d) {
            obj["metadata"]["generation"] = json!(1);
        }
        let key = key_for(ns, &name);
        if st.buckets[sid].objs.contains_key(&key) {
            return Err(ApiError::already_exists(&d.group_resource(), &name));
        }
        if dry_run {
            let (_, json) = encode_line("ADDED", &obj);
            return Ok(Stored { value: Arc::new(obj), json });
        }
        Ok(st.commit(&self.inner, sid, key, EventType::Added, obj, None))
    }

    /// Read-modify-write of one object. `mutate` sees the current object and
    /// returns the desired one; identity metadata is preserved, a stale
    /// `metadata.resourceVersion` yields 409, spec changes bump generation,
    /// and a no-op change writes nothing.
    pub(crate) fn update_in<F>(
        &self,
        rid: ResourceId,
        ns: Option<&str>,
        name: &str,
        dry_run: bool,
        mutate: F,
    ) -> Result<Stored, ApiError>
    where
        F: FnOnce(&Value) -> Result<Value, ApiError>,
    {
        let d = def(rid);
        let sid = resources::storage_id(rid);
        let key = key_for(ns, name);
        let mut st = self.inner.state.write();
        let Some(old) = st.buckets[sid].objs.get(&key).cloned() else {
            return Err(ApiError::not_found(&d.group_resource(), name));
        };
        let mut new = mutate(&old.value)?;
        if !new.is_object() {
            return Err(ApiError::bad_request("the object must be a JSON object"));
        }
        if !new.get("metadata").is_some_and(Value::is_object) {
            new["metadata"] = json!({});
        }
        let old_rv = meta_str(&old.value, "resourceVersion").unwrap_or_default().to_string();
        if let Some(want) = meta_str(&new, "resourceVersion") {
            if !want.is_empty() && want != old_rv {
                return Err(ApiError::stale(&d.group_resource(), name));
            }
        }
        let old_meta = old.value.get("metadata").cloned().unwrap_or_else(|| json!({}));
        if let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut) {
            for f in ["uid", "creationTimestamp", "name", "namespace", "deletionTimestamp", "generation"] {
                match old_meta.get(f) {
                    Some(v) => meta.insert(f.into(), v.clone()),
                    None => meta.remove(f),
                };
            }
            meta.insert("resourceVersion".into(), json!(old_rv));
        }
        new["apiVersion"] = old.value.get("apiVersion").cloned().unwrap_or(Value::Null);
        new["kind"] = old.value.get("kind").cloned().unwrap_or(Value::Null);
        strategy::admit_update(sid, &old.value, &mut new, &*st)?;
        if let Some(generation) = old_meta.get("generation").and_then(Value::as_i64) {
            if strategy::bumps_generation(d, &old.value, &new) {
                new["metadata"]["generation"] = json!(generation + 1);
            }
        }
        if new == *old.value {
            return Ok(old);
        }
        strategy::validate_update(sid, &old.value, &new)?;
        if dry_run {
            let (_, json) = encode_line("MODIFIED", &new);
            return Ok(Stored { value: Arc::new(new), json });
        }
        Ok(st.commit(&self.inner, sid, key, EventType::Modified, new, Some(old)))
    }

    /// Deletes one object, checking optional `(uid, resourceVersion)` preconditions.
    pub(crate) fn delete_in(
        &self,
        rid: ResourceId,
        ns: Option<&str>,
        name: &str,
        preconditions: Option<(Option<String>, Option<String>)>,
        dry_run: bool,
    ) -> Result<Stored, ApiError> {
        let d = def(rid);
        let sid = resources::storage_id(rid);
        let key = key_for(ns, name);
        let mut st = self.inner.state.write();
        let Some(old) = st.buckets[sid].objs.get(&key).cloned() else {
            return Err(ApiError::not_found(&d.group_resource(), name));
        };
        if let Some((uid, rv)) = preconditions {
            if let Some(uid) = uid.filter(|u| !u.is_empty()) {
                let have = meta_str(&old.value, "uid").unwrap_or_default();
                if uid != have {
                    return Err(ApiError::conflict(
                        &d.group_resource(),
                        name,
                        &format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {have}"),
                    ));
                }
            }
            if let Some(rv) = rv.filter(|r| !r.is_empty()) {
                let have = meta_str(&old.value, "resourceVersion").unwrap_or_default();
                if rv != have {
                    return Err(ApiError::conflict(
                        &d.group_resource(),
                        name,
                        &format!("Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {have}"),
                    ));
                }
            }
        }
        if dry_run {
            return Ok(old);
        }
        if sid == ids::namespaces() {
            // No namespace controller here: remove the contents right away.
            let prefix = format!("{name}/");
            for (bid, r) in RESOURCES.iter().enumerate() {
                if !r.namespaced || r.backing != Backing::Stored {
                    continue;
                }
                let keys: Vec<String> = st.buckets[bid]
                    .objs
                    .range(prefix.clone()..)
                    .take_while(|(k, _)| k.starts_with(&prefix))
                    .map(|(k, _)| k.clone())
                    .collect();
                for k in keys {
                    if let Some(child) = st.buckets[bid].objs.get(&k).cloned() {
                        let obj = (*child.value).clone();
                        st.commit(&self.inner, bid, k, EventType::Deleted, obj, Some(child));
                    }
                }
            }
        }
        let obj = (*old.value).clone();
        Ok(st.commit(&self.inner, sid, key, EventType::Deleted, obj, Some(old)))
    }

    /// Deletes every object matching `q` (pagination fields ignored).
    pub(crate) fn delete_collection_in(
        &self,
        rid: ResourceId,
        q: &ListQuery<'_>,
        dry_run: bool,
    ) -> Result<Vec<Stored>, ApiError> {
        let all = ListQuery { namespace: q.namespace, filter: q.filter, limit: None, continue_token: None };
        let page = self.list_in(rid, &all)?;
        let mut out = Vec::with_capacity(page.items.len());
        for s in page.items {
            let name = meta_str(&s.value, "name").unwrap_or_default().to_string();
            let ns = meta_str(&s.value, "namespace").map(String::from);
            let ns = if def(rid).namespaced { ns } else { None };
            match self.delete_in(rid, ns.as_deref(), &name, None, dry_run) {
                Ok(d) => out.push(d),
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// Starts a watch. A resourceVersion that already left the history
    /// yields a stream holding a single 410 Expired ERROR event.
    pub(crate) fn watch_in(
        &self,
        rid: ResourceId,
        ns: Option<&str>,
        start: WatchStart,
        fmt: Format,
        bookmarks: bool,
        timeout: Option<Duration>,
    ) -> Result<WatchStream, ApiError> {
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(ApiError::unavailable("the server is shutting down"));
        }
        let sid = resources::storage_id(rid);
        let prefix = ns.map(|ns| format!("{ns}/"));
        let mut pending = VecDeque::new();
        let (tx, rx) = mpsc::channel(self.inner.cfg.watch_buffer.max(1));
        let mut st = self.inner.state.write();
        let start_rv = st.rv;
        match start {
            WatchStart::State { end_bookmark } => {
                let objs = &st.buckets[sid].objs;
                let iter: Box<dyn Iterator<Item = (&String, &Stored)>> = match &prefix {
                    Some(p) => Box::new(objs.range(p.clone()..).take_while(|(k, _)| k.starts_with(p.as_str()))),
                    None => Box::new(objs.iter()),
                };
                pending.extend(iter.map(|(_, s)| Pending::State(s.clone())));
                if end_bookmark {
                    pending.push_back(Pending::Line(fmt.bookmark(start_rv, true)));
                }
            }
            WatchStart::After(rv) => {
                if rv < st.floor {
                    drop(st);
                    let err = ApiError::expired(rv, self.inner.state.read().floor);
                    pending.push_back(Pending::Line(fmt.error_event(&err)));
                    return Ok(WatchStream::new(self.inner.clone(), fmt, pending, None, rv, None, None));
                }
                let from = st.history.partition_point(|e| e.rv <= rv);
                pending.extend(
                    st.history
                        .range(from..)
                        .filter(|e| e.bucket == sid)
                        .filter(|e| prefix.as_ref().is_none_or(|p| e.key.starts_with(p.as_str())))
                        .map(|e| Pending::Replay { ty: e.ty, json: e.json.clone(), prev: e.prev.clone() }),
                );
            }
        }
        st.buckets[sid].watchers.push(WatcherSlot { prefix, tx });
        drop(st);
        let start_rv = match start {
            WatchStart::After(rv) => rv.max(start_rv),
            WatchStart::State { .. } => start_rv,
        };
        let every = bookmarks.then_some(self.inner.cfg.bookmark_interval);
        Ok(WatchStream::new(self.inner.clone(), fmt, pending, Some(rx), start_rv, every, timeout))
    }

    /// Watches every object of one kind in-process, as the API's JSON watch lines
    /// (`{"type":…,"object":…}`, several per frame): from the current state when `after` is
    /// `None`, else replaying the events after that resourceVersion. A resourceVersion that left
    /// the history yields a single 410 `ERROR` event, and the stream ends when the watcher falls
    /// behind, exactly as over HTTP; the caller resumes or relists.
    pub fn watch_kind(
        &self,
        api_version: &str,
        kind: &str,
        after: Option<u64>,
    ) -> Result<impl futures::Stream<Item = Bytes> + Send + Unpin + 'static, ApiError> {
        use futures::StreamExt;
        let rid = resources::by_kind(api_version, kind)
            .ok_or_else(|| ApiError::bad_request(format!("no resource {api_version} {kind}")))?;
        let fmt = Format {
            def: def(rid),
            labels: None,
            fields: None,
            view: None,
            render: crate::watch::Render::Object,
            proto: false,
        };
        let start = after.map_or(WatchStart::State { end_bookmark: false }, WatchStart::After);
        let stream = self.watch_in(rid, None, start, fmt, false, None)?;
        Ok(stream.map(|r| r.unwrap_or_else(|never| match never {})))
    }

    /// Number of registered watchers on a resource (for tests and metrics).
    pub fn watcher_count(&self, api_version: &str, kind: &str) -> usize {
        resources::by_kind(api_version, kind)
            .map(|rid| self.inner.state.read().buckets[resources::storage_id(rid)].watchers.len())
            .unwrap_or(0)
    }
}

/// Resolves the resource of an object from its `apiVersion` and `kind`.
pub(crate) fn rid_of(obj: &Value) -> Result<ResourceId, ApiError> {
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default();
    if api_version.is_empty() || kind.is_empty() {
        return Err(ApiError::bad_request("Object 'apiVersion' and 'Kind' are required"));
    }
    resources::by_kind(api_version, kind)
        .filter(|r| def(*r).is_stored())
        .ok_or_else(|| ApiError::bad_request(format!("no matches for kind \"{kind}\" in version \"{api_version}\"")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_and_create_get_list() {
        let s = Store::new(StoreConfig::default());
        assert_eq!(s.list("v1", "Namespace", None).len(), 4);
        assert!(s.get("scheduling.k8s.io/v1", "PriorityClass", None, "system-node-critical").is_some());
        let rv0 = s.resource_version();
        let pod = s
            .create(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {"containers": [{"name": "c", "image": "i"}]}}))
            .unwrap();
        assert_eq!(pod["metadata"]["namespace"], "default");
        assert_eq!(pod["metadata"]["resourceVersion"], (rv0 + 1).to_string());
        assert_eq!(s.list("v1", "Pod", Some("default")).len(), 1);
        assert_eq!(s.list("v1", "Pod", Some("kube-system")).len(), 0);
        let err = s
            .create(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "nope"},
                "spec": {"containers": [{"name": "c", "image": "i"}]}}))
            .unwrap_err();
        assert_eq!((err.code, err.message.as_str()), (404, "namespaces \"nope\" not found"));
    }

    #[test]
    fn continue_tokens_round_trip() {
        let t = format!("7:{}", hex("default/a-b"));
        assert_eq!(parse_continue(&t).unwrap(), (7, "default/a-b".to_string()));
        assert!(parse_continue("zz").is_err());
    }

    #[test]
    fn history_floor_moves() {
        let s = Store::new(StoreConfig { history_capacity: 2, ..Default::default() });
        let st = s.inner.state.read();
        assert_eq!(st.history.len(), 2);
        assert_eq!(st.floor, st.rv - 2);
    }
}
