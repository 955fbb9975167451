//! `cargo xtask parity`: checks the Llama-family decoder against Hugging Face transformers.
//!
//! Makes a venv in `.venv-parity/` with pinned torch, transformers, gguf and accelerate (about
//! 4.9 GB on disk the first time; a stamp makes re-runs instant), then runs the ignored tests of
//! `agentrl-policy/tests/hf_parity.rs` with `AGENTRL_PARITY_PYTHON` pointing at it. The SmolLM2
//! GGUF test runs when `AGENTRL_SMOLLM2_GGUF` names the file, and is skipped otherwise.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{Failure, Result, run};

/// The Python packages of the reference side, pinned to the versions the figures were taken with.
const PACKAGES: [&str; 4] = [
    "torch==2.13.0",
    "transformers==5.24.0",
    "gguf==0.19.0",
    "accelerate==1.15.0",
];

/// Written into the venv once every package is installed.
const STAMP: &str = ".xtask-parity-stamp";

/// The venv's Python, made (or reused) under `root/.venv-parity`.
pub fn ensure_python(root: &Path) -> Result<PathBuf> {
    let venv = root.join(".venv-parity");
    let python = venv.join("bin").join("python");
    let wanted = PACKAGES.join(" ");
    let stamp = venv.join(STAMP);
    if fs::read_to_string(&stamp).is_ok_and(|s| s == wanted) && python.is_file() {
        println!("reference Python ready: {}", python.display());
        return Ok(python);
    }
    if !python.is_file() {
        let mut make = Command::new("python3");
        make.args(["-m", "venv"]).arg(&venv);
        run("creation of the parity venv", &mut make)?;
    }
    println!("installing {wanted} (about 4.9 GB on disk the first time)");
    let mut pip = Command::new(&python);
    pip.args(["-m", "pip", "install", "--quiet"]).args(PACKAGES);
    run("pip install of the reference packages", &mut pip)?;
    fs::write(&stamp, &wanted)
        .map_err(|e| Failure::new(format!("writing {}: {e}", stamp.display())))?;
    Ok(python)
}

/// The `cargo test` that compares logits, with the reference Python in its environment.
pub fn parity_tests(root: &Path, python: &Path, mut cargo: Command) -> Command {
    cargo
        .current_dir(root)
        .env("AGENTRL_PARITY_PYTHON", python)
        .args(["test", "-p", "agentrl-policy", "--test", "hf_parity", "--"])
        .args(["--ignored", "--nocapture", "--test-threads", "1"]);
    if env::var_os("AGENTRL_SMOLLM2_GGUF").is_none() {
        println!("AGENTRL_SMOLLM2_GGUF is not set: skipping the real SmolLM2 GGUF comparison");
        cargo.args(["--skip", "smollm2"]);
    }
    cargo
}
