//! Reward functions described in configuration files (TOML, JSON, ...).
//!
//! A run's `[reward]` table is one [`RewardConfig`], tagged by `type`. The fields of each type
//! are a struct that lives in the same file as its reward and deserialises itself (defaults
//! filled in, unknown fields rejected): plain rewards are their own config ([`OutcomeReward`],
//! [`Efficiency`], ...); rewards holding live parts have a `…Config` beside them
//! ([`ExecutionConfig`], [`LlmJudgeConfig`], [`ToolFormatConfig`]); composers hold their inner
//! rewards as nested `RewardConfig`s ([`WeightedSumConfig`], [`GateConfig`], ...), so the table
//! is a tree. Each of them implements [`BuildReward`]; [`RewardConfig::build`] checks every
//! value and names the offending one by its path (`reward.terms[1].reward.min`).
//!
//! # Adding a reward
//!
//! 1. In the reward's own file, derive `Serialize` and `Deserialize` for the reward (or for a
//!    `…Config` struct beside it) with `#[serde(deny_unknown_fields)]` and its defaults, and
//!    implement [`BuildReward`] for it: check each value, naming it by `path`, then build.
//! 2. Add its line, e.g. `MyReward(MyReward),`, to the list in this file; the variant's name
//!    in snake_case is the `type` (`my_reward`).

use agentrl_core::{Result, RewardFn};
use serde::{Deserialize, Serialize};

use crate::build::{BuildReward, RewardContext};
use crate::clip::ClipConfig;
use crate::efficiency::Efficiency;
use crate::execution::ExecutionConfig;
use crate::format::FormatReward;
use crate::gate::GateConfig;
use crate::incomplete::IncompletePunishment;
use crate::judge::LlmJudgeConfig;
use crate::length::LengthPenalty;
use crate::length_budget::Length;
use crate::outcome::OutcomeReward;
use crate::running_norm::RunningNormConfig;
use crate::scale_offset::ScaleOffsetConfig;
use crate::score::ScoreReward;
use crate::tool_format::ToolFormatConfig;
use crate::turn_shaping::TurnShaping;
use crate::weighted::WeightedSumConfig;

/// Declares [`RewardConfig`] from its list of `Variant(Config)` lines, and the dispatch to
/// each config's [`BuildReward`], so that a new reward is one line of the list.
macro_rules! reward_configs {
    ($($(#[doc = $doc:literal])* $variant:ident($config:ty),)+) => {
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
        #[serde(tag = "type", rename_all = "snake_case")]
        pub enum RewardConfig {
            $($(#[doc = $doc])* $variant($config),)+
        }

        impl RewardConfig {
            /// The config of this variant, which checks and builds it.
            fn as_build(&self) -> &dyn BuildReward {
                match self {
                    $(RewardConfig::$variant(config) => config,)+
                }
            }
        }
    };
}

reward_configs! {
    /// [`OutcomeReward`]: `success` (default 1) when solved, else `failure` (default 0).
    Outcome(OutcomeReward),
    /// [`FormatReward`]: valid actions and a final answer; no fields.
    Format(FormatReward),
    /// [`IncompletePunishment`]: `penalty` (default -0.2, <= 0) for unfinished episodes.
    IncompletePunishment(IncompletePunishment),
    /// [`LengthPenalty`]: `per_token` (>= 0) beyond `max_generated_tokens`.
    LengthPenalty(LengthPenalty),
    /// [`WeightedSum`](crate::WeightedSum) of at least one term; terms must produce distinct
    /// parts.
    WeightedSum(WeightedSumConfig<RewardConfig>),
    /// [`ScoreReward`]: the env's graded score.
    Score(ScoreReward),
    /// [`Efficiency`]: 1 at `best` or less, 0 at `worst` or more.
    Efficiency(Efficiency),
    /// [`ToolFormat`](crate::ToolFormat): calls parse, name known tools, an answer is given.
    ToolFormat(ToolFormatConfig),
    /// [`Length`]: penalty past a budget of tokens or characters.
    Length(Length),
    /// [`Execution`](crate::Execution) of a command, directly or in the sandbox.
    Execution(ExecutionConfig),
    /// [`LlmJudge`](crate::LlmJudge); needs a judge backend from the [`RewardContext`] given
    /// to [`RewardConfig::build_with`].
    LlmJudge(LlmJudgeConfig),
    /// [`Gate`](crate::Gate): `reward` counts only when `condition` reaches `threshold`.
    Gate(GateConfig<RewardConfig>),
    /// [`Clip`](crate::Clip): the reward's total clamped into `[min, max]`.
    Clip(ClipConfig<RewardConfig>),
    /// [`ScaleOffset`](crate::ScaleOffset): `scale · total + offset`.
    ScaleOffset(ScaleOffsetConfig<RewardConfig>),
    /// [`TurnShaping`]: discounted sum of the env's per-turn rewards.
    TurnShaping(TurnShaping),
    /// [`RunningNorm`](crate::RunningNorm): the total normalised by running statistics
    /// (stateful: one state per built reward).
    RunningNorm(RunningNormConfig<RewardConfig>),
}

impl RewardConfig {
    /// Checks the values and builds the reward function; errors are
    /// [`Error::Config`](agentrl_core::Error::Config) naming the offending field (e.g.
    /// `reward.terms[1].weight`). An `llm_judge` needs [`RewardConfig::build_with`].
    pub fn build(&self) -> Result<Box<dyn RewardFn>> {
        self.build_with(&RewardContext::default())
    }

    /// Like [`RewardConfig::build`], with the backends in `context` (e.g. the judge model).
    pub fn build_with(&self, context: &RewardContext) -> Result<Box<dyn RewardFn>> {
        self.build_at("reward", context)
    }

    /// Whether the tree contains an `llm_judge` (and so needs a judge backend to build).
    pub fn needs_judge(&self) -> bool {
        self.as_build().needs_judge()
    }

    /// The keys of the parts this reward's breakdown will contain.
    pub fn part_names(&self) -> Vec<&'static str> {
        self.as_build().part_names()
    }
}

impl BuildReward for RewardConfig {
    fn build_at(&self, path: &str, context: &RewardContext) -> Result<Box<dyn RewardFn>> {
        self.as_build().build_at(path, context)
    }

    fn part_names(&self) -> Vec<&'static str> {
        self.as_build().part_names()
    }

    fn needs_judge(&self) -> bool {
        self.as_build().needs_judge()
    }
}
