//! Per-turn shaping: the discounted sum of the env's per-step rewards.

use agentrl_core::{Result, RewardBreakdown, RewardFn, Trajectory};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::build::{BuildReward, RewardContext, invalid};

/// `Σ_t discount^t · turns[t].reward` over the policy turns, first turn undiscounted.
///
/// With `discount = 1` this is the plain episode return; smaller values favour rewards that
/// come early. Requires `0 <= discount <= 1`.
///
/// In a config: `{ type = "turn_shaping", discount = 0.9 }` (optional, default 1).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnShaping {
    /// Per-turn discount factor in `[0, 1]`.
    #[serde(default = "undiscounted")]
    pub discount: f64,
}

/// The discount of a config that gives none: the plain episode return.
fn undiscounted() -> f64 {
    1.0
}

impl TurnShaping {
    /// Name of the reward's part in breakdowns.
    pub const NAME: &'static str = "turn_shaping";

    /// The discounted return of `trajectory`.
    pub fn value(&self, trajectory: &Trajectory) -> f64 {
        let mut weight = 1.0;
        let mut sum = 0.0;
        for turn in &trajectory.turns {
            sum += weight * turn.reward;
            weight *= self.discount;
        }
        sum
    }
}

impl BuildReward for TurnShaping {
    fn build_at(&self, path: &str, _: &RewardContext) -> Result<Box<dyn RewardFn>> {
        let discount = self.discount;
        if !(0.0..=1.0).contains(&discount) {
            return Err(invalid(format!(
                "{path}.discount must be in [0, 1], got {discount}"
            )));
        }
        Ok(Box::new(*self))
    }

    fn part_names(&self) -> Vec<&'static str> {
        vec![Self::NAME]
    }
}

#[async_trait]
impl RewardFn for TurnShaping {
    fn name(&self) -> &str {
        Self::NAME
    }

    async fn score(&self, trajectory: &Trajectory) -> Result<RewardBreakdown> {
        Ok(RewardBreakdown::single(Self::NAME, self.value(trajectory)))
    }
}
