//! The reward contract: a function scoring a whole trajectory, with a named breakdown.

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::{Result, Trajectory};

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
}
