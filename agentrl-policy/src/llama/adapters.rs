//! The LoRA methods of [`Llama`]: attaching adapters to its projections, merging them into the
//! base weights, and exporting merged weights. The adapter layer itself is
//! [`crate::llama::lora`]; the PEFT files are [`crate::llama::peft`].

use agentrl_core::{Error, Result};
use tch::{Tensor, nn};

use super::lora::{LoraConfig, Proj};
use super::model::Llama;

impl Llama {
    fn projections_mut(&mut self) -> impl Iterator<Item = &mut Proj> {
        self.layers.iter_mut().flat_map(|l| {
            [
                &mut l.q_proj,
                &mut l.k_proj,
                &mut l.v_proj,
                &mut l.o_proj,
                &mut l.gate_proj,
                &mut l.up_proj,
                &mut l.down_proj,
            ]
        })
    }

    /// Freezes every variable of `vs` (the base model, `requires_grad = false`), then adds LoRA
    /// adapters to the projections `cfg.targets` names; the adapters are `vs`'s only trainable
    /// variables afterwards. `vs` must be the VarStore the model was built in.
    pub fn attach_lora(&mut self, vs: &nn::VarStore, cfg: &LoraConfig) -> Result<()> {
        self.attach_adapters(vs, cfg, true)
    }

    /// [`Llama::attach_lora`] with zero adapters, drawing nothing from libtorch's generator:
    /// for adapter weights copied or shared in right after.
    pub fn attach_lora_to_fill(&mut self, vs: &nn::VarStore, cfg: &LoraConfig) -> Result<()> {
        self.attach_adapters(vs, cfg, false)
    }

    /// [`Llama::attach_lora`], `A` drawn at random (`random`) or zero.
    fn attach_adapters(&mut self, vs: &nn::VarStore, cfg: &LoraConfig, random: bool) -> Result<()> {
        cfg.validate()?;
        if self.lora.is_some() {
            return Err(Error::Policy("this model already has LoRA adapters".into()));
        }
        for (_, var) in vs.variables() {
            let _ = var.set_requires_grad(false);
        }
        let root = vs.root();
        for proj in self.projections_mut() {
            if cfg.targets.iter().any(|t| t == proj.kind()) {
                proj.attach(&root, cfg, random);
            }
        }
        self.lora = Some(cfg.clone());
        Ok(())
    }

    /// The attached adapters' settings, if any.
    pub fn lora_config(&self) -> Option<&LoraConfig> {
        self.lora.as_ref()
    }

    /// Folds every adapter into its base weight (`W ← W + (alpha / r) · B · A`) and detaches
    /// the adapters; the model computes the same function afterwards, without the extra
    /// matmuls. The adapter variables stay in the VarStore, unused.
    pub fn merge_lora(&mut self) {
        for proj in self.projections_mut() {
            proj.merge();
        }
        self.lora = None;
    }

    /// The projection weights with the adapters folded in, by Hugging Face name
    /// (`model.layers.0.self_attn.q_proj.weight`), for exporting a merged checkpoint; the
    /// model itself is unchanged.
    pub fn merged_weights(&self) -> Vec<(String, Tensor)> {
        self.layers
            .iter()
            .flat_map(|l| {
                [
                    &l.q_proj,
                    &l.k_proj,
                    &l.v_proj,
                    &l.o_proj,
                    &l.gate_proj,
                    &l.up_proj,
                    &l.down_proj,
                ]
            })
            .map(|p| (format!("{}.weight", p.name()), p.merged_weight()))
            .collect()
    }
}
