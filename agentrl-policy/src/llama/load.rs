//! Loading Hugging Face checkpoints: `config.json` plus `model.safetensors` or the shards listed
//! in `model.safetensors.index.json`.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use agentrl_core::{Error, Result};
use serde::Deserialize;
use tch::{Device, Kind, Tensor, nn};

use super::config::LlamaConfig;
use super::model::Llama;

/// Single-file weights name.
pub const SINGLE_FILE: &str = "model.safetensors";
/// Shard index name.
pub const INDEX_FILE: &str = "model.safetensors.index.json";

#[derive(Debug, Deserialize)]
struct ShardIndex {
    weight_map: BTreeMap<String, String>,
}

/// Where a checkpoint's config and weights live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointPaths {
    /// The `config.json`.
    pub config: PathBuf,
    /// A `.safetensors` file, or a shard index (`.json`).
    pub weights: PathBuf,
}

impl CheckpointPaths {
    /// Resolves a checkpoint directory, a `.safetensors` file or an index `.json` file (the
    /// config is the `config.json` next to it).
    pub fn resolve(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        if path.is_dir() {
            let single = path.join(SINGLE_FILE);
            let index = path.join(INDEX_FILE);
            let weights = if single.is_file() {
                single
            } else if index.is_file() {
                index
            } else {
                return Err(Error::Config(format!(
                    "checkpoint {}: neither {SINGLE_FILE} nor {INDEX_FILE} found",
                    path.display()
                )));
            };
            return Ok(CheckpointPaths {
                config: path.join("config.json"),
                weights,
            });
        }
        if !path.is_file() {
            return Err(Error::Config(format!(
                "checkpoint {} does not exist",
                path.display()
            )));
        }
        let dir = path.parent().unwrap_or(Path::new("."));
        Ok(CheckpointPaths {
            config: dir.join("config.json"),
            weights: path.to_path_buf(),
        })
    }
}

/// Which tensors to take from which file, for every variable name.
fn plan(weights: &Path, names: &[String]) -> Result<BTreeMap<PathBuf, Vec<String>>> {
    let mut plan: BTreeMap<PathBuf, Vec<String>> = BTreeMap::new();
    if weights.extension().and_then(|e| e.to_str()) != Some("json") {
        plan.insert(weights.to_path_buf(), names.to_vec());
        return Ok(plan);
    }
    let text = std::fs::read_to_string(weights).map_err(|source| Error::Io {
        action: "reading",
        path: weights.to_path_buf(),
        source,
    })?;
    let index: ShardIndex = serde_json::from_str(&text).map_err(|source| Error::Json {
        context: weights.display().to_string(),
        source,
    })?;
    let dir = weights.parent().unwrap_or(Path::new("."));
    for name in names {
        let Some(file) = index.weight_map.get(name) else {
            return Err(Error::Config(format!(
                "tensor `{name}` is missing from the weight_map of {}",
                weights.display()
            )));
        };
        plan.entry(dir.join(file)).or_default().push(name.clone());
    }
    Ok(plan)
}

/// Copies every variable of `vs` from the safetensors file or shard index `weights`, converting
/// to the variable's dtype. Every variable must be present with its shape; extra tensors are
/// ignored.
pub fn load_weights(vs: &nn::VarStore, weights: impl AsRef<Path>) -> Result<()> {
    let weights = weights.as_ref();
    let vars = vs.variables();
    let mut names: Vec<String> = vars.keys().cloned().collect();
    names.sort();
    for (file, wanted) in plan(weights, &names)? {
        let tensors: HashMap<String, Tensor> = Tensor::read_safetensors(&file)
            .map_err(|e| Error::Config(format!("reading weights {}: {e}", file.display())))?
            .into_iter()
            .collect();
        for name in wanted {
            let Some(var) = vars.get(&name) else {
                continue;
            };
            let Some(src) = tensors.get(&name) else {
                return Err(Error::Config(format!(
                    "tensor `{name}` is missing from {}",
                    file.display()
                )));
            };
            if src.size() != var.size() {
                return Err(Error::Config(format!(
                    "tensor `{name}` in {} has shape {:?}, the config expects {:?}",
                    file.display(),
                    src.size(),
                    var.size()
                )));
            }
            copy_checked(var, src, || {
                format!("tensor `{name}` in {}", file.display())
            })?;
        }
    }
    Ok(())
}

/// Copies the checkpoint tensor `src` into the model variable `var`, converting its dtype and
/// device, after checking that it is floating point and that every value is finite: a NaN or an
/// infinity (a corrupt file, or weights saved after training diverged) is an error naming the
/// tensor (`what`), not a model that silently outputs NaN.
pub(crate) fn copy_checked(
    var: &Tensor,
    src: &Tensor,
    what: impl FnOnce() -> String,
) -> Result<()> {
    if !src.is_floating_point() {
        return Err(Error::Config(format!(
            "{} has non-float dtype {:?}",
            what(),
            src.kind()
        )));
    }
    let finite = tch::no_grad(|| src.isfinite().all().int64_value(&[]) != 0);
    if !finite {
        let bad = tch::no_grad(|| {
            src.isfinite()
                .logical_not()
                .sum(Kind::Int64)
                .int64_value(&[])
        });
        return Err(Error::Config(format!(
            "{}: {bad} of {} values are NaN or infinite (a corrupt checkpoint, or one saved \
             after training diverged)",
            what(),
            src.numel()
        )));
    }
    let mut dst = var.shallow_clone();
    tch::no_grad(|| dst.f_copy_(&src.to_kind(var.kind()).to(var.device())))
        .map_err(|e| Error::Config(format!("copying {}: {e}", what())))
}

impl Llama {
    /// Loads a Hugging Face checkpoint (directory, `.safetensors` file or shard index) as f32
    /// onto `device`; returns the VarStore (variables named as in the checkpoint) and the model.
    pub fn load(path: impl AsRef<Path>, device: Device) -> Result<(nn::VarStore, Llama)> {
        let paths = CheckpointPaths::resolve(path)?;
        let config = LlamaConfig::from_file(&paths.config)?;
        let mut vs = nn::VarStore::new(device);
        let model = Llama::new_to_fill(&vs.root(), config)?;
        vs.set_kind(Kind::Float);
        load_weights(&vs, &paths.weights)?;
        Ok((vs, model))
    }
}
