use super::*;

/// RFC 7677 §3's exchange: user "user", password "pencil".
const CLIENT_FIRST: &str = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
const SERVER_NONCE: &str = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
const SERVER_FIRST: &str =
    "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
const CLIENT_FINAL: &str = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
                            p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
const SERVER_FINAL: &str = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";

fn rfc_store() -> ScramStore {
    // PBKDF2 once per test binary: the fuzz checks exchange thousands of times.
    static STORE: std::sync::OnceLock<ScramStore> = std::sync::OnceLock::new();
    STORE.get_or_init(new_rfc_store).clone()
}

fn new_rfc_store() -> ScramStore {
    let mut store = ScramStore::new().unwrap();
    let salt = BASE64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
    let m = ScramMechanism::ScramSha256;
    let credential = ScramCredential::from_password(m, b"pencil", &salt, 4096);
    store.upsert("user", m, credential).unwrap();
    store
}

fn first(store: &ScramStore, client_first: &str) -> (ScramExchange, String) {
    let client = parse_client_first(client_first.as_bytes()).unwrap();
    server_first(ScramMechanism::ScramSha256, client, store, SERVER_NONCE)
}

#[test]
fn rfc_7677_exchange_passes_with_the_rfc_messages() {
    let (exchange, server_first) = first(&rfc_store(), CLIENT_FIRST);
    assert_eq!(server_first, SERVER_FIRST);
    assert_eq!(
        client_final(&exchange, CLIENT_FINAL.as_bytes()).unwrap(),
        SERVER_FINAL
    );
    assert_eq!(exchange.user(), "user");
}

/// A client's side of the exchange, computed from the password, for the cases the RFC's
/// messages do not cover (SHA-512, a wrong password).
fn client_final_for(
    mechanism: ScramMechanism,
    password: &str,
    client_first_bare: &str,
    server_first: &str,
    gs2: &str,
) -> String {
    let fields: Vec<&str> = server_first.split(',').collect();
    let nonce = &fields[0][2..];
    let salt = BASE64.decode(&fields[1][2..]).unwrap();
    let iterations: u32 = fields[2][2..].parse().unwrap();
    let salted = mechanism.salted_password(password.as_bytes(), &salt, iterations);
    let client_key = mechanism.hmac_of(&salted, b"Client Key");
    let stored_key = mechanism.hash(&client_key);
    let without_proof = format!("c={},r={nonce}", BASE64.encode(gs2));
    let auth = format!("{client_first_bare},{server_first},{without_proof}");
    let signature = mechanism.hmac_of(&stored_key, auth.as_bytes());
    let proof: Vec<u8> = client_key
        .iter()
        .zip(&signature)
        .map(|(k, s)| k ^ s)
        .collect();
    format!("{without_proof},p={}", BASE64.encode(proof))
}

#[test]
fn a_client_final_nonce_may_repeat_the_client_nonce_as_librdkafka_2_0_sends_it() {
    // librdkafka 2.0 (Debian's kcat) sends `r=` client nonce + server-first nonce, which
    // already starts with the client nonce; Kafka accepts it (`endsWith`), and the proof is
    // computed over the message as sent.
    let m = ScramMechanism::ScramSha256;
    let (exchange, sf) = first(&rfc_store(), "n,,n=user,r=abc");
    let doubled = sf.replacen("r=abc", "r=abcabc", 1);
    let last = client_final_for(m, "pencil", "n=user,r=abc", &doubled, "n,,");
    // client_final_for puts the doubled nonce in the AuthMessage's server-first too; rebuild
    // it over the real server-first with the doubled nonce in the client-final only.
    let nonce = &doubled.split(',').next().unwrap()[2..];
    let salted = m.salted_password(
        b"pencil",
        &BASE64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap(),
        4096,
    );
    let client_key = m.hmac_of(&salted, b"Client Key");
    let without_proof = format!("c=biws,r={nonce}");
    let auth = format!("n=user,r=abc,{sf},{without_proof}");
    let signature = m.hmac_of(&m.hash(&client_key), auth.as_bytes());
    let proof: Vec<u8> = client_key
        .iter()
        .zip(&signature)
        .map(|(k, s)| k ^ s)
        .collect();
    let message = format!("{without_proof},p={}", BASE64.encode(proof));
    assert!(client_final(&exchange, message.as_bytes()).is_ok());
    assert!(
        client_final(&exchange, last.as_bytes()).is_err(),
        "a proof over another AuthMessage"
    );
    // A nonce that does not end with the server's is refused.
    let (exchange, sf) = first(&rfc_store(), "n,,n=user,r=abc");
    let cut = &sf.split(',').next().unwrap()[2..sf.split(',').next().unwrap().len() - 1];
    let message = format!("c=biws,r={cut},p={}", BASE64.encode([0u8; 32]));
    let err = client_final(&exchange, message.as_bytes()).unwrap_err();
    assert!(err.contains("nonce"), "{err}");
}

#[test]
fn sha_512_logs_in_with_the_password_and_only_with_it() {
    let m = ScramMechanism::ScramSha512;
    let mut store = ScramStore::new().unwrap();
    let credential = ScramCredential::from_password(m, b"s3cret", b"NaCl", 8192);
    store.upsert("a,=b", m, credential).unwrap();
    let bare = "n=a=2C=3Db,r=abc";
    let client = parse_client_first(format!("y,a=a=2C=3Db,{bare}").as_bytes()).unwrap();
    assert_eq!(client.user, "a,=b");
    let (exchange, sf) = server_first(m, client, &store, "xyz");
    assert!(sf.ends_with(",i=8192"), "{sf}");
    let good = client_final_for(m, "s3cret", bare, &sf, "y,a=a=2C=3Db,");
    assert!(client_final(&exchange, good.as_bytes()).is_ok());
    let bad = client_final_for(m, "s3creT", bare, &sf, "y,a=a=2C=3Db,");
    let err = client_final(&exchange, bad.as_bytes()).unwrap_err();
    assert!(!err.contains("s3cre") && !err.contains("p="), "{err}");
}

#[test]
fn an_unknown_user_gets_a_plausible_server_first_and_fails_at_the_proof() {
    let store = rfc_store();
    let (exchange, sf) = first(&store, "n,,n=nobody,r=abc");
    let (_, again) = first(&store, "n,,n=nobody,r=abc");
    assert_eq!(sf, again, "the decoy salt is the same on every try");
    let salt = BASE64.decode(sf.split(',').nth(1).unwrap().strip_prefix("s=").unwrap());
    assert_eq!(salt.unwrap().len(), 32);
    assert!(sf.ends_with(",i=4096"), "{sf}");
    let guess = client_final_for(
        ScramMechanism::ScramSha256,
        "pencil",
        "n=nobody,r=abc",
        &sf,
        "n,,",
    );
    let err = client_final(&exchange, guess.as_bytes()).unwrap_err();
    let (known, sf) = first(&store, "n,,n=user,r=abc");
    let wrong = client_final_for(
        ScramMechanism::ScramSha256,
        "pencil!",
        "n=user,r=abc",
        &sf,
        "n,,",
    );
    let same = client_final(&known, wrong.as_bytes()).unwrap_err();
    // The log says the same for both, with the lengths only.
    assert_eq!(err.replace("6 bytes", "N"), same.replace("4 bytes", "N"));
}

#[test]
fn malformed_client_first_messages_are_refused() {
    for message in [
        "",
        "n,,",
        "n",
        "n,",
        "p=tls-unique,,n=user,r=abc",
        "x,,n=user,r=abc",
        "n,,r=abc,n=user",
        "n,,n=,r=abc",
        "n,,n=user",
        "n,,n=user,r=",
        "n,,n=user,r=a b",
        "n,,n=us=2Xer,r=abc",
        "n,,n=us=er,r=abc",
        "n,,n=user,r=abc,tokenauth=true",
        "n,,n=user,r=abc,=x",
        "n,,n=user,r=abc,junk",
        "n,,m=ext,n=user,r=abc",
        "n,a=other,n=user,r=abc",
        "n,b=user,n=user,r=abc",
    ] {
        assert!(
            parse_client_first(message.as_bytes()).is_err(),
            "{message:?}"
        );
    }
    assert!(parse_client_first(b"n,,n=\xff,r=abc").is_err());
    let long = format!("n,,n={},r=abc", "u".repeat(MAX_MESSAGE_BYTES));
    let err = parse_client_first(long.as_bytes()).unwrap_err();
    assert!(err.len() < 100, "{err}");
    // The forms clients send pass.
    for message in [
        "n,,n=user,r=abc",
        "y,,n=user,r=abc",
        "n,a=user,n=user,r=abc",
        "n,,n=user,r=abc,ext=1",
    ] {
        assert!(
            parse_client_first(message.as_bytes()).is_ok(),
            "{message:?}"
        );
    }
}

#[test]
fn malformed_client_final_messages_are_refused() {
    let (exchange, _) = first(&rfc_store(), CLIENT_FIRST);
    let nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
    let proof = "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
    for message in [
        String::new(),
        format!("c=biws,r={nonce}"),
        format!("r={nonce},{proof}"),
        format!("c=eSws,r={nonce},{proof}"),
        format!("c=biws,r={nonce}x,{proof}"),
        format!("c=biws,r=rOprNGfwEbeRWgbNEkqO,{proof}"),
        format!("c=biws,r={nonce},p=AAAA"),
        format!("c=biws,r={nonce},p=!!!"),
        format!("c=biws,r={nonce},junk,{proof}"),
        format!("c=biws,{proof}"),
    ] {
        assert!(
            client_final(&exchange, message.as_bytes()).is_err(),
            "{message:?}"
        );
    }
    let huge = format!("c=biws,r={nonce},{proof}{}", "A".repeat(MAX_MESSAGE_BYTES));
    assert!(client_final(&exchange, huge.as_bytes()).is_err());
}

#[test]
fn server_nonces_are_fresh_and_alphanumeric() {
    let (a, b) = (server_nonce().unwrap(), server_nonce().unwrap());
    assert_ne!(a, b);
    assert_eq!(a.len(), 48);
    assert!(a.bytes().all(|c| c.is_ascii_alphanumeric()), "{a}");
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    /// Bytes that look like SCRAM messages often enough to get past the first checks.
    fn scramish() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..300),
            "[nyp]?,(a=[a-z=,0-9C]{0,6})?,(m=x,)?n=[a-z=,0-9CD]{0,8},r=[ -~]{0,12}(,[a-z]{0,3}=?[ -~]{0,5}){0,3}"
                .prop_map(String::into_bytes),
            "c=[A-Za-z0-9+/=]{0,12},r=[ -~]{0,40}(,[a-z]=[ -~]{0,4}){0,2}(,p=[A-Za-z0-9+/=]{0,60})?"
                .prop_map(String::into_bytes),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Any client-first: a clean error or a message whose user and nonce it names.
        #[test]
        fn any_client_first_is_read_or_refused_without_panic(message in scramish()) {
            if let Ok(first) = parse_client_first(&message) {
                prop_assert!(!first.user.is_empty() && !first.nonce.is_empty());
                prop_assert!(!first.nonce.contains(','));
            }
        }

        /// Any client-final after a real server-first: refused, never a panic (no proof
        /// but the password's passes).
        #[test]
        fn any_client_final_is_refused_without_panic(message in scramish()) {
            let (exchange, _) = first(&rfc_store(), CLIENT_FIRST);
            prop_assert!(client_final(&exchange, &message).is_err());
        }
    }
}
