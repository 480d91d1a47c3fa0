//! What every request goes through, and how a refusal is answered: [`ApiError`] (a status
//! and `{"error": "..."}`), and [`Caller`], which every handler takes first: it checks the
//! credentials when the listener has SASL (HTTP Basic: its PLAIN user or a SCRAM user; 401 with
//! `WWW-Authenticate: Basic realm="nanokafka"`), refuses a URL above [`MAX_URL_BYTES`] (414),
//! marks the API as in use for the sampler, and carries the peer address the writes log.
//!
//! It also keeps other web pages out (`same_origin`), since a browser on the operator's
//! machine can reach a loopback console: a console bound to loopback answers only requests
//! addressed to a loopback host (a page of another site that rebinds its DNS name to
//! 127.0.0.1 sends its own name as `Host`), and a write from a browser must come from the
//! console's own origin (`Origin`). Writes take JSON bodies only (`routes`), which a page of
//! another site cannot send without a CORS preflight the console does not grant.

use std::future::{ready, Ready};
use std::net::SocketAddr;
use std::sync::{Arc, PoisonError};

use actix_web::http::{header, StatusCode};
use actix_web::{web, FromRequest, HttpRequest, HttpResponse, ResponseError};
use base64::Engine as _;
use serde_json::json;

use super::Console;
use crate::security::scram::{self, ScramCredential, ScramMechanism, ScramStore};

/// The longest URL (path and query string) accepted.
pub(super) const MAX_URL_BYTES: usize = 8 << 10;
/// The largest JSON body accepted.
pub(super) const MAX_BODY_BYTES: usize = 1 << 20;

/// An error answered as `{"error": "..."}` with its status.
#[derive(Debug)]
pub(crate) struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
        }
    }
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }

    pub(super) fn bad_body(e: &actix_web::error::JsonPayloadError) -> Self {
        use actix_web::error::JsonPayloadError as E;
        match e {
            E::OverflowKnownLength { .. } | E::Overflow { .. } => Self::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("the body is larger than {MAX_BODY_BYTES} bytes"),
            ),
            E::ContentType => Self::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "the body must be JSON, sent as Content-Type: application/json",
            ),
            other => Self::bad_request(format!("bad JSON body: {other}")),
        }
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        self.status
    }
    fn error_response(&self) -> HttpResponse {
        let mut response = HttpResponse::build(self.status);
        if self.status == StatusCode::UNAUTHORIZED {
            response.insert_header((header::WWW_AUTHENTICATE, "Basic realm=\"nanokafka\""));
        }
        response.json(json!({ "error": self.message }))
    }
}

impl From<crate::error::Error> for ApiError {
    /// The broker's refusals as HTTP: what does not exist is 404, what is refused 400 or 409.
    fn from(e: crate::error::Error) -> Self {
        use crate::error::Error as E;
        let status = match &e {
            E::UnknownTopic { .. } | E::UnknownPartition { .. } | E::UnknownGroup { .. } => {
                StatusCode::NOT_FOUND
            }
            E::InvalidArgument { .. }
            | E::InvalidTopicName { .. }
            | E::InvalidConfig { .. }
            | E::KeyRequired { .. }
            | E::RecordTooLarge { .. } => StatusCode::BAD_REQUEST,
            E::TopicExists { .. } | E::GroupNotEmpty { .. } => StatusCode::CONFLICT,
            E::BrokerStopped => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        Self::new(status, e.to_string())
    }
}

/// Refuses (403) a request a page of another site could have made: to a loopback console, a
/// `Host` that is not a loopback name or address; for a write, an `Origin` that is not the
/// console's own (`http(s)://` + its `Host`). Requests without the header (scripts, curl)
/// pass.
fn same_origin(req: &HttpRequest, loopback: bool) -> Result<(), ApiError> {
    let refuse = |why: String| Err(ApiError::new(StatusCode::FORBIDDEN, why));
    let host = req
        .headers()
        .get(header::HOST)
        .map(|h| h.to_str().unwrap_or(""));
    if let Some(host) = host.filter(|_| loopback) {
        if !is_loopback_host(host) {
            return refuse(format!(
                "the console is bound to loopback and answers only requests to a loopback \
                 host, not {host:?}"
            ));
        }
    }
    let reads = matches!(
        *req.method(),
        actix_web::http::Method::GET | actix_web::http::Method::HEAD
    );
    let Some(origin) = req.headers().get(header::ORIGIN).filter(|_| !reads) else {
        return Ok(());
    };
    let origin = origin.to_str().unwrap_or("");
    let own = host.is_some_and(|host| {
        origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"))
            == Some(host)
    });
    match own {
        true => Ok(()),
        false => refuse(format!(
            "a write from another origin ({origin:?}) is refused"
        )),
    }
}

/// `localhost` or a loopback address, with or without a port (`[::1]:8080` included).
fn is_loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(bracketed) => bracketed.split_once(']').map_or("", |(ip, _)| ip),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Who asked: admitted (credentials checked, URL within its cap) and where from.
#[derive(Debug)]
pub(crate) struct Caller {
    pub peer: Option<SocketAddr>,
    pub console: web::Data<Console>,
}

impl FromRequest for Caller {
    type Error = ApiError;
    type Future = Ready<Result<Caller, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut actix_web::dev::Payload) -> Self::Future {
        ready(admit(req))
    }
}

fn admit(req: &HttpRequest) -> Result<Caller, ApiError> {
    let console = req
        .app_data::<web::Data<Console>>()
        .cloned()
        .ok_or_else(|| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "console not set up"))?;
    let (plain, scram) = (&console.facts.credentials, &console.facts.scram);
    if plain.is_some() || scram.is_some() {
        let given = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(basic_credentials);
        let admitted = given.is_some_and(|(user, password)| {
            let plain_ok = plain.as_ref().is_some_and(|credentials| {
                // Both compared whole, in constant time, so the timing tells neither.
                let user_ok = constant_time_eq(user.as_bytes(), credentials.username.as_bytes());
                let password_ok =
                    constant_time_eq(password.as_bytes(), credentials.password.as_bytes());
                user_ok & password_ok
            });
            plain_ok
                || scram.as_ref().is_some_and(|users| {
                    let now_ms = console.facts.clock.now_ms();
                    (console.scram_login).admits(&users.current(), &user, &password, now_ms)
                })
        });
        if !admitted {
            return Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                "the console asks for a user and password of the listener's SASL",
            ));
        }
    }
    same_origin(req, console.loopback)?;
    let url_len = req.uri().path().len() + req.uri().query().map_or(0, str::len);
    if url_len > MAX_URL_BYTES {
        return Err(ApiError::new(
            StatusCode::URI_TOO_LONG,
            format!("the URL is longer than {MAX_URL_BYTES} bytes"),
        ));
    }
    if req.path().starts_with("/api/") {
        console.sampler.touch();
    }
    Ok(Caller {
        peer: req.peer_addr(),
        console,
    })
}

/// SCRAM users' passwords checked for the console's HTTP Basic. The broker keeps no password,
/// only each credential's StoredKey, so a check runs PBKDF2 (thousands of HMACs); a browser
/// sends the same header with every request, so the last login admitted is remembered, by a
/// hash of user and password, for as long as the credential store does not change. So that
/// wrong passwords cost the broker little CPU, a login that does not match is followed by
/// [`FAILED_LOGIN_PAUSE_MS`] in which no other login is checked (each is refused unchecked);
/// the remembered login still passes.
#[derive(Debug, Default)]
pub(crate) struct ScramLogin {
    state: std::sync::Mutex<LoginState>,
}

#[derive(Debug, Default)]
struct LoginState {
    /// The store the last admitted login was checked against, and the login's hash.
    admitted: Option<(Arc<ScramStore>, Vec<u8>)>,
    /// No login is checked before this time (clock milliseconds).
    next_check_ms: u64,
}

/// After a login that does not match, no other is checked for this long: at most ten PBKDF2
/// runs a second are spent on wrong passwords.
pub(crate) const FAILED_LOGIN_PAUSE_MS: u64 = 100;

impl ScramLogin {
    /// Whether `password` is `user`'s, for one of its SCRAM mechanisms in `store`, checked at
    /// `now_ms` (false, unchecked, within the pause after a failed login).
    pub(crate) fn admits(
        &self,
        store: &Arc<ScramStore>,
        user: &str,
        password: &str,
        now_ms: u64,
    ) -> bool {
        let login = ScramMechanism::ScramSha256.hash(format!("{user}\0{password}").as_bytes());
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((seen, admitted)) = state.admitted.as_ref() {
            if Arc::ptr_eq(seen, store) && scram::constant_time_eq(admitted, &login) {
                return true;
            }
        }
        if now_ms < state.next_check_ms {
            return false;
        }
        let matches = store.credentials(user).is_some_and(|credentials| {
            credentials.iter().any(|(&mechanism, credential)| {
                let given = ScramCredential::from_password(
                    mechanism,
                    password.as_bytes(),
                    &credential.salt,
                    credential.iterations,
                );
                scram::constant_time_eq(&given.stored_key, &credential.stored_key)
            })
        });
        if matches {
            state.admitted = Some((store.clone(), login));
        } else {
            state.next_check_ms = now_ms.saturating_add(FAILED_LOGIN_PAUSE_MS);
        }
        matches
    }
}

/// `(user, password)` of an `Authorization: Basic base64(user:password)` header.
fn basic_credentials(value: &str) -> Option<(String, String)> {
    let (scheme, encoded) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
    let (user, password) = decoded.split_once(':')?;
    Some((user.to_owned(), password.to_owned()))
}

/// Whether `a == b`, in a time that depends on their lengths only.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = u8::from(a.len() != b.len());
    for i in 0..a.len().max(b.len()) {
        diff |= a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0);
    }
    diff == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_credentials_and_comparison() {
        let header = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode("alice:s3:cret")
        );
        assert_eq!(
            basic_credentials(&header),
            Some(("alice".into(), "s3:cret".into()))
        );
        assert_eq!(basic_credentials("Bearer xyz"), None);
        assert_eq!(basic_credentials("Basic %%%"), None);
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
        assert!(!constant_time_eq(b"", b"a"));
    }

    #[test]
    fn loopback_hosts_are_names_and_addresses_of_this_machine_only() {
        for host in [
            "localhost",
            "LOCALHOST:8080",
            "127.0.0.1",
            "127.0.0.1:8080",
            "127.1.2.3:80",
        ]
        .into_iter()
        .chain(["[::1]", "[::1]:8080"])
        {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in [
            "evil.example",
            "evil.example:8080",
            "localhost.evil.example",
            "10.0.0.1:8080",
            "[::2]:8080",
            "",
        ] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }

    #[test]
    fn a_failed_scram_login_pauses_other_checks_but_not_the_admitted_login() {
        let mut store = ScramStore::new().unwrap();
        let mechanism = ScramMechanism::ScramSha256;
        for (user, password) in [("alice", "s3cret"), ("bob", "hunter2")] {
            let credential =
                ScramCredential::from_password(mechanism, password.as_bytes(), b"salt", 4096);
            store.upsert(user, mechanism, credential).unwrap();
        }
        let store = Arc::new(store);
        let login = ScramLogin::default();
        assert!(login.admits(&store, "alice", "s3cret", 1_000));
        assert!(!login.admits(&store, "alice", "wrong", 1_010));
        // Within the pause: bob's right password is refused unchecked, alice's remembered
        // login passes.
        assert!(!login.admits(&store, "bob", "hunter2", 1_010 + FAILED_LOGIN_PAUSE_MS - 1));
        assert!(login.admits(&store, "alice", "s3cret", 1_020));
        assert!(login.admits(&store, "bob", "hunter2", 1_010 + FAILED_LOGIN_PAUSE_MS));
        // A changed store (another Arc) checks again.
        let changed = Arc::new((*store).clone());
        assert!(!login.admits(&changed, "alice", "s3cret!", 5_000));
        assert!(!login.admits(&changed, "alice", "s3cret", 5_001));
    }
}
