//! A reward that counts only when a condition holds (e.g. the outcome only with a clean format).

use agentrl_core::{Error, Result, RewardBreakdown, RewardFn, Trajectory};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::build::{BuildReward, RewardContext, finite, invalid};
use crate::state;

/// `reward.total` when `condition.total >= threshold`, else `otherwise`.
///
/// Both are always scored, so every trajectory's breakdown has the same keys: the reward's
/// parts plus `gate` (1.0 open, 0.0 closed). The condition's own parts are not copied, so the
/// condition may also appear as a separate term of a sum.
pub struct Gate {
    /// Decides whether the gate is open.
    pub condition: Box<dyn RewardFn>,
    /// The gated reward.
    pub reward: Box<dyn RewardFn>,
    /// The gate opens when the condition's total is at least this.
    pub threshold: f64,
    /// Total of a closed gate.
    pub otherwise: f64,
}

impl Gate {
    /// Name of the composer and of its open/closed part.
    pub const NAME: &'static str = "gate";

    /// `reward` gated by `condition >= threshold`, worth 0 when closed.
    pub fn new(
        condition: impl RewardFn + 'static,
        reward: impl RewardFn + 'static,
        threshold: f64,
    ) -> Self {
        Gate {
            condition: Box::new(condition),
            reward: Box::new(reward),
            threshold,
            otherwise: 0.0,
        }
    }

    /// Restores the condition and the reward from `state`, not all or nothing.
    fn restore_parts(&self, state: &Value) -> Result<()> {
        let object = if state.is_null() {
            None
        } else {
            Some(state::expect_object(
                Self::NAME,
                state,
                &["condition", "reward"],
            )?)
        };
        let child = |key: &str| object.and_then(|o| o.get(key));
        state::restore_child(
            Self::NAME,
            "condition",
            self.condition.as_ref(),
            child("condition"),
        )?;
        state::restore_child(Self::NAME, "reward", self.reward.as_ref(), child("reward"))
    }
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate")
            .field("condition", &self.condition.name())
            .field("reward", &self.reward.name())
            .field("threshold", &self.threshold)
            .field("otherwise", &self.otherwise)
            .finish()
    }
}

/// A `gate` as written in a config: `{ type = "gate", threshold = 1.0, condition = { type =
/// "format" }, reward = { type = "outcome" } }`, its rewards any `R: BuildReward` (normally
/// [`RewardConfig`](crate::RewardConfig)). The gated reward must not contain a gate itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateConfig<R> {
    /// Decides whether the gate is open.
    pub condition: Box<R>,
    /// The gated reward.
    pub reward: Box<R>,
    /// The gate opens when the condition's total is at least this (default 1, i.e. the
    /// condition fully met).
    #[serde(default = "condition_fully_met")]
    pub threshold: f64,
    /// Total of a closed gate (default 0).
    #[serde(default)]
    pub otherwise: f64,
}

/// Default gate threshold: the condition must be fully met.
fn condition_fully_met() -> f64 {
    1.0
}

impl<R: BuildReward> BuildReward for GateConfig<R> {
    fn build_at(&self, path: &str, context: &RewardContext) -> Result<Box<dyn RewardFn>> {
        finite(path, "threshold", self.threshold)?;
        finite(path, "otherwise", self.otherwise)?;
        if self.reward.part_names().contains(&Gate::NAME) {
            return Err(invalid(format!(
                "{path}.reward already produces the part `gate` (a gate inside a gate); \
                 gate the inner reward on a combined condition instead"
            )));
        }
        Ok(Box::new(Gate {
            condition: self
                .condition
                .build_at(&format!("{path}.condition"), context)?,
            reward: self.reward.build_at(&format!("{path}.reward"), context)?,
            threshold: self.threshold,
            otherwise: self.otherwise,
        }))
    }

    fn part_names(&self) -> Vec<&'static str> {
        let mut names = self.reward.part_names();
        names.push(Gate::NAME);
        names
    }

    fn needs_judge(&self) -> bool {
        self.condition.needs_judge() || self.reward.needs_judge()
    }
}

#[async_trait]
impl RewardFn for Gate {
    fn name(&self) -> &str {
        Self::NAME
    }

    async fn score(&self, trajectory: &Trajectory) -> Result<RewardBreakdown> {
        let condition = self.condition.score(trajectory).await?;
        let mut inner = self.reward.score(trajectory).await?;
        let open = condition.total >= self.threshold;
        if inner
            .parts
            .insert(Self::NAME.to_string(), if open { 1.0 } else { 0.0 })
            .is_some()
        {
            return Err(Error::Reward {
                name: Self::NAME.to_string(),
                message: format!(
                    "the gated reward `{}` already produces a part named `gate`",
                    self.reward.name()
                ),
            });
        }
        if !open {
            inner.total = self.otherwise;
        }
        Ok(inner)
    }

    /// `{"type": "gate", "condition": ..., "reward": ...}` (`null` for a stateless one); `None`
    /// when neither has state.
    fn state(&self) -> Option<Value> {
        state::composite(
            Self::NAME,
            vec![
                ("condition", self.condition.state()),
                ("reward", self.reward.state()),
            ],
        )
    }

    /// Restores the condition and the reward, all or nothing.
    fn restore_state(&self, state: &Value) -> Result<()> {
        state::all_or_nothing(self, |s| self.restore_parts(s), state)
    }
}
