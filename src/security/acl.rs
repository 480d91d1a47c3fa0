//! Access control lists in Kafka's model (`kafka.security.authorizer`, KIP-290's prefixed
//! patterns), decided as Kafka's `StandardAuthorizer` decides them.
//!
//! A binding ([`AclBinding`]) is a resource pattern (a type, a name or the wildcard `*`, a
//! LITERAL or PREFIXED pattern) and an entry (a principal `User:name` or `User:*`, a host or
//! `*`, an operation, ALLOW or DENY). A request is allowed ([`Acls::authorize`]) when:
//! * its principal is a super user; or
//! * no DENY binding matches it, and an ALLOW binding does (`allow.everyone.if.no.acl.found`
//!   is false: a resource with no ACL is closed to all but super users).
//!
//! A binding matches a request when its resource type is the request's; its name is the
//! resource's (LITERAL), the wildcard `*` (LITERAL), or a prefix of it (PREFIXED); its
//! principal is the request's or `User:*`; its host is the request's or `*`; and its operation
//! is the request's or ALL. An ALLOW also matches the operations it implies, as Kafka's do:
//! READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS. A DENY
//! implies nothing: denying READ leaves DESCRIBE as the ALLOWs say.
//!
//! The bindings persist in [`store::AclStore`].

pub mod store;

use std::collections::{BTreeSet, HashSet};
use std::fmt;

use serde::{Deserialize, Serialize};

pub use store::{AclError, AclStore};

/// The name of the one cluster resource, as Kafka names it.
pub const CLUSTER_NAME: &str = "kafka-cluster";

/// The resource name and host that match any.
pub const WILDCARD: &str = "*";

/// The principal that matches any user.
pub const WILDCARD_PRINCIPAL: &str = "User:*";

/// Defines a Kafka ACL enum with its wire codes (Kafka's `code()`), and its names as Kafka
/// spells them (`TOPIC`, `READ`, ...) in the store and in kafka-acls' output.
macro_rules! kafka_enum {
    ($(#[$doc:meta])* $name:ident { $($variant:ident = $code:literal, $text:literal;)* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "SCREAMING_SNAKE_CASE")]
        pub enum $name { $($variant,)* }

        impl $name {
            /// Every value, in code order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)*];

            /// The wire code.
            pub fn code(self) -> i8 {
                match self { $($name::$variant => $code,)* }
            }

            /// The value of a wire code, if it names one (never ANY or UNKNOWN).
            pub fn from_code(code: i8) -> Option<Self> {
                match code { $($code => Some($name::$variant),)* _ => None }
            }

            /// Kafka's name for it (`TOPIC`, `DESCRIBE_CONFIGS`).
            pub fn name(self) -> &'static str {
                match self { $($name::$variant => $text,)* }
            }

            /// Parses Kafka's name, in any case and with `-` or `_` between words, as
            /// kafka-acls accepts `--operation DescribeConfigs` and `describe-configs`.
            pub fn parse(text: &str) -> Option<Self> {
                let squash = |s: &str| s.chars().filter(|c| *c != '_' && *c != '-')
                    .collect::<String>().to_ascii_uppercase();
                let wanted = squash(text);
                Self::ALL.iter().copied().find(|v| squash(v.name()) == wanted)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

kafka_enum!(
    /// What kind of resource a binding is about (Kafka's `ResourceType`).
    ResourceType {
        Topic = 2, "TOPIC";
        Group = 3, "GROUP";
        Cluster = 4, "CLUSTER";
        TransactionalId = 5, "TRANSACTIONAL_ID";
    }
);

kafka_enum!(
    /// How a binding's name is matched (Kafka's `PatternType`).
    PatternType {
        Literal = 3, "LITERAL";
        Prefixed = 4, "PREFIXED";
    }
);

kafka_enum!(
    /// What a request does to a resource (Kafka's `AclOperation`).
    Operation {
        All = 2, "ALL";
        Read = 3, "READ";
        Write = 4, "WRITE";
        Create = 5, "CREATE";
        Delete = 6, "DELETE";
        Alter = 7, "ALTER";
        Describe = 8, "DESCRIBE";
        ClusterAction = 9, "CLUSTER_ACTION";
        DescribeConfigs = 10, "DESCRIBE_CONFIGS";
        AlterConfigs = 11, "ALTER_CONFIGS";
        IdempotentWrite = 12, "IDEMPOTENT_WRITE";
        CreateTokens = 13, "CREATE_TOKENS";
        DescribeTokens = 14, "DESCRIBE_TOKENS";
    }
);

kafka_enum!(
    /// Whether a binding allows or denies (Kafka's `AclPermissionType`).
    Permission {
        Deny = 2, "DENY";
        Allow = 3, "ALLOW";
    }
);

/// The wire code of ANY in every ACL enum: a filter's "whatever it is".
pub const ANY_CODE: i8 = 1;

/// The wire code of MATCH in a pattern-type filter: every pattern that matches the name.
pub const MATCH_CODE: i8 = 2;

/// One ACL: who may (or may not) do what to which resources.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AclBinding {
    pub resource_type: ResourceType,
    pub pattern_type: PatternType,
    /// A resource name, a prefix (PREFIXED), or `*` (LITERAL: every resource of the type).
    pub name: String,
    /// `User:<name>` or `User:*`.
    pub principal: String,
    /// An IP address, or `*`.
    pub host: String,
    pub operation: Operation,
    pub permission: Permission,
}

impl AclBinding {
    /// Checks a binding as Kafka's controller checks a new one: a name, a principal of the
    /// form `Type:name`, a host, and the cluster resource named `kafka-cluster`.
    ///
    /// # Errors
    /// Why the binding cannot be stored (Kafka answers INVALID_REQUEST).
    pub fn validate(&self) -> Result<(), String> {
        if self.name.is_empty() {
            return Err("the resource name is empty".into());
        }
        if self.resource_type == ResourceType::Cluster && self.name != CLUSTER_NAME {
            return Err(format!(
                "the cluster resource is named '{CLUSTER_NAME}', not '{}'",
                self.name
            ));
        }
        match self.principal.split_once(':') {
            Some((kind, name)) if !kind.is_empty() && !name.is_empty() => {}
            _ => {
                return Err(format!(
                    "the principal '{}' is not of the form User:<name>",
                    self.principal
                ))
            }
        }
        if self.host.is_empty() {
            return Err("the host is empty (use * for any host)".into());
        }
        Ok(())
    }

    /// Whether the binding's pattern covers `name` of type `resource_type`.
    fn covers(&self, resource_type: ResourceType, name: &str) -> bool {
        self.resource_type == resource_type
            && match self.pattern_type {
                PatternType::Literal => self.name == name || self.name == WILDCARD,
                PatternType::Prefixed => name.starts_with(&self.name),
            }
    }

    /// Whether the binding's principal and host take in the request's.
    fn applies_to(&self, principal: &str, host: &str) -> bool {
        (self.principal == principal || self.principal == WILDCARD_PRINCIPAL)
            && (self.host == host || self.host == WILDCARD)
    }

    /// Whether the binding's operation decides `operation`: ALL decides every operation; an
    /// ALLOW also decides what its operation implies.
    fn decides(&self, operation: Operation) -> bool {
        if self.operation == Operation::All || self.operation == operation {
            return true;
        }
        self.permission == Permission::Allow && implies(self.operation, operation)
    }
}

/// Kafka's implied operations: who may read, write, delete or alter a resource may describe
/// it; who may alter its configs may describe them.
fn implies(granted: Operation, wanted: Operation) -> bool {
    use Operation::*;
    match wanted {
        Describe => matches!(granted, Read | Write | Delete | Alter),
        DescribeConfigs => granted == AlterConfigs,
        _ => false,
    }
}

impl fmt::Display for AclBinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "(principal={}, host={}, operation={}, permissionType={}) on \
             ResourcePattern(resourceType={}, name={}, patternType={})",
            self.principal,
            self.host,
            self.operation,
            self.permission,
            self.resource_type,
            self.name,
            self.pattern_type
        )
    }
}

/// How a filter matches a binding's pattern type (Kafka's `PatternType` in a filter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatternFilter {
    /// Any pattern type; the name (if given) is compared as it is.
    Any,
    /// Every binding that would match a resource of this name: the literal name, the
    /// wildcard, and every prefix of it.
    Match,
    /// Only this pattern type.
    Exactly(PatternType),
}

/// Which bindings DescribeAcls lists and DeleteAcls removes (Kafka's `AclBindingFilter`):
/// `None` is ANY (or a null string).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AclFilter {
    pub resource_type: Option<ResourceType>,
    pub name: Option<String>,
    pub pattern: Option<PatternFilter>,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: Option<Operation>,
    pub permission: Option<Permission>,
}

impl AclFilter {
    /// Reads a filter from its wire codes (ANY is 1; MATCH is 2 for the pattern type).
    ///
    /// # Errors
    /// Why the filter is not one (an UNKNOWN or unheard-of code): Kafka's INVALID_REQUEST.
    pub fn from_wire(
        (resource_type, pattern_type, operation, permission): (i8, i8, i8, i8),
        name: Option<String>,
        principal: Option<String>,
        host: Option<String>,
    ) -> Result<Self, String> {
        fn any_or<T>(
            code: i8,
            what: &str,
            of: impl Fn(i8) -> Option<T>,
        ) -> Result<Option<T>, String> {
            match code {
                ANY_CODE => Ok(None),
                code => of(code)
                    .map(Some)
                    .ok_or_else(|| format!("{code} is not a {what} a filter can name")),
            }
        }
        let pattern = match pattern_type {
            ANY_CODE => PatternFilter::Any,
            MATCH_CODE => PatternFilter::Match,
            code => PatternType::from_code(code)
                .map(PatternFilter::Exactly)
                .ok_or_else(|| format!("{code} is not a pattern type a filter can name"))?,
        };
        Ok(AclFilter {
            resource_type: any_or(resource_type, "resource type", ResourceType::from_code)?,
            name,
            pattern: Some(pattern),
            principal,
            host,
            operation: any_or(operation, "operation", Operation::from_code)?,
            permission: any_or(permission, "permission type", Permission::from_code)?,
        })
    }

    /// Whether `binding` is one this filter selects (Kafka's `AclBindingFilter.matches`).
    pub fn matches(&self, binding: &AclBinding) -> bool {
        let same = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
        let pattern_ok = match (self.pattern.unwrap_or(PatternFilter::Any), &self.name) {
            (PatternFilter::Exactly(p), _) if p != binding.pattern_type => false,
            (_, None) => true,
            (PatternFilter::Match, Some(name)) => match binding.pattern_type {
                PatternType::Literal => binding.name == *name || binding.name == WILDCARD,
                PatternType::Prefixed => name.starts_with(&binding.name),
            },
            (_, Some(name)) => binding.name == *name,
        };
        self.resource_type
            .is_none_or(|t| t == binding.resource_type)
            && pattern_ok
            && same(&self.principal, &binding.principal)
            && same(&self.host, &binding.host)
            && self.operation.is_none_or(|o| o == binding.operation)
            && self.permission.is_none_or(|p| p == binding.permission)
    }
}

/// What a request asks to do: the principal and host it comes from, the operation, and the
/// resource.
#[derive(Debug, Clone, Copy)]
pub struct Action<'a> {
    /// `User:<name>`.
    pub principal: &'a str,
    /// The client's IP address, as ACL hosts are written.
    pub host: &'a str,
    pub operation: Operation,
    pub resource_type: ResourceType,
    pub name: &'a str,
}

/// A set of bindings, and the decision over them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Acls {
    bindings: BTreeSet<AclBinding>,
}

impl Acls {
    pub fn new(bindings: impl IntoIterator<Item = AclBinding>) -> Self {
        Acls {
            bindings: bindings.into_iter().collect(),
        }
    }

    /// Every binding, in a stable order.
    pub fn iter(&self) -> impl Iterator<Item = &AclBinding> {
        self.bindings.iter()
    }

    pub fn len(&self) -> usize {
        self.bindings.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bindings.is_empty()
    }

    /// Adds a binding; false when it was there already (adding is idempotent, as in Kafka).
    pub fn add(&mut self, binding: AclBinding) -> bool {
        self.bindings.insert(binding)
    }

    /// Removes and returns every binding `filter` selects.
    pub fn remove_matching(&mut self, filter: &AclFilter) -> Vec<AclBinding> {
        let removed: Vec<AclBinding> = self.matching(filter).cloned().collect();
        for binding in &removed {
            self.bindings.remove(binding);
        }
        removed
    }

    /// The bindings `filter` selects.
    pub fn matching<'a>(&'a self, filter: &'a AclFilter) -> impl Iterator<Item = &'a AclBinding> {
        self.bindings.iter().filter(|b| filter.matches(b))
    }

    /// Kafka's decision for `action` (see the module doc); super users are the caller's
    /// ([`Authorizer`]).
    pub fn authorize(&self, action: &Action<'_>) -> bool {
        let mut allowed = false;
        for binding in self.applicable(action.principal, action.host, action.resource_type) {
            if !binding.covers(action.resource_type, action.name)
                || !binding.decides(action.operation)
            {
                continue;
            }
            match binding.permission {
                Permission::Deny => return false,
                Permission::Allow => allowed = true,
            }
        }
        allowed
    }

    /// Whether the principal may do `operation` to some resource of `resource_type` (Kafka's
    /// `authorizeByResourceType`, which InitProducerId asks with WRITE on topics): an ALLOW
    /// binding that no DENY covers, a DENY covering it being the wildcard, the same literal
    /// name, or a prefix of its name.
    pub fn authorize_any(&self, action: &Action<'_>) -> bool {
        let decided: Vec<&AclBinding> = self
            .applicable(action.principal, action.host, action.resource_type)
            .filter(|b| b.decides(action.operation))
            .collect();
        let denied = |allow: &AclBinding| {
            decided.iter().any(|deny| {
                deny.permission == Permission::Deny
                    && match deny.pattern_type {
                        PatternType::Literal => {
                            deny.name == WILDCARD
                                || (allow.pattern_type == PatternType::Literal
                                    && deny.name == allow.name)
                        }
                        PatternType::Prefixed => allow.name.starts_with(&deny.name),
                    }
            })
        };
        decided
            .iter()
            .any(|b| b.permission == Permission::Allow && !denied(b))
    }

    fn applicable<'a>(
        &'a self,
        principal: &'a str,
        host: &'a str,
        resource_type: ResourceType,
    ) -> impl Iterator<Item = &'a AclBinding> {
        self.bindings
            .iter()
            .filter(move |b| b.resource_type == resource_type && b.applies_to(principal, host))
    }
}

/// The decision the listener asks for: super users, then the bindings of the store.
#[derive(Debug)]
pub struct Authorizer {
    super_users: HashSet<String>,
    store: AclStore,
}

impl Authorizer {
    pub fn new(store: AclStore, super_users: impl IntoIterator<Item = String>) -> Self {
        Authorizer {
            super_users: super_users.into_iter().collect(),
            store,
        }
    }

    pub fn store(&self) -> &AclStore {
        &self.store
    }

    pub fn is_super_user(&self, principal: &str) -> bool {
        self.super_users.contains(principal)
    }

    /// Whether `action` is allowed. Bindings that cannot be read (the store's file was
    /// damaged while serving) allow nothing but super users; the store logs why.
    pub fn authorize(&self, action: &Action<'_>) -> bool {
        self.is_super_user(action.principal) || self.store.current().authorize(action)
    }

    /// As [`Acls::authorize_any`], super users first.
    pub fn authorize_any(&self, action: &Action<'_>) -> bool {
        self.is_super_user(action.principal) || self.store.current().authorize_any(action)
    }
}

#[cfg(test)]
#[path = "acl_tests.rs"]
mod tests;
