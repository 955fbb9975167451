//! Reward for well-formed behaviour: valid actions and a final answer.

use agentrl_core::{Result, RewardBreakdown, RewardFn, Trajectory};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::build::{BuildReward, RewardContext};

/// Rewards trajectories whose actions the env accepted and that end with an answer.
///
/// With `n` turns of which `v` were valid actions (`turn.invalid_action.is_none()`):
///
/// - `1.0` when `v == n > 0` and [`Trajectory::final_answer`] is non-blank;
/// - `0.5 · v / n` otherwise (so a missing answer or any invalid action caps it at 0.5);
/// - `0.0` when there are no turns.
///
/// In a config: `{ type = "format" }`, without fields.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "NoFields", into = "NoFields")]
pub struct FormatReward;

/// The (empty) table of a `format` reward, which rejects every field.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct NoFields {}

impl From<NoFields> for FormatReward {
    fn from(_: NoFields) -> Self {
        FormatReward
    }
}

impl From<FormatReward> for NoFields {
    fn from(_: FormatReward) -> Self {
        NoFields {}
    }
}

impl FormatReward {
    /// Name of the reward's part in breakdowns.
    pub const NAME: &'static str = "format";

    /// The format score of `trajectory` (see the type's documentation).
    pub fn value(trajectory: &Trajectory) -> f64 {
        let turns = trajectory.turns.len();
        if turns == 0 {
            return 0.0;
        }
        let valid = turns - trajectory.invalid_actions();
        let answered = trajectory
            .final_answer()
            .is_some_and(|answer| !answer.trim().is_empty());
        if valid == turns && answered {
            1.0
        } else {
            0.5 * valid as f64 / turns as f64
        }
    }
}

impl BuildReward for FormatReward {
    fn build_at(&self, _: &str, _: &RewardContext) -> Result<Box<dyn RewardFn>> {
        Ok(Box::new(*self))
    }

    fn part_names(&self) -> Vec<&'static str> {
        vec![Self::NAME]
    }
}

#[async_trait]
impl RewardFn for FormatReward {
    fn name(&self) -> &str {
        Self::NAME
    }

    async fn score(&self, trajectory: &Trajectory) -> Result<RewardBreakdown> {
        Ok(RewardBreakdown::single(Self::NAME, Self::value(trajectory)))
    }
}
