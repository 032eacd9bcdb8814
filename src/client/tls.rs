//! TLS for `https://` endpoints (hosted OpenAI-compatible APIs, servers
//! behind a TLS proxy): rustls, verifying the server's certificate against
//! the system's root certificates. `SSL_CERT_FILE` and `SSL_CERT_DIR` name
//! other roots, as they do for OpenSSL's tools.

use std::sync::{Arc, OnceLock};

use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

/// Why no TLS connection can be made from this machine.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TlsSetupError {
    /// No root certificate could be loaded, so no server can be verified.
    #[error("no trusted root certificate found on this system{0}: install ca-certificates or set SSL_CERT_FILE to a PEM bundle")]
    NoRoots(String),
    /// The TLS library refused its configuration.
    #[error("TLS set-up: {0}")]
    Config(String),
}

/// The client configuration, built at the first TLS connection and kept:
/// loading the system's roots reads many files.
fn config() -> Result<Arc<rustls::ClientConfig>, TlsSetupError> {
    static CONFIG: OnceLock<Result<Arc<rustls::ClientConfig>, TlsSetupError>> = OnceLock::new();
    CONFIG.get_or_init(build_config).clone()
}

fn build_config() -> Result<Arc<rustls::ClientConfig>, TlsSetupError> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = rustls::RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        let why = found
            .errors
            .first()
            .map(|e| format!(" ({e})"))
            .unwrap_or_default();
        return Err(TlsSetupError::NoRoots(why));
    }
    // ring builds with a C compiler alone (aws-lc needs more); it lacks
    // post-quantum key exchange, which load tests of an endpoint do not need.
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsSetupError::Config(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    // The pool speaks HTTP/1.1 only.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// TLS over `tcp` to `host`, its certificate verified for that name.
pub async fn connect(tcp: TcpStream, host: &str) -> std::io::Result<TlsStream<TcpStream>> {
    let config = config().map_err(std::io::Error::other)?;
    let name = ServerName::try_from(host.to_string()).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("`{host}` is not a name TLS can verify: {e}"),
        )
    })?;
    TlsConnector::from(config).connect(name, tcp).await
}
