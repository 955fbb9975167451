//! The learner: the trainable model, its optimiser, and the SFT and GRPO update steps.

use std::path::Path;

use agentrl_core::{Error, Result, Trajectory};
use agentrl_policy::{GptConfig, NamedWeights, TinyGpt, snapshot_weights};
use tch::{Device, Kind, Tensor, nn, nn::OptimizerConfig};

use crate::checkpoint;

/// Trajectories packed into right-padded tensors.
pub struct PackedBatch {
    /// Token ids `[B, T]`.
    pub ids: Tensor,
    /// 1 where the *next* token is policy-generated, `[B, T-1]`.
    pub mask: Tensor,
    /// Sampling logprobs of the next tokens, `[B, T-1]`.
    pub old_logprobs: Tensor,
    /// Number of trained tokens.
    pub tokens: usize,
}

/// Packs trajectories (right padding with id 0, masked out).
pub fn pack(trajectories: &[&Trajectory], device: Device) -> PackedBatch {
    let b = trajectories.len();
    let t = trajectories
        .iter()
        .map(|x| x.num_tokens())
        .max()
        .unwrap_or(2)
        .max(2);
    let mut ids = vec![0i64; b * t];
    let mut mask = vec![0f32; b * (t - 1)];
    let mut old = vec![0f32; b * (t - 1)];
    let mut tokens = 0;
    for (row, traj) in trajectories.iter().enumerate() {
        let tok = traj.token_ids();
        let m = traj.loss_mask();
        let lp = traj.sampling_logprobs();
        for (j, &id) in tok.iter().enumerate() {
            ids[row * t + j] = id as i64;
        }
        for j in 1..tok.len() {
            mask[row * (t - 1) + j - 1] = m[j];
            old[row * (t - 1) + j - 1] = lp[j];
            tokens += m[j] as usize;
        }
    }
    let (b, t) = (b as i64, t as i64);
    PackedBatch {
        ids: Tensor::from_slice(&ids).view([b, t]).to(device),
        mask: Tensor::from_slice(&mask).view([b, t - 1]).to(device),
        old_logprobs: Tensor::from_slice(&old).view([b, t - 1]).to(device),
        tokens,
    }
}

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

/// The trainable model with its optimiser and (optionally) a frozen reference copy.
pub struct Learner {
    vs: nn::VarStore,
    model: TinyGpt,
    opt: nn::Optimizer,
    reference: Option<(nn::VarStore, TinyGpt)>,
    device: Device,
}

impl Learner {
    /// A freshly initialised model (seeded through `tch::manual_seed` by the caller).
    pub fn new(config: GptConfig, lr: f64, device: Device) -> Result<Self> {
        let vs = nn::VarStore::new(device);
        let model = TinyGpt::new(&vs.root(), config)?;
        let opt = nn::adamw(0.9, 0.95, 0.01)
            .build(&vs, lr)
            .map_err(|e| Error::Trainer(format!("building AdamW: {e}")))?;
        Ok(Learner {
            vs,
            model,
            opt,
            reference: None,
            device,
        })
    }

    /// The model's config.
    pub fn config(&self) -> &GptConfig {
        self.model.config()
    }

    /// Sets the learning rate.
    pub fn set_lr(&mut self, lr: f64) {
        self.opt.set_lr(lr);
    }

    /// Deep copy of the current weights.
    pub fn weights(&self) -> NamedWeights {
        snapshot_weights(&self.vs)
    }

    /// A new `(VarStore, TinyGpt)` holding a copy of the current weights (for a rollout policy).
    pub fn clone_model(&self) -> Result<(nn::VarStore, TinyGpt)> {
        let mut vs = nn::VarStore::new(self.device);
        let model = TinyGpt::new(&vs.root(), self.config().clone())?;
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

    /// Saves the weights as safetensors, atomically.
    pub fn save(&self, path: &Path) -> Result<()> {
        checkpoint::save_var_store(&self.vs, path)
    }

    /// Loads weights saved by [`Learner::save`].
    pub fn load(&mut self, path: &Path) -> Result<()> {
        self.vs
            .load(path)
            .map_err(|e| Error::Trainer(format!("loading checkpoint {}: {e}", path.display())))
    }

    fn apply_gradients(&mut self, loss: &Tensor, grad_clip: f64) -> f64 {
        self.opt.zero_grad();
        loss.backward();
        let grad_norm = tch::no_grad(|| {
            let norms: Vec<Tensor> = self
                .vs
                .trainable_variables()
                .iter()
                .map(|v| v.grad())
                .filter(|g| g.defined())
                .map(|g| g.norm().square())
                .collect();
            if norms.is_empty() {
                0.0
            } else {
                Tensor::stack(&norms, 0)
                    .sum(Kind::Float)
                    .sqrt()
                    .double_value(&[])
            }
        });
        if grad_norm.is_finite() {
            self.opt.clip_grad_norm(grad_clip);
            self.opt.step();
        }
        grad_norm
    }

    /// One behaviour-cloning step: mean cross-entropy over policy tokens.
    pub fn sft_step(&mut self, batch: &[&Trajectory], grad_clip: f64) -> UpdateStats {
        let packed = pack(batch, self.device);
        let (logp, entropy) = self.model.token_logprobs(&packed.ids, 1.0);
        let denom = packed.mask.sum(Kind::Float).clamp_min(1.0);
        let loss = -(&logp * &packed.mask).sum(Kind::Float) / &denom;
        let grad_norm = self.apply_gradients(&loss, grad_clip);
        UpdateStats {
            loss: loss.double_value(&[]),
            entropy: ((entropy * &packed.mask).sum(Kind::Float) / &denom).double_value(&[]),
            grad_norm,
            tokens: packed.tokens,
            ..Default::default()
        }
    }

    /// One GRPO step: token-level clipped surrogate over policy tokens, ratio against the
    /// rollout logprobs, optional k3 KL to the reference. `advantages` aligns with `batch`.
    pub fn grpo_step(
        &mut self,
        batch: &[&Trajectory],
        advantages: &[f64],
        p: GrpoParams,
    ) -> UpdateStats {
        let packed = pack(batch, self.device);
        let adv: Vec<f32> = advantages.iter().map(|&a| a as f32).collect();
        let adv = Tensor::from_slice(&adv).view([-1, 1]).to(self.device);
        let (logp, entropy) = self.model.token_logprobs(&packed.ids, p.temperature);
        let mask = &packed.mask;
        let denom = mask.sum(Kind::Float).clamp_min(1.0);
        let ratio = (&logp - &packed.old_logprobs).exp();
        let surr1 = &ratio * &adv;
        let surr2 = ratio.clamp(1.0 - p.clip_eps, 1.0 + p.clip_eps) * &adv;
        let pg = -surr1.minimum(&surr2);
        let mut loss = (&pg * mask).sum(Kind::Float) / &denom;
        let mut kl_value = 0.0;
        if p.kl_coef > 0.0
            && let Some((_, reference)) = &self.reference
        {
            let ref_logp = tch::no_grad(|| reference.token_logprobs(&packed.ids, p.temperature).0);
            let d = &ref_logp - &logp;
            let k3 = d.exp() - &d - 1.0;
            let kl = (&k3 * mask).sum(Kind::Float) / &denom;
            kl_value = kl.double_value(&[]);
            loss = &loss + kl * p.kl_coef;
        }
        let clipped = tch::no_grad(|| {
            let c = (&ratio - 1.0).abs().gt(p.clip_eps).to_kind(Kind::Float);
            ((c * mask).sum(Kind::Float) / &denom).double_value(&[])
        });
        let grad_norm = self.apply_gradients(&loss, p.grad_clip);
        UpdateStats {
            loss: loss.double_value(&[]),
            kl: kl_value,
            clip_fraction: clipped,
            entropy: ((entropy * mask).sum(Kind::Float) / &denom).double_value(&[]),
            grad_norm,
            tokens: packed.tokens,
        }
    }
}
