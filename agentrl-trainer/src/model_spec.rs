//! What the learner trains: the tiny byte-level GPT or a Llama-family decoder (fully, or
//! through LoRA adapters), and how to build an identically named empty copy of it for the
//! rollout policy or the KL reference.

use agentrl_core::Result;
use agentrl_policy::llama::{Dtype, Llama, LlamaConfig, LoraConfig};
use agentrl_policy::{GptConfig, PolicyModel, TinyGpt};
use tch::nn;

/// The architecture of a learner's model.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelSpec {
    /// The tiny byte-level GPT.
    Tiny(GptConfig),
    /// A Llama-family decoder, with LoRA adapters when `lora` is set.
    Llama {
        /// The decoder's shape (boxed: it is much larger than the tiny GPT's).
        config: Box<LlamaConfig>,
        /// Adapter settings; `None` for full fine-tuning.
        lora: Option<LoraConfig>,
        /// The base weights' type.
        dtype: Dtype,
    },
}

impl ModelSpec {
    /// The LoRA settings, when the model trains through adapters.
    pub fn lora(&self) -> Option<&LoraConfig> {
        match self {
            ModelSpec::Llama { lora, .. } => lora.as_ref(),
            ModelSpec::Tiny(_) => None,
        }
    }

    /// A model with this spec's variables (same names and shapes as the learner's, adapters
    /// included) in `vs`, for weights copied in with `VarStore::copy`: a tiny GPT drawn at
    /// random, a Llama's matrices zero (see `Llama::new_to_fill`).
    pub fn build(&self, vs: &nn::VarStore) -> Result<Box<dyn PolicyModel>> {
        self.build_with(vs, true)
    }

    /// [`ModelSpec::build`] with every matrix and adapter zero, drawing nothing from libtorch's
    /// global generator (which a build may otherwise do in the middle of a run, at a moment
    /// that depends on the machine): for weights shared in right after.
    pub fn build_to_fill(&self, vs: &nn::VarStore) -> Result<Box<dyn PolicyModel>> {
        self.build_with(vs, false)
    }

    /// The model, its tiny GPT's matrices and adapters drawn at random (`random`) or zero.
    fn build_with(&self, vs: &nn::VarStore, random: bool) -> Result<Box<dyn PolicyModel>> {
        match self {
            ModelSpec::Tiny(config) if random => {
                Ok(Box::new(TinyGpt::new(&vs.root(), config.clone())?))
            }
            ModelSpec::Tiny(config) => {
                Ok(Box::new(TinyGpt::new_to_fill(&vs.root(), config.clone())?))
            }
            ModelSpec::Llama {
                config,
                lora,
                dtype,
            } => {
                // Its weights come from `VarStore::copy`; adapters are initialised as usual.
                let mut model = Llama::new_to_fill(&vs.root(), (**config).clone())?;
                if let Some(cfg) = lora {
                    if random {
                        model.attach_lora(vs, cfg)?;
                    } else {
                        model.attach_lora_to_fill(vs, cfg)?;
                    }
                }
                model.set_dtype(vs, *dtype);
                Ok(Box::new(model))
            }
        }
    }
}
