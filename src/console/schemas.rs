//! The Schemas view (`schema-registry` feature): the registry's subjects and versions, read
//! from the broker's `SchemaStore` (as the REST API reads them), and the decoding of record
//! values in Confluent's framing (magic byte 0, a 4-byte big-endian schema id, the payload)
//! on record pages. Without the feature there are no routes and no decoding: the console is
//! what it is without a registry.
//!
//! ```text
//! GET /api/schemas            {"subjects": [{"subject", "versions": [{"version", "id", "type"}]}]}
//! GET /api/schemas/{subject}  {"subject", "versions": [{"version", "id", "type", "schema",
//!                              "references": [{"name", "subject", "version"}]}]}
//! ```
//!
//! A record value on a page whose value is framed with an id the registry knows gains
//! `"schema": {"id", "type", "json" | "error"}`: an Avro or JSON Schema payload decoded
//! (`json`: Avro's JSON mapping of the value, or the JSON document) or why it does not
//! decode; for Protobuf only `id` and `type` (the page shows the raw bytes). A value cut at
//! `max_field_bytes` is not decoded.

pub(super) use enabled::{overview_facts, routes, Decoder};

#[cfg(feature = "schema-registry")]
mod enabled {
    use std::collections::HashMap;
    use std::sync::Arc;

    use actix_web::http::StatusCode;
    use actix_web::{web, HttpResponse};
    use serde_json::{json, Value};

    use super::super::request::{ApiError, Caller};
    use crate::async_handle::{AsyncNanoKafka, SchemaStore};
    use crate::schemas::{ParsedSchema, RegistryError, SchemaType, VersionSpec};

    /// Confluent's framing: the magic byte, then the 4-byte schema id.
    const MAGIC_BYTE: u8 = 0;
    const HEADER_LEN: usize = 5;

    pub(in crate::console) fn routes(cfg: &mut web::ServiceConfig) {
        cfg.service(web::resource("/api/schemas").route(web::get().to(subjects)))
            .service(web::resource("/api/schemas/{subject}").route(web::get().to(subject)));
    }

    /// Adds to the overview's `broker` what the page needs to offer the Schemas view.
    pub(in crate::console) fn overview_facts(broker: &AsyncNanoKafka, facts: &mut Value) {
        facts["schema_registry"] = Value::Bool(broker.schema_store().is_some());
    }

    fn store(caller: &Caller) -> Result<&Arc<SchemaStore>, ApiError> {
        caller
            .console
            .broker
            .schema_store()
            .ok_or_else(|| ApiError::not_found("this broker keeps no schemas"))
    }

    fn registry_error(e: &RegistryError) -> ApiError {
        let status = match e.http_status() {
            404 => StatusCode::NOT_FOUND,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError::new(status, e.message.clone())
    }

    async fn subjects(caller: Caller) -> Result<HttpResponse, ApiError> {
        let state = store(&caller)?
            .current()
            .await
            .map_err(|e| registry_error(&e))?;
        let registry = &state.registry;
        let mut subjects = Vec::new();
        for subject in registry.subjects(false) {
            let numbers = registry.versions(&subject, false).unwrap_or_default();
            let versions: Vec<Value> = numbers
                .into_iter()
                .filter_map(|n| {
                    registry
                        .version(&subject, VersionSpec::Number(n), false)
                        .ok()
                })
                .map(|v| json!({"version": v.version, "id": v.id, "type": v.schema_type.name()}))
                .collect();
            subjects.push(json!({"subject": subject, "versions": versions}));
        }
        Ok(HttpResponse::Ok().json(json!({ "subjects": subjects })))
    }

    async fn subject(caller: Caller, subject: web::Path<String>) -> Result<HttpResponse, ApiError> {
        let subject = subject.into_inner();
        let state = store(&caller)?
            .current()
            .await
            .map_err(|e| registry_error(&e))?;
        let registry = &state.registry;
        let numbers = registry
            .versions(&subject, false)
            .map_err(|e| registry_error(&e))?;
        let versions: Vec<Value> = numbers
            .into_iter()
            .filter_map(|n| {
                registry
                    .version(&subject, VersionSpec::Number(n), false)
                    .ok()
            })
            .map(|v| {
                let references: Vec<Value> = (v.references.iter())
                    .map(|r| json!({"name": r.name, "subject": r.subject, "version": r.version}))
                    .collect();
                json!({
                    "version": v.version,
                    "id": v.id,
                    "type": v.schema_type.name(),
                    "schema": v.schema,
                    "references": references,
                })
            })
            .collect();
        Ok(HttpResponse::Ok().json(json!({"subject": subject, "versions": versions})))
    }

    /// The framed values of a page's records, decoded once the page is read (the read
    /// itself cannot wait on the registry).
    pub(in crate::console) struct Decoder<'a> {
        broker: &'a AsyncNanoKafka,
        /// `(the record's place on the page, schema id, payload)`.
        framed: Vec<(usize, u32, Vec<u8>)>,
    }

    impl<'a> Decoder<'a> {
        pub fn new(broker: &'a AsyncNanoKafka) -> Self {
            Decoder {
                broker,
                framed: Vec::new(),
            }
        }

        /// Notes the value of the record at `place` on the page, when it is framed and
        /// shown whole (at most `max_field` bytes).
        pub fn note(&mut self, place: usize, value: Option<&[u8]>, max_field: usize) {
            if self.broker.schema_store().is_none() {
                return;
            }
            if let Some(value @ [MAGIC_BYTE, ..]) = value {
                if value.len() >= HEADER_LEN && value.len() <= max_field {
                    let id = u32::from_be_bytes([value[1], value[2], value[3], value[4]]);
                    self.framed.push((place, id, value[HEADER_LEN..].to_vec()));
                }
            }
        }

        /// Adds `"schema"` to the value of each noted record of `page` whose id the registry
        /// knows (see the module documentation).
        pub async fn apply(self, page: &mut [Value]) {
            let Some(store) = self.broker.schema_store() else {
                return;
            };
            let mut schemas: HashMap<u32, Option<Arc<ParsedSchema>>> = HashMap::new();
            for (place, id, payload) in self.framed {
                let schema = match schemas.get(&id) {
                    Some(schema) => schema.clone(),
                    None => {
                        let found = store.schema_by_id(id).await.unwrap_or_else(|e| {
                            tracing::debug!(id, error = %e.message, "console: no schema read");
                            None
                        });
                        schemas.insert(id, found.clone());
                        found
                    }
                };
                let Some(schema) = schema else { continue };
                let mut shown = json!({"id": id, "type": schema.schema_type.name()});
                if schema.schema_type != SchemaType::Protobuf {
                    match schema.payload_to_json(&payload) {
                        Ok(decoded) => shown["json"] = decoded,
                        Err(why) => shown["error"] = Value::String(why),
                    }
                }
                if let Some(value) = page.get_mut(place).and_then(|r| r.get_mut("value")) {
                    value["schema"] = shown;
                }
            }
        }
    }
}

#[cfg(not(feature = "schema-registry"))]
mod enabled {
    use actix_web::web;
    use serde_json::Value;

    use crate::async_handle::AsyncNanoKafka;

    pub(in crate::console) fn routes(_: &mut web::ServiceConfig) {}

    pub(in crate::console) fn overview_facts(_: &AsyncNanoKafka, _: &mut Value) {}

    /// No registry: nothing is decoded.
    pub(in crate::console) struct Decoder;

    impl Decoder {
        pub fn new(_: &AsyncNanoKafka) -> Self {
            Decoder
        }
        pub fn note(&mut self, _: usize, _: Option<&[u8]>, _: usize) {}
        #[allow(clippy::unused_async)]
        pub async fn apply(self, _: &mut [serde_json::Value]) {}
    }
}
