//! DRA objects in the in-process cluster: the loopback writes claims like an API server would
//! (resource versions, conflicts, generated names) and reports each change to the queue as a
//! watch event would; pods that use claim templates get their claims made on arrival, doing
//! kube-controller-manager's part.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::PodResourceClaimStatus;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice};
use ksched_framework::client::ApiError;
use ksched_framework::pod::Pod;
use ksched_framework::{ActionType, ClusterEvent, EventObject, EventResource};
use parking_lot::Mutex;

use super::{InProcessCluster, Loopback};

/// What the loopback keeps for DRA besides the lister.
#[derive(Default)]
pub(crate) struct DraObjects {
    templates: Mutex<HashMap<(String, String), Arc<ResourceClaimTemplate>>>,
}

fn json(obj: &impl serde::Serialize) -> Option<EventObject> {
    serde_json::to_value(obj).ok().map(|v| EventObject::Other(Arc::new(v)))
}

fn key(ns: Option<&str>, name: Option<&str>) -> (String, String) {
    (ns.unwrap_or("default").to_string(), name.unwrap_or_default().to_string())
}

impl Loopback {
    fn lister(&self) -> Option<Arc<ksched_framework::listers::MemoryLister>> {
        self.lister.get().cloned()
    }

    /// Reports a change to the queue, after the lister has it.
    pub(crate) fn dra_event(
        &self,
        resource: EventResource,
        action: ActionType,
        old: Option<EventObject>,
        new: Option<EventObject>,
    ) {
        if let Some(q) = self.queue.get().and_then(std::sync::Weak::upgrade) {
            q.move_all_to_active_or_backoff(ClusterEvent::new(resource, action), old.as_ref(), new.as_ref(), None);
        }
    }

    /// Stores a claim: a create (name from `generateName`) or an update that must carry the
    /// current resource version.
    pub(crate) fn write_claim(&self, mut c: ResourceClaim, create: bool) -> Result<ResourceClaim, ApiError> {
        let lister = self.lister().ok_or(ApiError { code: 0, message: "no lister".into() })?;
        let ns = c.metadata.namespace.get_or_insert_with(|| "default".into()).clone();
        if create && c.metadata.name.is_none() {
            let n = self.rv.load(Ordering::Relaxed);
            c.metadata.name =
                Some(format!("{}{:05x}", c.metadata.generate_name.clone().unwrap_or_default(), n % 0x100000));
        }
        let name = c.metadata.name.clone().unwrap_or_default();
        let old = lister.resource_claims.get(Some(&ns), &name);
        match (&old, create) {
            (Some(_), true) => {
                return Err(ApiError { code: 409, message: format!("resourceclaims.resource.k8s.io {name:?} already exists") })
            }
            (None, false) => {
                return Err(ApiError { code: 404, message: format!("resourceclaims.resource.k8s.io {name:?} not found") })
            }
            (Some(o), false) if o.metadata.resource_version != c.metadata.resource_version => {
                return Err(ApiError {
                    code: 409,
                    message: format!(
                        "Operation cannot be fulfilled on resourceclaims.resource.k8s.io {name:?}: the object has been modified; please apply your changes to the latest version and try again"
                    ),
                })
            }
            _ => {}
        }
        if create {
            c.metadata.uid = Some(format!("claim-{ns}-{name}"));
        }
        c.metadata.resource_version = Some(self.next_rv());
        let stored = Arc::new(c.clone());
        lister.resource_claims.upsert(stored.clone());
        let action = if old.is_some() { ActionType::UPDATE } else { ActionType::ADD };
        self.dra_event(EventResource::ResourceClaim, action, old.and_then(|o| json(&*o)), json(&*stored));
        Ok(c)
    }

    pub(crate) fn claim_future(
        &self,
        r: Result<ResourceClaim, ApiError>,
    ) -> BoxFuture<'static, Result<ResourceClaim, ApiError>> {
        Box::pin(async move { r })
    }

    pub(crate) fn get_claim(&self, ns: &str, name: &str) -> Result<ResourceClaim, ApiError> {
        self.lister().and_then(|l| l.resource_claims.get(Some(ns), name)).map(|c| (*c).clone()).ok_or_else(|| {
            ApiError { code: 404, message: format!("resourceclaims.resource.k8s.io {name:?} not found") }
        })
    }

    /// A strategic-merge status patch that deletes `reservedFor` entries by uid (the only
    /// patch the scheduler sends).
    pub(crate) fn patch_claim_status(
        &self,
        ns: &str,
        name: &str,
        patch: &serde_json::Value,
    ) -> Result<ResourceClaim, ApiError> {
        let mut c = self.get_claim(ns, name)?;
        let drop: Vec<&str> = patch
            .pointer("/status/reservedFor")
            .and_then(|r| r.as_array())
            .into_iter()
            .flatten()
            .filter(|e| e.get("$patch").and_then(|p| p.as_str()) == Some("delete"))
            .filter_map(|e| e.get("uid").and_then(|u| u.as_str()))
            .collect();
        if let Some(rf) = c.status.as_mut().and_then(|s| s.reserved_for.as_mut()) {
            rf.retain(|r| !drop.contains(&r.uid.as_str()));
        }
        self.write_claim(c, false)
    }

    pub(crate) fn delete_claim(&self, ns: &str, name: &str) -> Result<(), ApiError> {
        let lister = self.lister().ok_or(ApiError { code: 0, message: "no lister".into() })?;
        let old = lister.resource_claims.remove(Some(ns), name).ok_or_else(|| ApiError {
            code: 404,
            message: format!("resourceclaims.resource.k8s.io {name:?} not found"),
        })?;
        self.dra_event(EventResource::ResourceClaim, ActionType::DELETE, json(&*old), None);
        Ok(())
    }

    /// Deletes the claims a deleted pod owned (the claim controller's garbage collection).
    pub(crate) fn delete_claims_of(&self, pod: &Pod) {
        let Some(lister) = self.lister() else { return };
        let owned: Vec<Arc<ResourceClaim>> = lister
            .resource_claims
            .read()
            .iter()
            .filter(|c| ksched_dra::claim::is_controlled_by(c, pod))
            .cloned()
            .collect();
        for c in owned {
            let _ = self.delete_claim(
                c.metadata.namespace.as_deref().unwrap_or("default"),
                c.metadata.name.as_deref().unwrap_or_default(),
            );
        }
    }

    /// Makes the claims of the pod's template entries (kube-controller-manager's job) and
    /// records them in the pod status; entries whose template is missing stay pending.
    pub(crate) fn make_template_claims(&self, pod: &mut Pod) {
        let missing = ksched_dra::claim::missing_template_claims(pod);
        if missing.is_empty() {
            return;
        }
        let ns = pod.metadata.namespace.clone().unwrap_or_else(|| "default".into());
        for (entry, template) in missing {
            let t = self.dra.templates.lock().get(&(ns.clone(), template)).cloned();
            let Some(t) = t else { continue };
            let claim = ksched_dra::claim::claim_from_template(pod, &entry, &t);
            let Ok(created) = self.write_claim(claim, true) else { continue };
            let status = pod.status.get_or_insert_with(Default::default);
            status
                .resource_claim_statuses
                .get_or_insert_with(Vec::new)
                .push(PodResourceClaimStatus { name: entry, resource_claim_name: created.metadata.name });
        }
    }
}

impl InProcessCluster {
    /// Adds or replaces a ResourceClaim (as a user would create it).
    pub fn apply_resource_claim(&self, c: ResourceClaim) -> Result<ResourceClaim, ApiError> {
        let ns = c.metadata.namespace.clone().unwrap_or_else(|| "default".into());
        let existing = c.metadata.name.as_deref().and_then(|n| self.lister.resource_claims.get(Some(&ns), n));
        match existing {
            Some(e) => {
                let mut c = c;
                c.metadata.uid = e.metadata.uid.clone();
                c.metadata.resource_version = e.metadata.resource_version.clone();
                self.loopback.write_claim(c, false)
            }
            None => self.loopback.write_claim(c, true),
        }
    }

    /// The current version of a claim.
    pub fn resource_claim(&self, namespace: &str, name: &str) -> Option<Arc<ResourceClaim>> {
        self.lister.resource_claims.get(Some(namespace), name)
    }

    /// All claims.
    pub fn resource_claims(&self) -> Vec<Arc<ResourceClaim>> {
        self.lister.resource_claims.list()
    }

    /// Adds or replaces a DeviceClass.
    pub fn apply_device_class(&self, mut c: DeviceClass) {
        c.metadata.resource_version = Some(self.loopback.next_rv());
        let old = self.lister.device_classes.get(None, c.metadata.name.as_deref().unwrap_or_default());
        let c = Arc::new(c);
        self.lister.device_classes.upsert(c.clone());
        let action = if old.is_some() { ActionType::UPDATE } else { ActionType::ADD };
        self.loopback.dra_event(EventResource::DeviceClass, action, old.and_then(|o| json(&*o)), json(&*c));
    }

    /// Adds or replaces a ResourceSlice.
    pub fn apply_resource_slice(&self, mut s: ResourceSlice) {
        s.metadata.resource_version = Some(self.loopback.next_rv());
        let old = self.lister.resource_slices.get(None, s.metadata.name.as_deref().unwrap_or_default());
        let s = Arc::new(s);
        self.lister.resource_slices.upsert(s.clone());
        let action = if old.is_some() { ActionType::UPDATE } else { ActionType::ADD };
        self.loopback.dra_event(EventResource::ResourceSlice, action, old.and_then(|o| json(&*o)), json(&*s));
    }

    /// Adds or replaces a ResourceClaimTemplate (pods applied later get claims from it).
    pub fn apply_resource_claim_template(&self, t: ResourceClaimTemplate) {
        let k = key(t.metadata.namespace.as_deref(), t.metadata.name.as_deref());
        self.loopback.dra.templates.lock().insert(k, Arc::new(t));
    }
}
