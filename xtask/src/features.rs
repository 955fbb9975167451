//! `cargo xtask features [PACKAGE...]`: each library crate builds with `--no-default-features`
//! and with each of its features alone, without warnings.
//!
//! The features are read from each member's `[features]` table (`default` aside), so a new
//! feature is checked as soon as it is declared. Each combination is one `cargo check --lib --bins` (no tests,
//! benches or examples, to keep CI time down) whose JSON messages are scanned for errors and
//! for warnings in workspace crates (warnings fail the check, as `-D warnings` would, without
//! changing RUSTFLAGS and so rebuilding every dependency). Each line also gives the number of
//! crates in the combination's `cargo tree -e normal,build` (the package itself included).
//! libtorch is provisioned, as for `cargo xtask test`, only when a combination's tree holds
//! torch-sys.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::manifest::{Manifest, workspace_members};
use crate::{Failure, Result, cargo, describe, prepare_libtorch, section};

/// Members that are not part of the product (this tool).
const NOT_CHECKED: [&str; 1] = ["xtask"];

/// The features one combination turns on.
#[derive(Debug, Clone, PartialEq, Eq)]
enum FeatureSet {
    /// `--no-default-features`.
    None,
    /// `--no-default-features --features NAME`.
    Only(String),
}

impl FeatureSet {
    /// The cargo arguments that select it.
    fn args(&self) -> Vec<String> {
        match self {
            Self::None => vec!["--no-default-features".to_string()],
            Self::Only(name) => vec![
                "--no-default-features".to_string(),
                "--features".to_string(),
                name.clone(),
            ],
        }
    }

    /// How it is shown.
    fn label(&self) -> String {
        self.args().join(" ")
    }
}

/// One package with one feature set.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Combination {
    /// The package name.
    package: String,
    /// Its features.
    features: FeatureSet,
}

impl Combination {
    /// `package --no-default-features --features x`.
    fn label(&self) -> String {
        format!("{} {}", self.package, self.features.label())
    }
}

/// `cargo xtask features [PACKAGE...]`: checks every combination (of the named packages only,
/// if any are named).
pub fn check(root: &Path, args: &[OsString]) -> Result<()> {
    let mut combinations = Vec::new();
    let mut packages = Vec::new();
    for dir in workspace_members(root)? {
        let manifest = Manifest::read(&root.join(&dir).join("Cargo.toml"))?;
        let package = manifest
            .string("package", "name")
            .ok_or_else(|| Failure::new(format!("{dir}/Cargo.toml has no [package] name")))?;
        if NOT_CHECKED.contains(&package.as_str()) {
            continue;
        }
        combinations.extend(package_combinations(&package, &manifest));
        packages.push(package);
    }
    let wanted = wanted_packages(args, &packages)?;
    combinations.retain(|c| wanted.is_empty() || wanted.contains(&c.package));

    section("features: dependency trees");
    let mut trees = Vec::new();
    for combination in &combinations {
        let tree = dependency_tree(root, combination)?;
        println!(
            "  {:<60} {:>4} crates{}",
            combination.label(),
            tree.len(),
            if needs_libtorch(&tree) {
                " (libtorch)"
            } else {
                ""
            }
        );
        trees.push(tree);
    }
    let libtorch = if trees.iter().any(needs_libtorch) {
        prepare_libtorch(root)?
    } else {
        None
    };

    section("features: cargo check --lib --bins of each combination");
    let mut failed = Vec::new();
    for (combination, tree) in combinations.iter().zip(&trees) {
        print!("  {:<60} ", combination.label());
        let _ = std::io::stdout().flush();
        let started = Instant::now();
        let outcome = check_combination(root, libtorch.as_deref(), combination)?;
        let seconds = started.elapsed().as_secs_f64();
        let crates = tree.len();
        if outcome.passed() {
            println!("ok    ({crates} crates, {seconds:.1}s)");
        } else {
            println!(
                "FAIL  ({crates} crates, {seconds:.1}s): {}",
                outcome.summary()
            );
            for message in &outcome.messages {
                for line in message.trim_end().lines() {
                    println!("      {line}");
                }
            }
            failed.push(combination.label());
        }
    }
    if failed.is_empty() {
        match combinations.len() {
            1 => println!("the combination builds without warnings"),
            n => println!("all {n} combinations build without warnings"),
        }
        Ok(())
    } else {
        Err(Failure::new(format!(
            "{} of {} feature combinations fail: {}",
            failed.len(),
            combinations.len(),
            failed.join("; ")
        )))
    }
}

/// The combinations of one package: no features, and each feature of its `[features]` table
/// alone.
fn package_combinations(package: &str, manifest: &Manifest) -> Vec<Combination> {
    let combination = |features| Combination {
        package: package.to_string(),
        features,
    };
    let mut all = vec![combination(FeatureSet::None)];
    all.extend(
        manifest
            .keys("features")
            .into_iter()
            .filter(|name| *name != "default")
            .map(|name| combination(FeatureSet::Only(name.to_string()))),
    );
    all
}

/// The packages named on the command line (all when none is), each checked to exist.
fn wanted_packages(args: &[OsString], packages: &[String]) -> Result<Vec<String>> {
    let mut wanted = Vec::new();
    for arg in args {
        let name = arg.to_string_lossy();
        if !packages.iter().any(|p| *p == name) {
            return Err(Failure::new(format!(
                "features: `{name}` is not a checked package; expected one of {}",
                packages.join(", ")
            )));
        }
        wanted.push(name.into_owned());
    }
    Ok(wanted)
}

/// The distinct crates of `cargo tree -e normal,build` for a combination.
fn dependency_tree(root: &Path, combination: &Combination) -> Result<BTreeSet<String>> {
    let mut cmd = cargo(root, None);
    cmd.args(["tree", "-p", &combination.package, "-e", "normal,build"])
        .args(["--prefix", "none"])
        .args(combination.features.args())
        .stdin(Stdio::null());
    let out = cmd
        .output()
        .map_err(|e| Failure::new(format!("features: could not run `{}`: {e}", describe(&cmd))))?;
    if !out.status.success() {
        return Err(Failure::new(format!(
            "features: `{}` failed ({}): {}",
            describe(&cmd),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(tree_crates(&String::from_utf8_lossy(&out.stdout)))
}

/// The distinct crates of `cargo tree --prefix none` output (repeats marked ` (*)` merged).
fn tree_crates(output: &str) -> BTreeSet<String> {
    output
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('['))
        .map(|line| line.strip_suffix(" (*)").unwrap_or(line).to_string())
        .collect()
}

/// Whether a dependency tree links libtorch.
fn needs_libtorch(tree: &BTreeSet<String>) -> bool {
    tree.iter().any(|line| line.starts_with("torch-sys "))
}

/// What `cargo check` said about one combination.
#[derive(Debug, Default)]
struct Outcome {
    /// Whether cargo exited successfully.
    success: bool,
    /// Errors reported by rustc.
    errors: usize,
    /// Warnings in workspace crates.
    warnings: usize,
    /// The rendered errors and warnings, or cargo's own error output.
    messages: Vec<String>,
}

impl Outcome {
    /// Whether the combination builds without warnings.
    fn passed(&self) -> bool {
        self.success && self.errors == 0 && self.warnings == 0
    }

    /// `2 errors, 1 warning` or `cargo failed`.
    fn summary(&self) -> String {
        let plural = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
        match (self.errors, self.warnings) {
            (0, 0) => "cargo failed".to_string(),
            (e, 0) => plural(e, "error"),
            (0, w) => plural(w, "warning"),
            (e, w) => format!("{}, {}", plural(e, "error"), plural(w, "warning")),
        }
    }
}

/// Runs `cargo check --lib --bins` for a combination and reads its JSON messages.
fn check_combination(
    root: &Path,
    libtorch: Option<&Path>,
    combination: &Combination,
) -> Result<Outcome> {
    let mut cmd: Command = cargo(root, libtorch);
    cmd.args([
        "check",
        "--quiet",
        "-p",
        &combination.package,
        "--lib",
        "--bins",
    ])
    .arg("--message-format=json")
    .args(combination.features.args())
    .stdin(Stdio::null());
    let out = cmd
        .output()
        .map_err(|e| Failure::new(format!("features: could not run `{}`: {e}", describe(&cmd))))?;
    let mut outcome = read_messages(&String::from_utf8_lossy(&out.stdout));
    outcome.success = out.status.success();
    if !outcome.success && outcome.messages.is_empty() {
        outcome.messages.push(format!(
            "$ {}\n{}",
            describe(&cmd),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(outcome)
}

/// Counts and collects the errors and the workspace warnings of `--message-format=json` output.
fn read_messages(stdout: &str) -> Outcome {
    let mut outcome = Outcome::default();
    for line in stdout.lines() {
        if !line.contains("\"reason\":\"compiler-message\"") {
            continue;
        }
        let Some(rendered) = json_string_field(line, "rendered") else {
            continue;
        };
        let local =
            json_string_field(line, "package_id").is_some_and(|id| id.starts_with("path+file://"));
        if rendered.starts_with("error") {
            outcome.errors += 1;
        } else if rendered.starts_with("warning") && local && !is_warning_summary(&rendered) {
            outcome.warnings += 1;
        } else {
            continue;
        }
        outcome.messages.push(rendered);
    }
    outcome
}

/// Whether a rendered message is rustc's `N warnings emitted` summary.
fn is_warning_summary(rendered: &str) -> bool {
    let first = rendered.lines().next().unwrap_or_default();
    first.ends_with("warning emitted") || first.ends_with("warnings emitted")
}

/// The first string value of `"field":` in a line of JSON, unescaped.
fn json_string_field(json: &str, field: &str) -> Option<String> {
    let key = format!("\"{field}\":");
    let mut rest = json;
    while let Some(at) = rest.find(&key) {
        rest = rest[at + key.len()..].trim_start();
        if let Some(value) = rest.strip_prefix('"') {
            return Some(unescape_json(value));
        }
    }
    None
}

/// The JSON string that `text` starts with (after its opening quote), unescaped, up to its
/// closing quote.
fn unescape_json(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    let mut pending_high: Option<u32> = None;
    while let Some(c) = chars.next() {
        match c {
            '"' => break,
            '\\' => match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some('r') => out.push('\r'),
                Some('b') => out.push('\u{8}'),
                Some('f') => out.push('\u{c}'),
                Some('u') => {
                    let hex: String = chars.by_ref().take(4).collect();
                    let Ok(unit) = u32::from_str_radix(&hex, 16) else {
                        continue;
                    };
                    if (0xD800..0xDC00).contains(&unit) {
                        pending_high = Some(unit);
                        continue;
                    }
                    let code = match pending_high.take() {
                        Some(high) if (0xDC00..0xE000).contains(&unit) => {
                            0x10000 + ((high - 0xD800) << 10) + (unit - 0xDC00)
                        }
                        _ => unit,
                    };
                    out.push(char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER));
                }
                Some(other) => out.push(other),
                None => break,
            },
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combinations_come_from_the_features_table() {
        let manifest = Manifest::parse(
            "[package]\nname = \"agentrl-tools\"\n[features]\ndefault = [\"search\",\n \"web\"]\nsearch = []\nweb = [\"dep:reqwest\"]\n",
        );
        let labels: Vec<String> = package_combinations("agentrl-tools", &manifest)
            .iter()
            .map(Combination::label)
            .collect();
        assert_eq!(
            labels,
            [
                "agentrl-tools --no-default-features",
                "agentrl-tools --no-default-features --features search",
                "agentrl-tools --no-default-features --features web",
            ]
        );
    }

    #[test]
    fn only_known_packages_can_be_named() {
        let packages = vec!["agentrl-core".to_string(), "agentrl-tools".to_string()];
        let wanted = wanted_packages(&[OsString::from("agentrl-tools")], &packages).unwrap();
        assert_eq!(wanted, ["agentrl-tools"]);
        let unknown = wanted_packages(&[OsString::from("agentrl-tool")], &packages).unwrap_err();
        assert!(unknown.message.contains("agentrl-core, agentrl-tools"));
    }

    #[test]
    fn counts_distinct_crates_of_a_tree() {
        let tree = tree_crates(
            "agentrl-core v0.1.0 (/x/agentrl-core)\nserde v1.0.0\nserde_derive v1.0.0 (proc-macro)\n\
             quote v1.0.0\nserde v1.0.0 (*)\nserde_derive v1.0.0 (proc-macro) (*)\n\n",
        );
        assert_eq!(tree.len(), 4);
        assert!(!needs_libtorch(&tree));
        assert!(needs_libtorch(&tree_crates(
            "tch v0.26.0\ntorch-sys v0.26.0\n"
        )));
    }

    #[test]
    fn reads_errors_and_workspace_warnings_from_json_messages() {
        let stdout = concat!(
            r#"{"reason":"compiler-artifact","package_id":"registry+https://x#serde@1.0.0"}"#,
            "\n",
            r#"{"reason":"compiler-message","package_id":"path+file:///w/agentrl-tools#0.1.0","message":{"message":"unused import","children":[{"rendered":null}],"rendered":"warning: unused import: `Foo`\n --> src/lib.rs:3:5\n  |\n3 | use \"Foo\";\n"}}"#,
            "\n",
            r#"{"reason":"compiler-message","package_id":"path+file:///w/agentrl-tools#0.1.0","message":{"rendered":"warning: 1 warning emitted\n\n"}}"#,
            "\n",
            r#"{"reason":"compiler-message","package_id":"registry+https://x#dep@1.0.0","message":{"rendered":"warning: something in a dependency\n"}}"#,
            "\n",
            r#"{"reason":"compiler-message","package_id":"path+file:///w/agentrl-env#0.1.0","message":{"rendered":"error[E0432]: unresolved import \u00e9\ud83d\ude00\n"}}"#,
            "\n",
            r#"{"reason":"build-finished","success":false}"#,
        );
        let outcome = read_messages(stdout);
        assert_eq!((outcome.errors, outcome.warnings), (1, 1));
        assert_eq!(
            outcome.messages,
            [
                "warning: unused import: `Foo`\n --> src/lib.rs:3:5\n  |\n3 | use \"Foo\";\n",
                "error[E0432]: unresolved import \u{e9}\u{1F600}\n"
            ]
        );
        assert_eq!(outcome.summary(), "1 error, 1 warning");
        assert!(!outcome.passed());
    }
}
