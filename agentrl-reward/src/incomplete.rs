//! Penalty for episodes that did not reach a terminal state.

use agentrl_core::{Outcome, Result, RewardBreakdown, RewardFn, Trajectory};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::build::{BuildReward, RewardContext, finite, invalid};

/// `penalty` when the episode did not end as [`Outcome::Completed`] (truncated, invalid
/// action, env error, cancelled), else 0.
///
/// In a config: `{ type = "incomplete_punishment", penalty = -0.2 }` (optional, <= 0).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IncompletePunishment {
    /// Value added to an incomplete episode's reward (normally negative).
    pub penalty: f64,
}

impl IncompletePunishment {
    /// Name of the reward's part in breakdowns.
    pub const NAME: &'static str = "incomplete_punishment";
}

impl Default for IncompletePunishment {
    /// A penalty of -0.2.
    fn default() -> Self {
        IncompletePunishment { penalty: -0.2 }
    }
}

impl BuildReward for IncompletePunishment {
    fn build_at(&self, path: &str, _: &RewardContext) -> Result<Box<dyn RewardFn>> {
        let penalty = self.penalty;
        finite(path, "penalty", penalty)?;
        if penalty > 0.0 {
            return Err(invalid(format!(
                "{path}.penalty must be <= 0 (it is added to the reward), got {penalty}"
            )));
        }
        Ok(Box::new(*self))
    }

    fn part_names(&self) -> Vec<&'static str> {
        vec![Self::NAME]
    }
}

#[async_trait]
impl RewardFn for IncompletePunishment {
    fn name(&self) -> &str {
        Self::NAME
    }

    async fn score(&self, trajectory: &Trajectory) -> Result<RewardBreakdown> {
        let value = if trajectory.outcome == Outcome::Completed {
            0.0
        } else {
            self.penalty
        };
        Ok(RewardBreakdown::single(Self::NAME, value))
    }
}
