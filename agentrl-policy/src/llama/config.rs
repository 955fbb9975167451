//! [`LlamaConfig`]: the shape of a Llama-family decoder, read straight from a Hugging Face
//! `config.json` (Llama 2/3, Qwen2, SmolLM2, Mistral-style without sliding windows).

use std::path::Path;

use agentrl_core::{Error, Result};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};

pub use super::rope::RopeScaling;
use super::rope::{DEFAULT_ROPE_THETA, read_config_rope, rope_frequencies};

/// The `model_type`s whose architecture [`super::Llama`] implements.
pub const SUPPORTED_MODEL_TYPES: [&str; 4] = ["llama", "qwen2", "qwen3", "mistral"];

/// Shape of a [`super::Llama`], deserialised from a Hugging Face `config.json` (unknown fields
/// are ignored).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlamaConfig {
    /// Architecture name (`"llama"`, `"qwen2"`, ...); `"qwen2"` implies q/k/v biases.
    #[serde(default)]
    pub model_type: Option<String>,
    /// Width of the residual stream.
    pub hidden_size: usize,
    /// Hidden width of the SwiGLU MLP.
    pub intermediate_size: usize,
    /// Number of decoder layers.
    pub num_hidden_layers: usize,
    /// Query heads per layer.
    pub num_attention_heads: usize,
    /// Key/value heads per layer (grouped-query attention); defaults to `num_attention_heads`.
    #[serde(default)]
    pub num_key_value_heads: Option<usize>,
    /// Size of one head; defaults to `hidden_size / num_attention_heads`.
    #[serde(default)]
    pub head_dim: Option<usize>,
    /// Epsilon of the RMS norms.
    #[serde(default = "default_rms_norm_eps")]
    pub rms_norm_eps: f64,
    /// Base of the rotary frequencies (from `rope_parameters.rope_theta` or the top-level
    /// `rope_theta` when read by [`LlamaConfig::from_json_str`]).
    #[serde(default = "default_rope_theta")]
    pub rope_theta: f64,
    /// Optional rotary scaling (from `rope_parameters` or `rope_scaling`).
    #[serde(default)]
    pub rope_scaling: Option<RopeScaling>,
    /// Vocabulary size.
    pub vocab_size: usize,
    /// Longest sequence the model accepts.
    pub max_position_embeddings: usize,
    /// Whether `lm_head` shares the token embedding matrix.
    #[serde(default)]
    pub tie_word_embeddings: bool,
    /// Explicit attention bias switch (Llama: biases on q/k/v/o projections).
    #[serde(default)]
    pub attention_bias: Option<bool>,
    /// MLP activation; only `"silu"` is supported.
    #[serde(default)]
    pub hidden_act: Option<String>,
}

fn default_rms_norm_eps() -> f64 {
    1e-6
}

fn default_rope_theta() -> f64 {
    DEFAULT_ROPE_THETA
}

impl LlamaConfig {
    /// Parses and validates a `config.json` text; `origin` names it in errors. The RoPE comes
    /// from `rope_parameters` (transformers 5) or the older `rope_theta` and `rope_scaling`;
    /// switches that change the maths and that the decoder does not implement are errors.
    pub fn from_json_str(text: &str, origin: &str) -> Result<Self> {
        let json = |source| Error::Json {
            context: origin.to_string(),
            source,
        };
        let root: Json = serde_json::from_str(text).map_err(json)?;
        let Some(object) = root.as_object() else {
            return Err(Error::Config(format!("{origin}: not a JSON object")));
        };
        let mut config: LlamaConfig = serde_json::from_value(root.clone()).map_err(json)?;
        check_unsupported_switches(object, config.model_type.as_deref(), origin)?;
        let rope = read_config_rope(object, config.max_position_embeddings, origin)?;
        config.rope_theta = rope.theta;
        config.rope_scaling = rope.scaling;
        config.validate().map_err(|e| match e {
            Error::Config(m) => Error::Config(format!("{origin}: {m}")),
            other => other,
        })?;
        Ok(config)
    }

    /// Reads, parses and validates a `config.json` file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
            action: "reading",
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_json_str(&text, &path.display().to_string())
    }

    /// Key/value heads per layer.
    pub fn kv_heads(&self) -> usize {
        self.num_key_value_heads.unwrap_or(self.num_attention_heads)
    }

    /// Size of one attention head.
    pub fn head_size(&self) -> usize {
        self.head_dim
            .unwrap_or(self.hidden_size / self.num_attention_heads.max(1))
    }

    fn is_qwen2(&self) -> bool {
        self.model_type.as_deref() == Some("qwen2")
    }

    /// Whether this is a Qwen3 model: RMSNorm over each head of q and k before RoPE.
    pub fn qk_norm(&self) -> bool {
        self.model_type.as_deref() == Some("qwen3")
    }

    /// Whether the q, k and v projections carry biases (Qwen2, or `attention_bias: true`).
    pub fn qkv_bias(&self) -> bool {
        self.is_qwen2() || self.attention_bias == Some(true)
    }

    /// Whether the output projection carries a bias (`attention_bias: true`, never for Qwen2;
    /// Qwen3 puts `attention_bias` on all four projections).
    pub fn o_bias(&self) -> bool {
        !self.is_qwen2() && self.attention_bias == Some(true)
    }

    /// Checks that the shape is usable, naming the offending field.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::Config(format!("llama config: {m}")));
        let positive = [
            ("hidden_size", self.hidden_size),
            ("intermediate_size", self.intermediate_size),
            ("num_hidden_layers", self.num_hidden_layers),
            ("num_attention_heads", self.num_attention_heads),
            ("num_key_value_heads", self.kv_heads()),
            ("vocab_size", self.vocab_size),
            ("max_position_embeddings", self.max_position_embeddings),
        ];
        for (name, v) in positive {
            if v == 0 {
                return bad(format!("{name} must be positive"));
            }
        }
        if self.head_dim.is_none() && !self.hidden_size.is_multiple_of(self.num_attention_heads) {
            return bad(format!(
                "num_attention_heads ({}) does not divide hidden_size ({})",
                self.num_attention_heads, self.hidden_size
            ));
        }
        let hd = self.head_size();
        if hd == 0 || !hd.is_multiple_of(2) {
            return bad(format!("head size {hd} must be even and positive"));
        }
        if !self.num_attention_heads.is_multiple_of(self.kv_heads()) {
            return bad(format!(
                "num_key_value_heads ({}) does not divide num_attention_heads ({})",
                self.kv_heads(),
                self.num_attention_heads
            ));
        }
        if !(self.rms_norm_eps > 0.0 && self.rms_norm_eps.is_finite()) {
            return bad(format!(
                "rms_norm_eps {} must be positive",
                self.rms_norm_eps
            ));
        }
        if !(self.rope_theta > 1.0 && self.rope_theta.is_finite()) {
            return bad(format!("rope_theta {} must be above 1", self.rope_theta));
        }
        if let Some(act) = &self.hidden_act
            && act != "silu"
        {
            return bad(format!("hidden_act `{act}` is not supported (only silu)"));
        }
        if let Some(t) = &self.model_type
            && !SUPPORTED_MODEL_TYPES.contains(&t.as_str())
        {
            return bad(format!(
                "model_type `{t}` is not supported (only {SUPPORTED_MODEL_TYPES:?})"
            ));
        }
        if let Some(s) = &self.rope_scaling {
            s.validate()
                .map_err(|m| Error::Config(format!("llama config: {m}")))?;
        }
        Ok(())
    }

    /// Rotary inverse frequencies, `head_size / 2` of them, with `rope_scaling` applied.
    pub fn inv_freq(&self) -> Vec<f64> {
        self.rope().inv_freq
    }

    /// The factor transformers multiplies cos and sin by (YaRN's attention factor, else 1).
    pub fn rope_attention_scaling(&self) -> f64 {
        self.rope().attention_scaling
    }

    fn rope(&self) -> super::rope::RopeFrequencies {
        rope_frequencies(
            self.rope_theta,
            self.head_size(),
            self.rope_scaling.as_ref(),
            self.max_position_embeddings,
        )
    }
}

/// Errors on `config.json` switches that change the maths and that the decoder does not
/// implement (`mlp_bias`, sliding windows, non-full attention layers, logit soft-capping).
fn check_unsupported_switches(
    root: &Map<String, Json>,
    model_type: Option<&str>,
    origin: &str,
) -> Result<()> {
    let refuse = |key: &str, why: &str| {
        Err(Error::Config(format!(
            "{origin}: `{key}` is not supported: {why}"
        )))
    };
    let get = |key: &str| root.get(key).filter(|v| !v.is_null());
    if get("mlp_bias").is_some_and(|v| v != &Json::Bool(false)) {
        return refuse("mlp_bias", "the MLP projections have no biases here");
    }
    if get("use_sliding_window").is_some_and(|v| v != &Json::Bool(false)) {
        return refuse(
            "use_sliding_window",
            "attention is always over the whole context",
        );
    }
    // Qwen2/Qwen3 write a `sliding_window` size that only `use_sliding_window` turns on.
    let window_needs_switch = matches!(model_type, Some("qwen2" | "qwen3"));
    if !window_needs_switch && get("sliding_window").is_some() {
        return refuse(
            "sliding_window",
            "attention is always over the whole context",
        );
    }
    if let Some(types) = get("layer_types") {
        let all_full = types
            .as_array()
            .is_some_and(|l| l.iter().all(|t| t.as_str() == Some("full_attention")));
        if !all_full {
            return refuse("layer_types", "every layer must be `full_attention`");
        }
    }
    for key in ["attn_logit_softcapping", "final_logit_softcapping"] {
        if get(key).is_some() {
            return refuse(key, "logits are not soft-capped here");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config_json(extra: &str) -> String {
        format!(
            r#"{{"model_type": "llama", "hidden_size": 32, "intermediate_size": 48,
            "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 64,
            "max_position_embeddings": 64{extra}}}"#
        )
    }

    #[test]
    fn transformers5_rope_parameters_set_the_base() {
        let json =
            config_json(r#", "rope_parameters": {"rope_theta": 100000.0, "rope_type": "default"}"#);
        let config = LlamaConfig::from_json_str(&json, "m/config.json").expect("valid");
        assert_eq!(config.rope_theta, 100_000.0);
        assert_eq!(config.inv_freq()[1], 100_000f64.powf(-2.0 / 8.0));
        assert_eq!(config.rope_attention_scaling(), 1.0);
    }

    #[test]
    fn unsupported_switches_are_errors_naming_the_key_and_file() {
        let cases = [
            (r#", "mlp_bias": true"#, "`mlp_bias`"),
            (r#", "sliding_window": 4096"#, "`sliding_window`"),
            (r#", "use_sliding_window": true"#, "`use_sliding_window`"),
            (
                r#", "layer_types": ["full_attention", "sliding_attention"]"#,
                "`layer_types`",
            ),
            (
                r#", "final_logit_softcapping": 30.0"#,
                "`final_logit_softcapping`",
            ),
        ];
        for (extra, needle) in cases {
            let Err(e) = LlamaConfig::from_json_str(&config_json(extra), "m/config.json") else {
                panic!("{extra} was accepted");
            };
            let message = e.to_string();
            assert!(
                message.contains(needle) && message.contains("m/config.json"),
                "{message}"
            );
        }
        let gemma = config_json("").replace("\"llama\"", "\"gemma\"");
        let Err(e) = LlamaConfig::from_json_str(&gemma, "m/config.json") else {
            panic!("gemma was accepted");
        };
        assert!(e.to_string().contains("model_type `gemma`"), "{e}");
    }

    #[test]
    fn disabled_switches_are_accepted() {
        let qwen = config_json(
            r#", "sliding_window": 32768, "use_sliding_window": false, "mlp_bias": false,
            "layer_types": ["full_attention", "full_attention"]"#,
        )
        .replace("\"llama\"", "\"qwen2\"");
        LlamaConfig::from_json_str(&qwen, "q/config.json").expect("disabled window");
        let mistral =
            config_json(r#", "sliding_window": null"#).replace("\"llama\"", "\"mistral\"");
        LlamaConfig::from_json_str(&mistral, "m/config.json").expect("no window");
    }
}
