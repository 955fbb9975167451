//! Reward for solving the task.

use agentrl_core::{Result, RewardBreakdown, RewardFn, Trajectory};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::build::{BuildReward, RewardContext, finite};

/// `success` when the env judged the task solved (`trajectory.success`), else `failure`.
///
/// In a config: `{ type = "outcome", success = 1.0, failure = 0.0 }` (both optional, both
/// finite).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OutcomeReward {
    /// Reward of a solved task.
    pub success: f64,
    /// Reward of an unsolved task.
    pub failure: f64,
}

impl OutcomeReward {
    /// Name of the reward's part in breakdowns.
    pub const NAME: &'static str = "outcome";
}

impl Default for OutcomeReward {
    /// 1.0 for success, 0.0 for failure.
    fn default() -> Self {
        OutcomeReward {
            success: 1.0,
            failure: 0.0,
        }
    }
}

impl BuildReward for OutcomeReward {
    fn build_at(&self, path: &str, _: &RewardContext) -> Result<Box<dyn RewardFn>> {
        finite(path, "success", self.success)?;
        finite(path, "failure", self.failure)?;
        Ok(Box::new(*self))
    }

    fn part_names(&self) -> Vec<&'static str> {
        vec![Self::NAME]
    }
}

#[async_trait]
impl RewardFn for OutcomeReward {
    fn name(&self) -> &str {
        Self::NAME
    }

    async fn score(&self, trajectory: &Trajectory) -> Result<RewardBreakdown> {
        let value = if trajectory.success {
            self.success
        } else {
            self.failure
        };
        Ok(RewardBreakdown::single(Self::NAME, value))
    }
}
