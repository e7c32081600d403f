//! Pod signatures (upstream `kube-scheduler/framework` `PodSignature`, `SignFragment` and the
//! shared signers of `signers.go`).
//!
//! Each signing plugin adds fragments named by upstream's signer keys; a fragment's value is
//! encoded canonically (length-prefixed, lists sorted where order does not matter) so that two
//! pods get equal signatures exactly when every fragment's value is equal. The bytes are only
//! ever compared, never parsed or shown, so the encoding need not be upstream's JSON.

use std::sync::Arc;

use k8s_openapi::api::core::v1 as api;

use crate::pod::Pod;

/// `v1.Pod.Spec.DynamicResources`.
pub const DYNAMIC_RESOURCES: &str = "v1.Pod.Spec.DynamicResources";
/// `v1.Pod.Spec.CanonicalImageNames()`: the normalised image names.
pub const IMAGE_NAMES: &str = "v1.Pod.Spec.CanonicalImageNames()";
/// `v1.Pod.Labels`.
pub const LABELS: &str = "v1.Pod.Labels";
/// `v1.Pod.Spec.NodeName`.
pub const NODE_NAME: &str = "v1.Pod.Spec.NodeName";
/// `v1.Pod.Spec.Affinity.NodeAffinity`.
pub const NODE_AFFINITY: &str = "v1.Pod.Spec.Affinity.NodeAffinity";
/// `v1.Pod.Spec.Affinity.NodeSelector` (upstream's name for `spec.nodeSelector`).
pub const NODE_SELECTOR: &str = "v1.Pod.Spec.Affinity.NodeSelector";
/// `v1.Pod.Spec.HostPorts()`: the host port numbers.
pub const HOST_PORTS: &str = "v1.Pod.Spec.HostPorts()";
/// `v1.Pod.Spec.ContainerRequestsAndOverheads()`: the pod's effective requests.
pub const RESOURCES: &str = "v1.Pod.Spec.ContainerRequestsAndOverheads()";
/// `v1.Pod.Spec.SchedulerName`: every signature has it.
pub const SCHEDULER_NAME: &str = "v1.Pod.Spec.SchedulerName";
/// `v1.Pod.Spec.Tolerations`.
pub const TOLERATIONS: &str = "v1.Pod.Spec.Tolerations";
/// `v1.Pod.Spec.Volumes.NonSyntheticSources()`: volume sources other than ConfigMaps and Secrets.
pub const VOLUMES: &str = "v1.Pod.Spec.Volumes.NonSyntheticSources()";
/// `v1.Pod.Spec.RequiredFeatures()`: the node features the pod needs.
pub const FEATURES: &str = "v1.Pod.Spec.RequiredFeatures()";

/// A pod's signature (upstream `PodSignature`). Cheap to clone.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PodSignature(Arc<[u8]>);

impl PodSignature {
    /// A signature from raw bytes (tests; real signatures come from [`SignatureBuilder`]).
    pub fn from_bytes(bytes: &[u8]) -> Self {
        PodSignature(bytes.into())
    }

    /// The encoded fragments.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for PodSignature {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PodSignature({} bytes)", self.0.len())
    }
}

/// Collects the fragments of one pod's signature.
#[derive(Debug, Default)]
pub struct SignatureBuilder {
    buf: Vec<u8>,
    /// (key, start, end) of each fragment's value in `buf`.
    fragments: Vec<(&'static str, usize, usize)>,
}

impl SignatureBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        SignatureBuilder { buf: Vec::with_capacity(256), fragments: Vec::with_capacity(16) }
    }

    /// Adds fragment `key` with the value `encode` writes, unless the fragment is already there:
    /// plugins that share a key (TaintToleration and NodeUnschedulable, the volume plugins)
    /// produce the same value, and upstream keeps one.
    pub fn fragment(&mut self, key: &'static str, encode: impl FnOnce(&mut FragmentWriter<'_>)) {
        if self.fragments.iter().any(|(k, _, _)| *k == key) {
            return;
        }
        let start = self.buf.len();
        encode(&mut FragmentWriter { buf: &mut self.buf });
        self.fragments.push((key, start, self.buf.len()));
    }

    /// True when fragment `key` was added.
    pub fn has(&self, key: &str) -> bool {
        self.fragments.iter().any(|(k, _, _)| *k == key)
    }

    /// The signature: the fragments in key order, each as key and length-prefixed value.
    pub fn finish(mut self) -> PodSignature {
        self.fragments.sort_unstable_by_key(|(k, _, _)| *k);
        let mut out = Vec::with_capacity(self.buf.len() + self.fragments.len() * 48);
        for (key, start, end) in &self.fragments {
            out.extend_from_slice(key.as_bytes());
            out.push(0);
            out.extend_from_slice(&((end - start) as u32).to_le_bytes());
            out.extend_from_slice(&self.buf[*start..*end]);
        }
        PodSignature(out.into())
    }
}

/// Writes one fragment's value; every write is self-delimiting, so a sequence of writes is an
/// injective encoding of the values written.
#[derive(Debug)]
pub struct FragmentWriter<'a> {
    buf: &'a mut Vec<u8>,
}

impl<'a> FragmentWriter<'a> {
    /// A writer appending to `buf` (for encodings outside a signature, such as the memo's key).
    pub fn new(buf: &'a mut Vec<u8>) -> Self {
        FragmentWriter { buf }
    }

    /// A length or count.
    pub fn count(&mut self, n: usize) {
        self.buf.extend_from_slice(&(n as u32).to_le_bytes());
    }

    /// A string.
    pub fn str(&mut self, s: &str) {
        self.count(s.len());
        self.buf.extend_from_slice(s.as_bytes());
    }

    /// A Go `string` field: unset and empty are the same value.
    pub fn go_str(&mut self, s: Option<&str>) {
        self.str(s.unwrap_or_default());
    }

    /// An integer.
    pub fn i64(&mut self, v: i64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// A flag (also the present/absent tag of optional values).
    pub fn bool(&mut self, v: bool) {
        self.buf.push(u8::from(v));
    }

    /// An optional integer (a Go pointer: nil and 0 differ).
    pub fn opt_i64(&mut self, v: Option<i64>) {
        self.bool(v.is_some());
        if let Some(v) = v {
            self.i64(v);
        }
    }

    /// A JSON encoding of `v` (for API structs compared whole).
    pub fn json<T: serde::Serialize>(&mut self, v: &T) {
        let at = self.buf.len();
        self.count(0);
        // Serializing API types into memory cannot fail; an error would only leave the value
        // empty, which still compares consistently.
        let _ = serde_json::to_writer(&mut *self.buf, v);
        let n = (self.buf.len() - at - 4) as u32;
        self.buf[at..at + 4].copy_from_slice(&n.to_le_bytes());
    }

    /// A list whose order does not matter: each item is encoded on its own, then the items are
    /// written sorted.
    pub fn sorted<I, F>(&mut self, items: I, mut encode: F)
    where
        I: IntoIterator,
        F: FnMut(&mut FragmentWriter<'_>, I::Item),
    {
        let mut encoded: Vec<Vec<u8>> = items
            .into_iter()
            .map(|item| {
                let mut buf = Vec::new();
                encode(&mut FragmentWriter { buf: &mut buf }, item);
                buf
            })
            .collect();
        encoded.sort_unstable();
        self.count(encoded.len());
        for e in &encoded {
            self.count(e.len());
            self.buf.extend_from_slice(e);
        }
    }
}

// ---- the shared signers (upstream `signers.go`) ----

fn containers_and_init(pod: &Pod) -> impl Iterator<Item = &crate::pod::Container> {
    pod.spec.iter().flat_map(|s| s.containers.iter().chain(s.init_containers.iter().flatten()))
}

/// The host port numbers of every container and init container, as a set (upstream
/// `HostPortsSigner`: numbers only, not protocols or addresses).
pub fn host_ports(pod: &Pod, w: &mut FragmentWriter<'_>) {
    let mut ports: Vec<i32> = containers_and_init(pod)
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| p.host_port.filter(|hp| *hp != 0))
        .collect();
    ports.sort_unstable();
    ports.dedup();
    w.count(ports.len());
    for p in ports {
        w.i64(i64::from(p));
    }
}

/// The tolerations in (key, value) order, stably (upstream `TolerationsSigner`).
pub fn tolerations(pod: &Pod, w: &mut FragmentWriter<'_>) {
    let mut list: Vec<&api::Toleration> =
        pod.spec.as_ref().and_then(|s| s.tolerations.as_deref()).unwrap_or_default().iter().collect();
    let key = |t: &&api::Toleration| (t.key.clone().unwrap_or_default(), t.value.clone().unwrap_or_default());
    list.sort_by_cached_key(key);
    w.count(list.len());
    for t in list {
        w.go_str(t.key.as_deref());
        w.go_str(t.operator.as_deref());
        w.go_str(t.value.as_deref());
        w.go_str(t.effect.as_deref());
        w.opt_i64(t.toleration_seconds);
    }
}

/// The sources of the volumes other than ConfigMaps and Secrets, which are specific to each pod
/// but never affect scheduling (upstream `VolumesSigner`). Volume names are left out.
pub fn volumes(pod: &Pod, w: &mut FragmentWriter<'_>) {
    let vols = pod.spec.as_ref().and_then(|s| s.volumes.as_deref()).unwrap_or_default();
    let sources = vols.iter().filter(|v| v.config_map.is_none() && v.secret.is_none());
    w.sorted(sources, |w, v| w.json(&api::Volume { name: String::new(), ..v.clone() }));
}

fn node_selector_requirements(w: &mut FragmentWriter<'_>, reqs: Option<&Vec<api::NodeSelectorRequirement>>) {
    w.sorted(reqs.into_iter().flatten(), |w, r| {
        w.str(&r.key);
        w.str(&r.operator);
        w.sorted(r.values.iter().flatten(), |w, v| w.str(v));
    });
}

fn node_selector_term(w: &mut FragmentWriter<'_>, t: &api::NodeSelectorTerm) {
    node_selector_requirements(w, t.match_expressions.as_ref());
    node_selector_requirements(w, t.match_fields.as_ref());
}

/// The pod's node affinity with terms, requirements and values in canonical order, or nothing
/// when it has none (upstream `NodeAffinitySigner`).
pub fn node_affinity(pod: &Pod, w: &mut FragmentWriter<'_>) {
    let na = pod.spec.as_ref().and_then(|s| s.affinity.as_ref()).and_then(|a| a.node_affinity.as_ref());
    w.bool(na.is_some());
    let Some(na) = na else { return };
    let required = na.required_during_scheduling_ignored_during_execution.as_ref();
    w.sorted(required.into_iter().flat_map(|r| &r.node_selector_terms), node_selector_term);
    w.sorted(na.preferred_during_scheduling_ignored_during_execution.iter().flatten(), |w, p| {
        w.i64(i64::from(p.weight));
        node_selector_term(w, &p.preference);
    });
}

/// `spec.nodeSelector` (unset and empty differ, as Go's nil and empty maps do).
pub fn node_selector(pod: &Pod, w: &mut FragmentWriter<'_>) {
    let sel = pod.spec.as_ref().and_then(|s| s.node_selector.as_ref());
    w.bool(sel.is_some());
    if let Some(sel) = sel {
        w.count(sel.len());
        for (k, v) in sel.iter() {
            w.str(k);
            w.str(v);
        }
    }
}

/// The pod's labels (in key order).
pub fn labels(pod: &Pod, w: &mut FragmentWriter<'_>) {
    w.count(pod.metadata.labels.len());
    for (k, v) in pod.metadata.labels.iter() {
        w.str(k);
        w.str(v);
    }
}

/// An image name with the default `:latest` tag made explicit (upstream `normalizedImageName`).
pub fn normalized_image_name(name: &str) -> std::borrow::Cow<'_, str> {
    if name.rfind(':').map_or(-1, |i| i as isize) <= name.rfind('/').map_or(-1, |i| i as isize) {
        format!("{name}:latest").into()
    } else {
        name.into()
    }
}

/// The normalised image names of every container and init container, as a set.
pub fn image_names(pod: &Pod, w: &mut FragmentWriter<'_>) {
    let mut names: Vec<std::borrow::Cow<'_, str>> =
        containers_and_init(pod).map(|c| normalized_image_name(c.image.as_deref().unwrap_or_default())).collect();
    names.sort_unstable();
    names.dedup();
    w.count(names.len());
    for n in &names {
        w.str(n);
    }
}

/// A resource vector: cpu, memory, ephemeral storage, pods and the scalar resources.
pub fn resources(r: &crate::resource::Resource, w: &mut FragmentWriter<'_>) {
    w.i64(r.milli_cpu);
    w.i64(r.memory);
    w.i64(r.ephemeral_storage);
    w.i64(r.allowed_pod_number);
    w.count(r.scalar_resources.len());
    for (k, v) in r.scalar_resources.iter() {
        w.str(k);
        w.i64(*v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sign(build: impl FnOnce(&mut SignatureBuilder)) -> PodSignature {
        let mut b = SignatureBuilder::new();
        build(&mut b);
        b.finish()
    }

    #[test]
    fn fragments_are_keyed_and_order_independent() {
        let a = sign(|b| {
            b.fragment(NODE_NAME, |w| w.str("n1"));
            b.fragment(LABELS, |w| w.str("x"));
        });
        let b = sign(|b| {
            b.fragment(LABELS, |w| w.str("x"));
            b.fragment(NODE_NAME, |w| w.str("n1"));
        });
        assert_eq!(a, b);
        // The same bytes under another key are another signature.
        let c = sign(|b| {
            b.fragment(NODE_NAME, |w| w.str("x"));
            b.fragment(LABELS, |w| w.str("n1"));
        });
        assert_ne!(a, c);
    }

    #[test]
    fn a_repeated_key_keeps_the_first_value() {
        let once = sign(|b| b.fragment(TOLERATIONS, |w| w.str("t")));
        let twice = sign(|b| {
            b.fragment(TOLERATIONS, |w| w.str("t"));
            b.fragment(TOLERATIONS, |w| w.str("other"));
        });
        assert_eq!(once, twice);
    }

    #[test]
    fn writes_are_self_delimiting() {
        // ("ab", "c") and ("a", "bc") concatenate alike but must not encode alike.
        let a = sign(|b| {
            b.fragment(LABELS, |w| {
                w.str("ab");
                w.str("c")
            })
        });
        let b = sign(|b| {
            b.fragment(LABELS, |w| {
                w.str("a");
                w.str("bc")
            })
        });
        assert_ne!(a, b);
    }

    #[test]
    fn sorted_lists_ignore_order() {
        let a = sign(|b| b.fragment(VOLUMES, |w| w.sorted(["x", "y"], |w, s| w.str(s))));
        let b = sign(|b| b.fragment(VOLUMES, |w| w.sorted(["y", "x"], |w, s| w.str(s))));
        let c = sign(|b| b.fragment(VOLUMES, |w| w.sorted(["y"], |w, s| w.str(s))));
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn image_names_get_the_latest_tag() {
        assert_eq!(normalized_image_name("nginx"), "nginx:latest");
        assert_eq!(normalized_image_name("nginx:1.2"), "nginx:1.2");
        assert_eq!(normalized_image_name("localhost:5000/nginx"), "localhost:5000/nginx:latest");
        assert_eq!(normalized_image_name("localhost:5000/nginx:1"), "localhost:5000/nginx:1");
    }
}
