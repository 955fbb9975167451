//! The learner: the trainable model, its optimiser, and the SFT and policy-gradient update
//! steps (GRPO and its relatives with one advantage per trajectory, PPO with one per token).

use std::path::Path;

use agentrl_core::{Error, Result, Trajectory};
use agentrl_policy::llama::{
    Llama, LoraConfig, adapter_weights, load_adapter_weights, save_adapters,
};
use agentrl_policy::{GptConfig, NamedWeights, PolicyModel, snapshot_weights};
use tch::{Device, Kind, Tensor, nn, nn::OptimizerConfig};

use crate::optim::AdamW;

use crate::batch::{MicroBatch, deal_by_length, pack_by_length, pack_chunks_within, pack_update};
pub use crate::batch::{PackedBatch, pack};
use crate::replicas::{Part, Replicas};

/// Padded tokens (rows × longest row) per micro-batch of a behaviour-cloning step.
const SFT_PADDED_TOKENS: usize = 8192;
/// Weights (all variables, trained or not) up to which a CPU model's updates are
/// data-parallel unless told otherwise ([`Learner::set_data_parallel`]): above it the
/// matrix products are large enough for libtorch's threads to share.
const DATA_PARALLEL_MAX_WEIGHTS: usize = 16 << 20;
/// Fewest demonstrations in each part of a data-parallel behaviour-cloning step.
const SFT_MIN_ROWS_PER_PART: usize = 4;
use crate::loss::{
    DEFAULT_LOSS_AGG_NORM, KlEstimator, KlMode, LossAgg, Normalisers, aggregate, clipped_surrogate,
    clipped_tokens, kl_per_token, trained_sequences,
};
pub use crate::model_spec::ModelSpec;
use agentrl_policy::checkpoint;

/// Statistics of one update.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct UpdateStats {
    /// Loss value.
    pub loss: f64,
    /// Mean per-token KL to the reference under the configured estimator (0 when disabled or
    /// when the KL is a reward penalty).
    pub kl: f64,
    /// Share of tokens whose ratio was clipped.
    pub clip_fraction: f64,
    /// Mean entropy of the policy on trained tokens.
    pub entropy: f64,
    /// Global gradient norm before clipping.
    pub grad_norm: f64,
    /// Trained tokens.
    pub tokens: usize,
    /// Token positions the update did not compute, because a run of episodes shared a prefix
    /// (a GRPO group's prompt) that went through the model once.
    pub shared_prefix_saved: usize,
    /// True when the loss or the gradients were NaN or infinite: the step was skipped and the
    /// weights and optimiser state are as they were.
    pub skipped_non_finite: bool,
}

impl UpdateStats {
    /// A step that did not happen (the weights and optimiser state are as they were).
    fn skipped() -> Self {
        UpdateStats {
            skipped_non_finite: true,
            ..UpdateStats::default()
        }
    }

    /// Adds the sums of `other` (some passes of the same step) to these.
    fn add(&mut self, other: &UpdateStats) {
        self.loss += other.loss;
        self.kl += other.kl;
        self.clip_fraction += other.clip_fraction;
        self.entropy += other.entropy;
        self.tokens += other.tokens;
        self.shared_prefix_saved += other.shared_prefix_saved;
    }
}

/// Behaviour cloning's passes over `chunks`: the cross-entropy of their policy tokens,
/// reduced as `agg` says over the whole step's `norms`, backpropagated into `model`'s
/// variables one chunk at a time; returns the loss, the entropy's share and the tokens.
fn sft_passes(
    model: &dyn PolicyModel,
    chunks: &[PackedBatch],
    agg: LossAgg,
    norms: &Normalisers,
) -> UpdateStats {
    let mut stats = UpdateStats::default();
    for packed in chunks.iter().filter(|p| p.tokens > 0) {
        let (logp, entropy) = model.masked_token_logprobs(&packed.ids, &packed.mask, 1.0, false);
        let loss = aggregate(&-logp, &packed.mask, agg, norms);
        loss.backward();
        stats.loss += loss.double_value(&[]);
        stats.entropy += tch::no_grad(|| (entropy * &packed.mask).sum(Kind::Float) / norms.tokens)
            .double_value(&[]);
        stats.tokens += packed.tokens;
    }
    stats
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

/// Hyper-parameters of a policy-gradient step ([`Learner::grpo_step`], [`Learner::policy_step`]),
/// built from `[rl]`; [`GrpoParams::default`] is `[rl]`'s defaults.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GrpoParams {
    /// Clip range of the ratio (both sides unless `clip_low`/`clip_high` say otherwise).
    pub clip_eps: f64,
    /// Lower clip range: the ratio is clipped below at `1 - clip_low` (None: `clip_eps`).
    pub clip_low: Option<f64>,
    /// Upper clip range (DAPO's clip-higher): clipped above at `1 + clip_high` (None:
    /// `clip_eps`).
    pub clip_high: Option<f64>,
    /// Dual clip: where the advantage is negative, the per-token loss is at most `c·|A|`
    /// (None: off).
    pub dual_clip: Option<f64>,
    /// How per-token losses are reduced to the batch's loss.
    pub loss_agg: LossAgg,
    /// The constant dividing each sequence's token sum under
    /// [`LossAgg::SeqMeanTokenSumNorm`].
    pub loss_agg_norm: f64,
    /// Weight of the entropy bonus (aggregated like the loss; 0: none).
    pub entropy_coef: f64,
    /// KL weight (0: no reference forward).
    pub kl_coef: f64,
    /// Which per-token KL estimator.
    pub kl_estimator: KlEstimator,
    /// Whether the KL is a loss term (here) or a reward penalty (the caller's, through
    /// [`Learner::kl_penalties`]; then the step adds no KL).
    pub kl_mode: KlMode,
    /// Sampling temperature the logprobs were taken at.
    pub temperature: f64,
    /// Max gradient norm.
    pub grad_clip: f64,
}

impl Default for GrpoParams {
    fn default() -> Self {
        GrpoParams {
            clip_eps: 0.2,
            clip_low: None,
            clip_high: None,
            dual_clip: None,
            loss_agg: LossAgg::TokenMean,
            loss_agg_norm: DEFAULT_LOSS_AGG_NORM,
            entropy_coef: 0.0,
            kl_coef: 0.0,
            kl_estimator: KlEstimator::K3,
            kl_mode: KlMode::Loss,
            temperature: 1.0,
            grad_clip: 1.0,
        }
    }
}

impl GrpoParams {
    /// The ratio's clip ranges `(low, high)`: clipped to `[1 - low, 1 + high]`.
    pub fn clip_range(&self) -> (f64, f64) {
        (
            self.clip_low.unwrap_or(self.clip_eps),
            self.clip_high.unwrap_or(self.clip_eps),
        )
    }
}

/// Behaviour cloning's optimiser: libtorch's AdamW when every trainable weight is fp32; ours
/// ([`AdamW`], fp32 master copies and stochastic rounding) when some are bf16, on which
/// libtorch's would round small steps away.
enum SftOptimiser {
    Libtorch(nn::Optimizer),
    Master(AdamW),
}

impl SftOptimiser {
    /// The optimiser for `vs`'s trainable variables at `lr` (β = 0.9, 0.95, weight decay 0.01).
    fn for_weights(vs: &nn::VarStore, lr: f64) -> std::result::Result<Self, tch::TchError> {
        let all_fp32 = vs
            .trainable_variables()
            .iter()
            .all(|v| v.kind() == Kind::Float);
        if !all_fp32 {
            return Ok(SftOptimiser::Master(AdamW::new(vs, lr, 0.01)));
        }
        nn::adamw(0.9, 0.95, 0.01)
            .build(vs, lr)
            .map(SftOptimiser::Libtorch)
    }

    fn set_lr(&mut self, lr: f64) {
        match self {
            SftOptimiser::Libtorch(opt) => opt.set_lr(lr),
            SftOptimiser::Master(opt) => opt.set_lr(lr),
        }
    }

    fn zero_grad(&mut self) {
        match self {
            SftOptimiser::Libtorch(opt) => opt.zero_grad(),
            SftOptimiser::Master(opt) => opt.zero_grad(),
        }
    }

    /// Clips the gradients to a global norm of `grad_clip` and steps, unless the loss or the
    /// gradients are not finite.
    fn clip_and_step(
        &mut self,
        vs: &nn::VarStore,
        grad_clip: f64,
        loss: f64,
    ) -> crate::optim::OptimiserStep {
        match self {
            SftOptimiser::Libtorch(opt) => libtorch_clip_and_step(vs, opt, grad_clip, loss),
            SftOptimiser::Master(opt) => opt.clip_and_step(grad_clip, "SFT", loss),
        }
    }
}

/// The trainable model with its optimiser and (optionally) a frozen reference copy. The model
/// is a [`agentrl_policy::TinyGpt`] or a Llama-family decoder, fully trainable or with LoRA adapters (then only
/// the adapters train, and only they travel to the rollout policy).
pub struct Learner {
    vs: nn::VarStore,
    model: Box<dyn PolicyModel>,
    spec: ModelSpec,
    /// The policy-gradient (and critic-side) optimiser, whose state checkpoints keep.
    opt: AdamW,
    /// Behaviour cloning's optimiser, built at the first SFT step (see [`Learner::sft_step`]).
    sft_opt: Option<SftOptimiser>,
    /// Whether updates are data-parallel: `None` decides by the model's size.
    data_parallel: Option<bool>,
    /// The replicas of a data-parallel update, built at the first one.
    replicas: Option<Replicas<UpdateStats>>,
    /// The learning rate last set.
    lr: f64,
    reference: Option<(nn::VarStore, Box<dyn PolicyModel>)>,
    device: Device,
    micro_batch: usize,
    micro_batch_tokens: usize,
    shared_prefix: usize,
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
        let opt = AdamW::new(&vs, lr, 0.01);
        Ok(Learner {
            device: vs.device(),
            vs,
            model,
            spec,
            opt,
            sft_opt: None,
            data_parallel: None,
            replicas: None,
            lr,
            reference: None,
            micro_batch: 0,
            micro_batch_tokens: 0,
            shared_prefix: 0,
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
        self.lr = lr;
        self.opt.set_lr(lr);
        if let Some(opt) = &mut self.sft_opt {
            opt.set_lr(lr);
        }
    }

    /// Whether an update on the CPU is cut into parts run at once, one per libtorch thread of
    /// the calling thread: the learner's thread runs the first with one libtorch thread, and
    /// replicas of the model that share its weights each run another on a thread of their own
    /// with one (`replicas.rs` says why). Behaviour cloning deals its demonstrations by length
    /// (at least 4 in each part), a policy update hands out its micro-batches (not while the
    /// KL to a reference is a loss term). `None` (the default): when the model has at most
    /// 16 Mi weights; `Some(true)`: whatever its size; `Some(false)`: never. The step is the
    /// same up to float rounding, and the same on every run.
    pub fn set_data_parallel(&mut self, mode: Option<bool>) {
        self.data_parallel = mode;
    }

    /// How many replicas the learner keeps for its data-parallel updates (0 until one runs;
    /// kept from then on, and rebuilt when an update wants another number).
    pub fn replicas(&self) -> usize {
        self.replicas.as_ref().map_or(0, Replicas::len)
    }

    /// Splits each update into forward/backward passes of at most `rows` trajectories,
    /// accumulating gradients (0: the whole batch at once). Bounds memory for large vocabularies.
    pub fn set_micro_batch(&mut self, rows: usize) {
        self.micro_batch = rows;
    }

    /// Also bounds each policy-update pass to `tokens` padded tokens (rows × longest row; 0:
    /// no bound), cutting the batch in order (see [`pack_chunks_within`]).
    pub fn set_micro_batch_tokens(&mut self, tokens: usize) {
        self.micro_batch_tokens = tokens;
    }

    /// Runs a prefix shared by consecutive trajectories of a policy update (a GRPO group's
    /// prompt) through the model once when it is at least `min_tokens` ids long (0: never);
    /// the update is the same, up to float rounding.
    pub fn set_shared_prefix(&mut self, min_tokens: usize) {
        self.shared_prefix = min_tokens;
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

    /// A new VarStore and model for a rollout policy that reads the learner's own tensors
    /// instead of copies where it can, saving their memory: the frozen ones (a LoRA model's
    /// base) always, since they never change, and the trained ones too when `share_trained`
    /// is set. Only share trained tensors with a policy that never generates while the
    /// learner updates (the synchronous pipeline, an evaluation between steps): the
    /// optimiser writes them in place, so such a policy sees every step at once and needs no
    /// publishing beyond its version.
    pub fn shared_model(
        &self,
        share_trained: bool,
    ) -> Result<(nn::VarStore, Box<dyn PolicyModel>)> {
        let vs = nn::VarStore::new(self.device);
        let model = self.spec.build(&vs)?;
        self.share_into(&vs, share_trained)?;
        Ok((vs, model))
    }

    /// A replica for a data-parallel update: [`Learner::shared_model`] with every tensor
    /// shared, built without drawing from libtorch's generator.
    fn replica_model(&self) -> Result<(nn::VarStore, Box<dyn PolicyModel>)> {
        let vs = nn::VarStore::new(self.device);
        let model = self.spec.build_to_fill(&vs)?;
        self.share_into(&vs, true)?;
        Ok((vs, model))
    }

    /// Points `vs`'s variables at the learner's storage (the frozen ones always, the trained
    /// ones when `share_trained`) or copies the learner's values into them.
    fn share_into(&self, vs: &nn::VarStore, share_trained: bool) -> Result<()> {
        let sources = self.vs.variables();
        tch::no_grad(|| {
            for (name, mut dst) in vs.variables() {
                let src = sources.get(&name).ok_or_else(|| {
                    Error::Trainer(format!(
                        "the rollout model has a tensor `{name}` the learner lacks"
                    ))
                })?;
                if dst.size() != src.size() || dst.kind() != src.kind() {
                    return Err(Error::Trainer(format!(
                        "tensor `{name}`: the rollout model has {:?} {:?}, the learner {:?} {:?}",
                        dst.size(),
                        dst.kind(),
                        src.size(),
                        src.kind()
                    )));
                }
                if share_trained || !src.requires_grad() {
                    // The rollout's variable now points at the learner's storage; the model
                    // built above holds handles to the same variable, so it follows.
                    dst.f_set_data(src)
                } else {
                    dst.f_copy_(src)
                }
                .map_err(|e| Error::Trainer(format!("sharing weight `{name}`: {e}")))?;
            }
            Ok(())
        })
    }

    /// Freezes a copy of the current weights as the KL reference.
    pub fn freeze_reference(&mut self) -> Result<()> {
        let (mut vs, model) = self.clone_model()?;
        vs.freeze();
        self.reference = Some((vs, model));
        Ok(())
    }

    /// Freezes as the KL reference the current model with the weights of `path` (written by
    /// [`Learner::save`]) loaded over it.
    pub fn freeze_reference_from(&mut self, path: &Path) -> Result<()> {
        let (mut vs, model) = self.clone_model()?;
        if self.spec.lora().is_some() {
            load_adapter_weights(&vs, path)?;
        } else {
            vs.load(path).map_err(|e| {
                Error::Trainer(format!("loading the KL reference {}: {e}", path.display()))
            })?;
        }
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

    /// Loads weights saved by [`Learner::save`]; the optimiser starts afresh.
    pub fn load(&mut self, path: &Path) -> Result<()> {
        self.opt.reset();
        self.sft_opt = None;
        if self.spec.lora().is_some() {
            return load_adapter_weights(&self.vs, path).map(|_| ());
        }
        self.vs
            .load(path)
            .map_err(|e| Error::Trainer(format!("loading checkpoint {}: {e}", path.display())))
    }

    /// Saves the optimiser's state (moments, step count, fp32 master weights) as safetensors,
    /// atomically.
    pub fn save_optimizer(&self, path: &Path) -> Result<()> {
        checkpoint::save_tensors(&self.opt.state_tensors(), path)
    }

    /// Restores an optimiser state saved by [`Learner::save_optimizer`].
    pub fn load_optimizer(&mut self, path: &Path) -> Result<()> {
        let tensors = Tensor::read_safetensors(path)
            .map_err(|e| Error::Trainer(format!("reading {}: {e}", path.display())))?;
        self.opt.load_state(&path.display().to_string(), tensors)
    }

    /// Optimiser steps taken since the weights were built or loaded.
    pub fn optimizer_steps(&self) -> i64 {
        self.opt.steps()
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

    /// The batch's micro-batches for a policy update ([`pack_update`]), with the total count
    /// of trained tokens (the loss denominator, at least 1).
    fn update_chunks(&self, batch: &[&Trajectory]) -> (Vec<(usize, MicroBatch)>, f64) {
        let chunks = pack_update(
            batch,
            self.micro_batch,
            self.micro_batch_tokens,
            self.shared_prefix,
            self.device,
        );
        let denom = chunks
            .iter()
            .map(|(_, mb)| mb.rows().tokens)
            .sum::<usize>()
            .max(1) as f64;
        (chunks, denom)
    }

    /// After the micro-batches' `backward` calls: global grad norm, clipping, AdamW step
    /// (skipped when the loss or the gradients are not finite; see [`AdamW::clip_and_step`]).
    fn finish_step(&mut self, what: &str, stats: &mut UpdateStats, grad_clip: f64) {
        let step = self.opt.clip_and_step(grad_clip, what, stats.loss);
        stats.grad_norm = step.grad_norm;
        stats.skipped_non_finite = step.skipped_non_finite;
    }

    /// One behaviour-cloning step: mean cross-entropy over policy tokens. The batch is
    /// packed by length ([`pack_by_length`]), so short and long demonstrations do not pad each
    /// other. On the CPU a small model's step is dealt over replicas that run at once (see
    /// [`Learner::set_data_parallel`]).
    ///
    /// An fp32 model's SFT steps with libtorch's AdamW rather than [`AdamW`]: SFT is never
    /// resumed midway (an interrupted SFT starts again), and the demo's result hangs on the
    /// exact SFT weights, which our AdamW's different rounding (within 1e-6 a step) would
    /// change. A model with bf16 trainable weights steps with [`AdamW`], whose fp32 master
    /// copies keep the small steps that bf16 would round away. RL then starts [`AdamW`] with
    /// fresh moments.
    pub fn sft_step(&mut self, batch: &[&Trajectory], grad_clip: f64) -> UpdateStats {
        self.sft_step_aggregated(batch, grad_clip, LossAgg::TokenMean)
    }

    /// [`Learner::sft_step`] with the cross-entropy reduced as `agg` says: under
    /// [`LossAgg::SeqMeanTokenMean`] each demonstration weighs the same, so a mixture's short
    /// episodes are not outweighed by its long ones. The entropy statistic stays a token mean.
    pub fn sft_step_aggregated(
        &mut self,
        batch: &[&Trajectory],
        grad_clip: f64,
        agg: LossAgg,
    ) -> UpdateStats {
        let parts = self
            .data_parallel_parts(batch.len() / SFT_MIN_ROWS_PER_PART)
            .max(1);
        let chunk_sets: Vec<Vec<PackedBatch>> = deal_by_length(batch, parts)
            .iter()
            .map(|part| pack_by_length(part, self.micro_batch, SFT_PADDED_TOKENS, self.device))
            .collect();
        let all_chunks = || chunk_sets.iter().flatten();
        let denom = all_chunks().map(|p| p.tokens).sum::<usize>().max(1) as f64;
        let norms = Normalisers {
            tokens: denom,
            sequences: all_chunks()
                .map(|p| trained_sequences(&p.mask))
                .sum::<usize>()
                .max(1) as f64,
            norm: DEFAULT_LOSS_AGG_NORM,
        };
        let mut opt = match self.sft_opt.take() {
            Some(opt) => opt,
            None => match SftOptimiser::for_weights(&self.vs, self.lr) {
                Ok(opt) => opt,
                Err(e) => {
                    tracing::error!("building libtorch's AdamW for SFT failed: {e}");
                    return UpdateStats::skipped();
                }
            },
        };
        opt.zero_grad();
        // A data-parallel step's optimiser step too runs with one libtorch thread: a team of
        // OpenMP threads woken for it would spin beside the replicas.
        let threads = if parts == 1 {
            tch::get_num_threads()
        } else {
            1
        };
        let stepped = agentrl_policy::with_torch_threads(threads, || {
            let stats = if parts == 1 {
                let chunks = chunk_sets.first().map_or(&[][..], Vec::as_slice);
                Ok(sft_passes(self.model.as_ref(), chunks, agg, &norms))
            } else {
                let parts = chunk_sets
                    .into_iter()
                    .map(|chunks| -> Part<UpdateStats> {
                        Box::new(move |model| sft_passes(model, &chunks, agg, &norms))
                    })
                    .collect();
                self.run_parts(parts)
            };
            stats.map(|mut stats| {
                let step = opt.clip_and_step(&self.vs, grad_clip, stats.loss);
                stats.grad_norm = step.grad_norm;
                stats.skipped_non_finite = step.skipped_non_finite;
                stats
            })
        });
        self.sft_opt = Some(opt);
        stepped.unwrap_or_else(|e| self.parts_failed(&e))
    }

    /// Into how many parts an update that can be cut into at most `most` is cut (see
    /// [`Learner::set_data_parallel`]); 1 or less: it is not.
    fn data_parallel_parts(&self, most: usize) -> usize {
        let wanted = match self.data_parallel {
            Some(wanted) => wanted,
            None => {
                let weights: usize = self.vs.variables().values().map(Tensor::numel).sum();
                weights <= DATA_PARALLEL_MAX_WEIGHTS
            }
        };
        if !wanted || self.device != Device::Cpu {
            return 1;
        }
        let threads = usize::try_from(tch::get_num_threads()).unwrap_or(1);
        threads.min(most)
    }

    /// Runs `parts` (at least two) at once: the first on this thread, the others on replicas
    /// (built now unless they are there and still read the learner's weights); returns their
    /// statistics summed in order.
    fn run_parts(&mut self, parts: Vec<Part<UpdateStats>>) -> Result<UpdateStats> {
        let count = parts.len().saturating_sub(1);
        let ready = self
            .replicas
            .as_ref()
            .is_some_and(|r| r.len() == count && r.share_weights());
        if !ready {
            self.replicas = None;
            self.replicas = Some(Replicas::new(&self.vs, count, || self.replica_model())?);
        }
        let replicas = self
            .replicas
            .as_mut()
            .ok_or_else(|| Error::Trainer("the replicas are missing".into()))?;
        let mut total = UpdateStats::default();
        for stats in replicas.run(self.model.as_ref(), parts)? {
            total.add(&stats);
        }
        Ok(total)
    }

    /// A data-parallel update that failed: says so, and later updates run on this thread
    /// alone. The step is skipped.
    fn parts_failed(&mut self, e: &Error) -> UpdateStats {
        tracing::error!("data-parallel update skipped, and later ones run on one thread: {e}");
        self.replicas = None;
        self.data_parallel = Some(false);
        UpdateStats::skipped()
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

    /// One policy-gradient step: the clipped surrogate over policy tokens (ratio against the
    /// rollout logprobs, asymmetric and dual clip), aggregated as `p.loss_agg` says, minus the
    /// entropy bonus, plus the KL to the reference when `p.kl_mode` is [`KlMode::Loss`].
    /// `advantages` aligns with `batch`. The statistics' KL, entropy and clip fraction are
    /// token means whatever the aggregation.
    pub fn policy_step(
        &mut self,
        batch: &[&Trajectory],
        advantages: Advantages<'_>,
        p: GrpoParams,
    ) -> UpdateStats {
        let (chunks, denom) = self.update_chunks(batch);
        let norms = Normalisers {
            tokens: denom,
            sequences: chunks
                .iter()
                .map(|(_, mb)| trained_sequences(&mb.rows().mask))
                .sum::<usize>()
                .max(1) as f64,
            norm: p.loss_agg_norm,
        };
        let passes: Vec<PolicyPass> = chunks
            .into_iter()
            // Every row left out of the loss (stale or masked turns): nothing to train, and a
            // loss without a graph cannot be backpropagated.
            .filter(|(_, micro)| micro.rows().tokens > 0)
            .map(|(first, micro)| PolicyPass {
                advantages: advantage_rows(advantages, first, &micro, self.device),
                micro,
            })
            .collect();
        self.opt.zero_grad();
        let reference = self
            .reference
            .as_ref()
            .map(|(_, model)| model.as_ref())
            .filter(|_| p.kl_mode == KlMode::Loss && p.kl_coef > 0.0);
        // The replicas have no reference model: with a KL loss term the passes run here.
        let parts = if reference.is_some() {
            1
        } else {
            self.data_parallel_parts(passes.len())
        };
        if parts <= 1 {
            let mut stats = UpdateStats::default();
            for pass in &passes {
                let pass_stats =
                    policy_pass(self.model.as_ref(), reference, pass, p, &norms, denom);
                stats.add(&pass_stats);
            }
            self.finish_step("policy", &mut stats, p.grad_clip);
            return stats;
        }
        let parts = deal_passes(passes, parts)
            .into_iter()
            .map(|share| -> Part<UpdateStats> {
                Box::new(move |model| {
                    let mut stats = UpdateStats::default();
                    for pass in &share {
                        stats.add(&policy_pass(model, None, pass, p, &norms, denom));
                    }
                    stats
                })
            })
            .collect();
        let stepped = agentrl_policy::with_torch_threads(1, || {
            self.run_parts(parts).map(|mut stats| {
                self.finish_step("policy", &mut stats, p.grad_clip);
                stats
            })
        });
        stepped.unwrap_or_else(|e| self.parts_failed(&e))
    }

    /// Each trajectory's KL to the frozen reference, summed over its policy tokens under
    /// `estimator` with logprobs at `temperature` (no gradients): the per-trajectory penalty
    /// of `kl_mode = "reward"` (the caller subtracts `kl_coef` times it from the reward before
    /// computing advantages). All zeros when no reference is frozen.
    pub fn kl_penalties(
        &self,
        batch: &[&Trajectory],
        estimator: KlEstimator,
        temperature: f64,
    ) -> Vec<f64> {
        let mut out = vec![0.0; batch.len()];
        let Some((_, reference)) = &self.reference else {
            return out;
        };
        tch::no_grad(|| {
            for (first, packed) in pack_chunks_within(
                batch,
                self.micro_batch,
                self.micro_batch_tokens,
                self.device,
            ) {
                let logp = self.model.token_logprobs(&packed.ids, temperature).0;
                let ref_logp = reference.token_logprobs(&packed.ids, temperature).0;
                let per_row = (kl_per_token(&logp, &ref_logp, estimator) * &packed.mask)
                    .sum_dim_intlist(1, false, Kind::Double);
                let rows = per_row.size().first().copied().unwrap_or(0) as usize;
                for (row, slot) in out.iter_mut().skip(first).take(rows).enumerate() {
                    *slot = per_row.double_value(&[row as i64]);
                }
            }
        });
        out
    }
}

/// A micro-batch of a policy update with its advantages (`[rows, 1]` per trajectory, or per
/// position like its mask).
struct PolicyPass {
    micro: MicroBatch,
    advantages: Tensor,
}

/// The advantages of `micro`'s rows, whose first is trajectory `first` of the batch.
fn advantage_rows(
    advantages: Advantages<'_>,
    first: usize,
    micro: &MicroBatch,
    device: Device,
) -> Tensor {
    let packed = micro.rows();
    let rows = packed.ids.size()[0] as usize;
    match advantages {
        Advantages::PerTrajectory(all) => {
            let adv: Vec<f32> = all
                .iter()
                .skip(first)
                .take(rows)
                .map(|&a| a as f32)
                .collect();
            Tensor::from_slice(&adv).view([-1, 1]).to(device)
        }
        Advantages::PerToken(all) => {
            // A shared prefix holds no policy token: its positions are left out.
            let offset = micro.offset();
            let tails: Vec<Vec<f32>> = all[first.min(all.len())..(first + rows).min(all.len())]
                .iter()
                .map(|row| row.get(offset..).unwrap_or(&[]).to_vec())
                .collect();
            crate::batch::padded(&tails, packed.mask.size()[1], device)
        }
    }
}

/// One pass of a policy update into `model`'s variables: the clipped surrogate of `pass`'s
/// policy tokens, aggregated as `p.loss_agg` says over the step's `norms`, minus the entropy
/// bonus, plus the KL to `reference` when it is given; returns the pass's share of the step's
/// statistics (`denom`: the step's trained tokens).
fn policy_pass(
    model: &dyn PolicyModel,
    reference: Option<&dyn PolicyModel>,
    pass: &PolicyPass,
    p: GrpoParams,
    norms: &Normalisers,
    denom: f64,
) -> UpdateStats {
    let (clip_low, clip_high) = p.clip_range();
    let micro = &pass.micro;
    let packed = micro.rows();
    let mask = &packed.mask;
    let rows = packed.ids.size()[0] as usize;
    let mut stats = UpdateStats::default();
    let (logp, entropy) = micro.logprobs(model, p.temperature, p.entropy_coef != 0.0);
    // Positions off the mask hold logp 0: their ratio is 1, whatever was sampled there.
    let ratio = ((&logp - &packed.old_logprobs) * mask).exp();
    let pg = clipped_surrogate(&ratio, &pass.advantages, clip_low, clip_high, p.dual_clip);
    let mut loss = aggregate(&pg, mask, p.loss_agg, norms);
    if p.entropy_coef != 0.0 {
        loss = &loss - aggregate(&entropy, mask, p.loss_agg, norms) * p.entropy_coef;
    }
    if let Some(reference) = reference {
        let ref_logp = tch::no_grad(|| micro.logprobs(reference, p.temperature, false).0);
        let kl_tokens = kl_per_token(&logp, &ref_logp, p.kl_estimator);
        let kl = aggregate(&kl_tokens, mask, p.loss_agg, norms);
        stats.kl = if p.loss_agg == LossAgg::TokenMean {
            kl.double_value(&[])
        } else {
            tch::no_grad(|| aggregate(&kl_tokens, mask, LossAgg::TokenMean, norms))
                .double_value(&[])
        };
        loss = &loss + kl * p.kl_coef;
    }
    loss.backward();
    tch::no_grad(|| {
        let c = clipped_tokens(&ratio, clip_low, clip_high);
        stats.clip_fraction = ((c * mask).sum(Kind::Float) / denom).double_value(&[]);
        stats.entropy = ((entropy * mask).sum(Kind::Float) / denom).double_value(&[]);
    });
    stats.loss = loss.double_value(&[]);
    stats.tokens = packed.tokens;
    stats.shared_prefix_saved = micro.offset() * rows.saturating_sub(1);
    stats
}

/// `passes` handed out to `parts` parts of about as many padded tokens each (the largest
/// first, each to the part with the fewest so far), every part keeping the passes' order.
fn deal_passes(passes: Vec<PolicyPass>, parts: usize) -> Vec<Vec<PolicyPass>> {
    let parts = parts.max(1);
    let sizes: Vec<usize> = passes
        .iter()
        .map(|pass| pass.micro.rows().ids.numel() + pass.micro.offset())
        .collect();
    let mut largest_first: Vec<usize> = (0..passes.len()).collect();
    largest_first.sort_by_key(|&i| std::cmp::Reverse(sizes[i]));
    let mut load = vec![0usize; parts];
    let mut owner = vec![0usize; passes.len()];
    for i in largest_first {
        let part = (0..parts).min_by_key(|&k| load[k]).unwrap_or(0);
        owner[i] = part;
        load[part] += sizes[i];
    }
    let mut dealt: Vec<Vec<PolicyPass>> = (0..parts).map(|_| Vec::new()).collect();
    for (pass, part) in passes.into_iter().zip(owner) {
        dealt[part].push(pass);
    }
    dealt
}

/// [`AdamW::clip_and_step`] for libtorch's optimiser (behaviour cloning): the global gradient
/// norm of `vs`'s trainable variables, then, when it and `loss` are finite, clipping and a
/// step; otherwise nothing changes and a warning says so.
fn libtorch_clip_and_step(
    vs: &nn::VarStore,
    opt: &mut nn::Optimizer,
    grad_clip: f64,
    loss: f64,
) -> crate::optim::OptimiserStep {
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
        return crate::optim::OptimiserStep {
            grad_norm: 0.0,
            skipped_non_finite: false,
        };
    };
    let finite = grad_norm.is_finite() && loss.is_finite();
    if finite {
        opt.clip_grad_norm(grad_clip);
        opt.step();
    } else {
        tracing::warn!(
            "SFT update skipped: loss {loss}, gradient norm {grad_norm} (not finite); \
             the weights and optimiser state are unchanged"
        );
    }
    crate::optim::OptimiserStep {
        grad_norm,
        skipped_non_finite: !finite,
    }
}
