//! Certificates that change while serving, as upstream's `apiserver/pkg/server/dynamiccertificates`
//! reloads them: CA bundles from a file (`--client-ca-file`, `--requestheader-client-ca-file`) or
//! from a key of `kube-system/extension-apiserver-authentication`, the serving certificate from
//! `--tls-cert-file`/`--tls-private-key-file`, and the controller that rebuilds the TLS
//! configuration when any of them changes. Each runs on a work queue named as upstream's
//! (`DynamicCABundle-<purpose>`, `DynamicConfigMapCABundle-<purpose>`,
//! `DynamicServingCertificateController`), rechecks every minute, and files are also checked
//! every second for a changed size or modification time (upstream watches them with fsnotify).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::Context as _;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::watcher;
use kube::runtime::WatchStreamExt as _;
use parking_lot::{Mutex, RwLock};
use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::tls::{Identity, TlsMinVersion};
use super::workqueue::WorkQueue;

/// Upstream's `FileRefreshDuration`: every controller re-reads its source this often.
pub(crate) const REFRESH_PERIOD: Duration = Duration::from_secs(60);
/// How often files are checked for a change of size or modification time.
const FILE_POLL_PERIOD: Duration = Duration::from_secs(1);
/// The only key the single-item controllers queue.
const WORK_ITEM_KEY: &str = "key";

/// The ConfigMap the delegated authentication options are published in.
pub(crate) const AUTHENTICATION_CONFIGMAP_NAMESPACE: &str = "kube-system";
/// Its name.
pub(crate) const AUTHENTICATION_CONFIGMAP_NAME: &str = "extension-apiserver-authentication";

/// Called when a provider's content changed (upstream's `Listener.Enqueue`).
pub(crate) type Listener = Arc<dyn Fn() + Send + Sync>;

#[derive(Default)]
struct Listeners(Mutex<Vec<Listener>>);

impl Listeners {
    fn add(&self, l: Listener) {
        self.0.lock().push(l);
    }
    fn notify(&self) {
        for l in self.0.lock().clone() {
            l();
        }
    }
}

/// A parsed CA bundle and a verifier of client certificates against it.
pub(crate) struct CaBundle {
    pem: Vec<u8>,
    certs: Vec<CertificateDer<'static>>,
    verifier: Arc<dyn ClientCertVerifier>,
}

impl std::fmt::Debug for CaBundle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaBundle").field("certs", &self.certs.len()).finish_non_exhaustive()
    }
}

impl CaBundle {
    /// Parses PEM certificates; fails on an empty or unparsable bundle.
    pub(crate) fn parse(pem: &[u8]) -> anyhow::Result<Self> {
        use rustls::pki_types::pem::PemObject;
        let certs = CertificateDer::pem_slice_iter(pem).collect::<Result<Vec<_>, _>>().context("parsing CA bundle")?;
        anyhow::ensure!(!certs.is_empty(), "no certificate in CA bundle");
        let mut roots = rustls::RootCertStore::empty();
        for c in &certs {
            roots.add(c.clone()).context("adding a CA certificate")?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .context("building a client certificate verifier")?;
        Ok(CaBundle { pem: pem.to_vec(), certs, verifier })
    }

    /// Verifies a client certificate chain (leaf first) against the bundle, for client
    /// authentication (x509's `ExtKeyUsageClientAuth`).
    pub(crate) fn verify(&self, chain: &[CertificateDer<'static>]) -> Result<(), String> {
        let (leaf, intermediates) = chain.split_first().ok_or("no client certificate")?;
        self.verifier
            .verify_client_cert(leaf, intermediates, UnixTime::now())
            .map(|_| ())
            .map_err(|e| format!("verifying certificate {} failed: {e}", certificate_identifier(leaf)))
    }

    fn subjects(&self) -> Vec<DistinguishedName> {
        self.certs
            .iter()
            .filter_map(|c| {
                let (_, cert) = x509_parser::parse_x509_certificate(c.as_ref()).ok()?;
                Some(DistinguishedName::from(cert.subject().as_raw().to_vec()))
            })
            .collect()
    }
}

/// Upstream's `certificateIdentifier`: serial number and key identifiers of a certificate.
pub(crate) fn certificate_identifier(der: &CertificateDer<'_>) -> String {
    let Ok((_, cert)) = x509_parser::parse_x509_certificate(der.as_ref()) else { return "<unparsable>".into() };
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    let mut id = format!("SN={}", cert.tbs_certificate.serial);
    for ext in cert.extensions() {
        match ext.parsed_extension() {
            x509_parser::extensions::ParsedExtension::SubjectKeyIdentifier(k) => {
                id.push_str(&format!(", SKID={}", hex(k.0)))
            }
            x509_parser::extensions::ParsedExtension::AuthorityKeyIdentifier(a) => {
                if let Some(k) = &a.key_identifier {
                    id.push_str(&format!(", AKID={}", hex(k.0)));
                }
            }
            _ => {}
        }
    }
    id
}

/// Something that provides a CA bundle that may change (upstream's `CAContentProvider`).
pub(crate) trait CaContentProvider: Send + Sync {
    /// Identifies the provider in logs.
    fn name(&self) -> String;
    /// The current bundle; `None` until one could be loaded (nothing verifies then).
    fn current(&self) -> Option<Arc<CaBundle>>;
    /// Registers a listener notified after each change.
    fn add_listener(&self, listener: Listener);
}

/// Several providers as one, for the TLS configuration (upstream's `unionCAContent`).
pub(crate) struct UnionCa(pub Vec<Arc<dyn CaContentProvider>>);

impl UnionCa {
    /// The current bundles of every member that has one.
    pub(crate) fn bundles(&self) -> Vec<Arc<CaBundle>> {
        self.0.iter().filter_map(|p| p.current()).collect()
    }
    fn name(&self) -> String {
        self.0.iter().map(|p| p.name()).collect::<Vec<_>>().join(",")
    }
    fn add_listener(&self, l: Listener) {
        for p in &self.0 {
            p.add_listener(l.clone());
        }
    }
}

/// Stores `pem` in `slot` when it differs from what is there; true when it changed.
fn store_if_changed(slot: &RwLock<Option<Arc<CaBundle>>>, pem: &[u8]) -> anyhow::Result<bool> {
    if slot.read().as_ref().is_some_and(|b| b.pem == pem) {
        return Ok(false);
    }
    let bundle = CaBundle::parse(pem)?;
    *slot.write() = Some(Arc::new(bundle));
    Ok(true)
}

/// A controller's worker: each queued key is synced; failures come back with back-off.
async fn work(queue: WorkQueue, sync: impl Fn() -> Result<(), String>) {
    while let Some(key) = queue.get().await {
        match sync() {
            Ok(()) => queue.forget(&key),
            Err(e) => {
                tracing::error!("{key:?} failed with : {e}");
                queue.add_rate_limited(&key);
            }
        }
        queue.done(&key);
    }
}

fn spawn_worker(queue: WorkQueue, sync: impl Fn() -> Result<(), String> + Send + 'static) -> JoinHandle<()> {
    tokio::spawn(work(queue, sync))
}

/// Queues `key` now and then every [`REFRESH_PERIOD`].
async fn refresh(queue: WorkQueue, key: &'static str) {
    let mut tick = tokio::time::interval(REFRESH_PERIOD);
    loop {
        tick.tick().await;
        queue.add(key);
    }
}

fn spawn_refresh(queue: WorkQueue, key: &'static str) -> JoinHandle<()> {
    tokio::spawn(refresh(queue, key))
}

/// Size and modification time of a file, to notice changes between reads.
fn file_stamp(path: &Path) -> Option<(u64, Option<SystemTime>)> {
    std::fs::metadata(path).ok().map(|m| (m.len(), m.modified().ok()))
}

/// Queues `key` whenever one of `paths` changes size or modification time.
fn spawn_file_poll(queue: WorkQueue, key: &'static str, paths: Vec<PathBuf>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let stamps = |paths: &[PathBuf]| paths.iter().map(|p| file_stamp(p)).collect::<Vec<_>>();
        let mut last = stamps(&paths);
        let mut tick = tokio::time::interval(FILE_POLL_PERIOD);
        loop {
            tick.tick().await;
            let now = stamps(&paths);
            if now != last {
                last = now;
                queue.add(key);
            }
        }
    })
}

/// A CA bundle read from a file and re-read when it changes (upstream's `DynamicFileCAContent`).
pub(crate) struct DynamicFileCa {
    name: String,
    path: PathBuf,
    bundle: RwLock<Option<Arc<CaBundle>>>,
    listeners: Listeners,
    queue: WorkQueue,
}

impl DynamicFileCa {
    /// Loads `path` (it must hold a valid bundle now); `purpose` names the queue
    /// `DynamicCABundle-<purpose>`.
    pub(crate) fn new(purpose: &str, path: &Path) -> anyhow::Result<Arc<Self>> {
        let ca = DynamicFileCa {
            name: format!("{purpose}::{}", path.display()),
            path: path.to_path_buf(),
            bundle: RwLock::new(None),
            listeners: Listeners::default(),
            queue: WorkQueue::named(&format!("DynamicCABundle-{purpose}")),
        };
        ca.load().map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(Arc::new(ca))
    }

    fn load(&self) -> Result<(), String> {
        let pem = std::fs::read(&self.path).map_err(|e| format!("reading {}: {e}", self.path.display()))?;
        if pem.is_empty() {
            return Err(format!("missing content for CA bundle {:?}", self.name));
        }
        match store_if_changed(&self.bundle, &pem) {
            Ok(true) => {
                tracing::info!(name = %self.name, "Loaded a new CA Bundle and Verifier");
                self.listeners.notify();
                Ok(())
            }
            Ok(false) => Ok(()),
            Err(e) => Err(format!("{}: {e:#}", self.name)),
        }
    }

    /// Starts the worker, the periodic recheck and the file watch.
    pub(crate) fn run(self: &Arc<Self>) -> Vec<JoinHandle<()>> {
        let this = self.clone();
        vec![
            spawn_worker(self.queue.clone(), move || this.load()),
            spawn_refresh(self.queue.clone(), WORK_ITEM_KEY),
            spawn_file_poll(self.queue.clone(), WORK_ITEM_KEY, vec![self.path.clone()]),
        ]
    }
}

impl CaContentProvider for DynamicFileCa {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn current(&self) -> Option<Arc<CaBundle>> {
        self.bundle.read().clone()
    }
    fn add_listener(&self, listener: Listener) {
        self.listeners.add(listener);
    }
}

/// One ConfigMap, watched (upstream's per-controller single-object informers share this one).
pub(crate) struct ConfigMapInformer {
    api: kube::Api<ConfigMap>,
    namespace: String,
    name: String,
    current: RwLock<Option<Arc<ConfigMap>>>,
    handlers: Listeners,
    synced: watch::Sender<bool>,
}

impl ConfigMapInformer {
    /// An informer of `namespace/name` (not started).
    pub(crate) fn new(client: kube::Client, namespace: &str, name: &str) -> Arc<Self> {
        Arc::new(ConfigMapInformer {
            api: kube::Api::namespaced(client, namespace),
            namespace: namespace.into(),
            name: name.into(),
            current: RwLock::new(None),
            handlers: Listeners::default(),
            synced: watch::channel(false).0,
        })
    }

    /// `namespace/name`, the key controllers queue for events (upstream's `keyFn`).
    pub(crate) fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The cached object (after the first list).
    pub(crate) fn get(&self) -> Option<Arc<ConfigMap>> {
        self.current.read().clone()
    }

    /// Reads the object from the API server now (controllers prime themselves with it).
    pub(crate) async fn get_now(&self) -> Result<Option<ConfigMap>, kube::Error> {
        self.api.get_opt(&self.name).await
    }

    /// Registers a handler called on every add, update and delete.
    pub(crate) fn add_handler(&self, handler: Listener) {
        self.handlers.add(handler);
    }

    /// Waits until the first list completed.
    pub(crate) async fn wait_synced(&self) {
        let mut rx = self.synced.subscribe();
        let _ = rx.wait_for(|s| *s).await;
    }

    fn set(&self, cm: Option<ConfigMap>) {
        *self.current.write() = cm.map(Arc::new);
        self.handlers.notify();
    }

    /// Lists and watches the object until aborted.
    pub(crate) fn run(self: &Arc<Self>) -> JoinHandle<()> {
        use futures::StreamExt as _;
        let this = self.clone();
        tokio::spawn(async move {
            let cfg = watcher::Config::default().fields(&format!("metadata.name={}", this.name));
            let mut events = watcher(this.api.clone(), cfg).default_backoff().boxed();
            let mut relisted: Option<ConfigMap> = None;
            while let Some(event) = events.next().await {
                match event {
                    Ok(watcher::Event::Init) => relisted = None,
                    Ok(watcher::Event::InitApply(cm)) => relisted = Some(cm),
                    Ok(watcher::Event::InitDone) => {
                        this.set(relisted.take());
                        this.synced.send_replace(true);
                    }
                    Ok(watcher::Event::Apply(cm)) => this.set(Some(cm)),
                    Ok(watcher::Event::Delete(_)) => this.set(None),
                    Err(e) => tracing::warn!("failed to watch configmap {}/{}: {e}", this.namespace, this.name),
                }
            }
        })
    }
}

/// A CA bundle from a key of a ConfigMap (upstream's `ConfigMapCAController`).
pub(crate) struct ConfigMapCa {
    name: String,
    key: String,
    informer: Arc<ConfigMapInformer>,
    bundle: RwLock<Option<Arc<CaBundle>>>,
    listeners: Listeners,
    queue: WorkQueue,
}

impl ConfigMapCa {
    /// The bundle under `key` of the informer's ConfigMap; `purpose` names the queue
    /// `DynamicConfigMapCABundle-<purpose>`.
    pub(crate) fn new(purpose: &str, key: &str, informer: Arc<ConfigMapInformer>) -> Arc<Self> {
        Arc::new(ConfigMapCa {
            name: format!("{purpose}::{}::{}", informer.key().replace('/', "::"), key),
            key: key.into(),
            bundle: RwLock::new(None),
            listeners: Listeners::default(),
            queue: WorkQueue::named(&format!("DynamicConfigMapCABundle-{purpose}")),
            informer,
        })
    }

    fn load_from(&self, cm: Option<&ConfigMap>) -> Result<(), String> {
        let cm = cm.ok_or_else(|| format!("configmap {:?} not found", self.informer.name))?;
        let pem = cm.data.as_ref().and_then(|d| d.get(&self.key)).map(String::as_bytes).unwrap_or_default();
        if pem.is_empty() {
            return Err(format!("missing content for CA bundle {:?}", self.name));
        }
        match store_if_changed(&self.bundle, pem) {
            Ok(true) => {
                tracing::info!(name = %self.name, "Loaded a new CA Bundle and Verifier");
                self.listeners.notify();
                Ok(())
            }
            Ok(false) => Ok(()),
            Err(e) => Err(format!("{}: {e:#}", self.name)),
        }
    }

    /// Loads the bundle from the API server now; failures are ignored, as upstream's `RunOnce`
    /// (nothing is trusted until a bundle loads).
    pub(crate) async fn run_once(&self) {
        match self.informer.get_now().await {
            Ok(cm) => {
                let _ = self.load_from(cm.as_ref());
            }
            Err(e) => tracing::debug!("reading {}: {e}", self.name),
        }
    }

    /// Subscribes to the informer's events and starts the worker (once the informer synced)
    /// and the periodic recheck.
    pub(crate) fn run(self: &Arc<Self>) -> Vec<JoinHandle<()>> {
        let (queue, item) = (self.queue.clone(), self.informer.key());
        self.informer.add_handler(Arc::new(move || queue.add(&item)));
        let this = self.clone();
        let worker = tokio::spawn(async move {
            this.informer.wait_synced().await;
            let queue = this.queue.clone();
            work(queue, move || this.load_from(this.informer.get().as_deref())).await;
        });
        let refresher = {
            let (queue, this) = (self.queue.clone(), self.clone());
            tokio::spawn(async move {
                this.informer.wait_synced().await;
                refresh(queue, WORK_ITEM_KEY).await;
            })
        };
        vec![worker, refresher]
    }
}

impl CaContentProvider for ConfigMapCa {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn current(&self) -> Option<Arc<CaBundle>> {
        self.bundle.read().clone()
    }
    fn add_listener(&self, listener: Listener) {
        self.listeners.add(listener);
    }
}

/// The serving certificate and key.
pub(crate) enum ServingCert {
    /// Generated in memory, never changes (upstream's `Generated self signed cert`).
    Static(Arc<Identity>),
    /// From files, reloaded when they change (upstream's `DynamicServingCertKeyContent`).
    Files(Arc<DynamicServingFiles>),
}

impl ServingCert {
    fn current(&self) -> Arc<Identity> {
        match self {
            ServingCert::Static(id) => id.clone(),
            ServingCert::Files(f) => f.current.read().clone(),
        }
    }
    fn name(&self) -> String {
        match self {
            ServingCert::Static(_) => "Generated self signed cert".into(),
            ServingCert::Files(f) => f.name.clone(),
        }
    }
}

/// A serving certificate and key from files.
pub(crate) struct DynamicServingFiles {
    name: String,
    cert: PathBuf,
    key: PathBuf,
    current: RwLock<Arc<Identity>>,
    listeners: Listeners,
    queue: WorkQueue,
}

impl DynamicServingFiles {
    /// Loads the pair (it must be valid now); the queue is `DynamicCABundle-<purpose>`.
    pub(crate) fn new(purpose: &str, cert: &Path, key: &Path) -> anyhow::Result<Arc<Self>> {
        let identity = super::tls::load_identity(cert, key)?;
        Ok(Arc::new(DynamicServingFiles {
            name: format!("{purpose}::{}::{}", cert.display(), key.display()),
            cert: cert.into(),
            key: key.into(),
            current: RwLock::new(Arc::new(identity)),
            listeners: Listeners::default(),
            queue: WorkQueue::named(&format!("DynamicCABundle-{purpose}")),
        }))
    }

    fn load(&self) -> Result<(), String> {
        let identity = super::tls::load_identity(&self.cert, &self.key).map_err(|e| format!("{e:#}"))?;
        if identity.same_as(&self.current.read()) {
            return Ok(());
        }
        *self.current.write() = Arc::new(identity);
        tracing::info!(name = %self.name, "Loaded a new cert/key pair");
        self.listeners.notify();
        Ok(())
    }

    /// Starts the worker, the periodic recheck and the file watch.
    pub(crate) fn run(self: &Arc<Self>) -> Vec<JoinHandle<()>> {
        let this = self.clone();
        vec![
            spawn_worker(self.queue.clone(), move || this.load()),
            spawn_refresh(self.queue.clone(), WORK_ITEM_KEY),
            spawn_file_poll(self.queue.clone(), WORK_ITEM_KEY, vec![self.cert.clone(), self.key.clone()]),
        ]
    }
}

/// The TLS configuration handshakes use now; the controller swaps it.
pub(crate) type CurrentTlsConfig = Arc<RwLock<Arc<rustls::ServerConfig>>>;

/// The CA bundles (PEM) and the serving leaf certificate (DER) a configuration was built from.
type BuiltFrom = (Vec<Vec<u8>>, Vec<u8>);

/// Rebuilds the serving TLS configuration from the client CAs and the serving certificate
/// (upstream's `DynamicServingCertificateController`).
pub(crate) struct DynamicServingCertificateController {
    client_ca: Option<UnionCa>,
    serving: ServingCert,
    min_version: TlsMinVersion,
    current: CurrentTlsConfig,
    /// What the current configuration was built from.
    built_from: Mutex<Option<BuiltFrom>>,
    queue: WorkQueue,
}

impl DynamicServingCertificateController {
    /// Builds the first configuration now and subscribes to the providers' changes.
    pub(crate) fn new(
        client_ca: Option<UnionCa>,
        serving: ServingCert,
        min_version: TlsMinVersion,
    ) -> anyhow::Result<Arc<Self>> {
        let first = build_tls_config(client_ca.as_ref(), &serving.current(), min_version)?;
        let c = Arc::new(DynamicServingCertificateController {
            client_ca,
            serving,
            min_version,
            current: Arc::new(RwLock::new(Arc::new(first))),
            built_from: Mutex::new(None),
            queue: WorkQueue::named("DynamicServingCertificateController"),
        });
        c.sync_certs().map_err(anyhow::Error::msg)?;
        let listener: Listener = {
            let queue = c.queue.clone();
            Arc::new(move || queue.add(WORK_ITEM_KEY))
        };
        if let Some(ca) = &c.client_ca {
            ca.add_listener(listener.clone());
        }
        if let ServingCert::Files(f) = &c.serving {
            f.listeners.add(listener);
        }
        Ok(c)
    }

    /// The configuration handshakes read.
    pub(crate) fn current(&self) -> CurrentTlsConfig {
        self.current.clone()
    }

    fn sync_certs(&self) -> Result<(), String> {
        let bundles = self.client_ca.as_ref().map(UnionCa::bundles).unwrap_or_default();
        let identity = self.serving.current();
        let content = (
            bundles.iter().map(|b| b.pem.clone()).collect::<Vec<_>>(),
            identity.chain.first().map(|c| c.to_vec()).unwrap_or_default(),
        );
        let mut built_from = self.built_from.lock();
        if built_from.as_ref() == Some(&content) {
            return Ok(());
        }
        let cfg =
            build_tls_config(self.client_ca.as_ref(), &identity, self.min_version).map_err(|e| format!("{e:#}"))?;
        *self.current.write() = Arc::new(cfg);
        if let Some(ca) = &self.client_ca {
            for (i, cert) in bundles.iter().flat_map(|b| b.certs.iter()).enumerate() {
                tracing::info!(index = i, cert_name = %ca.name(), cert_detail = %human_cert_detail(cert), "Loaded client CA");
            }
        }
        if let Some(leaf) = identity.chain.first() {
            tracing::info!(cert_name = %self.serving.name(), cert_detail = %human_cert_detail(leaf), "Loaded serving cert");
        }
        *built_from = Some(content);
        Ok(())
    }

    /// Starts the worker and the periodic recheck.
    pub(crate) fn run(self: &Arc<Self>) -> Vec<JoinHandle<()>> {
        let this = self.clone();
        vec![
            spawn_worker(self.queue.clone(), move || this.sync_certs()),
            spawn_refresh(self.queue.clone(), WORK_ITEM_KEY),
        ]
    }
}

/// A short description of a certificate for logs (after upstream's `GetHumanCertDetail`).
fn human_cert_detail(der: &CertificateDer<'_>) -> String {
    let Ok((_, cert)) = x509_parser::parse_x509_certificate(der.as_ref()) else { return "<unparsable>".into() };
    format!(
        "{:?} issuer={:?} ({} to {})",
        cert.subject().to_string(),
        cert.issuer().to_string(),
        cert.validity().not_before,
        cert.validity().not_after,
    )
}

/// The rustls configuration: the serving certificate, and with client CAs a request for a
/// client certificate that is not verified during the handshake (Go's `RequestClientCert`):
/// the authenticators verify it against the CA they trust.
fn build_tls_config(
    client_ca: Option<&UnionCa>,
    identity: &Identity,
    min_version: TlsMinVersion,
) -> anyhow::Result<rustls::ServerConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions: &[&rustls::SupportedProtocolVersion] = match min_version {
        TlsMinVersion::Tls12 => &[&rustls::version::TLS13, &rustls::version::TLS12],
        TlsMinVersion::Tls13 => &[&rustls::version::TLS13],
    };
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone()).with_protocol_versions(versions)?;
    let builder = match client_ca {
        Some(ca) => {
            let hints = ca.bundles().iter().flat_map(|b| b.subjects()).collect();
            builder.with_client_cert_verifier(Arc::new(RequestClientCert {
                hints,
                algorithms: provider.signature_verification_algorithms,
            }))
        }
        None => builder.with_no_client_auth(),
    };
    let key: PrivateKeyDer<'static> = identity.key.clone_key();
    let mut cfg = builder.with_single_cert(identity.chain.clone(), key).context("serving certificate")?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(cfg)
}

/// Asks for a client certificate, checks the client holds its key, and leaves the chain to the
/// authenticators.
#[derive(Debug)]
struct RequestClientCert {
    hints: Vec<DistinguishedName>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ClientCertVerifier for RequestClientCert {
    fn offer_client_auth(&self) -> bool {
        true
    }
    fn client_auth_mandatory(&self) -> bool {
        false
    }
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &self.hints
    }
    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ca(name: &str) -> (rcgen::Issuer<'static, rcgen::KeyPair>, String) {
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        p.distinguished_name.push(rcgen::DnType::CommonName, name);
        let key = rcgen::KeyPair::generate().unwrap();
        let pem = p.self_signed(&key).unwrap().pem();
        (rcgen::Issuer::new(p, key), pem)
    }

    fn leaf(
        issuer: &rcgen::Issuer<'static, rcgen::KeyPair>,
        usage: rcgen::ExtendedKeyUsagePurpose,
    ) -> CertificateDer<'static> {
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name.push(rcgen::DnType::CommonName, "jane");
        p.extended_key_usages = vec![usage];
        p.signed_by(&rcgen::KeyPair::generate().unwrap(), issuer).unwrap().der().clone()
    }

    #[test]
    fn bundles_verify_client_certificates_of_their_cas_only() {
        let (ca1, pem1) = ca("one");
        let (ca2, _) = ca("two");
        let bundle = CaBundle::parse(pem1.as_bytes()).unwrap();
        assert!(bundle.verify(&[leaf(&ca1, rcgen::ExtendedKeyUsagePurpose::ClientAuth)]).is_ok());
        let err = bundle.verify(&[leaf(&ca2, rcgen::ExtendedKeyUsagePurpose::ClientAuth)]).unwrap_err();
        assert!(err.starts_with("verifying certificate SN="), "{err}");
        // A serving-only certificate is not a client certificate.
        assert!(bundle.verify(&[leaf(&ca1, rcgen::ExtendedKeyUsagePurpose::ServerAuth)]).is_err());
        assert!(bundle.verify(&[]).is_err());
        assert_eq!(bundle.subjects().len(), 1);
        assert!(CaBundle::parse(b"").is_err());
        assert!(CaBundle::parse(b"-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n").is_err());
    }

    #[tokio::test]
    async fn the_tls_configuration_follows_the_client_ca() {
        let (_, pem) = ca("client");
        let dir = std::env::temp_dir().join(format!("ksched-dyncerts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ca.crt");
        std::fs::write(&path, &pem).unwrap();
        let file = DynamicFileCa::new("ksched-test", &path).unwrap();
        let identity = Arc::new(super::super::tls::self_signed().unwrap());
        let c = DynamicServingCertificateController::new(
            Some(UnionCa(vec![file.clone()])),
            ServingCert::Static(identity),
            TlsMinVersion::Tls12,
        )
        .unwrap();
        let first = c.current().read().clone();
        // An unchanged bundle changes nothing; a new one rebuilds the configuration.
        file.load().unwrap();
        c.sync_certs().unwrap();
        assert!(Arc::ptr_eq(&first, &c.current().read()));
        let (_, pem2) = ca("client-2");
        std::fs::write(&path, &pem2).unwrap();
        file.load().unwrap();
        c.sync_certs().unwrap();
        assert!(!Arc::ptr_eq(&first, &c.current().read()));
        std::fs::write(&path, "").unwrap();
        assert!(file.load().unwrap_err().contains("missing content for CA bundle"));
        let _ = std::fs::remove_dir_all(dir);
    }
}
