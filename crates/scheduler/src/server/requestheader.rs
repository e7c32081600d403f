//! Front-proxy authentication (upstream's `authentication/request/headerrequest`): a request
//! whose client certificate chains to the request-header CA, with a common name in the allowed
//! list when there is one, is the user its `X-Remote-User`-style headers name. The header names
//! and allowed names come from the `--requestheader-*` flags, or from the `requestheader-*` keys
//! of `kube-system/extension-apiserver-authentication`, kept current by the
//! `RequestHeaderAuthRequestController` queue.

use std::collections::BTreeMap;
use std::sync::Arc;

use http::HeaderMap;
use k8s_openapi::api::core::v1::ConfigMap;
use parking_lot::RwLock;
use rustls::pki_types::CertificateDer;
use tokio::task::JoinHandle;

use super::auth::UserInfo;
use super::dynamiccertificates::{CaContentProvider, ConfigMapInformer};
use super::workqueue::WorkQueue;

/// The header and client names front-proxy authentication uses.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct RequestHeaderBundle {
    /// Headers naming the user (the first non-empty one wins).
    pub username_headers: Vec<String>,
    /// Headers carrying the user's UID.
    pub uid_headers: Vec<String>,
    /// Headers listing groups (every value of each).
    pub group_headers: Vec<String>,
    /// Prefixes of headers carrying extra attributes.
    pub extra_header_prefixes: Vec<String>,
    /// Client certificate common names allowed to assert users; empty allows any.
    pub allowed_client_names: Vec<String>,
}

/// The ConfigMap keys of each field.
const USERNAME_KEY: &str = "requestheader-username-headers";
const UID_KEY: &str = "requestheader-uid-headers";
const GROUP_KEY: &str = "requestheader-group-headers";
const EXTRA_KEY: &str = "requestheader-extra-headers-prefix";
const ALLOWED_NAMES_KEY: &str = "requestheader-allowed-names";

/// A JSON array of strings; empty means none.
fn deserialize_strings(s: Option<&String>) -> Result<Vec<String>, String> {
    match s.map(String::as_str) {
        None | Some("") => Ok(Vec::new()),
        Some(s) => serde_json::from_str(s).map_err(|e| format!("{e}")),
    }
}

impl RequestHeaderBundle {
    fn from_configmap(cm: &ConfigMap) -> Result<Self, String> {
        let data = cm.data.clone().unwrap_or_default();
        Ok(RequestHeaderBundle {
            username_headers: deserialize_strings(data.get(USERNAME_KEY))?,
            uid_headers: deserialize_strings(data.get(UID_KEY))?,
            group_headers: deserialize_strings(data.get(GROUP_KEY))?,
            extra_header_prefixes: deserialize_strings(data.get(EXTRA_KEY))?,
            allowed_client_names: deserialize_strings(data.get(ALLOWED_NAMES_KEY))?,
        })
    }
}

/// Keeps the [`RequestHeaderBundle`] of the authentication ConfigMap current (upstream's
/// `RequestHeaderAuthRequestController`).
pub(crate) struct RequestHeaderAuthRequestController {
    informer: Arc<ConfigMapInformer>,
    bundle: RwLock<Option<Arc<RequestHeaderBundle>>>,
    queue: WorkQueue,
}

impl RequestHeaderAuthRequestController {
    /// A controller of `informer`'s object (fed by its events once running).
    pub(crate) fn new(informer: Arc<ConfigMapInformer>) -> Arc<Self> {
        Arc::new(RequestHeaderAuthRequestController {
            bundle: RwLock::new(None),
            queue: WorkQueue::named("RequestHeaderAuthRequestController"),
            informer,
        })
    }

    /// The current names (empty until the ConfigMap was read).
    pub(crate) fn current(&self) -> Arc<RequestHeaderBundle> {
        self.bundle.read().clone().unwrap_or_default()
    }

    fn sync_configmap(&self, cm: &ConfigMap) -> Result<(), String> {
        let bundle = RequestHeaderBundle::from_configmap(cm)?;
        if self.bundle.read().as_deref() == Some(&bundle) {
            return Ok(());
        }
        *self.bundle.write() = Some(Arc::new(bundle));
        tracing::debug!("Loaded a new request header values for RequestHeaderAuthRequestController");
        Ok(())
    }

    fn sync(&self) -> Result<(), String> {
        let cm = self.informer.get().ok_or_else(|| {
            format!("configmap \"{}\" not found", super::dynamiccertificates::AUTHENTICATION_CONFIGMAP_NAME)
        })?;
        self.sync_configmap(&cm)
    }

    /// Reads the ConfigMap now. A missing ConfigMap is fine (nothing is configured); being
    /// forbidden to read it or failing is an error the caller may tolerate.
    pub(crate) async fn run_once(&self) -> Result<(), String> {
        match self.informer.get_now().await {
            Ok(Some(cm)) => self.sync_configmap(&cm),
            Ok(None) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 403 => {
                tracing::warn!(
                    "Unable to get configmap/{} in {}.  Usually fixed by 'kubectl create rolebinding -n {} \
                     ROLEBINDING_NAME --role=extension-apiserver-authentication-reader \
                     --serviceaccount=YOUR_NS:YOUR_SA'",
                    super::dynamiccertificates::AUTHENTICATION_CONFIGMAP_NAME,
                    super::dynamiccertificates::AUTHENTICATION_CONFIGMAP_NAMESPACE,
                    super::dynamiccertificates::AUTHENTICATION_CONFIGMAP_NAMESPACE,
                );
                Err(s.message)
            }
            Err(e) => Err(e.to_string()),
        }
    }

    /// Subscribes to the informer's events and starts the worker once the informer synced
    /// (upstream rechecks only on events).
    pub(crate) fn run(self: &Arc<Self>) -> JoinHandle<()> {
        let (queue, key) = (self.queue.clone(), self.informer.key());
        self.informer.add_handler(Arc::new(move || queue.add(&key)));
        let this = self.clone();
        tokio::spawn(async move {
            this.informer.wait_synced().await;
            while let Some(key) = this.queue.get().await {
                match this.sync() {
                    Ok(()) => this.queue.forget(&key),
                    Err(e) => {
                        tracing::error!("{key:?} failed with : {e}");
                        this.queue.add_rate_limited(&key);
                    }
                }
                this.queue.done(&key);
            }
        })
    }
}

/// Where the header names come from.
pub(crate) enum HeaderSource {
    /// The `--requestheader-*` flags.
    Static(RequestHeaderBundle),
    /// The authentication ConfigMap.
    Dynamic(Arc<RequestHeaderAuthRequestController>),
}

/// The front-proxy authenticator.
pub(crate) struct RequestHeaderAuthenticator {
    ca: Arc<dyn CaContentProvider>,
    headers: HeaderSource,
}

/// The first non-empty value of the first listed header that has one.
fn header_value(headers: &HeaderMap, names: &[String]) -> Option<String> {
    names
        .iter()
        .map(|n| n.trim())
        .filter(|n| !n.is_empty())
        .find_map(|n| headers.get(n).and_then(|v| v.to_str().ok()).filter(|v| !v.is_empty()).map(str::to_string))
}

/// Every non-blank value of every listed header.
fn all_header_values(headers: &HeaderMap, names: &[String]) -> Vec<String> {
    names
        .iter()
        .map(|n| n.trim())
        .filter(|n| !n.is_empty())
        .flat_map(|n| headers.get_all(n).iter())
        .filter_map(|v| v.to_str().ok())
        .filter(|v| !v.trim().is_empty())
        .map(str::to_string)
        .collect()
}

/// Percent-decodes an extra key (Go's `url.PathUnescape`), keeping it as is when malformed.
fn unescape_extra_key(key: &str) -> String {
    let bytes = key.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
            match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                Some(b) => {
                    out.push(b);
                    i += 3;
                    continue;
                }
                None => return key.to_string(),
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|_| key.to_string())
}

/// Extra attributes: headers starting with a prefix (case-insensitively); the rest of the name,
/// lowercased and unescaped, is the key.
fn extra(headers: &HeaderMap, prefixes: &[String]) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for prefix in prefixes.iter().map(|p| p.trim().to_ascii_lowercase()).filter(|p| !p.is_empty()) {
        for (name, value) in headers {
            // HeaderMap names are lowercase already.
            let Some(rest) = name.as_str().strip_prefix(prefix.as_str()) else { continue };
            if let Ok(v) = value.to_str() {
                out.entry(unescape_extra_key(rest)).or_default().push(v.to_string());
            }
        }
    }
    out
}

impl RequestHeaderAuthenticator {
    /// Trusts users asserted by clients whose certificate chains to `ca`.
    pub(crate) fn new(ca: Arc<dyn CaContentProvider>, headers: HeaderSource) -> Self {
        RequestHeaderAuthenticator { ca, headers }
    }

    /// `Ok(None)`: not a front-proxy request (no certificate, no CA yet, no user header);
    /// `Err`: a certificate this authenticator does not trust.
    pub(crate) fn authenticate(
        &self,
        chain: Option<&[CertificateDer<'static>]>,
        headers: &HeaderMap,
    ) -> Result<Option<UserInfo>, String> {
        let Some(chain) = chain.filter(|c| !c.is_empty()) else { return Ok(None) };
        let Some(ca) = self.ca.current() else { return Ok(None) };
        ca.verify(chain)?;
        let names = match &self.headers {
            HeaderSource::Static(b) => Arc::new(b.clone()),
            HeaderSource::Dynamic(c) => c.current(),
        };
        if !names.allowed_client_names.is_empty() {
            let cn = super::auth::common_name(&chain[0]).unwrap_or_default();
            if !names.allowed_client_names.contains(&cn) {
                return Err(format!("x509: subject with cn={cn} is not in the allowed list"));
            }
        }
        let Some(name) = header_value(headers, &names.username_headers) else { return Ok(None) };
        Ok(Some(UserInfo {
            name,
            uid: header_value(headers, &names.uid_headers).unwrap_or_default(),
            groups: all_header_values(headers, &names.group_headers),
            extra: extra(headers, &names.extra_header_prefixes),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(http::HeaderName::from_bytes(k.as_bytes()).unwrap(), v.parse().unwrap());
        }
        h
    }

    #[test]
    fn users_groups_and_extras_come_from_the_configured_headers() {
        let h = headers(&[
            ("X-Remote-User", ""),
            ("X-Other-User", "jane"),
            ("X-Remote-Group", "a"),
            ("X-Remote-Group", " "),
            ("X-Remote-Group", "b"),
            ("X-Remote-Extra-Scopes", "s1"),
            ("x-remote-extra-scopes", "s2"),
            ("X-Remote-Extra-Example.com%2fkey", "v"),
        ]);
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(header_value(&h, &names(&["x-remote-user", " ", "x-other-user"])), Some("jane".into()));
        assert_eq!(header_value(&h, &names(&["x-remote-user"])), None);
        assert_eq!(all_header_values(&h, &names(&["X-Remote-Group"])), vec!["a", "b"]);
        let extra = extra(&h, &names(&["X-Remote-Extra-"]));
        assert_eq!(extra.get("scopes"), Some(&vec!["s1".to_string(), "s2".to_string()]));
        assert_eq!(extra.get("example.com/key"), Some(&vec!["v".to_string()]));
        assert_eq!(unescape_extra_key("a%zzb"), "a%zzb");
    }

    #[test]
    fn configmap_values_are_json_string_arrays() {
        let cm: ConfigMap = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "extension-apiserver-authentication", "namespace": "kube-system"},
            "data": {
                "requestheader-username-headers": "[\"X-Remote-User\"]",
                "requestheader-group-headers": "[\"X-Remote-Group\"]",
                "requestheader-extra-headers-prefix": "[\"X-Remote-Extra-\"]",
                "requestheader-allowed-names": "[\"front-proxy-client\"]",
            }
        }))
        .unwrap();
        let b = RequestHeaderBundle::from_configmap(&cm).unwrap();
        assert_eq!(b.username_headers, vec!["X-Remote-User"]);
        assert!(b.uid_headers.is_empty());
        assert_eq!(b.allowed_client_names, vec!["front-proxy-client"]);
        let mut bad = cm.clone();
        bad.data.as_mut().unwrap().insert(UID_KEY.into(), "not json".into());
        assert!(RequestHeaderBundle::from_configmap(&bad).is_err());
    }
}
