//! The check run on small made-up crates, to show that it can fail and says where.

use std::collections::BTreeMap;

use crate::check::check;

fn synthetic(files: &[(&str, &str)]) -> BTreeMap<String, String> {
    files
        .iter()
        .map(|(path, text)| (path.to_string(), text.to_string()))
        .collect()
}

const TWO_LAYERS: &[(&str, &[&str])] = &[("low", &["storage"]), ("high", &["listener"])];

#[test]
fn a_cycle_between_siblings_through_a_grandchild_is_reported_with_its_lines() {
    let files = synthetic(&[
        ("lib.rs", "mod storage;\nmod listener;\n"),
        ("storage/mod.rs", "pub mod segment;\npub mod fetch;\n"),
        ("storage/segment.rs", "mod scan;\npub struct Segment;\n"),
        (
            "storage/segment/scan.rs",
            "pub fn scan() {\n    let _ = crate::storage::fetch::read();\n}\n",
        ),
        (
            "storage/fetch.rs",
            "use super::segment::Segment;\npub fn read() {}\n",
        ),
        ("listener/mod.rs", "use crate::storage::fetch;\n"),
    ]);
    let wrong = check(&files, TWO_LAYERS);
    assert_eq!(wrong.len(), 1, "{wrong:#?}");
    let told = &wrong[0];
    assert!(
        told.starts_with("a cycle among the children of `storage`: fetch → segment → fetch"),
        "{told}"
    );
    assert!(
        told.contains("src/storage/fetch.rs:1: use super::segment::Segment;"),
        "{told}"
    );
    assert!(
        told.contains("src/storage/segment/scan.rs:2: let _ = crate::storage::fetch::read();"),
        "{told}"
    );
}

#[test]
fn a_parent_and_its_children_may_use_each_other() {
    let files = synthetic(&[
        (
            "lib.rs",
            "mod storage;\nmod listener;\npub use storage::Log;\n",
        ),
        (
            "storage/mod.rs",
            "mod log;\nmod segment;\npub use log::Log;\nuse segment::{Segment, scan::Scan};\n\
             pub struct Config;\n",
        ),
        (
            "storage/log.rs",
            "use super::Config;\nuse super::segment::Segment;\npub struct Log;\n\
             fn f() { recover::run(); }\nmod recover;\n",
        ),
        (
            "storage/log/recover.rs",
            "use super::super::Config;\nuse super::Log;\nuse crate::storage::segment;\n",
        ),
        (
            "storage/segment.rs",
            "pub mod scan;\nuse self::scan::Scan;\n",
        ),
        ("storage/segment/scan.rs", "use super::super::Config;\n"),
        (
            "listener/mod.rs",
            "use crate::{Log, storage::{Config, log}};\n",
        ),
    ]);
    assert_eq!(check(&files, TWO_LAYERS), Vec::<String>::new());
}

#[test]
fn a_top_level_import_up_a_layer_is_reported() {
    let files = synthetic(&[
        ("lib.rs", "mod storage;\nmod listener;\n"),
        ("storage/mod.rs", "mod log;\n"),
        (
            "storage/log.rs",
            "// crate::listener::Server in a comment is not a use\n\
             fn f() { let _ = \"crate::listener\"; }\n\
             use crate::{listener::server::Server};\n",
        ),
        ("listener/mod.rs", "pub mod server;\n"),
        ("listener/server.rs", "pub struct Server;\n"),
    ]);
    let wrong = check(&files, TWO_LAYERS);
    assert_eq!(
        wrong,
        [
            "`storage` (low) uses `listener` (high), a layer above it:\n        \
          src/storage/log.rs:3: use crate::{listener::server::Server};"
        ]
    );
}

#[test]
fn a_cycle_through_a_parents_import_and_an_inline_module_is_reported() {
    // The dispatcher calls every handler; a handler takes the dispatcher's context through
    // the parent's private `use`, from code inside an inline module.
    let files = synthetic(&[
        ("lib.rs", "mod storage;\nmod listener;\n"),
        ("storage/mod.rs", ""),
        (
            "listener/mod.rs",
            "mod dispatch;\nmod produce;\nmod fetch;\nuse dispatch::Context;\n",
        ),
        (
            "listener/dispatch.rs",
            "pub struct Context;\nfn route() {\n    super::produce::handle();\n    \
             super::fetch::handle();\n}\n",
        ),
        ("listener/fetch.rs", "pub fn handle() {}\n"),
        (
            "listener/produce.rs",
            "pub fn handle() {}\nmod acks {\n    use super::super::Context;\n}\n",
        ),
    ]);
    let wrong = check(&files, TWO_LAYERS);
    assert_eq!(
        wrong,
        [
            "a cycle among the children of `listener`: dispatch → produce → dispatch\n    \
          dispatch → produce:\n        src/listener/dispatch.rs:3: super::produce::handle();\n    \
          produce → dispatch:\n        src/listener/produce.rs:3: use super::super::Context;"
        ]
    );
}
