//! The rule applied to the edges: the layers at the top, no cycle among siblings anywhere.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::modules::{Crate, ModPath};

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
pub fn check(sources: &BTreeMap<String, String>, layers: &[(&str, &[&str])]) -> Vec<String> {
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
