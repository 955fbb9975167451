//! The reward contract: a function scoring a whole trajectory, with a named breakdown.

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::{Error, Result, Trajectory};

/// A reward total and the named parts it was made of.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RewardBreakdown {
    /// The reward used for training.
    pub total: f64,
    /// Named components (e.g. `outcome`, `format`), for metrics.
    pub parts: BTreeMap<String, f64>,
}

impl RewardBreakdown {
    /// A breakdown with one named part equal to the total.
    pub fn single(name: impl Into<String>, value: f64) -> Self {
        let mut parts = BTreeMap::new();
        parts.insert(name.into(), value);
        RewardBreakdown {
            total: value,
            parts,
        }
    }
}

/// Scores a finished trajectory.
#[async_trait]
pub trait RewardFn: Send + Sync {
    /// Name used in breakdowns and metrics.
    fn name(&self) -> &str;

    /// Scores `trajectory`.
    async fn score(&self, trajectory: &Trajectory) -> Result<RewardBreakdown>;

    /// The reward's mutable state (e.g. a normaliser's running statistics) for a checkpoint, to
    /// be taken while nothing is being scored; `None` for a stateless reward (the default).
    fn state(&self) -> Option<serde_json::Value> {
        None
    }

    /// Restores what [`state`](RewardFn::state) returned (on a reward built from the same
    /// config), failing with an [`Error::Reward`] that names the reward and what does not fit.
    /// The default, for stateless rewards, accepts only `null`.
    fn restore_state(&self, state: &serde_json::Value) -> Result<()> {
        if state.is_null() {
            return Ok(());
        }
        Err(Error::Reward {
            name: self.name().to_string(),
            message: format!(
                "it has no state to restore, but was given {}",
                json_kind(state)
            ),
        })
    }
}

/// What kind of JSON value `value` is, with an article, for error messages.
fn json_kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Stateless;

    #[async_trait]
    impl RewardFn for Stateless {
        fn name(&self) -> &str {
            "stateless"
        }

        async fn score(&self, _: &Trajectory) -> Result<RewardBreakdown> {
            Ok(RewardBreakdown::single("stateless", 0.0))
        }
    }

    #[test]
    fn a_stateless_reward_has_no_state_and_accepts_only_null() {
        assert_eq!(Stateless.state(), None);
        Stateless.restore_state(&serde_json::Value::Null).unwrap();
        let err = Stateless
            .restore_state(&serde_json::json!({"count": 1}))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "reward `stateless`: it has no state to restore, but was given an object"
        );
    }
}
