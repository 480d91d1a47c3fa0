//! The crate's layers point one way, and so do the modules inside each of them.
//!
//! This reads every source file under `src/` (not `*tests.rs` files, not a
//! `#[cfg(test)] mod x { .. }` block) and builds the module tree from the files: `a.rs` or
//! `a/mod.rs` is module `a`, `a/b.rs` its child `b`. An inline `mod x { .. }` block counts as
//! part of its file. Then it applies one rule at every level of the tree:
//!
//! **Fold each child module with its whole subtree; the children of one parent must not
//! form a cycle.** A parent and its own children may use each other (the parent is the
//! facade of its children), and a module may use its ancestors. A reference from
//! `storage/segment/scan.rs` to `storage/fetch.rs` is an edge `segment → fetch` between the
//! children of `storage`; if `fetch` (or any file below it) also uses `segment`, that is a
//! cycle. The crate root's children are the top-level modules, which must also follow
//! [`LAYERS`]: a module may use its own layer and the layers below it, never one above.
//!
//! A reference is a path wherever it is written, in a `use` or in code: `crate::a::b::Item`,
//! `super::x::Item` (and `super::super::..`), `self::x`, `$crate::..`, a path that starts
//! with a child module the file declares (`mod segment;` then `segment::Segment`), and each
//! leaf of a `use` group (`use crate::{a::{b, c::D}, e};`). It counts as the deepest module
//! it names. A name a module imports or re-exports with `use` (`lib.rs`'s `pub use`, a
//! facade's `pub use child::Item`, a parent's private `use` that its children reach through
//! `super::Item`) counts as the module it comes from. A glob (`use super::*`) counts as a
//! use of the module it names, but the names it brings in are not followed; comments,
//! strings and paths that start with another crate's name are ignored. What paths cannot
//! show is not seen either: a method called on `self` that another child's `impl` block
//! defines.
//!
//! A failure names the modules of the cycle in order and, for each edge, the file and line
//! that make it.
//!
//! The code is beside this file in `layering/`: `read.rs` turns a file into the paths it
//! writes, `modules.rs` builds the tree and resolves each path, `check.rs` applies the rule,
//! and `made_up.rs` runs the check on small made-up crates, to show that it fails when it
//! should.

// Named by path so that this file stays the test's root, where `src/lib.rs` points.
#[path = "layering/check.rs"]
mod check;
#[path = "layering/made_up.rs"]
mod made_up;
#[path = "layering/modules.rs"]
mod modules;
#[path = "layering/read.rs"]
mod read;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use check::check;
use modules::{Crate, Written};

/// The top-level modules by layer, bottom up, as `src/lib.rs`'s tour states them: a module
/// may use its own layer (without a cycle) and the layers below it. A new top-level module
/// must be placed here.
const LAYERS: &[(&str, &[&str])] = &[
    ("storage", &["storage"]),
    (
        "domain",
        &[
            "group_options",
            "error",
            "config",
            "clock",
            "spin",
            "wait",
            "partitioner",
            "group",
            "types",
            "metrics",
            "partition",
            "produce_queue",
            "routing",
            "inspect",
            "security",
            "schemas",
        ],
    ),
    ("actors", &["messages", "actors", "trace", "broker_ref"]),
    ("backend", &["kafka"]),
    ("async handle", &["async_handle"]),
    ("listener", &["listener", "console", "schema_api"]),
    (
        "handles",
        &["handle", "consumer", "stream", "topic", "table"],
    ),
    ("composition root", &["root"]),
    ("tools", &["transfer"]),
];

/// Every `.rs` file below `dir`, but the files of test modules, by path relative to `root`.
fn sources(root: &Path, dir: &Path, files: &mut BTreeMap<String, String>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(root, &path, files);
        } else if path.extension().is_some_and(|e| e == "rs")
            && !path
                .file_stem()
                .unwrap()
                .to_str()
                .unwrap()
                .ends_with("tests")
        {
            let relative = path.strip_prefix(root).unwrap().to_str().unwrap();
            files.insert(
                relative.replace('\\', "/"),
                fs::read_to_string(&path).unwrap(),
            );
        }
    }
}

fn real_crate() -> BTreeMap<String, String> {
    let root: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = BTreeMap::new();
    sources(&root, &root, &mut files);
    files
}

#[test]
fn imports_point_down_the_layers_and_no_siblings_form_a_cycle_at_any_level() {
    let files = real_crate();
    let krate = Crate::new(&files);
    let top_level = krate.modules.iter().filter(|m| m.len() == 1).count();
    assert!(top_level > 20, "read too few modules: {:?}", krate.modules);
    let wrong = check(&files, LAYERS);
    assert!(wrong.is_empty(), "\n{}\n", wrong.join("\n\n"));
}

#[test]
fn reexports_count_as_the_module_they_come_from() {
    let krate = Crate::new(&real_crate());
    let at = |segments: &[&str]| Written {
        segments: segments.iter().map(|s| s.to_string()).collect(),
        inline: Vec::new(),
        line: 1,
        imports: None,
    };
    assert_eq!(
        krate.resolve("topic.rs", &at(&["crate", "NanoKafka"]), 0),
        Some(vec!["handle".to_owned()])
    );
    assert_eq!(
        krate.resolve("trace.rs", &at(&["crate", "BrokerActor"]), 0),
        Some(vec!["actors".to_owned(), "broker".to_owned()])
    );
}
