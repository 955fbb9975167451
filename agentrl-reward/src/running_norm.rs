//! Running normalisation of a reward over everything it has scored.

use std::sync::Mutex;

use agentrl_core::{Error, Result, RewardBreakdown, RewardFn, Trajectory};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::build::{BuildReward, RewardContext, invalid};
use crate::state::{self, error, expect_object, json_kind};

/// Count, mean and sum of squared deviations (Welford), for [`RunningNorm`].
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RunningStats {
    /// Values seen.
    pub count: u64,
    /// Their mean.
    pub mean: f64,
    /// Sum of squared deviations from the mean.
    pub m2: f64,
}

impl RunningStats {
    /// Adds a value.
    pub fn push(&mut self, value: f64) {
        self.count += 1;
        let delta = value - self.mean;
        self.mean += delta / self.count as f64;
        self.m2 += delta * (value - self.mean);
    }

    /// Population standard deviation (0 with fewer than two values).
    pub fn std(&self) -> f64 {
        if self.count < 2 {
            0.0
        } else {
            (self.m2 / self.count as f64).sqrt()
        }
    }
}

/// `(reward.total − mean) / (std + eps)` with the mean and standard deviation of every total
/// this value has scored so far, the current one included; the parts are the reward's own.
///
/// **Stateful**: the statistics live behind a mutex inside this value and grow with every
/// call, so the same trajectory scores differently over time, and two built copies of one
/// config normalise independently. The first trajectory always scores 0. The statistics (and
/// the inner reward's state) travel with checkpoints through [`RewardFn::state`] and
/// [`RewardFn::restore_state`], exactly: `{"type": "running_norm", "count": 3, "mean": 0.5,
/// "m2": 1.25, "reward": null}`, `reward` holding the inner reward's state.
pub struct RunningNorm {
    /// The normalised reward.
    pub reward: Box<dyn RewardFn>,
    /// Added to the standard deviation to avoid dividing by zero (> 0).
    pub eps: f64,
    stats: Mutex<RunningStats>,
}

impl RunningNorm {
    /// Name of the composer.
    pub const NAME: &'static str = "running_norm";

    /// Normalises `reward` with a fresh state.
    pub fn new(reward: impl RewardFn + 'static, eps: f64) -> Self {
        Self::from_boxed(Box::new(reward), eps)
    }

    /// Normalises an already boxed reward with a fresh state.
    pub fn from_boxed(reward: Box<dyn RewardFn>, eps: f64) -> Self {
        RunningNorm {
            reward,
            eps,
            stats: Mutex::new(RunningStats::default()),
        }
    }

    /// A copy of the statistics so far.
    pub fn stats(&self) -> RunningStats {
        match self.stats.lock() {
            Ok(stats) => *stats,
            Err(poisoned) => *poisoned.into_inner(),
        }
    }

    /// Replaces the statistics (e.g. with those of a checkpoint).
    pub fn set_stats(&self, stats: RunningStats) {
        match self.stats.lock() {
            Ok(mut current) => *current = stats,
            Err(poisoned) => *poisoned.into_inner() = stats,
        }
    }
}

impl RunningStats {
    /// The statistics of a [`RunningNorm`] state object, checked: `count` a whole number,
    /// `mean` and `m2` finite, `m2 >= 0`, and both 0 for a count where they must be.
    fn from_state(state: &serde_json::Map<String, Value>) -> Result<RunningStats> {
        let name = RunningNorm::NAME;
        let field = |key: &str| state.get(key).unwrap_or(&Value::Null);
        let count = field("count");
        let Some(count) = count.as_u64() else {
            return Err(error(
                name,
                format!("count must be a whole number >= 0, got {count}"),
            ));
        };
        let number = |key: &str| {
            let value = field(key);
            match value.as_f64() {
                Some(number) if number.is_finite() => Ok(number),
                _ => Err(error(
                    name,
                    format!("{key} must be a finite number, got {}", shown(value)),
                )),
            }
        };
        let (mean, m2) = (number("mean")?, number("m2")?);
        if m2 < 0.0 {
            return Err(error(name, format!("m2 must be >= 0, got {m2}")));
        }
        // Welford's update leaves m2 at exactly 0 until the second value, and a fresh mean is 0.
        if count < 2 && m2 != 0.0 {
            return Err(error(
                name,
                format!("m2 must be 0 with a count of {count}, got {m2}"),
            ));
        }
        if count == 0 && mean != 0.0 {
            return Err(error(
                name,
                format!("mean must be 0 with a count of 0, got {mean}"),
            ));
        }
        Ok(RunningStats { count, mean, m2 })
    }
}

/// `value` for an error message: its JSON text when short, else its kind.
fn shown(value: &Value) -> String {
    let text = value.to_string();
    if text.len() <= 40 {
        text
    } else {
        json_kind(value).to_string()
    }
}

impl std::fmt::Debug for RunningNorm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningNorm")
            .field("reward", &self.reward.name())
            .field("eps", &self.eps)
            .field("stats", &self.stats())
            .finish()
    }
}

/// A `running_norm` as written in a config: `{ type = "running_norm", reward = { type =
/// "outcome" } }`, its reward any `R: BuildReward` (normally
/// [`RewardConfig`](crate::RewardConfig)). Every build starts with fresh statistics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunningNormConfig<R> {
    /// The normalised reward.
    pub reward: Box<R>,
    /// Added to the standard deviation (> 0, default 1e-6).
    #[serde(default = "default_eps")]
    pub eps: f64,
}

/// The `eps` of a config that gives none.
fn default_eps() -> f64 {
    1e-6
}

impl<R: BuildReward> BuildReward for RunningNormConfig<R> {
    fn build_at(&self, path: &str, context: &RewardContext) -> Result<Box<dyn RewardFn>> {
        let eps = self.eps;
        if !(eps > 0.0 && eps.is_finite()) {
            return Err(invalid(format!(
                "{path}.eps must be a positive finite number, got {eps}"
            )));
        }
        Ok(Box::new(RunningNorm::from_boxed(
            self.reward.build_at(&format!("{path}.reward"), context)?,
            eps,
        )))
    }

    fn part_names(&self) -> Vec<&'static str> {
        self.reward.part_names()
    }

    fn needs_judge(&self) -> bool {
        self.reward.needs_judge()
    }
}

#[async_trait]
impl RewardFn for RunningNorm {
    fn name(&self) -> &str {
        Self::NAME
    }

    async fn score(&self, trajectory: &Trajectory) -> Result<RewardBreakdown> {
        let mut inner = self.reward.score(trajectory).await?;
        if !inner.total.is_finite() {
            return Err(Error::Reward {
                name: Self::NAME.to_string(),
                message: format!(
                    "`{}` returned a non-finite total ({}); it is not added to the statistics",
                    self.reward.name(),
                    inner.total
                ),
            });
        }
        let (mean, std) = {
            // A panic while holding the lock cannot leave the stats half-updated in a way that
            // matters more than losing one sample, so a poisoned lock is used as is.
            let mut stats = match self.stats.lock() {
                Ok(stats) => stats,
                Err(poisoned) => poisoned.into_inner(),
            };
            stats.push(inner.total);
            (stats.mean, stats.std())
        };
        inner.total = (inner.total - mean) / (std + self.eps);
        Ok(inner)
    }

    /// `{"type": "running_norm", "count", "mean", "m2", "reward"}`: the statistics, exactly,
    /// and the inner reward's state (`null` when it has none).
    fn state(&self) -> Option<Value> {
        let stats = self.stats();
        Some(state::tagged(
            Self::NAME,
            vec![
                ("count", Value::from(stats.count)),
                ("mean", Value::from(stats.mean)),
                ("m2", Value::from(stats.m2)),
                ("reward", self.reward.state().unwrap_or(Value::Null)),
            ],
        ))
    }

    /// Checks the statistics, restores the inner reward, then the statistics; nothing changes
    /// when any of it does not fit.
    fn restore_state(&self, state: &Value) -> Result<()> {
        let object = expect_object(Self::NAME, state, &["count", "mean", "m2", "reward"])?;
        let stats = RunningStats::from_state(object)?;
        state::restore_child(
            Self::NAME,
            "reward",
            self.reward.as_ref(),
            object.get("reward"),
        )?;
        self.set_stats(stats);
        Ok(())
    }
}
