//! Writing a reward into a trajectory.

use agentrl_core::{Error, Result, RewardFn, Trajectory};

/// Scores `trajectory` with `reward` and stores the total and the parts in it; fails (leaving
/// the trajectory untouched) when scoring fails or yields a non-finite value.
pub async fn apply(reward: &dyn RewardFn, trajectory: &mut Trajectory) -> Result<()> {
    let breakdown = reward.score(trajectory).await?;
    let not_finite = |what: String, value: f64| Error::Reward {
        name: reward.name().to_string(),
        message: format!("{what} is not a finite number ({value})"),
    };
    if !breakdown.total.is_finite() {
        return Err(not_finite("the total".to_string(), breakdown.total));
    }
    if let Some((key, &value)) = breakdown.parts.iter().find(|(_, v)| !v.is_finite()) {
        return Err(not_finite(format!("part `{key}`"), value));
    }
    trajectory.reward = breakdown.total;
    trajectory.reward_parts = breakdown.parts;
    Ok(())
}
