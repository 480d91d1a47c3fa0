//! The one question every handler asks before it acts: may this request's principal do this
//! operation on this resource? Answered by [`crate::security::acl::Authorizer`] when the
//! listener has one ([`super::ListenerConfig::authorizer`]); without one, everything is
//! allowed (Kafka without `authorizer.class.name`).
//!
//! Which operation each API needs is Kafka's (`KafkaApis` and its per-API handlers), and is
//! written in each handler beside what it guards; an unauthorised resource gets Kafka's
//! error for its type (`TOPIC_`, `GROUP_`, `CLUSTER_`, `TRANSACTIONAL_ID_AUTHORIZATION_FAILED`)
//! and nothing of it is changed.
//!
//! The security APIs take the cluster's operations, as Kafka's do: DescribeAcls DESCRIBE,
//! CreateAcls and DeleteAcls ALTER; DescribeUserScramCredentials DESCRIBE and
//! AlterUserScramCredentials ALTER; DescribeClientQuotas DESCRIBE_CONFIGS and
//! AlterClientQuotas ALTER_CONFIGS: `ctx.check_cluster(Operation::..)` first in the handler.
//! The embedded API is never asked: code in the broker's process is trusted.

use kafka_protocol::ResponseError;

use super::request::RequestContext;
use crate::security::acl::{Action, Operation, ResourceType, CLUSTER_NAME};

impl RequestContext<'_> {
    /// Whether the principal may do `operation` on `name` of `resource_type`.
    pub fn may(&self, operation: Operation, resource_type: ResourceType, name: &str) -> bool {
        let Some(authorizer) = &self.shared.authorizer else {
            return true;
        };
        let principal = self.principal.to_string();
        let host = self.peer.ip().to_string();
        let allowed = authorizer.authorize(&Action {
            principal: &principal,
            host: &host,
            operation,
            resource_type,
            name,
        });
        if !allowed {
            tracing::debug!(%principal, %host, %operation, %resource_type, name, "denied");
        }
        allowed
    }

    /// [`Self::may`] on a topic.
    pub fn may_topic(&self, operation: Operation, topic: &str) -> bool {
        self.may(operation, ResourceType::Topic, topic)
    }

    /// [`Self::may`] on a group.
    pub fn may_group(&self, operation: Operation, group: &str) -> bool {
        self.may(operation, ResourceType::Group, group)
    }

    /// [`Self::may`] on the cluster.
    pub fn may_cluster(&self, operation: Operation) -> bool {
        self.may(operation, ResourceType::Cluster, CLUSTER_NAME)
    }

    /// Whether the principal may do `operation` on some resource of `resource_type` (Kafka's
    /// `authorizeByResourceType`).
    pub fn may_any(&self, operation: Operation, resource_type: ResourceType) -> bool {
        let Some(authorizer) = &self.shared.authorizer else {
            return true;
        };
        let principal = self.principal.to_string();
        let host = self.peer.ip().to_string();
        authorizer.authorize_any(&Action {
            principal: &principal,
            host: &host,
            operation,
            resource_type,
            name: "",
        })
    }

    /// `Ok` when the principal may do `operation` on the topic, else Kafka's error for it.
    pub fn check_topic(&self, operation: Operation, topic: &str) -> Result<(), ResponseError> {
        self.may_topic(operation, topic)
            .then_some(())
            .ok_or(ResponseError::TopicAuthorizationFailed)
    }

    /// `Ok` when the principal may do `operation` on the group, else Kafka's error for it.
    pub fn check_group(&self, operation: Operation, group: &str) -> Result<(), ResponseError> {
        self.may_group(operation, group)
            .then_some(())
            .ok_or(ResponseError::GroupAuthorizationFailed)
    }

    /// `Ok` when the principal may do `operation` on the cluster, else Kafka's error for it.
    pub fn check_cluster(&self, operation: Operation) -> Result<(), ResponseError> {
        self.may_cluster(operation)
            .then_some(())
            .ok_or(ResponseError::ClusterAuthorizationFailed)
    }
}

impl RequestContext<'_> {
    /// [`Self::check_topic`] with a message, for the admin APIs that answer one.
    pub fn check_topic_said(
        &self,
        operation: Operation,
        topic: &str,
    ) -> Result<(), (ResponseError, String)> {
        self.check_topic(operation, topic).map_err(|e| {
            (
                e,
                format!("{} may not {operation} topic {topic:?}", self.principal),
            )
        })
    }

    /// [`Self::check_cluster`] with a message, for the admin APIs that answer one.
    pub fn check_cluster_said(&self, operation: Operation) -> Result<(), (ResponseError, String)> {
        self.check_cluster(operation).map_err(|e| {
            (
                e,
                format!("{} may not {operation} the cluster", self.principal),
            )
        })
    }
}
