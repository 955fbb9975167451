//! An affine map of a reward's total.

use agentrl_core::{Result, RewardBreakdown, RewardFn, Trajectory};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::build::{BuildReward, RewardContext, finite};
use crate::state;

/// `scale · reward.total + offset`; the parts are the reward's own.
pub struct ScaleOffset {
    /// The transformed reward.
    pub reward: Box<dyn RewardFn>,
    /// Factor applied to the total.
    pub scale: f64,
    /// Added after scaling.
    pub offset: f64,
}

impl ScaleOffset {
    /// Name of the composer.
    pub const NAME: &'static str = "scale_offset";

    /// `scale · reward + offset`.
    pub fn new(reward: impl RewardFn + 'static, scale: f64, offset: f64) -> Self {
        ScaleOffset {
            reward: Box::new(reward),
            scale,
            offset,
        }
    }
}

impl std::fmt::Debug for ScaleOffset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScaleOffset")
            .field("reward", &self.reward.name())
            .field("scale", &self.scale)
            .field("offset", &self.offset)
            .finish()
    }
}

/// A `scale_offset` as written in a config: `{ type = "scale_offset", scale = 2.0, offset =
/// -1.0, reward = { type = "score" } }`, its reward any `R: BuildReward` (normally
/// [`RewardConfig`](crate::RewardConfig)).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScaleOffsetConfig<R> {
    /// The transformed reward.
    pub reward: Box<R>,
    /// Factor (default 1).
    #[serde(default = "unscaled")]
    pub scale: f64,
    /// Added after scaling (default 0).
    #[serde(default)]
    pub offset: f64,
}

/// The scale of a config that gives none.
fn unscaled() -> f64 {
    1.0
}

impl<R: BuildReward> BuildReward for ScaleOffsetConfig<R> {
    fn build_at(&self, path: &str, context: &RewardContext) -> Result<Box<dyn RewardFn>> {
        finite(path, "scale", self.scale)?;
        finite(path, "offset", self.offset)?;
        Ok(Box::new(ScaleOffset {
            reward: self.reward.build_at(&format!("{path}.reward"), context)?,
            scale: self.scale,
            offset: self.offset,
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
impl RewardFn for ScaleOffset {
    fn name(&self) -> &str {
        Self::NAME
    }

    async fn score(&self, trajectory: &Trajectory) -> Result<RewardBreakdown> {
        let mut inner = self.reward.score(trajectory).await?;
        inner.total = self.scale * inner.total + self.offset;
        Ok(inner)
    }

    /// `{"type": "scale_offset", "reward": ...}` with the inner reward's state; `None` when it has none.
    fn state(&self) -> Option<Value> {
        state::composite(Self::NAME, vec![("reward", self.reward.state())])
    }

    /// Restores the inner reward.
    fn restore_state(&self, state: &Value) -> Result<()> {
        state::restore_wrapped(Self::NAME, self.reward.as_ref(), state)
    }
}
