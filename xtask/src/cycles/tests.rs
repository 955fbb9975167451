//! The circle check on small synthetic packages written into a temporary folder.

use std::fs;
use std::path::{Path, PathBuf};

use super::levels::{Circle, package_circles};
use super::resolve::resolve;
use super::tree::Package;

/// A temporary folder holding one package, removed on drop.
struct TempPackage {
    /// The folder (also the "workspace root" the file names are relative to).
    dir: PathBuf,
}

impl TempPackage {
    /// A fresh package named `name` with the given `(path, text)` files.
    fn new(name: &str, files: &[(&str, &str)]) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "xtask-cycles-{name}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = fs::remove_dir_all(&dir);
        let package = Self { dir };
        package.write(
            "Cargo.toml",
            &format!("[package]\nname = \"{name}\"\nversion = \"0.1.0\"\n"),
        );
        for (path, text) in files {
            package.write(path, text);
        }
        package
    }

    /// Writes `text` to `path` inside the package.
    fn write(&self, path: &str, text: &str) {
        let path = self.dir.join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    /// Loads the package.
    fn load(&self) -> Package {
        Package::load(&self.dir, &self.dir).unwrap()
    }

    /// Its circles as `(members, edges as "file:line -> target")`.
    fn circles(&self) -> Vec<(Vec<String>, Vec<String>)> {
        package_circles(&self.load())
            .into_iter()
            .map(|Circle { members, edges }| {
                let edges = edges
                    .into_iter()
                    .map(|e| format!("{}:{} -> {}", e.file, e.line, e.target))
                    .collect();
                (members, edges)
            })
            .collect()
    }
}

impl Drop for TempPackage {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// The file a path written in the file `from` resolves to.
fn resolved_file(package: &Package, from: &str, path: &str) -> Option<String> {
    let module = package
        .modules
        .iter()
        .position(|m| package.files[m.file] == Path::new(from) && m.scan.inline_path.is_empty())
        .unwrap();
    let segments: Vec<String> = path.split("::").map(str::to_string).collect();
    resolve(package, module, &segments).map(|t| {
        package.files[package.modules[t.module].file]
            .display()
            .to_string()
    })
}

/// Strings from string slices.
fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[test]
fn maps_files_to_modules_like_rustc() {
    let package = TempPackage::new(
        "layout",
        &[
            (
                "src/lib.rs",
                "pub mod flat;\nmod nested;\nmod orphan_free;\n",
            ),
            ("src/flat.rs", "pub mod below;\n"),
            ("src/flat/below.rs", "pub fn f() {}\n"),
            ("src/nested/mod.rs", "pub mod inner;\n"),
            ("src/nested/inner.rs", "pub struct S;\n"),
            ("src/orphan_free.rs", "mod gone;\n"),
            ("src/unused.rs", "use crate::flat::below::f;\n"),
        ],
    );
    let loaded = package.load();
    let files: Vec<String> = loaded
        .files
        .iter()
        .map(|f| f.display().to_string())
        .collect();
    assert_eq!(
        files,
        [
            "src/lib.rs",
            "src/flat.rs",
            "src/flat/below.rs",
            "src/nested/mod.rs",
            "src/nested/inner.rs",
            "src/orphan_free.rs"
        ]
    );
    assert_eq!(loaded.missing, ["src/orphan_free/gone.rs"]);
    assert_eq!(
        resolved_file(&loaded, "src/lib.rs", "crate::flat::below::f").as_deref(),
        Some("src/flat/below.rs")
    );
    assert_eq!(
        resolved_file(&loaded, "src/nested/inner.rs", "super::super::flat").as_deref(),
        Some("src/flat.rs")
    );
    assert_eq!(resolved_file(&loaded, "src/lib.rs", "std::fs::read"), None);
}

#[test]
fn follows_re_exports_to_the_defining_file() {
    let package = TempPackage::new(
        "reexports",
        &[
            (
                "src/lib.rs",
                "mod a;\nmod b;\nmod user;\npub use a::{Alpha, Beta as Renamed};\npub use b::deep::*;\n\
                 pub use serde::Serialize;\n",
            ),
            ("src/a.rs", "pub struct Alpha;\npub struct Beta;\n"),
            ("src/b.rs", "pub mod deep;\n"),
            ("src/b/deep.rs", "pub fn gamma() {}\n"),
            ("src/user.rs", "use crate::Alpha;\n"),
        ],
    );
    let loaded = package.load();
    let from = "src/user.rs";
    let file = |path: &str| resolved_file(&loaded, from, path);
    assert_eq!(file("crate::Alpha").as_deref(), Some("src/a.rs"));
    assert_eq!(file("crate::Renamed").as_deref(), Some("src/a.rs"));
    assert_eq!(file("crate::gamma").as_deref(), Some("src/b/deep.rs"));
    assert_eq!(file("Alpha").as_deref(), Some("src/a.rs"));
    // Re-exported from another crate: the path depends on the root re-exporting it.
    assert_eq!(file("crate::Serialize").as_deref(), Some("src/lib.rs"));
    assert_eq!(file("serde::Serialize"), None);
    // A name no module defines stays with the module it was looked up in.
    assert_eq!(file("crate::b::made_by_macro").as_deref(), Some("src/b.rs"));
}

#[test]
fn a_parent_re_exporting_its_children_is_no_circle() {
    let package = TempPackage::new(
        "family",
        &[
            ("src/lib.rs", "pub mod env;\n"),
            (
                "src/env/mod.rs",
                "mod solver;\nmod task;\npub use solver::Solver;\npub(crate) use task::*;\n\
                 pub struct Shared;\n",
            ),
            (
                "src/env/solver.rs",
                "use super::Shared;\nuse super::task::Task;\npub struct Solver;\n",
            ),
            ("src/env/task.rs", "pub struct Task(super::Shared);\n"),
        ],
    );
    assert!(package.circles().is_empty());
}

#[test]
fn a_parent_using_its_children_is_no_circle() {
    let package = TempPackage::new(
        "parent",
        &[
            (
                "src/lib.rs",
                "mod child;\npub struct Shared;\nfn f() { child::g(); }\n",
            ),
            (
                "src/child.rs",
                "pub fn g() -> crate::Shared { crate::Shared }\n",
            ),
        ],
    );
    assert!(package.circles().is_empty());
}

#[test]
fn a_circle_through_a_child_is_a_circle_with_its_parent_and_nested_levels_count() {
    let package = TempPackage::new(
        "family_circle",
        &[
            ("src/lib.rs", "mod arith;\nmod registry;\nmod sheet;\n"),
            (
                "src/registry.rs",
                "use crate::arith::Arith;\npub trait Solver {}\n",
            ),
            (
                "src/arith.rs",
                "mod solver;\npub struct Arith(solver::Demo);\n",
            ),
            (
                "src/arith/solver.rs",
                "pub struct Demo;\nimpl crate::registry::Solver for Demo {}\n",
            ),
            ("src/sheet.rs", "mod table;\nmod workbook;\n"),
            (
                "src/sheet/table.rs",
                "pub struct Row;\nfn f() { super::workbook::open() }\n",
            ),
            (
                "src/sheet/workbook.rs",
                "use super::table::Row;\npub fn open() {}\n",
            ),
        ],
    );
    assert_eq!(
        package.circles(),
        [
            (
                strings(&["src/arith.rs (+1 file below)", "src/registry.rs"]),
                strings(&[
                    "src/arith/solver.rs:2 -> src/registry.rs",
                    "src/registry.rs:1 -> src/arith.rs"
                ])
            ),
            (
                strings(&["src/sheet/table.rs", "src/sheet/workbook.rs"]),
                strings(&[
                    "src/sheet/table.rs:2 -> src/sheet/workbook.rs",
                    "src/sheet/workbook.rs:1 -> src/sheet/table.rs"
                ])
            )
        ]
    );
}

#[test]
fn a_module_re_exporting_from_elsewhere_is_what_paths_through_it_depend_on() {
    let package = TempPackage::new(
        "forward",
        &[
            (
                "src/lib.rs",
                "pub mod device;\npub mod judge;\npub mod run;\n",
            ),
            ("src/device.rs", "pub fn default_device() {}\n"),
            (
                "src/run.rs",
                "pub use crate::device::default_device;\npub fn train() { crate::judge::score() }\n",
            ),
            (
                "src/judge.rs",
                "pub fn score() {\n    crate::run::default_device();\n}\n",
            ),
        ],
    );
    let loaded = package.load();
    assert_eq!(
        resolved_file(&loaded, "src/judge.rs", "crate::run::default_device").as_deref(),
        Some("src/run.rs")
    );
    assert_eq!(
        resolved_file(&loaded, "src/run.rs", "default_device").as_deref(),
        Some("src/device.rs")
    );
    assert_eq!(
        package.circles(),
        [(
            strings(&["src/judge.rs", "src/run.rs"]),
            strings(&[
                "src/judge.rs:2 -> src/run.rs",
                "src/run.rs:2 -> src/judge.rs"
            ])
        )]
    );
}

#[test]
fn finds_a_circle_through_a_re_export_and_reports_one_reference_per_edge() {
    // The registry pattern: the envs import the traits through the crate root, the registry
    // imports every env.
    let package = TempPackage::new(
        "registry",
        &[
            (
                "src/lib.rs",
                "mod registry;\nmod maze;\nmod quiz;\nmod util;\npub use registry::{EnvFactory, lookup};\n",
            ),
            (
                "src/registry.rs",
                "use crate::maze::Maze;\n\npub trait EnvFactory {}\npub fn lookup() {\n    let _ = crate::quiz::Quiz;\n    let _ = Maze;\n}\n",
            ),
            (
                "src/maze.rs",
                "use crate::EnvFactory;\nuse crate::util::helper;\npub struct Maze;\n",
            ),
            (
                "src/quiz.rs",
                "pub struct Quiz;\nimpl crate::EnvFactory for Quiz {}\n",
            ),
            ("src/util.rs", "pub fn helper() {}\n"),
        ],
    );
    assert_eq!(
        package.circles(),
        [(
            strings(&["src/maze.rs", "src/quiz.rs", "src/registry.rs"]),
            strings(&[
                "src/maze.rs:1 -> src/registry.rs",
                "src/quiz.rs:2 -> src/registry.rs",
                "src/registry.rs:1 -> src/maze.rs",
                "src/registry.rs:5 -> src/quiz.rs",
            ])
        )]
    );
}

#[test]
fn test_modules_and_other_crates_do_not_count() {
    let package = TempPackage::new(
        "tests_only",
        &[
            ("src/lib.rs", "mod a;\nmod b;\n"),
            (
                "src/a.rs",
                "pub fn f() {}\n#[cfg(test)]\nmod tests {\n    use super::*;\n    use crate::b::g;\n}\n",
            ),
            (
                "src/b.rs",
                "pub fn g() { crate::a::f() }\nfn h() { other_crate::a::f(); }\n",
            ),
            ("tests/it.rs", "use tests_only::a;\n"),
        ],
    );
    assert!(package.circles().is_empty());
}

#[test]
fn binaries_reach_the_library_by_its_name_and_own_their_modules() {
    let package = TempPackage::new(
        "with-bin",
        &[
            ("src/lib.rs", "pub mod config;\n"),
            ("src/config.rs", "pub struct Config;\n"),
            (
                "src/main.rs",
                "mod cli;\nmod output;\nfn main() { cli::run() }\n",
            ),
            (
                "src/cli.rs",
                "use with_bin::config::Config;\npub fn run() { crate::output::print(); }\n",
            ),
            (
                "src/output.rs",
                "pub fn print() {}\nfn usage() { crate::cli::run() }\n",
            ),
        ],
    );
    let loaded = package.load();
    assert_eq!(
        resolved_file(&loaded, "src/cli.rs", "with_bin::config::Config").as_deref(),
        Some("src/config.rs")
    );
    assert_eq!(
        resolved_file(&loaded, "src/output.rs", "crate::cli::run").as_deref(),
        Some("src/cli.rs")
    );
    assert_eq!(
        package.circles(),
        [(
            strings(&["src/cli.rs", "src/output.rs"]),
            strings(&[
                "src/cli.rs:2 -> src/output.rs",
                "src/output.rs:2 -> src/cli.rs"
            ])
        )]
    );
}

#[test]
fn inline_modules_resolve_super_from_where_they_are() {
    let package = TempPackage::new(
        "inline",
        &[
            ("src/lib.rs", "mod load;\nmod model;\n"),
            (
                "src/load.rs",
                "pub fn config() {}\npub(crate) mod tch_load {\n    use super::config;\n    use crate::model::Model;\n}\n",
            ),
            (
                "src/model.rs",
                "pub struct Model;\nfn f() { crate::load::tch_load::g() }\n",
            ),
        ],
    );
    assert_eq!(
        package.circles(),
        [(
            strings(&["src/load.rs", "src/model.rs"]),
            strings(&[
                "src/load.rs:4 -> src/model.rs",
                "src/model.rs:2 -> src/load.rs"
            ])
        )]
    );
}

#[test]
fn glob_loops_and_re_export_loops_terminate() {
    let package = TempPackage::new(
        "loops",
        &[
            ("src/lib.rs", "mod a;\nmod b;\npub use a::*;\n"),
            (
                "src/a.rs",
                "pub use crate::b::*;\npub use self::X as Y;\npub use self::Y as X;\n",
            ),
            ("src/b.rs", "pub use crate::a::*;\n"),
        ],
    );
    let loaded = package.load();
    assert_eq!(
        resolved_file(&loaded, "src/lib.rs", "crate::Nothing").as_deref(),
        Some("src/lib.rs")
    );
    // X and Y re-export each other: the lookup gives up and counts X as a.rs's own.
    assert_eq!(
        resolved_file(&loaded, "src/b.rs", "crate::a::X").as_deref(),
        Some("src/a.rs")
    );
    // a.rs and b.rs glob-import each other: a circle.
    assert_eq!(package.circles().len(), 1);
}
