//! # agentrl-reward
//!
//! Reward functions that score finished AgentRL [`Trajectory`](agentrl_core::Trajectory)s:
//! task outcome, action format, incompleteness and length penalties, and a [`WeightedSum`]
//! composer, all buildable from a config file through [`RewardConfig`]. Every function reports
//! a breakdown whose parts are keyed by its name, so metrics can show where reward came from.
//!
//! ```
//! use agentrl_core::{Outcome, Split, Trajectory};
//! use agentrl_reward::{FormatReward, OutcomeReward, WeightedSum, apply};
//!
//! let mut t = Trajectory {
//!     env_id: "arith".into(), task_id: "t1".into(), split: Split::Train, group_id: 0,
//!     messages: vec![], turns: vec![], outcome: Outcome::Completed, success: true,
//!     score: None, tool_calls: 0, tool_errors: 0, reward: 0.0, reward_parts: Default::default(),
//! };
//! let reward = WeightedSum::new(vec![])
//!     .term(1.0, OutcomeReward::default())
//!     .term(0.1, FormatReward);
//! let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
//! rt.block_on(apply(&reward, &mut t)).unwrap();
//! assert_eq!(t.reward, 1.0);
//! assert_eq!(t.reward_parts["format"], 0.0); // no turns
//! ```

pub mod apply;
pub mod config;
pub mod format;
pub mod incomplete;
pub mod length;
pub mod outcome;
pub mod weighted;

pub use apply::apply;
pub use config::{RewardConfig, WeightedTermConfig};
pub use format::FormatReward;
pub use incomplete::IncompletePunishment;
pub use length::LengthPenalty;
pub use outcome::OutcomeReward;
pub use weighted::WeightedSum;
