//! The server's own certificate authority and serving certificate (rcgen), the bearer token,
//! and the rustls configuration (HTTP/2 and HTTP/1.1 by ALPN, as kube-apiserver offers).

use std::net::IpAddr;
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};

/// Why the credentials could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// rcgen could not make the CA or the serving certificate.
    #[error("generating the certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// rustls refused the certificate or key.
    #[error("configuring TLS: {0}")]
    Config(#[from] rustls::Error),
}

/// What a client needs to reach the server and what the server serves with.
#[derive(Clone)]
pub struct Credentials {
    /// The CA certificate (PEM), written into the kubeconfig.
    pub ca_pem: String,
    /// The serving certificate (DER) and its key (PKCS#8 DER).
    pub cert_der: Vec<u8>,
    /// The serving certificate's private key (PKCS#8 DER).
    pub key_der: Vec<u8>,
    /// The bearer token every request must carry (64 hex digits, 256 random bits).
    pub token: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials").finish_non_exhaustive()
    }
}

/// A fresh CA, a serving certificate for `localhost`, 127.0.0.1, ::1 and `addresses`, and a
/// random token.
///
/// # Errors
/// [`TlsError::Generate`] if rcgen fails.
pub fn generate(addresses: &[IpAddr]) -> Result<Credentials, TlsError> {
    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "podgrace-ca");
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate()?;
    let mut p = CertificateParams::new(vec![
        "localhost".to_string(),
        "kubernetes".to_string(),
        "kubernetes.default".to_string(),
    ])?;
    p.distinguished_name
        .push(DnType::CommonName, "podgrace-apiserver");
    p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let mut ips: Vec<IpAddr> = vec![[127, 0, 0, 1].into(), std::net::Ipv6Addr::LOCALHOST.into()];
    for a in addresses {
        if !ips.contains(a) && !a.is_unspecified() {
            ips.push(*a);
        }
    }
    for ip in ips {
        p.subject_alt_names.push(SanType::IpAddress(ip));
    }
    let cert = p.signed_by(&key, &issuer)?;
    let mut t = [0u8; 32];
    getrandom::fill(&mut t).map_err(|_| rcgen::Error::RemoteKeyError)?;
    let token: String = t.iter().map(|b| format!("{b:02x}")).collect();
    Ok(Credentials {
        ca_pem: ca_cert.pem(),
        cert_der: cert.der().to_vec(),
        key_der: key.serialize_der(),
        token,
    })
}

/// The rustls server configuration for `c`, offering `h2` and `http/1.1`.
///
/// # Errors
/// [`TlsError::Config`] if rustls refuses the key.
pub fn server_config(c: &Credentials) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cert = rustls::pki_types::CertificateDer::from(c.cert_der.clone());
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(c.key_der.clone().into());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)?;
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}
