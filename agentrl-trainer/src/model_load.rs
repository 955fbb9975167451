//! Loading models to run or serve: Llama-family models with their chat format (through
//! [`crate::pretrained`]) and AgentRL's own `TinyGpt` checkpoints, whose shape comes from the
//! run's `config.toml`.

use std::path::{Path, PathBuf};

use agentrl_core::{Error, Result};
use agentrl_policy::hf::HfChatFormat;
use agentrl_policy::llama::{Dtype, Llama};
use agentrl_policy::{ChatFormat, TinyChatFormat, TinyGpt};
use tch::{Device, nn};

use crate::config::RunConfig;
pub use crate::pretrained::{is_gguf, load_chat_format, load_llama};
use agentrl_policy::checkpoint::{checkpoint_dir, read_latest};

/// Loads a Llama-family model and its chat format from a `.gguf` file (weights, tokenizer and
/// template all come from it) or a Hugging Face directory (`config.json`, safetensors weights,
/// `tokenizer.json`, `tokenizer_config.json`).
pub fn load_llama_chat(
    path: &Path,
    device: Device,
    dtype: Dtype,
) -> Result<(nn::VarStore, Llama, HfChatFormat)> {
    let format = load_chat_format(path, None)?;
    let (vs, model) = load_llama(path, device, dtype)?;
    Ok((vs, model, format))
}

/// Whether `path` looks like an AgentRL checkpoint: a run directory (with `config.toml`) or a
/// `.safetensors` file inside one (`RUN/checkpoints/FILE` or `RUN/FILE`).
pub fn is_agentrl_checkpoint(path: &Path) -> bool {
    if path.is_dir() {
        return path.join("config.toml").is_file();
    }
    run_config_near(path).is_some()
}

/// The `config.toml` of the run a checkpoint file lies in, if any.
fn run_config_near(file: &Path) -> Option<PathBuf> {
    let parent = file.parent()?;
    [
        parent.join("config.toml"),
        parent.parent()?.join("config.toml"),
    ]
    .into_iter()
    .find(|c| c.is_file())
}

/// The weights file of an AgentRL checkpoint: the file itself, or for a run directory the
/// checkpoint `checkpoints/latest.json` names, else `checkpoints/sft.safetensors`.
pub fn tiny_weights_file(path: &Path) -> Result<PathBuf> {
    if !path.exists() {
        return Err(Error::Config(format!(
            "model {} does not exist",
            path.display()
        )));
    }
    if !path.is_dir() {
        return Ok(path.to_path_buf());
    }
    if let Some((_, file)) = read_latest(path)? {
        return Ok(file);
    }
    let sft = checkpoint_dir(path).join("sft.safetensors");
    if sft.is_file() {
        return Ok(sft);
    }
    Err(Error::Config(format!(
        "run directory {} has no checkpoint (no checkpoints/latest.json or checkpoints/sft.safetensors)",
        path.display()
    )))
}

/// Loads an AgentRL `TinyGpt` checkpoint (run directory or `.safetensors` file) onto `device`.
/// Its shape comes from `config` when given, else from the run's `config.toml`.
pub fn load_tiny(
    path: &Path,
    config: Option<&Path>,
    device: Device,
) -> Result<(nn::VarStore, TinyGpt, RunConfig)> {
    let weights = tiny_weights_file(path)?;
    let config_path = match config {
        Some(c) => c.to_path_buf(),
        None if path.is_dir() => path.join("config.toml"),
        None => run_config_near(path).ok_or_else(|| {
            Error::Config(format!(
                "no config.toml next to {} (or one folder up); pass --config RUN.toml for its shape",
                path.display()
            ))
        })?,
    };
    let run = RunConfig::load(&config_path)?;
    let mut vs = nn::VarStore::new(device);
    let model = TinyGpt::new(
        &vs.root(),
        run.model.gpt(TinyChatFormat::new().vocab_size()),
    )?;
    vs.load(&weights).map_err(|e| {
        Error::Config(format!(
            "loading {} (it must hold weights of the [model] shape in {}): {e}",
            weights.display(),
            config_path.display()
        ))
    })?;
    Ok((vs, model, run))
}
