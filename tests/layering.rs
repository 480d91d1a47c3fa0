//! The crate's layers point one way. This reads every source file under `src/` (not
//! `#[cfg(test)]` code), folds each module into its top-level module, and fails when an
//! import points up a layer or the top-level modules form a cycle. A reference counts
//! wherever it is spelled `crate::name` (a `use`, a path, a `use crate::{..}` group); a name
//! that `lib.rs` re-exports counts as the module it comes from. Comments are ignored.
//!
//! [`LAYERS`] is the order, bottom up, as `src/lib.rs`'s tour states it. A new top-level
//! module must be placed in it.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The top-level modules by layer, bottom up: a module may use its own layer (without a
/// cycle) and the layers below it.
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
        ],
    ),
    ("actors", &["messages", "actors", "trace", "broker_ref"]),
    ("backend", &["kafka"]),
    ("async handle", &["async_handle"]),
    ("listener", &["listener"]),
    ("handles", &["handle", "consumer", "stream", "topic"]),
    ("tools", &["transfer"]),
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file below `dir`, but the files of test modules.
fn sources(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs")
            && !path
                .file_stem()
                .unwrap()
                .to_str()
                .unwrap()
                .ends_with("tests")
        {
            files.push(path);
        }
    }
}

/// The code of `text` without line comments and without its `#[cfg(test)] mod x { .. }`
/// (taken to run to the end of the file, where this crate keeps its test modules).
fn code(text: &str) -> String {
    let mut text = text;
    let mut from = 0;
    while let Some(at) = text[from..].find("#[cfg(test)]") {
        let attr = from + at;
        let rest = text[attr + "#[cfg(test)]".len()..].trim_start();
        let item = rest.split(['{', ';']).next().unwrap_or("");
        if rest.starts_with("mod ") && rest[item.len()..].starts_with('{') {
            text = &text[..attr];
            break;
        }
        from = attr + 1;
    }
    text.lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

fn identifier(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

/// The first segment of every `crate::` path in `code`, `use crate::{a, b::c}` groups
/// included.
fn crate_paths(code: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let mut start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 1 => break,
                    '}' => depth -= 1,
                    ',' if depth == 1 => start = true,
                    c if start && !c.is_whitespace() => {
                        names.insert(identifier(&group[i..]).to_owned());
                        start = false;
                    }
                    _ => {}
                }
            }
        } else {
            names.insert(identifier(rest).to_owned());
        }
    }
    names
}

/// Names `lib.rs` re-exports → the top-level module each comes from.
fn reexports() -> BTreeMap<String, String> {
    let lib = code(&fs::read_to_string(src().join("lib.rs")).unwrap());
    let mut names = BTreeMap::new();
    for statement in lib.split("pub use ").skip(1) {
        let statement = statement.split(';').next().unwrap();
        let module = identifier(statement.trim_start()).to_owned();
        let items = statement.rsplit("::").next().unwrap();
        for name in items.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
            if !name.is_empty() {
                names.insert(name.to_owned(), module.clone());
            }
        }
    }
    names
}

/// Top-level module → the top-level modules its code names.
fn module_graph() -> BTreeMap<String, BTreeSet<String>> {
    let root = src();
    let mut files = Vec::new();
    sources(&root, &mut files);
    let modules: BTreeSet<String> = files
        .iter()
        .map(|f| top_level(&root, f))
        .filter(|m| m != "lib")
        .collect();
    let reexported = reexports();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let from = top_level(&root, file);
        if from == "lib" {
            continue;
        }
        let text = fs::read_to_string(file).unwrap();
        let uses = graph.entry(from.clone()).or_default();
        for name in crate_paths(&code(&text)) {
            let to = reexported.get(&name).cloned().unwrap_or(name);
            if to != from && modules.contains(&to) {
                uses.insert(to);
            }
        }
    }
    graph
}

fn top_level(root: &Path, file: &Path) -> String {
    let first = file
        .strip_prefix(root)
        .unwrap()
        .components()
        .next()
        .unwrap();
    let first = first.as_os_str().to_str().unwrap();
    first.strip_suffix(".rs").unwrap_or(first).to_owned()
}

fn layer_of(module: &str) -> Option<usize> {
    LAYERS
        .iter()
        .position(|(_, modules)| modules.contains(&module))
}

/// The modules on a cycle through `start`, if there is one.
fn cycle_through(graph: &BTreeMap<String, BTreeSet<String>>, start: &str) -> Option<Vec<String>> {
    fn walk(
        graph: &BTreeMap<String, BTreeSet<String>>,
        start: &str,
        path: &mut Vec<String>,
        seen: &mut BTreeSet<String>,
    ) -> bool {
        let here = path.last().unwrap().clone();
        for next in graph.get(&here).into_iter().flatten() {
            if next == start {
                return true;
            }
            if seen.insert(next.clone()) {
                path.push(next.clone());
                if walk(graph, start, path, seen) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    let mut path = vec![start.to_owned()];
    walk(graph, start, &mut path, &mut BTreeSet::new()).then_some(path)
}

#[test]
fn every_import_points_down_a_layer_or_within_one_and_no_modules_form_a_cycle() {
    let graph = module_graph();
    assert!(graph.len() > 20, "read too few modules: {graph:?}");
    let mut wrong = Vec::new();
    for (from, uses) in &graph {
        let Some(from_layer) = layer_of(from) else {
            wrong.push(format!("`{from}` is in no layer: place it in LAYERS"));
            continue;
        };
        for to in uses {
            match layer_of(to) {
                Some(to_layer) if to_layer > from_layer => wrong.push(format!(
                    "`{from}` ({}) uses `{to}` ({}), a layer above it",
                    LAYERS[from_layer].0, LAYERS[to_layer].0
                )),
                _ => {}
            }
        }
        if let Some(cycle) = cycle_through(&graph, from) {
            wrong.push(format!("a cycle: {} → {from}", cycle.join(" → ")));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_reader_sees_paths_groups_and_reexports_and_skips_comments_and_tests() {
    let text = "use crate::a::B;\n// crate::commented\nfn f() { crate::c::d(); }\n\
                use crate::{e, f::{g, h}, i};\n#[cfg(test)]\nmod tests {\n use crate::tested;\n}\n";
    let names: Vec<String> = crate_paths(&code(text)).into_iter().collect();
    assert_eq!(names, ["a", "c", "e", "f", "i"]);
    assert_eq!(
        reexports().get("NanoKafka").map(String::as_str),
        Some("handle")
    );
}
