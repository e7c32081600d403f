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

use super::dynamiccertificates::CurrentTlsConfig;

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

impl Identity {
    /// Same certificates and key.
    pub(crate) fn same_as(&self, other: &Identity) -> bool {
        self.chain == other.chain && self.key.secret_der() == other.key.secret_der()
    }
}

/// Reads a PEM certificate chain and the private key of its leaf (a pair that does not match,
/// e.g. half-way through a rotation, is an error).
pub(crate) fn load_identity(cert: &Path, key: &Path) -> anyhow::Result<Identity> {
    let chain = CertificateDer::pem_file_iter(cert)
        .with_context(|| format!("reading {}", cert.display()))?
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("parsing {}", cert.display()))?;
    anyhow::ensure!(!chain.is_empty(), "no certificate found in {}", cert.display());
    let key_der =
        PrivateKeyDer::from_pem_file(key).with_context(|| format!("reading private key {}", key.display()))?;
    let provider = rustls::crypto::ring::default_provider();
    rustls::sign::CertifiedKey::from_der(chain.clone(), key_der.clone_key(), &provider)
        .with_context(|| format!("{} and {} do not form a certificate/key pair", cert.display(), key.display()))?;
    Ok(Identity { chain, key: key_der })
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

/// What the handler chain knows about a connection.
#[derive(Debug, Clone)]
pub struct PeerInfo {
    /// Remote address.
    pub remote: SocketAddr,
    /// The client certificate chain presented in the handshake (leaf first), not yet verified:
    /// the authenticators verify it against the CAs they trust.
    pub client_chain: Option<Arc<[CertificateDer<'static>]>>,
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
    pub(crate) fn new(tcp: TcpListener, config: CurrentTlsConfig) -> io::Result<(Self, JoinHandle<()>)> {
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
                // Each handshake uses the configuration current when it starts.
                let acceptor = TlsAcceptor::from(config.read().clone());
                let tx = tx.clone();
                tokio::spawn(async move {
                    let _ = stream.set_nodelay(true);
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => {
                            let client_chain = tls
                                .get_ref()
                                .1
                                .peer_certificates()
                                .filter(|c| !c.is_empty())
                                .map(|c| c.iter().map(|d| d.clone().into_owned()).collect());
                            let _ = tx.send((tls, PeerInfo { remote, client_chain })).await;
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
        Ok(PeerInfo { remote: self.local, client_chain: None })
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
        assert!(id.same_as(&id));
        assert!(!id.same_as(&self_signed().unwrap()));
    }

    #[test]
    fn tls_min_version_parses_go_names() {
        assert_eq!("VersionTLS13".parse::<TlsMinVersion>(), Ok(TlsMinVersion::Tls13));
        assert_eq!("".parse::<TlsMinVersion>(), Ok(TlsMinVersion::Tls12));
        assert!("VersionTLS10".parse::<TlsMinVersion>().is_err());
    }
}
