//! TLS for the Kafka listener and the web console: the certificate files an operator names,
//! loaded once into a rustls server configuration, and the mutual-TLS principal read from a
//! client's certificate.
//!
//! # Files
//! All three are PEM. The certificate file holds the server's certificate first, then any
//! intermediates of its chain (what a client is sent); the key file one private key (PKCS#8,
//! PKCS#1 or SEC1); the client CA file one or more CA certificates, and with it every client
//! must present a certificate that chains to one of them (Kafka's `ssl.client.auth=required`).
//! A file that cannot be read, holds no PEM block of its kind, or that rustls refuses (a key
//! that does not match the certificate, say) fails the build naming the file.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};

use super::principal::Principal;
use crate::error::{Error, Result};

/// The certificate files of a TLS listener (and console): see the module doc for what each
/// holds. Given to [`crate::ListenerConfig::tls`] or [`crate::NanoKafkaBuilder::tls`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsConfig {
    cert: PathBuf,
    key: PathBuf,
    client_ca: Option<PathBuf>,
}

impl TlsConfig {
    /// TLS with the certificate chain in `cert` and its private key in `key` (PEM).
    pub fn new(cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        TlsConfig {
            cert: cert.into(),
            key: key.into(),
            client_ca: None,
        }
    }

    /// Mutual TLS: every client must present a certificate signed by a CA in `ca` (PEM), and
    /// acts as `User:<its subject DN>` unless it also authenticates with SASL.
    pub fn client_ca(mut self, ca: impl Into<PathBuf>) -> Self {
        self.client_ca = Some(ca.into());
        self
    }

    /// Whether clients must present a certificate.
    pub fn requires_client_certificates(&self) -> bool {
        self.client_ca.is_some()
    }

    /// Reads the files into a server configuration offering `alpn` protocols (none for Kafka).
    ///
    /// # Errors
    /// `InvalidConfig` naming the file and what is wrong with it.
    pub(crate) fn server_config(&self, alpn: &[&[u8]]) -> Result<Arc<ServerConfig>> {
        // ring rather than aws-lc-rs (which rustls deprecates ring's provider in favour of,
        // for its post-quantum key exchange): aws-lc-rs needs cmake and a C toolchain to
        // build; ring's suites are the classic ones every Kafka client offers.
        #[allow(deprecated)]
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let certs = read_certificates(&self.cert, "certificate")?;
        let key = PrivateKeyDer::from_pem_file(&self.key)
            .map_err(|e| bad_file(&self.key, format!("no usable PEM private key: {e}")))?;
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| bad_file(&self.cert, e.to_string()))?;
        let builder = match &self.client_ca {
            None => builder.with_no_client_auth(),
            Some(ca) => {
                let mut roots = RootCertStore::empty();
                for cert in read_certificates(ca, "CA certificate")? {
                    roots
                        .add(cert)
                        .map_err(|e| bad_file(ca, format!("a CA certificate is refused: {e}")))?;
                }
                let verifier = WebPkiClientVerifier::builder_with_provider(roots.into(), provider)
                    .build()
                    .map_err(|e| bad_file(ca, e.to_string()))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut config = builder.with_single_cert(certs, key).map_err(|e| {
            bad_file(
                &self.key,
                format!(
                    "refused with the certificate of {}: {e}",
                    self.cert.display()
                ),
            )
        })?;
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Ok(Arc::new(config))
    }
}

/// Every certificate of a PEM file, at least one.
fn read_certificates(path: &Path, what: &str) -> Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<std::result::Result<Vec<_>, _>>())
        .map_err(|e| bad_file(path, format!("cannot read a PEM {what}: {e}")))?;
    if certs.is_empty() {
        return Err(bad_file(path, format!("holds no PEM {what}")));
    }
    Ok(certs)
}

fn bad_file(path: &Path, reason: String) -> Error {
    Error::InvalidConfig {
        field: "tls",
        reason: format!("{}: {reason}", path.display()),
    }
}

/// The principal of a client that presented `cert` (DER): `User:<subject DN>`, the DN as Kafka
/// prints it (Java's RFC 2253 form: the last RDN first, no spaces, `+` within an RDN). `None`
/// for a certificate that does not parse (the verifier accepted it, so this does not happen).
pub(crate) fn certificate_principal(cert: &[u8]) -> Option<Principal> {
    let (_, cert) = x509_parser::parse_x509_certificate(cert).ok()?;
    Some(Principal::user(&rfc2253(cert.subject())))
}

/// `name` in RFC 2253 form, as Java's `X500Principal.getName()` writes it.
fn rfc2253(name: &x509_parser::x509::X509Name<'_>) -> String {
    let in_order: Vec<_> = name.iter().collect();
    let rdns: Vec<String> = in_order
        .into_iter()
        .rev()
        .map(|rdn| {
            rdn.iter()
                .map(|attr| {
                    let oid = attr.attr_type();
                    let key =
                        x509_parser::objects::oid2abbrev(oid, x509_parser::objects::oid_registry())
                            .ok()
                            .filter(|k| RFC2253_KEYWORDS.contains(k))
                            .map_or_else(|| oid.to_id_string(), str::to_owned);
                    let value = match attr.as_str() {
                        Ok(text) => escape(text),
                        // Not a string type: RFC 2253's `#` and the DER value in hex.
                        Err(_) => format!("#{}", hex(attr.attr_value().data)),
                    };
                    format!("{key}={value}")
                })
                .collect::<Vec<_>>()
                .join("+")
        })
        .collect();
    rdns.join(",")
}

/// The attribute keywords RFC 2253 names (Java prints any other type as its OID).
const RFC2253_KEYWORDS: [&str; 9] = ["CN", "C", "L", "ST", "O", "OU", "STREET", "DC", "UID"];

/// An attribute value escaped as RFC 2253 asks.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && matches!(c, '#' | ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_escaped_as_rfc_2253_asks() {
        assert_eq!(escape("alice"), "alice");
        assert_eq!(escape("Smith, John"), "Smith\\, John");
        assert_eq!(escape(" a+b "), "\\ a\\+b\\ ");
        assert_eq!(escape("#1"), "\\#1");
    }

    fn certificate(dn: &[(rcgen::DnType, &str)]) -> Vec<u8> {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        // Encoded in this order (rcgen's default DN would put its CN first).
        params.distinguished_name = rcgen::DistinguishedName::new();
        for (kind, value) in dn {
            params.distinguished_name.push(kind.clone(), *value);
        }
        params.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn a_client_certificate_names_its_principal_as_kafka_prints_the_subject() {
        use rcgen::DnType;
        let cert = certificate(&[
            (DnType::CountryName, "SE"),
            (DnType::OrganizationName, "Acme, Inc."),
            (DnType::OrganizationalUnitName, "eng"),
            (DnType::CommonName, "alice"),
        ]);
        let principal = certificate_principal(&cert).unwrap();
        assert_eq!(
            principal.to_string(),
            "User:CN=alice,OU=eng,O=Acme\\, Inc.,C=SE"
        );
        assert_eq!(certificate_principal(b"not a certificate"), None);
    }

    #[test]
    fn a_missing_file_is_named_in_the_error() {
        let config = TlsConfig::new("/nonexistent/cert.pem", "/nonexistent/key.pem");
        let error = config.server_config(&[]).unwrap_err().to_string();
        assert!(error.contains("/nonexistent/cert.pem"), "{error}");
    }

    #[test]
    fn a_key_that_is_not_the_certificates_or_a_file_without_pem_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = |name: &str| dir.path().join(name);
        let key = rcgen::KeyPair::generate().unwrap();
        let params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        std::fs::write(path("cert.pem"), params.self_signed(&key).unwrap().pem()).unwrap();
        std::fs::write(path("key.pem"), key.serialize_pem()).unwrap();
        let other = rcgen::KeyPair::generate().unwrap();
        std::fs::write(path("other.pem"), other.serialize_pem()).unwrap();
        std::fs::write(path("empty.pem"), "nothing here").unwrap();
        let good = TlsConfig::new(path("cert.pem"), path("key.pem"));
        assert!(good.server_config(&[]).is_ok());
        for (config, named) in [
            (
                TlsConfig::new(path("cert.pem"), path("other.pem")),
                "other.pem",
            ),
            (
                TlsConfig::new(path("empty.pem"), path("key.pem")),
                "empty.pem",
            ),
            (
                TlsConfig::new(path("cert.pem"), path("empty.pem")),
                "empty.pem",
            ),
            (good.clone().client_ca(path("empty.pem")), "empty.pem"),
        ] {
            let error = config.server_config(&[]).unwrap_err().to_string();
            assert!(error.contains(named), "{error}");
        }
    }
}
