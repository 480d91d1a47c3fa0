//! DescribeUserScramCredentials and AlterUserScramCredentials: the data directory's SCRAM
//! credential store (`crate::security::scram`) managed over the wire, with Kafka's rules
//! (its `ScramControlManager`): a user named twice in one request is DUPLICATE_RESOURCE, an
//! unknown mechanism UNSUPPORTED_SASL_MECHANISM, an empty name or iterations out of 4096 to
//! 16384 UNACCEPTABLE_CREDENTIAL, deleting or describing what does not exist
//! RESOURCE_NOT_FOUND. An upsertion carries the salt and the salted password; the broker
//! derives StoredKey and ServerKey from them and keeps nothing else. A user with an error
//! changes nothing; the others' changes are written in one atomic replace of the file.
//! With ACLs on, describing needs DESCRIBE on the cluster and altering ALTER, as in Kafka.

use std::collections::{BTreeMap, HashMap};

use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::request::RequestContext;
use crate::security::acl::Operation;
use crate::security::scram::{
    check_iterations, check_user_name, ScramCredential, ScramMechanism, ScramStore, MAX_SALT_BYTES,
};

/// A per-user error: code and message.
type Refusal = (ResponseError, String);

pub fn describe(
    ctx: &RequestContext<'_>,
    request: DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    let response = DescribeUserScramCredentialsResponse::default();
    if let Err((code, message)) = ctx.check_cluster_said(Operation::Describe) {
        return response
            .with_error_code(code.code())
            .with_error_message(Some(StrBytes::from_string(message)));
    }
    let Some(live) = &ctx.shared.scram else {
        return response.with_error_code(ResponseError::UnknownServerError.code());
    };
    let store = live.current();
    let names: Vec<String> = match request.users {
        Some(users) if !users.is_empty() => users.into_iter().map(|u| u.name.to_string()).collect(),
        // Null or empty: every user with a credential.
        _ => store.users().map(|(user, _)| user.to_owned()).collect(),
    };
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for name in &names {
        *seen.entry(name).or_default() += 1;
    }
    let mut done = std::collections::HashSet::new();
    let results = names
        .iter()
        .filter(|name| done.insert(name.as_str()))
        .map(|name| describe_one(&store, name, seen[name.as_str()] > 1))
        .collect();
    response.with_results(results)
}

fn describe_one(store: &ScramStore, name: &str, twice: bool) -> DescribeUserScramCredentialsResult {
    let result =
        DescribeUserScramCredentialsResult::default().with_user(StrBytes::from(name.to_owned()));
    let refuse = |error: ResponseError, message: String| {
        result
            .clone()
            .with_error_code(error.code())
            .with_error_message(Some(StrBytes::from(message)))
    };
    if twice {
        return refuse(
            ResponseError::DuplicateResource,
            format!("Cannot describe SCRAM credentials for the same user twice in a single request: {name}"),
        );
    }
    let Some(credentials) = store.credentials(name) else {
        return refuse(
            ResponseError::ResourceNotFound,
            format!("Attempt to describe a user credential that does not exist: {name}"),
        );
    };
    let infos = credentials
        .iter()
        .map(|(mechanism, c)| {
            CredentialInfo::default()
                .with_mechanism(mechanism.kafka_type())
                .with_iterations(i32::try_from(c.iterations).unwrap_or(i32::MAX))
        })
        .collect();
    result.with_credential_infos(infos)
}

/// One user's accepted change.
enum Change {
    Delete(ScramMechanism),
    Upsert(ScramMechanism, ScramCredential),
}

pub async fn alter(
    ctx: &RequestContext<'_>,
    request: AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    let response = AlterUserScramCredentialsResponse::default();
    if let Err((code, message)) = ctx.check_cluster_said(Operation::Alter) {
        let users = (request.deletions.iter().map(|d| &d.name))
            .chain(request.upsertions.iter().map(|u| &u.name));
        let refused = users.map(|user| {
            AlterUserScramCredentialsResult::default()
                .with_user(user.clone())
                .with_error_code(code.code())
                .with_error_message(Some(StrBytes::from_string(message.clone())))
        });
        return response.with_results(refused.collect());
    }
    let Some(live) = ctx.shared.scram.clone() else {
        return response;
    };
    let store = live.current();
    // In Kafka's order: deletions, then upsertions; a user's first error stays its answer.
    let mut changes: BTreeMap<String, Change> = BTreeMap::new();
    let mut errors: BTreeMap<String, Refusal> = BTreeMap::new();
    let mut note = |name: String, change: Result<Change, Refusal>| {
        if errors.contains_key(&name) {
            return;
        }
        if changes.remove(&name).is_some() {
            let message = "A user credential cannot be altered twice in the same request";
            errors.insert(name, (ResponseError::DuplicateResource, message.into()));
            return;
        }
        match change {
            Ok(change) => {
                changes.insert(name, change);
            }
            Err(refusal) => {
                errors.insert(name, refusal);
            }
        }
    };
    for deletion in request.deletions {
        let name = deletion.name.to_string();
        let change = mechanism(&name, deletion.mechanism).and_then(|m| match store.get(&name, m) {
            Some(_) => Ok(Change::Delete(m)),
            None => Err((
                ResponseError::ResourceNotFound,
                "Attempt to delete a user credential that does not exist".into(),
            )),
        });
        note(name, change);
    }
    for upsertion in request.upsertions {
        let name = upsertion.name.to_string();
        let change = mechanism(&name, upsertion.mechanism).and_then(|m| {
            let unacceptable = |message: String| (ResponseError::UnacceptableCredential, message);
            let iterations = check_iterations(i64::from(upsertion.iterations)).map_err(|_| {
                unacceptable(match upsertion.iterations < 4096 {
                    true => "Too few iterations".into(),
                    false => "Too many iterations".into(),
                })
            })?;
            check_user_name(&name).map_err(unacceptable)?;
            if upsertion.salt.is_empty() || upsertion.salt.len() > MAX_SALT_BYTES {
                return Err(unacceptable(format!(
                    "A salt has 1 to {MAX_SALT_BYTES} bytes"
                )));
            }
            if upsertion.salted_password.len() != m.key_len() {
                return Err(unacceptable(format!(
                    "A {m} salted password has {} bytes",
                    m.key_len()
                )));
            }
            let credential = ScramCredential::from_salted_password(
                m,
                &upsertion.salted_password,
                &upsertion.salt,
                iterations,
            );
            Ok(Change::Upsert(m, credential))
        });
        note(name, change);
    }
    let mut results: Vec<AlterUserScramCredentialsResult> = Vec::new();
    if !changes.is_empty() {
        let users: Vec<String> = changes.keys().cloned().collect();
        let written = tokio::task::spawn_blocking(move || {
            live.update(|store| {
                for (name, change) in changes {
                    match change {
                        Change::Delete(m) => {
                            store.delete(&name, Some(m));
                        }
                        // Checked above: the store refuses nothing here.
                        Change::Upsert(m, credential) => {
                            let _ = store.upsert(&name, m, credential);
                        }
                    }
                }
            })
        })
        .await
        .map_err(|e| e.to_string())
        .and_then(|written| written);
        let outcome = match &written {
            Ok(()) => None,
            Err(e) => {
                tracing::error!(error = %e, "AlterUserScramCredentials: cannot write the store");
                Some((
                    ResponseError::UnknownServerError,
                    "The credential store cannot be written".to_owned(),
                ))
            }
        };
        for user in users {
            let result = AlterUserScramCredentialsResult::default().with_user(StrBytes::from(user));
            results.push(match &outcome {
                None => result,
                Some((error, message)) => result
                    .with_error_code(error.code())
                    .with_error_message(Some(StrBytes::from(message.clone()))),
            });
        }
    }
    for (user, (error, message)) in errors {
        results.push(
            AlterUserScramCredentialsResult::default()
                .with_user(StrBytes::from(user))
                .with_error_code(error.code())
                .with_error_message(Some(StrBytes::from(message))),
        );
    }
    response.with_results(results)
}

/// Kafka's `validateScramUsernameAndMechanism`.
fn mechanism(name: &str, code: i8) -> Result<ScramMechanism, Refusal> {
    if name.is_empty() {
        return Err((
            ResponseError::UnacceptableCredential,
            "Username must not be empty".into(),
        ));
    }
    ScramMechanism::from_kafka_type(code).ok_or((
        ResponseError::UnsupportedSaslMechanism,
        "Unknown SCRAM mechanism".into(),
    ))
}
