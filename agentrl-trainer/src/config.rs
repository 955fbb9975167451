//! The run configuration: one TOML file describes a whole run.

use std::path::{Path, PathBuf};

use agentrl_core::{Error, Result, SamplingParams};
use agentrl_env::DemonstratorKnobs;
use agentrl_policy::GptConfig;
use agentrl_policy::llama::{Dtype, LoraConfig};
use agentrl_reward::{OutcomeReward, RewardConfig};
use serde::{Deserialize, Serialize};

use crate::advantage::AdvantageEstimator;
pub use crate::envs::{EnvConfig, EnvSource};
use crate::loss::{DEFAULT_LOSS_AGG_NORM, KlEstimator, KlMode, LossAgg};

/// A whole run: env, model, SFT warm start, RL, pipeline, evaluation and reward.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunConfig {
    /// Seed of everything random in the run (model init, sampling, demonstrations).
    #[serde(default)]
    pub seed: u64,
    /// libtorch intra-op threads per thread that runs tensors.
    #[serde(default = "default_threads")]
    pub torch_threads: i32,
    /// Which env to train on.
    pub env: EnvConfig,
    /// Model shape.
    pub model: ModelConfig,
    /// Behaviour-cloning warm start (needed by `agentrl sft` and `agentrl demo` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sft: Option<SftConfig>,
    /// Reinforcement learning.
    pub rl: RlConfig,
    /// Rollout/training pipeline.
    #[serde(default)]
    pub pipeline: PipelineConfig,
    /// Held-out evaluation.
    #[serde(default)]
    pub eval: EvalConfig,
    /// What a run logs besides `metrics.jsonl` (`[logging]`).
    #[serde(default)]
    pub logging: LoggingConfig,
    /// Reward composition.
    #[serde(default = "default_reward")]
    pub reward: RewardConfig,
    /// Weights (of the `[model]` shape) of the grader, when the reward tree has an `llm_judge`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_checkpoint: Option<std::path::PathBuf>,
    /// Where tensors live: `"auto"` (the first CUDA device when there is one, else the CPU),
    /// `"cpu"`, `"cuda"` or `"cuda:N"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// LoRA adapters for a `[model] pretrained` model (absent: full fine-tuning).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lora: Option<LoraConfig>,
}

/// `[model] shared_prefix_tokens` when absent: a GRPO group's prompt is run once.
fn default_shared_prefix_tokens() -> usize {
    16
}

fn default_threads() -> i32 {
    1
}

fn default_reward() -> RewardConfig {
    RewardConfig::Outcome(OutcomeReward {
        success: 1.0,
        failure: 0.0,
    })
}

/// The model and what bounds its episodes: [`ModelSource`] says which network (the tiny GPT's
/// shape or a pretrained checkpoint); the other fields apply to both.
///
/// In TOML it is one `[model]` table: with `pretrained = PATH` it is a pretrained model
/// (`chat_template` and `dtype` may follow), without it the tiny GPT (`d_model`, `n_layers`,
/// `n_heads`, `ffn_mult`, `rope_theta`); `max_seq_len`, `stop` and `micro_batch` go with either.
/// Mixing the two (a tiny GPT's shape beside `pretrained`, or `dtype = "bf16"` for the tiny
/// GPT) is an error naming the key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "ModelTable", into = "ModelTable")]
pub struct ModelConfig {
    /// Which network.
    pub source: ModelSource,
    /// Context length: the tiny GPT's positions, and the longest episode (in tokens) for
    /// every model.
    pub max_seq_len: usize,
    /// Stop strings that end every generated turn (rollouts and evaluation), besides the chat
    /// format's end-of-turn ids; the token that completes one is kept in the trajectory.
    pub stop: Vec<String>,
    /// Trajectories per forward/backward pass in an update (0: the whole batch); gradients
    /// are accumulated, so this bounds memory without changing the update.
    pub micro_batch: usize,
    /// Padded tokens (rows × longest row) per forward/backward pass of an RL update (0: no
    /// bound); like `micro_batch`, it bounds the activations kept for backward, but follows
    /// the episodes' lengths.
    pub micro_batch_tokens: usize,
    /// An RL update runs a prefix that consecutive episodes share (a GRPO group's prompt)
    /// through the model once when it is at least this many tokens long (default 16; 0: never).
    /// The update is the same up to float rounding, with fewer tokens to compute.
    pub shared_prefix_tokens: usize,
    /// Whether an update's passes are split over replicas of the model that share its weights,
    /// one part per libtorch thread, each with one thread of its own (CPU only; see
    /// `Learner::set_data_parallel`): unset, when the model has at most 16 Mi weights; `true`,
    /// whatever its size; `false`, never (the passes in turn, each with all the threads).
    pub data_parallel: Option<bool>,
}

/// The network a run trains.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelSource {
    /// AgentRL's tiny byte-level GPT, initialised at random, with this shape.
    Tiny(TinyGptShape),
    /// A pretrained Llama-family model with its own shape, tokenizer and chat template.
    Pretrained(PretrainedModel),
}

/// The tiny GPT's shape; its vocabulary comes from the chat format and its context from
/// [`ModelConfig::max_seq_len`].
#[derive(Debug, Clone, PartialEq)]
pub struct TinyGptShape {
    /// Residual width.
    pub d_model: usize,
    /// Transformer blocks.
    pub n_layers: usize,
    /// Attention heads.
    pub n_heads: usize,
    /// MLP width multiple (default 4).
    pub ffn_mult: usize,
    /// RoPE base frequency (default 10000).
    pub rope_theta: f64,
}

/// A pretrained model to train instead of the tiny GPT.
#[derive(Debug, Clone, PartialEq)]
pub struct PretrainedModel {
    /// A llama.cpp `.gguf` file or a Hugging Face directory (`config.json`, safetensors,
    /// `tokenizer.json`, `tokenizer_config.json`). Relative paths are taken from the working
    /// directory.
    pub path: PathBuf,
    /// A Jinja chat template file used instead of the model's own (keeping its BOS/EOS
    /// tokens), e.g. one that renders tools and tool calls.
    pub chat_template: Option<PathBuf>,
    /// The weight type: `f32` (default) or `bf16` (half the memory; LoRA adapters stay f32).
    pub dtype: Dtype,
}

impl ModelConfig {
    /// The pretrained model, when the run trains one.
    pub fn pretrained(&self) -> Option<&PretrainedModel> {
        match &self.source {
            ModelSource::Pretrained(p) => Some(p),
            ModelSource::Tiny(_) => None,
        }
    }

    /// The tiny GPT's full config for a vocabulary; an error for a pretrained model.
    pub fn gpt(&self, vocab_size: usize) -> Result<GptConfig> {
        match &self.source {
            ModelSource::Tiny(shape) => Ok(GptConfig {
                vocab_size,
                d_model: shape.d_model,
                n_layers: shape.n_layers,
                n_heads: shape.n_heads,
                max_seq_len: self.max_seq_len,
                ffn_mult: shape.ffn_mult,
                rope_theta: shape.rope_theta,
            }),
            ModelSource::Pretrained(p) => Err(Error::Config(format!(
                "[model] is the pretrained model {}, not a tiny GPT shape",
                p.path.display()
            ))),
        }
    }
}

/// `[model]` as written in TOML: the union of both sources' keys, checked by
/// `TryFrom<ModelTable> for ModelConfig`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelTable {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pretrained: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    chat_template: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dtype: Option<Dtype>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    stop: Vec<String>,
    #[serde(default)]
    micro_batch: usize,
    #[serde(default)]
    micro_batch_tokens: usize,
    #[serde(default = "default_shared_prefix_tokens")]
    shared_prefix_tokens: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    data_parallel: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    d_model: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    n_layers: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    n_heads: Option<usize>,
    max_seq_len: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ffn_mult: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rope_theta: Option<f64>,
}

impl TryFrom<ModelTable> for ModelConfig {
    type Error = String;

    fn try_from(t: ModelTable) -> std::result::Result<Self, String> {
        let source = match t.pretrained {
            Some(path) => {
                let tiny_keys = [
                    ("d_model", t.d_model.is_some()),
                    ("n_layers", t.n_layers.is_some()),
                    ("n_heads", t.n_heads.is_some()),
                    ("ffn_mult", t.ffn_mult.is_some()),
                    ("rope_theta", t.rope_theta.is_some()),
                ];
                if let Some((key, _)) = tiny_keys.iter().find(|(_, set)| *set) {
                    return Err(format!(
                        "model.{key} is part of the tiny GPT's shape, but model.pretrained \
                         brings its own; remove model.{key}"
                    ));
                }
                ModelSource::Pretrained(PretrainedModel {
                    path,
                    chat_template: t.chat_template,
                    dtype: t.dtype.unwrap_or_default(),
                })
            }
            None => {
                if let Some(dtype) = t.dtype.filter(|d| *d != Dtype::F32) {
                    return Err(format!(
                        "model.dtype = \"{dtype}\" needs a pretrained model (model.pretrained); \
                         the tiny GPT is f32 only"
                    ));
                }
                if t.chat_template.is_some() {
                    return Err(
                        "model.chat_template needs a pretrained model (model.pretrained); the \
                         tiny GPT has its own chat format"
                            .into(),
                    );
                }
                ModelSource::Tiny(TinyGptShape {
                    d_model: t.d_model.unwrap_or(0),
                    n_layers: t.n_layers.unwrap_or(0),
                    n_heads: t.n_heads.unwrap_or(0),
                    ffn_mult: t.ffn_mult.unwrap_or(4),
                    rope_theta: t.rope_theta.unwrap_or(10_000.0),
                })
            }
        };
        Ok(ModelConfig {
            source,
            max_seq_len: t.max_seq_len,
            stop: t.stop,
            micro_batch: t.micro_batch,
            micro_batch_tokens: t.micro_batch_tokens,
            shared_prefix_tokens: t.shared_prefix_tokens,
            data_parallel: t.data_parallel,
        })
    }
}

impl From<ModelConfig> for ModelTable {
    fn from(m: ModelConfig) -> Self {
        let mut t = ModelTable {
            stop: m.stop,
            micro_batch: m.micro_batch,
            micro_batch_tokens: m.micro_batch_tokens,
            shared_prefix_tokens: m.shared_prefix_tokens,
            data_parallel: m.data_parallel,
            max_seq_len: m.max_seq_len,
            ..ModelTable::default()
        };
        match m.source {
            ModelSource::Tiny(shape) => {
                t.d_model = Some(shape.d_model);
                t.n_layers = Some(shape.n_layers);
                t.n_heads = Some(shape.n_heads);
                t.ffn_mult = Some(shape.ffn_mult);
                t.rope_theta = Some(shape.rope_theta);
            }
            ModelSource::Pretrained(p) => {
                t.pretrained = Some(p.path);
                t.chat_template = p.chat_template;
                t.dtype = Some(p.dtype);
            }
        }
        t
    }
}

/// Behaviour cloning from demonstrations.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SftConfig {
    /// Number of demonstration episodes to generate.
    pub demos: usize,
    /// Optimiser steps.
    pub steps: usize,
    /// Trajectories per step.
    pub batch_size: usize,
    /// Peak learning rate (cosine decay to 10%).
    pub lr: f64,
    /// Steps over which the learning rate rises linearly from `lr / warmup_steps` to `lr`
    /// before its cosine decay over the remaining steps (default 0: decay from the first step).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub warmup_steps: usize,
    /// How the per-token cross-entropy is reduced: `token-mean` (default; every token weighs
    /// the same, so envs with long episodes dominate a mixture) or `seq-mean-token-mean` (every
    /// demonstration weighs the same, whatever its length).
    #[serde(default, skip_serializing_if = "is_token_mean")]
    pub loss_agg: LossAgg,
    /// Knobs of the env's imperfect demonstrator (`agentrl env list` names each env's), passed
    /// to [`EnvFactory::demonstrator`](agentrl_env::EnvFactory::demonstrator); empty: the
    /// env's reference solver. A knob the env does not know is an error naming both.
    #[serde(default, skip_serializing_if = "DemonstratorKnobs::is_empty")]
    pub demonstrator: DemonstratorKnobs,
}

impl SftConfig {
    /// The learning rate of SFT step `step` (from 0): the linear warmup over `warmup_steps`,
    /// then a cosine from `lr` down to a tenth of it at the last step.
    pub fn lr_at(&self, step: usize) -> f64 {
        if step < self.warmup_steps {
            return self.lr * (step + 1) as f64 / self.warmup_steps as f64;
        }
        let decay_steps = self.steps.saturating_sub(self.warmup_steps).max(1);
        let progress = (step - self.warmup_steps) as f64 / decay_steps as f64;
        self.lr * (0.1 + 0.9 * 0.5 * (1.0 + (std::f64::consts::PI * progress).cos()))
    }
}

/// The RL algorithm and its hyper-parameters.
///
/// In TOML the sampling and advantage settings are flat keys of `[rl]` (`temperature`,
/// `top_p`, `top_k`, `max_new_tokens`; `advantage`, `task_normalization`, and for
/// `advantage = "gae"` also `gae_lambda`, `gamma`, `critic_lr`, `value_clip`); a key of another
/// estimator is an error naming it. The policy loss's options (`clip_low`, `clip_high`,
/// `dual_clip`, `loss_agg`, `loss_agg_norm`, `entropy_coef`, `kl_estimator`, `kl_mode`) are
/// flat keys too; their defaults are the plain token-mean PPO surrogate with a k3 KL loss. So
/// are the batch options (`dynamic_sampling`, `dynamic_sampling_max_groups`, `overlong`,
/// `overlong_buffer`, `overlong_penalty`, `in_flight`); their defaults change nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RlTable", into = "RlTable")]
pub struct RlConfig {
    /// Optimiser steps.
    pub steps: usize,
    /// Distinct tasks per step.
    pub tasks_per_step: usize,
    /// Rollouts per task (the GRPO group).
    pub group_size: usize,
    /// Learning rate.
    pub lr: f64,
    /// PPO clip range of the importance ratio (default 0.2); the default of both
    /// `clip_low` and `clip_high`.
    pub clip_eps: f64,
    /// Lower clip range: the ratio is clipped below at `1 - clip_low`, in (0, 1]
    /// (default: `clip_eps`).
    pub clip_low: Option<f64>,
    /// Upper clip range: the ratio is clipped above at `1 + clip_high`, > 0 (default:
    /// `clip_eps`); DAPO's "clip-higher" sets it above `clip_low` (e.g. 0.28 with 0.2).
    pub clip_high: Option<f64>,
    /// Dual clip `c` > 1: where the advantage is negative, a token's loss is at most
    /// `c·|A|` however large its ratio (default: off).
    pub dual_clip: Option<f64>,
    /// How per-token losses become the batch's loss: `"token-mean"` (default: sum over the
    /// batch's trained tokens / their count), `"seq-mean-token-mean"` (each sequence's token
    /// mean, then the mean over sequences) or `"seq-mean-token-sum-norm"` (Dr. GRPO: each
    /// sequence's token sum / `loss_agg_norm`, then the mean over sequences).
    pub loss_agg: LossAgg,
    /// The constant dividing each sequence's token sum under
    /// `loss_agg = "seq-mean-token-sum-norm"`, > 0 (default 1024; a natural choice is the
    /// most policy tokens an episode can have).
    pub loss_agg_norm: f64,
    /// Weight of the entropy bonus, >= 0: the policy tokens' entropy, aggregated like the
    /// loss, is subtracted from it (default 0: none).
    pub entropy_coef: f64,
    /// Weight of the KL penalty to the frozen reference (0 disables it).
    pub kl_coef: f64,
    /// The per-token KL estimator, with `d = ref_logp - logp`: `"k1"` (`-d`), `"k2"` (`d²/2`)
    /// or `"k3"` (default: `exp(d) - d - 1`).
    pub kl_estimator: KlEstimator,
    /// Where the KL goes: `"loss"` (default: `kl_coef` × the aggregated KL is added to the
    /// loss) or `"reward"` (`kl_coef` × each trajectory's summed KL is subtracted from its
    /// reward before advantages are computed).
    pub kl_mode: KlMode,
    /// Max global gradient norm.
    pub grad_clip: f64,
    /// How rollouts sample (exploration): temperature (default 1), top-p (1), top-k (0: off)
    /// and tokens per turn (48); stop strings come from `[model] stop`.
    pub sampling: SamplingParams,
    /// How advantages are estimated, with that estimator's own parameters.
    pub advantage: AdvantageConfig,
    /// DAPO's dynamic sampling (default false; group estimators `grpo`, `dr_grpo`, `rloo`
    /// only): a group whose rewards are all equal (no advantage signal) is dropped and the
    /// step's batch refilled from new rollouts until `tasks_per_step` groups have a signal or
    /// `dynamic_sampling_max_groups` groups were drawn.
    pub dynamic_sampling: bool,
    /// Under `dynamic_sampling`: the most groups one step draws, >= `tasks_per_step`; then the
    /// step trains on the groups with a signal it has (default: 3 × `tasks_per_step`; see
    /// [`RlConfig::dynamic_sampling_limit`]).
    pub dynamic_sampling_max_groups: Option<usize>,
    /// Episodes cut short (truncated by the turn limit or the context): `"none"` (default:
    /// trained on like the others), `"mask"` (zero advantage: not trained on) or `"penalty"`
    /// (DAPO's soft overlong punishment on the reward, see `overlong_buffer`).
    pub overlong: OverlongMode,
    /// Under `overlong = "penalty"`: an episode whose tokens (its whole sequence: prompt, env
    /// replies and generated tokens, which `[model] max_seq_len` bounds) exceed
    /// `max_seq_len - overlong_buffer` loses reward linearly, up to `overlong_penalty` at
    /// `max_seq_len`; in [1, `max_seq_len`] (default 64).
    pub overlong_buffer: usize,
    /// Under `overlong = "penalty"`: the reward lost at `[model] max_seq_len` tokens, >= 0
    /// (default 1).
    pub overlong_penalty: f64,
    /// Episodes still running when new weights are published: `"continue"` (default: they go
    /// on, their turns recording mixed policy versions) or `"cancel"` (AgentRL's force-cancel:
    /// they are cancelled and their group played again from scratch under the new weights).
    pub in_flight: InFlight,
    /// Write a checkpoint every this many steps (0: only at the end).
    pub checkpoint_every: usize,
    /// Cross-policy sampling (`[rl.cross_policy]`; absent: every turn by the current policy).
    pub cross_policy: Option<CrossPolicyConfig>,
}

/// `[rl.cross_policy]`: AgentRL's cross-policy sampling. Each turn of a rollout is generated
/// by the current policy (probability `1 - p`), by a stale snapshot of it (probability `p`)
/// refreshed to the current weights every `stale_every` steps, or by one of the `extra`
/// policies served over HTTP; every turn is trained on with the logprobs of the policy that
/// made it. Works with the in-process rollout policy only (not with
/// `[pipeline] rollout_servers`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CrossPolicyConfig {
    /// Probability that a turn is generated by the stale snapshot, in [0, 1] (default 0.25).
    #[serde(default = "default_cross_p")]
    pub p: f64,
    /// The snapshot takes the current weights at every version that is a multiple of this
    /// (and when the run starts), so it lags by at most `stale_every - 1` versions; >= 1
    /// (default 4).
    #[serde(default = "default_stale_every")]
    pub stale_every: u64,
    /// Further policies on OpenAI-compatible servers (`[[rl.cross_policy.extra]]`) that speak
    /// the run's token ids; they keep their own weights.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra: Vec<ExtraPolicyConfig>,
}

/// One `[[rl.cross_policy.extra]]` policy: a server that generates some of the turns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtraPolicyConfig {
    /// Name recorded on its turns (`policy_name`); not `current` or `snapshot`.
    pub name: String,
    /// Server root, e.g. `http://127.0.0.1:8000`.
    pub url: String,
    /// Model name sent in its requests.
    pub model: String,
    /// Its weight, relative to the in-process pair whose weights (`1 - p` and `p`) sum to 1;
    /// finite and >= 0.
    pub weight: f64,
    /// Sent as `Authorization: Bearer KEY` when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
}

fn default_cross_p() -> f64 {
    0.25
}

fn default_stale_every() -> u64 {
    4
}

impl CrossPolicyConfig {
    /// Checks `p`, `stale_every` and the extra policies; errors name the key.
    pub fn validate(&self) -> std::result::Result<(), String> {
        if !(0.0..=1.0).contains(&self.p) {
            return Err(format!(
                "rl.cross_policy.p must be in [0, 1], got {}",
                self.p
            ));
        }
        if self.stale_every == 0 {
            return Err(
                "rl.cross_policy.stale_every must be at least 1 (steps between snapshot \
                 refreshes)"
                    .into(),
            );
        }
        let mut names = vec!["current", "snapshot"];
        for (i, e) in self.extra.iter().enumerate() {
            if e.name.trim().is_empty() || names.contains(&e.name.as_str()) {
                return Err(format!(
                    "rl.cross_policy.extra[{i}].name must be non-empty and differ from \
                     \"current\", \"snapshot\" and the other extras, got {:?}",
                    e.name
                ));
            }
            names.push(e.name.as_str());
            if e.url.trim().is_empty() {
                return Err(format!("rl.cross_policy.extra[{i}].url is empty"));
            }
            if !(e.weight >= 0.0 && e.weight.is_finite()) {
                return Err(format!(
                    "rl.cross_policy.extra[{i}].weight must be finite and >= 0, got {}",
                    e.weight
                ));
            }
        }
        Ok(())
    }
}

/// An advantage estimator and its parameters.
#[derive(Debug, Clone, PartialEq)]
pub enum AdvantageConfig {
    /// From the rewards of a group (the rollouts of one task): `grpo`, `dr_grpo` or `rloo`;
    /// or of the whole batch: `reinforce_pp` (REINFORCE++'s global whitening).
    Group {
        /// Which group baseline.
        estimator: AdvantageEstimator,
        /// Normalise advantages per task across the batch (AgentRL's task advantage
        /// normalisation; default true).
        task_normalization: bool,
    },
    /// PPO: per-token GAE against a learned critic (`gae`).
    Gae(GaeConfig),
}

/// The parameters of PPO's generalised advantage estimation.
#[derive(Debug, Clone, PartialEq)]
pub struct GaeConfig {
    /// GAE's lambda, in `[0, 1]` (default 0.95).
    pub lambda: f64,
    /// The discount per policy token, in `[0, 1]` (default 1).
    pub gamma: f64,
    /// The critic's learning rate (default: `rl.lr`).
    pub critic_lr: Option<f64>,
    /// How far a new value may move from the value the advantages were computed with
    /// (default 0.2).
    pub value_clip: f64,
}

impl Default for GaeConfig {
    fn default() -> Self {
        GaeConfig {
            lambda: 0.95,
            gamma: 1.0,
            critic_lr: None,
            value_clip: 0.2,
        }
    }
}

impl Default for AdvantageConfig {
    fn default() -> Self {
        AdvantageConfig::Group {
            estimator: AdvantageEstimator::Grpo,
            task_normalization: true,
        }
    }
}

impl AdvantageConfig {
    /// Which estimator this is.
    pub fn estimator(&self) -> AdvantageEstimator {
        match self {
            AdvantageConfig::Group { estimator, .. } => *estimator,
            AdvantageConfig::Gae(_) => AdvantageEstimator::Gae,
        }
    }

    /// Whether group advantages are normalised per task (never for `gae`, which whitens its
    /// token advantages over the batch).
    pub fn task_normalization(&self) -> bool {
        matches!(
            self,
            AdvantageConfig::Group {
                task_normalization: true,
                ..
            }
        )
    }

    /// GAE's parameters, when the estimator is `gae`.
    pub fn gae(&self) -> Option<&GaeConfig> {
        match self {
            AdvantageConfig::Gae(g) => Some(g),
            AdvantageConfig::Group { .. } => None,
        }
    }
}

/// `[rl]` as written in TOML, checked by `TryFrom<RlTable> for RlConfig`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RlTable {
    steps: usize,
    tasks_per_step: usize,
    group_size: usize,
    lr: f64,
    #[serde(default = "default_clip")]
    clip_eps: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    clip_low: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    clip_high: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dual_clip: Option<f64>,
    #[serde(default)]
    loss_agg: LossAgg,
    #[serde(default = "default_loss_agg_norm")]
    loss_agg_norm: f64,
    #[serde(default)]
    entropy_coef: f64,
    #[serde(default)]
    kl_coef: f64,
    #[serde(default)]
    kl_estimator: KlEstimator,
    #[serde(default)]
    kl_mode: KlMode,
    #[serde(default = "default_grad_clip")]
    grad_clip: f64,
    #[serde(default = "default_temperature")]
    temperature: f32,
    #[serde(default = "default_top_p")]
    top_p: f32,
    #[serde(default)]
    top_k: usize,
    #[serde(default = "default_max_new_tokens")]
    max_new_tokens: usize,
    #[serde(default)]
    advantage: AdvantageEstimator,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    task_normalization: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gae_lambda: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gamma: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    critic_lr: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    value_clip: Option<f64>,
    #[serde(default)]
    dynamic_sampling: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dynamic_sampling_max_groups: Option<usize>,
    #[serde(default)]
    overlong: OverlongMode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    overlong_buffer: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    overlong_penalty: Option<f64>,
    #[serde(default)]
    in_flight: InFlight,
    #[serde(default)]
    checkpoint_every: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cross_policy: Option<CrossPolicyConfig>,
}

impl TryFrom<RlTable> for RlConfig {
    type Error = String;

    fn try_from(t: RlTable) -> std::result::Result<Self, String> {
        if t.dynamic_sampling_max_groups.is_some() && !t.dynamic_sampling {
            return Err(
                "rl.dynamic_sampling_max_groups applies to dynamic_sampling = true only".into(),
            );
        }
        if t.overlong != OverlongMode::Penalty {
            let penalty_keys = [
                ("overlong_buffer", t.overlong_buffer.is_some()),
                ("overlong_penalty", t.overlong_penalty.is_some()),
            ];
            if let Some((key, _)) = penalty_keys.iter().find(|(_, set)| *set) {
                return Err(format!(
                    "rl.{key} applies to overlong = \"penalty\" only (this run's overlong is \
                     {:?})",
                    t.overlong
                ));
            }
        }
        let advantage = if t.advantage.needs_critic() {
            if t.task_normalization.is_some() {
                return Err(
                    "rl.task_normalization applies to the group estimators (grpo, \
                            dr_grpo, rloo, reinforce_pp); advantage = \"gae\" whitens its \
                            token advantages over the batch"
                        .into(),
                );
            }
            let defaults = GaeConfig::default();
            AdvantageConfig::Gae(GaeConfig {
                lambda: t.gae_lambda.unwrap_or(defaults.lambda),
                gamma: t.gamma.unwrap_or(defaults.gamma),
                critic_lr: t.critic_lr,
                value_clip: t.value_clip.unwrap_or(defaults.value_clip),
            })
        } else {
            let gae_keys = [
                ("gae_lambda", t.gae_lambda.is_some()),
                ("gamma", t.gamma.is_some()),
                ("critic_lr", t.critic_lr.is_some()),
                ("value_clip", t.value_clip.is_some()),
            ];
            if let Some((key, _)) = gae_keys.iter().find(|(_, set)| *set) {
                return Err(format!(
                    "rl.{key} applies to advantage = \"gae\" only (this run's advantage is \
                     {:?})",
                    t.advantage
                ));
            }
            AdvantageConfig::Group {
                estimator: t.advantage,
                task_normalization: t.task_normalization.unwrap_or(true),
            }
        };
        Ok(RlConfig {
            steps: t.steps,
            tasks_per_step: t.tasks_per_step,
            group_size: t.group_size,
            lr: t.lr,
            clip_eps: t.clip_eps,
            clip_low: t.clip_low,
            clip_high: t.clip_high,
            dual_clip: t.dual_clip,
            loss_agg: t.loss_agg,
            loss_agg_norm: t.loss_agg_norm,
            entropy_coef: t.entropy_coef,
            kl_coef: t.kl_coef,
            kl_estimator: t.kl_estimator,
            kl_mode: t.kl_mode,
            grad_clip: t.grad_clip,
            sampling: SamplingParams {
                temperature: t.temperature,
                top_p: t.top_p,
                top_k: t.top_k,
                max_new_tokens: t.max_new_tokens,
                ..SamplingParams::default()
            },
            advantage,
            dynamic_sampling: t.dynamic_sampling,
            dynamic_sampling_max_groups: t.dynamic_sampling_max_groups,
            overlong: t.overlong,
            overlong_buffer: t.overlong_buffer.unwrap_or(DEFAULT_OVERLONG_BUFFER),
            overlong_penalty: t.overlong_penalty.unwrap_or(1.0),
            in_flight: t.in_flight,
            checkpoint_every: t.checkpoint_every,
            cross_policy: t.cross_policy,
        })
    }
}

impl From<RlConfig> for RlTable {
    fn from(c: RlConfig) -> Self {
        let estimator = c.advantage.estimator();
        let (task_normalization, gae) = match c.advantage {
            AdvantageConfig::Group {
                task_normalization, ..
            } => (Some(task_normalization), None),
            AdvantageConfig::Gae(g) => (None, Some(g)),
        };
        RlTable {
            steps: c.steps,
            tasks_per_step: c.tasks_per_step,
            group_size: c.group_size,
            lr: c.lr,
            clip_eps: c.clip_eps,
            clip_low: c.clip_low,
            clip_high: c.clip_high,
            dual_clip: c.dual_clip,
            loss_agg: c.loss_agg,
            loss_agg_norm: c.loss_agg_norm,
            entropy_coef: c.entropy_coef,
            kl_coef: c.kl_coef,
            kl_estimator: c.kl_estimator,
            kl_mode: c.kl_mode,
            grad_clip: c.grad_clip,
            temperature: c.sampling.temperature,
            top_p: c.sampling.top_p,
            top_k: c.sampling.top_k,
            max_new_tokens: c.sampling.max_new_tokens,
            advantage: estimator,
            task_normalization,
            gae_lambda: gae.as_ref().map(|g| g.lambda),
            gamma: gae.as_ref().map(|g| g.gamma),
            critic_lr: gae.as_ref().and_then(|g| g.critic_lr),
            value_clip: gae.as_ref().map(|g| g.value_clip),
            dynamic_sampling: c.dynamic_sampling,
            dynamic_sampling_max_groups: c
                .dynamic_sampling_max_groups
                .filter(|_| c.dynamic_sampling),
            overlong: c.overlong,
            overlong_buffer: (c.overlong == OverlongMode::Penalty).then_some(c.overlong_buffer),
            overlong_penalty: (c.overlong == OverlongMode::Penalty).then_some(c.overlong_penalty),
            in_flight: c.in_flight,
            checkpoint_every: c.checkpoint_every,
            cross_policy: c.cross_policy,
        }
    }
}

fn default_clip() -> f64 {
    0.2
}

/// Serde's `skip_serializing_if` for [`SftConfig::warmup_steps`]: no warmup is left out.
fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Serde's `skip_serializing_if` for `[pipeline] engines`: the default is left out.
fn is_one_engine(n: &usize) -> bool {
    *n == 1
}

/// Serde's `skip_serializing_if` for [`SftConfig::loss_agg`]: the default is left out.
fn is_token_mean(agg: &LossAgg) -> bool {
    *agg == LossAgg::TokenMean
}

fn default_loss_agg_norm() -> f64 {
    DEFAULT_LOSS_AGG_NORM
}
fn default_grad_clip() -> f64 {
    1.0
}
fn default_temperature() -> f32 {
    1.0
}
fn default_top_p() -> f32 {
    1.0
}
fn default_max_new_tokens() -> usize {
    48
}

/// Rollout/training concurrency.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PipelineConfig {
    /// How many policy versions a trained turn may lag behind the weights being trained
    /// (0 = synchronous: generate, then train, then generate again). Older turns are left out
    /// of the loss (`stale_turns_masked` in the metrics); the rest of their episode trains.
    pub max_staleness: u64,
    /// Most rows in the in-process policy's running batch.
    pub max_batch: usize,
    /// MiB of keys and values the in-process policy keeps for episodes between their turns, so
    /// a turn feeds only its new ids (least recently used dropped first; 0 turns reuse off);
    /// a quarter more holds whole first prompts, computed once per group and copied by the
    /// group's other episodes.
    pub kv_cache_mib: u64,
    /// libtorch threads each in-process policy thread uses for its forward passes (default:
    /// `torch_threads`, or half of it for each of cross-policy sampling's two model threads,
    /// which run the current policy and its snapshot at once).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy_threads: Option<i32>,
    /// In-process model threads that generate the RL rollouts (default 1), each serving a
    /// share of the sessions (a session stays with one) with `policy_threads` libtorch
    /// threads, by default `torch_threads` divided among them. For small models on the CPU,
    /// whose forward passes are too small for libtorch's threads to share: two engines of one
    /// thread each decode the tiny Llama's `--vs-trl` batch 1.3× as fast as one of two.
    #[serde(skip_serializing_if = "is_one_engine")]
    pub engines: usize,
    /// Bit-for-bit reproducible rollouts, so that a run resumed from a checkpoint (or run
    /// again) gives the same weights as one never interrupted: the in-process policy
    /// generates one row at a time with no KV caches, since a row's logits otherwise depend in
    /// their last bits on which rows share its batch. Needs `max_staleness = 0`; slower.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub deterministic: bool,
    /// `agentrl serve` processes (`http://HOST:PORT`) that generate the RL rollouts instead of
    /// the in-process policy; empty: in process. After every step the learner writes its
    /// weights (or LoRA adapters) under the run directory and has each server load
    /// them, so the servers must read this machine's files. Evaluation stays in process.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rollout_servers: Vec<String>,
    /// The rollout servers' `--api-key`, when they have one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollout_api_key: Option<String>,
    /// Rollout servers with a push mode each (`[[pipeline.rollout_fleet]]`), beside (after)
    /// `rollout_servers`: `agentrl serve` by path or by HTTP upload, vLLM's runtime LoRA
    /// loading, SGLang's weight update from disk or LoRA loading.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rollout_fleet: Vec<RolloutServerConfig>,
}

impl PipelineConfig {
    /// Whether rollouts run on servers (`rollout_servers` or `rollout_fleet` is not empty).
    pub fn has_rollout_servers(&self) -> bool {
        !self.rollout_servers.is_empty() || !self.rollout_fleet.is_empty()
    }

    /// Every rollout server: `rollout_servers` (mode `agentrl-path`, key `rollout_api_key`),
    /// then `rollout_fleet`, each with the name of its place in the config.
    pub fn fleet(&self) -> Vec<(String, RolloutServerConfig)> {
        let plain = self.rollout_servers.iter().enumerate().map(|(i, url)| {
            let server = RolloutServerConfig {
                url: url.clone(),
                push: PushMode::AgentrlPath,
                api_key_env: None,
                path_prefix: None,
            };
            (format!("pipeline.rollout_servers[{i}]"), server)
        });
        let tables = self
            .rollout_fleet
            .iter()
            .enumerate()
            .map(|(i, s)| (format!("pipeline.rollout_fleet[{i}]"), s.clone()));
        plain.chain(tables).collect()
    }
}

/// How new weights reach one rollout server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PushMode {
    /// `agentrl serve` reading the run directory: `POST /v1/load_weights {"path", "version"}`.
    #[default]
    AgentrlPath,
    /// `agentrl serve` anywhere: the files are uploaded (`PUT /v1/weights/{version}/{file}`
    /// with their SHA-256), then `POST /v1/load_weights {"upload": version}`.
    AgentrlUpload,
    /// vLLM with runtime LoRA updating: `POST /v1/load_lora_adapter`, then
    /// `/v1/unload_lora_adapter` of the previous version; rollouts name the new adapter.
    VllmLora,
    /// SGLang, full weights: `POST /update_weights_from_disk {"model_path"}`.
    SglangDisk,
    /// SGLang with LoRA: `POST /load_lora_adapter`, then `/unload_lora_adapter` of the previous
    /// version; rollouts name the new adapter.
    SglangLora,
}

/// One `[[pipeline.rollout_fleet]]` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RolloutServerConfig {
    /// The server's root, `http://HOST:PORT`.
    pub url: String,
    /// How weights reach it (default `agentrl-path`).
    #[serde(default)]
    pub push: PushMode,
    /// The environment variable holding its API key (sent as a bearer token; default:
    /// `pipeline.rollout_api_key`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// Where the server sees the learner's pushed-weights directory (`RUN/rollout-weights`),
    /// when its file system mounts it elsewhere (path modes only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_prefix: Option<PathBuf>,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        PipelineConfig {
            max_staleness: 1,
            max_batch: 256,
            kv_cache_mib: 1024,
            policy_threads: None,
            engines: 1,
            deterministic: false,
            rollout_servers: Vec::new(),
            rollout_api_key: None,
            rollout_fleet: Vec::new(),
        }
    }
}

/// Held-out evaluation.
///
/// In TOML: `tasks` and `max_new_tokens`, and optionally `temperature`, `top_p` and `top_k`
/// (default: greedy, temperature 0) and `samples` (episodes per task, for pass@k; default 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "EvalTable", into = "EvalTable")]
pub struct EvalConfig {
    /// Number of test-split tasks per env (each env of a mixture plays this many).
    pub tasks: usize,
    /// How evaluation samples (default: greedy, 48 tokens per turn); stop strings come from
    /// `[model] stop`.
    pub sampling: SamplingParams,
    /// Episodes per task (k of pass@k; 1: one episode per task).
    pub samples: usize,
}

impl Default for EvalConfig {
    fn default() -> Self {
        EvalTable::default().into()
    }
}

/// `[eval]` as written in TOML.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct EvalTable {
    tasks: usize,
    max_new_tokens: usize,
    temperature: f32,
    top_p: f32,
    top_k: usize,
    samples: usize,
}

impl Default for EvalTable {
    fn default() -> Self {
        EvalTable {
            tasks: 200,
            max_new_tokens: 48,
            temperature: 0.0,
            top_p: 1.0,
            top_k: 0,
            samples: 1,
        }
    }
}

impl From<EvalTable> for EvalConfig {
    fn from(t: EvalTable) -> Self {
        EvalConfig {
            tasks: t.tasks,
            samples: t.samples,
            sampling: SamplingParams {
                temperature: t.temperature,
                top_p: t.top_p,
                top_k: t.top_k,
                ..SamplingParams::greedy(t.max_new_tokens)
            },
        }
    }
}

impl From<EvalConfig> for EvalTable {
    fn from(c: EvalConfig) -> Self {
        EvalTable {
            tasks: c.tasks,
            max_new_tokens: c.sampling.max_new_tokens,
            temperature: c.sampling.temperature,
            top_p: c.sampling.top_p,
            top_k: c.sampling.top_k,
            samples: c.samples,
        }
    }
}

/// `[logging]`: extra outputs of a run's metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoggingConfig {
    /// Also write every metrics record as TensorBoard scalars under `RUN_DIR/tb/` (default false).
    #[serde(default)]
    pub tensorboard: bool,
}

/// The key of a config file that names the config it starts from (see [`RunConfig::load`]).
pub const BASE_KEY: &str = "base";

/// The most files a chain of `base` keys may hold (a longer one is taken for a loop).
pub const MAX_BASE_DEPTH: usize = 8;

/// `table` (read from `path`) merged over the config its `base` key names, recursively.
fn with_bases(path: &Path, mut table: toml::Table, depth: usize) -> Result<toml::Table> {
    let Some(base) = table.remove(BASE_KEY) else {
        return Ok(table);
    };
    let Some(base) = base.as_str() else {
        return Err(Error::Config(format!(
            "{}: `{BASE_KEY}` must be a path (a string), got {base}",
            path.display()
        )));
    };
    if depth + 1 >= MAX_BASE_DEPTH {
        return Err(Error::Config(format!(
            "{}: more than {MAX_BASE_DEPTH} configs chained by `{BASE_KEY}` (do they name \
             each other in a loop?)",
            path.display()
        )));
    }
    let base_path = path.parent().unwrap_or(Path::new(".")).join(base);
    let text = std::fs::read_to_string(&base_path).map_err(|e| {
        Error::Config(format!(
            "{}: its base {}: {e}",
            path.display(),
            base_path.display()
        ))
    })?;
    let base_table: toml::Table = toml::from_str(&text)
        .map_err(|e| Error::Config(format!("{}: {e}", base_path.display())))?;
    let mut merged = with_bases(&base_path, base_table, depth + 1)?;
    merge_over(&mut merged, table);
    Ok(merged)
}

/// Writes `over` into `base`: tables merge key by key, anything else replaces.
fn merge_over(base: &mut toml::Table, over: toml::Table) {
    for (key, value) in over {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(inner)), toml::Value::Table(value)) => {
                merge_over(inner, value)
            }
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

impl RunConfig {
    /// Parses a TOML config; errors name the file and the field.
    pub fn from_toml_str(text: &str, origin: &str) -> Result<Self> {
        let cfg: RunConfig =
            toml::from_str(text).map_err(|e| Error::Config(format!("{origin}: {e}")))?;
        cfg.validate()
            .map_err(|e| Error::Config(format!("{origin}: {e}")))?;
        cfg.check_demonstrator()
            .map_err(|e| Error::Config(format!("{origin}: sft.demonstrator: {e}")))?;
        Ok(cfg)
    }

    /// A tiny `arith-calc` config for unit tests: `rest` (its `[rl]` table and any others)
    /// after an 8-wide one-layer model with a context of 32.
    #[cfg(test)]
    pub(crate) fn tiny_for_tests(rest: &str) -> Self {
        let header = "[env]\nid = \"arith-calc\"\n[model]\nd_model = 8\nn_layers = 1\n\
                      n_heads = 1\nmax_seq_len = 32\n";
        RunConfig::from_toml_str(&format!("{header}{rest}"), "test").expect("valid")
    }

    /// Reads and parses a TOML config file.
    ///
    /// A file may start from another: `base = "PATH"` (relative to the file) names a config
    /// whose keys it overrides. Tables merge key by key (`[rl] lr = 1e-4` changes only `lr`);
    /// any other value, arrays included (`[[env.mix]]`), replaces the base's. A base may have
    /// a base of its own, up to [`MAX_BASE_DEPTH`] files.
    pub fn load(path: &Path) -> Result<Self> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| Error::io("reading", path, e))?;
        let table: toml::Table =
            toml::from_str(&text).map_err(|e| Error::Config(format!("{origin}: {e}")))?;
        if !table.contains_key(BASE_KEY) {
            return Self::from_toml_str(&text, &origin);
        }
        let merged = with_bases(path, table, 0)?;
        let origin = format!("{origin} (merged over its base)");
        let cfg: RunConfig = toml::Value::Table(merged)
            .try_into()
            .map_err(|e| Error::Config(format!("{origin}: {e}")))?;
        cfg.validate()
            .map_err(|e| Error::Config(format!("{origin}: {e}")))?;
        cfg.check_demonstrator()
            .map_err(|e| Error::Config(format!("{origin}: sft.demonstrator: {e}")))?;
        Ok(cfg)
    }

    /// The `[sft]` section; an error naming the command's need when the config has none.
    pub fn sft(&self) -> Result<&SftConfig> {
        self.sft.as_ref().ok_or_else(|| {
            Error::Config(
                "this command needs an [sft] section (demos, steps, batch_size, lr) in the run \
                 config"
                    .into(),
            )
        })
    }

    /// Asks the env whether it knows the `[sft.demonstrator]` knobs and their values (an env
    /// builds its demonstrator without any network or file access).
    pub fn check_demonstrator(&self) -> Result<()> {
        let Some(sft) = &self.sft else {
            return Ok(());
        };
        if sft.demonstrator.is_empty() {
            return Ok(());
        }
        let factory = crate::envs::env_factory(&self.env)?;
        factory.demonstrator(&sft.demonstrator, self.seed).map(drop)
    }

    /// Checks values that serde cannot.
    pub fn validate(&self) -> std::result::Result<(), String> {
        let rl = &self.rl;
        match rl.advantage.gae() {
            Some(gae) => {
                if rl.group_size == 0 {
                    return Err("rl.group_size must be at least 1".into());
                }
                for (name, v) in [("rl.gae_lambda", gae.lambda), ("rl.gamma", gae.gamma)] {
                    if !(0.0..=1.0).contains(&v) {
                        return Err(format!("{name} must be in [0, 1], got {v}"));
                    }
                }
                if !(gae.value_clip > 0.0 && gae.value_clip.is_finite()) {
                    return Err(format!("rl.value_clip must be > 0, got {}", gae.value_clip));
                }
            }
            None if rl.group_size < 2 && rl.advantage.estimator().needs_group() => {
                return Err(
                    "rl.group_size must be at least 2 (advantages are relative to the group; \
                     advantage = \"reinforce_pp\" uses the batch's baseline instead, and \
                     \"gae\" learns a critic)"
                        .into(),
                );
            }
            None if rl.group_size == 0 => {
                return Err("rl.group_size must be at least 1".into());
            }
            None => {}
        }
        if rl.tasks_per_step == 0 || self.sft.as_ref().is_some_and(|s| s.batch_size == 0) {
            return Err("rl.tasks_per_step and sft.batch_size must be positive".into());
        }
        let mut rates = vec![("rl.lr", rl.lr)];
        if let Some(sft) = &self.sft {
            rates.push(("sft.lr", sft.lr));
            if sft.warmup_steps > sft.steps {
                return Err(format!(
                    "sft.warmup_steps ({}) must not exceed sft.steps ({})",
                    sft.warmup_steps, sft.steps
                ));
            }
            if sft.loss_agg == LossAgg::SeqMeanTokenSumNorm {
                return Err(
                    "sft.loss_agg must be \"token-mean\" or \"seq-mean-token-mean\" \
                     (\"seq-mean-token-sum-norm\" is a policy-loss option of [rl])"
                        .into(),
                );
            }
        }
        if let Some(gae) = rl.advantage.gae() {
            rates.push(("rl.critic_lr", gae.critic_lr.unwrap_or(rl.lr)));
        }
        for (name, v) in rates {
            if !(v > 0.0 && v.is_finite()) {
                return Err(format!("{name} must be a positive number, got {v}"));
            }
        }
        if !(rl.clip_eps > 0.0 && rl.kl_coef >= 0.0 && rl.grad_clip > 0.0) {
            return Err("rl.clip_eps and rl.grad_clip must be > 0, rl.kl_coef >= 0".into());
        }
        check_policy_loss(rl)?;
        check_batch_shaping(rl, self.model.max_seq_len)?;
        if let Some(cross) = &rl.cross_policy {
            cross.validate()?;
            if self.pipeline.has_rollout_servers() {
                return Err(CROSS_WITH_SERVERS.into());
            }
        }
        if self.pipeline.deterministic
            && (self.pipeline.max_staleness != 0 || self.pipeline.has_rollout_servers())
        {
            return Err(
                "pipeline.deterministic needs pipeline.max_staleness = 0 and the in-process \
                 policy (no rollout servers): the asynchronous pipeline's batches depend on \
                 timing"
                    .into(),
            );
        }
        check_sampling("rl", &rl.sampling)?;
        check_sampling("eval", &self.eval.sampling)?;
        if self.eval.samples == 0 {
            return Err("eval.samples must be at least 1 (episodes per task)".into());
        }
        if let Some(i) = self.model.stop.iter().position(String::is_empty) {
            return Err(format!(
                "model.stop[{i}] is an empty string (it would end every turn at once)"
            ));
        }
        match (&self.model.source, &self.lora) {
            (ModelSource::Tiny(_), Some(_)) => {
                return Err("[lora] needs a pretrained model ([model] pretrained = PATH)".into());
            }
            (ModelSource::Tiny(shape), None) => {
                if shape.d_model == 0 || shape.n_layers == 0 || shape.n_heads == 0 {
                    return Err(
                        "model.d_model, model.n_layers and model.n_heads must be positive \
                         (or set model.pretrained)"
                            .into(),
                    );
                }
            }
            (ModelSource::Pretrained(_), lora) => {
                if let Some(lora) = lora {
                    lora.validate().map_err(|e| e.to_string())?;
                }
            }
        }
        if let Some(device) = &self.device {
            agentrl_policy::device::parse_device_name(device)?;
        }
        if self.torch_threads < 1 {
            return Err("torch_threads must be at least 1".into());
        }
        if self.pipeline.policy_threads.is_some_and(|n| n < 1) {
            return Err("pipeline.policy_threads must be at least 1".into());
        }
        let pipeline = &self.pipeline;
        if pipeline.engines == 0 {
            return Err("pipeline.engines must be at least 1".into());
        }
        if pipeline.engines > 1 {
            let conflict = if pipeline.deterministic {
                Some("pipeline.deterministic (one row at a time on one model thread)")
            } else if pipeline.has_rollout_servers() {
                Some("pipeline.rollout_servers (the servers generate the rollouts)")
            } else if self.rl.cross_policy.is_some() {
                Some("rl.cross_policy (which runs its own two model threads)")
            } else {
                None
            };
            if let Some(conflict) = conflict {
                return Err(format!(
                    "pipeline.engines = {} cannot be combined with {conflict}; set engines = 1",
                    pipeline.engines
                ));
            }
        }
        Ok(())
    }
}

/// Why `[rl.cross_policy]` and `[pipeline] rollout_servers` cannot be combined.
pub const CROSS_WITH_SERVERS: &str = "rl.cross_policy is not supported with \
     pipeline.rollout_servers (the stale snapshot is an in-process policy); remove one of them";

/// `[rl] overlong_buffer`'s default, in tokens.
pub const DEFAULT_OVERLONG_BUFFER: usize = 64;

impl RlConfig {
    /// Under `dynamic_sampling`, the most groups one step draws: `dynamic_sampling_max_groups`,
    /// by default 3 × `tasks_per_step`.
    pub fn dynamic_sampling_limit(&self) -> usize {
        self.dynamic_sampling_max_groups
            .unwrap_or_else(|| self.tasks_per_step.saturating_mul(3))
    }
}

/// Checks `[rl]`'s dynamic sampling and overlong options.
fn check_batch_shaping(rl: &RlConfig, max_seq_len: usize) -> std::result::Result<(), String> {
    if rl.dynamic_sampling {
        if !rl.advantage.estimator().needs_group() {
            return Err(format!(
                "rl.dynamic_sampling needs a group estimator (advantage = \"grpo\", \"dr_grpo\" \
                 or \"rloo\"), whose all-equal groups have no signal; this run's advantage is \
                 {:?}",
                rl.advantage.estimator()
            ));
        }
        let limit = rl.dynamic_sampling_limit();
        if limit < rl.tasks_per_step {
            return Err(format!(
                "rl.dynamic_sampling_max_groups must be at least rl.tasks_per_step ({}), got \
                 {limit}",
                rl.tasks_per_step
            ));
        }
    }
    if rl.overlong == OverlongMode::Penalty {
        if !(1..=max_seq_len).contains(&rl.overlong_buffer) {
            return Err(format!(
                "rl.overlong_buffer must be in [1, model.max_seq_len = {max_seq_len}], got {}",
                rl.overlong_buffer
            ));
        }
        if !(rl.overlong_penalty >= 0.0 && rl.overlong_penalty.is_finite()) {
            return Err(format!(
                "rl.overlong_penalty must be >= 0, got {}",
                rl.overlong_penalty
            ));
        }
    }
    Ok(())
}

/// Checks the policy loss's options of `[rl]` (clip ranges, dual clip, aggregation constant,
/// entropy weight).
fn check_policy_loss(rl: &RlConfig) -> std::result::Result<(), String> {
    let low = rl.clip_low.unwrap_or(rl.clip_eps);
    if !(low > 0.0 && low <= 1.0) {
        let key = if rl.clip_low.is_some() {
            "rl.clip_low"
        } else {
            "rl.clip_eps (the default of rl.clip_low)"
        };
        return Err(format!("{key} must be in (0, 1], got {low}"));
    }
    let high = rl.clip_high.unwrap_or(rl.clip_eps);
    if !(high > 0.0 && high.is_finite()) {
        return Err(format!("rl.clip_high must be > 0, got {high}"));
    }
    if let Some(c) = rl.dual_clip
        && !(c > 1.0 && c.is_finite())
    {
        return Err(format!(
            "rl.dual_clip must be > 1 (it bounds a negative-advantage token's loss at \
             dual_clip × |A|), got {c}"
        ));
    }
    if !(rl.loss_agg_norm > 0.0 && rl.loss_agg_norm.is_finite()) {
        return Err(format!(
            "rl.loss_agg_norm must be > 0, got {}",
            rl.loss_agg_norm
        ));
    }
    if !(rl.entropy_coef >= 0.0 && rl.entropy_coef.is_finite()) {
        return Err(format!(
            "rl.entropy_coef must be >= 0, got {}",
            rl.entropy_coef
        ));
    }
    Ok(())
}

/// Checks the sampling settings of `[section]`.
fn check_sampling(section: &str, p: &SamplingParams) -> std::result::Result<(), String> {
    if !(p.temperature >= 0.0 && p.temperature.is_finite()) {
        return Err(format!(
            "{section}.temperature must be >= 0, got {}",
            p.temperature
        ));
    }
    if !(p.top_p > 0.0 && p.top_p <= 1.0) {
        return Err(format!(
            "{section}.top_p must be in (0, 1], got {}",
            p.top_p
        ));
    }
    if p.max_new_tokens == 0 {
        return Err(format!("{section}.max_new_tokens must be at least 1"));
    }
    Ok(())
}

/// What happens to episodes still running when the learner publishes new weights
/// (`[rl] in_flight`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InFlight {
    /// They go on with the new weights; their turns record the versions that generated them.
    #[default]
    Continue,
    /// AgentRL's force-cancel: they are cancelled and their group is played again from scratch
    /// under the new weights.
    Cancel,
}

/// How episodes cut short (by the turn limit or the context) are treated (`[rl] overlong`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OverlongMode {
    /// Like any other episode.
    #[default]
    None,
    /// Truncated episodes get zero advantage: they are not trained on.
    Mask,
    /// DAPO's soft overlong punishment ([`overlong_penalty`](crate::pipeline::overlong_penalty)) on every episode's reward.
    Penalty,
}
