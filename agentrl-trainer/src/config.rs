//! The run configuration: one TOML file describes a whole run.

use std::path::Path;

use agentrl_core::{Error, Result};
use agentrl_policy::GptConfig;
use agentrl_policy::llama::{Dtype, LoraConfig};
use agentrl_reward::RewardConfig;
use serde::{Deserialize, Serialize};

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
    /// Behaviour-cloning warm start.
    pub sft: SftConfig,
    /// Reinforcement learning.
    pub rl: RlConfig,
    /// Rollout/training pipeline.
    #[serde(default)]
    pub pipeline: PipelineConfig,
    /// Held-out evaluation.
    #[serde(default)]
    pub eval: EvalConfig,
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

fn default_threads() -> i32 {
    1
}

fn default_reward() -> RewardConfig {
    RewardConfig::Outcome {
        success: 1.0,
        failure: 0.0,
    }
}

/// Which env(s) to train on: one env (`id`, in process or on `server`) or a weighted
/// mixture (`mix`); see [`crate::envs`].
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvConfig {
    /// Registry id (see `agentrl env list`), or the env's name on `server`; empty with `mix`.
    #[serde(default)]
    pub id: String,
    /// Env server or controller to run the sessions on (`http://HOST:PORT`); default: in
    /// process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// Bearer token of `server`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// Turn limit of an env only `server` knows (default 16; registered envs bring their own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<usize>,
    /// Several envs, each drawn with its weight (a multi-task run); replaces `id`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mix: Vec<EnvSource>,
}

/// One env of a mixture: the fields of [`EnvConfig`] for one env, and its weight.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvSource {
    /// Registry id, or the env's name on `server`.
    pub id: String,
    /// Env server or controller to run the sessions on; default: in process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// Bearer token of `server`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// Turn limit of an env only `server` knows (default 16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<usize>,
    /// Relative share of the tasks (default 1).
    #[serde(default = "default_weight")]
    pub weight: f64,
}

fn default_weight() -> f64 {
    1.0
}

/// The model: the tiny GPT's shape (its vocabulary comes from the chat format), or a
/// pretrained Llama-family model (`pretrained`), which brings its own shape, tokenizer and chat
/// template.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// A pretrained model to train instead of the tiny GPT: a llama.cpp `.gguf` file or a
    /// Hugging Face directory (`config.json`, safetensors, `tokenizer.json`,
    /// `tokenizer_config.json`). Relative paths are taken from the working directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pretrained: Option<std::path::PathBuf>,
    /// A Jinja chat template file used instead of the pretrained model's own (keeping its
    /// BOS/EOS tokens), e.g. one that renders tools and tool calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat_template: Option<std::path::PathBuf>,
    /// The pretrained model's weight type: `f32` (default) or `bf16` (half the memory; LoRA
    /// adapters stay f32). The tiny GPT is f32 only.
    #[serde(default)]
    pub dtype: Dtype,
    /// Stop strings that end every generated turn (rollouts and evaluation), besides the chat
    /// format's end-of-turn ids; the token that completes one is kept in the trajectory.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<String>,
    /// Trajectories per forward/backward pass in an update (0: the whole batch); gradients
    /// are accumulated, so this bounds memory without changing the update.
    #[serde(default)]
    pub micro_batch: usize,
    /// Residual width (tiny GPT).
    #[serde(default)]
    pub d_model: usize,
    /// Transformer blocks (tiny GPT).
    #[serde(default)]
    pub n_layers: usize,
    /// Attention heads (tiny GPT).
    #[serde(default)]
    pub n_heads: usize,
    /// Context length: the tiny GPT's positions, and the longest episode (in tokens) for
    /// every model.
    pub max_seq_len: usize,
    /// MLP width multiple.
    #[serde(default = "default_ffn_mult")]
    pub ffn_mult: usize,
    /// RoPE base frequency.
    #[serde(default = "default_rope_theta")]
    pub rope_theta: f64,
}

fn default_rope_theta() -> f64 {
    10_000.0
}

fn default_ffn_mult() -> usize {
    4
}

impl ModelConfig {
    /// The full model config for a vocabulary.
    pub fn gpt(&self, vocab_size: usize) -> GptConfig {
        GptConfig {
            vocab_size,
            d_model: self.d_model,
            n_layers: self.n_layers,
            n_heads: self.n_heads,
            max_seq_len: self.max_seq_len,
            ffn_mult: self.ffn_mult,
            rope_theta: self.rope_theta,
        }
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
    /// The imperfect demonstrator.
    pub demonstrator: DemonstratorConfig,
}

/// How often the demonstrator uses the tool and miscopies results.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DemonstratorConfig {
    /// Probability of calling the calculator on two-operand tasks.
    pub tool_prob_two_operands: f64,
    /// Probability of calling the calculator on three-operand tasks.
    pub tool_prob_three_operands: f64,
    /// Probability of miscopying the tool's result.
    pub copy_error_prob: f64,
}

/// The RL algorithm and its hyper-parameters.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RlConfig {
    /// Optimiser steps.
    pub steps: usize,
    /// Distinct tasks per step.
    pub tasks_per_step: usize,
    /// Rollouts per task (the GRPO group).
    pub group_size: usize,
    /// Learning rate.
    pub lr: f64,
    /// PPO clip range of the importance ratio.
    #[serde(default = "default_clip")]
    pub clip_eps: f64,
    /// Weight of the k3 KL penalty to the frozen reference (0 disables it).
    #[serde(default)]
    pub kl_coef: f64,
    /// Max global gradient norm.
    #[serde(default = "default_grad_clip")]
    pub grad_clip: f64,
    /// Rollout temperature (exploration).
    #[serde(default = "default_temperature")]
    pub temperature: f32,
    /// Rollout nucleus mass.
    #[serde(default = "default_top_p")]
    pub top_p: f32,
    /// Rollout top-k (0 = off).
    #[serde(default)]
    pub top_k: usize,
    /// Max tokens per turn.
    #[serde(default = "default_max_new_tokens")]
    pub max_new_tokens: usize,
    /// How advantages are estimated: from a group's rewards, `grpo` (default), `dr_grpo` or
    /// `rloo`; or per token against a learned critic, `gae` (PPO).
    #[serde(default)]
    pub advantage: crate::advantage::AdvantageEstimator,
    /// PPO (`advantage = "gae"`): GAE's lambda, in `[0, 1]`.
    #[serde(default = "default_gae_lambda")]
    pub gae_lambda: f64,
    /// PPO: the discount per policy token, in `[0, 1]`.
    #[serde(default = "default_gamma")]
    pub gamma: f64,
    /// PPO: the critic's learning rate (default: `lr`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub critic_lr: Option<f64>,
    /// PPO: how far a new value may move from the value the advantages were computed with.
    #[serde(default = "default_value_clip")]
    pub value_clip: f64,
    /// Normalise advantages per task across the batch (AgentRL's task advantage normalisation;
    /// group estimators only: `gae` whitens its token advantages over the whole batch instead).
    #[serde(default = "default_true")]
    pub task_normalization: bool,
    /// Write a checkpoint every this many steps (0: only at the end).
    #[serde(default)]
    pub checkpoint_every: usize,
}

fn default_clip() -> f64 {
    0.2
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
fn default_gae_lambda() -> f64 {
    0.95
}
fn default_gamma() -> f64 {
    1.0
}
fn default_value_clip() -> f64 {
    0.2
}
fn default_true() -> bool {
    true
}

/// Rollout/training concurrency.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PipelineConfig {
    /// How many policy versions a sample may lag behind the weights being trained
    /// (0 = synchronous: generate, then train, then generate again).
    pub max_staleness: u64,
    /// Max rows in one generation batch.
    pub max_batch: usize,
    /// `agentrl serve` processes (`http://HOST:PORT`) that generate the RL rollouts instead of
    /// the in-process policy; empty: in process. After every step the learner writes its
    /// weights (or LoRA adapters) under the run directory and has each server load
    /// them, so the servers must read this machine's files. Evaluation stays in process.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rollout_servers: Vec<String>,
    /// The rollout servers' `--api-key`, when they have one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollout_api_key: Option<String>,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        PipelineConfig {
            max_staleness: 1,
            max_batch: 256,
            rollout_servers: Vec::new(),
            rollout_api_key: None,
        }
    }
}

/// Held-out evaluation.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EvalConfig {
    /// Number of test-split tasks.
    pub tasks: usize,
    /// Max tokens per turn.
    pub max_new_tokens: usize,
}

impl Default for EvalConfig {
    fn default() -> Self {
        EvalConfig {
            tasks: 200,
            max_new_tokens: 48,
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
        Ok(cfg)
    }

    /// Reads and parses a TOML config file.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io("reading", path, e))?;
        Self::from_toml_str(&text, &path.display().to_string())
    }

    /// Checks values that serde cannot.
    pub fn validate(&self) -> std::result::Result<(), String> {
        let rl = &self.rl;
        if rl.advantage.needs_critic() {
            if rl.group_size == 0 {
                return Err("rl.group_size must be at least 1".into());
            }
            for (name, v) in [("rl.gae_lambda", rl.gae_lambda), ("rl.gamma", rl.gamma)] {
                if !(0.0..=1.0).contains(&v) {
                    return Err(format!("{name} must be in [0, 1], got {v}"));
                }
            }
            if !(rl.value_clip > 0.0 && rl.value_clip.is_finite()) {
                return Err(format!("rl.value_clip must be > 0, got {}", rl.value_clip));
            }
        } else if rl.group_size < 2 {
            return Err(
                "rl.group_size must be at least 2 (advantages are relative to the group; \
                 advantage = \"gae\" learns a critic instead)"
                    .into(),
            );
        }
        if rl.tasks_per_step == 0 || self.sft.batch_size == 0 {
            return Err("rl.tasks_per_step and sft.batch_size must be positive".into());
        }
        let critic_lr = rl.critic_lr.unwrap_or(rl.lr);
        for (name, v) in [
            ("rl.lr", rl.lr),
            ("sft.lr", self.sft.lr),
            ("rl.critic_lr", critic_lr),
        ] {
            if !(v > 0.0 && v.is_finite()) {
                return Err(format!("{name} must be a positive number, got {v}"));
            }
        }
        if !(rl.clip_eps > 0.0 && rl.kl_coef >= 0.0 && rl.grad_clip > 0.0) {
            return Err("rl.clip_eps and rl.grad_clip must be > 0, rl.kl_coef >= 0".into());
        }
        if let Some(i) = self.model.stop.iter().position(String::is_empty) {
            return Err(format!(
                "model.stop[{i}] is an empty string (it would end every turn at once)"
            ));
        }
        match (&self.model.pretrained, &self.lora) {
            (None, Some(_)) => {
                return Err("[lora] needs a pretrained model ([model] pretrained = PATH)".into());
            }
            (None, None) => {
                let m = &self.model;
                if m.dtype != Dtype::F32 {
                    return Err(format!(
                        "model.dtype = \"{}\" needs a pretrained model (model.pretrained); the \
                         tiny GPT is f32 only",
                        m.dtype
                    ));
                }
                if m.d_model == 0 || m.n_layers == 0 || m.n_heads == 0 {
                    return Err(
                        "model.d_model, model.n_layers and model.n_heads must be positive \
                         (or set model.pretrained)"
                            .into(),
                    );
                }
            }
            (Some(_), lora) => {
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
        let d = &self.sft.demonstrator;
        for (name, p) in [
            ("tool_prob_two_operands", d.tool_prob_two_operands),
            ("tool_prob_three_operands", d.tool_prob_three_operands),
            ("copy_error_prob", d.copy_error_prob),
        ] {
            if !(0.0..=1.0).contains(&p) {
                return Err(format!(
                    "sft.demonstrator.{name} must be in [0, 1], got {p}"
                ));
            }
        }
        Ok(())
    }
}
