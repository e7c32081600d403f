//! HTTP scheduler extenders (upstream `pkg/scheduler/extender.go`): filter, prioritize, bind and preempt over JSON with the same
//! payloads as upstream, whose keys are Go field names (PascalCase). Replies are decoded
//! case-insensitively, as Go's JSON decoder does. Preemption reaches extenders through the
//! framework's [`Extender`] trait, which [`HttpExtender`] implements.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use ksched_framework::extender::{Extender, NodeToVictims, Victims};
use ksched_framework::pod::Pod;
use ksched_framework::{NodeInfo, Snapshot};
use serde_json::{json, Map, Value};

use crate::config;

/// The pseudo-plugin recorded as rejector when an extender filtered nodes out.
pub const EXTENDER_NAME: &str = "Extender";

/// Upstream's default extender timeout when `httpTimeout` is 0.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

type HttpsClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// Result of an extender's filter call.
#[derive(Debug, Default)]
pub struct FilterResult<'n> {
    /// Nodes the extender kept, in input order.
    pub nodes: Vec<&'n NodeInfo>,
    /// Node -> reason, for nodes preemption may help.
    pub failed: HashMap<String, String>,
    /// Node -> reason, for nodes preemption cannot help.
    pub failed_unresolvable: HashMap<String, String>,
}

/// One configured extender.
pub struct HttpExtender {
    cfg: config::Extender,
    url_prefix: String,
    timeout: Duration,
    managed: HashSet<String>,
    client: HttpsClient,
    /// The runtime the client was built on, for calls from the synchronous scheduling thread.
    runtime: Option<tokio::runtime::Handle>,
}

impl std::fmt::Debug for HttpExtender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HttpExtender({})", self.url_prefix)
    }
}

/// A certificate verifier that accepts anything: upstream disables verification when
/// `enableHTTPS` is set without a CA or with `insecure: true`.
#[derive(Debug)]
struct AcceptAny(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AcceptAny {
    fn verify_server_cert(
        &self,
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &[rustls::pki_types::CertificateDer<'_>],
        _: &rustls::pki_types::ServerName<'_>,
        _: &[u8],
        _: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &rustls::pki_types::CertificateDer<'_>,
        d: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(m, c, d, &self.0.signature_verification_algorithms)
    }
    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &rustls::pki_types::CertificateDer<'_>,
        d: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(m, c, d, &self.0.signature_verification_algorithms)
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

fn pem_certs(pem: &[u8]) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>, String> {
    use rustls::pki_types::pem::PemObject;
    rustls::pki_types::CertificateDer::pem_slice_iter(pem).collect::<Result<Vec<_>, _>>().map_err(|e| e.to_string())
}

fn tls_config(cfg: &config::Extender) -> Result<rustls::ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let tls = cfg.tls_config.clone().unwrap_or_default();
    let ca = if !tls.ca_data.0.is_empty() {
        Some(tls.ca_data.0.clone())
    } else if !tls.ca_file.is_empty() {
        Some(std::fs::read(&tls.ca_file).map_err(|e| format!("reading caFile {}: {e}", tls.ca_file))?)
    } else {
        None
    };
    let builder = match ca.filter(|_| !tls.insecure) {
        Some(pem) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in pem_certs(&pem)? {
                roots.add(c).map_err(|e| e.to_string())?;
            }
            builder.with_root_certificates(roots)
        }
        None => builder.dangerous().with_custom_certificate_verifier(Arc::new(AcceptAny(provider))),
    };
    let cert = if !tls.cert_data.0.is_empty() {
        Some(tls.cert_data.0.clone())
    } else if !tls.cert_file.is_empty() {
        Some(std::fs::read(&tls.cert_file).map_err(|e| format!("reading certFile {}: {e}", tls.cert_file))?)
    } else {
        None
    };
    match cert {
        Some(cert) => {
            use rustls::pki_types::pem::PemObject;
            let key = if !tls.key_data.0.is_empty() {
                tls.key_data.0.clone()
            } else {
                std::fs::read(&tls.key_file).map_err(|e| format!("reading keyFile {}: {e}", tls.key_file))?
            };
            let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(&key).map_err(|e| e.to_string())?;
            builder.with_client_auth_cert(pem_certs(&cert)?, key).map_err(|e| e.to_string())
        }
        None => Ok(builder.with_no_client_auth()),
    }
}

fn get_ci<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.as_object()?.iter().find(|(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| v).filter(|v| !v.is_null())
}

fn string_map(v: Option<&Value>) -> HashMap<String, String> {
    v.and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string())).collect())
        .unwrap_or_default()
}

fn pod_mentions(pod: &Pod, managed: &HashSet<String>) -> bool {
    let Some(spec) = pod.spec.as_ref() else { return false };
    spec.containers.iter().chain(spec.init_containers.iter().flatten()).any(|c| {
        c.resources.as_ref().is_some_and(|r| {
            r.requests.iter().flatten().chain(r.limits.iter().flatten()).any(|(name, _)| managed.contains(name))
        })
    })
}

impl HttpExtender {
    /// Builds an extender client from its configuration; when built on a tokio runtime, that
    /// runtime serves its blocking calls ([`Extender::process_preemption`]).
    pub fn new(cfg: &config::Extender) -> Result<Self, String> {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        let tls = tls_config(cfg)?;
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        let client = Client::builder(TokioExecutor::new()).build(connector);
        Ok(HttpExtender {
            url_prefix: cfg.url_prefix.trim_end_matches('/').to_string(),
            timeout: cfg.http_timeout.to_std().filter(|d| !d.is_zero()).unwrap_or(DEFAULT_TIMEOUT),
            managed: cfg.managed_resources.iter().map(|m| m.name.clone()).collect(),
            cfg: cfg.clone(),
            client,
            runtime: tokio::runtime::Handle::try_current().ok(),
        })
    }

    /// The extender's name in logs and metrics: its URL prefix.
    pub fn name(&self) -> &str {
        &self.url_prefix
    }

    /// True when errors of this extender are skipped.
    pub fn is_ignorable(&self) -> bool {
        self.cfg.ignorable
    }

    /// True when it filters.
    pub fn is_filter(&self) -> bool {
        !self.cfg.filter_verb.is_empty()
    }

    /// True when it scores.
    pub fn is_prioritizer(&self) -> bool {
        !self.cfg.prioritize_verb.is_empty()
    }

    /// True when it binds.
    pub fn is_binder(&self) -> bool {
        !self.cfg.bind_verb.is_empty()
    }

    /// True when it takes part in preemption.
    pub fn supports_preemption(&self) -> bool {
        !self.cfg.preempt_verb.is_empty()
    }

    /// Its score weight.
    pub fn weight(&self) -> i64 {
        self.cfg.weight
    }

    /// True unless `managedResources` is set and the pod requests none of them.
    pub fn is_interested(&self, pod: &Pod) -> bool {
        self.managed.is_empty() || pod_mentions(pod, &self.managed)
    }

    async fn post(&self, verb: &str, body: &Value) -> Result<Value, String> {
        let url = format!("{}/{verb}", self.url_prefix);
        let req = hyper::Request::post(&url)
            .header("Content-Type", "application/json")
            .body(Full::new(Bytes::from(serde_json::to_vec(body).map_err(|e| e.to_string())?)))
            .map_err(|e| e.to_string())?;
        let call = async {
            let resp = self.client.request(req).await.map_err(|e| format!("{e}"))?;
            let status = resp.status();
            let bytes = resp.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
            if status != hyper::StatusCode::OK {
                return Err(format!("failed {verb} with extender at URL {url}, code {}", status.as_u16()));
            }
            serde_json::from_slice(&bytes).map_err(|e| e.to_string())
        };
        match tokio::time::timeout(self.timeout, call).await {
            Ok(r) => r,
            Err(_) => {
                Err(format!("Post {url:?}: context deadline exceeded (Client.Timeout exceeded while awaiting headers)"))
            }
        }
    }

    fn args(&self, pod: &Pod, nodes: &[&NodeInfo]) -> Value {
        if self.cfg.node_cache_capable {
            let names: Vec<&str> = nodes.iter().map(|n| n.name()).collect();
            json!({"Pod": pod, "Nodes": null, "NodeNames": names})
        } else {
            let items: Vec<Value> = nodes
                .iter()
                .filter_map(|n| n.node())
                .map(|n| serde_json::to_value(n.as_ref()).unwrap_or(Value::Null))
                .collect();
            json!({"Pod": pod, "Nodes": {"metadata": {}, "items": items}, "NodeNames": null})
        }
    }

    /// Calls the filter verb: returns the kept nodes and the failed ones with reasons.
    pub async fn filter<'n>(&self, pod: &Pod, nodes: &[&'n NodeInfo]) -> Result<FilterResult<'n>, String> {
        let reply = self.post(&self.cfg.filter_verb, &self.args(pod, nodes)).await?;
        if let Some(e) = get_ci(&reply, "Error").and_then(Value::as_str).filter(|e| !e.is_empty()) {
            return Err(e.to_string());
        }
        let by_name: HashMap<&str, &'n NodeInfo> = nodes.iter().map(|n| (n.name(), *n)).collect();
        let kept: Vec<&'n NodeInfo> = if self.cfg.node_cache_capable {
            let mut kept = Vec::new();
            for n in get_ci(&reply, "NodeNames").and_then(Value::as_array).into_iter().flatten() {
                let name = n.as_str().unwrap_or_default();
                let ni = by_name.get(name).ok_or_else(|| {
                    format!(
                        "extender {:?} claims a filtered node {name:?} which is not found in the input node list",
                        self.name()
                    )
                })?;
                kept.push(*ni);
            }
            kept
        } else {
            let items = get_ci(&reply, "Nodes").and_then(|l| get_ci(l, "items")).and_then(Value::as_array);
            let mut kept = Vec::new();
            for item in items.into_iter().flatten() {
                let name = item.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
                if let Some(ni) = by_name.get(name) {
                    kept.push(*ni);
                }
            }
            kept
        };
        Ok(FilterResult {
            nodes: kept,
            failed: string_map(get_ci(&reply, "FailedNodes")),
            failed_unresolvable: string_map(get_ci(&reply, "FailedAndUnresolvableNodes")),
        })
    }

    /// Calls the prioritize verb: host -> score (0–10).
    pub async fn prioritize(&self, pod: &Pod, nodes: &[&NodeInfo]) -> Result<Vec<(String, i64)>, String> {
        let reply = self.post(&self.cfg.prioritize_verb, &self.args(pod, nodes)).await?;
        Ok(reply
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|hp| {
                let host = get_ci(hp, "Host")?.as_str()?.to_string();
                Some((host, get_ci(hp, "Score").and_then(Value::as_i64).unwrap_or(0)))
            })
            .collect())
    }

    /// Calls the bind verb.
    pub async fn bind(&self, pod: &Pod, node: &str) -> Result<(), String> {
        let args = json!({
            "PodName": pod.metadata.name, "PodNamespace": pod.metadata.namespace,
            "PodUID": pod.metadata.uid, "Node": node,
        });
        let reply = self.post(&self.cfg.bind_verb, &args).await?;
        match get_ci(&reply, "Error").and_then(Value::as_str).filter(|e| !e.is_empty()) {
            Some(e) => Err(e.to_string()),
            None => Ok(()),
        }
    }

    /// Calls the preempt verb with the candidates' victims; returns the extender's answer with
    /// its pod UIDs resolved against the pods of `nodes`.
    pub async fn preempt(&self, pod: &Pod, victims: &NodeToVictims, nodes: &Snapshot) -> Result<NodeToVictims, String> {
        let reply = self.post(&self.cfg.preempt_verb, &self.preemption_args(pod, victims)?).await?;
        self.decode_preemption_reply(&reply, nodes)
    }

    /// The preempt verb's body: full victim pods, or only their UIDs when the extender caches
    /// nodes itself. Both keys are always present (the unused one null), as Go encodes them.
    fn preemption_args(&self, pod: &Pod, victims: &NodeToVictims) -> Result<Value, String> {
        let pod = serde_json::to_value(pod).map_err(|e| e.to_string())?;
        let mut by_node = Map::new();
        for (node, v) in victims {
            let pods: Vec<Value> = if self.cfg.node_cache_capable {
                v.pods.iter().map(|p| json!({"UID": p.uid()})).collect()
            } else {
                v.pods
                    .iter()
                    .map(|p| serde_json::to_value(p.pod.as_ref()))
                    .collect::<Result<_, _>>()
                    .map_err(|e| e.to_string())?
            };
            by_node.insert(node.clone(), json!({"Pods": pods, "NumPDBViolations": v.num_pdb_violations}));
        }
        let (full, meta) = if self.cfg.node_cache_capable {
            (Value::Null, Value::Object(by_node))
        } else {
            (Value::Object(by_node), Value::Null)
        };
        Ok(json!({"Pod": pod, "NodeNameToVictims": full, "NodeNameToMetaVictims": meta}))
    }

    /// Reads `NodeNameToMetaVictims`, the only field of upstream's preemption result, whatever
    /// `nodeCacheCapable` is: every named node must be in the snapshot and every UID a pod on
    /// that node.
    fn decode_preemption_reply(&self, reply: &Value, nodes: &Snapshot) -> Result<NodeToVictims, String> {
        let bad = |what: &str| format!("extender {:?}: decoding preempt reply: {what}", self.name());
        if !reply.is_object() && !reply.is_null() {
            return Err(bad("not an object"));
        }
        let Some(meta) = get_ci(reply, "NodeNameToMetaVictims") else { return Ok(NodeToVictims::new()) };
        let meta = meta.as_object().ok_or_else(|| bad("NodeNameToMetaVictims is not an object"))?;
        let mut out = NodeToVictims::with_capacity(meta.len());
        for (node, mv) in meta {
            let ni = nodes.get(node)?;
            let num_pdb_violations = match get_ci(mv, "NumPDBViolations") {
                None => 0,
                Some(n) => n.as_i64().ok_or_else(|| bad("NumPDBViolations is not an integer"))?,
            };
            let listed = match get_ci(mv, "Pods") {
                None => &[][..],
                Some(p) => p.as_array().ok_or_else(|| bad("Pods is not a list"))?.as_slice(),
            };
            let mut pods = Vec::with_capacity(listed.len());
            for meta_pod in listed {
                let uid = get_ci(meta_pod, "UID").and_then(Value::as_str).unwrap_or_default();
                let found = ni.pods.iter().find(|p| p.uid() == uid).ok_or_else(|| {
                    format!(
                        "extender: {} claims to preempt pod (UID: &{{{uid}}}) on node: {node}, but the pod is not found on that node",
                        self.name()
                    )
                })?;
                pods.push(found.clone());
            }
            out.insert(node.clone(), Victims { pods, num_pdb_violations });
        }
        Ok(out)
    }
}

/// Waits on the scheduling thread for an extender call, driven by `runtime` (the one the
/// client was built on) or else the current one.
///
/// From inside a multi-threaded runtime the wait goes through `block_in_place`, so the other
/// workers keep going; a single-threaded runtime cannot progress while its only thread waits,
/// so waiting there is refused rather than deadlocking.
fn wait_for<F: std::future::Future>(runtime: Option<&tokio::runtime::Handle>, f: F) -> Result<F::Output, String> {
    use tokio::runtime::{Handle, RuntimeFlavor};
    let current = Handle::try_current().ok();
    let Some(rt) = runtime.or(current.as_ref()) else {
        return Err("no async runtime to call the extender on".into());
    };
    match current.as_ref().map(Handle::runtime_flavor) {
        None => Ok(rt.block_on(f)),
        Some(RuntimeFlavor::MultiThread) => Ok(tokio::task::block_in_place(|| rt.block_on(f))),
        Some(_) => Err("cannot wait for an extender on a single-threaded async runtime".into()),
    }
}

impl Extender for HttpExtender {
    fn name(&self) -> &str {
        HttpExtender::name(self)
    }

    fn is_ignorable(&self) -> bool {
        HttpExtender::is_ignorable(self)
    }

    fn supports_preemption(&self) -> bool {
        HttpExtender::supports_preemption(self)
    }

    fn is_interested(&self, pod: &Pod) -> bool {
        HttpExtender::is_interested(self, pod)
    }

    fn process_preemption(
        &self,
        pod: &Pod,
        victims: &NodeToVictims,
        nodes: &Snapshot,
    ) -> Result<NodeToVictims, String> {
        if !self.supports_preemption() {
            return Err(format!(
                "preempt verb is not defined for extender {} but run into ProcessPreemption",
                self.name()
            ));
        }
        wait_for(self.runtime.as_ref(), self.preempt(pod, victims, nodes))?
    }
}

/// Builds the configured extenders in upstream's order: non-ignorable first, then ignorable
/// ones, each group in configuration order.
pub fn build_extenders(cfgs: &[config::Extender]) -> Result<Vec<Arc<HttpExtender>>, String> {
    let mut out: Vec<Arc<HttpExtender>> = Vec::new();
    for ignorable in [false, true] {
        for c in cfgs.iter().filter(|c| c.ignorable == ignorable) {
            out.push(Arc::new(HttpExtender::new(c).map_err(|e| format!("extender {}: {e}", c.url_prefix))?));
        }
    }
    Ok(out)
}

/// The extended resources some extender manages with `ignoredByScheduler: true`, in extender
/// order (upstream `scheduler.go` buildExtenders): the extender answers for them, so
/// NodeResourcesFit must not count them.
pub fn ignored_extended_resources(cfgs: &[config::Extender]) -> Vec<String> {
    cfgs.iter()
        .flat_map(|c| c.managed_resources.iter())
        .filter(|r| r.ignored_by_scheduler)
        .map(|r| r.name.clone())
        .collect()
}

/// Makes a profile's NodeResourcesFit ignore `ignored` (upstream replaces the args'
/// `ignoredResources` with the extenders' list, so the extenders' list wins over the profile's).
/// A profile without NodeResourcesFit args is an error, as upstream's.
pub fn apply_ignored_resources(plugin_config: &mut [config::PluginConfig], ignored: &[String]) -> Result<(), String> {
    if ignored.is_empty() {
        return Ok(());
    }
    let fit = plugin_config.iter_mut().find(|pc| pc.name == ksched_plugins::names::NODE_RESOURCES_FIT);
    match fit.map(|pc| &mut pc.args) {
        Some(config::PluginArgs::NodeResourcesFit(args)) => {
            args.ignored_resources = ignored.to_vec();
            Ok(())
        }
        Some(other) => {
            Err(format!("want args to be of type NodeResourcesFitArgs, got {}", other.kind().unwrap_or("none")))
        }
        None => Err("can't find NodeResourcesFitArgs in plugin config".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ksched_framework::PodInfo;

    fn ext(node_cache_capable: bool) -> HttpExtender {
        let cfg: config::Extender =
            serde_json::from_value(json!({"urlPrefix": "http://ext/", "preemptVerb": "preempt",
            "nodeCacheCapable": node_cache_capable}))
            .unwrap();
        HttpExtender::new(&cfg).unwrap()
    }

    fn pod(name: &str, node: &str) -> Arc<PodInfo> {
        let p: Pod = serde_json::from_value(
            json!({"metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
            "spec": {"nodeName": node, "containers": []}}),
        )
        .unwrap();
        Arc::new(PodInfo::new(Arc::new(p)))
    }

    fn snapshot() -> Snapshot {
        let mut ni = NodeInfo::new(Arc::new(serde_json::from_value(json!({"metadata": {"name": "n1"}})).unwrap()));
        ni.add_pod(pod("v1", "n1"));
        ni.add_pod(pod("v2", "n1"));
        Snapshot::from_node_infos(vec![ni])
    }

    fn victims() -> NodeToVictims {
        NodeToVictims::from([("n1".to_string(), Victims { pods: vec![pod("v1", "n1")], num_pdb_violations: 2 })])
    }

    #[test]
    fn preemption_args_send_full_pods_or_only_uids() {
        let preemptor: Pod = serde_json::from_value(json!({"metadata": {"name": "p"}})).unwrap();
        let args = ext(false).preemption_args(&preemptor, &victims()).unwrap();
        assert_eq!(args["Pod"]["metadata"]["name"], "p");
        assert!(args["NodeNameToMetaVictims"].is_null());
        assert_eq!(args["NodeNameToVictims"]["n1"]["NumPDBViolations"], 2);
        assert_eq!(args["NodeNameToVictims"]["n1"]["Pods"][0]["metadata"]["uid"], "uid-v1");

        let args = ext(true).preemption_args(&preemptor, &victims()).unwrap();
        assert!(args["NodeNameToVictims"].is_null());
        assert_eq!(args["NodeNameToMetaVictims"], json!({"n1": {"Pods": [{"UID": "uid-v1"}], "NumPDBViolations": 2}}));
    }

    #[test]
    fn preemption_replies_are_meta_victims_resolved_against_the_snapshot() {
        let e = ext(false);
        let snap = snapshot();
        // keys in any case, as Go decodes them
        let reply = json!({"nodeNameToMetaVictims": {"n1": {"pods": [{"uid": "uid-v2"}, {"UID": "uid-v1"}], "numPDBViolations": 1}}});
        let got = e.decode_preemption_reply(&reply, &snap).unwrap();
        let names: Vec<&str> = got["n1"].pods.iter().map(|p| p.name()).collect();
        assert_eq!(names, ["v2", "v1"], "the extender's order is kept");
        assert_eq!(got["n1"].num_pdb_violations, 1);

        // upstream's result type has neither NodeNameToVictims nor Error: both are ignored
        let reply = json!({"NodeNameToVictims": {"n1": {"Pods": [], "NumPDBViolations": 0}}, "Error": "ignored"});
        assert!(e.decode_preemption_reply(&reply, &snap).unwrap().is_empty());
        assert!(e.decode_preemption_reply(&Value::Null, &snap).unwrap().is_empty());

        let reply = json!({"NodeNameToMetaVictims": {"n1": {"Pods": [{"UID": "nope"}]}}});
        assert_eq!(
            e.decode_preemption_reply(&reply, &snap).unwrap_err(),
            "extender: http://ext claims to preempt pod (UID: &{nope}) on node: n1, but the pod is not found on that node"
        );
        let reply = json!({"NodeNameToMetaVictims": {"n9": {"Pods": []}}});
        assert_eq!(e.decode_preemption_reply(&reply, &snap).unwrap_err(), r#"nodeinfo not found for node name "n9""#);
        assert!(e.decode_preemption_reply(&json!([]), &snap).is_err());
        assert!(e.decode_preemption_reply(&json!({"NodeNameToMetaVictims": []}), &snap).is_err());
    }

    #[test]
    fn process_preemption_needs_a_preempt_verb_and_a_runtime() {
        let cfg: config::Extender = serde_json::from_value(json!({"urlPrefix": "http://ext"})).unwrap();
        let e = HttpExtender::new(&cfg).unwrap();
        let preemptor = Pod::default();
        let err = Extender::process_preemption(&e, &preemptor, &victims(), &snapshot()).unwrap_err();
        assert_eq!(err, "preempt verb is not defined for extender http://ext but run into ProcessPreemption");
        let err = Extender::process_preemption(&ext(false), &preemptor, &victims(), &snapshot()).unwrap_err();
        assert_eq!(err, "no async runtime to call the extender on");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn waiting_on_a_single_threaded_runtime_is_refused_not_deadlocked() {
        let err = Extender::process_preemption(&ext(false), &Pod::default(), &victims(), &snapshot()).unwrap_err();
        assert_eq!(err, "cannot wait for an extender on a single-threaded async runtime");
    }

    #[test]
    fn ignored_managed_resources_replace_the_fit_args_ignored_resources() {
        let extenders: Vec<config::Extender> = serde_json::from_value(json!([
            {"urlPrefix": "http://a", "managedResources": [
                {"name": "example.com/a", "ignoredByScheduler": true}, {"name": "example.com/kept"}]},
            {"urlPrefix": "http://b", "managedResources": [{"name": "example.com/b", "ignoredByScheduler": true}]}]))
        .unwrap();
        let ignored = ignored_extended_resources(&extenders);
        assert_eq!(ignored, ["example.com/a", "example.com/b"]);

        let mut cfg = config::default_config();
        let profile = &mut cfg.profiles[0];
        let fit_args =
            |pcs: &[config::PluginConfig]| match &pcs.iter().find(|p| p.name == "NodeResourcesFit").unwrap().args {
                config::PluginArgs::NodeResourcesFit(a) => a.ignored_resources.clone(),
                other => panic!("{other:?}"),
            };
        if let config::PluginArgs::NodeResourcesFit(a) =
            &mut profile.plugin_config.iter_mut().find(|p| p.name == "NodeResourcesFit").unwrap().args
        {
            a.ignored_resources = vec!["example.com/profile".into()];
        }
        apply_ignored_resources(&mut profile.plugin_config, &[]).unwrap();
        assert_eq!(fit_args(&profile.plugin_config), ["example.com/profile"]);
        apply_ignored_resources(&mut profile.plugin_config, &ignored).unwrap();
        assert_eq!(fit_args(&profile.plugin_config), ["example.com/a", "example.com/b"]);

        profile.plugin_config.retain(|p| p.name != "NodeResourcesFit");
        assert_eq!(
            apply_ignored_resources(&mut profile.plugin_config, &ignored).unwrap_err(),
            "can't find NodeResourcesFitArgs in plugin config"
        );
    }
}
