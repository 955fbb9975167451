//! Loading AgentRL's own `TinyGpt` checkpoints: a run directory or a `.safetensors` file inside
//! one, whose shape comes from the `[model]` table of the run's `config.toml`.

use std::path::{Path, PathBuf};

use agentrl_core::{Error, Result};
use tch::{Device, nn};

use crate::checkpoint::{checkpoint_dir, read_latest};
use crate::{ChatFormat, GptConfig, TinyChatFormat, TinyGpt};

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

/// The tiny GPT's shape from the `[model]` table of a run config's TOML `text` (read from
/// `origin`, which errors name), with the byte chat format's vocabulary. Keys: `d_model`,
/// `n_layers`, `n_heads`, `max_seq_len`, `ffn_mult` (default 4), `rope_theta` (default 10000);
/// the table's other keys and the config's other tables are not read.
pub fn tiny_shape_from_toml(text: &str, origin: &str) -> Result<GptConfig> {
    let document: toml::Table =
        toml::from_str(text).map_err(|e| Error::Config(format!("{origin}: {e}")))?;
    let model = match document.get("model") {
        Some(toml::Value::Table(table)) => table,
        Some(_) => {
            return Err(Error::Config(format!(
                "{origin}: `model` must be a table ([model])"
            )));
        }
        None => {
            return Err(Error::Config(format!(
                "{origin}: no [model] table (it gives the tiny GPT's shape)"
            )));
        }
    };
    let size = |key: &str, default: Option<usize>| -> Result<usize> {
        match (model.get(key), default) {
            (Some(toml::Value::Integer(n)), _) => usize::try_from(*n).map_err(|_| {
                Error::Config(format!(
                    "{origin}: model.{key} must be a non-negative integer, got {n}"
                ))
            }),
            (Some(other), _) => Err(Error::Config(format!(
                "{origin}: model.{key} must be an integer, got {other}"
            ))),
            (None, Some(default)) => Ok(default),
            (None, None) => Err(Error::Config(format!(
                "{origin}: [model] has no `{key}` (the tiny GPT's shape needs it)"
            ))),
        }
    };
    let rope_theta = match model.get("rope_theta") {
        None => 10_000.0,
        Some(toml::Value::Float(x)) => *x,
        Some(toml::Value::Integer(n)) => *n as f64,
        Some(other) => {
            return Err(Error::Config(format!(
                "{origin}: model.rope_theta must be a number, got {other}"
            )));
        }
    };
    Ok(GptConfig {
        vocab_size: TinyChatFormat::new().vocab_size(),
        d_model: size("d_model", None)?,
        n_layers: size("n_layers", None)?,
        n_heads: size("n_heads", None)?,
        max_seq_len: size("max_seq_len", None)?,
        ffn_mult: size("ffn_mult", Some(4))?,
        rope_theta,
    })
}

/// The tiny GPT's shape from the `[model]` table of the run config at `path` (see
/// [`tiny_shape_from_toml`]).
pub fn read_tiny_shape(path: &Path) -> Result<GptConfig> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io("reading", path, e))?;
    tiny_shape_from_toml(&text, &path.display().to_string())
}

/// Loads an AgentRL `TinyGpt` checkpoint (run directory or `.safetensors` file) onto `device`.
/// Its shape comes from the run config `config` when given, else from the run's `config.toml`.
pub fn load_tiny(
    path: &Path,
    config: Option<&Path>,
    device: Device,
) -> Result<(nn::VarStore, TinyGpt)> {
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
    let shape = read_tiny_shape(&config_path)?;
    let mut vs = nn::VarStore::new(device);
    let model = TinyGpt::new(&vs.root(), shape)?;
    vs.load(&weights).map_err(|e| {
        Error::Config(format!(
            "loading {} (it must hold weights of the [model] shape in {}): {e}",
            weights.display(),
            config_path.display()
        ))
    })?;
    Ok((vs, model))
}
