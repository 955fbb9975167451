//! [`LlamaConfig`]: the shape of a Llama-family decoder, read straight from a Hugging Face
//! `config.json` (Llama 2/3, Qwen2, SmolLM2, Mistral-style without sliding windows).

use std::path::Path;

use agentrl_core::{Error, Result};
use serde::{Deserialize, Serialize};

/// Rotary-embedding scaling as written in `config.json` under `rope_scaling`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RopeScaling {
    /// Scaling method (`"default"`, `"linear"` or `"llama3"` are supported).
    #[serde(default)]
    pub rope_type: Option<String>,
    /// Older spelling of `rope_type`.
    #[serde(default, rename = "type")]
    pub legacy_type: Option<String>,
    /// Frequency division factor.
    #[serde(default)]
    pub factor: Option<f64>,
    /// Llama 3: wavelength factor below which frequencies are fully scaled.
    #[serde(default)]
    pub low_freq_factor: Option<f64>,
    /// Llama 3: wavelength factor above which frequencies are kept.
    #[serde(default)]
    pub high_freq_factor: Option<f64>,
    /// Llama 3: context length the model was pre-trained with.
    #[serde(default)]
    pub original_max_position_embeddings: Option<f64>,
}

impl RopeScaling {
    /// The scaling method's name (`rope_type`, else `type`, else `"default"`).
    pub fn method(&self) -> &str {
        self.rope_type
            .as_deref()
            .or(self.legacy_type.as_deref())
            .unwrap_or("default")
    }
}

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
    /// Base of the rotary frequencies.
    #[serde(default = "default_rope_theta")]
    pub rope_theta: f64,
    /// Optional rotary scaling.
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
    10_000.0
}

impl LlamaConfig {
    /// Parses and validates a `config.json` text; `origin` names it in errors.
    pub fn from_json_str(text: &str, origin: &str) -> Result<Self> {
        let config: LlamaConfig = serde_json::from_str(text).map_err(|source| Error::Json {
            context: origin.to_string(),
            source,
        })?;
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

    /// Whether the q, k and v projections carry biases (Qwen2, or `attention_bias: true`).
    pub fn qkv_bias(&self) -> bool {
        self.is_qwen2() || self.attention_bias == Some(true)
    }

    /// Whether the output projection carries a bias (`attention_bias: true`, never for Qwen2).
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
        if let Some(s) = &self.rope_scaling {
            let factor_ok = |f: Option<f64>| f.is_some_and(|f| f > 0.0 && f.is_finite());
            match s.method() {
                "default" => {}
                "linear" if factor_ok(s.factor) => {}
                "llama3"
                    if factor_ok(s.factor)
                        && factor_ok(s.low_freq_factor)
                        && factor_ok(s.high_freq_factor)
                        && factor_ok(s.original_max_position_embeddings)
                        && s.high_freq_factor > s.low_freq_factor => {}
                "linear" | "llama3" => {
                    return bad(format!(
                        "rope_scaling `{}` lacks valid factors: {s:?}",
                        s.method()
                    ));
                }
                other => return bad(format!("rope_scaling type `{other}` is not supported")),
            }
        }
        Ok(())
    }

    /// Rotary inverse frequencies, `head_size / 2` of them, with `rope_scaling` applied.
    pub fn inv_freq(&self) -> Vec<f64> {
        let hd = self.head_size();
        let base: Vec<f64> = (0..hd / 2)
            .map(|i| self.rope_theta.powf(-((2 * i) as f64) / hd as f64))
            .collect();
        let Some(s) = &self.rope_scaling else {
            return base;
        };
        let factor = s.factor.unwrap_or(1.0);
        match s.method() {
            "linear" => base.iter().map(|f| f / factor).collect(),
            "llama3" => {
                let low = s.low_freq_factor.unwrap_or(1.0);
                let high = s.high_freq_factor.unwrap_or(4.0);
                let old_ctx = s.original_max_position_embeddings.unwrap_or(8192.0);
                let low_wavelen = old_ctx / low;
                let high_wavelen = old_ctx / high;
                base.iter()
                    .map(|&f| {
                        let wavelen = 2.0 * std::f64::consts::PI / f;
                        if wavelen < high_wavelen {
                            f
                        } else if wavelen > low_wavelen {
                            f / factor
                        } else {
                            let smooth = (old_ctx / wavelen - low) / (high - low);
                            (1.0 - smooth) * f / factor + smooth * f
                        }
                    })
                    .collect()
            }
            _ => base,
        }
    }
}
