//! The check that `cargo xtask test` runs on crates whose integration tests are one binary
//! (`tests/main.rs`, `autotests = false`): cargo builds only the files `main.rs` declares, so a
//! new `tests/foo.rs` without a `mod foo;` there would never compile or run, silently.

use std::fs;
use std::path::Path;

use crate::cycles::declared_file_modules;
use crate::manifest::workspace_members;
use crate::{Failure, Result, section};

/// Fails, naming each file and the line to add, when a workspace member has a `tests/main.rs`
/// and a `tests/*.rs` file that it does not declare as a module.
pub fn check(root: &Path) -> Result<()> {
    section("check: every test file is a module of its crate's tests/main.rs");
    let mut missing = Vec::new();
    for member in workspace_members(root)? {
        let tests = root.join(&member).join("tests");
        let main = tests.join("main.rs");
        let Ok(main_text) = fs::read_to_string(&main) else {
            continue;
        };
        let declared = declared_file_modules(&main_text);
        let entries = fs::read_dir(&tests)
            .map_err(|e| Failure::new(format!("reading {}: {e}", tests.display())))?;
        let mut files: Vec<String> = entries
            .filter_map(|entry| entry.ok())
            .filter_map(|entry| entry.file_name().into_string().ok())
            .filter_map(|name| name.strip_suffix(".rs").map(str::to_string))
            .filter(|stem| stem != "main")
            .collect();
        files.sort();
        let undeclared: Vec<&String> = files.iter().filter(|f| !declared.contains(f)).collect();
        println!(
            "{member}: {} test files, {} not declared in tests/main.rs",
            files.len(),
            undeclared.len()
        );
        for stem in undeclared {
            missing.push(format!(
                "{member}/tests/{stem}.rs is not built: add `mod {stem};` to {member}/tests/main.rs"
            ));
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(Failure::new(missing.join("\n")))
    }
}

#[cfg(test)]
mod tests {
    use crate::cycles::declared_file_modules;

    #[test]
    fn file_modules_are_read_with_or_without_attributes_and_inline_blocks_are_not() {
        let main = "//! doc\nmod common;\n\n#[cfg(feature = \"web\")]\nmod browser;\npub mod cli;\nmod inline {\n}\n// mod commented;\n";
        assert_eq!(declared_file_modules(main), ["common", "browser", "cli"]);
    }
}
