//! Arbitrary bytes as everything a client sends to a TLS address: the listener's accept path
//! (rustls's handshake under the listener's deadline) over an in-memory stream, with a
//! certificate made at start. No panic; random bytes never complete a handshake, and the
//! connection is always closed. Run with `-malloc_limit_mb` to catch a large allocation.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use nanokafka::internals::listener::TlsAcceptCheck;
use nanokafka::TlsConfig;

fn check() -> &'static TlsAcceptCheck {
    static CHECK: OnceLock<(tempfile::TempDir, TlsAcceptCheck)> = OnceLock::new();
    &CHECK
        .get_or_init(|| {
            let dir = tempfile::tempdir().expect("a temp dir");
            let made = rcgen::generate_simple_self_signed(vec!["localhost".into()])
                .expect("a self-signed certificate");
            let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
            std::fs::write(&cert, made.cert.pem()).expect("write the certificate");
            std::fs::write(&key, made.key_pair.serialize_pem()).expect("write the key");
            let check = TlsAcceptCheck::new(&TlsConfig::new(&cert, &key)).expect("a TLS config");
            (dir, check)
        })
        .1
}

fuzz_target!(|data: &[u8]| {
    let accepted = check().accept(data);
    assert!(!accepted.handshake, "random bytes completed a TLS handshake");
    assert!(accepted.closed, "the connection was left open");
});
