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
use super::lora::{LoraConfig, TARGET_MODULES, is_adapter_name};
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
    target_modules: TargetModules,
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

/// `target_modules` as PEFT writes it: module names, or one string (a regex over module paths,
/// or `all-linear`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
enum TargetModules {
    Names(Vec<String>),
    Pattern(String),
}

/// Options of `adapter_config.json` that change what the adapters compute, with the value that
/// leaves plain LoRA (PEFT's default): an adapter with any other value would load into a
/// different model than the one it was trained with, so it is refused.
const PLAIN_LORA: [(&str, &str); 17] = [
    ("use_dora", "false"),
    ("lora_bias", "false"),
    ("bias", "\"none\""),
    ("fan_in_fan_out", "false"),
    ("use_qalora", "false"),
    ("use_bdlora", "null"),
    ("rank_pattern", "{}"),
    ("alpha_pattern", "{}"),
    ("layers_to_transform", "null"),
    ("layer_replication", "null"),
    ("modules_to_save", "null"),
    ("exclude_modules", "null"),
    ("trainable_token_indices", "null"),
    ("target_parameters", "null"),
    ("alora_invocation_tokens", "null"),
    ("arrow_config", "null"),
    ("kasa_config", "null"),
];

/// Refuses the options of [`PLAIN_LORA`] set to anything but plain LoRA's value (`null`,
/// `false` and an empty list or table count as unset too), naming the key and the value.
fn check_plain_lora(raw: &serde_json::Value, path: &Path) -> Result<()> {
    for (key, plain) in PLAIN_LORA {
        let Some(value) = raw.get(key) else { continue };
        let plain_value: serde_json::Value = serde_json::from_str(plain).unwrap_or_default();
        let unset = value == &plain_value
            || value.is_null()
            || value == &serde_json::Value::Bool(false)
            || value.as_array().is_some_and(|a| a.is_empty())
            || value.as_object().is_some_and(|o| o.is_empty());
        if !unset {
            return Err(Error::Config(format!(
                "{}: `{key}` is {value}; only plain LoRA adapters load here ({key} = {plain}), \
                 and this one would compute something else",
                path.display()
            )));
        }
    }
    Ok(())
}

/// The projection names of `target_modules`: a list's entries by their last component (PEFT
/// matches `q_proj` and `model.layers.0.self_attn.q_proj` alike, and saves `all-linear` as the
/// full paths it resolved to; a layer the list leaves out shows as a missing adapter tensor
/// when the weights load), `all-linear` itself as every projection of the decoder layers
/// (PEFT leaves the output head out), and no other pattern.
fn target_names(targets: TargetModules, path: &Path) -> Result<Vec<String>> {
    match targets {
        TargetModules::Names(names) => {
            let mut short: Vec<String> = Vec::new();
            for name in &names {
                let last = name.rsplit('.').next().unwrap_or(name);
                if !short.iter().any(|s| s == last) {
                    short.push(last.to_string());
                }
            }
            // In the decoder's order, so the same targets read the same however PEFT sorted them.
            short.sort_by_key(|s| TARGET_MODULES.iter().position(|t| t == s));
            Ok(short)
        }
        TargetModules::Pattern(p) if p == "all-linear" => {
            Ok(TARGET_MODULES.iter().map(|s| s.to_string()).collect())
        }
        TargetModules::Pattern(p) => Err(Error::Config(format!(
            "{}: target_modules is the pattern {p:?}; only a list of module names (or \
             \"all-linear\") is supported",
            path.display()
        ))),
    }
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

/// Reads the LoRA settings of a PEFT adapter directory's `adapter_config.json` (as PEFT 0.21
/// writes it). rsLoRA (`use_rslora`) becomes the equal plain scale; an option that would make
/// the adapters compute something plain LoRA does not (DoRA, biases, per-module ranks, a subset
/// of layers, saved whole modules, ...) is an error naming it.
pub fn read_peft_config(dir: impl AsRef<Path>) -> Result<LoraConfig> {
    let path = dir.as_ref().join(ADAPTER_CONFIG_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| Error::io("reading", &path, e))?;
    let json = |e| Error::json(path.display().to_string(), e);
    let raw: serde_json::Value = serde_json::from_str(&text).map_err(json)?;
    let peft_type = raw.get("peft_type").and_then(|t| t.as_str()).unwrap_or("");
    if peft_type != "LORA" {
        return Err(Error::Config(format!(
            "{}: peft_type is `{peft_type}`, only LORA adapters can be loaded",
            path.display()
        )));
    }
    check_plain_lora(&raw, &path)?;
    let use_rslora = raw.get("use_rslora").and_then(|v| v.as_bool()) == Some(true);
    let peft: PeftConfig = serde_json::from_value(raw).map_err(json)?;
    // rsLoRA scales the update by alpha / sqrt(r): the same as alpha · sqrt(r) over r.
    let alpha = if use_rslora {
        peft.lora_alpha * (peft.r as f64).sqrt()
    } else {
        peft.lora_alpha
    };
    let cfg = LoraConfig {
        r: peft.r,
        alpha,
        targets: target_names(peft.target_modules, &path)?,
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
        target_modules: TargetModules::Names(cfg.targets.clone()),
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
