//! The server and Confluent Schema Registry's routes, request bodies and answers: JSON with
//! the content type `application/vnd.schemaregistry.v1+json`, errors as
//! `{"error_code": 40401, "message": "..."}` with the code's HTTP status.

use std::sync::Arc;

use actix_web::http::{header, StatusCode};
use actix_web::{web, App, HttpResponse, HttpServer, ResponseError};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::async_handle::SchemaStore;
use crate::schemas::{
    Compatibility, Mode, RegistryError, SchemaInput, SchemaReference, SchemaType, SubjectVersion,
    VersionSpec,
};

/// Confluent's content type, on every answer.
const CONTENT_TYPE: &str = "application/vnd.schemaregistry.v1+json";
/// The largest request body read: a schema of 1 MiB with JSON escaping.
const MAX_BODY_BYTES: usize = 2 << 20;

/// Builds the server on `socket`; it serves once the returned future is spawned.
pub(super) fn server(
    service: Arc<SchemaStore>,
    socket: std::net::TcpListener,
) -> std::io::Result<actix_web::dev::Server> {
    let data = web::Data::from(service);
    let server = HttpServer::new(move || {
        App::new()
            .app_data(data.clone())
            .app_data(web::PayloadConfig::new(MAX_BODY_BYTES))
            .app_data(web::QueryConfig::default().error_handler(|e, _| {
                ApiError::bad_request(format!("bad query string: {e}")).into()
            }))
            .app_data(
                web::PathConfig::default()
                    .error_handler(|e, _| ApiError::bad_request(format!("bad path: {e}")).into()),
            )
            .configure(routes)
    })
    // One worker: schema lookups are few (clients cache them); the broker keeps the cores.
    .workers(1)
    .disable_signals()
    .shutdown_timeout(1);
    Ok(server.listen(socket)?.run())
}

fn routes(cfg: &mut web::ServiceConfig) {
    let subject = "/subjects/{subject}";
    let version = "/subjects/{subject}/versions/{version}";
    cfg.route("/", web::get().to(|| async { answer(&json!({})) }))
        .route("/schemas/types", web::get().to(schema_types))
        .route("/schemas/ids/{id}", web::get().to(schema_by_id))
        .route("/schemas/ids/{id}/schema", web::get().to(raw_schema_by_id))
        .route("/schemas/ids/{id}/subjects", web::get().to(id_subjects))
        .route("/schemas/ids/{id}/versions", web::get().to(id_versions))
        .route("/subjects", web::get().to(subjects))
        .route(subject, web::post().to(lookup))
        .route(subject, web::delete().to(delete_subject))
        .route(&format!("{subject}/versions"), web::get().to(versions))
        .route(&format!("{subject}/versions"), web::post().to(register))
        .route(version, web::get().to(version_of))
        .route(version, web::delete().to(delete_version))
        .route(&format!("{version}/schema"), web::get().to(raw_version))
        .route("/config", web::get().to(global_config))
        .route("/config", web::put().to(set_global_config))
        .route("/config", web::delete().to(delete_global_config))
        .route("/config/{subject}", web::get().to(subject_config))
        .route("/config/{subject}", web::put().to(set_subject_config))
        .route("/config/{subject}", web::delete().to(delete_subject_config))
        .route(
            "/compatibility/subjects/{subject}/versions",
            web::post().to(compatibility_latest),
        )
        .route(
            "/compatibility/subjects/{subject}/versions/{version}",
            web::post().to(compatibility),
        )
        .route(
            &format!("{version}/referencedby"),
            web::get().to(referenced_by),
        )
        .route("/mode", web::get().to(global_mode))
        .route("/mode", web::put().to(set_global_mode))
        .route("/mode/{subject}", web::get().to(subject_mode))
        .route("/mode/{subject}", web::put().to(set_subject_mode))
        .route("/mode/{subject}", web::delete().to(delete_subject_mode))
        .default_service(web::to(|| async {
            ApiError(RegistryError {
                code: 404,
                message: "HTTP 404 Not Found".into(),
            })
            .error_response()
        }));
}

/// A refusal, answered as Confluent answers it.
#[derive(Debug)]
struct ApiError(RegistryError);

impl ApiError {
    fn bad_request(message: String) -> Self {
        ApiError(RegistryError { code: 400, message })
    }
}

impl From<RegistryError> for ApiError {
    fn from(e: RegistryError) -> Self {
        ApiError(e)
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        StatusCode::from_u16(self.0.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    fn error_response(&self) -> HttpResponse {
        HttpResponse::build(self.status_code())
            .insert_header((header::CONTENT_TYPE, CONTENT_TYPE))
            .body(json!({"error_code": self.0.code, "message": self.0.message}).to_string())
    }
}

type Answer = Result<HttpResponse, ApiError>;

/// A request body, or why it could not be read (too large: 413), answered in Confluent's
/// error shape.
type Body = Result<web::Bytes, actix_web::Error>;

fn read_body(body: Body) -> Result<web::Bytes, ApiError> {
    body.map_err(|e| {
        let status = e.as_response_error().status_code();
        ApiError(RegistryError {
            code: u32::from(status.as_u16()),
            message: format!("the request body cannot be read: {e}"),
        })
    })
}

fn answer(body: &Value) -> HttpResponse {
    HttpResponse::Ok()
        .insert_header((header::CONTENT_TYPE, CONTENT_TYPE))
        .body(body.to_string())
}

/// The query parameters the routes take (each route reads its own).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Params {
    deleted: Option<bool>,
    permanent: Option<bool>,
    verbose: Option<bool>,
    default_to_global: Option<bool>,
    subject_prefix: Option<String>,
    force: Option<bool>,
    /// Confluent's output format of a schema (`serialized`: a Protobuf descriptor in base64).
    format: Option<String>,
}

/// A schema in a request body.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SchemaBody {
    schema: String,
    #[serde(default)]
    schema_type: Option<String>,
    #[serde(default)]
    references: Vec<SchemaReference>,
    /// `IMPORT` mode's id; a negative one is none, as Confluent's clients send it.
    #[serde(default)]
    id: Option<i64>,
    /// `IMPORT` mode's version; 0 or less is none.
    #[serde(default)]
    version: Option<i64>,
}

/// A mode in a `PUT /mode` body.
#[derive(Debug, Deserialize)]
struct ModeBody {
    mode: String,
}

/// A level in a `PUT /config` body.
#[derive(Debug, Deserialize)]
struct ConfigBody {
    compatibility: String,
}

fn parse_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        ApiError(RegistryError {
            code: 422,
            message: format!("Unprocessable entity: {e}"),
        })
    })
}

fn schema_input(body: &[u8]) -> Result<SchemaInput, ApiError> {
    let body: SchemaBody = parse_body(body)?;
    let schema_type = match body.schema_type.as_deref() {
        None | Some("AVRO") => SchemaType::Avro,
        Some("JSON") => SchemaType::Json,
        Some("PROTOBUF") => SchemaType::Protobuf,
        Some(other) => {
            return Err(ApiError(RegistryError {
                code: 42201,
                message: format!("Invalid schema type {other}"),
            }))
        }
    };
    let positive = |n: Option<i64>, what: &str, zero: bool| -> Result<Option<u32>, ApiError> {
        match n {
            Some(n) if n > 0 || (zero && n == 0) => u32::try_from(n)
                .ok()
                .filter(|&n| i32::try_from(n).is_ok())
                .map(Some)
                .ok_or_else(|| ApiError::bad_request(format!("{what} {n} is out of range"))),
            _ => Ok(None),
        }
    };
    Ok(SchemaInput {
        schema_type,
        schema: body.schema,
        references: body.references,
        id: positive(body.id, "schema id", true)?,
        version: positive(body.version, "version", false)?,
    })
}

fn version_spec(text: &str) -> Result<VersionSpec, ApiError> {
    Ok(VersionSpec::parse(text)?)
}

fn id_of(text: &str) -> Result<u32, ApiError> {
    text.parse().map_err(|_| {
        ApiError(RegistryError {
            code: 40403,
            message: "Schema not found".into(),
        })
    })
}

/// A schema's JSON as Confluent answers it: `schemaType` and `references` only when not
/// the defaults.
fn schema_json(
    object: &mut serde_json::Map<String, Value>,
    schema_type: SchemaType,
    schema: &str,
    references: &[SchemaReference],
) {
    if !schema_type.is_avro() {
        object.insert("schemaType".into(), json!(schema_type.name()));
    }
    if !references.is_empty() {
        object.insert("references".into(), json!(references));
    }
    object.insert("schema".into(), json!(schema));
}

fn version_json(v: &SubjectVersion) -> Value {
    let mut object = serde_json::Map::new();
    object.insert("subject".into(), json!(v.subject));
    object.insert("version".into(), json!(v.version));
    object.insert("id".into(), json!(v.id));
    schema_json(&mut object, v.schema_type, &v.schema, &v.references);
    Value::Object(object)
}

async fn schema_types() -> HttpResponse {
    let names: Vec<&str> = SchemaType::SUPPORTED.iter().map(|t| t.name()).collect();
    answer(&json!(names))
}

async fn schema_by_id(
    svc: web::Data<SchemaStore>,
    id: web::Path<String>,
    params: web::Query<Params>,
) -> Answer {
    let id = id_of(&id)?;
    let state = svc.current().await?;
    let (schema_type, schema, references) = state.registry.schema_by_id(id)?;
    let schema = match &params.format {
        Some(format) => {
            let input = SchemaInput {
                schema_type,
                schema: schema.to_owned(),
                references: references.to_vec(),
                ..SchemaInput::default()
            };
            state.registry.formatted(&input, format)?
        }
        None => schema.to_owned(),
    };
    let mut object = serde_json::Map::new();
    schema_json(&mut object, schema_type, &schema, references);
    Ok(answer(&Value::Object(object)))
}

async fn raw_schema_by_id(svc: web::Data<SchemaStore>, id: web::Path<String>) -> Answer {
    let id = id_of(&id)?;
    let state = svc.current().await?;
    let (_, schema, _) = state.registry.schema_by_id(id)?;
    Ok(answer_raw(schema))
}

fn answer_raw(schema: &str) -> HttpResponse {
    HttpResponse::Ok()
        .insert_header((header::CONTENT_TYPE, CONTENT_TYPE))
        .body(schema.to_owned())
}

async fn id_subjects(svc: web::Data<SchemaStore>, id: web::Path<String>) -> Answer {
    let id = id_of(&id)?;
    let state = svc.current().await?;
    state.registry.schema_by_id(id)?;
    let mut subjects: Vec<String> = state
        .registry
        .id_versions(id)
        .into_iter()
        .map(|(s, _)| s)
        .collect();
    subjects.dedup();
    Ok(answer(&json!(subjects)))
}

async fn id_versions(svc: web::Data<SchemaStore>, id: web::Path<String>) -> Answer {
    let id = id_of(&id)?;
    let state = svc.current().await?;
    state.registry.schema_by_id(id)?;
    let versions: Vec<Value> = (state.registry.id_versions(id).into_iter())
        .map(|(subject, version)| json!({"subject": subject, "version": version}))
        .collect();
    Ok(answer(&json!(versions)))
}

async fn subjects(svc: web::Data<SchemaStore>, params: web::Query<Params>) -> Answer {
    let state = svc.current().await?;
    let prefix = params.subject_prefix.as_deref().unwrap_or("");
    let subjects: Vec<String> = (state
        .registry
        .subjects(params.deleted.unwrap_or(false))
        .into_iter())
    .filter(|s| s.starts_with(prefix))
    .collect();
    Ok(answer(&json!(subjects)))
}

async fn versions(
    svc: web::Data<SchemaStore>,
    subject: web::Path<String>,
    params: web::Query<Params>,
) -> Answer {
    let state = svc.current().await?;
    let versions = state
        .registry
        .versions(&subject, params.deleted.unwrap_or(false))?;
    Ok(answer(&json!(versions)))
}

async fn register(svc: web::Data<SchemaStore>, subject: web::Path<String>, body: Body) -> Answer {
    let input = schema_input(&read_body(body)?)?;
    let mut state = svc.current().await?;
    let planned = state.registry.register(&subject, &input)?;
    let id = planned.answer.id;
    svc.write(&mut state, planned.records).await?;
    Ok(answer(&json!({"id": id})))
}

async fn lookup(svc: web::Data<SchemaStore>, subject: web::Path<String>, body: Body) -> Answer {
    let input = schema_input(&read_body(body)?)?;
    let state = svc.current().await?;
    let found = state.registry.lookup(&subject, &input)?;
    Ok(answer(&version_json(&found)))
}

/// The version `path` names (`{subject}/versions/{version}`), soft-deleted ones with
/// `deleted=true`.
async fn find_version(
    svc: &SchemaStore,
    path: web::Path<(String, String)>,
    params: &Params,
) -> Result<SubjectVersion, ApiError> {
    let (subject, version) = path.into_inner();
    let spec = version_spec(&version)?;
    let state = svc.current().await?;
    let deleted = params.deleted.unwrap_or(false);
    Ok(state.registry.version(&subject, spec, deleted)?)
}

async fn version_of(
    svc: web::Data<SchemaStore>,
    path: web::Path<(String, String)>,
    params: web::Query<Params>,
) -> Answer {
    let mut found = find_version(&svc, path, &params).await?;
    if let Some(format) = &params.format {
        let state = svc.current().await?;
        let input = SchemaInput {
            schema_type: found.schema_type,
            schema: found.schema.clone(),
            references: found.references.clone(),
            ..SchemaInput::default()
        };
        found.schema = state.registry.formatted(&input, format)?;
    }
    Ok(answer(&version_json(&found)))
}

async fn raw_version(
    svc: web::Data<SchemaStore>,
    path: web::Path<(String, String)>,
    params: web::Query<Params>,
) -> Answer {
    let found = find_version(&svc, path, &params).await?;
    Ok(answer_raw(&found.schema))
}

async fn delete_version(
    svc: web::Data<SchemaStore>,
    path: web::Path<(String, String)>,
    params: web::Query<Params>,
) -> Answer {
    let (subject, version) = path.into_inner();
    let spec = version_spec(&version)?;
    let mut state = svc.current().await?;
    let planned =
        state
            .registry
            .delete_version(&subject, spec, params.permanent.unwrap_or(false))?;
    let deleted = planned.answer;
    svc.write(&mut state, planned.records).await?;
    Ok(answer(&json!(deleted)))
}

async fn delete_subject(
    svc: web::Data<SchemaStore>,
    subject: web::Path<String>,
    params: web::Query<Params>,
) -> Answer {
    let mut state = svc.current().await?;
    let planned = state
        .registry
        .delete_subject(&subject, params.permanent.unwrap_or(false))?;
    let deleted = planned.answer.clone();
    svc.write(&mut state, planned.records).await?;
    Ok(answer(&json!(deleted)))
}

fn level_of(body: &[u8]) -> Result<Compatibility, ApiError> {
    let body: ConfigBody = parse_body(body)?;
    body.compatibility.parse().map_err(|message| {
        ApiError(RegistryError {
            code: 42203,
            message,
        })
    })
}

async fn global_config(svc: web::Data<SchemaStore>) -> Answer {
    let state = svc.current().await?;
    Ok(answer(
        &json!({"compatibilityLevel": state.registry.level(None).name()}),
    ))
}

async fn set_global_config(svc: web::Data<SchemaStore>, body: Body) -> Answer {
    set_config(&svc, None, &read_body(body)?).await
}

async fn set_subject_config(
    svc: web::Data<SchemaStore>,
    subject: web::Path<String>,
    body: Body,
) -> Answer {
    set_config(&svc, Some(&subject), &read_body(body)?).await
}

async fn set_config(svc: &SchemaStore, subject: Option<&str>, body: &[u8]) -> Answer {
    let level = level_of(body)?;
    let mut state = svc.current().await?;
    let planned = state.registry.set_level(subject, level)?;
    svc.write(&mut state, planned.records).await?;
    Ok(answer(&json!({"compatibility": level.name()})))
}

async fn delete_global_config(svc: web::Data<SchemaStore>) -> Answer {
    delete_config(&svc, None).await
}

async fn delete_subject_config(svc: web::Data<SchemaStore>, subject: web::Path<String>) -> Answer {
    delete_config(&svc, Some(&subject)).await
}

async fn delete_config(svc: &SchemaStore, subject: Option<&str>) -> Answer {
    let mut state = svc.current().await?;
    let planned = state.registry.delete_level(subject)?;
    let had = planned.answer;
    svc.write(&mut state, planned.records).await?;
    Ok(answer(&json!({"compatibilityLevel": had.name()})))
}

async fn subject_config(
    svc: web::Data<SchemaStore>,
    subject: web::Path<String>,
    params: web::Query<Params>,
) -> Answer {
    let state = svc.current().await?;
    let level = match state.registry.subject_level(&subject) {
        Some(level) => level,
        None if params.default_to_global.unwrap_or(false) => state.registry.level(None),
        None => {
            return Err(ApiError(RegistryError {
                code: 40408,
                message: format!(
                    "Subject '{subject}' does not have subject-level compatibility configured"
                ),
            }))
        }
    };
    Ok(answer(&json!({"compatibilityLevel": level.name()})))
}

async fn compatibility_latest(
    svc: web::Data<SchemaStore>,
    subject: web::Path<String>,
    params: web::Query<Params>,
    body: Body,
) -> Answer {
    test_compatibility(
        &svc,
        &subject,
        VersionSpec::Latest,
        &params,
        &read_body(body)?,
    )
    .await
}

async fn compatibility(
    svc: web::Data<SchemaStore>,
    path: web::Path<(String, String)>,
    params: web::Query<Params>,
    body: Body,
) -> Answer {
    let (subject, version) = path.into_inner();
    let spec = version_spec(&version)?;
    test_compatibility(&svc, &subject, spec, &params, &read_body(body)?).await
}

async fn test_compatibility(
    svc: &SchemaStore,
    subject: &str,
    spec: VersionSpec,
    params: &Params,
    body: &[u8],
) -> Answer {
    let input = schema_input(body)?;
    let state = svc.current().await?;
    let why = state.registry.test_compatibility(subject, spec, &input)?;
    let mut body = json!({"is_compatible": why.is_empty()});
    if params.verbose.unwrap_or(false) {
        body["messages"] = json!(why);
    }
    Ok(answer(&body))
}

async fn referenced_by(svc: web::Data<SchemaStore>, path: web::Path<(String, String)>) -> Answer {
    let (subject, version) = path.into_inner();
    let spec = version_spec(&version)?;
    let state = svc.current().await?;
    Ok(answer(&json!(state
        .registry
        .referenced_by(&subject, spec)?)))
}

async fn global_mode(svc: web::Data<SchemaStore>) -> Answer {
    let state = svc.current().await?;
    Ok(answer(&json!({"mode": state.registry.mode(None).name()})))
}

async fn set_global_mode(
    svc: web::Data<SchemaStore>,
    params: web::Query<Params>,
    body: Body,
) -> Answer {
    set_mode(&svc, None, &params, &read_body(body)?).await
}

async fn set_subject_mode(
    svc: web::Data<SchemaStore>,
    subject: web::Path<String>,
    params: web::Query<Params>,
    body: Body,
) -> Answer {
    set_mode(&svc, Some(&subject), &params, &read_body(body)?).await
}

async fn set_mode(
    svc: &SchemaStore,
    subject: Option<&str>,
    params: &Params,
    body: &[u8],
) -> Answer {
    let body: ModeBody = parse_body(body)?;
    let mode = body.mode.parse::<Mode>().map_err(|message| {
        ApiError(RegistryError {
            code: 42204,
            message,
        })
    })?;
    let mut state = svc.current().await?;
    let planned = (state.registry).set_mode(subject, mode, params.force.unwrap_or(false))?;
    svc.write(&mut state, planned.records).await?;
    Ok(answer(&json!({"mode": mode.name()})))
}

async fn subject_mode(
    svc: web::Data<SchemaStore>,
    subject: web::Path<String>,
    params: web::Query<Params>,
) -> Answer {
    let state = svc.current().await?;
    let mode = match state.registry.subject_mode(&subject) {
        Some(mode) => mode,
        None if params.default_to_global.unwrap_or(false) => state.registry.mode(None),
        None => {
            return Err(ApiError(RegistryError {
                code: 40409,
                message: format!("Subject '{subject}' does not have subject-level mode configured"),
            }))
        }
    };
    Ok(answer(&json!({"mode": mode.name()})))
}

async fn delete_subject_mode(svc: web::Data<SchemaStore>, subject: web::Path<String>) -> Answer {
    let mut state = svc.current().await?;
    let planned = state.registry.delete_mode(&subject)?;
    let had = planned.answer;
    svc.write(&mut state, planned.records).await?;
    Ok(answer(&json!({"mode": had.name()})))
}
