//! A reward that counts only when a condition holds (e.g. the outcome only with a clean format).

use agentrl_core::{Error, Result, RewardBreakdown, RewardFn, Trajectory};
use async_trait::async_trait;

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
}
