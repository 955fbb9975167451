//! LoRA adapters for [`Llama`](crate::llama::Llama): a low-rank update `(alpha / r) · B · A` beside chosen frozen
//! projections, so training touches `r · (in + out)` values per projection instead of
//! `in · out`.
//!
//! Each adapted projection computes `W x + b + (alpha / r) · B (A x)` with `A` `[r, in]`
//! (Kaiming-uniform, as PEFT initialises it) and `B` `[out, r]` (zeros, so a fresh adapter
//! leaves the model unchanged). The adapter variables live in the model's VarStore under the
//! names PEFT saves them with (`base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight`),
//! so [`crate::llama::peft`] writes and reads them without renaming. Attaching and merging
//! them is [`crate::llama::adapters`].

use agentrl_core::{Error, Result};
use serde::{Deserialize, Serialize};
use tch::{Tensor, nn, nn::Module};

/// Prefix PEFT puts before the base model's own tensor names.
pub const PEFT_PREFIX: &str = "base_model.model";

/// The projections an adapter can target, by their Hugging Face module names.
pub const TARGET_MODULES: [&str; 7] = [
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "gate_proj",
    "up_proj",
    "down_proj",
];

/// Rank, scale and targets of a set of LoRA adapters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoraConfig {
    /// Rank `r` of each update.
    pub r: usize,
    /// Scale numerator: the update is multiplied by `alpha / r`.
    pub alpha: f64,
    /// Hugging Face module names to adapt (a subset of [`TARGET_MODULES`]).
    #[serde(default = "default_targets")]
    pub targets: Vec<String>,
}

fn default_targets() -> Vec<String> {
    ["q_proj", "k_proj", "v_proj", "o_proj"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

impl LoraConfig {
    /// Rank `r` and `alpha` on the attention projections `q_proj`, `k_proj`, `v_proj`, `o_proj`.
    pub fn new(r: usize, alpha: f64) -> Self {
        LoraConfig {
            r,
            alpha,
            targets: default_targets(),
        }
    }

    /// The factor `alpha / r` applied to `B · A`.
    pub fn scale(&self) -> f64 {
        self.alpha / self.r as f64
    }

    /// Checks the rank, the scale and that every target names a projection.
    pub fn validate(&self) -> Result<()> {
        if self.r == 0 {
            return Err(Error::Config("lora.r must be at least 1".into()));
        }
        if !(self.alpha.is_finite() && self.alpha > 0.0) {
            return Err(Error::Config(format!(
                "lora.alpha must be a positive number, got {}",
                self.alpha
            )));
        }
        if self.targets.is_empty() {
            return Err(Error::Config("lora.targets is empty".into()));
        }
        for t in &self.targets {
            if !TARGET_MODULES.contains(&t.as_str()) {
                return Err(Error::Config(format!(
                    "lora.targets has `{t}`; the projections are {TARGET_MODULES:?}"
                )));
            }
        }
        Ok(())
    }
}

/// Whether a variable name belongs to a LoRA adapter (rather than to the base model).
pub fn is_adapter_name(name: &str) -> bool {
    name.starts_with(PEFT_PREFIX) && (name.contains(".lora_A.") || name.contains(".lora_B."))
}

/// One adapter: `A` `[r, in]`, `B` `[out, r]`, and the scale `alpha / r`.
#[derive(Debug)]
pub(super) struct LoraLinear {
    a: Tensor,
    b: Tensor,
    scale: f64,
}

/// A linear projection of the decoder, with an optional LoRA adapter beside it.
#[derive(Debug)]
pub(super) struct Proj {
    /// Hugging Face name of the module (`model.layers.0.self_attn.q_proj`).
    name: String,
    linear: nn::Linear,
    lora: Option<LoraLinear>,
}

impl Proj {
    /// A plain linear layer under `path` (named `{path}.weight`, `{path}.bias`).
    pub(super) fn linear(path: nn::Path, in_dim: i64, out_dim: i64, c: nn::LinearConfig) -> Self {
        let name = path.components().collect::<Vec<_>>().join(".");
        Proj {
            name,
            linear: nn::linear(path, in_dim, out_dim, c),
            lora: None,
        }
    }

    /// The module's Hugging Face name (`model.layers.0.self_attn.q_proj`).
    pub(super) fn name(&self) -> &str {
        &self.name
    }

    /// The module name's last part (`q_proj`, ...).
    pub(super) fn kind(&self) -> &str {
        self.name.rsplit('.').next().unwrap_or("")
    }

    /// Creates this projection's adapter variables under their PEFT names in `root`: `A`
    /// drawn from libtorch's global generator when `random`, else zero.
    pub(super) fn attach(&mut self, root: &nn::Path, cfg: &LoraConfig, random: bool) {
        let mut p = root / "base_model" / "model";
        for c in self.name.split('.') {
            p = &p / c;
        }
        let (out_dim, in_dim) = self.linear.ws.size2().unwrap_or((1, 1));
        let r = cfg.r as i64;
        // PEFT's default: kaiming_uniform_(a = sqrt(5)), i.e. U(-1/sqrt(in), 1/sqrt(in)).
        let bound = 1.0 / (in_dim as f64).sqrt();
        let a_init = if random {
            nn::Init::Uniform {
                lo: -bound,
                up: bound,
            }
        } else {
            nn::Init::Const(0.0)
        };
        let a = (&p / "lora_A").var("weight", &[r, in_dim], a_init);
        let b = (&p / "lora_B").var("weight", &[out_dim, r], nn::Init::Const(0.0));
        self.lora = Some(LoraLinear {
            a,
            b,
            scale: cfg.scale(),
        });
    }

    /// `W + scale · B · A` (or a copy of `W` without an adapter).
    pub(super) fn merged_weight(&self) -> Tensor {
        tch::no_grad(|| match &self.lora {
            Some(l) => {
                let ws = &self.linear.ws;
                ws + (l.b.matmul(&l.a) * l.scale).to_kind(ws.kind())
            }
            None => self.linear.ws.copy(),
        })
    }

    /// Folds the adapter into the base weight (`W ← W + scale · B · A`) and detaches it; a
    /// projection without an adapter is left as it is.
    pub(super) fn merge(&mut self) {
        if self.lora.is_some() {
            let merged = self.merged_weight();
            tch::no_grad(|| self.linear.ws.copy_(&merged));
            self.lora = None;
        }
    }
}

impl Module for Proj {
    fn forward(&self, x: &Tensor) -> Tensor {
        let y = self.linear.forward(x);
        match &self.lora {
            // The adapter computes in its own type (f32) on a base in bf16.
            Some(l) => {
                let update = x
                    .to_kind(l.a.kind())
                    .linear::<Tensor>(&l.a, None)
                    .linear::<Tensor>(&l.b, None)
                    * l.scale;
                y + update.to_kind(x.kind())
            }
            None => y,
        }
    }
}
