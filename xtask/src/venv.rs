//! Python virtual environments for the reference sides (`parity`, `bench --vs-trl`): made once
//! under the repository root with pinned packages; a stamp file makes re-runs instant.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{Failure, Result, run};

/// Written into a venv once every package is installed; holds the package list.
const STAMP: &str = ".xtask-stamp";

/// The Python of the venv `root/name`, made (or completed) with `packages`; `size` says how
/// much disk the first install takes, for the message printed before it.
pub fn ensure(root: &Path, name: &str, packages: &[&str], size: &str) -> Result<PathBuf> {
    let venv = root.join(name);
    let python = venv.join("bin").join("python");
    let wanted = packages.join(" ");
    let stamp = venv.join(STAMP);
    if fs::read_to_string(&stamp).is_ok_and(|s| s == wanted) && python.is_file() {
        println!("reference Python ready: {}", python.display());
        return Ok(python);
    }
    if !python.is_file() {
        let mut make = Command::new("python3");
        make.args(["-m", "venv"]).arg(&venv);
        run(&format!("creation of the venv {name}"), &mut make)?;
    }
    println!("installing {wanted} into {name} ({size} on disk the first time)");
    let mut pip = Command::new(&python);
    pip.args(["-m", "pip", "install", "--quiet"]).args(packages);
    run(&format!("pip install into {name}"), &mut pip)?;
    fs::write(&stamp, &wanted)
        .map_err(|e| Failure::new(format!("writing {}: {e}", stamp.display())))?;
    Ok(python)
}
