//! Penalty for episodes that did not reach a terminal state.

use agentrl_core::{Outcome, Result, RewardBreakdown, RewardFn, Trajectory};
use async_trait::async_trait;

/// `penalty` when the episode did not end as [`Outcome::Completed`] (truncated, invalid
/// action, env error, cancelled), else 0.
#[derive(Debug, Clone, Copy, PartialEq)]
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
