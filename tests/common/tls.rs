//! Certificates made at test time, in a temp dir: a CA, a server certificate it signs for
//! `localhost` and `127.0.0.1`, client certificates it signs, and a second CA that has
//! nothing to do with the first (with a client certificate of its own), for the refusals.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};
use tempfile::TempDir;

/// The files, as PEM.
pub struct Certs {
    dir: TempDir,
    /// The CA that signed the server's and `client`'s certificates.
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    /// `OU=eng, CN=alice` (`User:CN=alice,OU=eng` as Kafka prints it), signed by `ca`.
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
    /// A CA unrelated to `ca`.
    pub other_ca: PathBuf,
    /// A client certificate signed by `other_ca`.
    pub other_client_cert: PathBuf,
    pub other_client_key: PathBuf,
}

impl Certs {
    pub fn new() -> Certs {
        let dir = tempfile::tempdir().unwrap();
        let path = |name: &str| dir.path().join(name);
        let (ca_key, ca) = certificate_authority("nanokafka test CA");
        let (other_key, other) = certificate_authority("an unrelated CA");
        write(&path("ca.pem"), &ca.pem());
        write(&path("other-ca.pem"), &other.pem());
        let issuer = (&ca, &ca_key);
        let other_issuer = (&other, &other_key);

        let mut server =
            CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
        server
            .distinguished_name
            .push(DnType::CommonName, "localhost");
        server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        signed(server, issuer, &path("server.pem"), &path("server.key"));
        let client = client_params("alice");
        signed(client, issuer, &path("client.pem"), &path("client.key"));
        let other_client = client_params("mallory");
        signed(
            other_client,
            other_issuer,
            &path("other-client.pem"),
            &path("other-client.key"),
        );
        Certs {
            ca: path("ca.pem"),
            server_cert: path("server.pem"),
            server_key: path("server.key"),
            client_cert: path("client.pem"),
            client_key: path("client.key"),
            other_ca: path("other-ca.pem"),
            other_client_cert: path("other-client.pem"),
            other_client_key: path("other-client.key"),
            dir,
        }
    }

    /// The listener's TLS settings: the server certificate, and mutual TLS against `ca`
    /// when `mutual`.
    pub fn server(&self, mutual: bool) -> nanokafka::TlsConfig {
        let tls = nanokafka::TlsConfig::new(&self.server_cert, &self.server_key);
        if mutual {
            tls.client_ca(&self.ca)
        } else {
            tls
        }
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

/// The first flight of a TLS client trusting `certs.ca`: its ClientHello, as the bytes
/// rustls would send.
pub fn client_hello(certs: &Certs) -> Vec<u8> {
    let name = "localhost".try_into().unwrap();
    let mut client = rustls::ClientConnection::new(client_config(&certs.ca), name).unwrap();
    let mut hello = Vec::new();
    client.write_tls(&mut hello).unwrap();
    assert!(hello.len() > 100, "a ClientHello of {} bytes", hello.len());
    hello
}

/// A rustls client trusting the CA in `ca` (PEM), presenting no certificate.
pub fn client_config(ca: &Path) -> Arc<rustls::ClientConfig> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    // ring, as the listener: rustls deprecates its provider only for want of post-quantum
    // key exchange.
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    Arc::new(config)
}

fn certificate_authority(name: &str) -> (KeyPair, Certificate) {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    let cert = params.self_signed(&key).unwrap();
    (key, cert)
}

fn client_params(name: &str) -> CertificateParams {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    // OU then CN as encoded (rcgen's default DN has a CN first).
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::OrganizationalUnitName, "eng");
    params.distinguished_name.push(DnType::CommonName, name);
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    params
}

fn signed(
    params: CertificateParams,
    (ca, ca_key): (&Certificate, &KeyPair),
    cert: &Path,
    key: &Path,
) {
    let pair = KeyPair::generate().unwrap();
    let signed = params.signed_by(&pair, ca, ca_key).unwrap();
    write(cert, &signed.pem());
    write(key, &pair.serialize_pem());
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}
