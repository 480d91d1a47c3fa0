//! DescribeClientQuotas's filter and AlterClientQuotas's changes, with Kafka's rules
//! (its `ClientQuotasImage.describe` and `ClientQuotaControlManager`).

use super::{EntityName, QuotaConfig, QuotaEntity, QuotaKey, CLIENT_ID, IP, USER};

/// Why a request is refused, and the error Kafka answers with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdminError {
    /// INVALID_REQUEST.
    InvalidRequest(String),
    /// UNSUPPORTED_VERSION: an entity type Kafka does not know.
    UnsupportedEntityType(String),
}

/// How a filter component matches an entity's side (Kafka's `match_type`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Match {
    /// 0: exactly this name.
    Exact(String),
    /// 1: the default.
    Default,
    /// 2: any name or the default, as long as the entity has this type.
    Specified,
}

impl Match {
    /// Kafka's `(match_type, match)`.
    ///
    /// # Errors
    /// INVALID_REQUEST for a match string where none belongs, or a missing one.
    pub fn from_wire(match_type: i8, name: Option<&str>) -> Result<Self, AdminError> {
        let invalid = |s: &str| Err(AdminError::InvalidRequest(s.to_owned()));
        match (match_type, name) {
            (0, Some(n)) => Ok(Match::Exact(n.to_owned())),
            (0, None) => {
                invalid("Request specified MATCH_TYPE_EXACT, but set match string to null.")
            }
            (1, None) => Ok(Match::Default),
            (1, Some(_)) => {
                invalid("Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
            }
            (2, None) => Ok(Match::Specified),
            (2, Some(_)) => invalid(
                "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.",
            ),
            (other, _) => Err(AdminError::InvalidRequest(format!(
                "Unknown match type {other}"
            ))),
        }
    }
}

/// An entity DescribeClientQuotas returns, with its quotas.
pub type Described = (QuotaEntity, Vec<(QuotaKey, f64)>);

/// The entities a DescribeClientQuotas filter selects, with their values. `strict`: only
/// entities with no type beyond the filter's.
///
/// # Errors
/// Kafka's refusals of a filter (an empty or repeated type, an unknown type, `ip` mixed with
/// `user` or `client-id`).
pub fn describe(
    config: &QuotaConfig,
    components: &[(String, Match)],
    strict: bool,
) -> Result<Vec<Described>, AdminError> {
    let mut filter: Vec<(&str, &Match)> = Vec::new();
    for (entity_type, m) in components {
        if entity_type.is_empty() {
            return Err(AdminError::InvalidRequest(
                "Invalid empty entity type.".into(),
            ));
        }
        if filter.iter().any(|(t, _)| t == entity_type) {
            return Err(AdminError::InvalidRequest(format!(
                "Entity type {entity_type} cannot appear more than once in the filter."
            )));
        }
        if ![USER, CLIENT_ID, IP].contains(&entity_type.as_str()) {
            return Err(AdminError::UnsupportedEntityType(format!(
                "Unsupported entity type {entity_type}"
            )));
        }
        filter.push((entity_type, m));
    }
    let has = |t: &str| filter.iter().any(|(ft, _)| *ft == t);
    if has(IP) && (has(USER) || has(CLIENT_ID)) {
        return Err(AdminError::InvalidRequest(
            "Invalid entity filter component combination. IP filter component should not be \
             used with user or clientId filter component."
                .into(),
        ));
    }
    let selected = config
        .entries()
        .filter(|(entity, _)| matches(entity, &filter, strict))
        .map(|(entity, values)| {
            let values = values.iter().map(|(k, v)| (*k, *v)).collect();
            (entity.clone(), values)
        })
        .collect();
    Ok(selected)
}

fn matches(entity: &QuotaEntity, filter: &[(&str, &Match)], strict: bool) -> bool {
    let sides = [(USER, &entity.user), (CLIENT_ID, &entity.client_id)];
    if strict && sides.iter().filter(|(_, n)| n.is_some()).count() != filter.len() {
        return false;
    }
    filter.iter().all(|(entity_type, m)| {
        let side = sides
            .iter()
            .find(|(t, _)| t == entity_type)
            .and_then(|(_, n)| n.as_ref());
        match (m, side) {
            (_, None) => false,
            (Match::Specified, Some(_)) => true,
            (Match::Default, Some(n)) => *n == EntityName::Default,
            (Match::Exact(want), Some(n)) => *n == EntityName::Named(want.clone()),
        }
    })
}

/// One operation of an AlterClientQuotas entry: set `key` to a value, or remove it (`None`).
pub type Op = (String, Option<f64>);

/// Applies one AlterClientQuotas entry to `config`: all its operations, or (on a refusal)
/// none of them.
///
/// # Errors
/// INVALID_REQUEST for an unknown key, a value Kafka refuses, or a key given twice.
pub fn alter(config: &mut QuotaConfig, entity: &QuotaEntity, ops: &[Op]) -> Result<(), AdminError> {
    let invalid = AdminError::InvalidRequest;
    let mut changes = Vec::with_capacity(ops.len());
    for (name, value) in ops {
        let key = QuotaKey::parse(name)
            .ok_or_else(|| invalid(format!("Invalid configuration key {name}")))?;
        if changes.iter().any(|(k, _)| *k == key) {
            return Err(invalid(format!("Duplicate quota key {name}")));
        }
        if let Some(value) = value {
            key.validate(*value).map_err(invalid)?;
        }
        changes.push((key, *value));
    }
    for (key, value) in changes {
        config.set(entity, key, value);
    }
    Ok(())
}
