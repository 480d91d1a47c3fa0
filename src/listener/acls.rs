//! DescribeAcls, CreateAcls and DeleteAcls (v1 to v3): the ACL bindings of
//! `<data_dir>/security/acls` ([`crate::security::acl::AclStore`]) as Kafka's admin clients
//! manage them.
//!
//! As Kafka answers: without an authorizer every one is `SECURITY_DISABLED`; DescribeAcls
//! needs DESCRIBE on the cluster, CreateAcls and DeleteAcls ALTER on it
//! (`CLUSTER_AUTHORIZATION_FAILED`); a binding or filter with an UNKNOWN or ANY where it
//! must name one, an empty name, a principal not of the form `User:<name>`, or a cluster
//! resource not named `kafka-cluster` is `INVALID_REQUEST` for its entry, and the others of
//! the request still apply. A file that cannot be written is `UNKNOWN_SERVER_ERROR` for every
//! entry, and nothing changed.

use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsRequest, DescribeAclsResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::request::RequestContext;
use crate::security::acl::{
    AclBinding, AclFilter, AclStore, Operation, PatternType, Permission, ResourceType,
};

/// An entry's error: Kafka's code and its message.
type Refusal = (ResponseError, String);

/// The store to use, or why none may be used: no authorizer, or the principal may not
/// `operation` the cluster.
fn store<'a>(ctx: &'a RequestContext<'_>, operation: Operation) -> Result<&'a AclStore, Refusal> {
    let Some(authorizer) = &ctx.shared.authorizer else {
        let why = "no authorizer is configured on the broker (nanokafka serve --authorizer)";
        return Err((ResponseError::SecurityDisabled, why.into()));
    };
    ctx.check_cluster_said(operation)?;
    Ok(authorizer.store())
}

fn message(text: String) -> Option<StrBytes> {
    Some(StrBytes::from_string(text))
}

pub fn describe_acls(
    ctx: &RequestContext<'_>,
    request: DescribeAclsRequest,
) -> DescribeAclsResponse {
    let refused = |(error, text): Refusal| {
        DescribeAclsResponse::default()
            .with_error_code(error.code())
            .with_error_message(message(text))
    };
    let store = match store(ctx, Operation::Describe) {
        Ok(store) => store,
        Err(refusal) => return refused(refusal),
    };
    let filter = match filter_of(
        (
            request.resource_type_filter,
            request.pattern_type_filter,
            request.operation,
            request.permission_type,
        ),
        [
            request.resource_name_filter,
            request.principal_filter,
            request.host_filter,
        ],
    ) {
        Ok(filter) => filter,
        Err(refusal) => return refused(refusal),
    };
    let acls = store.current();
    // One resource entry per pattern, its bindings' entries under it (bindings are sorted by
    // pattern first, so each pattern's are together).
    let mut resources: Vec<DescribeAclsResource> = Vec::new();
    for b in acls.matching(&filter) {
        let entry = AclDescription::default()
            .with_principal(StrBytes::from_string(b.principal.clone()))
            .with_host(StrBytes::from_string(b.host.clone()))
            .with_operation(b.operation.code())
            .with_permission_type(b.permission.code());
        let same = resources.last().is_some_and(|r| {
            r.resource_type == b.resource_type.code()
                && r.pattern_type == b.pattern_type.code()
                && r.resource_name.as_str() == b.name
        });
        if !same {
            resources.push(
                DescribeAclsResource::default()
                    .with_resource_type(b.resource_type.code())
                    .with_resource_name(StrBytes::from_string(b.name.clone()))
                    .with_pattern_type(b.pattern_type.code()),
            );
        }
        resources.last_mut().expect("pushed").acls.push(entry);
    }
    DescribeAclsResponse::default().with_resources(resources)
}

/// A filter from its wire fields: the codes of resource type, pattern type, operation and
/// permission, and the name, principal and host (null: any); INVALID_REQUEST if it is not one.
fn filter_of(
    codes: (i8, i8, i8, i8),
    [name, principal, host]: [Option<StrBytes>; 3],
) -> Result<AclFilter, Refusal> {
    let text = |s: Option<StrBytes>| s.map(|s| s.to_string());
    AclFilter::from_wire(codes, text(name), text(principal), text(host))
        .map_err(|why| (ResponseError::InvalidRequest, why))
}

pub fn create_acls(ctx: &RequestContext<'_>, request: CreateAclsRequest) -> CreateAclsResponse {
    let result = |outcome: &Result<(), Refusal>| match outcome {
        Ok(()) => AclCreationResult::default(),
        Err((error, text)) => AclCreationResult::default()
            .with_error_code(error.code())
            .with_error_message(message(text.clone())),
    };
    let bindings: Vec<Result<AclBinding, Refusal>> =
        request.creations.iter().map(binding_of).collect();
    let outcomes: Vec<Result<(), Refusal>> = match store(ctx, Operation::Alter) {
        Err(refusal) => bindings.iter().map(|_| Err(refusal.clone())).collect(),
        Ok(store) => {
            let added = store.update(|acls| {
                let mut changed = false;
                for binding in bindings.iter().flatten() {
                    changed |= acls.add(binding.clone());
                }
                (changed, ())
            });
            match added {
                Ok(()) => {
                    for binding in bindings.iter().flatten() {
                        tracing::info!(principal = %ctx.principal, %binding, "ACL created");
                    }
                    bindings.into_iter().map(|b| b.map(|_| ())).collect()
                }
                Err(e) => {
                    tracing::error!(error = %e, "cannot create ACLs");
                    let failed = (ResponseError::UnknownServerError, e.to_string());
                    bindings.iter().map(|_| Err(failed.clone())).collect()
                }
            }
        }
    };
    CreateAclsResponse::default().with_results(outcomes.iter().map(result).collect())
}

/// A CreateAcls entry as a binding, checked as Kafka's controller checks it.
fn binding_of(c: &AclCreation) -> Result<AclBinding, Refusal> {
    let invalid = |what: &str, code: i8| {
        (
            ResponseError::InvalidRequest,
            format!("{code} is not a {what} an ACL can have"),
        )
    };
    let binding = AclBinding {
        resource_type: ResourceType::from_code(c.resource_type)
            .ok_or_else(|| invalid("resource type", c.resource_type))?,
        pattern_type: PatternType::from_code(c.resource_pattern_type)
            .ok_or_else(|| invalid("pattern type", c.resource_pattern_type))?,
        name: c.resource_name.to_string(),
        principal: c.principal.to_string(),
        host: c.host.to_string(),
        operation: Operation::from_code(c.operation)
            .ok_or_else(|| invalid("operation", c.operation))?,
        permission: Permission::from_code(c.permission_type)
            .ok_or_else(|| invalid("permission type", c.permission_type))?,
    };
    binding
        .validate()
        .map_err(|why| (ResponseError::InvalidRequest, why))?;
    Ok(binding)
}

pub fn delete_acls(ctx: &RequestContext<'_>, request: DeleteAclsRequest) -> DeleteAclsResponse {
    let filters: Vec<Result<AclFilter, Refusal>> = request
        .filters
        .into_iter()
        .map(|f| {
            let codes = (
                f.resource_type_filter,
                f.pattern_type_filter,
                f.operation,
                f.permission_type,
            );
            filter_of(
                codes,
                [f.resource_name_filter, f.principal_filter, f.host_filter],
            )
        })
        .collect();
    let outcomes: Vec<Result<Vec<AclBinding>, Refusal>> = match store(ctx, Operation::Alter) {
        Err(refusal) => filters.iter().map(|_| Err(refusal.clone())).collect(),
        Ok(store) => {
            let removed = store.update(|acls| {
                let removed: Vec<Result<Vec<AclBinding>, Refusal>> = filters
                    .iter()
                    .map(|f| {
                        f.as_ref()
                            .map(|f| acls.remove_matching(f))
                            .map_err(Clone::clone)
                    })
                    .collect();
                let changed = removed.iter().flatten().any(|r| !r.is_empty());
                (changed, removed)
            });
            match removed {
                Ok(removed) => removed,
                Err(e) => {
                    tracing::error!(error = %e, "cannot delete ACLs");
                    let failed = (ResponseError::UnknownServerError, e.to_string());
                    filters.iter().map(|_| Err(failed.clone())).collect()
                }
            }
        }
    };
    let results = outcomes
        .into_iter()
        .map(|outcome| match outcome {
            Err((error, text)) => DeleteAclsFilterResult::default()
                .with_error_code(error.code())
                .with_error_message(message(text)),
            Ok(removed) => DeleteAclsFilterResult::default().with_matching_acls(
                removed
                    .into_iter()
                    .map(|b| {
                        tracing::info!(principal = %ctx.principal, binding = %b, "ACL deleted");
                        DeleteAclsMatchingAcl::default()
                            .with_resource_type(b.resource_type.code())
                            .with_resource_name(StrBytes::from_string(b.name))
                            .with_pattern_type(b.pattern_type.code())
                            .with_principal(StrBytes::from_string(b.principal))
                            .with_host(StrBytes::from_string(b.host))
                            .with_operation(b.operation.code())
                            .with_permission_type(b.permission.code())
                    })
                    .collect(),
            ),
        })
        .collect();
    DeleteAclsResponse::default().with_filter_results(results)
}
