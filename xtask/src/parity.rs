//! `cargo xtask parity`: checks the Llama-family decoder against Hugging Face transformers.
//!
//! Makes a venv in `.venv-parity/` with pinned torch, transformers, gguf, accelerate and peft (about
//! 4.9 GB on disk the first time; a stamp makes re-runs instant), then runs the ignored tests of
//! `agentrl-policy/tests/hf_parity.rs` with `AGENTRL_PARITY_PYTHON` pointing at it. The SmolLM2
//! GGUF test runs when `AGENTRL_SMOLLM2_GGUF` names the file, and is skipped otherwise.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::Result;

/// The Python packages of the reference side, pinned to the versions the figures were taken with.
pub const PACKAGES: [&str; 5] = [
    "torch==2.13.0",
    "transformers==5.24.0",
    "gguf==0.19.0",
    "accelerate==1.15.0",
    "peft==0.21.2",
];

/// The venv's Python, made (or reused) under `root/.venv-parity`.
pub fn ensure_python(root: &Path) -> Result<PathBuf> {
    crate::venv::ensure(root, ".venv-parity", &PACKAGES, "about 4.9 GB")
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
