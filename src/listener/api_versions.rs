//! ApiVersions: which APIs and versions this listener serves (`request::SERVED`).

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::ResponseError;

use super::request::{RequestContext, SERVED};

pub fn handle(_: &RequestContext<'_>, _: ApiVersionsRequest) -> ApiVersionsResponse {
    ApiVersionsResponse::default().with_api_keys(table())
}

/// The answer to an ApiVersions version we do not serve: UNSUPPORTED_VERSION with the table,
/// encoded as v0 by the caller.
pub fn unsupported() -> kafka_protocol::messages::ResponseKind {
    kafka_protocol::messages::ResponseKind::ApiVersions(
        ApiVersionsResponse::default()
            .with_error_code(ResponseError::UnsupportedVersion.code())
            .with_api_keys(table()),
    )
}

fn table() -> Vec<ApiVersion> {
    SERVED
        .iter()
        .map(|&(api, min, max)| {
            ApiVersion::default()
                .with_api_key(api as i16)
                .with_min_version(min)
                .with_max_version(max)
        })
        .collect()
}
