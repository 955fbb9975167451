//! The circles between sibling modules, level by level: at each module, its children (each with
//! everything below it) are the nodes, and a reference from one child's subtree into another's
//! is an edge. References between a module and its own descendants are no edges.

use std::collections::BTreeMap;

use super::resolve::{Reference, references};
use super::scc;
use super::tree::Package;

/// One import circle: sibling modules that import each other, directly or around.
#[derive(Debug)]
pub struct Circle {
    /// The modules, each shown as its file (with how many files lie below it), sorted.
    pub members: Vec<String>,
    /// One reference per edge between members, sorted.
    pub edges: Vec<Example>,
}

/// A reference shown as an example of an edge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Example {
    /// The file the reference is in.
    pub file: String,
    /// Its line.
    pub line: u32,
    /// The file it leads to.
    pub target: String,
    /// The path as written.
    pub text: String,
}

/// The import circles of one package.
pub fn package_circles(package: &Package) -> Vec<Circle> {
    // For each module, the edges between its children: (from child, to child) → example.
    let mut levels: BTreeMap<usize, BTreeMap<(usize, usize), Example>> = BTreeMap::new();
    for reference in references(package) {
        let Some((level, from, to)) = sibling_pair(package, reference.from, reference.to) else {
            continue;
        };
        let example = example(package, &reference);
        levels
            .entry(level)
            .or_default()
            .entry((from, to))
            .and_modify(|kept| {
                if (&example.file, example.line) < (&kept.file, kept.line) {
                    *kept = example.clone();
                }
            })
            .or_insert(example);
    }
    let mut circles = Vec::new();
    for edges in levels.values() {
        let mut nodes: Vec<usize> = edges.keys().flat_map(|&(a, b)| [a, b]).collect();
        nodes.sort_unstable();
        nodes.dedup();
        let local = |module: usize| nodes.binary_search(&module).unwrap_or_default();
        let local_edges = edges.keys().map(|&(a, b)| (local(a), local(b)));
        for component in scc::circles(nodes.len(), local_edges) {
            let inside: Vec<usize> = component.iter().map(|&i| nodes[i]).collect();
            let mut members: Vec<String> = inside.iter().map(|&m| label(package, m)).collect();
            members.sort();
            let mut examples: Vec<Example> = edges
                .iter()
                .filter(|((a, b), _)| inside.contains(a) && inside.contains(b))
                .map(|(_, example)| example.clone())
                .collect();
            examples.sort_by(|x, y| (&x.file, x.line).cmp(&(&y.file, y.line)));
            circles.push(Circle {
                members,
                edges: examples,
            });
        }
    }
    circles.sort_by(|a, b| a.members.cmp(&b.members));
    circles
}

/// For a reference between modules `from` and `to`: the module where their branches of the
/// tree meet and its two children they lie in; `None` when one lies within the other (a
/// parent and its children are one unit) or they are in different crates of the package.
fn sibling_pair(package: &Package, from: usize, to: usize) -> Option<(usize, usize, usize)> {
    let path_from = path_from_root(package, from);
    let path_to = path_from_root(package, to);
    if path_from.first() != path_to.first() {
        return None;
    }
    let shared = path_from
        .iter()
        .zip(&path_to)
        .take_while(|(a, b)| a == b)
        .count();
    let (&from_child, &to_child) = (path_from.get(shared)?, path_to.get(shared)?);
    Some((path_from[shared - 1], from_child, to_child))
}

/// The modules from the crate root down to `module`.
fn path_from_root(package: &Package, module: usize) -> Vec<usize> {
    let mut path = vec![module];
    while let Some(parent) = path.last().and_then(|&m| package.modules[m].parent) {
        path.push(parent);
    }
    path.reverse();
    path
}

/// A module shown as its file: `src/a.rs`, `src/a.rs (+2 files below)`, or `src/a.rs (mod b)`
/// for an inline module.
fn label(package: &Package, module: usize) -> String {
    let file = package.modules[module].file;
    let mut text = package.files[file].display().to_string();
    if let Some(parent) = package.modules[module].parent
        && package.modules[parent].file == file
    {
        let name = package.modules[parent]
            .children
            .iter()
            .find(|&(_, &child)| child == module)
            .map_or("?", |(name, _)| name.as_str());
        text.push_str(&format!(" (mod {name})"));
    }
    let mut below: Vec<usize> = package
        .modules
        .iter()
        .enumerate()
        .filter(|&(m, info)| info.file != file && package.is_within(m, module))
        .map(|(_, info)| info.file)
        .collect();
    below.sort_unstable();
    below.dedup();
    match below.len() {
        0 => {}
        1 => text.push_str(" (+1 file below)"),
        n => text.push_str(&format!(" (+{n} files below)")),
    }
    text
}

/// A reference as an example: its file and line, the file it leads to and its text.
fn example(package: &Package, reference: &Reference) -> Example {
    let file_of = |module: usize| {
        let file = package.modules[module].file;
        package.files[file].display().to_string()
    };
    Example {
        file: file_of(reference.from),
        line: reference.line,
        target: file_of(reference.to),
        text: reference.text.clone(),
    }
}
