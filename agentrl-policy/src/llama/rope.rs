//! Rotary position embeddings (RoPE) of Llama-family configs: where a `config.json` keeps them
//! (the `rope_parameters` block transformers 5 writes, or the older top-level `rope_theta` plus
//! `rope_scaling`), and the inverse frequencies of each scaling type (`default`, `linear`,
//! `dynamic`, `yarn`, `llama3`) as transformers defines them.
//!
//! Anything in a RoPE block that would change the frequencies and that is not implemented here
//! (another type, an unknown field, a partial rotary factor, one block per layer type) is an
//! error naming the key, never a silent default.

use agentrl_core::{Error, Result};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};

/// The RoPE base when a config names none.
pub const DEFAULT_ROPE_THETA: f64 = 10_000.0;

/// The RoPE types whose frequencies this module computes.
pub const SUPPORTED_ROPE_TYPES: [&str; 5] = ["default", "linear", "dynamic", "yarn", "llama3"];

/// Keys any RoPE block may hold.
const COMMON_KEYS: [&str; 4] = ["rope_type", "type", "rope_theta", "partial_rotary_factor"];

/// The type-specific keys of a RoPE block (transformers' required and optional keys).
fn type_keys(rope_type: &str) -> Option<&'static [&'static str]> {
    match rope_type {
        "default" => Some(&[]),
        "linear" | "dynamic" => Some(&["factor"]),
        "yarn" => Some(&[
            "factor",
            "original_max_position_embeddings",
            "attention_factor",
            "beta_fast",
            "beta_slow",
            "mscale",
            "mscale_all_dim",
            "truncate",
        ]),
        "llama3" => Some(&[
            "factor",
            "low_freq_factor",
            "high_freq_factor",
            "original_max_position_embeddings",
        ]),
        _ => None,
    }
}

/// Rotary-embedding scaling, as written in `config.json` under `rope_parameters` (transformers
/// 5) or `rope_scaling` (older); the base itself lives in [`super::LlamaConfig::rope_theta`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RopeScaling {
    /// Scaling method: one of [`SUPPORTED_ROPE_TYPES`].
    #[serde(default)]
    pub rope_type: Option<String>,
    /// Older spelling of `rope_type`.
    #[serde(default, rename = "type")]
    pub legacy_type: Option<String>,
    /// Frequency division factor (linear, dynamic, yarn, llama3).
    #[serde(default)]
    pub factor: Option<f64>,
    /// Llama 3: wavelength factor below which frequencies are fully scaled.
    #[serde(default)]
    pub low_freq_factor: Option<f64>,
    /// Llama 3: wavelength factor above which frequencies are kept.
    #[serde(default)]
    pub high_freq_factor: Option<f64>,
    /// Llama 3 and YaRN: context length the model was pre-trained with.
    #[serde(default)]
    pub original_max_position_embeddings: Option<f64>,
    /// YaRN: explicit scale of cos/sin (else derived from `factor`, `mscale`, `mscale_all_dim`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention_factor: Option<f64>,
    /// YaRN: rotations bounding the extrapolated band (default 32).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beta_fast: Option<f64>,
    /// YaRN: rotations bounding the interpolated band (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beta_slow: Option<f64>,
    /// YaRN: numerator multiplier of the derived attention factor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mscale: Option<f64>,
    /// YaRN: denominator multiplier of the derived attention factor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mscale_all_dim: Option<f64>,
    /// YaRN: whether the correction range is rounded to whole dimensions (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncate: Option<bool>,
}

impl RopeScaling {
    /// The scaling method's name (`rope_type`, else `type`, else `"default"`).
    pub fn method(&self) -> &str {
        self.rope_type
            .as_deref()
            .or(self.legacy_type.as_deref())
            .unwrap_or("default")
    }

    /// Checks the fields the method needs; the message names the method and the bad field.
    pub fn validate(&self) -> std::result::Result<(), String> {
        let positive = |name: &str, v: Option<f64>| match v {
            Some(v) if v > 0.0 && v.is_finite() => Ok(()),
            Some(v) => Err(format!(
                "rope `{}`: {name} {v} must be positive",
                self.method()
            )),
            None => Err(format!("rope `{}`: {name} is missing", self.method())),
        };
        match self.method() {
            "default" => Ok(()),
            "linear" | "dynamic" => positive("factor", self.factor),
            "llama3" => {
                positive("factor", self.factor)?;
                positive("low_freq_factor", self.low_freq_factor)?;
                positive("high_freq_factor", self.high_freq_factor)?;
                positive(
                    "original_max_position_embeddings",
                    self.original_max_position_embeddings,
                )?;
                if self.high_freq_factor <= self.low_freq_factor {
                    return Err(
                        "rope `llama3`: high_freq_factor must exceed low_freq_factor".into(),
                    );
                }
                Ok(())
            }
            "yarn" => {
                positive(
                    "original_max_position_embeddings",
                    self.original_max_position_embeddings,
                )?;
                for (name, v) in [
                    ("factor", self.factor),
                    ("attention_factor", self.attention_factor),
                ] {
                    if v.is_some() {
                        positive(name, v)?;
                    }
                }
                Ok(())
            }
            other => Err(format!(
                "rope type `{other}` is not supported (only {SUPPORTED_ROPE_TYPES:?})"
            )),
        }
    }
}

/// The RoPE of a `config.json`: its base and its scaling (`None` for plain RoPE).
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigRope {
    /// The base of the rotary frequencies.
    pub theta: f64,
    /// The scaling block, if its type is not `default`.
    pub scaling: Option<RopeScaling>,
}

/// Reads the RoPE of a parsed `config.json` (`root`), from `rope_parameters` (transformers 5)
/// or the older `rope_scaling`, falling back to the top-level `rope_theta`; `origin` names the
/// file in errors. A `yarn` or `llama3` block without `original_max_position_embeddings` takes
/// the top-level one, else `max_position_embeddings`, as transformers does.
pub fn read_config_rope(
    root: &Map<String, Json>,
    max_position_embeddings: usize,
    origin: &str,
) -> Result<ConfigRope> {
    let bad = |m: String| Error::Config(format!("{origin}: {m}"));
    let block = rope_block(root, origin)?;
    let empty = Map::new();
    let block = block.as_ref().unwrap_or(&empty);
    let theta = match number(block, "rope_theta", origin)? {
        Some(t) => t,
        None => number(root, "rope_theta", origin)?.unwrap_or(DEFAULT_ROPE_THETA),
    };
    let partial = match number(block, "partial_rotary_factor", origin)? {
        Some(p) => Some(p),
        None => number(root, "partial_rotary_factor", origin)?,
    };
    if let Some(p) = partial
        && p != 1.0
    {
        return Err(bad(format!(
            "partial_rotary_factor {p} is not supported (only 1: RoPE on the whole head)"
        )));
    }
    let rope_type = rope_type_of(block, origin)?;
    let Some(specific) = type_keys(&rope_type) else {
        return Err(bad(format!(
            "rope type `{rope_type}` is not supported (only {SUPPORTED_ROPE_TYPES:?})"
        )));
    };
    if let Some(key) = block
        .keys()
        .find(|k| !COMMON_KEYS.contains(&k.as_str()) && !specific.contains(&k.as_str()))
    {
        return Err(bad(format!(
            "rope key `{key}` is not understood for rope type `{rope_type}` (known: {specific:?})"
        )));
    }
    if rope_type == "default" {
        return Ok(ConfigRope {
            theta,
            scaling: None,
        });
    }
    let mut scaling: RopeScaling = serde_json::from_value(Json::Object(block.clone()))
        .map_err(|e| bad(format!("rope block: {e}")))?;
    if matches!(rope_type.as_str(), "yarn" | "llama3")
        && scaling.original_max_position_embeddings.is_none()
    {
        scaling.original_max_position_embeddings = Some(
            number(root, "original_max_position_embeddings", origin)?
                .unwrap_or(max_position_embeddings as f64),
        );
    }
    scaling.validate().map_err(bad)?;
    Ok(ConfigRope {
        theta,
        scaling: Some(scaling),
    })
}

/// The RoPE block of `root`: `rope_parameters` or `rope_scaling` (an error when both are given
/// and differ), unwrapped from a per-layer-type nesting whose only layer type is
/// `full_attention`.
fn rope_block(root: &Map<String, Json>, origin: &str) -> Result<Option<Map<String, Json>>> {
    let object = |key: &str| -> Result<Option<&Map<String, Json>>> {
        match root.get(key) {
            None | Some(Json::Null) => Ok(None),
            Some(Json::Object(o)) => Ok(Some(o)),
            Some(other) => Err(Error::Config(format!(
                "{origin}: `{key}` must be an object, got {other}"
            ))),
        }
    };
    let block = match (object("rope_parameters")?, object("rope_scaling")?) {
        (Some(p), Some(s)) if p != s => {
            return Err(Error::Config(format!(
                "{origin}: both `rope_parameters` and `rope_scaling` are given and they differ"
            )));
        }
        (Some(b), _) | (None, Some(b)) => b,
        (None, None) => return Ok(None),
    };
    let nested: Vec<&String> = block
        .iter()
        .filter(|(_, v)| v.is_object())
        .map(|(k, _)| k)
        .collect();
    if nested.is_empty() {
        return Ok(Some(block.clone()));
    }
    match (nested.as_slice(), block.len()) {
        ([only], 1) if only.as_str() == "full_attention" => Ok(block
            .get("full_attention")
            .and_then(Json::as_object)
            .cloned()),
        _ => Err(Error::Config(format!(
            "{origin}: `rope_parameters` holds one RoPE block per layer type ({nested:?}); \
             per-layer-type RoPE is not supported"
        ))),
    }
}

/// The `rope_type` (or legacy `type`) string of a block, `"default"` when absent.
fn rope_type_of(block: &Map<String, Json>, origin: &str) -> Result<String> {
    for key in ["rope_type", "type"] {
        match block.get(key) {
            None | Some(Json::Null) => continue,
            Some(Json::String(s)) => return Ok(s.clone()),
            Some(other) => {
                return Err(Error::Config(format!(
                    "{origin}: rope `{key}` must be a string, got {other}"
                )));
            }
        }
    }
    Ok("default".to_string())
}

/// The number under `key` in `map`, `None` when absent or null; any other value is an error.
fn number(map: &Map<String, Json>, key: &str, origin: &str) -> Result<Option<f64>> {
    match map.get(key) {
        None | Some(Json::Null) => Ok(None),
        Some(v) => v
            .as_f64()
            .map(Some)
            .ok_or_else(|| Error::Config(format!("{origin}: `{key}` must be a number, got {v}"))),
    }
}

/// Rotary inverse frequencies and the scale transformers applies to cos and sin.
#[derive(Debug, Clone, PartialEq)]
pub struct RopeFrequencies {
    /// One inverse frequency per pair of head dimensions (`head_dim / 2` of them).
    pub inv_freq: Vec<f64>,
    /// Multiplies cos and sin (YaRN's attention factor; 1 for the other types).
    pub attention_scaling: f64,
}

/// The unscaled inverse frequencies `theta^(-2i/dim)` for `i < dim / 2`.
pub fn default_inv_freq(theta: f64, dim: usize) -> Vec<f64> {
    (0..dim / 2)
        .map(|i| theta.powf(-((2 * i) as f64) / dim as f64))
        .collect()
}

/// The frequencies of RoPE with base `theta` over `dim` head dimensions under `scaling`, for a
/// model whose context is `max_position_embeddings` long (transformers' `rope_init_fn`s).
pub fn rope_frequencies(
    theta: f64,
    dim: usize,
    scaling: Option<&RopeScaling>,
    max_position_embeddings: usize,
) -> RopeFrequencies {
    let plain = |inv_freq| RopeFrequencies {
        inv_freq,
        attention_scaling: 1.0,
    };
    let Some(s) = scaling else {
        return plain(default_inv_freq(theta, dim));
    };
    let factor = s.factor.unwrap_or(1.0);
    match s.method() {
        "linear" => plain(
            default_inv_freq(theta, dim)
                .iter()
                .map(|f| f / factor)
                .collect(),
        ),
        "dynamic" => plain(dynamic_inv_freq(
            theta,
            dim,
            factor,
            max_position_embeddings,
        )),
        "llama3" => plain(llama3_inv_freq(theta, dim, s)),
        "yarn" => yarn_frequencies(theta, dim, s, max_position_embeddings),
        _ => plain(default_inv_freq(theta, dim)),
    }
}

/// Dynamic NTK: the base grows with the sequence length beyond `max_position_embeddings`.
/// Sequences never exceed the model's context here, so the length is that context and the
/// base stays `theta` (transformers' frequencies at initialisation and below the context).
fn dynamic_inv_freq(
    theta: f64,
    dim: usize,
    factor: f64,
    max_position_embeddings: usize,
) -> Vec<f64> {
    let ctx = max_position_embeddings as f64;
    let seq_len = ctx;
    let exponent = dim as f64 / (dim as f64 - 2.0);
    let base = theta * (factor * seq_len / ctx - (factor - 1.0)).powf(exponent);
    default_inv_freq(base, dim)
}

/// Llama 3.1: long wavelengths divided by `factor`, short ones kept, a smooth blend between.
fn llama3_inv_freq(theta: f64, dim: usize, s: &RopeScaling) -> Vec<f64> {
    let factor = s.factor.unwrap_or(1.0);
    let low = s.low_freq_factor.unwrap_or(1.0);
    let high = s.high_freq_factor.unwrap_or(4.0);
    let old_ctx = s.original_max_position_embeddings.unwrap_or(8192.0);
    let low_wavelen = old_ctx / low;
    let high_wavelen = old_ctx / high;
    default_inv_freq(theta, dim)
        .into_iter()
        .map(|f| {
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

/// YaRN's cos/sin scale for a context extended `factor` times (`get_mscale` in transformers).
fn yarn_mscale(factor: f64, mscale: f64) -> f64 {
    if factor <= 1.0 {
        1.0
    } else {
        0.1 * mscale * factor.ln() + 1.0
    }
}

/// YaRN: interpolated frequencies below the `beta_slow` band, extrapolated ones above
/// `beta_fast`, a linear ramp between; cos/sin scaled by the attention factor.
fn yarn_frequencies(
    theta: f64,
    dim: usize,
    s: &RopeScaling,
    max_position_embeddings: usize,
) -> RopeFrequencies {
    let old_ctx = s
        .original_max_position_embeddings
        .unwrap_or(max_position_embeddings as f64);
    let factor = s.factor.unwrap_or(max_position_embeddings as f64 / old_ctx);
    let nonzero = |v: Option<f64>| v.filter(|v| *v != 0.0);
    let attention_scaling = match (
        s.attention_factor,
        nonzero(s.mscale),
        nonzero(s.mscale_all_dim),
    ) {
        (Some(a), _, _) => a,
        (None, Some(m), Some(m_all)) => yarn_mscale(factor, m) / yarn_mscale(factor, m_all),
        (None, _, _) => yarn_mscale(factor, 1.0),
    };
    let beta_fast = nonzero(s.beta_fast).unwrap_or(32.0);
    let beta_slow = nonzero(s.beta_slow).unwrap_or(1.0);
    let d = dim as f64;
    let correction_dim = |rotations: f64| {
        d * (old_ctx / (rotations * 2.0 * std::f64::consts::PI)).ln() / (2.0 * theta.ln())
    };
    let (mut low, mut high) = (correction_dim(beta_fast), correction_dim(beta_slow));
    if s.truncate.unwrap_or(true) {
        (low, high) = (low.floor(), high.ceil());
    }
    let (low, mut high) = (low.max(0.0), high.min(d - 1.0));
    if low == high {
        high += 0.001;
    }
    let inv_freq = default_inv_freq(theta, dim)
        .into_iter()
        .enumerate()
        .map(|(i, extrapolated)| {
            let ramp = ((i as f64 - low) / (high - low)).clamp(0.0, 1.0);
            let keep = 1.0 - ramp;
            extrapolated / factor * (1.0 - keep) + extrapolated * keep
        })
        .collect();
    RopeFrequencies {
        inv_freq,
        attention_scaling,
    }
}

#[cfg(test)]
mod tests;
