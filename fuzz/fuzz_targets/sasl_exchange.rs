//! Arbitrary bytes as a SCRAM login, the server's side: the first byte says where the
//! client-first message ends and the client-final one begins, both parsed and checked against
//! a store with one user (whose decoy answers any other name). No panic; nothing but a clean
//! refusal unless the proof is right, which random bytes never make.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use nanokafka::internals::security::scram::{ScramCredential, ScramMechanism, ScramStore};
use nanokafka::internals::security::scram_exchange::{client_final, parse_client_first, server_first};

fn store() -> &'static ScramStore {
    static STORE: OnceLock<ScramStore> = OnceLock::new();
    STORE.get_or_init(|| {
        let mut store = ScramStore::new().expect("a store");
        let credential =
            ScramCredential::from_password(ScramMechanism::ScramSha256, b"s3cret", b"salt", 4096);
        store
            .upsert("alice", ScramMechanism::ScramSha256, credential)
            .expect("a valid credential");
        store
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    let (first, last) = rest.split_at(usize::from(split).min(rest.len()));
    for mechanism in [ScramMechanism::ScramSha256, ScramMechanism::ScramSha512] {
        let Ok(client) = parse_client_first(first) else {
            continue;
        };
        let (exchange, _server_first) = server_first(mechanism, client, store(), "fuzz");
        assert!(
            client_final(&exchange, last).is_err(),
            "random bytes made a valid proof"
        );
    }
});
