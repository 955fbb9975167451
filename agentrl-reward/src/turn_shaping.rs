//! Per-turn shaping: the discounted sum of the env's per-step rewards.

use agentrl_core::{Result, RewardBreakdown, RewardFn, Trajectory};
use async_trait::async_trait;

/// `Σ_t discount^t · turns[t].reward` over the policy turns, first turn undiscounted.
///
/// With `discount = 1` this is the plain episode return; smaller values favour rewards that
/// come early. Requires `0 <= discount <= 1`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TurnShaping {
    /// Per-turn discount factor in `[0, 1]`.
    pub discount: f64,
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

#[async_trait]
impl RewardFn for TurnShaping {
    fn name(&self) -> &str {
        Self::NAME
    }

    async fn score(&self, trajectory: &Trajectory) -> Result<RewardBreakdown> {
        Ok(RewardBreakdown::single(Self::NAME, self.value(trajectory)))
    }
}
