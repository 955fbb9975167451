//! # agentrl-reward
//!
//! Reward functions that score finished AgentRL [`Trajectory`](agentrl_core::Trajectory)s, and
//! composers that combine them, all buildable from a run's `[reward]` TOML tree through
//! [`RewardConfig`] or usable directly from Rust.
//!
//! - From the env: [`OutcomeReward`] (solved or not), [`ScoreReward`] (graded score),
//!   [`TurnShaping`] (discounted per-turn env rewards).
//! - Rules: [`FormatReward`], [`ToolFormat`] (calls parse, name real tools, an answer is given),
//!   [`Efficiency`] (fewer turns, tokens or tool calls), [`LengthPenalty`] and [`Length`]
//!   (budgets in tokens or characters), [`IncompletePunishment`].
//! - Execution: [`Execution`] over an [`ExecutionCheck`] such as [`CommandCheck`] or
//!   [`SandboxCheck`] (the checker runs in the bubblewrap sandbox of agentrl-tools).
//! - Models: [`LlmJudge`] over any [`JudgeBackend`], with robust [`parse_score`], a cache, a
//!   concurrency limit and a time-out with a counted fallback.
//! - Composers: [`WeightedSum`], [`Gate`], [`Clip`], [`ScaleOffset`], [`RunningNorm`].
//! - State: the stateful [`RunningNorm`] exports its running statistics through
//!   [`RewardFn::state`](agentrl_core::RewardFn::state) and takes them back through
//!   [`RewardFn::restore_state`](agentrl_core::RewardFn::restore_state), so they travel with
//!   checkpoints; every composer forwards to its children (a tree with no stateful reward has
//!   no state), and a state that does not fit the tree is an error naming where.
//! - Configs: [`RewardConfig`] is the `[reward]` tree, a tagged enum of each reward's own
//!   config (the reward itself, or a `…Config` beside it); every one checks its values and
//!   builds its reward through [`BuildReward`]. [`config`] says how to add a reward.
//!
//! Every function reports a breakdown whose parts are keyed by its name, so metrics can show
//! where reward came from.
//!
//! ```
//! use agentrl_core::{Split, Trajectory};
//! use agentrl_reward::{FormatReward, OutcomeReward, WeightedSum, apply};
//!
//! let mut t = Trajectory::new("arith", "t1", Split::Train, 0).with_success(true);
//! let reward = WeightedSum::new(vec![])
//!     .term(1.0, OutcomeReward::default())
//!     .term(0.1, FormatReward);
//! let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
//! rt.block_on(apply(&reward, &mut t)).unwrap();
//! assert_eq!(t.reward, 1.0);
//! assert_eq!(t.reward_parts["format"], 0.0); // no turns
//! ```

#![warn(missing_docs)]

pub mod apply;
pub mod build;
pub mod clip;
pub mod config;
pub mod efficiency;
pub mod execution;
pub mod format;
#[doc(hidden)]
pub mod fuzzing;
pub mod gate;
pub mod incomplete;
pub mod judge;
pub mod judge_backend;
pub mod length;
pub mod length_budget;
pub mod outcome;
pub mod running_norm;
pub mod scale_offset;
pub mod score;
mod state;
pub mod tool_format;
pub mod turn_shaping;
pub mod weighted;

pub use apply::apply;
pub use build::{BuildReward, RewardContext};
pub use clip::{Clip, ClipConfig};
pub use config::RewardConfig;
pub use efficiency::{Efficiency, EfficiencyMeasure};
pub use execution::{CommandCheck, Execution, ExecutionCheck, ExecutionConfig, SandboxCheck};
pub use format::FormatReward;
pub use gate::{Gate, GateConfig};
pub use incomplete::IncompletePunishment;
pub use judge::{JudgeBackend, JudgeSettings, LlmJudge, LlmJudgeConfig, ScoreScale, parse_score};
pub use length::LengthPenalty;
pub use length_budget::{Length, LengthUnit};
pub use outcome::OutcomeReward;
pub use running_norm::{RunningNorm, RunningNormConfig, RunningStats};
pub use scale_offset::{ScaleOffset, ScaleOffsetConfig};
pub use score::ScoreReward;
pub use tool_format::{ToolFormat, ToolFormatConfig};
pub use turn_shaping::TurnShaping;
pub use weighted::{WeightedSum, WeightedSumConfig, WeightedTermConfig};
