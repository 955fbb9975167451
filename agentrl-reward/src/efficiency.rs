//! Reward for reaching a result with fewer turns, tokens or tool calls.

use agentrl_core::{Result, RewardBreakdown, RewardFn, Trajectory};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::build::{BuildReward, RewardContext, finite, invalid, non_negative};

/// What [`Efficiency`] counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EfficiencyMeasure {
    /// Policy turns.
    Turns,
    /// Tokens the policy generated.
    Tokens,
    /// Tool calls executed.
    ToolCalls,
}

impl EfficiencyMeasure {
    /// The count of this measure in `trajectory`.
    pub fn count(self, trajectory: &Trajectory) -> f64 {
        match self {
            EfficiencyMeasure::Turns => trajectory.turns.len() as f64,
            EfficiencyMeasure::Tokens => trajectory.num_generated() as f64,
            EfficiencyMeasure::ToolCalls => f64::from(trajectory.tool_calls),
        }
    }
}

/// 1.0 when the measured cost is at most `best`, 0.0 at `worst` or above, linear in between.
///
/// With `only_on_success`, unsolved trajectories get 0.0, so the reward prefers cheaper
/// solutions without paying the policy for giving up early. Requires `best < worst`.
///
/// In a config: `{ type = "efficiency", measure = "turns", best = 1, worst = 5 }`
/// (`only_on_success` optional, default true).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Efficiency {
    /// What is counted.
    pub measure: EfficiencyMeasure,
    /// Cost at or below which the reward is 1.
    pub best: f64,
    /// Cost at or above which the reward is 0.
    pub worst: f64,
    /// Give 0 to unsolved trajectories.
    #[serde(default = "only_on_success_by_default")]
    pub only_on_success: bool,
}

/// Unsolved trajectories get 0 unless the config says otherwise.
fn only_on_success_by_default() -> bool {
    true
}

impl Efficiency {
    /// Name of the reward's part in breakdowns.
    pub const NAME: &'static str = "efficiency";

    /// The value for a cost of `used`.
    pub fn value_for(&self, used: f64) -> f64 {
        if used <= self.best {
            1.0
        } else if used >= self.worst {
            0.0
        } else {
            (self.worst - used) / (self.worst - self.best)
        }
    }
}

impl BuildReward for Efficiency {
    fn build_at(&self, path: &str, _: &RewardContext) -> Result<Box<dyn RewardFn>> {
        let (best, worst) = (self.best, self.worst);
        non_negative(path, "best", best)?;
        finite(path, "worst", worst)?;
        if worst <= best {
            return Err(invalid(format!(
                "{path}.worst must be greater than {path}.best ({best}), got {worst}"
            )));
        }
        Ok(Box::new(*self))
    }

    fn part_names(&self) -> Vec<&'static str> {
        vec![Self::NAME]
    }
}

#[async_trait]
impl RewardFn for Efficiency {
    fn name(&self) -> &str {
        Self::NAME
    }

    async fn score(&self, trajectory: &Trajectory) -> Result<RewardBreakdown> {
        let value = if self.only_on_success && !trajectory.success {
            0.0
        } else {
            self.value_for(self.measure.count(trajectory))
        };
        Ok(RewardBreakdown::single(Self::NAME, value))
    }
}
