//! Clamping a reward's total into a range.

use agentrl_core::{Result, RewardBreakdown, RewardFn, Trajectory};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::build::{BuildReward, RewardContext, finite, invalid};
use crate::state;

/// `clamp(reward.total, min, max)`; the parts are the reward's own. Requires `min <= max`.
pub struct Clip {
    /// The clipped reward.
    pub reward: Box<dyn RewardFn>,
    /// Lower bound.
    pub min: f64,
    /// Upper bound.
    pub max: f64,
}

impl Clip {
    /// Name of the composer.
    pub const NAME: &'static str = "clip";

    /// `reward` clamped into `[min, max]`.
    pub fn new(reward: impl RewardFn + 'static, min: f64, max: f64) -> Self {
        Clip {
            reward: Box::new(reward),
            min,
            max,
        }
    }
}

impl std::fmt::Debug for Clip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Clip")
            .field("reward", &self.reward.name())
            .field("min", &self.min)
            .field("max", &self.max)
            .finish()
    }
}

/// A `clip` as written in a config: `{ type = "clip", min = -1.0, max = 1.0, reward = { type =
/// "outcome" } }`, its reward any `R: BuildReward` (normally
/// [`RewardConfig`](crate::RewardConfig)).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClipConfig<R> {
    /// The clipped reward.
    pub reward: Box<R>,
    /// Lower bound.
    pub min: f64,
    /// Upper bound (>= `min`).
    pub max: f64,
}

impl<R: BuildReward> BuildReward for ClipConfig<R> {
    fn build_at(&self, path: &str, context: &RewardContext) -> Result<Box<dyn RewardFn>> {
        let (min, max) = (self.min, self.max);
        finite(path, "min", min)?;
        finite(path, "max", max)?;
        if min > max {
            return Err(invalid(format!(
                "{path}.min ({min}) must not be greater than {path}.max ({max})"
            )));
        }
        Ok(Box::new(Clip {
            reward: self.reward.build_at(&format!("{path}.reward"), context)?,
            min,
            max,
        }))
    }

    fn part_names(&self) -> Vec<&'static str> {
        self.reward.part_names()
    }

    fn needs_judge(&self) -> bool {
        self.reward.needs_judge()
    }
}

#[async_trait]
impl RewardFn for Clip {
    fn name(&self) -> &str {
        Self::NAME
    }

    async fn score(&self, trajectory: &Trajectory) -> Result<RewardBreakdown> {
        let mut inner = self.reward.score(trajectory).await?;
        // Not f64::clamp: it panics when min > max, which a struct literal could build.
        inner.total = inner.total.max(self.min).min(self.max);
        Ok(inner)
    }

    /// `{"type": "clip", "reward": ...}` with the inner reward's state; `None` when it has none.
    fn state(&self) -> Option<Value> {
        state::composite(Self::NAME, vec![("reward", self.reward.state())])
    }

    /// Restores the inner reward.
    fn restore_state(&self, state: &Value) -> Result<()> {
        state::restore_wrapped(Self::NAME, self.reward.as_ref(), state)
    }
}
