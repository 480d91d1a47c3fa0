//! The server side of a SCRAM exchange (RFC 5802, RFC 7677), as Kafka's `ScramSaslServer`
//! runs it: client-first → server-first, client-final → server-final, each in one
//! SaslAuthenticate.
//!
//! No channel binding: the gs2 header is `n,,` or `y,,` (with an optional `a=` authzid,
//! which must name the user). Messages are read strictly and capped at
//! [`MAX_MESSAGE_BYTES`]. The proof is checked with `StoredKey` (one HMAC, one hash): the
//! broker never runs PBKDF2 for a login. An unknown user gets a decoy credential (a salt
//! derived from its name and the store's secret) and fails at the proof like a wrong
//! password, so the exchange does not tell which users exist. Every error is a reason for
//! the log: it never carries the proof nor client text (only lengths). The listener's
//! `sasl` module runs it on a connection.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;

use super::scram::{constant_time_eq, ScramCredential, ScramMechanism, ScramStore};

/// The longest SCRAM message read; a client's two messages are each well under 1 KiB.
pub const MAX_MESSAGE_BYTES: usize = 4096;
/// Random bytes in the server's part of the nonce (base64 in the message).
const SERVER_NONCE_BYTES: usize = 24;

/// A client-first message, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientFirst {
    /// `n,,` (or `y,,`, or with `a=`): echoed in the client-final's `c=`.
    pub gs2_header: String,
    /// The user, unescaped.
    pub user: String,
    pub nonce: String,
    /// The message after the gs2 header: the start of the AuthMessage.
    pub bare: String,
}

/// What a connection keeps between the server-first and the client-final.
#[derive(Debug)]
pub struct ScramExchange {
    mechanism: ScramMechanism,
    user: String,
    gs2_header: String,
    /// client-first-bare "," server-first: the AuthMessage's start.
    auth_prefix: String,
    nonce: String,
    credential: ScramCredential,
}

impl ScramExchange {
    pub fn user(&self) -> &str {
        &self.user
    }

    pub fn mechanism(&self) -> ScramMechanism {
        self.mechanism
    }
}

/// Reads the client-first message.
pub fn parse_client_first(message: &[u8]) -> Result<ClientFirst, String> {
    let text = message_text(message)?;
    let mut parts = text.splitn(3, ',');
    let (Some(cbind), Some(authzid), Some(bare)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err("a client-first message without a gs2 header".into());
    };
    match cbind {
        "n" | "y" => {}
        _ if cbind.starts_with("p=") => return Err("channel binding is not supported".into()),
        _ => {
            return Err(format!(
                "a bad gs2 channel-binding flag ({} bytes)",
                cbind.len()
            ))
        }
    }
    let authzid = match authzid {
        "" => None,
        _ => Some(
            authzid
                .strip_prefix("a=")
                .ok_or("a gs2 authzid without `a=`")
                .and_then(|name| unescape(name).ok_or("a bad saslname in the authzid"))?,
        ),
    };
    let mut fields = bare.split(',');
    let user = match fields.next() {
        Some(f) if f.starts_with("m=") => {
            return Err("mandatory extensions are not supported".into())
        }
        Some(f) => f
            .strip_prefix("n=")
            .and_then(unescape)
            .filter(|user| !user.is_empty())
            .ok_or("a client-first message without a user (`n=`)")?,
        None => unreachable!("split yields at least one field"),
    };
    let nonce = fields
        .next()
        .and_then(|f| f.strip_prefix("r="))
        .filter(|nonce| is_nonce(nonce))
        .ok_or("a client-first message without a nonce (`r=`)")?;
    for extension in fields {
        let (name, _) = extension
            .split_once('=')
            .filter(|(name, _)| !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric()))
            .ok_or("a malformed extension")?;
        // Kafka's delegation tokens log in with `tokenauth=true`; none are issued here.
        if name == "tokenauth" {
            return Err("delegation tokens are not supported".into());
        }
    }
    if authzid.as_ref().is_some_and(|a| *a != user) {
        return Err("an authorization id other than the user".into());
    }
    Ok(ClientFirst {
        gs2_header: text[..text.len() - bare.len()].to_owned(),
        nonce: nonce.to_owned(),
        user,
        bare: bare.to_owned(),
    })
}

/// Answers a client-first message: the exchange to keep and the server-first message. An
/// unknown user gets its decoy from `store`.
pub fn server_first(
    mechanism: ScramMechanism,
    client: ClientFirst,
    store: &ScramStore,
    server_nonce: &str,
) -> (ScramExchange, String) {
    let credential = match store.get(&client.user, mechanism) {
        Some(credential) => credential.clone(),
        None => store.decoy(&client.user, mechanism),
    };
    let nonce = format!("{}{server_nonce}", client.nonce);
    let message = format!(
        "r={nonce},s={},i={}",
        BASE64.encode(&credential.salt),
        credential.iterations
    );
    let exchange = ScramExchange {
        mechanism,
        user: client.user,
        gs2_header: client.gs2_header,
        auth_prefix: format!("{},{message}", client.bare),
        nonce,
        credential,
    };
    (exchange, message)
}

/// A fresh server nonce: random bytes from the OS generator, in hex (alphanumeric, as
/// Kafka's are).
pub fn server_nonce() -> Result<String, String> {
    let bytes = super::scram::random_bytes(SERVER_NONCE_BYTES)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Checks the client-final message; the server-final message when the proof is right.
pub fn client_final(exchange: &ScramExchange, message: &[u8]) -> Result<String, String> {
    let text = message_text(message)?;
    let (without_proof, proof) = text
        .rsplit_once(",p=")
        .ok_or("a client-final message without a proof (`p=`)")?;
    let mut fields = without_proof.split(',');
    let binding = fields
        .next()
        .and_then(|f| f.strip_prefix("c="))
        .and_then(|b| BASE64.decode(b).ok())
        .ok_or("a client-final message without channel binding data (`c=`)")?;
    if binding != exchange.gs2_header.as_bytes() {
        return Err("channel binding data that is not the client-first's gs2 header".into());
    }
    let nonce = fields
        .next()
        .and_then(|f| f.strip_prefix("r="))
        .ok_or("a client-final message without a nonce (`r=`)")?;
    // Kafka's check (`endsWith`): librdkafka before 2.x's fix sends the client nonce twice
    // (its own, then the server-first's `r=`, which starts with it). The proof still covers
    // the nonce sent, through the AuthMessage.
    if !nonce.ends_with(&exchange.nonce) {
        return Err("a client-final nonce not ending with the server-first's".into());
    }
    if fields.any(|f| !f.contains('=')) {
        return Err("a malformed extension".into());
    }
    let mechanism = exchange.mechanism;
    let proof = BASE64
        .decode(proof)
        .ok()
        .filter(|p| p.len() == mechanism.key_len())
        .ok_or("a proof that is not a base64 key")?;
    let auth_message = format!("{},{without_proof}", exchange.auth_prefix);
    let credential = &exchange.credential;
    let signature = mechanism.hmac_of(&credential.stored_key, auth_message.as_bytes());
    let client_key: Vec<u8> = proof.iter().zip(&signature).map(|(p, s)| p ^ s).collect();
    if !constant_time_eq(&mechanism.hash(&client_key), &credential.stored_key) {
        return Err(format!(
            "wrong password or unknown user ({} bytes) with {mechanism}",
            exchange.user.len()
        ));
    }
    let server_signature = mechanism.hmac_of(&credential.server_key, auth_message.as_bytes());
    Ok(format!("v={}", BASE64.encode(server_signature)))
}

fn message_text(message: &[u8]) -> Result<&str, String> {
    if message.len() > MAX_MESSAGE_BYTES {
        return Err(format!(
            "a SCRAM message of {} bytes (at most {MAX_MESSAGE_BYTES})",
            message.len()
        ));
    }
    std::str::from_utf8(message).map_err(|_| "a SCRAM message that is not UTF-8".to_owned())
}

/// RFC 5802's `printable` (no comma), at least one character.
fn is_nonce(nonce: &str) -> bool {
    !nonce.is_empty()
        && nonce
            .bytes()
            .all(|b| (0x21..=0x7e).contains(&b) && b != b',')
}

/// A saslname with `=2C` and `=3D` unescaped; `None` for any other `=` or a comma.
fn unescape(name: &str) -> Option<String> {
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(i) = rest.find(['=', ',']) {
        out.push_str(&rest[..i]);
        match rest.get(i..i + 3) {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return None,
        }
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    Some(out)
}

#[cfg(test)]
#[path = "scram_exchange_tests.rs"]
mod tests;
