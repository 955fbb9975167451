//! `cargo xtask cycles`: import circles between the source files of each workspace crate.
//!
//! Every file of a crate's module tree (`src/`, from `lib.rs`, `main.rs` and `src/bin/`; tests,
//! benches and examples are not looked at) is a node. A file has an edge to another when it
//! refers to something the other defines: in a `use` declaration or in a path in its code
//! (`crate::a::b::f()`, `super::x::Y`, `self::x`), following facade re-exports (`pub use
//! child::Item`) to the file that defines the item. A module's references to its own
//! descendants are no edges (a parent is made of its children: `mod child; pub use
//! child::Item;`), and nothing under `#[cfg(test)]` counts. Each strongly connected component
//! of more than one file is a circle: the check prints its files and one reference per edge
//! (file:line), and fails.

mod lex;
mod resolve;
mod scan;
mod scc;
mod tree;

use std::path::Path;

use crate::manifest::workspace_members;
use crate::{Failure, Result, section};

use self::resolve::{Reference, file_edges};
use self::tree::Package;

/// One import circle: its files and the edges between them.
#[derive(Debug)]
pub struct Circle {
    /// The files, relative to the workspace root, sorted.
    pub files: Vec<String>,
    /// Each edge inside the circle: `(from, to, first reference in from)`.
    pub edges: Vec<(String, String, Reference)>,
}

/// `cargo xtask cycles`: checks every workspace member; fails when a circle is found.
pub fn check(root: &Path) -> Result<()> {
    section("cycles: import circles between source files");
    let mut found = Vec::new();
    for dir in workspace_members(root)? {
        let package = Package::load(root, &root.join(&dir))?;
        let circles = package_circles(&package);
        let verdict = match circles.len() {
            0 => "no circle".to_string(),
            1 => "1 circle".to_string(),
            n => format!("{n} circles"),
        };
        println!(
            "  {}: {} files, {verdict}",
            package.name,
            package.files.len()
        );
        for missing in &package.missing {
            println!("    note: a declared module has no file at {missing}");
        }
        found.extend(circles.into_iter().map(|c| (package.name.clone(), c)));
    }
    if found.is_empty() {
        println!("no import circles");
        return Ok(());
    }
    for (name, circle) in &found {
        println!("\ncircle in {name} ({} files):", circle.files.len());
        for file in &circle.files {
            println!("    {file}");
        }
        println!("  edges (one reference each):");
        for (from, to, reference) in &circle.edges {
            println!(
                "    {from}:{} -> {to}   ({})",
                reference.line, reference.text
            );
        }
    }
    Err(Failure::new(format!(
        "{} import circle(s) between source files ({}); break each by moving what both sides \
         need into a module of its own that imports neither",
        found.len(),
        found
            .iter()
            .map(|(name, c)| format!("{name}: {} files", c.files.len()))
            .collect::<Vec<_>>()
            .join(", ")
    )))
}

/// The import circles of one package.
pub fn package_circles(package: &Package) -> Vec<Circle> {
    let edges = file_edges(package);
    let name = |file: usize| package.files[file].display().to_string();
    scc::circles(package.files.len(), edges.keys().copied())
        .into_iter()
        .map(|members| {
            let mut files: Vec<String> = members.iter().map(|&f| name(f)).collect();
            files.sort();
            let mut inside: Vec<(String, String, Reference)> = edges
                .iter()
                .filter(|((from, to), _)| members.contains(from) && members.contains(to))
                .map(|(&(from, to), reference)| (name(from), name(to), reference.clone()))
                .collect();
            inside.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
            Circle {
                files,
                edges: inside,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
