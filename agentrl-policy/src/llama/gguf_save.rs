//! Saving Llama-family models as llama.cpp GGUF files, the inverse of `Llama::load_gguf`: the
//! Hugging Face variables under their GGUF names (Q/K rows permuted back for the `llama`
//! architecture), the config as `{arch}.*` metadata, and any extra metadata such as the
//! `tokenizer.*` keys of the file the model came from, so llama.cpp can serve what was trained.

use std::path::Path;

use agentrl_core::{Error, Result};
use tch::{Kind, nn};

use super::gguf_load::tch_load::{Rows, tensor_map};
use super::{Llama, LlamaConfig};
use crate::gguf::{GgufFile, GgufTensorData, MetaValue, permute_llama_qk, write_gguf};

/// Element type of the exported matrices (norms and biases stay F32, as llama.cpp keeps them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GgufPrecision {
    /// 32-bit floats: exact.
    #[default]
    F32,
    /// 16-bit floats: half the size, rounded.
    F16,
}

/// The GGUF architecture name of `config`: `qwen2` or `qwen3` for those models, else `llama`.
fn architecture(config: &LlamaConfig) -> &'static str {
    match config.model_type.as_deref() {
        Some("qwen2") => "qwen2",
        Some("qwen3") => "qwen3",
        _ => "llama",
    }
}

/// The `general.*` and `{arch}.*` metadata describing `config`; a RoPE scaling llama.cpp
/// cannot express this way (anything but linear) is an error.
pub fn gguf_metadata(config: &LlamaConfig, name: &str) -> Result<Vec<(String, MetaValue)>> {
    let arch = architecture(config);
    let key = |k: &str| format!("{arch}.{k}");
    let count = |v: usize| MetaValue::U32(v as u32);
    let mut meta = vec![
        (
            "general.architecture".into(),
            MetaValue::String(arch.into()),
        ),
        ("general.name".into(), MetaValue::String(name.into())),
        (key("context_length"), count(config.max_position_embeddings)),
        (key("embedding_length"), count(config.hidden_size)),
        (key("feed_forward_length"), count(config.intermediate_size)),
        (key("block_count"), count(config.num_hidden_layers)),
        (
            key("attention.head_count"),
            count(config.num_attention_heads),
        ),
        (key("attention.head_count_kv"), count(config.kv_heads())),
        (
            key("attention.layer_norm_rms_epsilon"),
            MetaValue::F32(config.rms_norm_eps as f32),
        ),
        (
            key("rope.freq_base"),
            MetaValue::F32(config.rope_theta as f32),
        ),
    ];
    if let Some(head_dim) = config.head_dim {
        meta.push((key("attention.key_length"), count(head_dim)));
        meta.push((key("attention.value_length"), count(head_dim)));
    }
    if let Some(scaling) = &config.rope_scaling {
        let kind = scaling
            .rope_type
            .as_deref()
            .or(scaling.legacy_type.as_deref());
        match (kind, scaling.factor) {
            (Some("default") | None, _) => {}
            (Some("linear"), Some(factor)) => {
                meta.push((key("rope.scaling.type"), MetaValue::String("linear".into())));
                meta.push((key("rope.scaling.factor"), MetaValue::F32(factor as f32)));
            }
            (Some(other), _) => {
                return Err(Error::Config(format!(
                    "rope_scaling type `{other}` cannot be written to GGUF metadata (only linear)"
                )));
            }
        }
    }
    Ok(meta)
}

/// The `tokenizer.*` metadata of `file` (vocabulary, merges, special ids, chat template), to
/// carry a model's tokenizer into a file exported with [`Llama::save_gguf`].
pub fn tokenizer_metadata(file: &GgufFile) -> Vec<(String, MetaValue)> {
    file.metadata()
        .iter()
        .filter(|(k, _)| k.starts_with("tokenizer."))
        .cloned()
        .collect()
}

impl Llama {
    /// Writes this model (its variables live in `vs`; LoRA adapters merged) to `path` as GGUF:
    /// the config as metadata, then `extra` metadata (keys the config already sets are skipped),
    /// and every weight under its llama.cpp name. `Llama::load_gguf` reads the file back to the same logits (exactly
    /// with [`GgufPrecision::F32`]).
    pub fn save_gguf(
        &self,
        vs: &nn::VarStore,
        path: impl AsRef<Path>,
        precision: GgufPrecision,
        extra: &[(String, MetaValue)],
    ) -> Result<()> {
        let path = path.as_ref();
        if self.lora_config().is_some() {
            return Err(Error::Policy(
                "this model has LoRA adapters attached: merge them first (Llama::merge_lora), \
                 or GGUF would hold the base weights only"
                    .into(),
            ));
        }
        let config = self.config();
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("agentrl");
        let mut metadata = gguf_metadata(config, name)?;
        for (k, v) in extra {
            if !metadata.iter().any(|(have, _)| have == k) {
                metadata.push((k.clone(), v.clone()));
            }
        }
        let vars = vs.variables();
        let mut tensors = Vec::new();
        for (gguf, hf, rows) in tensor_map(config) {
            let var = vars.get(&hf).ok_or_else(|| {
                Error::Policy(format!(
                    "the model has no variable `{hf}` for GGUF tensor '{gguf}'"
                ))
            })?;
            let shape: Vec<usize> = var.size().iter().map(|&d| d as usize).collect();
            let flat = var
                .detach()
                .to_kind(Kind::Float)
                .to_device(tch::Device::Cpu)
                .flatten(0, -1);
            let mut data = Vec::<f32>::try_from(&flat)
                .map_err(|e| Error::Policy(format!("reading `{hf}`: {e}")))?;
            if let Rows::Unpermute(heads) = rows {
                let cols = shape.get(1).copied().unwrap_or(1);
                let rows_n = shape.first().copied().unwrap_or(0);
                data = permute_llama_qk(&data, heads, rows_n, cols)
                    .map_err(|e| Error::Policy(format!("permuting `{hf}` for llama.cpp: {e}")))?;
            }
            tensors.push(match precision {
                GgufPrecision::F16 if shape.len() > 1 => GgufTensorData::f16(gguf, &shape, &data),
                _ => GgufTensorData::f32(gguf, &shape, &data),
            });
        }
        write_gguf(path, &metadata, &tensors).map_err(|e| Error::Policy(e.to_string()))
    }
}
