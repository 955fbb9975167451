//! The PPO critic: a copy of the policy's network with a scalar value head on its final hidden
//! states, trained by clipped regression on the GAE returns.
//!
//! The critic starts as a copy of the learner's model (its LoRA adapters, when the policy has
//! them, are the only backbone weights that train) and a zero value head, so its first values are
//! 0 and the first advantages are the Monte Carlo returns. Values are read at every position
//! whose *next* token the policy generated, aligned with [`crate::batch::PackedBatch::mask`].
//! Its trainable weights (the value head, and the backbone or its LoRA adapters) are saved beside
//! the policy's checkpoints (`checkpoints/step-N/critic.safetensors`, with its optimiser) and
//! restored when a run resumes.

use std::collections::HashMap;
use std::path::Path;

use agentrl_core::{Error, Result, Trajectory};
use agentrl_policy::PolicyModel;
use tch::{Device, Kind, Tensor, nn, nn::Module};

use crate::batch::{PackedBatch, pack_chunks, padded, trained_tokens};
use crate::learner::Learner;
use crate::optim::AdamW;

/// What one critic update reports.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct CriticStats {
    /// Clipped value loss (half the squared error, mean over policy tokens).
    pub value_loss: f64,
    /// Mean value prediction over policy tokens, before the update.
    pub value_mean: f64,
    /// Global gradient norm before clipping.
    pub grad_norm: f64,
    /// True when the value loss or its gradients were not finite and the step was skipped.
    pub skipped_non_finite: bool,
}

/// A value network beside the policy (see the module docs).
pub struct Critic {
    vs: nn::VarStore,
    backbone: Box<dyn PolicyModel>,
    head: nn::Linear,
    opt: AdamW,
    device: Device,
    micro_batch: usize,
}

impl Critic {
    /// A critic whose backbone is a copy of `learner`'s current model and whose value head
    /// starts at zero, trained by AdamW at `lr` on micro-batches of `micro_batch` trajectories
    /// (0: the whole batch).
    pub fn from_learner(learner: &Learner, lr: f64, micro_batch: usize) -> Result<Self> {
        let (vs, backbone) = learner.clone_model()?;
        let head = nn::linear(
            vs.root() / "value_head",
            backbone.hidden_size() as i64,
            1,
            nn::LinearConfig {
                ws_init: nn::Init::Const(0.0),
                bs_init: Some(nn::Init::Const(0.0)),
                bias: true,
            },
        );
        let opt = AdamW::new(&vs, lr, 0.0);
        Ok(Critic {
            device: vs.device(),
            vs,
            backbone,
            head,
            opt,
            micro_batch,
        })
    }

    /// Writes the trainable weights (value head, and backbone or adapters) to `path`.
    pub fn save(&self, path: &Path) -> Result<()> {
        let mut tensors: Vec<(String, Tensor)> = self
            .vs
            .variables()
            .into_iter()
            .filter(|(_, t)| t.requires_grad())
            .map(|(name, t)| (name, t.detach()))
            .collect();
        tensors.sort_by(|a, b| a.0.cmp(&b.0));
        agentrl_policy::checkpoint::save_tensors(&tensors, path)
    }

    /// Saves the critic optimiser's state, atomically.
    pub fn save_optimizer(&self, path: &Path) -> Result<()> {
        agentrl_policy::checkpoint::save_tensors(&self.opt.state_tensors(), path)
    }

    /// Restores an optimiser state saved by [`Critic::save_optimizer`].
    pub fn load_optimizer(&mut self, path: &Path) -> Result<()> {
        let tensors = Tensor::read_safetensors(path)
            .map_err(|e| Error::Trainer(format!("reading {}: {e}", path.display())))?;
        self.opt.load_state(&path.display().to_string(), tensors)
    }

    /// Restores weights written by [`Critic::save`]; every trainable weight must be in the file
    /// with its shape. The optimiser starts afresh.
    pub fn load(&mut self, path: &Path) -> Result<()> {
        self.opt.reset();
        let saved: HashMap<String, Tensor> = Tensor::read_safetensors(path)
            .map_err(|e| Error::Trainer(format!("reading critic {}: {e}", path.display())))?
            .into_iter()
            .collect();
        for (name, var) in self.vs.variables() {
            if !var.requires_grad() {
                continue;
            }
            let src = saved.get(&name).ok_or_else(|| {
                Error::Trainer(format!("critic {}: `{name}` is missing", path.display()))
            })?;
            if src.size() != var.size() {
                return Err(Error::Trainer(format!(
                    "critic {}: `{name}` has shape {:?}, the critic expects {:?}",
                    path.display(),
                    src.size(),
                    var.size()
                )));
            }
            let mut dst = var.shallow_clone();
            tch::no_grad(|| dst.f_copy_(&src.to_kind(var.kind()).to(var.device())))
                .map_err(|e| Error::Trainer(format!("copying critic weight `{name}`: {e}")))?;
        }
        Ok(())
    }

    /// Values `[B, T-1]` of a packed batch: the value head on the hidden state at every position
    /// but the last.
    fn forward(&self, packed: &PackedBatch) -> Tensor {
        let t = packed.ids.size()[1];
        let hidden = self
            .backbone
            .hidden_states(&packed.ids)
            .narrow(1, 0, t - 1)
            .to_kind(Kind::Float);
        self.head.forward(&hidden).squeeze_dim(-1)
    }

    /// The current values of every trajectory, one per next-token position
    /// (`num_tokens - 1` each), without gradients.
    pub fn values(&self, batch: &[&Trajectory]) -> Result<Vec<Vec<f32>>> {
        let mut out = Vec::with_capacity(batch.len());
        for (first, packed) in pack_chunks(batch, self.micro_batch, self.device) {
            let values = tch::no_grad(|| self.forward(&packed)).to_device(Device::Cpu);
            for (row, traj) in batch
                .iter()
                .skip(first)
                .take(values.size()[0] as usize)
                .enumerate()
            {
                let n = traj.num_tokens().saturating_sub(1) as i64;
                let row_values = Vec::<f32>::try_from(values.get(row as i64).narrow(0, 0, n))
                    .map_err(|e| Error::Trainer(format!("reading critic values: {e}")))?;
                out.push(row_values);
            }
        }
        Ok(out)
    }

    /// One update towards `returns` (aligned like [`Critic::values`]), with each prediction kept
    /// within `value_clip` of `old_values` (the values the advantages were computed with), as in
    /// PPO's clipped value loss.
    pub fn step(
        &mut self,
        batch: &[&Trajectory],
        returns: &[Vec<f32>],
        old_values: &[Vec<f32>],
        value_clip: f64,
        grad_clip: f64,
    ) -> CriticStats {
        let chunks = pack_chunks(batch, self.micro_batch, self.device);
        let denom = trained_tokens(&chunks);
        let mut stats = CriticStats::default();
        self.opt.zero_grad();
        for (first, packed) in &chunks {
            let rows = packed.ids.size()[0] as usize;
            let width = packed.mask.size()[1];
            let target = padded(&returns[*first..*first + rows], width, self.device);
            let old = padded(&old_values[*first..*first + rows], width, self.device);
            let v = self.forward(packed);
            let clipped = &old + (&v - &old).clamp(-value_clip, value_clip);
            let loss = ((&v - &target)
                .square()
                .maximum(&(clipped - &target).square())
                * &packed.mask)
                .sum(Kind::Float)
                * (0.5 / denom);
            loss.backward();
            stats.value_loss += loss.double_value(&[]);
            stats.value_mean +=
                tch::no_grad(|| (&old * &packed.mask).sum(Kind::Float) / denom).double_value(&[]);
        }
        let step = self
            .opt
            .clip_and_step(grad_clip, "critic", stats.value_loss);
        stats.grad_norm = step.grad_norm;
        stats.skipped_non_finite = step.skipped_non_finite;
        stats
    }
}
