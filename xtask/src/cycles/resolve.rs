//! From paths to references between files: each `use` path and code path of a module is
//! resolved to the module that defines what it names.
//!
//! Re-exports are followed where they are a facade: `crate::Item` with `pub use a::b::Item` (or
//! `pub use a::{B, C}`, `pub use a::b::*`) in the crate root resolves to the module `a::b`,
//! through as many levels as it takes. A module that re-exports something from outside itself
//! (`pub use crate::device::default_device` in `run.rs`) is itself what a path through it
//! depends on. Paths that leave the crate (`std::`, `serde::`, a root re-export of
//! `agentrl_core::Error`) resolve to nothing.

use super::tree::Package;

/// What a path names, inside the package.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    /// The module that defines it (the module itself for a path to a module).
    pub module: usize,
    /// Whether the path names the module itself rather than an item in it.
    pub is_module: bool,
}

/// The result of looking a name or path up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lookup {
    /// It is defined in this package.
    Here(Target),
    /// It comes from another crate (or cannot be followed).
    Elsewhere,
    /// The module has no such name.
    Missing,
}

/// How many `use` hops one lookup may follow (guards against re-export loops).
const MAX_HOPS: u32 = 32;

/// A reference from one module to a module of another file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// The module the reference is written in.
    pub from: usize,
    /// The module that defines what it names.
    pub to: usize,
    /// Its line in the file of `from`.
    pub line: u32,
    /// The path as written (`crate::registry::EnvFactory`).
    pub text: String,
}

/// Every reference of every module of `package` that leads to another file, resolved.
pub fn references(package: &Package) -> Vec<Reference> {
    let mut found = Vec::new();
    for (from, module) in package.modules.iter().enumerate() {
        let mut add = |target: Option<Target>, line: u32, text: String| {
            if let Some(target) = target
                && package.modules[target.module].file != module.file
            {
                found.push(Reference {
                    from,
                    to: target.module,
                    line,
                    text,
                });
            }
        };
        for item in &module.scan.uses {
            let mut text = item.path.join("::");
            if item.glob {
                text.push_str("::*");
            }
            add(resolve(package, from, &item.path), item.line, text);
        }
        for path in &module.scan.paths {
            add(
                resolve(package, from, &path.segments),
                path.line,
                path.segments.join("::"),
            );
        }
    }
    found
}

/// What `path`, written in module `from`, names in this package; `None` if it leaves it.
pub fn resolve(package: &Package, from: usize, path: &[String]) -> Option<Target> {
    match Resolver::new(package).path(from, path) {
        Lookup::Here(target) => Some(target),
        Lookup::Elsewhere | Lookup::Missing => None,
    }
}

/// One lookup, with its budget of `use` hops and the glob imports it is inside.
struct Resolver<'a> {
    /// The package.
    package: &'a Package,
    /// `use` hops left.
    hops: u32,
    /// `(module, name)` pairs being searched through globs (a glob loop ends here).
    searching: Vec<(usize, String)>,
}

impl<'a> Resolver<'a> {
    /// A fresh lookup.
    fn new(package: &'a Package) -> Self {
        Self {
            package,
            hops: MAX_HOPS,
            searching: Vec::new(),
        }
    }

    /// A path written in module `from`: `crate::…`, `self::…`, `super::…`, the library's
    /// name (from a binary), or a name in scope there (a child module or an import).
    fn path(&mut self, from: usize, path: &[String]) -> Lookup {
        let Some(first) = path.first() else {
            return Lookup::Here(Target {
                module: from,
                is_module: true,
            });
        };
        let modules = &self.package.modules;
        match first.as_str() {
            "crate" | "$crate" => self.walk(from, modules[from].root, &path[1..]),
            "self" => self.walk(from, from, &path[1..]),
            "super" => {
                let mut at = from;
                let mut rest = path;
                while rest.first().is_some_and(|s| s == "super") {
                    let Some(parent) = modules[at].parent else {
                        return Lookup::Elsewhere;
                    };
                    at = parent;
                    rest = &rest[1..];
                }
                self.walk(from, at, rest)
            }
            name if *name == self.package.lib_name
                && self
                    .package
                    .lib_root
                    .is_some_and(|lib| modules[from].root != lib) =>
            {
                let lib = self.package.lib_root.unwrap_or(from);
                self.walk(from, lib, &path[1..])
            }
            name => match self.name(from, from, name) {
                Lookup::Here(target) if target.is_module => {
                    self.walk(from, target.module, &path[1..])
                }
                Lookup::Here(target) => Lookup::Here(target),
                // Not in scope: another crate (`std::…`), a type (`Vec::new`), a variable.
                Lookup::Elsewhere | Lookup::Missing => Lookup::Elsewhere,
            },
        }
    }

    /// Walks `rest` down from module `at`, for a path written in module `origin`.
    fn walk(&mut self, origin: usize, at: usize, rest: &[String]) -> Lookup {
        let Some(name) = rest.first() else {
            return Lookup::Here(Target {
                module: at,
                is_module: true,
            });
        };
        match self.name(origin, at, name) {
            Lookup::Here(target) if target.is_module => {
                self.walk(origin, target.module, &rest[1..])
            }
            Lookup::Here(target) => Lookup::Here(target),
            Lookup::Elsewhere => Lookup::Elsewhere,
            // Made by a macro, say: count it as the module's own.
            Lookup::Missing => Lookup::Here(Target {
                module: at,
                is_module: false,
            }),
        }
    }

    /// What `name` is in module `at` (for a path written in `origin`): a child module, an
    /// item defined there, an import, or a name one of its glob imports brings in.
    ///
    /// In another module than `origin`, only imports of `at`'s own descendants are followed
    /// (the `pub use child::Item` of a facade); a name `at` imports from elsewhere counts as
    /// `at`'s own, since the path depends on `at` re-exporting it.
    fn name(&mut self, origin: usize, at: usize, name: &str) -> Lookup {
        let module = &self.package.modules[at];
        if let Some(&child) = module.children.get(name) {
            return Lookup::Here(Target {
                module: child,
                is_module: true,
            });
        }
        let own = Lookup::Here(Target {
            module: at,
            is_module: false,
        });
        if module.scan.items.contains(name) {
            return own;
        }
        if self.hops == 0 {
            return Lookup::Elsewhere;
        }
        let follows = |found: Lookup, package: &Package| match found {
            Lookup::Missing => Lookup::Missing,
            _ if at == origin => found,
            Lookup::Here(target) if package.is_within(target.module, at) => found,
            _ => own,
        };
        let uses = &module.scan.uses;
        if let Some(import) = uses
            .iter()
            .find(|u| !u.glob && u.binds.as_deref() == Some(name))
        {
            self.hops -= 1;
            let found = self.path(at, &import.path);
            return follows(found, self.package);
        }
        let key = (at, name.to_string());
        if self.searching.contains(&key) {
            return Lookup::Missing;
        }
        self.searching.push(key);
        let mut found = Lookup::Missing;
        for glob in uses.iter().filter(|u| u.glob) {
            self.hops = self.hops.saturating_sub(1);
            if let Lookup::Here(source) = self.path(at, &glob.path)
                && source.is_module
            {
                found = follows(self.name(origin, source.module, name), self.package);
                if found != Lookup::Missing {
                    break;
                }
            }
        }
        self.searching.pop();
        found
    }
}
