//! TLS for the secure port: the serving identity (files or an in-memory self-signed pair for
//! `localhost`/`127.0.0.1`), optional client-certificate verification, and a listener that hands
//! finished handshakes to axum together with the verified client identity.

use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use axum::extract::connect_info::Connected;
use axum::serve::IncomingStream;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::{AbortHandle, JoinHandle};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use super::auth::UserInfo;

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Minimum TLS version (`--tls-min-version`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TlsMinVersion {
    /// TLS 1.2 (the server floor).
    #[default]
    Tls12,
    /// TLS 1.3 only.
    Tls13,
}

impl std::str::FromStr for TlsMinVersion {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "" | "VersionTLS12" => Ok(TlsMinVersion::Tls12),
            "VersionTLS13" => Ok(TlsMinVersion::Tls13),
            "VersionTLS10" | "VersionTLS11" => {
                Err(format!("{s} is not supported by this build (minimum is VersionTLS12)"))
            }
            _ => Err(format!("unknown tls version {s:?}: use VersionTLS12 or VersionTLS13")),
        }
    }
}

/// Certificate chain and key.
pub(crate) struct Identity {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
}

/// Reads a PEM certificate chain and private key.
pub(crate) fn load_identity(cert: &Path, key: &Path) -> anyhow::Result<Identity> {
    let chain = CertificateDer::pem_file_iter(cert)
        .with_context(|| format!("reading {}", cert.display()))?
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("parsing {}", cert.display()))?;
    anyhow::ensure!(!chain.is_empty(), "no certificate found in {}", cert.display());
    let key = PrivateKeyDer::from_pem_file(key).with_context(|| format!("reading private key {}", key.display()))?;
    Ok(Identity { chain, key })
}

/// An in-memory self-signed pair: a throw-away CA `localhost-ca@<unix time>` and a serving
/// certificate `localhost@<unix time>` for `localhost` and `127.0.0.1`, like upstream's
/// `GenerateSelfSignedCertKeyWithFixtures` (nothing is written to disk).
pub(crate) fn self_signed() -> anyhow::Result<Identity> {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.distinguished_name.push(DnType::CommonName, format!("localhost-ca@{now}"));
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
    let ca_key = KeyPair::generate()?;
    let ca_cert = ca.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca, ca_key);

    let mut leaf = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])?;
    leaf.distinguished_name.push(DnType::CommonName, format!("localhost@{now}"));
    leaf.use_authority_key_identifier_extension = true;
    leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    leaf.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let leaf_key = KeyPair::generate()?;
    let leaf_cert = leaf.signed_by(&leaf_key, &issuer)?;
    Ok(Identity {
        chain: vec![leaf_cert.der().clone(), ca_cert.der().clone()],
        key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der())),
    })
}

/// Parses PEM CA certificates (a `--client-ca-file` or the `client-ca-file` of the
/// `extension-apiserver-authentication` ConfigMap).
pub(crate) fn parse_ca_bundle(pem: &[u8]) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_slice_iter(pem).collect::<Result<Vec<_>, _>>().context("parsing CA bundle")?;
    anyhow::ensure!(!certs.is_empty(), "no certificate in CA bundle");
    Ok(certs)
}

/// The rustls server configuration. With a client CA, client certificates are requested but
/// optional; presented ones must chain to the CA.
pub(crate) fn server_config(
    identity: Identity,
    client_ca: Option<Vec<CertificateDer<'static>>>,
    min_version: TlsMinVersion,
) -> anyhow::Result<rustls::ServerConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions: &[&rustls::SupportedProtocolVersion] = match min_version {
        TlsMinVersion::Tls12 => &[&rustls::version::TLS13, &rustls::version::TLS12],
        TlsMinVersion::Tls13 => &[&rustls::version::TLS13],
    };
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone()).with_protocol_versions(versions)?;
    let builder = match client_ca {
        Some(cas) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in cas {
                roots.add(c).context("adding client CA")?;
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .allow_unauthenticated()
                .build()
                .context("building the client certificate verifier")?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut cfg = builder.with_single_cert(identity.chain, identity.key).context("serving certificate")?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(cfg)
}

/// What the handler chain knows about a connection.
#[derive(Debug, Clone)]
pub struct PeerInfo {
    /// Remote address.
    pub remote: SocketAddr,
    /// The user of a verified client certificate (CN = user, O = groups).
    pub client_cert_user: Option<UserInfo>,
}

/// User of a verified client certificate: subject CN and Os.
fn cert_user(der: &CertificateDer<'_>) -> Option<UserInfo> {
    let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref()).ok()?;
    let subject = cert.subject();
    let name = subject.iter_common_name().next()?.as_str().ok()?.to_string();
    let groups = subject.iter_organization().filter_map(|o| o.as_str().ok().map(str::to_string)).collect();
    Some(UserInfo { name, uid: String::new(), groups, extra: Default::default() })
}

/// Accepts TCP connections and completes TLS handshakes in the background; axum receives only
/// finished handshakes, so a slow client cannot stall the accept loop.
pub(crate) struct TlsListener {
    local: SocketAddr,
    rx: mpsc::Receiver<(TlsStream<TcpStream>, PeerInfo)>,
    accept_loop: AbortHandle,
}

impl TlsListener {
    /// The listener and its accept loop; awaiting the loop's handle after aborting it guarantees
    /// the socket is closed.
    pub(crate) fn new(tcp: TcpListener, acceptor: TlsAcceptor) -> io::Result<(Self, JoinHandle<()>)> {
        let local = tcp.local_addr()?;
        let (tx, rx) = mpsc::channel(64);
        let task = tokio::spawn(async move {
            loop {
                let (stream, remote) = match tcp.accept().await {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::debug!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let acceptor = acceptor.clone();
                let tx = tx.clone();
                tokio::spawn(async move {
                    let _ = stream.set_nodelay(true);
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => {
                            let client_cert_user =
                                tls.get_ref().1.peer_certificates().and_then(|c| c.first()).and_then(cert_user);
                            let _ = tx.send((tls, PeerInfo { remote, client_cert_user })).await;
                        }
                        Ok(Err(e)) => tracing::debug!(%remote, error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%remote, "TLS handshake timed out"),
                    }
                });
            }
        });
        Ok((TlsListener { local, rx, accept_loop: task.abort_handle() }, task))
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.accept_loop.abort();
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = PeerInfo;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.rx.recv().await {
            Some(conn) => conn,
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        Ok(PeerInfo { remote: self.local, client_cert_user: None })
    }
}

impl Connected<IncomingStream<'_, TlsListener>> for PeerInfo {
    fn connect_info(stream: IncomingStream<'_, TlsListener>) -> Self {
        stream.remote_addr().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_signed_identity_builds_a_server_config() {
        let id = self_signed().unwrap();
        assert_eq!(id.chain.len(), 2);
        let (_, leaf) = x509_parser::parse_x509_certificate(id.chain[0].as_ref()).unwrap();
        let cn = leaf.subject().iter_common_name().next().unwrap().as_str().unwrap().to_string();
        assert!(cn.starts_with("localhost@"), "{cn}");
        server_config(id, None, TlsMinVersion::Tls12).unwrap();
    }

    #[test]
    fn client_cert_subject_maps_to_user_and_groups() {
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name.push(DnType::CommonName, "system:kube-scheduler");
        p.distinguished_name.push(DnType::OrganizationName, "system:masters");
        let key = KeyPair::generate().unwrap();
        let cert = p.self_signed(&key).unwrap();
        let u = cert_user(cert.der()).unwrap();
        assert_eq!(u.name, "system:kube-scheduler");
        assert_eq!(u.groups, vec!["system:masters".to_string()]);
    }

    #[test]
    fn tls_min_version_parses_go_names() {
        assert_eq!("VersionTLS13".parse::<TlsMinVersion>(), Ok(TlsMinVersion::Tls13));
        assert_eq!("".parse::<TlsMinVersion>(), Ok(TlsMinVersion::Tls12));
        assert!("VersionTLS10".parse::<TlsMinVersion>().is_err());
    }
}
