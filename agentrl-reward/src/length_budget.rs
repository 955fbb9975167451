//! Penalty for long outputs past a budget, counted in generated tokens or in characters.

use agentrl_core::{Result, RewardBreakdown, RewardFn, Role, Trajectory};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::build::{BuildReward, RewardContext, non_negative};

/// What [`Length`] counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LengthUnit {
    /// Tokens the policy generated over the episode.
    Tokens,
    /// Characters the assistant wrote: message text plus tool names and arguments.
    Chars,
}

impl LengthUnit {
    /// The length of `trajectory` in this unit.
    pub fn measure(self, trajectory: &Trajectory) -> usize {
        match self {
            LengthUnit::Tokens => trajectory.num_generated(),
            LengthUnit::Chars => trajectory
                .messages
                .iter()
                .filter(|m| m.role == Role::Assistant)
                .map(|m| {
                    m.text().chars().count()
                        + m.tool_calls
                            .iter()
                            .map(|c| {
                                c.function.name.chars().count()
                                    + c.function.arguments.chars().count()
                            })
                            .sum::<usize>()
                })
                .sum(),
        }
    }
}

/// `-(length - budget) · per_unit` when the episode is longer than `budget`, else 0.
///
/// In a config: `{ type = "length", unit = "chars", budget = 400, per_unit = 0.001 }`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Length {
    /// What is counted.
    pub unit: LengthUnit,
    /// Length allowed without penalty.
    pub budget: usize,
    /// Penalty per unit beyond the budget (non-negative).
    pub per_unit: f64,
}

impl Length {
    /// Name of the reward's part in breakdowns.
    pub const NAME: &'static str = "length";

    /// The penalty for a length of `length` (0 within the budget).
    pub fn penalty_for(&self, length: usize) -> f64 {
        match length.saturating_sub(self.budget) {
            0 => 0.0,
            excess => -(excess as f64) * self.per_unit,
        }
    }
}

impl BuildReward for Length {
    fn build_at(&self, path: &str, _: &RewardContext) -> Result<Box<dyn RewardFn>> {
        non_negative(path, "per_unit", self.per_unit)?;
        Ok(Box::new(*self))
    }

    fn part_names(&self) -> Vec<&'static str> {
        vec![Self::NAME]
    }
}

#[async_trait]
impl RewardFn for Length {
    fn name(&self) -> &str {
        Self::NAME
    }

    async fn score(&self, trajectory: &Trajectory) -> Result<RewardBreakdown> {
        let value = self.penalty_for(self.unit.measure(trajectory));
        Ok(RewardBreakdown::single(Self::NAME, value))
    }
}
