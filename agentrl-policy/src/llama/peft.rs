//! LoRA adapters on disk in the PEFT layout, so `peft`, `transformers` and llama.cpp's
//! converters can load them: a directory with `adapter_model.safetensors` (tensors named
//! `base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight`, ...) and
//! `adapter_config.json` (`r`, `lora_alpha`, `target_modules`, `peft_type: "LORA"`,
//! `task_type: "CAUSAL_LM"`, `base_model_name_or_path`).

use std::collections::HashMap;
use std::path::Path;

use agentrl_core::{Error, Result};
use serde::{Deserialize, Serialize};
use tch::{Tensor, nn};

use super::load::copy_checked;
use super::lora::{LoraConfig, is_adapter_name};
use super::model::Llama;
use crate::tch_policy::NamedWeights;

/// The adapter weights file of a PEFT adapter directory.
pub const ADAPTER_WEIGHTS_FILE: &str = "adapter_model.safetensors";
/// The adapter config file of a PEFT adapter directory.
pub const ADAPTER_CONFIG_FILE: &str = "adapter_config.json";

/// `adapter_config.json` as PEFT writes it (the keys this crate writes and reads).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct PeftConfig {
    peft_type: String,
    #[serde(default)]
    task_type: Option<String>,
    #[serde(default)]
    base_model_name_or_path: Option<String>,
    r: usize,
    lora_alpha: f64,
    target_modules: Vec<String>,
    #[serde(default)]
    lora_dropout: f64,
    #[serde(default = "default_bias")]
    bias: String,
    #[serde(default)]
    fan_in_fan_out: bool,
    #[serde(default)]
    inference_mode: bool,
}

fn default_bias() -> String {
    "none".into()
}

/// Deep copies of the adapter variables of `vs` (sorted by name): what a rollout copy of a
/// LoRA model needs after each update, since its base weights never change.
pub fn adapter_weights(vs: &nn::VarStore) -> NamedWeights {
    tch::no_grad(|| {
        let mut named: NamedWeights = vs
            .variables()
            .into_iter()
            .filter(|(name, _)| is_adapter_name(name))
            .map(|(name, t)| (name, t.detach().copy()))
            .collect();
        named.sort_by(|a, b| a.0.cmp(&b.0));
        named
    })
}

/// Copies every adapter variable of `vs` from the safetensors file `file` (PEFT names). Each
/// must be there with its shape, and the file must hold no adapter tensor `vs` lacks (that
/// would mean other targets or layers). Returns how many tensors were copied.
pub fn load_adapter_weights(vs: &nn::VarStore, file: impl AsRef<Path>) -> Result<usize> {
    let file = file.as_ref();
    let tensors: HashMap<String, Tensor> = Tensor::read_safetensors(file)
        .map_err(|e| Error::Config(format!("reading adapters {}: {e}", file.display())))?
        .into_iter()
        .collect();
    let vars: HashMap<String, Tensor> = vs
        .variables()
        .into_iter()
        .filter(|(name, _)| is_adapter_name(name))
        .collect();
    if vars.is_empty() {
        return Err(Error::Policy(
            "the model has no LoRA adapters to load into".into(),
        ));
    }
    if let Some(extra) = tensors
        .keys()
        .find(|n| is_adapter_name(n) && !vars.contains_key(*n))
    {
        return Err(Error::Config(format!(
            "{}: adapter tensor `{extra}` has no matching adapter in the model (other targets?)",
            file.display()
        )));
    }
    for (name, var) in &vars {
        let src = tensors.get(name).ok_or_else(|| {
            Error::Config(format!(
                "{}: adapter tensor `{name}` is missing",
                file.display()
            ))
        })?;
        if src.size() != var.size() {
            return Err(Error::Config(format!(
                "{}: adapter tensor `{name}` has shape {:?}, the model expects {:?}",
                file.display(),
                src.size(),
                var.size()
            )));
        }
        copy_checked(var, src, || {
            format!("{}: adapter tensor `{name}`", file.display())
        })?;
    }
    Ok(vars.len())
}

/// Reads the LoRA settings of a PEFT adapter directory's `adapter_config.json`.
pub fn read_peft_config(dir: impl AsRef<Path>) -> Result<LoraConfig> {
    let path = dir.as_ref().join(ADAPTER_CONFIG_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| Error::io("reading", &path, e))?;
    let peft: PeftConfig =
        serde_json::from_str(&text).map_err(|e| Error::json(path.display().to_string(), e))?;
    if peft.peft_type != "LORA" {
        return Err(Error::Config(format!(
            "{}: peft_type is `{}`, only LORA adapters can be loaded",
            path.display(),
            peft.peft_type
        )));
    }
    let cfg = LoraConfig {
        r: peft.r,
        alpha: peft.lora_alpha,
        targets: peft.target_modules,
    };
    cfg.validate()
        .map_err(|e| Error::Config(format!("{}: {e}", path.display())))?;
    Ok(cfg)
}

/// Writes the adapter variables of `vs` (attached with `cfg`) to `dir` in the PEFT layout:
/// `adapter_model.safetensors` and `adapter_config.json` naming `base_model`.
pub fn save_adapters(
    vs: &nn::VarStore,
    cfg: &LoraConfig,
    dir: &Path,
    base_model: &str,
) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io("creating", dir, e))?;
    let weights = adapter_weights(vs);
    if weights.is_empty() {
        return Err(Error::Policy(
            "the model has no LoRA adapters to save".into(),
        ));
    }
    let file = dir.join(ADAPTER_WEIGHTS_FILE);
    Tensor::write_safetensors(&weights, &file)
        .map_err(|e| Error::Policy(format!("writing {}: {e}", file.display())))?;
    let peft = PeftConfig {
        peft_type: "LORA".into(),
        task_type: Some("CAUSAL_LM".into()),
        base_model_name_or_path: Some(base_model.to_string()),
        r: cfg.r,
        lora_alpha: cfg.alpha,
        target_modules: cfg.targets.clone(),
        lora_dropout: 0.0,
        bias: default_bias(),
        fan_in_fan_out: false,
        inference_mode: true,
    };
    let text = serde_json::to_string_pretty(&peft).map_err(|e| Error::json("adapter config", e))?;
    let path = dir.join(ADAPTER_CONFIG_FILE);
    std::fs::write(&path, text).map_err(|e| Error::io("writing", &path, e))
}

impl Llama {
    /// Writes the attached adapters to `dir` in the PEFT layout (`adapter_model.safetensors`
    /// and `adapter_config.json`); `base_model` is recorded as `base_model_name_or_path`.
    pub fn save_peft(
        &self,
        vs: &nn::VarStore,
        dir: impl AsRef<Path>,
        base_model: &str,
    ) -> Result<()> {
        let cfg = self
            .lora_config()
            .ok_or_else(|| Error::Policy("the model has no LoRA adapters to save".into()))?;
        save_adapters(vs, cfg, dir.as_ref(), base_model)
    }

    /// Attaches adapters shaped by `dir`'s `adapter_config.json` (freezing the base, see
    /// [`Llama::attach_lora`]) and fills them from its `adapter_model.safetensors`.
    pub fn load_peft(&mut self, vs: &nn::VarStore, dir: impl AsRef<Path>) -> Result<LoraConfig> {
        let dir = dir.as_ref();
        let cfg = read_peft_config(dir)?;
        self.attach_lora(vs, &cfg)?;
        load_adapter_weights(vs, dir.join(ADAPTER_WEIGHTS_FILE))?;
        Ok(cfg)
    }
}
