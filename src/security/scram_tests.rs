use super::*;

fn store_with_alice() -> ScramStore {
    let mut store = ScramStore::new().unwrap();
    for mechanism in ScramMechanism::ALL {
        let credential = ScramCredential::from_password(mechanism, b"pencil", b"salt", 4096);
        store.upsert("alice", mechanism, credential).unwrap();
    }
    let credential = ScramCredential::from_password(
        ScramMechanism::ScramSha512,
        b"x",
        b"other salt",
        MAX_ITERATIONS,
    );
    store
        .upsert("bob, the =builder", ScramMechanism::ScramSha512, credential)
        .unwrap();
    store
}

#[test]
fn rfc_7677_keys_come_from_the_password() {
    // RFC 7677 §3: user "user", password "pencil", salt W22ZaJ0SNY7soEsUEjb6gQ==, 4096.
    let salt = BASE64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
    let mechanism = ScramMechanism::ScramSha256;
    let credential = ScramCredential::from_password(mechanism, b"pencil", &salt, 4096);
    // ServerSignature = HMAC(ServerKey, AuthMessage), the RFC's `v=`.
    let auth = "n=user,r=rOprNGfwEbeRWgbNEkqO,\
                r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,\
                c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
    let signature = mechanism.hmac_of(&credential.server_key, auth.as_bytes());
    assert_eq!(
        BASE64.encode(signature),
        "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    );
}

#[test]
fn the_store_survives_its_file_and_holds_no_password() {
    let store = store_with_alice();
    let text = store.encode();
    assert!(!text.contains("pencil"), "{text}");
    let read = ScramStore::decode(text.as_bytes()).unwrap();
    assert_eq!(read, store);
    let users: Vec<_> = read.users().collect();
    assert_eq!(
        users,
        vec![
            (
                "alice",
                vec![ScramMechanism::ScramSha256, ScramMechanism::ScramSha512]
            ),
            ("bob, the =builder", vec![ScramMechanism::ScramSha512]),
        ]
    );
}

#[test]
fn a_damaged_store_is_refused_with_the_reason() {
    let text = store_with_alice().encode();
    let flipped = text.replacen("alice", "alicf", 1);
    let err = ScramStore::decode(flipped.as_bytes()).unwrap_err();
    assert!(err.contains("checksum"), "{err}");
    let cut = &text[..text.len() / 2];
    assert!(ScramStore::decode(cut.as_bytes()).is_err());
    assert!(ScramStore::decode(b"").is_err());
    assert!(ScramStore::decode(b"\xff\xfe")
        .unwrap_err()
        .contains("UTF-8"));
    // A well-checksummed file with a bad line still fails, naming the line.
    let mut body = format!("{HEADER}\nsecret AAAA\nalice\tSCRAM-SHA-1\t4096\tc2FsdA==\tx\ty\n");
    body.push_str(&format!("crc32c {:08x}\n", crc32c::crc32c(body.as_bytes())));
    let err = ScramStore::decode(body.as_bytes()).unwrap_err();
    assert!(err.contains("line 1") && err.contains("mechanism"), "{err}");
}

#[test]
fn a_damaged_store_file_names_itself() {
    let dir = tempfile::tempdir().unwrap();
    let path = store_path(dir.path());
    store_with_alice().save(&path).unwrap();
    let read = ScramStore::load(&path).unwrap().unwrap();
    assert_eq!(read.users().count(), 2);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.truncate(bytes.len() - 3);
    std::fs::write(&path, bytes).unwrap();
    let err = ScramStore::load(&path).unwrap_err();
    assert!(err.contains("scram-credentials"), "{err}");
    assert!(LiveScramStore::open(dir.path(), true).is_err());
}

#[test]
fn a_live_store_sees_another_process_write() {
    let dir = tempfile::tempdir().unwrap();
    let live = LiveScramStore::open(dir.path(), true).unwrap();
    assert_eq!(live.current().users().count(), 0);
    // Another process (the CLI) adds a user.
    let path = store_path(dir.path());
    let mut store = ScramStore::load(&path).unwrap().unwrap();
    let credential = ScramCredential::from_password(ScramMechanism::ScramSha256, b"p", b"s", 4096);
    store
        .upsert("carol", ScramMechanism::ScramSha256, credential)
        .unwrap();
    store.save(&path).unwrap();
    assert!(live
        .current()
        .get("carol", ScramMechanism::ScramSha256)
        .is_some());
    // A file damaged later keeps the last good copy: nobody is let in by it.
    std::fs::write(&path, b"garbage").unwrap();
    assert!(live
        .current()
        .get("carol", ScramMechanism::ScramSha256)
        .is_some());
}

#[test]
fn an_unknown_user_has_a_stable_decoy_unlike_anyone_elses() {
    let store = store_with_alice();
    let m = ScramMechanism::ScramSha256;
    assert_eq!(store.decoy("mallory", m), store.decoy("mallory", m));
    assert_ne!(store.decoy("mallory", m).salt, store.decoy("trent", m).salt);
    assert_ne!(
        store.decoy("mallory", m).salt,
        store.decoy("mallory", ScramMechanism::ScramSha512).salt
    );
    let other = ScramStore::new().unwrap();
    assert_ne!(
        store.decoy("mallory", m).salt,
        other.decoy("mallory", m).salt
    );
}

#[test]
fn iterations_and_names_out_of_range_are_refused() {
    assert!(check_iterations(4095).is_err());
    assert!(check_iterations(16385).is_err());
    assert!(check_iterations(-1).is_err());
    assert_eq!(check_iterations(8192), Ok(8192));
    assert!(check_user_name("").is_err());
    assert!(check_user_name("a\tb").is_err());
    assert!(check_user_name(&"x".repeat(MAX_USER_BYTES + 1)).is_err());
    let mut store = ScramStore::new().unwrap();
    let weak = ScramCredential::from_password(ScramMechanism::ScramSha256, b"p", b"s", 1000);
    assert!(store
        .upsert("a", ScramMechanism::ScramSha256, weak)
        .is_err());
    assert_eq!(store.users().count(), 0);
}

#[test]
fn delete_removes_one_mechanism_or_the_user() {
    let mut store = store_with_alice();
    assert!(store.delete("alice", Some(ScramMechanism::ScramSha256)));
    assert!(!store.delete("alice", Some(ScramMechanism::ScramSha256)));
    assert!(store.get("alice", ScramMechanism::ScramSha512).is_some());
    assert!(store.delete("alice", None));
    assert!(store.credentials("alice").is_none());
    assert!(!store.delete("nobody", None));
}
