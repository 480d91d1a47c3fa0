//! The server and its route table, the limits on bodies, query strings and paths (each
//! refusal a JSON error), and the pages.

use std::sync::Arc;

use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};

use super::request::{ApiError, Caller, MAX_BODY_BYTES};
use super::{assets, records, schemas, views, writes, Console};

/// Builds the server on `socket`, HTTPS when `tls` is given; it serves once the returned
/// future is spawned.
pub(super) fn server(
    console: Arc<Console>,
    socket: std::net::TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
) -> std::io::Result<actix_web::dev::Server> {
    let data = web::Data::from(console);
    let server = HttpServer::new(move || {
        App::new()
            .app_data(data.clone())
            .app_data(
                web::JsonConfig::default()
                    .limit(MAX_BODY_BYTES)
                    // `application/json` only: a page of another site can send a form or
                    // `text/plain` to this address without asking, but not JSON.
                    .content_type_required(true)
                    .error_handler(|e, _| ApiError::bad_body(&e).into()),
            )
            .app_data(web::QueryConfig::default().error_handler(|e, _| {
                ApiError::bad_request(format!("bad query string: {e}")).into()
            }))
            .app_data(
                web::PathConfig::default()
                    .error_handler(|e, _| ApiError::bad_request(format!("bad path: {e}")).into()),
            )
            .configure(routes)
    })
    // One worker: the console serves a few browser tabs; the broker keeps the cores.
    .workers(1)
    // The process's signals belong to the embedding service (or `nanokafka serve`).
    .disable_signals()
    .shutdown_timeout(1);
    let server = match tls {
        Some(tls) => server.listen_rustls_0_23(socket, Arc::unwrap_or_clone(tls))?,
        None => server.listen(socket)?,
    };
    Ok(server.run())
}

fn routes(cfg: &mut web::ServiceConfig) {
    let topic = "/api/topics/{topic}";
    let partition = "/api/topics/{topic}/partitions/{partition}";
    cfg.service(resource("/").route(web::get().to(index)))
        .service(resource("/assets/{file:.*}").route(web::get().to(asset)))
        .service(resource("/api/overview").route(web::get().to(views::overview)))
        .service(resource("/api/topics").route(web::post().to(writes::create_topic)))
        .service(
            resource(topic)
                .route(web::get().to(views::topic))
                .route(web::patch().to(writes::alter_topic))
                .route(web::delete().to(writes::delete_topic)),
        )
        .service(resource(&format!("{partition}/records")).route(web::get().to(records::records)))
        .service(
            resource(&format!("{partition}/delete-records"))
                .route(web::post().to(writes::delete_records)),
        )
        .service(resource(&format!("{topic}/records")).route(web::post().to(writes::produce)))
        .service(resource(&format!("{topic}/search")).route(web::get().to(records::search)))
        .service(resource("/api/groups").route(web::get().to(views::groups)))
        .service(resource("/api/groups/{group}").route(web::get().to(views::group)))
        .service(resource("/api/groups/{group}/reset").route(web::post().to(writes::reset)))
        .configure(schemas::routes)
        .default_service(web::to(not_found));
}

/// A route whose other methods are answered 405.
fn resource(path: &str) -> actix_web::Resource {
    web::resource(path).default_service(web::to(not_allowed))
}

async fn index(_: Caller) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/html; charset=utf-8")
        .body(assets::INDEX_HTML)
}

async fn asset(_: Caller, file: web::Path<String>) -> Result<HttpResponse, ApiError> {
    let (content_type, body) =
        assets::asset(&file).ok_or_else(|| ApiError::not_found("no such asset"))?;
    Ok(HttpResponse::Ok().content_type(content_type).body(body))
}

async fn not_found(_: Caller, req: HttpRequest) -> Result<HttpResponse, ApiError> {
    Err(ApiError::not_found(format!(
        "no route for {} {}",
        req.method(),
        req.path()
    )))
}

async fn not_allowed(_: Caller, req: HttpRequest) -> Result<HttpResponse, ApiError> {
    Err(ApiError::new(
        actix_web::http::StatusCode::METHOD_NOT_ALLOWED,
        format!("{} does not take {}", req.path(), req.method()),
    ))
}
