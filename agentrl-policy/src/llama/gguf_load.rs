//! Loading Llama-family models from llama.cpp GGUF files: [`gguf_config`] builds a
//! [`LlamaConfig`] from the file's metadata, and (with the `tch` feature) `Llama::load_gguf`
//! fills the Hugging Face-named variables from the GGUF tensors, dequantised to f32.
//!
//! llama.cpp names tensors differently (`blk.N.attn_q.weight` for
//! `model.layers.N.self_attn.q_proj.weight`, ...) and, for the `llama` architecture, stores the
//! rows of the Q and K projections permuted for its RoPE layout; the loader undoes that with
//! [`crate::gguf::unpermute_llama_qk`]. Qwen2 and Qwen3 files keep the Hugging Face row order;
//! Qwen3's per-head q/k norms are `blk.N.attn_q_norm.weight` and `blk.N.attn_k_norm.weight`.

use agentrl_core::{Error, Result};

use super::config::{LlamaConfig, RopeScaling};
use crate::gguf::{GgufError, GgufFile};

/// Architectures (`general.architecture`) that [`gguf_config`] accepts.
pub const GGUF_ARCHITECTURES: [&str; 3] = ["llama", "qwen2", "qwen3"];

/// Turns a GGUF reader error into the workspace error type (the message names the file).
fn gguf_err(e: GgufError) -> Error {
    Error::Config(e.to_string())
}

fn meta_usize(file: &GgufFile, key: &str) -> Result<usize> {
    let v = file.get_u64(key).map_err(gguf_err)?;
    usize::try_from(v).map_err(|_| {
        Error::Config(format!(
            "{}: metadata key '{key}' = {v} does not fit in usize",
            file.path().display()
        ))
    })
}

fn opt_usize(file: &GgufFile, key: &str) -> Result<Option<usize>> {
    if file.get(key).is_none() {
        return Ok(None);
    }
    meta_usize(file, key).map(Some)
}

/// Builds the [`LlamaConfig`] of a GGUF file from its `{arch}.*` metadata.
///
/// The vocabulary size is the row count of `token_embd.weight` (else the length of
/// `tokenizer.ggml.tokens`); embeddings are tied when there is no `output.weight`; a `llama`
/// file with `blk.0.attn_q.bias` gets `attention_bias`. Llama 3.1-style `rope_freqs.weight`
/// tensors are refused rather than silently ignored.
pub fn gguf_config(file: &GgufFile) -> Result<LlamaConfig> {
    let path = file.path().display().to_string();
    let arch = file.get_str("general.architecture").map_err(gguf_err)?;
    if !GGUF_ARCHITECTURES.contains(&arch) {
        return Err(Error::Config(format!(
            "{path}: general.architecture is `{arch}`, only {GGUF_ARCHITECTURES:?} can be loaded as a Llama"
        )));
    }
    let key = |k: &str| format!("{arch}.{k}");
    let hidden_size = meta_usize(file, &key("embedding_length"))?;
    let num_attention_heads = meta_usize(file, &key("attention.head_count"))?;
    let vocab_size = match file.tensor_info("token_embd.weight") {
        Some(info) if info.dims.len() == 2 => info.dims[1],
        Some(info) => {
            return Err(Error::Config(format!(
                "{path}: tensor 'token_embd.weight' has GGUF dims {:?}, expected 2 dimensions",
                info.dims
            )));
        }
        None => file
            .get_array_str("tokenizer.ggml.tokens")
            .map_err(gguf_err)?
            .len(),
    };
    let rope_scaling = match file.get(&key("rope.scaling.type")) {
        None => None,
        Some(_) => match file.get_str(&key("rope.scaling.type")).map_err(gguf_err)? {
            "none" => None,
            "linear" => Some(RopeScaling {
                rope_type: Some("linear".to_string()),
                legacy_type: None,
                factor: Some(
                    file.get_f64(&key("rope.scaling.factor"))
                        .map_err(gguf_err)?,
                ),
                ..RopeScaling::default()
            }),
            other => {
                return Err(Error::Config(format!(
                    "{path}: {arch}.rope.scaling.type `{other}` is not supported"
                )));
            }
        },
    };
    if file.tensor_info("rope_freqs.weight").is_some() {
        return Err(Error::Config(format!(
            "{path}: tensor 'rope_freqs.weight' (per-frequency RoPE factors) is not supported"
        )));
    }
    let rope_theta = match file.get(&key("rope.freq_base")) {
        Some(_) => file.get_f64(&key("rope.freq_base")).map_err(gguf_err)?,
        None => 10_000.0,
    };
    let config = LlamaConfig {
        model_type: Some(arch.to_string()),
        hidden_size,
        intermediate_size: meta_usize(file, &key("feed_forward_length"))?,
        num_hidden_layers: meta_usize(file, &key("block_count"))?,
        num_attention_heads,
        num_key_value_heads: Some(
            opt_usize(file, &key("attention.head_count_kv"))?.unwrap_or(num_attention_heads),
        ),
        head_dim: opt_usize(file, &key("attention.key_length"))?,
        rms_norm_eps: file
            .get_f64(&key("attention.layer_norm_rms_epsilon"))
            .map_err(gguf_err)?,
        rope_theta,
        rope_scaling,
        vocab_size,
        max_position_embeddings: meta_usize(file, &key("context_length"))?,
        tie_word_embeddings: file.tensor_info("output.weight").is_none(),
        attention_bias: (arch == "llama" && file.tensor_info("blk.0.attn_q.bias").is_some())
            .then_some(true),
        hidden_act: Some("silu".to_string()),
    };
    config.validate().map_err(|e| match e {
        Error::Config(m) => Error::Config(format!("{path}: {m}")),
        other => other,
    })?;
    Ok(config)
}

#[cfg(feature = "tch")]
pub(crate) mod tch_load {
    use std::collections::BTreeSet;
    use std::path::Path;

    use agentrl_core::{Error, Result};
    use tch::{Device, Kind, Tensor, nn};

    use super::{gguf_config, gguf_err};
    use crate::gguf::{GgufFile, unpermute_llama_qk};
    use crate::llama::load::copy_checked;
    use crate::llama::{Llama, LlamaConfig};

    /// How a GGUF tensor's rows must be reordered to reach the Hugging Face layout.
    #[derive(Debug, Clone, Copy)]
    pub(crate) enum Rows {
        /// Stored in Hugging Face order.
        Keep,
        /// Permuted by llama.cpp for RoPE, in this many heads.
        Unpermute(usize),
    }

    /// One variable to fill: GGUF tensor name, Hugging Face variable name, row order.
    pub(crate) type Entry = (String, String, Rows);

    /// Every (GGUF name, Hugging Face name) pair the model of `config` needs.
    pub(crate) fn tensor_map(config: &LlamaConfig) -> Vec<Entry> {
        let llama_perm = !matches!(config.model_type.as_deref(), Some("qwen2" | "qwen3"));
        let q_rows = if llama_perm {
            Rows::Unpermute(config.num_attention_heads)
        } else {
            Rows::Keep
        };
        let k_rows = if llama_perm {
            Rows::Unpermute(config.kv_heads())
        } else {
            Rows::Keep
        };
        let mut map: Vec<Entry> = vec![
            (
                "token_embd.weight".into(),
                "model.embed_tokens.weight".into(),
                Rows::Keep,
            ),
            (
                "output_norm.weight".into(),
                "model.norm.weight".into(),
                Rows::Keep,
            ),
        ];
        if !config.tie_word_embeddings {
            map.push(("output.weight".into(), "lm_head.weight".into(), Rows::Keep));
        }
        for i in 0..config.num_hidden_layers {
            let g = |n: &str| format!("blk.{i}.{n}");
            let h = |n: &str| format!("model.layers.{i}.{n}");
            let mut add = |gg: &str, hf: &str, rows: Rows| map.push((g(gg), h(hf), rows));
            add("attn_norm.weight", "input_layernorm.weight", Rows::Keep);
            add("attn_q.weight", "self_attn.q_proj.weight", q_rows);
            add("attn_k.weight", "self_attn.k_proj.weight", k_rows);
            add("attn_v.weight", "self_attn.v_proj.weight", Rows::Keep);
            add("attn_output.weight", "self_attn.o_proj.weight", Rows::Keep);
            if config.qk_norm() {
                add("attn_q_norm.weight", "self_attn.q_norm.weight", Rows::Keep);
                add("attn_k_norm.weight", "self_attn.k_norm.weight", Rows::Keep);
            }
            if config.qkv_bias() {
                add("attn_q.bias", "self_attn.q_proj.bias", q_rows);
                add("attn_k.bias", "self_attn.k_proj.bias", k_rows);
                add("attn_v.bias", "self_attn.v_proj.bias", Rows::Keep);
            }
            if config.o_bias() {
                add("attn_output.bias", "self_attn.o_proj.bias", Rows::Keep);
            }
            add(
                "ffn_norm.weight",
                "post_attention_layernorm.weight",
                Rows::Keep,
            );
            add("ffn_gate.weight", "mlp.gate_proj.weight", Rows::Keep);
            add("ffn_up.weight", "mlp.up_proj.weight", Rows::Keep);
            add("ffn_down.weight", "mlp.down_proj.weight", Rows::Keep);
        }
        map
    }

    /// Reads one GGUF tensor as an f32 tensor of the Hugging Face shape `want`.
    fn read_tensor(
        file: &GgufFile,
        gguf: &str,
        hf: &str,
        rows: Rows,
        want: &[i64],
    ) -> Result<Tensor> {
        let path = file.path().display();
        let Some(info) = file.tensor_info(gguf) else {
            return Err(Error::Config(format!(
                "{path}: tensor '{gguf}' (for `{hf}`) is missing from the GGUF file"
            )));
        };
        let shape: Vec<i64> = info.shape().iter().map(|&d| d as i64).collect();
        if shape != want {
            return Err(Error::Config(format!(
                "{path}: tensor '{gguf}' (for `{hf}`) has shape {shape:?} (GGUF dims {:?}), the config expects {want:?}",
                info.dims
            )));
        }
        let (_, data) = file.tensor_f32(gguf).map_err(gguf_err)?;
        let data = match rows {
            Rows::Keep => data,
            Rows::Unpermute(heads) => {
                let n_rows = info.shape().first().copied().unwrap_or(0);
                let cols = info.shape().get(1).copied().unwrap_or(1);
                unpermute_llama_qk(&data, heads, n_rows, cols).map_err(|e| {
                    Error::Config(format!(
                        "{path}: tensor '{gguf}' (for `{hf}`): cannot undo the llama.cpp Q/K permutation: {e}"
                    ))
                })?
            }
        };
        Ok(Tensor::from_slice(&data).reshape(want))
    }

    /// Fills every variable of `vs` (built by [`Llama::new`] for `config`) from `file`.
    fn fill_from_gguf(vs: &nn::VarStore, config: &LlamaConfig, file: &GgufFile) -> Result<()> {
        let vars = vs.variables();
        let mut unfilled: BTreeSet<&String> = vars.keys().collect();
        for (gguf, hf, rows) in tensor_map(config) {
            let Some(var) = vars.get(&hf) else {
                return Err(Error::Config(format!(
                    "the model has no variable `{hf}` for GGUF tensor '{gguf}'"
                )));
            };
            let src = read_tensor(file, &gguf, &hf, rows, &var.size())?;
            copy_checked(var, &src, || {
                format!("{}: tensor '{gguf}' (for `{hf}`)", file.path().display())
            })?;
            unfilled.remove(&hf);
        }
        if let Some(name) = unfilled.first() {
            return Err(Error::Config(format!(
                "{}: no GGUF tensor maps to the model variable `{name}`",
                file.path().display()
            )));
        }
        Ok(())
    }

    impl Llama {
        /// Loads a llama.cpp GGUF file (architecture `llama`, `qwen2` or `qwen3`) as f32 onto `device`:
        /// returns the VarStore (Hugging Face variable names), the model and its config.
        pub fn load_gguf(
            path: impl AsRef<Path>,
            device: Device,
        ) -> Result<(nn::VarStore, Llama, LlamaConfig)> {
            let file = GgufFile::open(path.as_ref()).map_err(gguf_err)?;
            let config = gguf_config(&file)?;
            let mut vs = nn::VarStore::new(device);
            let model = Llama::new_to_fill(&vs.root(), config.clone())?;
            vs.set_kind(Kind::Float);
            fill_from_gguf(&vs, &config, &file)?;
            Ok((vs, model, config))
        }
    }
}
