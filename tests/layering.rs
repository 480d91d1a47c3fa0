//! The crate's layers point one way, and so do the modules inside each of them.
//!
//! This reads every source file under `src/` (not the binary, not `*tests.rs` files, not a
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
//! `super::Item`) counts as the module it comes from. Glob imports do not; comments, strings
//! and paths that start with another crate's name are ignored.
//!
//! A failure names the modules of the cycle in order and, for each edge, the file and line
//! that make it.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fs;
use std::path::{Path, PathBuf};

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
        ],
    ),
    ("actors", &["messages", "actors", "trace", "broker_ref"]),
    ("backend", &["kafka"]),
    ("async handle", &["async_handle"]),
    ("listener", &["listener"]),
    ("handles", &["handle", "consumer", "stream", "topic"]),
    ("tools", &["transfer"]),
];

/// A module's path from the crate root: `[]` is the root, `["storage", "segment"]` is
/// `storage::segment`.
type ModPath = Vec<String>;

// ---------------------------------------------------------------------------------------
// Reading the files

/// Every `.rs` file below `dir`, but the binary's and the files of test modules, by path
/// relative to `root`.
fn sources(root: &Path, dir: &Path, files: &mut BTreeMap<String, String>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "bin") {
                sources(root, &path, files);
            }
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

/// The module a file under `src/` is: `lib.rs` the root, `a/mod.rs` and `a.rs` module `a`.
fn module_of(file: &str) -> ModPath {
    let file = file.strip_suffix(".rs").unwrap();
    let mut path: ModPath = file.split('/').map(str::to_owned).collect();
    if path.last().is_some_and(|last| last == "mod") || path == ["lib"] {
        path.pop();
    }
    path
}

/// `text` up to its `#[cfg(test)] mod x { .. }` (taken to run to the end of the file, where
/// this crate keeps its test modules).
fn without_tests(text: &str) -> &str {
    let mut from = 0;
    while let Some(at) = text[from..].find("#[cfg(test)]") {
        let attr = from + at;
        let rest = text[attr + "#[cfg(test)]".len()..].trim_start();
        let item = rest.split(['{', ';']).next().unwrap_or("");
        if rest.starts_with("mod ") && rest[item.len()..].starts_with('{') {
            return &text[..attr];
        }
        from = attr + 1;
    }
    text
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    /// `::`
    PathSep,
    Punct(char),
}

/// The tokens of Rust source that matter to paths, each with its line (1-based); comments,
/// strings, characters and numbers are skipped.
fn tokens(code: &str) -> Vec<(Token, usize)> {
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    // Skips a string body from just after its opening quote, with escapes unless raw.
    let string = |i: &mut usize, line: &mut usize, hashes: Option<usize>| {
        while *i < chars.len() {
            let c = chars[*i];
            *i += 1;
            match c {
                '\n' => *line += 1,
                '\\' if hashes.is_none() => {
                    if chars.get(*i) == Some(&'\n') {
                        *line += 1;
                    }
                    *i += 1;
                }
                '"' => {
                    let n = hashes.unwrap_or(0);
                    if (0..n).all(|k| chars.get(*i + k) == Some(&'#')) {
                        *i += n;
                        return;
                    }
                }
                _ => {}
            }
        }
    };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if chars[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
        } else if c == '"' {
            i += 1;
            string(&mut i, &mut line, None);
        } else if c == '\'' {
            // A character literal ('a', '\n', '"') or a lifetime ('a, 'static).
            if next == Some('\\') {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if chars.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                out.push((Token::Punct('\''), line));
                i += 1;
            }
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let after = chars.get(i).copied();
            if matches!(word.as_str(), "r" | "br") && matches!(after, Some('"' | '#')) {
                let mut hashes = 0;
                while chars.get(i) == Some(&'#') {
                    hashes += 1;
                    i += 1;
                }
                if chars.get(i) == Some(&'"') {
                    i += 1;
                    string(&mut i, &mut line, Some(hashes));
                }
            } else if word == "b" && after == Some('"') {
                i += 1;
                string(&mut i, &mut line, None);
            } else if word == "b" && after == Some('\'') {
                i += 1;
                if chars.get(i + 1) == Some(&'\\') {
                    i += 2;
                }
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else {
                out.push((Token::Ident(word), line));
            }
        } else if c.is_ascii_digit() {
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
        } else if c == ':' && next == Some(':') {
            out.push((Token::PathSep, line));
            i += 2;
        } else {
            out.push((Token::Punct(c), line));
            i += 1;
        }
    }
    out
}

/// A path written in a file.
#[derive(Debug, Clone, PartialEq)]
struct Written {
    /// Its segments, `crate`, `super` and `self` included.
    segments: Vec<String>,
    /// The inline `mod x { .. }` blocks it is written in, outermost first.
    inline: Vec<String>,
    line: usize,
    /// For a leaf of a `use`: the name it brings into scope (`None` for a glob).
    imports: Option<String>,
}

/// What one file says about modules: the paths it writes and the child modules it declares
/// (`mod x;`).
#[derive(Debug, Default)]
struct FileSays {
    paths: Vec<Written>,
    declares: BTreeSet<String>,
}

fn read_file(code: &str) -> FileSays {
    let tokens = tokens(code);
    let mut says = FileSays::default();
    let ident = |at: usize| match tokens.get(at) {
        Some((Token::Ident(name), _)) => Some(name.as_str()),
        _ => None,
    };
    let punct = |at: usize, c: char| tokens.get(at).is_some_and(|(t, _)| *t == Token::Punct(c));
    // Inline modules open around the current token: (name, brace depth inside it).
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0;
    let mut i = 0;
    while i < tokens.len() {
        let starts_path =
            i == 0 || !matches!(tokens[i - 1].0, Token::PathSep | Token::Punct('.' | '\''));
        match &tokens[i].0 {
            Token::Punct('{') => {
                depth += 1;
                i += 1;
            }
            Token::Punct('}') => {
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
                depth -= 1;
                i += 1;
            }
            Token::Ident(word) if word == "mod" && ident(i + 1).is_some() => {
                let name = ident(i + 1).unwrap().to_owned();
                if punct(i + 2, ';') {
                    says.declares.insert(name);
                } else if punct(i + 2, '{') {
                    inline.push((name, depth + 1));
                }
                i += 2;
            }
            Token::Ident(word) if word == "use" && starts_path => {
                let names: Vec<String> = inline.iter().map(|(n, _)| n.clone()).collect();
                i = use_tree(&tokens, i + 1, Vec::new(), &names, &mut says.paths);
            }
            Token::Ident(first) if starts_path => {
                let mut segments = vec![first.clone()];
                let mut line = tokens[i].1;
                i += 1;
                while tokens.get(i).is_some_and(|(t, _)| *t == Token::PathSep) {
                    let Some(name) = ident(i + 1) else { break };
                    segments.push(name.to_owned());
                    line = tokens[i + 1].1;
                    i += 2;
                }
                if segments.len() > 1 {
                    says.paths.push(Written {
                        segments,
                        inline: inline.iter().map(|(n, _)| n.clone()).collect(),
                        line,
                        imports: None,
                    });
                }
            }
            _ => i += 1,
        }
    }
    says
}

/// Reads the use tree at `at` (after `use`, or inside a group) below `prefix`, adding each of
/// its leaves to `out`; returns where it ends.
fn use_tree(
    tokens: &[(Token, usize)],
    mut at: usize,
    prefix: Vec<String>,
    inline: &[String],
    out: &mut Vec<Written>,
) -> usize {
    let mut segments = prefix;
    let mut line = tokens.get(at).map_or(0, |t| t.1);
    if tokens.get(at).is_some_and(|(t, _)| *t == Token::PathSep) {
        at += 1;
    }
    let leaf = |segments: Vec<String>, line, imports, out: &mut Vec<Written>| {
        out.push(Written {
            segments,
            inline: inline.to_vec(),
            line,
            imports,
        })
    };
    loop {
        match tokens.get(at) {
            Some((Token::Ident(name), l)) => {
                segments.push(name.clone());
                line = *l;
                at += 1;
                if tokens.get(at).is_some_and(|(t, _)| *t == Token::PathSep) {
                    at += 1;
                } else {
                    break;
                }
            }
            Some((Token::Punct('{'), _)) => {
                at += 1;
                while let Some((token, _)) = tokens.get(at) {
                    match token {
                        Token::Punct('}') => return at + 1,
                        Token::Punct(',') => at += 1,
                        _ => {
                            let before = at;
                            at = use_tree(tokens, at, segments.clone(), inline, out);
                            at = at.max(before + 1);
                        }
                    }
                }
                return at;
            }
            Some((Token::Punct('*'), l)) => {
                leaf(segments, *l, None, out);
                return at + 1;
            }
            _ => break,
        }
    }
    if segments.last().is_some_and(|s| s == "self") {
        segments.pop();
    }
    let mut name = segments.last().cloned();
    if let Some((Token::Ident(word), _)) = tokens.get(at) {
        if word == "as" {
            if let Some((Token::Ident(alias), _)) = tokens.get(at + 1) {
                name = Some(alias.clone());
            }
            at += 2;
        }
    }
    if !segments.is_empty() {
        leaf(segments, line, name, out);
    }
    at
}

// ---------------------------------------------------------------------------------------
// Resolving paths to modules

/// The crate as the check sees it.
struct Crate {
    /// File (relative to `src/`) → what it says.
    files: BTreeMap<String, FileSays>,
    /// File → its source lines, to quote.
    lines: BTreeMap<String, Vec<String>>,
    modules: BTreeSet<ModPath>,
    /// Module → name → the `use` that brings the name into it (file, path).
    imports: BTreeMap<ModPath, BTreeMap<String, (String, Written)>>,
}

impl Crate {
    fn new(sources: &BTreeMap<String, String>) -> Crate {
        let mut files = BTreeMap::new();
        let mut lines = BTreeMap::new();
        let mut modules = BTreeSet::new();
        let mut imports: BTreeMap<ModPath, BTreeMap<String, (String, Written)>> = BTreeMap::new();
        for (file, text) in sources {
            let module = module_of(file);
            modules.insert(module.clone());
            let says = read_file(without_tests(text));
            for path in &says.paths {
                if let (Some(name), true) = (&path.imports, path.inline.is_empty()) {
                    imports
                        .entry(module.clone())
                        .or_default()
                        .insert(name.clone(), (file.clone(), path.clone()));
                }
            }
            files.insert(file.clone(), says);
            lines.insert(file.clone(), text.lines().map(str::to_owned).collect());
        }
        Crate {
            files,
            lines,
            modules,
            imports,
        }
    }

    /// The deepest module `path`, written in `file`, names; `None` for another crate's path or
    /// a local name.
    fn resolve(&self, file: &str, path: &Written, hops: usize) -> Option<ModPath> {
        let module = module_of(file);
        let mut here = module.clone();
        here.extend(path.inline.iter().cloned());
        let segments = &path.segments;
        let (mut current, rest): (ModPath, &[String]) = match segments[0].as_str() {
            "crate" => (Vec::new(), &segments[1..]),
            "self" => (here, &segments[1..]),
            "super" => {
                let ups = segments.iter().take_while(|s| *s == "super").count();
                if ups > here.len() {
                    return None;
                }
                (here[..here.len() - ups].to_vec(), &segments[ups..])
            }
            first if path.inline.is_empty() && self.files[file].declares.contains(first) => {
                (here, &segments[..])
            }
            _ => return None,
        };
        for segment in rest {
            let mut child = current.clone();
            child.push(segment.clone());
            if self.modules.contains(&child) {
                current = child;
            } else if let Some((from, import)) = self
                .imports
                .get(&current)
                .and_then(|names| names.get(segment))
                .filter(|_| hops < 8)
            {
                match self.resolve(from, import, hops + 1) {
                    Some(module) => current = module,
                    None => break,
                }
            } else {
                break;
            }
        }
        while !self.modules.contains(&current) {
            current.pop();
        }
        Some(current)
    }

    /// Every edge between siblings: (parent, from child, to child) → where it is written
    /// (file, line).
    fn edges(&self) -> BTreeMap<(ModPath, String, String), Vec<(String, usize)>> {
        let mut edges: BTreeMap<_, Vec<_>> = BTreeMap::new();
        for (file, says) in &self.files {
            let from = module_of(file);
            for path in &says.paths {
                let Some(to) = self.resolve(file, path, 0) else {
                    continue;
                };
                let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
                if common == from.len() || common == to.len() {
                    continue; // one is the other's ancestor
                }
                let parent = from[..common].to_vec();
                let key = (parent, from[common].clone(), to[common].clone());
                let at = (file.clone(), path.line);
                let places = edges.entry(key).or_default();
                if !places.contains(&at) {
                    places.push(at);
                }
            }
        }
        edges
    }
}

// ---------------------------------------------------------------------------------------
// The check

fn layer_of(layers: &[(&str, &[&str])], module: &str) -> Option<usize> {
    layers
        .iter()
        .position(|(_, modules)| modules.contains(&module))
}

fn name(module: &[String]) -> String {
    if module.is_empty() {
        "the crate root".to_owned()
    } else {
        format!("`{}`", module.join("::"))
    }
}

/// The shortest cycle through `start` in `graph`, if there is one.
fn cycle_through(graph: &BTreeMap<&str, BTreeSet<&str>>, start: &str) -> Option<Vec<String>> {
    let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(here) = queue.pop_front() {
        for &next in graph.get(here).into_iter().flatten() {
            if next == start {
                let mut cycle = vec![here.to_owned()];
                let mut at = here;
                while at != start {
                    at = came_from[at];
                    cycle.push(at.to_owned());
                }
                cycle.reverse();
                return Some(cycle);
            }
            if !came_from.contains_key(next) {
                came_from.insert(next, here);
                queue.push_back(next);
            }
        }
    }
    None
}

/// What is wrong with the crate made of `sources` (file under `src/` → its text), each
/// problem told with the files and lines that make it.
fn check(sources: &BTreeMap<String, String>, layers: &[(&str, &[&str])]) -> Vec<String> {
    let krate = Crate::new(sources);
    let edges = krate.edges();
    let quote = |(file, line): &(String, usize)| {
        let text = krate.lines[file].get(line - 1).map_or("", |l| l.trim());
        format!("src/{file}:{line}: {text}")
    };
    let places = |places: &[(String, usize)]| {
        let mut told: Vec<String> = places.iter().take(3).map(&quote).collect();
        if places.len() > 3 {
            told.push(format!("and {} more", places.len() - 3));
        }
        told.join("\n        ")
    };
    let mut wrong = Vec::new();

    // The top-level modules follow the layers.
    for module in &krate.modules {
        if module.len() == 1 && layer_of(layers, &module[0]).is_none() {
            wrong.push(format!(
                "`{}` is in no layer: place it in LAYERS",
                module[0]
            ));
        }
    }
    for ((parent, from, to), at) in &edges {
        let (Some(from_layer), Some(to_layer)) = (layer_of(layers, from), layer_of(layers, to))
        else {
            continue;
        };
        if parent.is_empty() && to_layer > from_layer {
            wrong.push(format!(
                "`{from}` ({}) uses `{to}` ({}), a layer above it:\n        {}",
                layers[from_layer].0,
                layers[to_layer].0,
                places(at)
            ));
        }
    }

    // The children of each parent form no cycle.
    let mut by_parent: BTreeMap<&ModPath, BTreeMap<&str, BTreeSet<&str>>> = BTreeMap::new();
    for (parent, from, to) in edges.keys() {
        by_parent
            .entry(parent)
            .or_default()
            .entry(from)
            .or_default()
            .insert(to);
    }
    for (parent, graph) in &by_parent {
        let mut reported: BTreeSet<String> = BTreeSet::new();
        for &start in graph.keys() {
            if reported.contains(start) {
                continue;
            }
            let Some(cycle) = cycle_through(graph, start) else {
                continue;
            };
            // Its whole knot (every child on some cycle with `start`), told once.
            let knot: Vec<&str> = graph
                .keys()
                .copied()
                .filter(|&m| m == start || (reaches(graph, start, m) && reaches(graph, m, start)))
                .collect();
            reported.extend(knot.iter().map(|m| m.to_string()));
            let mut text = format!(
                "a cycle among the children of {}: {} → {}",
                name(parent),
                cycle.join(" → "),
                cycle[0]
            );
            for (k, from) in cycle.iter().enumerate() {
                let to = &cycle[(k + 1) % cycle.len()];
                let at = &edges[&((*parent).clone(), from.clone(), to.clone())];
                text += &format!("\n    {from} → {to}:\n        {}", places(at));
            }
            if knot.len() > cycle.len() {
                text += &format!(
                    "\n    (the same knot also holds: {})",
                    knot.iter()
                        .filter(|m| !cycle.iter().any(|c| c == *m))
                        .copied()
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
            wrong.push(text);
        }
    }
    wrong
}

/// Whether `to` can be reached from `from`.
fn reaches(graph: &BTreeMap<&str, BTreeSet<&str>>, from: &str, to: &str) -> bool {
    let mut seen = BTreeSet::from([from]);
    let mut queue = VecDeque::from([from]);
    while let Some(here) = queue.pop_front() {
        for &next in graph.get(here).into_iter().flatten() {
            if next == to {
                return true;
            }
            if seen.insert(next) {
                queue.push_back(next);
            }
        }
    }
    false
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

// ---------------------------------------------------------------------------------------
// The check, checked

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
fn the_reader_sees_paths_groups_aliases_and_reexports_and_skips_comments_and_tests() {
    let text = "use crate::a::B;\n// crate::commented\nfn f() { crate::c::d(); x.y::<T>(); }\n\
                use crate::{e, f::{g, h as k, self}, i::*};\nmod child;\n\
                fn g() { child::run(); let s = r#\"crate::in_string\"#; let c = '\"'; }\n\
                #[cfg(test)]\nmod tests {\n use crate::tested;\n}\n";
    let says = read_file(without_tests(text));
    let paths: Vec<(String, Option<String>)> = says
        .paths
        .iter()
        .map(|p| (p.segments.join("::"), p.imports.clone()))
        .collect();
    let some = |s: &str| Some(s.to_owned());
    assert_eq!(
        paths,
        [
            ("crate::a::B".to_owned(), some("B")),
            ("crate::c::d".to_owned(), None),
            ("crate::e".to_owned(), some("e")),
            ("crate::f::g".to_owned(), some("g")),
            ("crate::f::h".to_owned(), some("k")),
            ("crate::f".to_owned(), some("f")),
            ("crate::i".to_owned(), None),
            ("child::run".to_owned(), None),
        ]
    );
    assert_eq!(says.declares, BTreeSet::from(["child".to_owned()]));

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
