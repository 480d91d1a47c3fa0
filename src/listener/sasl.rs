//! SASL over Kafka's own requests: SaslHandshake v1 names the mechanism, then
//! SaslAuthenticate carries the PLAIN message (RFC 4616: `authzid NUL authcid NUL passwd`),
//! or SCRAM-SHA-256/512's client-first then client-final message (the exchange is
//! `crate::security::scram_exchange`), each answered
//! with the server's message in `auth_bytes`. The handshake lists the mechanisms enabled.
//!
//! Until a connection authenticates, the listener reads only ApiVersions and these two
//! (`dispatch::handle`). A wrong user or password, or a malformed SCRAM message, is answered
//! SASL_AUTHENTICATION_FAILED after the failed-authentication delay (a timer on that
//! connection alone, Kafka's `connection.failed.authentication.delay.ms`) and the
//! connection is closed, as Kafka does. The log line says which was wrong but never
//! carries a user name the client chose (only its length), and any other client text it
//! carries is escaped and cut short (`loggable`).
//!
//! Handshake v0 is advertised but answered ILLEGAL_SASL_STATE: after a v0 handshake the client
//! sends raw SASL tokens outside Kafka's framing, which would need the connection's reader to
//! switch framing mid-stream. librdkafka enables SASL only if the broker lists v0, then uses
//! v1 with SaslAuthenticate, as do Java clients since Kafka 1.0 and kafka-python; so only a
//! client too old for SaslAuthenticate meets the error, and it fails with a reason.
//!
//! A listener without SASL answers both ILLEGAL_SASL_STATE, as a Kafka PLAINTEXT listener
//! does, so that a client configured for SASL fails with a reason rather than a closed socket.
//! Re-authentication (KIP-368) is not offered: `session_lifetime_ms` is 0.

use kafka_protocol::messages::{
    ResponseKind, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::config::PlainCredentials;
use super::principal::Principal;
use super::request::{ConnectionState, Reply, RequestContext, SaslStage};
use crate::security::scram::{constant_time_eq, ScramMechanism};
use crate::security::scram_exchange as scram;

/// The PLAIN mechanism's name.
pub const PLAIN: &str = "PLAIN";

/// The mechanisms this listener offers, PLAIN first.
fn offered(ctx: &RequestContext<'_>) -> Vec<StrBytes> {
    let config = &ctx.shared.config;
    let plain = config.sasl_plain.as_ref().map(|_| PLAIN);
    let scram = ScramMechanism::ALL
        .into_iter()
        .filter(|_| config.sasl_scram)
        .map(ScramMechanism::name);
    plain
        .into_iter()
        .chain(scram)
        .map(StrBytes::from_static_str)
        .collect()
}

pub fn handshake(
    ctx: &RequestContext<'_>,
    state: &mut ConnectionState,
    request: SaslHandshakeRequest,
) -> SaslHandshakeResponse {
    let offered = offered(ctx);
    let refuse = |error: ResponseError| {
        SaslHandshakeResponse::default()
            .with_error_code(error.code())
            .with_mechanisms(offered.clone())
    };
    if !ctx.shared.config.sasl_required() || state.sasl != SaslStage::Start {
        return refuse(ResponseError::IllegalSaslState);
    }
    if ctx.version == 0 {
        tracing::info!("SaslHandshake v0 (raw SASL tokens) is not served; clients use v1");
        return refuse(ResponseError::IllegalSaslState);
    }
    // Mechanism names are case-sensitive (RFC 4422), as Kafka compares them.
    let chosen = request.mechanism.as_str();
    state.sasl = match ScramMechanism::from_name(chosen) {
        _ if !offered.iter().any(|m| m.as_str() == chosen) => {
            let mechanism = loggable(chosen);
            tracing::info!(%mechanism, "unsupported SASL mechanism");
            return refuse(ResponseError::UnsupportedSaslMechanism);
        }
        Some(mechanism) => SaslStage::ScramChosen(mechanism),
        None => SaslStage::PlainChosen,
    };
    SaslHandshakeResponse::default().with_mechanisms(offered)
}

/// A SaslAuthenticate answer carrying `bytes`.
fn accepted(bytes: Vec<u8>) -> Reply {
    Reply::Respond(Box::new(ResponseKind::SaslAuthenticate(
        SaslAuthenticateResponse::default().with_auth_bytes(bytes.into()),
    )))
}

/// SASL_AUTHENTICATION_FAILED, sent after the failed-authentication delay, then the close;
/// `reason` is logged.
fn failed(reason: String) -> Reply {
    Reply::AuthenticationFailed(
        Box::new(ResponseKind::SaslAuthenticate(
            SaslAuthenticateResponse::default()
                .with_error_code(ResponseError::SaslAuthenticationFailed.code())
                .with_error_message(Some(StrBytes::from_static_str(
                    "Authentication failed: Invalid username or password",
                ))),
        )),
        reason,
    )
}

pub fn authenticate(
    ctx: &RequestContext<'_>,
    state: &mut ConnectionState,
    request: SaslAuthenticateRequest,
) -> Reply {
    let illegal = |message: &'static str| {
        Box::new(ResponseKind::SaslAuthenticate(
            SaslAuthenticateResponse::default()
                .with_error_code(ResponseError::IllegalSaslState.code())
                .with_error_message(Some(StrBytes::from_static_str(message))),
        ))
    };
    if !ctx.shared.config.sasl_required() {
        return Reply::Respond(illegal("SASL is not enabled on this listener"));
    }
    let bytes = &request.auth_bytes;
    match (state.sasl, &ctx.shared.config.sasl_plain) {
        (SaslStage::PlainChosen, Some(credentials)) => match check_plain(credentials, bytes) {
            Ok(()) => {
                authenticated(state, &credentials.username, PLAIN);
                accepted(Vec::new())
            }
            Err(reason) => failed(format!("SASL/PLAIN authentication failed: {reason}")),
        },
        (SaslStage::ScramChosen(mechanism), _) => scram_first(ctx, state, mechanism, bytes),
        (SaslStage::ScramFinal, _) => scram_final(state, bytes),
        // Kafka closes a connection whose SASL exchange is out of order.
        (stage, _) => Reply::RespondAndClose(
            illegal("SaslAuthenticate is valid only after a SaslHandshake, once per step"),
            format!("SaslAuthenticate out of order ({stage:?})"),
        ),
    }
}

fn authenticated(state: &mut ConnectionState, user: &str, mechanism: &str) {
    state.sasl = SaslStage::Done;
    state.authenticated = true;
    state.principal = Principal::user(user);
    tracing::debug!(principal = %state.principal, mechanism, "SASL authenticated");
}

/// The client-first message: answer the server-first, keep the exchange.
fn scram_first(
    ctx: &RequestContext<'_>,
    state: &mut ConnectionState,
    mechanism: ScramMechanism,
    message: &[u8],
) -> Reply {
    let Some(store) = &ctx.shared.scram else {
        return failed("SCRAM without a credential store".into());
    };
    let client = match scram::parse_client_first(message) {
        Ok(client) => client,
        Err(reason) => return failed(format!("{mechanism} client-first refused: {reason}")),
    };
    let nonce = match scram::server_nonce() {
        Ok(nonce) => nonce,
        Err(reason) => return failed(format!("{mechanism}: {reason}")),
    };
    let (exchange, server_first) = scram::server_first(mechanism, client, &store.current(), &nonce);
    state.sasl = SaslStage::ScramFinal;
    state.scram = Some(Box::new(exchange));
    accepted(server_first.into_bytes())
}

/// The client-final message: the proof checked, the server-final answered.
fn scram_final(state: &mut ConnectionState, message: &[u8]) -> Reply {
    let Some(exchange) = state.scram.take() else {
        return failed("SCRAM client-final without its exchange".into());
    };
    let mechanism = exchange.mechanism();
    match scram::client_final(&exchange, message) {
        Ok(server_final) => {
            authenticated(state, exchange.user(), mechanism.name());
            accepted(server_final.into_bytes())
        }
        Err(reason) => failed(format!("{mechanism} authentication failed: {reason}")),
    }
}

/// Checks a PLAIN message against the configured user. The reason, which is logged, never
/// includes the password nor a user name the client chose; user and password are compared in
/// time independent of where they differ.
pub fn check_plain(credentials: &PlainCredentials, message: &[u8]) -> Result<(), String> {
    let mut parts = message.split(|&b| b == 0);
    let (Some(authzid), Some(user), Some(password), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("not a PLAIN message (authzid NUL user NUL password)".into());
    };
    let user_ok = constant_time_eq(user, credentials.username.as_bytes());
    let password_ok = constant_time_eq(password, credentials.password.as_bytes());
    // The reason is logged. A user name other than the configured one is the client's and
    // may be anything, a mistyped password or megabytes, so only its length is told (Kafka
    // logs none of it); the configured one is known already.
    match (user_ok, password_ok) {
        (true, true) => {}
        (true, false) => {
            return Err(format!(
                "wrong password for user {}",
                loggable(&credentials.username)
            ))
        }
        (false, _) => return Err(format!("unknown user ({} bytes)", user.len())),
    }
    // Acting as another user is not supported (Kafka's PLAIN server refuses it too).
    if !authzid.is_empty() && authzid != user {
        return Err("an authorization id other than the user".into());
    }
    Ok(())
}

/// The most characters of client-chosen text a log line carries.
const LOGGED_CHARS: usize = 32;

/// Client-chosen text as a log line may carry it: escaped (no control characters or forged
/// line breaks) and cut to [`LOGGED_CHARS`] characters, with its length when cut, so a client
/// cannot fill the log by repeating a request.
pub fn loggable(text: &str) -> String {
    let mut chars = text.chars();
    let prefix: String = chars.by_ref().take(LOGGED_CHARS).collect();
    match chars.next() {
        None => format!("{prefix:?}"),
        Some(_) => format!("{prefix:?}… ({} bytes)", text.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alice() -> PlainCredentials {
        PlainCredentials {
            username: "alice".into(),
            password: "s3cret".into(),
        }
    }

    #[test]
    fn a_plain_message_with_the_right_user_and_password_passes() {
        assert_eq!(check_plain(&alice(), b"\0alice\0s3cret"), Ok(()));
        assert_eq!(check_plain(&alice(), b"alice\0alice\0s3cret"), Ok(()));
    }

    #[test]
    fn anything_else_fails_without_naming_the_password() {
        for message in [
            &b"\0alice\0wrong"[..],
            b"\0bob\0s3cret",
            b"\0alice\0s3cre",
            b"\0alice\0s3cret\0",
            b"\0alice\0s3cretX",
            b"\0alice",
            b"",
            b"\0\0",
            b"bob\0alice\0s3cret",
            b"\0ALICE\0s3cret",
        ] {
            let err = check_plain(&alice(), message).unwrap_err();
            assert!(!err.contains("s3cret"), "{err}");
        }
    }

    #[test]
    fn a_failed_login_reason_holds_no_client_bytes_however_long() {
        // The reason is logged: a password typed as the user name, or megabytes of one,
        // must not reach the log.
        let mut message = b"\0".to_vec();
        message.extend(std::iter::repeat_n(b'u', 5 << 20));
        message.extend_from_slice(b"\0s3cret");
        let err = check_plain(&alice(), &message).unwrap_err();
        assert!(err.len() < 200, "{} bytes: {}", err.len(), &err[..200]);
        assert!(!err.contains("uuuu"), "{err}");
        let err = check_plain(&alice(), b"\0hunter2\0s3cret").unwrap_err();
        assert!(!err.contains("hunter2"), "{err}");
        // The configured user is not the client's to hide: a wrong password for it says so.
        let err = check_plain(&alice(), b"\0alice\0wrong").unwrap_err();
        assert!(err.contains("alice"), "{err}");
    }

    #[test]
    fn client_text_in_a_log_line_is_a_bounded_escaped_prefix() {
        assert_eq!(loggable("PLAIN"), "\"PLAIN\"");
        assert_eq!(loggable("a\nb\u{1b}"), "\"a\\nb\\u{1b}\"");
        let long = loggable(&"x".repeat(100_000));
        assert!(long.len() < 100, "{long}");
        assert!(long.ends_with("… (100000 bytes)"), "{long}");
    }

    #[test]
    fn constant_time_eq_is_equality() {
        assert!(constant_time_eq(b"", b""));
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
        assert!(!constant_time_eq(b"", b"\0"));
    }
}
