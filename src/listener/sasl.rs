//! SASL/PLAIN over Kafka's own requests: SaslHandshake v1 names the mechanism, then
//! SaslAuthenticate carries the PLAIN message (RFC 4616: `authzid NUL authcid NUL passwd`).
//!
//! Until a connection authenticates, the listener reads only ApiVersions and these two
//! (`dispatch::handle`). A wrong user or password is answered SASL_AUTHENTICATION_FAILED and
//! the connection is closed, as Kafka does. The log line says which was wrong but never
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
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::config::PlainCredentials;
use super::principal::Principal;
use super::request::{ConnectionState, Reply, RequestContext, SaslStage};

/// The one mechanism served.
pub const PLAIN: &str = "PLAIN";

pub fn handshake(
    ctx: &RequestContext<'_>,
    state: &mut ConnectionState,
    request: SaslHandshakeRequest,
) -> SaslHandshakeResponse {
    let offered = || vec![StrBytes::from_static_str(PLAIN)];
    if ctx.shared.config.sasl_plain.is_none() || state.sasl != SaslStage::Start {
        return SaslHandshakeResponse::default()
            .with_error_code(ResponseError::IllegalSaslState.code())
            .with_mechanisms(match ctx.shared.config.sasl_plain {
                Some(_) => offered(),
                None => Vec::new(),
            });
    }
    if ctx.version == 0 {
        tracing::info!("SaslHandshake v0 (raw SASL tokens) is not served; clients use v1");
        return SaslHandshakeResponse::default()
            .with_error_code(ResponseError::IllegalSaslState.code())
            .with_mechanisms(offered());
    }
    // Mechanism names are case-sensitive (RFC 4422), as Kafka compares them.
    if request.mechanism.as_str() != PLAIN {
        let mechanism = loggable(request.mechanism.as_str());
        tracing::info!(%mechanism, "unsupported SASL mechanism");
        return SaslHandshakeResponse::default()
            .with_error_code(ResponseError::UnsupportedSaslMechanism.code())
            .with_mechanisms(offered());
    }
    state.sasl = SaslStage::PlainChosen;
    SaslHandshakeResponse::default().with_mechanisms(offered())
}

pub fn authenticate(
    ctx: &RequestContext<'_>,
    state: &mut ConnectionState,
    request: SaslAuthenticateRequest,
) -> Reply {
    let answer = |error: ResponseError, message: &'static str| {
        Box::new(kafka_protocol::messages::ResponseKind::SaslAuthenticate(
            SaslAuthenticateResponse::default()
                .with_error_code(error.code())
                .with_error_message(Some(StrBytes::from_static_str(message))),
        ))
    };
    let credentials = match (&ctx.shared.config.sasl_plain, state.sasl) {
        (Some(credentials), SaslStage::PlainChosen) => credentials,
        (None, _) => {
            return Reply::Respond(answer(
                ResponseError::IllegalSaslState,
                "SASL is not enabled on this listener",
            ))
        }
        (Some(_), stage) => {
            // Kafka closes a connection whose SASL exchange is out of order.
            return Reply::RespondAndClose(
                answer(
                    ResponseError::IllegalSaslState,
                    "SaslAuthenticate is valid only after a PLAIN SaslHandshake, once",
                ),
                format!("SaslAuthenticate out of order ({stage:?})"),
            );
        }
    };
    match check_plain(credentials, &request.auth_bytes) {
        Ok(()) => {
            state.sasl = SaslStage::Done;
            state.authenticated = true;
            state.principal = Principal::user(&credentials.username);
            tracing::debug!(principal = %state.principal, "SASL/PLAIN authenticated");
            Reply::Respond(Box::new(
                kafka_protocol::messages::ResponseKind::SaslAuthenticate(
                    SaslAuthenticateResponse::default(),
                ),
            ))
        }
        Err(reason) => Reply::RespondAndClose(
            answer(
                ResponseError::SaslAuthenticationFailed,
                "Authentication failed: Invalid username or password",
            ),
            format!("SASL/PLAIN authentication failed: {reason}"),
        ),
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

/// Equality whose time depends only on the longer length, not on the contents.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = u8::from(a.len() != b.len());
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= std::hint::black_box(x ^ y);
    }
    diff == 0
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
