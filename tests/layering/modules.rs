//! The module tree built from the files, and each path resolved to the deepest module it
//! names.

use std::collections::{BTreeMap, BTreeSet};

pub use crate::read::Written;
use crate::read::{read_file, without_tests, FileSays};

/// A module's path from the crate root: `[]` is the root, `["storage", "segment"]` is
/// `storage::segment`.
pub type ModPath = Vec<String>;

/// The module a file under `src/` is: `lib.rs` the root, `a/mod.rs` and `a.rs` module `a`.
pub fn module_of(file: &str) -> ModPath {
    let file = file.strip_suffix(".rs").unwrap();
    let mut path: ModPath = file.split('/').map(str::to_owned).collect();
    if path.last().is_some_and(|last| last == "mod") || path == ["lib"] {
        path.pop();
    }
    path
}

/// The crate as the check sees it.
pub struct Crate {
    /// File (relative to `src/`) → what it says.
    pub files: BTreeMap<String, FileSays>,
    /// File → its source lines, to quote.
    pub lines: BTreeMap<String, Vec<String>>,
    pub modules: BTreeSet<ModPath>,
    /// Module → name → the `use` that brings the name into it (file, path).
    pub imports: BTreeMap<ModPath, BTreeMap<String, (String, Written)>>,
}

impl Crate {
    pub fn new(sources: &BTreeMap<String, String>) -> Crate {
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
    pub fn resolve(&self, file: &str, path: &Written, hops: usize) -> Option<ModPath> {
        let mut here = module_of(file);
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
        // Inline modules fold into the module of their file.
        while !current.is_empty() && !self.modules.contains(&current) {
            current.pop();
        }
        Some(current)
    }

    /// Every edge between siblings: (parent, from child, to child) → where it is written
    /// (file, line).
    pub fn edges(&self) -> BTreeMap<(ModPath, String, String), Vec<(String, usize)>> {
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
