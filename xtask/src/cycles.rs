//! `cargo xtask cycles`: import circles between the source files of each workspace crate.
//!
//! The module tree of each crate is read from its `mod` declarations (`src/`, from `lib.rs`,
//! `main.rs` and `src/bin/`; tests, benches and examples are not looked at). Every `use`
//! declaration and every path in code (`crate::a::b::f()`, `super::x::Y`, `self::x`) is resolved
//! to the module that defines what it names, following facade re-exports (`pub use
//! child::Item`) to the defining file. Nothing under `#[cfg(test)]` counts.
//!
//! Circles are looked for between sibling modules, at every level of the tree: at the level of
//! a module, each of its children together with everything below it is one node, and a
//! reference from one child's subtree into another's is an edge. So `registry.rs` importing
//! `arith_calc.rs` while `arith_calc/solvers.rs` imports `registry.rs` is a circle, while a
//! parent and its own children (`mod child; pub use child::Item;` with `super::Shared` in the
//! child) are one unit and never are. Each strongly connected component is reported with its
//! modules and one reference (file:line) per edge, and the check fails.

mod levels;
mod lex;
mod resolve;
mod scan;
mod scc;
mod tree;

use std::path::Path;

use crate::manifest::workspace_members;
use crate::{Failure, Result, section};

use self::levels::package_circles;
use self::lex::tokenize;
use self::scan::scan;
use self::tree::Package;

/// The `mod name;` declarations (modules in files of their own) at the top level of the Rust
/// file `source`, read with the same lexer and scanner as the circle check (comments, strings,
/// attributes and inline `mod name { … }` blocks are told apart; `#[cfg(test)]` items skipped).
pub fn declared_file_modules(source: &str) -> Vec<String> {
    scan(&tokenize(source))
        .into_iter()
        .next()
        .map(|file| file.declared)
        .unwrap_or_default()
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
        println!("\ncircle in {name} ({} modules):", circle.members.len());
        for member in &circle.members {
            println!("    {member}");
        }
        println!("  edges (one reference each):");
        for example in &circle.edges {
            println!(
                "    {}:{} -> {}   ({})",
                example.file, example.line, example.target, example.text
            );
        }
    }
    Err(Failure::new(format!(
        "{} import circle(s) between source files ({}); break each by moving what both sides \
         need into a module of its own that imports neither",
        found.len(),
        found
            .iter()
            .map(|(name, c)| format!("{name}: {} modules", c.members.len()))
            .collect::<Vec<_>>()
            .join(", ")
    )))
}

#[cfg(test)]
mod tests;
