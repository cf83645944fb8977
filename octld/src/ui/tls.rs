//! TLS for a UI served beyond loopback (rustls): the certificate `[ui] cert`/`key` name, or
//! one generated once and kept in `$OCTL_HOME/ui/` (self-signed, for the names `[ui] hosts`
//! gives and the listen address; the browser is told its fingerprint to compare).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use octl_proto::AppError;

pub struct Tls {
    pub acceptor: tokio_rustls::TlsAcceptor,
    /// SHA-256 of the leaf certificate, `AB:CD:…`.
    pub fingerprint: String,
}

/// The acceptor for `cert`/`key`, or for the certificate generated under `dir` (made now if
/// it is not there yet) for `names`.
pub fn load(
    cert: Option<&Path>,
    key: Option<&Path>,
    dir: &Path,
    names: &[String],
) -> Result<Tls, AppError> {
    let (cert, key) = match (cert, key) {
        (Some(c), Some(k)) => (c.to_path_buf(), k.to_path_buf()),
        (None, None) => generated(dir, names)?,
        _ => {
            return Err(AppError::invalid(
                "[ui] cert and key: give both (PEM files) or neither (one is generated)",
            ))
        }
    };
    let bad = |what: &str, p: &PathBuf, e: String| {
        AppError::invalid(format!(
            "[ui] {what}: cannot read {} as PEM: {e}",
            p.display()
        ))
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&cert)
        .map_err(|e| bad("cert", &cert, e.to_string()))?
        .collect::<Result<_, _>>()
        .map_err(|e| bad("cert", &cert, e.to_string()))?;
    let Some(leaf) = certs.first() else {
        return Err(bad("cert", &cert, "no certificate in it".into()));
    };
    let fingerprint = ring::digest::digest(&ring::digest::SHA256, leaf.as_ref())
        .as_ref()
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":");
    let key = PrivateKeyDer::from_pem_file(&key).map_err(|e| bad("key", &key, e.to_string()))?;
    // ring, not aws-lc-rs: no C build beyond ring's own. Its provider has no post-quantum
    // key exchange, which rustls now marks deprecated; TLS 1.3 with X25519 is what a
    // person's browser gets here (docs/UI.md).
    #[allow(deprecated)]
    let provider = rustls::crypto::ring::default_provider();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| AppError::invalid(format!("[ui] TLS: {e}")))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| {
            AppError::invalid(format!("[ui] cert and key do not make a TLS identity: {e}"))
        })?;
    Ok(Tls {
        acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
        fingerprint,
    })
}

/// The generated certificate's files, made for `names` if they are not there yet.
fn generated(dir: &Path, names: &[String]) -> Result<(PathBuf, PathBuf), AppError> {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    if cert.exists() && key.exists() {
        return Ok((cert, key));
    }
    let made = rcgen::generate_simple_self_signed(names.to_vec()).map_err(|e| {
        AppError::invalid(format!(
            "[ui] cannot generate a certificate for {names:?}: {e}"
        ))
    })?;
    let io = |e: std::io::Error| {
        AppError::new(
            octl_proto::ErrorKind::IoError,
            format!(
                "cannot write the UI's certificate under {}: {e}",
                dir.display()
            ),
        )
    };
    super::auth::write_private(&key, made.signing_key.serialize_pem().as_bytes()).map_err(io)?;
    super::auth::write_private(&cert, made.cert.pem().as_bytes()).map_err(io)?;
    Ok((cert, key))
}
