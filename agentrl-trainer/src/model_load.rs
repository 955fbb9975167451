//! Loading models to run or serve: Llama-family models (with their tokenizer and chat template)
//! from a llama.cpp `.gguf` file or a Hugging Face directory, and AgentRL's own `TinyGpt`
//! checkpoints, whose shape comes from the run's `config.toml`.

use std::path::{Path, PathBuf};

use agentrl_core::{Error, Result};
use agentrl_policy::gguf::GgufFile;
use agentrl_policy::hf::{ChatTemplate, HfChatFormat, HfTokenizer};
use agentrl_policy::llama::Llama;
use agentrl_policy::{ChatFormat, TinyChatFormat, TinyGpt};
use tch::{Device, nn};

use crate::checkpoint::{checkpoint_dir, read_latest};
use crate::config::RunConfig;

/// Whether `path` names a GGUF file (by extension).
pub fn is_gguf(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("gguf"))
}

fn must_exist(path: &Path) -> Result<()> {
    if path.exists() {
        Ok(())
    } else {
        Err(Error::Config(format!(
            "model {} does not exist",
            path.display()
        )))
    }
}

/// Loads a Llama-family model (checkpoint directory, `.safetensors`, shard index or `.gguf`)
/// onto `device`.
pub fn load_llama(path: &Path, device: Device) -> Result<(nn::VarStore, Llama)> {
    must_exist(path)?;
    if is_gguf(path) {
        let (vs, model, _config) = Llama::load_gguf(path, device)?;
        Ok((vs, model))
    } else {
        Llama::load(path, device)
    }
}

/// Loads a Llama-family model and its chat format from a `.gguf` file (weights, tokenizer and
/// template all come from it) or a Hugging Face directory (`config.json`, safetensors weights,
/// `tokenizer.json`, `tokenizer_config.json`).
pub fn load_llama_chat(path: &Path, device: Device) -> Result<(nn::VarStore, Llama, HfChatFormat)> {
    must_exist(path)?;
    let hf = |e: agentrl_policy::hf::HfError| Error::Policy(format!("{}: {e}", path.display()));
    if is_gguf(path) {
        let file = GgufFile::open(path).map_err(|e| Error::Policy(e.to_string()))?;
        let tokenizer = HfTokenizer::from_gguf(&file).map_err(hf)?;
        let template = ChatTemplate::from_gguf(&file).map_err(hf)?;
        let format = HfChatFormat::new(tokenizer, template).map_err(hf)?;
        drop(file);
        let (vs, model, _config) = Llama::load_gguf(path, device)?;
        Ok((vs, model, format))
    } else if path.is_dir() {
        for needed in ["config.json", "tokenizer.json", "tokenizer_config.json"] {
            if !path.join(needed).exists() {
                return Err(Error::Config(format!(
                    "model directory {} has no {needed}",
                    path.display()
                )));
            }
        }
        let format = HfChatFormat::from_dir(path).map_err(hf)?;
        let (vs, model) = Llama::load(path, device)?;
        Ok((vs, model, format))
    } else {
        Err(Error::Config(format!(
            "model {} is neither a .gguf file nor a Hugging Face model directory",
            path.display()
        )))
    }
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
    must_exist(path)?;
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
