//! The pages, embedded in the binary: `GET /` is `index.html`, `GET /assets/{file}` one of a
//! fixed list (anything else is 404). No build step: the files are served as written.

/// `(path under /assets/, content type, bytes)`.
const FILES: &[(&str, &str, &str)] = &[
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/app.js"),
    ),
    (
        "app.css",
        "text/css; charset=utf-8",
        include_str!("assets/app.css"),
    ),
    (
        "vendor/uplot.iife.min.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/vendor/uplot.iife.min.js"),
    ),
    (
        "vendor/uplot.min.css",
        "text/css; charset=utf-8",
        include_str!("assets/vendor/uplot.min.css"),
    ),
];

pub(super) const INDEX_HTML: &str = include_str!("assets/index.html");

/// The content type and bytes of the asset at `path` (under `/assets/`), if it is one.
pub(super) fn asset(path: &str) -> Option<(&'static str, &'static str)> {
    FILES
        .iter()
        .find(|(name, _, _)| *name == path)
        .map(|(_, content_type, body)| (*content_type, *body))
}
