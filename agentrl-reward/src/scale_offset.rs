//! An affine map of a reward's total.

use agentrl_core::{Result, RewardBreakdown, RewardFn, Trajectory};
use async_trait::async_trait;

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
}
