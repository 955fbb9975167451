//! Checks on the dependency graph that `cargo xtask test` runs before the tests: the crates that
//! must build without libtorch, and the dependencies the demo's build must not pull back in.

use std::path::Path;
use std::process::Stdio;

use crate::{Failure, Result, cargo, describe};

/// Crates that must stay free of tch/libtorch. Each entry is a package and the features to
/// check it with (all of them, so the env-side binary and the tool command are covered too).
const TCH_FREE_CRATES: [(&str, &str); 4] = [
    ("agentrl-core", ""),
    ("agentrl-env", "cli"),
    ("agentrl-tools", "cli"),
    ("agentrl-reward", ""),
];

/// Crates the demo's build (`agentrl-trainer` without default features) must not compile, each
/// with why and how to get rid of it again.
const DEMO_EXCLUDED: [(&str, &str); 1] = [(
    "icu_normalizer",
    "Cargo.lock resolves idna_adapter to its ICU4X back end (1.2.x), about 35 CPU-seconds \
     more in the demo's build; `cargo update -p idna_adapter --precise 1.1.0` selects the \
     unicode-rs one again",
)];

/// The crate names (`name vX.Y.Z` lines) of `cargo tree --prefix none` with `args`.
fn tree_lines(root: &Path, args: &[&str], what: &str) -> Result<Vec<String>> {
    let mut cmd = cargo(root, None);
    cmd.args(["tree", "--prefix", "none"]).args(args);
    cmd.stdin(Stdio::null()).stderr(Stdio::inherit());
    println!("$ {}", describe(&cmd));
    let out = cmd
        .output()
        .map_err(|e| Failure::new(format!("{what}: could not run `cargo tree`: {e}")))?;
    if !out.status.success() {
        return Err(Failure::new(format!(
            "{what}: `{}` failed ({}); see the cargo error above",
            describe(&cmd),
            out.status
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect())
}

/// Fails if any crate of [`TCH_FREE_CRATES`] has tch or torch-sys among its normal dependencies.
pub fn check_tch_free(root: &Path) -> Result<()> {
    let mut offenders = Vec::new();
    for (krate, features) in TCH_FREE_CRATES {
        let mut args = vec!["-e", "normal", "-p", krate];
        if !features.is_empty() {
            args.extend(["--features", features]);
        }
        let tree = tree_lines(root, &args, "tch-free check")?;
        let bad: Vec<&str> = tree
            .iter()
            .map(String::as_str)
            .filter(|l| l.starts_with("tch ") || l.starts_with("torch-sys "))
            .collect();
        if bad.is_empty() {
            println!("  {krate}: ok (no tch, no torch-sys)");
        } else {
            println!("  {krate}: FAIL ({})", bad.join(", "));
            offenders.push(format!("{krate} -> {}", bad.join(", ")));
        }
    }
    if offenders.is_empty() {
        println!("tch-free check passed");
        Ok(())
    } else {
        Err(Failure::new(format!(
            "tch-free check failed: {}. These crates must build without libtorch; move the \
             tch code to agentrl-policy/agentrl-trainer or make it an optional feature \
             (`cargo tree -i tch -p <crate>` shows the path)",
            offenders.join("; ")
        )))
    }
}

/// Fails if the demo's build compiles a crate of [`DEMO_EXCLUDED`]: `cargo xtask demo` has a
/// time budget, and a `cargo update` can bring such a crate back without anyone noticing.
pub fn check_demo_dependencies(root: &Path) -> Result<()> {
    let args = [
        "-e",
        "normal,build",
        "-p",
        "agentrl-trainer",
        "--no-default-features",
    ];
    let tree = tree_lines(root, &args, "demo dependency check")?;
    let found: Vec<String> = DEMO_EXCLUDED
        .iter()
        .filter(|(name, _)| tree.iter().any(|l| l.starts_with(&format!("{name} "))))
        .map(|(name, why)| format!("{name}: {why}"))
        .collect();
    if found.is_empty() {
        println!("demo dependency check passed");
        Ok(())
    } else {
        Err(Failure::new(format!(
            "demo dependency check failed: {}",
            found.join("; ")
        )))
    }
}
