//! TLS from PEM files: the HTTP port's server side (its certificate and key; client
//! certificates checked against a CA of its own: mutual TLS) and a client side with a CA and a
//! client certificate of its own (the forward backend's). Both are rustls with ring, TLS 1.2
//! and 1.3, HTTP/1.1 by ALPN. The files are read when histd starts and again at every reload,
//! so certificates rotate without a restart.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{ClientConfig, RootCertStore, ServerConfig};

/// Reads every certificate of a PEM file.
pub fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let bytes = read(path)?;
    let found: Result<Vec<_>, _> = CertificateDer::pem_slice_iter(&bytes).collect();
    match found {
        Ok(found) if !found.is_empty() => Ok(found),
        Ok(_) => Err(format!("{}: no PEM certificate in it", path.display())),
        Err(error) => Err(format!("{}: {error}", path.display())),
    }
}

/// Reads the private key of a PEM file (PKCS#8, PKCS#1 or SEC1).
pub fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    PrivateKeyDer::from_pem_slice(&read(path)?)
        .map_err(|error| format!("{}: no private key read: {error}", path.display()))
}

/// The certificates of a PEM file as trusted roots.
pub fn roots(path: &Path) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    for certificate in certificates(path)? {
        roots.add(certificate).map_err(|error| format!("{}: not a CA certificate: {error}", path.display()))?;
    }
    Ok(roots)
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|error| format!("cannot read {}: {error}", path.display()))
}

fn provider() -> Arc<tokio_rustls::rustls::crypto::CryptoProvider> {
    Arc::new(tokio_rustls::rustls::crypto::ring::default_provider())
}

/// The files of a TLS server (`http.tls`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerFiles {
    /// `certFile`: the server's certificate chain, PEM.
    pub cert: PathBuf,
    /// `keyFile`: its private key, PEM.
    pub key: PathBuf,
    /// `clientCAFile`: client certificates are checked against these roots (mutual TLS).
    pub client_ca: Option<PathBuf>,
    /// `requireClientCert`: a connection without a client certificate that chains to
    /// `client_ca` is refused at the handshake (else it may go on, and present a token).
    pub require_client_cert: bool,
}

/// A server config from `files`.
pub fn server_config(files: &ServerFiles) -> Result<Arc<ServerConfig>, String> {
    let provider = provider();
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|error| format!("TLS settings: {error}"))?;
    let builder = match &files.client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots(ca)?), provider);
            let verifier = if files.require_client_cert { verifier } else { verifier.allow_unauthenticated() };
            let verifier = verifier.build().map_err(|error| format!("{}: {error}", ca.display()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder
        .with_single_cert(certificates(&files.cert)?, private_key(&files.key)?)
        .map_err(|error| format!("{} and {}: {error}", files.cert.display(), files.key.display()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The HTTP port's TLS settings in force (replaced by a reload).
#[derive(Debug)]
pub struct ServerTls {
    config: Mutex<Arc<ServerConfig>>,
}

impl ServerTls {
    /// Reads `files`.
    pub fn new(files: &ServerFiles) -> Result<ServerTls, String> {
        Ok(ServerTls { config: Mutex::new(server_config(files)?) })
    }

    /// Reads `files` again and puts them in force for new connections.
    pub fn reload(&self, files: &ServerFiles) -> Result<(), String> {
        let config = server_config(files)?;
        *crate::clock::lock(&self.config) = config;
        Ok(())
    }

    /// An acceptor with the settings in force.
    pub fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        tokio_rustls::TlsAcceptor::from(crate::clock::lock(&self.config).clone())
    }
}

/// The files of a TLS client (`forward.tls`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientFiles {
    /// `caFile`: the roots servers are checked against (else the system's).
    pub ca: Option<PathBuf>,
    /// `certFile` and `keyFile`: the client certificate presented (mutual TLS).
    pub identity: Option<(PathBuf, PathBuf)>,
}

impl ClientFiles {
    /// The files named: the CA, the certificate and its key.
    pub fn paths(&self) -> impl Iterator<Item = &std::path::Path> {
        let identity = self.identity.iter().flat_map(|(cert, key)| [cert.as_path(), key.as_path()]);
        self.ca.as_deref().into_iter().chain(identity)
    }
}

/// A client config: `files`' CA (else the system's roots) and client certificate.
pub fn client_config(
    files: &ClientFiles,
    system_roots: impl FnOnce() -> Result<RootCertStore, String>,
) -> Result<Arc<ClientConfig>, String> {
    let roots = match &files.ca {
        Some(ca) => roots(ca)?,
        None => system_roots()?,
    };
    client_config_trusting(roots, files.identity.as_ref())
}

/// A client config trusting `roots`, presenting `identity` (certificate and key files, PEM).
pub fn client_config_trusting(
    roots: RootCertStore,
    identity: Option<&(PathBuf, PathBuf)>,
) -> Result<Arc<ClientConfig>, String> {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|error| format!("TLS settings: {error}"))?
        .with_root_certificates(roots);
    let mut config = match identity {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => builder
            .with_client_auth_cert(certificates(cert)?, private_key(key)?)
            .map_err(|error| format!("{} and {}: {error}", cert.display(), key.display()))?,
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The common name (CN) of a certificate's subject, read from its DER: the name a client
/// certificate stands for.
pub fn subject_common_name(certificate: &[u8]) -> Option<String> {
    let (_, certificate, _) = tlv(certificate).filter(|(tag, ..)| *tag == 0x30)?;
    let (_, mut fields, _) = tlv(certificate).filter(|(tag, ..)| *tag == 0x30)?;
    if fields.first() == Some(&0xa0) {
        fields = tlv(fields)?.2; // the version
    }
    for _ in 0..4 {
        fields = tlv(fields)?.2; // serial number, signature algorithm, issuer, validity
    }
    let (_, mut names, _) = tlv(fields).filter(|(tag, ..)| *tag == 0x30)?;
    while !names.is_empty() {
        let (_, set, rest) = tlv(names)?;
        names = rest;
        let (_, pair, _) = tlv(set)?;
        let (oid_tag, oid, value) = tlv(pair)?;
        if oid_tag == 0x06 && oid == [0x55, 0x04, 0x03] {
            let (_, text, _) = tlv(value)?;
            return String::from_utf8(text.to_vec()).ok();
        }
    }
    None
}

/// One DER element: its tag, its content and what follows it.
fn tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, mut rest) = rest.split_first()?;
    let length = if first < 0x80 {
        usize::from(first)
    } else {
        let count = usize::from(first & 0x7f);
        if count == 0 || count > 4 {
            return None;
        }
        let (bytes, after) = rest.split_at_checked(count)?;
        rest = after;
        bytes.iter().fold(0usize, |length, &byte| length << 8 | usize::from(byte))
    };
    let (content, rest) = rest.split_at_checked(length)?;
    Some((tag, content, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A DER element.
    fn element(tag: u8, content: &[u8]) -> Vec<u8> {
        let mut out = vec![tag];
        if content.len() < 0x80 {
            out.push(content.len() as u8);
        } else {
            out.extend_from_slice(&[0x82, (content.len() >> 8) as u8, content.len() as u8]);
        }
        out.extend_from_slice(content);
        out
    }

    fn certificate(version: bool, subject: &[(&[u8], &str)]) -> Vec<u8> {
        let names: Vec<u8> = subject
            .iter()
            .flat_map(|(oid, value)| {
                element(0x31, &element(0x30, &[element(0x06, oid), element(0x0c, value.as_bytes())].concat()))
            })
            .collect();
        let mut fields = Vec::new();
        if version {
            fields.extend(element(0xa0, &element(0x02, &[2])));
        }
        fields.extend(element(0x02, &[1, 2, 3]));
        fields.extend(element(0x30, &[]));
        fields.extend(element(0x30, &element(0x31, &[])));
        fields.extend(element(0x30, &[0; 200]));
        fields.extend(element(0x30, &names));
        element(0x30, &[element(0x30, &fields), element(0x30, &[]), element(0x03, &[0])].concat())
    }

    #[test]
    fn the_subjects_common_name_is_read() {
        let (cn, org): (&[u8], &[u8]) = (&[0x55, 0x04, 0x03], &[0x55, 0x04, 0x0a]);
        let cases = [
            (certificate(true, &[(org, "fleet"), (cn, "web-1")]), Some("web-1")),
            (certificate(false, &[(cn, "web-2.example")]), Some("web-2.example")),
            (certificate(true, &[(org, "fleet")]), None),
            (vec![0x30, 0x05, 0x30], None),
            (Vec::new(), None),
            (vec![0x30, 0x84, 0xff, 0xff, 0xff, 0xff], None),
        ];
        for (der, want) in cases {
            assert_eq!(subject_common_name(&der).as_deref(), want, "{der:?}");
        }
    }
}
