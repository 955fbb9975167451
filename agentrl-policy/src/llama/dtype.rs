//! [`Dtype`]: the floating-point type a Llama model's weights are held and computed in.
//!
//! `f32` is exact against the reference implementation; `bf16` halves the memory of weights and
//! KV cache and is what GPUs train and serve in, but on a CPU without bf16 arithmetic (no
//! AVX512-BF16) it computes several times slower than `f32` (`device::native_bf16`). In
//! `bf16`, RMSNorm statistics, rotary angles, logits, softmax and sampling stay in f32, and LoRA
//! adapters stay f32 (their inputs are cast), as in Hugging Face transformers and PEFT.

use std::fmt;
use std::str::FromStr;

use agentrl_core::Error;
use serde::{Deserialize, Serialize};

/// The weights' floating-point type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Dtype {
    /// 32-bit IEEE floats (the default; exact parity with transformers in f32).
    #[default]
    #[serde(rename = "f32", alias = "float32")]
    F32,
    /// bfloat16: 8 exponent bits like f32, 8 mantissa bits.
    #[serde(rename = "bf16", alias = "bfloat16")]
    Bf16,
}

impl Dtype {
    /// The name used in configs and on the command line (`f32`, `bf16`).
    pub fn name(self) -> &'static str {
        match self {
            Dtype::F32 => "f32",
            Dtype::Bf16 => "bf16",
        }
    }

    /// The tch kind of tensors in this dtype.
    #[cfg(feature = "tch")]
    pub fn kind(self) -> tch::Kind {
        match self {
            Dtype::F32 => tch::Kind::Float,
            Dtype::Bf16 => tch::Kind::BFloat16,
        }
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Dtype {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        match s.to_ascii_lowercase().as_str() {
            "f32" | "float32" | "fp32" => Ok(Dtype::F32),
            "bf16" | "bfloat16" => Ok(Dtype::Bf16),
            other => Err(Error::Config(format!(
                "dtype `{other}` is not known; use `f32` or `bf16`"
            ))),
        }
    }
}
