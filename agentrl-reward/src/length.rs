//! Penalty for generating more tokens than a budget.

use agentrl_core::{Result, RewardBreakdown, RewardFn, Trajectory};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::build::{BuildReward, RewardContext, non_negative};

/// `-(generated - max_generated_tokens) · per_token` when the policy generated more than
/// `max_generated_tokens` tokens over the episode, else 0.
///
/// In a config: `{ type = "length_penalty", max_generated_tokens = 256, per_token = 0.001 }`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LengthPenalty {
    /// Generated tokens allowed without penalty.
    pub max_generated_tokens: usize,
    /// Penalty per token beyond the budget (non-negative).
    pub per_token: f64,
}

impl LengthPenalty {
    /// Name of the reward's part in breakdowns.
    pub const NAME: &'static str = "length_penalty";

    /// The penalty for `generated` tokens (0 within the budget).
    pub fn penalty_for(&self, generated: usize) -> f64 {
        match generated.saturating_sub(self.max_generated_tokens) {
            0 => 0.0,
            excess => -(excess as f64) * self.per_token,
        }
    }
}

impl BuildReward for LengthPenalty {
    fn build_at(&self, path: &str, _: &RewardContext) -> Result<Box<dyn RewardFn>> {
        non_negative(path, "per_token", self.per_token)?;
        Ok(Box::new(*self))
    }

    fn part_names(&self) -> Vec<&'static str> {
        vec![Self::NAME]
    }
}

#[async_trait]
impl RewardFn for LengthPenalty {
    fn name(&self) -> &str {
        Self::NAME
    }

    async fn score(&self, trajectory: &Trajectory) -> Result<RewardBreakdown> {
        let value = self.penalty_for(trajectory.num_generated());
        Ok(RewardBreakdown::single(Self::NAME, value))
    }
}
