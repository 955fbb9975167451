//! The module tree of one package: each crate root (`src/lib.rs`, `src/main.rs`, `src/bin/*.rs`,
//! `[lib]`/`[[bin]]` paths) and the files its `mod name;` declarations pull in (`name.rs` or
//! `name/mod.rs` next to a `lib.rs`/`main.rs`/`mod.rs`, `parent/name.rs` below a `parent.rs`),
//! plus the inline `mod name { … }` blocks. Files no root declares are not part of any crate
//! and are left out.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use super::lex::tokenize;
use super::scan::{ModuleScan, scan};
use crate::manifest::Manifest;
use crate::{Failure, Result};

/// One module: a file's own module or an inline `mod name { … }` block.
#[derive(Debug)]
pub struct Module {
    /// Index of its file in [`Package::files`].
    pub file: usize,
    /// Its parent module; `None` for a crate root.
    pub parent: Option<usize>,
    /// The root module of its crate.
    pub root: usize,
    /// Its child modules by name (file modules and inline ones).
    pub children: BTreeMap<String, usize>,
    /// What its source says.
    pub scan: ModuleScan,
}

/// The modules of every crate (library and binaries) of one package.
#[derive(Debug)]
pub struct Package {
    /// The package name (`agentrl-env`).
    pub name: String,
    /// The library's crate name (`agentrl_env`), which binaries use to reach it.
    pub lib_name: String,
    /// Source files, relative to the workspace root, each once.
    pub files: Vec<PathBuf>,
    /// All modules; crate roots have no parent.
    pub modules: Vec<Module>,
    /// The library's root module, if the package has a library.
    pub lib_root: Option<usize>,
    /// Declared modules whose file was not found (`mod x;` behind `#[path]`, say).
    pub missing: Vec<String>,
}

impl Package {
    /// Loads the package in `dir` (holding its Cargo.toml); paths are shown relative to `root`.
    pub fn load(root: &Path, dir: &Path) -> Result<Self> {
        let manifest = Manifest::read(&dir.join("Cargo.toml"))?;
        let name = manifest.string("package", "name").ok_or_else(|| {
            Failure::new(format!(
                "{}/Cargo.toml has no [package] name",
                dir.display()
            ))
        })?;
        let lib_name = manifest
            .string("lib", "name")
            .unwrap_or_else(|| name.replace('-', "_"));
        let mut package = Self {
            name,
            lib_name,
            files: Vec::new(),
            modules: Vec::new(),
            lib_root: None,
            missing: Vec::new(),
        };
        let lib = manifest
            .string("lib", "path")
            .map_or_else(|| dir.join("src").join("lib.rs"), |p| dir.join(p));
        if lib.is_file() {
            package.lib_root = package.load_file(root, &lib, None, None, true)?;
        }
        for bin in bin_roots(dir, &manifest) {
            package.load_file(root, &bin, None, None, true)?;
        }
        Ok(package)
    }

    /// Loads `path` as the module `name` below `parent` (or as a crate root), then the files
    /// it declares; returns the file's module.
    fn load_file(
        &mut self,
        root: &Path,
        path: &Path,
        parent: Option<usize>,
        name: Option<&str>,
        mod_rs: bool,
    ) -> Result<Option<usize>> {
        let text = fs::read_to_string(path)
            .map_err(|e| Failure::new(format!("cannot read {}: {e}", path.display())))?;
        let shown = path.strip_prefix(root).unwrap_or(path).to_path_buf();
        let file = match self.files.iter().position(|f| *f == shown) {
            Some(at) => at,
            None => {
                self.files.push(shown);
                self.files.len() - 1
            }
        };
        // Where `mod x;` looks for x.rs: beside lib.rs/main.rs/mod.rs, below foo/ for foo.rs.
        let base = match (mod_rs, path.file_stem()) {
            (false, Some(stem)) => path.with_file_name(stem),
            _ => path.parent().map_or_else(PathBuf::new, Path::to_path_buf),
        };
        let mut first = None;
        let mut by_inline_path: BTreeMap<Vec<String>, usize> = BTreeMap::new();
        for module_scan in scan(&tokenize(&text)) {
            let inline_path = module_scan.inline_path.clone();
            let (parent, name) = match inline_path.split_last() {
                None => (parent, name.map(str::to_string)),
                Some((last, above)) => (by_inline_path.get(above).copied(), Some(last.clone())),
            };
            let index = self.modules.len();
            let root_module = parent.map_or(index, |p| self.modules[p].root);
            self.modules.push(Module {
                file,
                parent,
                root: root_module,
                children: BTreeMap::new(),
                scan: module_scan,
            });
            if let (Some(parent), Some(name)) = (parent, name) {
                self.modules[parent].children.insert(name, index);
            }
            by_inline_path.insert(inline_path, index);
            first.get_or_insert(index);
        }
        for (inline_path, &module) in &by_inline_path {
            let dir = inline_path
                .iter()
                .fold(base.clone(), |d, part| d.join(part));
            for child in self.modules[module].scan.declared.clone() {
                let flat = dir.join(format!("{child}.rs"));
                let nested = dir.join(&child).join("mod.rs");
                if flat.is_file() {
                    self.load_file(root, &flat, Some(module), Some(&child), false)?;
                } else if nested.is_file() {
                    self.load_file(root, &nested, Some(module), Some(&child), true)?;
                } else {
                    let shown = flat.strip_prefix(root).unwrap_or(&flat);
                    self.missing.push(shown.display().to_string());
                }
            }
        }
        Ok(first)
    }

    /// Whether `module` is `ancestor` or lies below it.
    pub fn is_within(&self, module: usize, ancestor: usize) -> bool {
        let mut at = Some(module);
        while let Some(m) = at {
            if m == ancestor {
                return true;
            }
            at = self.modules[m].parent;
        }
        false
    }
}

/// The binary crate roots: `[[bin]] path`s, `src/main.rs`, `src/bin/*.rs`, `src/bin/*/main.rs`.
fn bin_roots(dir: &Path, manifest: &Manifest) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = manifest
        .strings("bin", "path")
        .into_iter()
        .map(|p| dir.join(p))
        .collect();
    roots.push(dir.join("src").join("main.rs"));
    if let Ok(entries) = fs::read_dir(dir.join("src").join("bin")) {
        let mut found: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .map(|p| if p.is_dir() { p.join("main.rs") } else { p })
            .filter(|p| p.extension().is_some_and(|e| e == "rs"))
            .collect();
        found.sort();
        roots.extend(found);
    }
    let mut unique = Vec::new();
    for root in roots {
        if root.is_file() && !unique.contains(&root) {
            unique.push(root);
        }
    }
    unique
}
