//! Reward functions described in configuration files (TOML, JSON, ...), and their validation.
//!
//! Every reward and composer is one `type` of [`RewardConfig`]; composers hold their inner
//! rewards as nested tables, so a run's `[reward]` table is a tree. [`RewardConfig::build`]
//! checks every value and names the offending one by its path (`reward.terms[1].reward.min`).

mod build;

use serde::{Deserialize, Serialize};

use crate::{EfficiencyMeasure, IncompletePunishment, LengthUnit, OutcomeReward};

pub use build::RewardContext;

/// A reward function as written in a config file, tagged by `type`:
///
/// ```toml
/// [reward]
/// type = "weighted_sum"
/// [[reward.terms]]
/// weight = 1.0
/// reward = { type = "outcome" }
/// [[reward.terms]]
/// weight = 0.1
/// reward = { type = "format" }
/// ```
///
/// Composers nest: `{ type = "gate", threshold = 1.0, condition = { type = "format" },
/// reward = { type = "outcome" } }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum RewardConfig {
    /// [`OutcomeReward`]; `success` defaults to 1.0 and `failure` to 0.0.
    Outcome {
        /// Reward of a solved task.
        #[serde(default = "default_success")]
        success: f64,
        /// Reward of an unsolved task.
        #[serde(default = "default_failure")]
        failure: f64,
    },
    /// [`FormatReward`](crate::FormatReward).
    Format {},
    /// [`IncompletePunishment`]; `penalty` defaults to -0.2 and must be <= 0.
    IncompletePunishment {
        /// Value added to an incomplete episode's reward.
        #[serde(default = "default_penalty")]
        penalty: f64,
    },
    /// [`LengthPenalty`](crate::LengthPenalty); `per_token` must be >= 0.
    LengthPenalty {
        /// Generated tokens allowed without penalty.
        max_generated_tokens: usize,
        /// Penalty per token beyond the budget.
        per_token: f64,
    },
    /// [`WeightedSum`](crate::WeightedSum) of at least one term; terms must produce distinct parts.
    WeightedSum {
        /// The weighted terms.
        terms: Vec<WeightedTermConfig>,
    },
    /// [`ScoreReward`](crate::ScoreReward): the env's graded score.
    Score {
        /// Value when the env gave no score (default: 1.0 if solved, else 0.0).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        missing: Option<f64>,
    },
    /// [`Efficiency`](crate::Efficiency): 1 at `best` or less, 0 at `worst` or more.
    Efficiency {
        /// `turns`, `tokens` or `tool_calls`.
        measure: EfficiencyMeasure,
        /// Cost at or below which the reward is 1 (>= 0).
        best: f64,
        /// Cost at or above which the reward is 0 (> `best`).
        worst: f64,
        /// Give 0 to unsolved trajectories (default true).
        #[serde(default = "default_true")]
        only_on_success: bool,
    },
    /// [`ToolFormat`](crate::ToolFormat): calls parse, name known tools, an answer is given.
    ToolFormat {
        /// Names of the tools that exist (empty: any non-blank name).
        #[serde(default)]
        tools: Vec<String>,
    },
    /// [`Length`](crate::Length): penalty past a budget of tokens or characters.
    Length {
        /// `tokens` or `chars`.
        unit: LengthUnit,
        /// Length allowed without penalty.
        budget: usize,
        /// Penalty per unit beyond the budget (>= 0).
        per_unit: f64,
    },
    /// [`Execution`](crate::Execution) by a [`CommandCheck`](crate::CommandCheck), or with
    /// `sandbox = true` a [`SandboxCheck`](crate::SandboxCheck): the command gets the final
    /// answer on stdin and passes with exit status 0.
    Execution {
        /// Program and arguments (at least the program).
        command: Vec<String>,
        /// Time limit of one run in milliseconds (default 10 000).
        #[serde(default = "default_execution_timeout_ms")]
        timeout_ms: u64,
        /// Run the command inside the bubblewrap sandbox, in a fresh workspace holding
        /// `answer.txt` and `files` (default false: run it directly).
        #[serde(default)]
        sandbox: bool,
        /// Host files copied into the sandbox workspace (only with `sandbox = true`).
        #[serde(default)]
        files: Vec<std::path::PathBuf>,
    },
    /// [`LlmJudge`](crate::LlmJudge); needs a judge backend from the
    /// [`RewardContext`] given to [`RewardConfig::build_with`].
    LlmJudge {
        /// What to grade and how.
        rubric: String,
        /// Worst grade the judge is asked for (default 0).
        #[serde(default)]
        scale_min: f64,
        /// Best grade the judge is asked for (default 10).
        #[serde(default = "default_scale_max")]
        scale_max: f64,
        /// Score in `[0, 1]` for answers without a usable grade, errors and time-outs (default 0).
        #[serde(default)]
        fallback: f64,
        /// Time limit of one judge call in milliseconds (default 30 000).
        #[serde(default = "default_judge_timeout_ms")]
        timeout_ms: u64,
        /// Judge calls in flight at once (default 4).
        #[serde(default = "default_max_concurrency")]
        max_concurrency: usize,
        /// Verdicts cached by prompt (default 10 000; 0 disables the cache).
        #[serde(default = "default_cache_capacity")]
        cache_capacity: usize,
        /// Characters of the conversation shown to the judge, from its end (default 4 000).
        #[serde(default = "default_max_transcript_chars")]
        max_transcript_chars: usize,
    },
    /// [`Gate`](crate::Gate): `reward` counts only when `condition` reaches `threshold`.
    Gate {
        /// Decides whether the gate is open.
        condition: Box<RewardConfig>,
        /// The gated reward.
        reward: Box<RewardConfig>,
        /// The gate opens when the condition's total is at least this (default 1, i.e. the
        /// condition fully met).
        #[serde(default = "default_gate_threshold")]
        threshold: f64,
        /// Total of a closed gate (default 0).
        #[serde(default)]
        otherwise: f64,
    },
    /// [`Clip`](crate::Clip): the reward's total clamped into `[min, max]`.
    Clip {
        /// The clipped reward.
        reward: Box<RewardConfig>,
        /// Lower bound.
        min: f64,
        /// Upper bound (>= `min`).
        max: f64,
    },
    /// [`ScaleOffset`](crate::ScaleOffset): `scale · total + offset`.
    ScaleOffset {
        /// The transformed reward.
        reward: Box<RewardConfig>,
        /// Factor (default 1).
        #[serde(default = "default_one")]
        scale: f64,
        /// Added after scaling (default 0).
        #[serde(default)]
        offset: f64,
    },
    /// [`TurnShaping`](crate::TurnShaping): discounted sum of the env's per-turn rewards.
    TurnShaping {
        /// Per-turn discount in `[0, 1]` (default 1).
        #[serde(default = "default_one")]
        discount: f64,
    },
    /// [`RunningNorm`](crate::RunningNorm): the total normalised by running statistics
    /// (stateful: one state per built reward).
    RunningNorm {
        /// The normalised reward.
        reward: Box<RewardConfig>,
        /// Added to the standard deviation (> 0, default 1e-6).
        #[serde(default = "default_eps")]
        eps: f64,
    },
}

/// One term of a `weighted_sum`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WeightedTermConfig {
    /// Factor applied to the term's total (finite).
    pub weight: f64,
    /// The term.
    pub reward: RewardConfig,
}

fn default_success() -> f64 {
    OutcomeReward::default().success
}

fn default_failure() -> f64 {
    OutcomeReward::default().failure
}

fn default_penalty() -> f64 {
    IncompletePunishment::default().penalty
}

fn default_true() -> bool {
    true
}

fn default_one() -> f64 {
    1.0
}

fn default_eps() -> f64 {
    1e-6
}

fn default_scale_max() -> f64 {
    10.0
}

fn default_execution_timeout_ms() -> u64 {
    10_000
}

fn default_judge_timeout_ms() -> u64 {
    30_000
}

fn default_max_concurrency() -> usize {
    4
}

fn default_cache_capacity() -> usize {
    10_000
}

fn default_max_transcript_chars() -> usize {
    4_000
}

/// Default gate threshold: the condition must be fully met.
fn default_gate_threshold() -> f64 {
    1.0
}
