//! Reward from the env's graded score (e.g. a product-match score or the share of tests passing).

use agentrl_core::{Error, Result, RewardBreakdown, RewardFn, Trajectory};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::build::{BuildReward, RewardContext, finite};

/// The env's graded score (`trajectory.score`).
///
/// When the env gave no score, `missing` is used; when `missing` is `None`, the outcome stands
/// in for it (1.0 when solved, 0.0 otherwise). A non-finite score is an error.
///
/// In a config: `{ type = "score", missing = 0.0 }` (`missing` optional, finite).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScoreReward {
    /// Value for trajectories without a score (`None`: 1.0 if solved, else 0.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing: Option<f64>,
}

impl ScoreReward {
    /// Name of the reward's part in breakdowns.
    pub const NAME: &'static str = "score";

    /// The value for `trajectory` (see the type's documentation).
    pub fn value(&self, trajectory: &Trajectory) -> Result<f64> {
        match trajectory.score {
            Some(score) if score.is_finite() => Ok(score),
            Some(score) => Err(Error::Reward {
                name: Self::NAME.to_string(),
                message: format!(
                    "task `{}` has a non-finite env score ({score})",
                    trajectory.task_id
                ),
            }),
            None => Ok(self
                .missing
                .unwrap_or(if trajectory.success { 1.0 } else { 0.0 })),
        }
    }
}

impl BuildReward for ScoreReward {
    fn build_at(&self, path: &str, _: &RewardContext) -> Result<Box<dyn RewardFn>> {
        if let Some(missing) = self.missing {
            finite(path, "missing", missing)?;
        }
        Ok(Box::new(*self))
    }

    fn part_names(&self) -> Vec<&'static str> {
        vec![Self::NAME]
    }
}

#[async_trait]
impl RewardFn for ScoreReward {
    fn name(&self) -> &str {
        Self::NAME
    }

    async fn score(&self, trajectory: &Trajectory) -> Result<RewardBreakdown> {
        Ok(RewardBreakdown::single(Self::NAME, self.value(trajectory)?))
    }
}
