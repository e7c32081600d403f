//! The assume caches for PVs and PVCs (upstream's passive assume cache): an overlay over the
//! informer listers holding the scheduler's not-yet-written versions. An assumed object is seen
//! instead of the informer's only while the informer still has the version it was derived from;
//! any newer informer version wins, which makes stale assumptions expire without event handlers.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use ksched_framework::listers::ClusterLister;

use super::helpers::{name_of, namespace_of, pv_class};

fn rv(m: &ObjectMeta) -> &str {
    m.resource_version.as_deref().unwrap_or_default()
}

/// `namespace/name` of a claim.
pub fn pvc_key(pvc: &PersistentVolumeClaim) -> String {
    format!("{}/{}", namespace_of(&pvc.metadata), name_of(&pvc.metadata))
}

/// Assumed PVs and PVCs over a lister.
pub struct AssumeCache {
    lister: Arc<dyn ClusterLister>,
    pvs: Mutex<HashMap<String, Arc<PersistentVolume>>>,
    pvcs: Mutex<HashMap<String, Arc<PersistentVolumeClaim>>>,
}

impl AssumeCache {
    /// An empty overlay.
    pub fn new(lister: Arc<dyn ClusterLister>) -> Self {
        AssumeCache { lister, pvs: Mutex::default(), pvcs: Mutex::default() }
    }

    /// The informer's PV; the error is the cache's NotFound text.
    pub fn pv_api(&self, name: &str) -> Result<Arc<PersistentVolume>, String> {
        self.lister.persistent_volume(name).ok_or_else(|| format!("persistentvolumes {name:?} not found"))
    }

    /// The informer's PVC by `namespace/name`.
    pub fn pvc_api(&self, key: &str) -> Result<Arc<PersistentVolumeClaim>, String> {
        let (ns, name) = key.split_once('/').unwrap_or(("", key));
        self.lister.persistent_volume_claim(ns, name).ok_or_else(|| format!("persistentvolumeclaims {key:?} not found"))
    }

    /// The PV as the scheduler sees it (assumed version when still current).
    pub fn pv(&self, name: &str) -> Result<Arc<PersistentVolume>, String> {
        let api = self.pv_api(name)?;
        Ok(overlay(&self.pvs, name, api, |p| &p.metadata))
    }

    /// The PVC as the scheduler sees it.
    pub fn pvc(&self, key: &str) -> Result<Arc<PersistentVolumeClaim>, String> {
        let api = self.pvc_api(key)?;
        Ok(overlay(&self.pvcs, key, api, |p| &p.metadata))
    }

    /// PVs of a storage class, assumed versions substituted, sorted by name for determinism.
    pub fn list_pvs(&self, class: &str) -> Vec<Arc<PersistentVolume>> {
        let mut out: Vec<Arc<PersistentVolume>> =
            self.lister.persistent_volumes().into_iter().filter(|pv| pv_class(pv) == class).collect();
        out.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let assumed = self.pvs.lock().unwrap_or_else(|e| e.into_inner());
        if !assumed.is_empty() {
            for pv in &mut out {
                if let Some(a) = assumed.get(name_of(&pv.metadata)) {
                    if rv(&a.metadata) == rv(&pv.metadata) {
                        *pv = a.clone();
                    }
                }
            }
        }
        out
    }

    /// Records a new version of a PV derived from the informer's current one.
    pub fn assume_pv(&self, pv: Arc<PersistentVolume>) -> Result<(), String> {
        let name = name_of(&pv.metadata).to_string();
        let stored = self.pv_api(&name)?;
        assume(&self.pvs, name, pv, &stored.metadata, |p| &p.metadata)
    }

    /// Records a new version of a PVC derived from the informer's current one.
    pub fn assume_pvc(&self, pvc: Arc<PersistentVolumeClaim>) -> Result<(), String> {
        let key = pvc_key(&pvc);
        let stored = self.pvc_api(&key)?;
        assume(&self.pvcs, key, pvc, &stored.metadata, |p| &p.metadata)
    }

    /// Drops the assumed PV when it is this version.
    pub fn restore_pv(&self, pv: &PersistentVolume) {
        restore(&self.pvs, name_of(&pv.metadata), &pv.metadata, |p| &p.metadata);
    }

    /// Drops the assumed PVC when it is this version.
    pub fn restore_pvc(&self, pvc: &PersistentVolumeClaim) {
        restore(&self.pvcs, &pvc_key(pvc), &pvc.metadata, |p| &p.metadata);
    }
}

fn overlay<T>(m: &Mutex<HashMap<String, Arc<T>>>, key: &str, api: Arc<T>, meta: fn(&T) -> &ObjectMeta) -> Arc<T> {
    let mut m = m.lock().unwrap_or_else(|e| e.into_inner());
    match m.get(key) {
        Some(a) if rv(meta(a)) == rv(meta(&api)) => a.clone(),
        Some(_) => {
            // the informer moved on: the assumption expired
            m.remove(key);
            api
        }
        None => api,
    }
}

fn assume<T>(
    m: &Mutex<HashMap<String, Arc<T>>>,
    key: String,
    obj: Arc<T>,
    stored: &ObjectMeta,
    meta: fn(&T) -> &ObjectMeta,
) -> Result<(), String> {
    if rv(stored) != rv(meta(&obj)) {
        return Err(format!("{key:?} is out of sync (stored: {}, assume: {})", rv(stored), rv(meta(&obj))));
    }
    m.lock().unwrap_or_else(|e| e.into_inner()).insert(key, obj);
    Ok(())
}

fn restore<T>(m: &Mutex<HashMap<String, Arc<T>>>, key: &str, obj: &ObjectMeta, meta: fn(&T) -> &ObjectMeta) {
    let mut m = m.lock().unwrap_or_else(|e| e.into_inner());
    if m.get(key).is_some_and(|a| rv(meta(a)) == rv(obj)) {
        m.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ksched_framework::listers::MemoryLister;
    use serde_json::json;

    fn pv(name: &str, rv: &str, class: &str) -> Arc<PersistentVolume> {
        Arc::new(
            serde_json::from_value(json!({"metadata": {"name": name, "resourceVersion": rv},
                "spec": {"storageClassName": class}}))
            .unwrap(),
        )
    }

    #[test]
    fn assumed_versions_expire_when_the_informer_moves_on() {
        let lister = Arc::new(MemoryLister::default());
        lister.pvs.write().push(pv("a", "1", "c"));
        let cache = AssumeCache::new(lister.clone());
        let mut changed = (*pv("a", "1", "c")).clone();
        changed.metadata.labels = Some([("x".to_string(), "y".to_string())].into());
        cache.assume_pv(Arc::new(changed)).unwrap();
        assert!(cache.pv("a").unwrap().metadata.labels.is_some());
        assert!(cache.list_pvs("c")[0].metadata.labels.is_some());
        assert!(cache.pv_api("a").unwrap().metadata.labels.is_none());
        assert_eq!(cache.assume_pv(pv("a", "0", "c")).unwrap_err(), "\"a\" is out of sync (stored: 1, assume: 0)");
        *lister.pvs.write() = vec![pv("a", "2", "c")];
        assert!(cache.pv("a").unwrap().metadata.labels.is_none());
        assert_eq!(cache.pv("b").unwrap_err(), "persistentvolumes \"b\" not found");
    }

    #[test]
    fn restore_drops_only_the_same_version() {
        let lister = Arc::new(MemoryLister::default());
        lister.pvs.write().push(pv("a", "1", "c"));
        let cache = AssumeCache::new(lister);
        let mut changed = (*pv("a", "1", "c")).clone();
        changed.metadata.labels = Some(Default::default());
        cache.assume_pv(Arc::new(changed)).unwrap();
        cache.restore_pv(&pv("a", "9", "c"));
        assert!(cache.pv("a").unwrap().metadata.labels.is_some());
        cache.restore_pv(&pv("a", "1", "c"));
        assert!(cache.pv("a").unwrap().metadata.labels.is_none());
    }
}
