//! Who a connection acts as, in Kafka's form `User:<name>`.
//!
//! The principal is what ACLs and quotas are keyed on. It is decided once per connection:
//! the SASL user once the client authenticates; else, under mutual TLS, the client
//! certificate's subject DN (Kafka's default mapping, e.g. `User:CN=alice,OU=eng`); otherwise
//! `User:ANONYMOUS`, as Kafka names an unauthenticated client.

use std::fmt;
use std::sync::Arc;

/// A Kafka principal of type `User`. Cheap to clone: every request's context carries one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Principal {
    /// The name after `User:`.
    name: Arc<str>,
}

/// Kafka's principal type for users, the only type the listener assigns.
pub const USER_TYPE: &str = "User";

/// The name Kafka gives a client that did not authenticate.
pub const ANONYMOUS: &str = "ANONYMOUS";

impl Principal {
    pub fn user(name: &str) -> Self {
        Principal { name: name.into() }
    }

    /// The name after `User:` (what user quotas are keyed on).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `User:ANONYMOUS`.
    pub fn anonymous() -> Self {
        Principal::user(ANONYMOUS)
    }
}

impl Default for Principal {
    fn default() -> Self {
        Principal::anonymous()
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{USER_TYPE}:{}", self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_principal_prints_as_kafka_writes_it() {
        assert_eq!(Principal::user("alice").to_string(), "User:alice");
        assert_eq!(Principal::default().to_string(), "User:ANONYMOUS");
    }
}
