//! The learner: the trainable model, its optimiser, and the SFT and policy-gradient update
//! steps (GRPO and its relatives with one advantage per trajectory, PPO with one per token).

use std::path::Path;

use agentrl_core::{Error, Result, Trajectory};
use agentrl_policy::llama::{
    Llama, LoraConfig, adapter_weights, load_adapter_weights, save_adapters,
};
use agentrl_policy::{GptConfig, NamedWeights, PolicyModel, snapshot_weights};
use tch::{Device, Kind, Tensor, nn, nn::OptimizerConfig};

pub use crate::batch::{PackedBatch, pack};
use crate::batch::{pack_chunks, trained_tokens};
pub use crate::model_spec::ModelSpec;
use agentrl_policy::checkpoint;

/// Statistics of one update.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct UpdateStats {
    /// Loss value.
    pub loss: f64,
    /// Mean k3 KL to the reference (0 when disabled).
    pub kl: f64,
    /// Share of tokens whose ratio was clipped.
    pub clip_fraction: f64,
    /// Mean entropy of the policy on trained tokens.
    pub entropy: f64,
    /// Global gradient norm before clipping.
    pub grad_norm: f64,
    /// Trained tokens.
    pub tokens: usize,
}

/// Advantages of a policy-gradient step, for the batch's trajectories in order.
#[derive(Debug, Clone, Copy)]
pub enum Advantages<'a> {
    /// One per trajectory, applied to all of its policy tokens (GRPO, Dr. GRPO, RLOO).
    PerTrajectory(&'a [f64]),
    /// One per next-token position of each trajectory (`num_tokens - 1` values, as
    /// [`crate::advantage::gae`] gives them); only policy positions count.
    PerToken(&'a [Vec<f32>]),
}

/// GRPO hyper-parameters used by [`Learner::grpo_step`].
#[derive(Debug, Clone, Copy)]
pub struct GrpoParams {
    /// Clip range of the ratio.
    pub clip_eps: f64,
    /// k3 KL weight (0: no reference forward).
    pub kl_coef: f64,
    /// Sampling temperature the logprobs were taken at.
    pub temperature: f64,
    /// Max gradient norm.
    pub grad_clip: f64,
}

/// The trainable model with its optimiser and (optionally) a frozen reference copy. The model
/// is a [`agentrl_policy::TinyGpt`] or a Llama-family decoder, fully trainable or with LoRA adapters (then only
/// the adapters train, and only they travel to the rollout policy).
pub struct Learner {
    vs: nn::VarStore,
    model: Box<dyn PolicyModel>,
    spec: ModelSpec,
    opt: nn::Optimizer,
    reference: Option<(nn::VarStore, Box<dyn PolicyModel>)>,
    device: Device,
    micro_batch: usize,
}

impl Learner {
    /// A freshly initialised [`agentrl_policy::TinyGpt`] (seeded through `tch::manual_seed` by the caller).
    pub fn new(config: GptConfig, lr: f64, device: Device) -> Result<Self> {
        let spec = ModelSpec::Tiny(config);
        let vs = nn::VarStore::new(device);
        let model = spec.build(&vs)?;
        Self::with_model(vs, model, spec, lr)
    }

    /// A Llama-family model already loaded into `vs`: fully trainable, or, with `lora`, frozen
    /// with LoRA adapters attached (the adapters are then the only trainable variables).
    pub fn llama(
        vs: nn::VarStore,
        mut model: Llama,
        lora: Option<&LoraConfig>,
        lr: f64,
    ) -> Result<Self> {
        if let Some(cfg) = lora {
            model.attach_lora(&vs, cfg)?;
        }
        let spec = ModelSpec::Llama {
            config: Box::new(model.config().clone()),
            lora: lora.cloned(),
            dtype: model.dtype(),
        };
        Self::with_model(vs, Box::new(model), spec, lr)
    }

    fn with_model(
        vs: nn::VarStore,
        model: Box<dyn PolicyModel>,
        spec: ModelSpec,
        lr: f64,
    ) -> Result<Self> {
        let opt = nn::adamw(0.9, 0.95, 0.01)
            .build(&vs, lr)
            .map_err(|e| Error::Trainer(format!("building AdamW: {e}")))?;
        Ok(Learner {
            device: vs.device(),
            vs,
            model,
            spec,
            opt,
            reference: None,
            micro_batch: 0,
        })
    }

    /// What the model is (its shape, and LoRA settings).
    pub fn spec(&self) -> &ModelSpec {
        &self.spec
    }

    /// The model's variables.
    pub fn var_store(&self) -> &nn::VarStore {
        &self.vs
    }

    /// Sets the learning rate.
    pub fn set_lr(&mut self, lr: f64) {
        self.opt.set_lr(lr);
    }

    /// Splits each update into forward/backward passes of at most `rows` trajectories,
    /// accumulating gradients (0: the whole batch at once). Bounds memory for large vocabularies.
    pub fn set_micro_batch(&mut self, rows: usize) {
        self.micro_batch = rows;
    }

    /// Deep copy of the weights the rollout policy needs after an update: every variable, or
    /// only the adapters of a LoRA model (its base never changes).
    pub fn weights(&self) -> NamedWeights {
        if self.spec.lora().is_some() {
            adapter_weights(&self.vs)
        } else {
            snapshot_weights(&self.vs)
        }
    }

    /// A new VarStore and model holding a copy of the current weights (for a rollout policy).
    pub fn clone_model(&self) -> Result<(nn::VarStore, Box<dyn PolicyModel>)> {
        let mut vs = nn::VarStore::new(self.device);
        let model = self.spec.build(&vs)?;
        vs.copy(&self.vs)
            .map_err(|e| Error::Trainer(format!("copying weights: {e}")))?;
        Ok((vs, model))
    }

    /// Freezes a copy of the current weights as the KL reference.
    pub fn freeze_reference(&mut self) -> Result<()> {
        let (mut vs, model) = self.clone_model()?;
        vs.freeze();
        self.reference = Some((vs, model));
        Ok(())
    }

    /// Saves the trained weights as safetensors, atomically: every variable, or for a LoRA
    /// model only the adapters (PEFT names).
    pub fn save(&self, path: &Path) -> Result<()> {
        if self.spec.lora().is_some() {
            checkpoint::save_tensors(&adapter_weights(&self.vs), path)
        } else {
            checkpoint::save_var_store(&self.vs, path)
        }
    }

    /// Loads weights saved by [`Learner::save`].
    pub fn load(&mut self, path: &Path) -> Result<()> {
        if self.spec.lora().is_some() {
            return load_adapter_weights(&self.vs, path).map(|_| ());
        }
        self.vs
            .load(path)
            .map_err(|e| Error::Trainer(format!("loading checkpoint {}: {e}", path.display())))
    }

    /// Writes a LoRA model's adapters to `dir` in the PEFT layout (`adapter_model.safetensors`,
    /// `adapter_config.json` naming `base_model`); an error for other models.
    pub fn save_peft(&self, dir: &Path, base_model: &str) -> Result<()> {
        let cfg = self
            .spec
            .lora()
            .ok_or_else(|| Error::Trainer("only a LoRA model has adapters to save".into()))?;
        save_adapters(&self.vs, cfg, dir, base_model)
    }

    /// The batch packed into micro-batches (one when `micro_batch` is 0), with the total count
    /// of trained tokens (the loss denominator, at least 1).
    fn packed_chunks(&self, batch: &[&Trajectory]) -> (Vec<(usize, PackedBatch)>, f64) {
        let chunks = pack_chunks(batch, self.micro_batch, self.device);
        let denom = trained_tokens(&chunks);
        (chunks, denom)
    }

    /// After the micro-batches' `backward` calls: global grad norm, clipping, AdamW step.
    fn finish_step(&mut self, grad_clip: f64) -> f64 {
        clip_and_step(&self.vs, &mut self.opt, grad_clip)
    }

    /// One behaviour-cloning step: mean cross-entropy over policy tokens.
    pub fn sft_step(&mut self, batch: &[&Trajectory], grad_clip: f64) -> UpdateStats {
        let (chunks, denom) = self.packed_chunks(batch);
        self.opt.zero_grad();
        let mut stats = UpdateStats::default();
        for (_, packed) in &chunks {
            let (logp, entropy) = self.model.token_logprobs(&packed.ids, 1.0);
            let loss = -(&logp * &packed.mask).sum(Kind::Float) / denom;
            loss.backward();
            stats.loss += loss.double_value(&[]);
            stats.entropy += tch::no_grad(|| (entropy * &packed.mask).sum(Kind::Float) / denom)
                .double_value(&[]);
            stats.tokens += packed.tokens;
        }
        stats.grad_norm = self.finish_step(grad_clip);
        stats
    }

    /// One GRPO step: [`Learner::policy_step`] with one advantage per trajectory.
    pub fn grpo_step(
        &mut self,
        batch: &[&Trajectory],
        advantages: &[f64],
        p: GrpoParams,
    ) -> UpdateStats {
        self.policy_step(batch, Advantages::PerTrajectory(advantages), p)
    }

    /// One policy-gradient step: token-level clipped surrogate over policy tokens, ratio
    /// against the rollout logprobs, optional k3 KL to the reference. `advantages` aligns with
    /// `batch`.
    pub fn policy_step(
        &mut self,
        batch: &[&Trajectory],
        advantages: Advantages<'_>,
        p: GrpoParams,
    ) -> UpdateStats {
        let (chunks, denom) = self.packed_chunks(batch);
        self.opt.zero_grad();
        let mut stats = UpdateStats::default();
        for (first, packed) in &chunks {
            let rows = packed.ids.size()[0] as usize;
            let adv = match advantages {
                Advantages::PerTrajectory(all) => {
                    let adv: Vec<f32> = all
                        .iter()
                        .skip(*first)
                        .take(rows)
                        .map(|&a| a as f32)
                        .collect();
                    Tensor::from_slice(&adv).view([-1, 1]).to(self.device)
                }
                Advantages::PerToken(all) => crate::batch::padded(
                    &all[*first..(*first + rows).min(all.len())],
                    packed.mask.size()[1],
                    self.device,
                ),
            };
            let (logp, entropy) = self.model.token_logprobs(&packed.ids, p.temperature);
            let mask = &packed.mask;
            let ratio = (&logp - &packed.old_logprobs).exp();
            let surr1 = &ratio * &adv;
            let surr2 = ratio.clamp(1.0 - p.clip_eps, 1.0 + p.clip_eps) * &adv;
            let pg = -surr1.minimum(&surr2);
            let mut loss = (&pg * mask).sum(Kind::Float) / denom;
            if p.kl_coef > 0.0
                && let Some((_, reference)) = &self.reference
            {
                let ref_logp =
                    tch::no_grad(|| reference.token_logprobs(&packed.ids, p.temperature).0);
                let d = &ref_logp - &logp;
                let k3 = d.exp() - &d - 1.0;
                let kl = (&k3 * mask).sum(Kind::Float) / denom;
                stats.kl += kl.double_value(&[]);
                loss = &loss + kl * p.kl_coef;
            }
            loss.backward();
            tch::no_grad(|| {
                let c = (&ratio - 1.0).abs().gt(p.clip_eps).to_kind(Kind::Float);
                stats.clip_fraction += ((c * mask).sum(Kind::Float) / denom).double_value(&[]);
                stats.entropy += ((entropy * mask).sum(Kind::Float) / denom).double_value(&[]);
            });
            stats.loss += loss.double_value(&[]);
            stats.tokens += packed.tokens;
        }
        stats.grad_norm = self.finish_step(p.grad_clip);
        stats
    }
}

/// The global norm of the gradients of `vs`'s trainable variables; when it is finite, clips
/// them to `grad_clip` and takes an optimiser step. Returns the norm (0 without gradients).
pub(crate) fn clip_and_step(vs: &nn::VarStore, opt: &mut nn::Optimizer, grad_clip: f64) -> f64 {
    let grad_norm = tch::no_grad(|| {
        let norms: Vec<Tensor> = vs
            .trainable_variables()
            .iter()
            .map(|v| v.grad())
            .filter(|g| g.defined())
            .map(|g| g.norm().square())
            .collect();
        (!norms.is_empty()).then(|| {
            Tensor::stack(&norms, 0)
                .sum(Kind::Float)
                .sqrt()
                .double_value(&[])
        })
    });
    let Some(grad_norm) = grad_norm else {
        return 0.0;
    };
    if grad_norm.is_finite() {
        opt.clip_grad_norm(grad_clip);
        opt.step();
    }
    grad_norm
}
